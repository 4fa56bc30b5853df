"""``fused.Gelu``: the Gaussian error linear unit, exact or with the tanh approximation.

``approximate="none"``: ``y = 0.5 * x * (1 + erf(x / sqrt(2)))``;
``approximate="tanh"``: ``y = 0.5 * x * (1 + tanh(sqrt(2 / pi) * (x + 0.044715 * x^3)))``.
One input, one output of the input's shape and dtype (floating point).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ... import dtypes as D
from ...ir.attrs import STR
from ...ir.opdef import FollowType, InferContext, OpDef

__all__ = ["APPROXIMATIONS", "definition", "gelu"]

APPROXIMATIONS = ("none", "tanh")
_FLOATS = (D.FLOAT16, D.BFLOAT16, D.FLOAT32, D.FLOAT64)
_ERF = np.frompyfunc(math.erf, 1, 1)


def gelu(x: np.ndarray, approximate: str = "none") -> np.ndarray:
    """GELU of ``x`` computed in float64, returned in ``x``'s dtype."""
    x = np.asarray(x)
    t = x.astype(np.float64)
    if approximate == "none":
        cdf = 0.5 * (1.0 + np.asarray(_ERF(t / math.sqrt(2.0)), dtype=np.float64))
    elif approximate == "tanh":
        cdf = 0.5 * (1.0 + np.tanh(math.sqrt(2.0 / math.pi) * (t + 0.044715 * t**3)))
    else:
        raise ValueError(f"Gelu approximate={approximate!r}; expected one of {APPROXIMATIONS}")
    return (t * cdf).astype(x.dtype)


def _reference(inputs: list[np.ndarray], attrs: dict[str, Any]) -> list[np.ndarray]:
    return [gelu(inputs[0], attrs.get("approximate", "none"))]


def _check_approximate(ctx: InferContext) -> None:
    value = ctx.attr("approximate")
    if value not in APPROXIMATIONS:
        raise ValueError(f"approximate is {value!r}, expected one of {APPROXIMATIONS}")
    ctx.set_output_shape(0, ctx.input(0).shape)


def definition() -> OpDef:
    return (
        OpDef("Gelu", "fused", doc=__doc__ or "")
        .input("x", dtypes=_FLOATS)
        .output("y", follow=("x", FollowType.ALL))
        .attr("approximate", STR, default="none")
        .set_infer_shape(_check_approximate)
        .set_reference(_reference)
    )
