"""``fused.HardSwish``: ``y = x * relu6(x + 3) / 6`` (MobileNetV3's h-swish; ONNX ``HardSwish``).

One input, one output of the input's shape and dtype (floating point); no attributes.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ... import dtypes as D
from ...ir.opdef import FollowType, OpDef

__all__ = ["definition", "hard_swish"]

_FLOATS = (D.FLOAT16, D.BFLOAT16, D.FLOAT32, D.FLOAT64)


def hard_swish(x: np.ndarray) -> np.ndarray:
    """HardSwish of ``x`` computed in float64, returned in ``x``'s dtype."""
    x = np.asarray(x)
    t = x.astype(np.float64)
    return (t * np.clip(t + 3.0, 0.0, 6.0) / 6.0).astype(x.dtype)


def _reference(inputs: list[np.ndarray], attrs: dict[str, Any]) -> list[np.ndarray]:
    return [hard_swish(inputs[0])]


def definition() -> OpDef:
    return (
        OpDef("HardSwish", "fused", doc=__doc__ or "")
        .input("x", dtypes=_FLOATS)
        .output("y", follow=("x", FollowType.ALL))
        .set_reference(_reference)
    )
