"""``fused.Clip``: ``y = min(max(x, min), max)`` with constant scalar bounds ``min <= max``.

The bounds are attributes read from the source constants. One input, one output of the input's shape
and dtype (floating point).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ... import dtypes as D
from ...ir.attrs import FLOAT
from ...ir.opdef import FollowType, InferContext, OpDef

__all__ = ["clip", "definition"]

_FLOATS = (D.FLOAT16, D.BFLOAT16, D.FLOAT32, D.FLOAT64)


def clip(x: np.ndarray, lo: float, hi: float) -> np.ndarray:
    """``x`` clipped to ``[lo, hi]`` in ``x``'s dtype (NaN stays NaN)."""
    x = np.asarray(x)
    return np.minimum(np.maximum(x, x.dtype.type(lo)), x.dtype.type(hi))


def _reference(inputs: list[np.ndarray], attrs: dict[str, Any]) -> list[np.ndarray]:
    return [clip(inputs[0], float(attrs["min"]), float(attrs["max"]))]


def _infer_shape(ctx: InferContext) -> None:
    lo, hi = ctx.attr("min"), ctx.attr("max")
    if lo > hi:
        raise ValueError(f"min {lo} exceeds max {hi}")
    ctx.set_output_shape(0, ctx.input(0).shape)


def definition() -> OpDef:
    return (
        OpDef("Clip", "fused", doc=__doc__ or "")
        .input("x", dtypes=_FLOATS)
        .output("y", follow=("x", FollowType.ALL))
        .attr("min", FLOAT)
        .attr("max", FLOAT)
        .set_infer_shape(_infer_shape)
        .set_reference(_reference)
    )
