"""``fused.LayerNorm``: layer normalization over the trailing axes (GE's ``LayerNorm``, output ``y`` only).

    y = (x - mean(x, axes)) / sqrt(var(x, axes) + epsilon) * gamma + beta,   axes = [begin_norm_axis, rank)

``begin_norm_axis`` may be negative (``-1``: the last axis), which keeps the op independent of the input's
rank. ``gamma`` and ``beta`` broadcast against ``x`` numpy-style, as in the source graphs ([D], or Keras's
[1, 1, D]); a layer norm without one of them is not fused (see the rule).

NOTE: GE's LayerNorm has three outputs (y, mean, variance). The rule refuses a layer norm whose mean or
variance is read outside it, so only ``y`` exists here.

This module also holds the pieces the other normalization ops share (:func:`params_shape_check`,
:data:`FLOATS`).
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from ... import dtypes as D
from ...ir.attrs import FLOAT, INT
from ...ir.opdef import FollowType, InferContext, OpDef

__all__ = ["FLOATS", "definition", "layer_norm", "params_shape_check", "reduce_axes"]

FLOATS = (D.FLOAT16, D.BFLOAT16, D.FLOAT32, D.FLOAT64)


def reduce_axes(axes: Sequence[int], rank: int, what: str) -> tuple[int, ...]:
    """``axes`` made non-negative for ``rank``; ValueError naming ``what`` when one is out of range."""
    out = []
    for axis in axes:
        if not -rank <= axis < rank:
            raise ValueError(f"{what} {axis} is out of range for an input of rank {rank}")
        out.append(axis % rank)
    return tuple(sorted(set(out)))


def params_shape_check(ctx: InferContext, x_shape: tuple[int, ...] | None, names: Sequence[str]) -> None:
    """Each named input (when present and its shape known) must broadcast into ``x``'s shape unchanged."""
    for i, spec in enumerate(ctx.opdef.inputs):
        if spec.name not in names or not ctx.has_input(i):
            continue
        shape = ctx.input(i).shape
        if shape is None or x_shape is None:
            continue
        if len(shape) > len(x_shape):
            raise ValueError(f"{spec.name} has rank {len(shape)}, more than x's {len(x_shape)}")
        for p, d in zip(reversed(shape), reversed(x_shape)):
            if p not in (1, -1) and d != -1 and p != d:
                raise ValueError(f"{spec.name} of shape {list(shape)} does not broadcast to x of shape {list(x_shape)}")


def layer_norm(x: np.ndarray, axes: tuple[int, ...], epsilon: float, gamma: Any, beta: Any) -> np.ndarray:
    """The normalization in float64, cast back to ``x``'s dtype."""
    wide = x.astype(np.float64)
    mean = wide.mean(axis=axes, keepdims=True)
    centered = wide - mean
    var = (centered * centered).mean(axis=axes, keepdims=True)
    y = centered / np.sqrt(var + epsilon)
    if gamma is not None:
        y = y * np.asarray(gamma, dtype=np.float64)
    if beta is not None:
        y = y + np.asarray(beta, dtype=np.float64)
    return y.astype(x.dtype)


def definition() -> OpDef:
    op = (
        OpDef("LayerNorm", "fused", doc=__doc__.split("\n\n")[0])
        .input("x", dtypes=FLOATS)
        .input("gamma", dtypes=FLOATS)
        .input("beta", dtypes=FLOATS)
        .output("y", follow=("x", FollowType.ALL))
        .attr("begin_norm_axis", INT, default=-1)
        .attr("epsilon", FLOAT, default=1e-12)
    )  # fmt: skip

    def shape(ctx: InferContext) -> None:
        x = ctx.param("x")
        if x.shape is not None:
            reduce_axes([ctx.attr("begin_norm_axis")], len(x.shape), "begin_norm_axis")
        params_shape_check(ctx, x.shape, ("gamma", "beta"))
        ctx.set_output_shape(0, x.shape)
        ctx.set_output_format(0, x.format)

    def kernel(inputs: list[np.ndarray | None], attrs: dict[str, Any]) -> list[np.ndarray]:
        x, gamma, beta = inputs
        x = np.asarray(x)
        begin = reduce_axes([attrs["begin_norm_axis"]], x.ndim, "begin_norm_axis")[0]
        return [layer_norm(x, tuple(range(begin, x.ndim)), attrs["epsilon"], gamma, beta)]

    return op.set_infer_shape(shape).set_reference(kernel)
