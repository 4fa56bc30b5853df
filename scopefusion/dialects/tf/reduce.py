"""Reductions and scans: Mean, Sum, Max, Min, Prod, All, Any, EuclideanNorm, ArgMax, ArgMin, Cumsum, Cumprod.

The reduction axes are value-dependent. Known axes give exact shapes (``keep_dims`` keeps reduced dims as
1); unknown axes keep the rank only under ``keep_dims`` (which dims vanish is otherwise unknown). An empty
axes list reduces nothing. Integer Mean truncates toward zero, as TF's kernel does.
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np

from ... import dtypes as D
from ...ir.attrs import BOOL, DTYPE
from ...ir.opdef import InferContext, OpDef
from ._common import ALL, DTYPE_ONLY, Shape, int_list, normalize_axis, quiet, rank_of, scalar_int, tf_op, unknown

__all__ = ["definitions", "reduced_shape"]

_AXIS_TYPES = (D.INT32, D.INT64)


def reduced_shape(x: Shape, axes: list[int] | None, keep_dims: bool, axes_shape: Shape = None) -> Shape:
    """The shape of reducing ``x`` over ``axes`` (None: unknown axes)."""
    if axes is None:
        if keep_dims:
            return unknown(rank_of(x))
        if x is not None and axes_shape is not None and len(axes_shape) == 0:
            return unknown(len(x) - 1)  # one scalar axis, value unknown
        return None
    if x is None:
        return None
    picked = {normalize_axis(a, len(x), "reduction axis") for a in axes}
    if keep_dims:
        return tuple(1 if i in picked else d for i, d in enumerate(x))
    return tuple(d for i, d in enumerate(x) if i not in picked)


@quiet
def _mean(x: np.ndarray, axis: tuple[int, ...], keepdims: bool) -> np.ndarray:
    if x.dtype.kind in "iu":
        total = np.sum(x, axis=axis, keepdims=keepdims, dtype=np.int64)
        count = int(np.prod([x.shape[a] for a in axis], dtype=np.int64)) if axis else 1
        return np.trunc(total / max(count, 1)).astype(x.dtype) if count else total.astype(x.dtype)
    return np.mean(x, axis=axis, keepdims=keepdims)


def _euclidean(x: np.ndarray, axis: tuple[int, ...], keepdims: bool) -> np.ndarray:
    return np.sqrt(np.sum(np.square(x), axis=axis, keepdims=keepdims))


_REDUCERS: dict[str, Callable[..., np.ndarray]] = {
    "Sum": lambda x, axis, keepdims: np.sum(x, axis=axis, keepdims=keepdims, dtype=x.dtype),
    "Prod": lambda x, axis, keepdims: np.prod(x, axis=axis, keepdims=keepdims, dtype=x.dtype),
    "Max": lambda x, axis, keepdims: np.max(x, axis=axis, keepdims=keepdims),
    "Min": lambda x, axis, keepdims: np.min(x, axis=axis, keepdims=keepdims),
    "Mean": _mean,
    "EuclideanNorm": _euclidean,
    "All": lambda x, axis, keepdims: np.asarray(np.all(x, axis=axis, keepdims=keepdims)),
    "Any": lambda x, axis, keepdims: np.asarray(np.any(x, axis=axis, keepdims=keepdims)),
}


def _axes(value: np.ndarray, rank: int) -> tuple[int, ...]:
    return tuple(sorted({int(a) % rank if rank else 0 for a in np.asarray(value).reshape(-1)}))


def _reduction(name: str, fn: Callable[..., np.ndarray]) -> OpDef:
    op = tf_op(name).input("input").input("reduction_indices", value_depend=True, dtypes=_AXIS_TYPES)
    op.output("output", follow=("input", DTYPE_ONLY)).attr("keep_dims", BOOL, default=False)

    def shape(ctx: InferContext) -> None:
        info = ctx.param("reduction_indices")
        ctx.set_output_shape(0, reduced_shape(ctx.param("input").shape, int_list(info), ctx.attr("keep_dims"), info.shape))

    def kernel(inputs: list[np.ndarray], attrs: dict[str, Any]) -> list[np.ndarray]:
        x = np.asarray(inputs[0])
        out = fn(x, _axes(inputs[1], x.ndim), attrs["keep_dims"])
        return [np.asarray(out).astype(x.dtype, copy=False)]

    return op.set_infer_shape(shape).set_reference(kernel)


def _arg(name: str) -> OpDef:
    op = tf_op(name).input("input").input("dimension", value_depend=True, dtypes=_AXIS_TYPES)
    op.output("output", dtypes=(D.INT32, D.INT64)).attr("output_type", DTYPE, default=D.INT64)
    op.set_infer_dtype(lambda ctx: ctx.set_output_dtype(0, ctx.attr("output_type")))

    def shape(ctx: InferContext) -> None:
        x = ctx.param("input").shape
        axis = scalar_int(ctx.param("dimension"))
        if x is not None and len(x) == 0:
            raise ValueError(f"{name} needs an input of rank >= 1, found a scalar")
        ctx.set_output_shape(0, reduced_shape(x, None if axis is None else [axis], False, ()))

    def kernel(inputs: list[np.ndarray], attrs: dict[str, Any]) -> list[np.ndarray]:
        f = np.argmax if name == "ArgMax" else np.argmin
        return [f(inputs[0], axis=int(inputs[1])).astype(attrs["output_type"].numpy)]

    return op.set_infer_shape(shape).set_reference(kernel)


def _scan(name: str) -> OpDef:
    op = tf_op(name).input("x").input("axis", value_depend=True, dtypes=_AXIS_TYPES).output("out", follow=("x", ALL))
    op.attr("exclusive", BOOL, default=False).attr("reverse", BOOL, default=False)

    def shape(ctx: InferContext) -> None:
        x, axis = ctx.param("x").shape, scalar_int(ctx.param("axis"))
        if x is not None and axis is not None:
            normalize_axis(axis, len(x), f"{name} axis")
        ctx.set_output_shape(0, x)

    def kernel(inputs: list[np.ndarray], attrs: dict[str, Any]) -> list[np.ndarray]:
        x, axis = np.asarray(inputs[0]), int(inputs[1])
        scan = np.cumsum if name == "Cumsum" else np.cumprod
        if attrs["reverse"]:
            x = np.flip(x, axis)
        out = scan(x, axis=axis, dtype=x.dtype)
        if attrs["exclusive"]:
            identity = np.zeros_like if name == "Cumsum" else np.ones_like
            first = identity(np.take(out, [0], axis=axis))
            out = np.concatenate([first, np.delete(out, -1, axis=axis)], axis=axis)
        if attrs["reverse"]:
            out = np.flip(out, axis)
        return [out]

    return op.set_infer_shape(shape).set_reference(kernel)


def definitions() -> list[OpDef]:
    """Every reduction and scan ``tf`` op definition."""
    ops = [_reduction(name, fn) for name, fn in _REDUCERS.items()]
    return ops + [_arg("ArgMax"), _arg("ArgMin"), _scan("Cumsum"), _scan("Cumprod")]
