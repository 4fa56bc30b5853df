"""Shape-reading ``tf`` ops: Shape, ShapeN, Size, Rank, BroadcastArgs, BroadcastGradientArgs.

Shape, ShapeN, Size and Rank fold from their input's static shape alone (``fold``), whatever produces
the input: that is what turns ``Shape → StridedSlice → Pack → Reshape`` chains into constants once the
graph's input shapes are fixed. Their values are int32 unless ``out_type`` says int64.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ... import dtypes as D
from ...ir.attrs import DTYPE
from ...ir.opdef import InferContext, InputInfo, OpDef, ParamType
from ._common import DTYPE_ONLY, broadcast, num_elements, rank_of, tf_op

__all__ = ["definitions"]

_INDEX_TYPES = (D.INT32, D.INT64)


def _out_type_dtype(ctx: InferContext) -> None:
    for i in range(ctx.num_outputs):
        ctx.set_output_dtype(i, ctx.attr("out_type"))


def _shape() -> OpDef:
    op = tf_op("Shape").input("input").output("output", dtypes=_INDEX_TYPES).attr("out_type", DTYPE, default=D.INT32)
    op.set_infer_dtype(_out_type_dtype)
    op.set_infer_shape(lambda ctx: ctx.set_output_shape(0, (-1 if (s := ctx.input_shape(0)) is None else len(s),)))

    def fold(inputs: list[InputInfo | None], attrs: dict[str, Any]) -> list[np.ndarray] | None:
        x = inputs[0]
        if x is None or num_elements(x.shape) is None:
            return None
        return [np.array(x.shape, attrs["out_type"].numpy).reshape(-1)]

    return op.set_fold(fold).set_reference(lambda i, a: [np.array(np.shape(i[0]), a["out_type"].numpy).reshape(-1)])


def _shape_n() -> OpDef:
    op = tf_op("ShapeN").input("input", ParamType.DYNAMIC).output("output", ParamType.DYNAMIC, dtypes=_INDEX_TYPES)
    op.attr("out_type", DTYPE, default=D.INT32).set_infer_dtype(_out_type_dtype)

    def shape(ctx: InferContext) -> None:
        for i, info in enumerate(ctx.params("input")):
            ctx.set_output_shape(i, (-1 if info.shape is None else len(info.shape),))

    def fold(inputs: list[InputInfo | None], attrs: dict[str, Any]) -> list[np.ndarray] | None:
        if any(x is None or num_elements(x.shape) is None for x in inputs):
            return None
        return [np.array(x.shape, attrs["out_type"].numpy).reshape(-1) for x in inputs]  # type: ignore[union-attr]

    op.set_infer_shape(shape).set_fold(fold)
    return op.set_reference(lambda i, a: [np.array(np.shape(x), a["out_type"].numpy).reshape(-1) for x in i])


def _size() -> OpDef:
    op = tf_op("Size").input("input").output("output", dtypes=_INDEX_TYPES).attr("out_type", DTYPE, default=D.INT32)
    op.set_infer_dtype(_out_type_dtype).set_infer_shape(lambda ctx: ctx.set_output_shape(0, ()))

    def fold(inputs: list[InputInfo | None], attrs: dict[str, Any]) -> list[np.ndarray] | None:
        n = None if inputs[0] is None else num_elements(inputs[0].shape)
        return None if n is None else [np.array(n, attrs["out_type"].numpy)]

    return op.set_fold(fold).set_reference(lambda i, a: [np.array(np.size(i[0]), a["out_type"].numpy)])


def _rank() -> OpDef:
    op = tf_op("Rank").input("input").output("output", dtypes=(D.INT32,))
    op.set_infer_shape(lambda ctx: ctx.set_output_shape(0, ()))

    def fold(inputs: list[InputInfo | None], attrs: dict[str, Any]) -> list[np.ndarray] | None:
        r = None if inputs[0] is None else rank_of(inputs[0].shape)
        return None if r is None else [np.array(r, np.int32)]

    return op.set_fold(fold).set_reference(lambda i, a: [np.array(np.ndim(i[0]), np.int32)])


def _vector_length(info: InputInfo, what: str) -> int:
    if info.shape is not None and len(info.shape) != 1:
        raise ValueError(f"{what} must be a vector, found rank {len(info.shape)}")
    return -1 if info.shape is None else info.shape[0]


def _broadcast_args() -> OpDef:
    op = tf_op("BroadcastArgs", "The broadcast shape of two shape vectors.").input("s0").input("s1").output("r0", follow=("s0", DTYPE_ONLY))

    def shape(ctx: InferContext) -> None:
        a, b = _vector_length(ctx.param("s0"), "s0"), _vector_length(ctx.param("s1"), "s1")
        ctx.set_output_shape(0, (max(a, b) if a >= 0 and b >= 0 else -1,))

    def kernel(inputs: list[np.ndarray], attrs: dict[str, Any]) -> list[np.ndarray]:
        s0, s1 = (tuple(int(d) for d in x) for x in inputs)
        return [np.array(broadcast(s0, s1), inputs[0].dtype).reshape(-1)]

    return op.set_infer_shape(shape).set_reference(kernel)


def _broadcast_gradient_args() -> OpDef:
    op = tf_op("BroadcastGradientArgs", "The reduction axes of each input's gradient under broadcasting.")
    op.input("s0").input("s1").output("r0").output("r1")

    def dtype(ctx: InferContext) -> None:
        ctx.set_output_dtype(0, ctx.param("s0").dtype)
        ctx.set_output_dtype(1, ctx.param("s0").dtype)

    def shape(ctx: InferContext) -> None:
        _vector_length(ctx.param("s0"), "s0")
        _vector_length(ctx.param("s1"), "s1")
        ctx.set_output_shape(0, (-1,))
        ctx.set_output_shape(1, (-1,))

    def kernel(inputs: list[np.ndarray], attrs: dict[str, Any]) -> list[np.ndarray]:
        s0, s1 = (tuple(int(d) for d in x) for x in inputs)
        broadcast(s0, s1)  # raises when they cannot broadcast
        n = max(len(s0), len(s1))
        reductions = []
        for s in (s0, s1):  # every axis where this side is 1 (or missing) sums its gradient
            padded = (1,) * (n - len(s)) + s
            reductions.append(np.array([i for i in range(n) if padded[i] == 1], inputs[0].dtype))
        return reductions

    return op.set_infer_shape(shape).set_infer_dtype(dtype).set_reference(kernel)


def definitions() -> list[OpDef]:
    """Every shape-reading ``tf`` op definition."""
    return [_shape(), _shape_n(), _size(), _rank(), _broadcast_args(), _broadcast_gradient_args()]
