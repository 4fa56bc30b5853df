"""Element-wise ``tf`` ops: unary math and activations, broadcasting binary ops, comparisons, selects, casts.

Most are one ONNX op (``Relu`` → ``Relu``, ``AddV2`` → ``Add``, ``Less`` → ``Less``); the rest are exact
compositions:

* ``Rsqrt(x)`` → ``Reciprocal(Sqrt(x))``; ``Square(x)`` → ``Mul(x, x)``; ``Relu6(x)`` → ``Clip(x, 0, 6)``;
  ``Expm1`` / ``Log1p`` / ``Erfc`` through ``Exp`` / ``Log`` / ``Erf``; ``IsFinite`` → ``Not(IsNaN ∨ IsInf)``.
* Integer ``FloorDiv`` → ``Div`` (truncating) minus one where the remainder is nonzero and its sign differs
  from the divisor's; float ``FloorDiv`` → ``Floor(Div)``. ``FloorMod`` → ``Mod`` (divisor's sign) for
  integers, ``x - Floor(x / y) · y`` for floats; ``Mod`` / ``TruncateMod`` → ``Mod(fmod=1)`` (dividend's sign).
  Integer ``Div`` / ``TruncateDiv`` → ``Div`` (truncating, as TF).
* ``DivNoNan`` / ``MulNoNan`` / ``Xlogy`` / ``Xdivy`` → the plain form under ``Where(y == 0, 0, …)``.
* ``ClipByValue(x, lo, hi)`` → ``Max(Min(x, hi), lo)`` (TF broadcasts the bounds; ONNX ``Clip`` wants scalars).
* ``Select(c, x, y)`` with a vector ``c`` over rows → ``c`` unsqueezed to ``x``'s rank, then ``Where``.
"""

from __future__ import annotations

from typing import Callable

from . import missing_kernels
from .emitter import LoweringEmitter
from .registry import Lowering, PlainOp

__all__ = ["LOWERINGS"]

_SAME_UNARY = {
    "Abs": "Abs", "Neg": "Neg", "Sqrt": "Sqrt", "Reciprocal": "Reciprocal", "Inv": "Reciprocal", "Exp": "Exp",
    "Log": "Log", "Sigmoid": "Sigmoid", "Tanh": "Tanh", "Relu": "Relu", "Elu": "Elu", "Softplus": "Softplus",
    "Softsign": "Softsign", "Erf": "Erf", "Floor": "Floor", "Ceil": "Ceil", "Round": "Round", "Rint": "Round",
    "Sign": "Sign", "Sin": "Sin", "Cos": "Cos", "Tan": "Tan", "Asin": "Asin", "Acos": "Acos", "Atan": "Atan",
    "Sinh": "Sinh", "Cosh": "Cosh", "Asinh": "Asinh", "Acosh": "Acosh", "Atanh": "Atanh", "IsNan": "IsNaN",
    "IsInf": "IsInf", "LogicalNot": "Not",
}  # fmt: skip

_SAME_BINARY = {
    "Add": "Add", "AddV2": "Add", "Sub": "Sub", "Mul": "Mul", "RealDiv": "Div", "Maximum": "Max",
    "Minimum": "Min", "Pow": "Pow", "Equal": "Equal", "Less": "Less", "LessEqual": "LessOrEqual",
    "Greater": "Greater", "GreaterEqual": "GreaterOrEqual", "LogicalAnd": "And", "LogicalOr": "Or",
}  # fmt: skip

_BITWISE = {"BitwiseAnd": "BitwiseAnd", "BitwiseOr": "BitwiseOr", "BitwiseXor": "BitwiseXor"}

_SELU_ALPHA, _SELU_SCALE = 1.6732632423543772848170429916717, 1.0507009873554804934193349852946


def _unary(onnx_op: str) -> Lowering:
    def lower(e: LoweringEmitter) -> None:
        op_type, inputs, attrs = missing_kernels.unary(e, onnx_op, e.input(0))
        e.result(op_type, inputs, **attrs)

    return PlainOp(onnx_op, 1, lower, composed=missing_kernels.composed)


def _binary(onnx_op: str, min_opset: int = 1) -> Lowering:
    def lower(e: LoweringEmitter) -> None:
        if e.opset < min_opset:
            e.decline(f"ONNX {onnx_op} needs opset {min_opset}")
        e.result(onnx_op, [e.input(0), e.input(1)])

    return PlainOp(onnx_op, 2, lower, min_opset)


def _one(e: LoweringEmitter, value: float, like: int = 0) -> str:
    return e.typed_scalar(value, e.dtype(like), "one" if value == 1 else "c")


def _rsqrt(e: LoweringEmitter) -> None:
    e.result("Reciprocal", [e.op("Sqrt", [e.input(0)])[0]])


def _square(e: LoweringEmitter) -> None:
    e.result("Mul", [e.input(0), e.input(0)])


def _relu6(e: LoweringEmitter) -> None:
    e.result("Clip", [e.input(0), _one(e, 0), _one(e, 6)])


def _selu(e: LoweringEmitter) -> None:
    op_type, inputs, attrs = missing_kernels.unary(e, "Selu", e.input(0), alpha=_SELU_ALPHA, gamma=_SELU_SCALE)
    e.result(op_type, inputs, **attrs)


def _leaky_relu(e: LoweringEmitter) -> None:
    e.result("LeakyRelu", [e.input(0)], alpha=float(e.attr("alpha", 0.2)))


def _expm1(e: LoweringEmitter) -> None:
    e.result("Sub", [e.op("Exp", [e.input(0)])[0], _one(e, 1)])


def _log1p(e: LoweringEmitter) -> None:
    e.result("Log", [e.op("Add", [e.input(0), _one(e, 1)])[0]])


def _erfc(e: LoweringEmitter) -> None:
    e.result("Sub", [_one(e, 1), missing_kernels.unary_value(e, "Erf", e.input(0))])


def _is_finite(e: LoweringEmitter) -> None:
    bad = e.op("Or", [e.op("IsNaN", [e.input(0)])[0], missing_kernels.unary_value(e, "IsInf", e.input(0))])[0]
    e.result("Not", [bad])


def _invert(e: LoweringEmitter) -> None:
    if e.opset < 18:
        e.decline("ONNX BitwiseNot needs opset 18")
    e.result("BitwiseNot", [e.input(0)])


def _fill_like(value: float) -> Lowering:
    def lower(e: LoweringEmitter) -> None:
        e.result("Expand", [_one(e, value), e.op("Shape", [e.input(0)])[0]])

    return lower


def _cast(e: LoweringEmitter) -> None:
    to = e.dtype_attr("DstT")
    e.result("Cast", [e.input(0)], to=e.onnx_type(to))


def _clip_by_value(e: LoweringEmitter) -> None:
    low = e.op("Min", [e.input(0), e.input(2)])[0]
    e.result("Max", [low, e.input(1)])


def _is_integer(e: LoweringEmitter, i: int = 0) -> bool:
    return e.dtype(i).numpy.kind in "iu"


def _div(e: LoweringEmitter) -> None:
    # TF Div on integers truncates, like ONNX Div on integers; on floats it is a true division.
    e.result("Div", [e.input(0), e.input(1)])


def _truncate_div(e: LoweringEmitter) -> None:
    if _is_integer(e):
        e.result("Div", [e.input(0), e.input(1)])
        return
    q = e.op("Div", [e.input(0), e.input(1)])[0]
    e.result("Mul", [e.op("Sign", [q])[0], e.op("Floor", [e.op("Abs", [q])[0]])[0]])


def _floor_div(e: LoweringEmitter) -> None:
    x, y = e.input(0), e.input(1)
    if not _is_integer(e):
        e.result("Floor", [e.op("Div", [x, y])[0]])
        return
    zero = _one(e, 0)
    q = e.op("Div", [x, y])[0]
    r = e.op("Mod", [x, y], fmod=1)[0]
    nonzero = e.op("Not", [e.op("Equal", [r, zero])[0]])[0]
    signs_differ = e.op("Xor", [e.op("Less", [r, zero])[0], e.op("Less", [y, zero])[0]])[0]
    adjust = e.op("Cast", [e.op("And", [nonzero, signs_differ])[0]], to=e.onnx_type(e.dtype(0)))[0]
    e.result("Sub", [q, adjust])


def _floor_mod(e: LoweringEmitter) -> None:
    x, y = e.input(0), e.input(1)
    if _is_integer(e):
        e.result("Mod", [x, y], fmod=0)
        return
    q = e.op("Floor", [e.op("Div", [x, y])[0]])[0]
    e.result("Sub", [x, e.op("Mul", [q, y])[0]])


def _trunc_mod(e: LoweringEmitter) -> None:
    e.result("Mod", [e.input(0), e.input(1)], fmod=1)


def _not_equal(e: LoweringEmitter) -> None:
    e.result("Not", [e.op("Equal", [e.input(0), e.input(1)])[0]])


def _squared_difference(e: LoweringEmitter) -> None:
    d = e.op("Sub", [e.input(0), e.input(1)])[0]
    e.result("Mul", [d, d])


def _where_zero(e: LoweringEmitter, test: int, value: str) -> None:
    """``Where(input[test] == 0, 0, value)`` into output 0 (zero of the output dtype)."""
    zero = e.typed_scalar(0, e.out_dtype(0), "zero")
    is_zero = e.op("Equal", [e.input(test), e.typed_scalar(0, e.dtype(test), "zero")])[0]
    e.result("Where", [is_zero, zero, value])


def _div_no_nan(e: LoweringEmitter) -> None:
    _where_zero(e, 1, e.op("Div", [e.input(0), e.input(1)])[0])


def _mul_no_nan(e: LoweringEmitter) -> None:
    _where_zero(e, 1, e.op("Mul", [e.input(0), e.input(1)])[0])


def _xlogy(e: LoweringEmitter) -> None:
    _where_zero(e, 0, e.op("Mul", [e.input(0), e.op("Log", [e.input(1)])[0]])[0])


def _xdivy(e: LoweringEmitter) -> None:
    _where_zero(e, 0, e.op("Div", [e.input(0), e.input(1)])[0])


def _approximate_equal(e: LoweringEmitter) -> None:
    diff = e.op("Abs", [e.op("Sub", [e.input(0), e.input(1)])[0]])[0]
    e.result("Less", [diff, e.typed_scalar(float(e.attr("tolerance", 1e-5)), e.dtype(0), "tolerance")])


def _add_n(e: LoweringEmitter) -> None:
    names = [e.input(i) for i in range(len(e.inputs))]
    if len(names) == 1:
        e.result("Identity", names)
        return
    e.result("Sum", names)


def _select(e: LoweringEmitter) -> None:
    cond = e.input(0)
    if e.node.op_type == "Select":
        c_rank, x_rank = e.rank(0), e.rank(1)
        if c_rank == 1 and x_rank > 1:
            cond = e.unsqueeze(cond, list(range(1, x_rank)))
    e.result("Where", [cond, e.input(1), e.input(2)])


def _shift(direction: str) -> Lowering:
    def lower(e: LoweringEmitter) -> None:
        if e.dtype(0).numpy.kind != "u":
            e.decline("ONNX BitShift is defined on unsigned integers only")
        e.result("BitShift", [e.input(0), e.input(1)], direction=direction)

    return lower


LOWERINGS: list[tuple[str, Callable[[LoweringEmitter], None]]] = [
    *((tf_op, _unary(onnx_op)) for tf_op, onnx_op in _SAME_UNARY.items()),
    *((tf_op, _binary(onnx_op)) for tf_op, onnx_op in _SAME_BINARY.items()),
    *((tf_op, _binary(onnx_op, 18)) for tf_op, onnx_op in _BITWISE.items()),
    ("Rsqrt", _rsqrt), ("Square", _square), ("Relu6", _relu6), ("Selu", _selu), ("LeakyRelu", _leaky_relu),
    ("Expm1", _expm1), ("Log1p", _log1p), ("Erfc", _erfc), ("IsFinite", _is_finite), ("Invert", _invert),
    ("ZerosLike", _fill_like(0)), ("OnesLike", _fill_like(1)), ("Cast", _cast), ("ClipByValue", _clip_by_value),
    ("Div", _div), ("TruncateDiv", _truncate_div), ("FloorDiv", _floor_div), ("FloorMod", _floor_mod),
    ("Mod", _trunc_mod), ("TruncateMod", _trunc_mod), ("NotEqual", _not_equal),
    ("SquaredDifference", _squared_difference), ("DivNoNan", _div_no_nan), ("MulNoNan", _mul_no_nan),
    ("Xlogy", _xlogy), ("Xdivy", _xdivy), ("ApproximateEqual", _approximate_equal), ("AddN", _add_n),
    ("Select", _select), ("SelectV2", _select), ("LeftShift", _shift("LEFT")), ("RightShift", _shift("RIGHT")),
]  # fmt: skip
