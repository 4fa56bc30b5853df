"""Element-wise ``tf`` ops: unary math and activations, broadcasting binary ops, comparisons, selects, casts.

Shapes: a unary op keeps its input's shape; a binary op broadcasts (numpy rules, unknown dims kept
unknown unless the other side fixes them); ``AddN`` merges its equal-shaped inputs. Every op here has a
numpy ``reference`` kernel that keeps TF's dtype (integer ``Div`` truncates, ``FloorMod`` takes the
divisor's sign, ``Mod`` the dividend's), so shape computations fold through them.
"""

from __future__ import annotations

import math
from typing import Any, Callable

import numpy as np

from ... import dtypes as D
from ...ir.attrs import BOOL, DTYPE, FLOAT
from ...ir.opdef import FollowType, InferContext, OpDef, ParamType
from ._common import ALL, broadcast, broadcast_all, first_dtype, merge_shapes, quiet, tf_op

__all__ = ["definitions"]

Kernel = Callable[[list[np.ndarray], dict[str, Any]], list[np.ndarray]]


# ------------------------------------------------------------------------------------------ unary
def _erf(x: np.ndarray) -> np.ndarray:
    return np.asarray(np.frompyfunc(math.erf, 1, 1)(x.astype(np.float64)), dtype=np.float64)


def _erfc(x: np.ndarray) -> np.ndarray:
    return np.asarray(np.frompyfunc(math.erfc, 1, 1)(x.astype(np.float64)), dtype=np.float64)


_SELU_ALPHA, _SELU_SCALE = 1.6732632423543772848170429916717, 1.0507009873554804934193349852946

_UNARY: dict[str, Callable[[np.ndarray], Any]] = {
    "Abs": np.abs,
    "Neg": np.negative,
    "Sqrt": np.sqrt,
    "Rsqrt": lambda x: 1.0 / np.sqrt(x),
    "Square": np.square,
    "Reciprocal": lambda x: np.reciprocal(x) if x.dtype.kind in "fc" else _tdiv(np.ones_like(x), x),
    "Inv": lambda x: np.reciprocal(x) if x.dtype.kind in "fc" else _tdiv(np.ones_like(x), x),
    "Exp": np.exp,
    "Expm1": np.expm1,
    "Log": np.log,
    "Log1p": np.log1p,
    "Sigmoid": lambda x: 1.0 / (1.0 + np.exp(-x)),
    "Tanh": np.tanh,
    "Relu": lambda x: np.maximum(x, np.zeros((), x.dtype)),
    "Relu6": lambda x: np.clip(x, 0, 6),
    "Elu": lambda x: np.where(x > 0, x, np.expm1(x)),
    "Selu": lambda x: _SELU_SCALE * np.where(x > 0, x, _SELU_ALPHA * np.expm1(x)),
    "Softplus": lambda x: np.logaddexp(np.zeros((), x.dtype), x),
    "Softsign": lambda x: x / (1 + np.abs(x)),
    "Erf": _erf,
    "Erfc": _erfc,
    "Floor": np.floor,
    "Ceil": np.ceil,
    "Round": np.round,  # half to even, as TF
    "Rint": np.rint,
    "Sign": np.sign,
    "Sin": np.sin,
    "Cos": np.cos,
    "Tan": np.tan,
    "Asin": np.arcsin,
    "Acos": np.arccos,
    "Atan": np.arctan,
    "Sinh": np.sinh,
    "Cosh": np.cosh,
    "Asinh": np.arcsinh,
    "Acosh": np.arccosh,
    "Atanh": np.arctanh,
    "Invert": np.invert,
    "ZerosLike": np.zeros_like,
    "OnesLike": np.ones_like,
}

_PREDICATES: dict[str, Callable[[np.ndarray], Any]] = {
    "IsNan": np.isnan,
    "IsInf": np.isinf,
    "IsFinite": np.isfinite,
    "LogicalNot": np.logical_not,
}


def _unary_kernel(fn: Callable[[np.ndarray], Any], out: np.dtype | None = None) -> Kernel:
    @quiet
    def kernel(inputs: list[np.ndarray], attrs: dict[str, Any]) -> list[np.ndarray]:
        x = np.asarray(inputs[0])
        return [np.asarray(fn(x)).astype(out or x.dtype, copy=False)]

    return kernel


_ACTIVATIONS = ("Relu", "Relu6", "Elu", "Selu", "Softplus", "Softsign")


def _unary(name: str, fn: Callable[[np.ndarray], Any]) -> OpDef:
    x, y = ("features", "activations") if name in _ACTIVATIONS else ("x", "y")
    return tf_op(name).input(x).output(y, follow=(x, ALL)).set_reference(_unary_kernel(fn))


def _predicate(name: str, fn: Callable[[np.ndarray], Any]) -> OpDef:
    op = tf_op(name).input("x").output("y", dtypes=(D.BOOL,), follow=("x", FollowType.SHAPE))
    return op.set_reference(_unary_kernel(fn, np.dtype(np.bool_)))


@quiet
def _leaky_relu(inputs: list[np.ndarray], attrs: dict[str, Any]) -> list[np.ndarray]:
    x = np.asarray(inputs[0])
    return [np.where(x > 0, x, x * attrs["alpha"]).astype(x.dtype)]


def _cast_kernel(inputs: list[np.ndarray], attrs: dict[str, Any]) -> list[np.ndarray]:
    x = np.asarray(inputs[0])
    to = attrs["DstT"].numpy
    with np.errstate(all="ignore"):
        if to.kind == "b":
            return [x != 0]
        return [x.astype(to)]


def _cast() -> OpDef:
    op = (
        tf_op("Cast", "Converts element type to DstT (float to int truncates toward zero).")
        .input("x")
        .output("y", follow=("x", FollowType.SHAPE))
        .attr("DstT", DTYPE)
        .attr("Truncate", BOOL, default=False)
    )
    op.set_infer_dtype(lambda ctx: ctx.set_output_dtype(0, ctx.attr("DstT")))
    return op.set_reference(_cast_kernel)


def _clip_by_value() -> OpDef:
    op = tf_op("ClipByValue").input("t").input("clip_value_min").input("clip_value_max").output("output", follow=("t", ALL))

    def shape(ctx: InferContext) -> None:
        out = ctx.param("t").shape
        for bound in ("clip_value_min", "clip_value_max"):  # a scalar, or t's own shape
            s = ctx.param(bound).shape
            if s is not None and len(s) != 0:
                out = merge_shapes(out, s, f"t and {bound}")
        ctx.set_output_shape(0, out)

    op.set_infer_shape(shape)
    return op.set_reference(lambda i, a: [np.clip(i[0], i[1], i[2]).astype(i[0].dtype)])


# ------------------------------------------------------------------------------------------ binary
def _tdiv(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    if x.dtype.kind in "iu":
        q = np.abs(x) // np.where(y == 0, 1, np.abs(y))
        return np.where((x < 0) != (y < 0), -q, q)
    return x / y


def _xlogy(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    return np.where(x == 0, np.zeros((), x.dtype), x * np.log(y))


def _xdivy(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    return np.where(x == 0, np.zeros((), x.dtype), x / y)


def _div_no_nan(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    return np.where(y == 0, np.zeros((), x.dtype), x / np.where(y == 0, np.ones((), y.dtype), y))


_BINARY: dict[str, Callable[[np.ndarray, np.ndarray], Any]] = {
    "Add": np.add,
    "AddV2": np.add,
    "Sub": np.subtract,
    "Mul": np.multiply,
    "MulNoNan": lambda x, y: np.where(y == 0, np.zeros((), x.dtype), x * y),
    "Div": _tdiv,
    "TruncateDiv": _tdiv,
    "RealDiv": np.true_divide,
    "DivNoNan": _div_no_nan,
    "FloorDiv": np.floor_divide,
    "FloorMod": np.mod,
    "Mod": np.fmod,
    "TruncateMod": np.fmod,
    "Maximum": np.maximum,
    "Minimum": np.minimum,
    "Pow": np.power,
    "SquaredDifference": lambda x, y: np.square(x - y),
    "Atan2": np.arctan2,
    "Xlogy": _xlogy,
    "Xdivy": _xdivy,
    "BitwiseAnd": np.bitwise_and,
    "BitwiseOr": np.bitwise_or,
    "BitwiseXor": np.bitwise_xor,
    "LeftShift": np.left_shift,
    "RightShift": np.right_shift,
}

_COMPARISONS: dict[str, Callable[[np.ndarray, np.ndarray], Any]] = {
    "Equal": np.equal,
    "NotEqual": np.not_equal,
    "Less": np.less,
    "LessEqual": np.less_equal,
    "Greater": np.greater,
    "GreaterEqual": np.greater_equal,
    "LogicalAnd": np.logical_and,
    "LogicalOr": np.logical_or,
}


def _binary_shape(ctx: InferContext) -> None:
    ctx.set_output_shape(0, broadcast(ctx.input_shape(0), ctx.input_shape(1)))


def _binary_dtype(ctx: InferContext) -> None:
    ctx.set_output_dtype(0, first_dtype([ctx.input(0), ctx.input(1)]))


def _binary_kernel(fn: Callable[[np.ndarray, np.ndarray], Any], out: np.dtype | None = None) -> Kernel:
    @quiet
    def kernel(inputs: list[np.ndarray], attrs: dict[str, Any]) -> list[np.ndarray]:
        x, y = np.asarray(inputs[0]), np.asarray(inputs[1])
        return [np.asarray(fn(x, y)).astype(out or x.dtype, copy=False)]

    return kernel


def _binary(name: str, fn: Callable[[np.ndarray, np.ndarray], Any]) -> OpDef:
    first, second = ("y", "x") if name == "Atan2" else ("x", "y")  # TF's Atan2(y, x)
    op = tf_op(name).input(first).input(second).output("z").set_infer_dtype(_binary_dtype).set_infer_shape(_binary_shape)
    return op.set_reference(_binary_kernel(fn))


def _comparison(name: str, fn: Callable[[np.ndarray, np.ndarray], Any]) -> OpDef:
    op = tf_op(name).input("x").input("y").output("z", dtypes=(D.BOOL,)).set_infer_shape(_comparison_shape)
    kernel = _binary_kernel(fn, np.dtype(np.bool_))
    if name in ("Equal", "NotEqual"):
        op.attr("incompatible_shape_error", BOOL, default=True)
        kernel = _equality_kernel(kernel, name == "NotEqual")
    return op.set_reference(kernel)


def _equality_kernel(kernel: Kernel, not_equal: bool) -> Kernel:
    """Equal / NotEqual: shapes that cannot broadcast give a scalar when incompatible_shape_error is off."""

    def run(inputs: list[np.ndarray], attrs: dict[str, Any]) -> list[np.ndarray]:
        try:
            np.broadcast_shapes(np.shape(inputs[0]), np.shape(inputs[1]))
        except ValueError:
            if attrs.get("incompatible_shape_error", True):
                raise
            return [np.array(not_equal)]
        return kernel(inputs, attrs)

    return run


def _comparison_shape(ctx: InferContext) -> None:
    if "incompatible_shape_error" in ctx.opdef.attrs and not ctx.attr("incompatible_shape_error"):
        try:  # incompatible shapes give a scalar result instead of an error
            ctx.set_output_shape(0, broadcast(ctx.input_shape(0), ctx.input_shape(1)))
        except ValueError:
            ctx.set_output_shape(0, ())
        return
    _binary_shape(ctx)


def _approximate_equal() -> OpDef:
    op = tf_op("ApproximateEqual").input("x").input("y").output("z", dtypes=(D.BOOL,)).attr("tolerance", FLOAT, default=1e-5)
    op.set_infer_shape(lambda ctx: ctx.set_output_shape(0, merge_shapes(ctx.input_shape(0), ctx.input_shape(1))))
    return op.set_reference(lambda i, a: [np.abs(i[0] - i[1]) < a["tolerance"]])


def _add_n() -> OpDef:
    op = tf_op("AddN", "Sums N tensors of one shape.").input("inputs", ParamType.DYNAMIC).output("sum")

    def shape(ctx: InferContext) -> None:
        out = None
        for info in ctx.params("inputs"):
            out = merge_shapes(out, info.shape, "AddN inputs")
        ctx.set_output_shape(0, out)

    op.set_infer_dtype(lambda ctx: ctx.set_output_dtype(0, first_dtype(ctx.params("inputs"))))
    op.set_infer_shape(shape)
    return op.set_reference(lambda i, a: [np.sum(np.stack(i), axis=0).astype(i[0].dtype)])


# ------------------------------------------------------------------------------------------ selects
def _select() -> OpDef:
    """``Select``: t and e share a shape; the condition matches it or is a vector over its first dim."""
    op = tf_op("Select").input("condition").input("t").input("e").output("output")

    def shape(ctx: InferContext) -> None:
        out = merge_shapes(ctx.param("t").shape, ctx.param("e").shape, "t and e")
        cond = ctx.param("condition").shape
        if cond is not None and out is not None and len(cond) != 0:
            if len(cond) == 1 and len(out) > 1:
                merge_shapes(cond, out[:1], "condition vector and t's first dim")
            else:
                out = merge_shapes(cond, out, "condition and t")
        elif out is None and cond is not None and len(cond) > 1:
            out = cond
        ctx.set_output_shape(0, out)

    def kernel(inputs: list[np.ndarray], attrs: dict[str, Any]) -> list[np.ndarray]:
        cond, t, e = (np.asarray(x) for x in inputs)
        if cond.ndim == 1 and t.ndim > 1:
            cond = cond.reshape((-1,) + (1,) * (t.ndim - 1))
        return [np.where(cond, t, e).astype(t.dtype)]

    op.set_infer_dtype(lambda ctx: ctx.set_output_dtype(0, first_dtype([ctx.param("t"), ctx.param("e")])))
    return op.set_infer_shape(shape).set_reference(kernel)


def _select_v2() -> OpDef:
    op = tf_op("SelectV2", "Select with numpy broadcasting of all three inputs.")
    op.input("condition").input("t").input("e").output("output")
    op.set_infer_dtype(lambda ctx: ctx.set_output_dtype(0, first_dtype([ctx.param("t"), ctx.param("e")])))
    op.set_infer_shape(lambda ctx: ctx.set_output_shape(0, broadcast_all(ctx.input(i).shape for i in range(3))))
    return op.set_reference(lambda i, a: [np.where(i[0], i[1], i[2]).astype(i[1].dtype)])


def definitions() -> list[OpDef]:
    """Every element-wise ``tf`` op definition."""
    ops = [_unary(name, fn) for name, fn in _UNARY.items()]
    ops += [_predicate(name, fn) for name, fn in _PREDICATES.items()]
    ops.append(
        tf_op("LeakyRelu").input("features").output("activations", follow=("features", ALL))
        .attr("alpha", FLOAT, default=0.2).set_reference(_leaky_relu)
    )  # fmt: skip
    ops += [_cast(), _clip_by_value()]
    ops += [_binary(name, fn) for name, fn in _BINARY.items()]
    ops += [_comparison(name, fn) for name, fn in _COMPARISONS.items()]
    ops += [_approximate_equal(), _add_n(), _select(), _select_v2()]
    return ops
