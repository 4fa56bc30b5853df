"""Element-wise ONNX ops written as compositions for the dtypes onnxruntime's CPU provider has no kernel for.

The ONNX standard defines these ops on float16, float and double alike, but onnxruntime runs ``Tan``,
``Asin``, ``Acos``, ``Atan``, ``Sinh``, ``Cosh``, ``Asinh``, ``Acosh``, ``Atanh``, ``Erf``, ``Elu``,
``Selu``, ``Softplus`` and ``Softsign`` on float only, and ``IsInf`` not on float16. For those dtypes the
export writes the op from ops onnxruntime does run, in the same dtype:

* ``Tan = Sin / Cos``; ``Sinh`` / ``Cosh`` = ``(eˣ ∓ e⁻ˣ) / 2``;
* ``Atan``: :func:`~scopefusion.serde.onnx_lowering.compositions.atan` (a series exact to a few ulps);
  ``Asin(x) = Atan(x / √((1 - x)(1 + x)))``; ``Acos(x) = 2 Atan(√((1 - x) / (1 + x)))`` (NaN outside
  [-1, 1], ``±π/2`` and ``0`` / ``π`` at the ends, as TensorFlow);
* ``Asinh(x) = ±log(|x| + √(x² + 1))``, ``Acosh(x) = log(x + √(x² - 1))`` (``log(|x|) + log 2`` once
  ``x²`` would overflow); ``Atanh(x) = log((1 + x) / (1 - x)) / 2``;
* ``Elu`` / ``Selu`` through ``Exp``; ``Softplus(x) = max(x, 0) + log(1 + e^(-|x|))``;
  ``Softsign(x) = x / (1 + |x|)``;
* ``Erf`` in float64 is computed in float32 (relative error ≤ 1.2e-7): no exact composition is short;
* ``IsInf`` in float16 is ``|x| = inf``.
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np

from ...dtypes import DType
from .compositions import atan
from .emitter import LoweringEmitter

__all__ = ["composed", "unary", "unary_value"]

_ONNX_FLOAT, _ONNX_DOUBLE = 1, 11  # TensorProto.FLOAT, TensorProto.DOUBLE
_LARGE = 2.0**28  # past it x² ± 1 = x² in float64: log(|x| + √(x² ± 1)) = log(|x|) + log 2


def unary(e: LoweringEmitter, onnx_op: str, x: str, **attrs: Any) -> tuple[str, list[str], dict[str, Any]]:
    """The last node (op type, inputs, attributes) of unary ``onnx_op`` on ``x``: the op itself, or, where
    onnxruntime has no kernel for ``x``'s dtype, a composition whose earlier nodes are written here."""
    dtype = e.dtype(0).numpy
    composed = _COMPOSED.get(dtype.str[1:], {}).get(onnx_op)
    if composed is None:
        return onnx_op, [x], attrs
    return composed(e, x, dtype, attrs)


def composed(onnx_op: str, dtype: DType) -> bool:
    """True when :func:`unary` writes ``onnx_op`` on an input of ``dtype`` as a composition (not the op itself)."""
    key = (onnx_op, dtype)
    found = _IS_COMPOSED.get(key)
    if found is None:
        found = _IS_COMPOSED[key] = onnx_op in _COMPOSED.get(dtype.numpy.str[1:], {})
    return found


def unary_value(e: LoweringEmitter, onnx_op: str, x: str, **attrs: Any) -> str:
    """Unary ``onnx_op`` on ``x`` as one tensor (see :func:`unary`)."""
    op_type, inputs, found = unary(e, onnx_op, x, **attrs)
    return e.op(op_type, inputs, **found)[0]


_Last = tuple[str, list[str], dict[str, Any]]


def _c(e: LoweringEmitter, value: float, dtype: np.dtype) -> str:
    return e.typed_scalar(value, dtype, "c")


def _tan(e: LoweringEmitter, x: str, dtype: np.dtype, attrs: dict[str, Any]) -> _Last:
    return "Div", [e.op("Sin", [x])[0], e.op("Cos", [x])[0]], {}


def _exponentials(e: LoweringEmitter, x: str) -> tuple[str, str]:
    return e.op("Exp", [x])[0], e.op("Exp", [e.op("Neg", [x])[0]])[0]


def _sinh(e: LoweringEmitter, x: str, dtype: np.dtype, attrs: dict[str, Any]) -> _Last:
    up, down = _exponentials(e, x)
    return "Mul", [e.op("Sub", [up, down])[0], _c(e, 0.5, dtype)], {}


def _cosh(e: LoweringEmitter, x: str, dtype: np.dtype, attrs: dict[str, Any]) -> _Last:
    up, down = _exponentials(e, x)
    return "Mul", [e.op("Add", [up, down])[0], _c(e, 0.5, dtype)], {}


def _atan(e: LoweringEmitter, x: str, dtype: np.dtype, attrs: dict[str, Any]) -> _Last:
    return "Identity", [atan(e, x, e.dtype(0))], {}


def _asin(e: LoweringEmitter, x: str, dtype: np.dtype, attrs: dict[str, Any]) -> _Last:
    one = _c(e, 1, dtype)
    cosine = e.op("Sqrt", [e.op("Mul", [e.op("Sub", [one, x])[0], e.op("Add", [one, x])[0]])[0]])[0]
    return "Identity", [atan(e, e.op("Div", [x, cosine])[0], e.dtype(0))], {}


def _acos(e: LoweringEmitter, x: str, dtype: np.dtype, attrs: dict[str, Any]) -> _Last:
    one = _c(e, 1, dtype)
    half = e.op("Sqrt", [e.op("Div", [e.op("Sub", [one, x])[0], e.op("Add", [one, x])[0]])[0]])[0]
    return "Mul", [atan(e, half, e.dtype(0)), _c(e, 2, dtype)], {}


def _log_hypot(e: LoweringEmitter, a: str, dtype: np.dtype, sign: float) -> str:
    """``log(a + √(a² + sign))``, as ``log(a) + log 2`` where ``a²`` would swamp (or overflow)."""
    root = e.op("Sqrt", [e.op("Add", [e.op("Mul", [a, a])[0], _c(e, sign, dtype)])[0]])[0]
    near = e.op("Log", [e.op("Add", [a, root])[0]])[0]
    far = e.op("Add", [e.op("Log", [a])[0], _c(e, float(np.log(2.0)), dtype)])[0]
    return e.op("Where", [e.op("Greater", [a, _c(e, _LARGE, dtype)])[0], far, near])[0]


def _asinh(e: LoweringEmitter, x: str, dtype: np.dtype, attrs: dict[str, Any]) -> _Last:
    magnitude = _log_hypot(e, e.op("Abs", [x])[0], dtype, 1.0)
    negative = e.op("Less", [x, _c(e, 0, dtype)])[0]
    return "Where", [negative, e.op("Neg", [magnitude])[0], magnitude], {}


def _acosh(e: LoweringEmitter, x: str, dtype: np.dtype, attrs: dict[str, Any]) -> _Last:
    return "Identity", [_log_hypot(e, x, dtype, -1.0)], {}


def _atanh(e: LoweringEmitter, x: str, dtype: np.dtype, attrs: dict[str, Any]) -> _Last:
    one = _c(e, 1, dtype)
    ratio = e.op("Div", [e.op("Add", [one, x])[0], e.op("Sub", [one, x])[0]])[0]
    return "Mul", [e.op("Log", [ratio])[0], _c(e, 0.5, dtype)], {}


def _negative_part(e: LoweringEmitter, x: str, dtype: np.dtype, alpha: float) -> str:
    """``alpha · (eˣ - 1)`` where ``x ≤ 0``, else ``x``."""
    exponential = e.op("Mul", [e.op("Sub", [e.op("Exp", [x])[0], _c(e, 1, dtype)])[0], _c(e, alpha, dtype)])[0]
    return e.op("Where", [e.op("Greater", [x, _c(e, 0, dtype)])[0], x, exponential])[0]


def _elu(e: LoweringEmitter, x: str, dtype: np.dtype, attrs: dict[str, Any]) -> _Last:
    return "Identity", [_negative_part(e, x, dtype, float(attrs.get("alpha", 1.0)))], {}


def _selu(e: LoweringEmitter, x: str, dtype: np.dtype, attrs: dict[str, Any]) -> _Last:
    inner = _negative_part(e, x, dtype, float(attrs["alpha"]))
    return "Mul", [inner, _c(e, float(attrs["gamma"]), dtype)], {}


def _softplus(e: LoweringEmitter, x: str, dtype: np.dtype, attrs: dict[str, Any]) -> _Last:
    tail = e.op("Exp", [e.op("Neg", [e.op("Abs", [x])[0]])[0]])[0]
    log = e.op("Log", [e.op("Add", [_c(e, 1, dtype), tail])[0]])[0]
    return "Add", [e.op("Max", [x, _c(e, 0, dtype)])[0], log], {}


def _softsign(e: LoweringEmitter, x: str, dtype: np.dtype, attrs: dict[str, Any]) -> _Last:
    return "Div", [x, e.op("Add", [_c(e, 1, dtype), e.op("Abs", [x])[0]])[0]], {}


def _erf(e: LoweringEmitter, x: str, dtype: np.dtype, attrs: dict[str, Any]) -> _Last:
    narrow = e.op("Cast", [x], to=_ONNX_FLOAT)[0]
    return "Cast", [e.op("Erf", [narrow])[0]], {"to": _ONNX_DOUBLE}


def _is_inf(e: LoweringEmitter, x: str, dtype: np.dtype, attrs: dict[str, Any]) -> _Last:
    return "Equal", [e.op("Abs", [x])[0], _c(e, np.inf, dtype)], {}


_Composition = Callable[[LoweringEmitter, str, np.dtype, dict[str, Any]], _Last]

# composed()'s answers by (op, dtype), once per process (a DType is one object per dtype).
_IS_COMPOSED: dict[tuple[str, DType], bool] = {}

_COMPOSED: dict[str, dict[str, _Composition]] = {
    "f8": {
        "Tan": _tan, "Asin": _asin, "Acos": _acos, "Atan": _atan, "Sinh": _sinh, "Cosh": _cosh,
        "Asinh": _asinh, "Acosh": _acosh, "Atanh": _atanh, "Erf": _erf, "Elu": _elu, "Selu": _selu,
        "Softplus": _softplus, "Softsign": _softsign,
    },
    "f2": {"IsInf": _is_inf},
}  # fmt: skip
