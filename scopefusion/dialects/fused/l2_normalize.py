"""``fused.L2Normalize``: scaling to unit L2 norm along some axes (GE's ``L2Normalize``).

    y = x / sqrt(max(sum(x * x, axis), epsilon))

as ``tf.math.l2_normalize`` computes it: ``epsilon`` bounds the *squared* norm from below. PyTorch's
``F.normalize`` bounds the norm itself, ``x / max(||x||, eps)``, which is the same function with
``epsilon = eps ** 2`` (the rule converts). ``axis`` lists the reduced axes (negative ones count from
the end).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ...ir.attrs import FLOAT, LIST_INT
from ...ir.opdef import FollowType, InferContext, OpDef
from .layer_norm import FLOATS, reduce_axes

__all__ = ["definition", "l2_normalize"]


def l2_normalize(x: np.ndarray, axis: tuple[int, ...], epsilon: float) -> np.ndarray:
    """The normalization in float64, cast back to ``x``'s dtype."""
    wide = x.astype(np.float64)
    square_sum = np.sum(wide * wide, axis=reduce_axes(axis, x.ndim, "axis"), keepdims=True)
    return (wide / np.sqrt(np.maximum(square_sum, epsilon))).astype(x.dtype)


def definition() -> OpDef:
    op = (
        OpDef("L2Normalize", "fused", doc=__doc__.split("\n\n")[0])
        .input("x", dtypes=FLOATS)
        .output("y", follow=("x", FollowType.ALL))
        .attr("axis", LIST_INT, default=(-1,))
        .attr("epsilon", FLOAT, default=1e-12)
    )  # fmt: skip

    def shape(ctx: InferContext) -> None:
        x = ctx.param("x")
        axis = tuple(ctx.attr("axis"))
        if not axis:
            raise ValueError("axis is empty; list the axes to normalize over")
        if x.shape is not None:
            reduce_axes(axis, len(x.shape), "axis")
        ctx.set_output_shape(0, x.shape)
        ctx.set_output_format(0, x.format)

    def kernel(inputs: list[np.ndarray | None], attrs: dict[str, Any]) -> list[np.ndarray]:
        x = np.asarray(inputs[0])
        return [l2_normalize(x, tuple(attrs["axis"]), attrs["epsilon"])]

    return op.set_infer_shape(shape).set_reference(kernel)
