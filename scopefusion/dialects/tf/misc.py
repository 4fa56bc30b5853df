"""Identity-like ``tf`` ops, shape assertions, NoOp and random sources.

Identity, Snapshot, StopGradient, PreventGradient, CheckNumerics and EnsureShape pass their input through:
they keep its shape and dtype, forward its memory, and fold (their kernel is the identity). EnsureShape
and PlaceholderWithDefault also state a shape: EnsureShape refines its input's shape with it (a known
contradiction is an error), PlaceholderWithDefault may be fed any value of that shape.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ...ir.attrs import DTYPE, INT, LIST_INT, STR
from ...ir.opdef import InferContext, OpDef, ParamType
from ._common import ALL, DTYPE_ONLY, merge_shapes, shape_from_value, tf_op

__all__ = ["definitions", "identity_kernel"]

_IDENTITY_LIKE = ("Identity", "Snapshot", "StopGradient", "PreventGradient", "CheckNumerics", "DebugIdentity")


def identity_kernel(inputs: list[np.ndarray], attrs: dict[str, Any]) -> list[np.ndarray]:
    """The reference kernel of the identity-like ops: their input, as it is."""
    return [inputs[0]]


def _identity(name: str) -> OpDef:
    arg = "tensor" if name == "CheckNumerics" else "input"
    op = tf_op(name).input(arg).output("output", follow=(arg, ALL)).set_memory_forward(0)
    if name == "CheckNumerics":
        op.attr("message", STR)
    return op.set_reference(identity_kernel)


def _declared_shape(ctx: InferContext) -> tuple[int, ...] | None:
    shape = ctx.attr("shape")
    return None if shape is None else tuple(d if d >= 0 else -1 for d in shape)


def _ensure_shape() -> OpDef:
    op = tf_op("EnsureShape", "Checks at run time that its input has the stated shape.").input("input")
    op.output("output", follow=("input", DTYPE_ONLY)).attr("shape", LIST_INT, optional=True).set_memory_forward(0)

    def shape(ctx: InferContext) -> None:
        ctx.set_output_shape(0, merge_shapes(ctx.param("input").shape, _declared_shape(ctx), "input and the ensured shape"))

    return op.set_infer_shape(shape).set_reference(identity_kernel)


def _placeholder_with_default() -> OpDef:
    op = tf_op("PlaceholderWithDefault", "Its input, unless a value of the stated shape is fed.").input("input")
    op.output("output", follow=("input", DTYPE_ONLY)).attr("shape", LIST_INT, optional=True).set_memory_forward(0)

    def shape(ctx: InferContext) -> None:
        declared = _declared_shape(ctx)
        merge_shapes(ctx.param("input").shape, declared, "the default and the stated shape")
        ctx.set_output_shape(0, declared)

    return op.set_infer_shape(shape)


def _identity_n() -> OpDef:
    op = tf_op("IdentityN", "Passes each of its inputs through.").input("input", ParamType.DYNAMIC)
    op.output("output", ParamType.DYNAMIC)

    def dtype(ctx: InferContext) -> None:
        for i, info in enumerate(ctx.params("input")):
            ctx.set_output_dtype(i, info.dtype)

    def shape(ctx: InferContext) -> None:
        inputs = ctx.params("input")
        if len(inputs) != ctx.num_outputs:
            raise ValueError(f"IdentityN has {len(inputs)} inputs and {ctx.num_outputs} outputs")
        for i, info in enumerate(inputs):
            ctx.set_output_shape(i, info.shape)

    return op.set_infer_dtype(dtype).set_infer_shape(shape).set_reference(lambda i, a: list(i))


def _print() -> OpDef:
    op = tf_op("Print", "Passes input through, printing data as a side effect.").input("input")
    op.input("data", ParamType.DYNAMIC).output("output", follow=("input", ALL)).attr("message", STR, default="")
    return op.set_memory_forward(0)


def _random(name: str, *, int_range: bool = False) -> OpDef:
    op = tf_op(name).input("shape", value_depend=True)
    if int_range:
        op.input("minval").input("maxval").output("output", follow=("minval", DTYPE_ONLY))
    else:
        op.output("output").attr("dtype", DTYPE)
        op.set_infer_dtype(lambda ctx: ctx.set_output_dtype(0, ctx.attr("dtype")))
    op.attr("seed", INT, default=0).attr("seed2", INT, default=0)
    return op.set_infer_shape(lambda ctx: ctx.set_output_shape(0, shape_from_value(ctx.param("shape"))))


def definitions() -> list[OpDef]:
    """Every identity-like, assertion, NoOp and random ``tf`` op definition."""
    ops = [_identity(name) for name in _IDENTITY_LIKE]
    ops += [_ensure_shape(), _placeholder_with_default(), _identity_n(), _print()]
    ops.append(tf_op("NoOp", "Does nothing; orders control edges."))
    ops += [_random(n) for n in ("RandomUniform", "RandomStandardNormal", "TruncatedNormal")]
    ops.append(_random("RandomUniformInt", int_range=True))
    return ops
