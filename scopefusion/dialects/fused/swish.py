"""``fused.Swish``: ``y = x * sigmoid(scale * x)`` (SiLU when ``scale`` is 1).

``scale`` is TensorFlow's ``beta`` of ``tf.nn.silu`` (GE's Swish calls it ``scale``). One input, one
output of the input's shape and dtype (floating point).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ... import dtypes as D
from ...ir.attrs import FLOAT
from ...ir.opdef import FollowType, OpDef

__all__ = ["definition", "swish"]

_FLOATS = (D.FLOAT16, D.BFLOAT16, D.FLOAT32, D.FLOAT64)


def swish(x: np.ndarray, scale: float = 1.0) -> np.ndarray:
    """Swish of ``x`` computed in float64, returned in ``x``'s dtype."""
    x = np.asarray(x)
    t = x.astype(np.float64)
    return (t / (1.0 + np.exp(-scale * t))).astype(x.dtype)


def _reference(inputs: list[np.ndarray], attrs: dict[str, Any]) -> list[np.ndarray]:
    return [swish(inputs[0], float(attrs.get("scale", 1.0)))]


def definition() -> OpDef:
    return (
        OpDef("Swish", "fused", doc=__doc__ or "")
        .input("x", dtypes=_FLOATS)
        .output("y", follow=("x", FollowType.ALL))
        .attr("scale", FLOAT, default=1.0)
        .set_reference(_reference)
    )
