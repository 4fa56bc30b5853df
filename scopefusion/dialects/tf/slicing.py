"""Slicing, joining and gathering ``tf`` ops: Slice, StridedSlice (every mask), Split, SplitV, ConcatV2,
Concat, Pack, Unpack, GatherV2, Gather, GatherNd, OneHot, ScatterNd, TensorScatterUpdate / Add.

StridedSlice follows TF's own canonicalisation (``strided_slice_op.cc``): the sparse spec (with its
ellipsis, new-axis and shrink-axis bits) becomes a dense spec over the input's dims, begin and end are
clamped per dim, and the final shape gathers the processed dims, inserting 1 for a new axis and dropping
shrunk ones. The numpy kernel runs the same plan, so inference and folding cannot disagree.
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from ... import dtypes as D
from ...ir.attrs import BOOL, INT
from ...ir.opdef import InferContext, OpDef, ParamType
from ...records import Record
from ._common import (
    ALL,
    DTYPE_ONLY,
    Shape,
    first_dtype,
    int_list,
    merge_dim,
    merge_shapes,
    normalize_axis,
    rank_of,
    scalar_int,
    shape_from_value,
    tf_op,
    unknown,
)

__all__ = ["SlicePlan", "definitions", "plan_strided_slice"]

_NEW_AXIS, _SHRINK = -1, -2
_MASKS = ("begin_mask", "end_mask", "ellipsis_mask", "new_axis_mask", "shrink_axis_mask")


class SlicePlan(Record):
    """A strided slice over known dims: per input dim ``(begin, stop, stride, shrink)`` or None (unknown),
    the processed sizes, and the final shape (new axes 1, shrunk dims dropped)."""

    _fields = ("ranges", "final")

    def __init__(
        self,
        ranges: list[tuple[int, int, int, bool] | None] | None = None,
        final: tuple[int, ...] = (),
    ) -> None:
        self.ranges = [] if ranges is None else ranges
        self.final = final


def plan_strided_slice(
    shape: Shape,
    begin: Sequence[int] | None,
    end: Sequence[int] | None,
    strides: Sequence[int],
    masks: dict[str, int],
) -> SlicePlan | None:
    """TF's StridedSlice shape rule; None when the rank of the result is unknown (input rank unknown).

    ``begin`` / ``end`` None: their values are unknown (dims not fully masked or shrunk become -1).
    Raises ValueError on a zero stride, two ellipses, or a shrunk index out of a known dim.
    """
    if shape is None:
        return None
    n = len(strides)
    for name, values in (("begin", begin), ("end", end)):
        if values is not None and len(values) != n:
            raise ValueError(f"StridedSlice {name} has {len(values)} entries, strides has {n}")
    ellipsis = masks["ellipsis_mask"]
    if bin(ellipsis & ((1 << n) - 1)).count("1") > 1:
        raise ValueError("StridedSlice spec has more than one ellipsis")
    sparse_begin = list(begin) if begin is not None else None
    sparse_end = list(end) if end is not None else None
    sparse_strides = list(strides)
    add_after = 0
    seen = False
    for i in range(n):
        if seen and masks["new_axis_mask"] & (1 << i):
            add_after += 1
        if ellipsis & (1 << i):
            seen = True
    if not seen:
        ellipsis |= 1 << n
        n += 1
        sparse_strides.append(1)
        if sparse_begin is not None:
            sparse_begin.append(0)
        if sparse_end is not None:
            sparse_end.append(0)
    dims = len(shape)
    dense: list[tuple[int | None, int | None, int, bool, bool, bool]] = []  # begin, end, stride, bmask, emask, shrink
    gather: list[int] = []
    for i in range(n):
        bit = 1 << i
        if ellipsis & bit:
            upto = min(dims - (n - i) + 1 + add_after, dims)
            while len(dense) < upto:
                gather.append(len(dense))
                dense.append((0, 0, 1, True, True, False))
        elif masks["new_axis_mask"] & bit:
            gather.append(_NEW_AXIS)
        else:
            if len(dense) == dims:
                raise ValueError(f"StridedSlice spec indexes more dims than the input's {dims}")
            shrink = bool(masks["shrink_axis_mask"] & bit)
            gather.append(_SHRINK if shrink else len(dense))
            dense.append((
                None if sparse_begin is None else sparse_begin[i],
                None if sparse_end is None else sparse_end[i],
                sparse_strides[i],
                bool(masks["begin_mask"] & bit),
                bool(masks["end_mask"] & bit),
                shrink,
            ))  # fmt: skip
    if len(dense) != dims:
        raise ValueError(f"StridedSlice spec covers {len(dense)} dims, the input has {dims}")
    plan = SlicePlan()
    sizes: list[int] = []
    for (b, e, s, bmask, emask, shrink), dim in zip(dense, shape):
        if s == 0:
            raise ValueError("StridedSlice strides must be non-zero")
        if dim < 0:
            sizes.append(1 if shrink else -1)
            plan.ranges.append(None)
            continue
        lo, hi = (0, dim) if s > 0 else (-1, dim - 1)

        def canonical(  # called in this iteration only: binds the loop's current values
            x: int | None, masked: bool, is_end: bool, lo: int = lo, hi: int = hi, s: int = s, dim: int = dim
        ) -> int | None:
            if masked:
                return (hi if is_end else lo) if s > 0 else (lo if is_end else hi)
            if x is None:
                return None
            x = x + dim if x < 0 else x
            return min(max(x, lo), hi)

        if shrink:
            if b is None:
                sizes.append(1)
                plan.ranges.append(None)
                continue
            start = b + dim if b < 0 else b
            if not 0 <= start < dim:
                raise ValueError(f"StridedSlice index {b} is out of bounds for a dim of size {dim}")
            plan.ranges.append((start, start + 1, 1, True))
            sizes.append(1)
            continue
        cb, ce = canonical(b, bmask, False), canonical(e, emask, True)
        if cb is None or ce is None:
            sizes.append(-1)
            plan.ranges.append(None)
            continue
        length = ce - cb
        size = 0 if length == 0 or (length < 0) != (s < 0) else length // s + (1 if length % s else 0)
        sizes.append(size)
        plan.ranges.append((cb, ce, s, False))
    plan.final = tuple(1 if g == _NEW_AXIS else sizes[g] for g in gather if g != _SHRINK)
    return plan


def _strided_slice() -> OpDef:
    op = tf_op("StridedSlice").input("input")
    for name in ("begin", "end", "strides"):
        op.input(name, value_depend=True, dtypes=(D.INT32, D.INT64))
    op.output("output", follow=("input", DTYPE_ONLY))
    for mask in _MASKS:
        op.attr(mask, INT, default=0)

    def shape(ctx: InferContext) -> None:
        strides = int_list(ctx.param("strides"))
        if strides is None:
            ctx.set_output_shape(0, None)
            return
        masks = {m: ctx.attr(m) for m in _MASKS}
        plan = plan_strided_slice(
            ctx.param("input").shape, int_list(ctx.param("begin")), int_list(ctx.param("end")), strides, masks
        )
        ctx.set_output_shape(0, None if plan is None else plan.final)

    def kernel(inputs: list[np.ndarray], attrs: dict[str, Any]) -> list[np.ndarray]:
        x = np.asarray(inputs[0])
        begin, end, strides = (np.asarray(v).reshape(-1).tolist() for v in inputs[1:4])
        plan = plan_strided_slice(x.shape, begin, end, strides, {m: attrs[m] for m in _MASKS})
        for axis, r in enumerate(plan.ranges if plan is not None else ()):
            if r is not None:  # every range is known for a concrete input
                x = np.take(x, np.arange(r[0], r[1], r[2]), axis=axis)
        return [x.reshape(plan.final if plan is not None else x.shape)]

    return op.set_infer_shape(shape).set_reference(kernel)


def _slice() -> OpDef:
    op = tf_op("Slice").input("input").input("begin", value_depend=True).input("size", value_depend=True)
    op.output("output", follow=("input", DTYPE_ONLY))

    def shape(ctx: InferContext) -> None:
        x = ctx.param("input").shape
        begin, size = int_list(ctx.param("begin")), int_list(ctx.param("size"))
        n = rank_of(x)
        for vals in (begin, size):
            if vals is not None:
                if n is not None and len(vals) != n:
                    raise ValueError(f"Slice begin/size of length {len(vals)} do not fit a rank-{n} input")
                n = len(vals)
        if n is None:
            lengths = [ctx.param(a).shape for a in ("begin", "size")]
            n = next((s[0] for s in lengths if s is not None and len(s) == 1 and s[0] >= 0), None)
        if n is None or size is None:
            ctx.set_output_shape(0, unknown(n))
            return
        x = x if x is not None else (-1,) * n
        out = []
        for i, (d, s) in enumerate(zip(x, size)):
            b = None if begin is None else begin[i]
            if b is not None and (b < 0 or (d >= 0 and b > d)):
                raise ValueError(f"Slice begin {b} is out of range for dim {i} of size {d}")
            if s == -1:
                out.append(d - b if d >= 0 and b is not None else -1)
            else:
                if s < -1 or (d >= 0 and b is not None and b + s > d):
                    raise ValueError(f"Slice of size {s} from {b} does not fit dim {i} of size {d}")
                out.append(s)
        ctx.set_output_shape(0, out)

    def kernel(inputs: list[np.ndarray], attrs: dict[str, Any]) -> list[np.ndarray]:
        x, begin, size = inputs[0], np.asarray(inputs[1]).tolist(), np.asarray(inputs[2]).tolist()
        return [x[tuple(slice(b, None if s == -1 else b + s) for b, s in zip(begin, size))]]

    return op.set_infer_shape(shape).set_reference(kernel)


# ------------------------------------------------------------------------------------------ split / join
def _split_shapes(x: Shape, axis: int | None, sizes: list[int] | None, count: int) -> list[Shape]:
    if x is None:
        return [None] * count
    if axis is None:
        return [unknown(len(x))] * count
    a = normalize_axis(axis, len(x), "split axis")
    out: list[tuple[int, ...] | None] = []
    for size in sizes if sizes is not None else [-1] * count:
        s = list(x)
        s[a] = size
        out.append(tuple(s))
    return out


def _split() -> OpDef:
    op = tf_op("Split").input("split_dim", value_depend=True, dtypes=(D.INT32,)).input("value")
    op.output("output", ParamType.DYNAMIC, follow=("value", DTYPE_ONLY)).attr("num_split", INT)

    def shape(ctx: InferContext) -> None:
        x, axis, n = ctx.param("value").shape, scalar_int(ctx.param("split_dim")), ctx.attr("num_split")
        sizes = None
        if x is not None and axis is not None:
            d = x[normalize_axis(axis, len(x), "split axis")]
            if d >= 0 and d % n:
                raise ValueError(f"Split of a dim of size {d} into {n} equal parts")
            sizes = [d // n if d >= 0 else -1] * n
        for i, s in enumerate(_split_shapes(x, axis, sizes, ctx.num_outputs)):
            ctx.set_output_shape(i, s)

    def kernel(inputs: list[np.ndarray], attrs: dict[str, Any]) -> list[np.ndarray]:
        return list(np.split(inputs[1], attrs["num_split"], axis=int(inputs[0])))

    return op.set_infer_shape(shape).set_reference(kernel)


def _split_v() -> OpDef:
    op = tf_op("SplitV").input("value").input("size_splits", value_depend=True)
    op.input("split_dim", value_depend=True, dtypes=(D.INT32,))
    op.output("output", ParamType.DYNAMIC, follow=("value", DTYPE_ONLY)).attr("num_split", INT)

    def shape(ctx: InferContext) -> None:
        x, axis = ctx.param("value").shape, scalar_int(ctx.param("split_dim"))
        sizes = int_list(ctx.param("size_splits"))
        if sizes is not None:
            if len(sizes) != ctx.num_outputs:
                raise ValueError(f"SplitV has {len(sizes)} sizes for {ctx.num_outputs} outputs")
            holes = [i for i, s in enumerate(sizes) if s == -1]
            if len(holes) > 1:
                raise ValueError(f"SplitV size_splits {sizes} has more than one -1")
            if x is not None and axis is not None:
                d = x[normalize_axis(axis, len(x), "split axis")]
                known = sum(s for s in sizes if s != -1)
                if holes and d >= 0:
                    sizes[holes[0]] = d - known
                if d >= 0 and (sum(sizes) != d or min(sizes) < 0):
                    raise ValueError(f"SplitV sizes {int_list(ctx.param('size_splits'))} do not add up to {d}")
        for i, s in enumerate(_split_shapes(x, axis, sizes, ctx.num_outputs)):
            ctx.set_output_shape(i, s)

    def kernel(inputs: list[np.ndarray], attrs: dict[str, Any]) -> list[np.ndarray]:
        x, sizes, axis = inputs[0], [int(s) for s in inputs[1]], int(inputs[2])
        axis = axis + x.ndim if axis < 0 else axis
        if -1 in sizes:
            sizes[sizes.index(-1)] = x.shape[axis] - (sum(sizes) + 1)
        return list(np.split(x, np.cumsum(sizes)[:-1], axis=axis))

    return op.set_infer_shape(shape).set_reference(kernel)


def _concat_shape(values: list[Shape], axis: int | None) -> Shape:
    known = [v for v in values if v is not None]
    if not known:
        return None
    rank = len(known[0])
    if any(len(v) != rank for v in known):
        raise ValueError(f"concat inputs have different ranks: {[list(v) for v in known]}")
    if axis is None:
        return unknown(rank)
    a = normalize_axis(axis, rank, "concat axis")
    out = [-1] * rank
    total = 0
    for v in values:
        if v is None:
            total = -1
            continue
        for i, d in enumerate(v):
            if i != a:
                out[i] = merge_dim(out[i], d, f"concat inputs' dim {i}")
        total = total + v[a] if total >= 0 and v[a] >= 0 else -1
    out[a] = total
    return tuple(out)


def _concat(name: str) -> OpDef:
    op = tf_op(name)
    if name == "Concat":
        op.input("concat_dim", value_depend=True, dtypes=(D.INT32,)).input("values", ParamType.DYNAMIC)
    else:
        op.input("values", ParamType.DYNAMIC).input("axis", value_depend=True, dtypes=(D.INT32, D.INT64))
    op.output("output")
    axis_name = "concat_dim" if name == "Concat" else "axis"

    def shape(ctx: InferContext) -> None:
        values = [v.shape for v in ctx.params("values")]
        ctx.set_output_shape(0, _concat_shape(values, scalar_int(ctx.param(axis_name))))

    def kernel(inputs: list[np.ndarray], attrs: dict[str, Any]) -> list[np.ndarray]:
        axis, values = (int(inputs[0]), inputs[1:]) if name == "Concat" else (int(inputs[-1]), inputs[:-1])
        return [np.concatenate(values, axis=axis)]

    op.set_infer_dtype(lambda ctx: ctx.set_output_dtype(0, first_dtype(ctx.params("values"))))
    return op.set_infer_shape(shape).set_reference(kernel)


def _pack() -> OpDef:
    op = tf_op("Pack").input("values", ParamType.DYNAMIC).output("output").attr("axis", INT, default=0)

    def shape(ctx: InferContext) -> None:
        values = ctx.params("values")
        merged: Shape = None
        for v in values:
            merged = merge_shapes(merged, v.shape, "Pack inputs")
        if merged is None:
            ctx.set_output_shape(0, None)
            return
        a = normalize_axis(ctx.attr("axis"), len(merged) + 1, "Pack axis")
        ctx.set_output_shape(0, merged[:a] + (len(values),) + merged[a:])

    op.set_infer_dtype(lambda ctx: ctx.set_output_dtype(0, first_dtype(ctx.params("values"))))
    return op.set_infer_shape(shape).set_reference(lambda i, a: [np.stack(i, axis=a["axis"])])


def _unpack() -> OpDef:
    op = tf_op("Unpack").input("value").output("output", ParamType.DYNAMIC, follow=("value", DTYPE_ONLY))
    op.attr("num", INT).attr("axis", INT, default=0)

    def shape(ctx: InferContext) -> None:
        x = ctx.param("value").shape
        out: Shape = None
        if x is not None:
            a = normalize_axis(ctx.attr("axis"), len(x), "Unpack axis")
            merge_dim(x[a], ctx.attr("num"), "Unpack num and the unpacked dim")
            out = x[:a] + x[a + 1 :]
        for i in range(ctx.num_outputs):
            ctx.set_output_shape(i, out)

    def kernel(inputs: list[np.ndarray], attrs: dict[str, Any]) -> list[np.ndarray]:
        return [np.take(inputs[0], i, axis=attrs["axis"]) for i in range(attrs["num"])]

    return op.set_infer_shape(shape).set_reference(kernel)


# ------------------------------------------------------------------------------------------ gather / scatter
def gather_shape(params: Shape, indices: Shape, axis: int | None, batch_dims: int) -> Shape:
    """GatherV2's output: ``params[:axis] + indices[batch_dims:] + params[axis + 1:]``."""
    if params is None or indices is None:
        return None
    if axis is None:
        return unknown(len(params) + len(indices) - 1 - batch_dims)
    a = normalize_axis(axis, len(params), "gather axis")
    b = batch_dims + len(indices) if batch_dims < 0 else batch_dims
    if not 0 <= b <= min(a, len(indices)):
        raise ValueError(f"batch_dims {batch_dims} must be within [0, min(axis {a}, indices rank {len(indices)})]")
    batch = merge_shapes(params[:b], indices[:b], "params and indices batch dims") or ()
    return tuple(batch) + params[b:a] + indices[b:] + params[a + 1 :]


def _gather_kernel(params: np.ndarray, indices: np.ndarray, axis: int, batch_dims: int) -> np.ndarray:
    axis = axis + params.ndim if axis < 0 else axis
    batch_dims = batch_dims + indices.ndim if batch_dims < 0 else batch_dims
    if batch_dims == 0:
        return np.take(params, indices, axis=axis)
    batch = params.shape[:batch_dims]
    n = int(np.prod(batch, dtype=np.int64))
    p = params.reshape((n,) + params.shape[batch_dims:])
    idx = indices.reshape((n,) + indices.shape[batch_dims:])
    parts = [np.take(p[i], idx[i], axis=axis - batch_dims) for i in range(n)]
    out_tail = params.shape[batch_dims:axis] + indices.shape[batch_dims:] + params.shape[axis + 1 :]
    return np.stack(parts).reshape(batch + out_tail) if parts else np.zeros(batch + out_tail, params.dtype)


def _gather_v2() -> OpDef:
    op = tf_op("GatherV2").input("params").input("indices").input("axis", value_depend=True, dtypes=(D.INT32, D.INT64))
    op.output("output", follow=("params", DTYPE_ONLY)).attr("batch_dims", INT, default=0)

    def shape(ctx: InferContext) -> None:
        params, indices = ctx.param("params").shape, ctx.param("indices").shape
        ctx.set_output_shape(0, gather_shape(params, indices, scalar_int(ctx.param("axis")), ctx.attr("batch_dims")))

    kernel = lambda i, a: [_gather_kernel(i[0], np.asarray(i[1]), int(i[2]), a["batch_dims"])]  # noqa: E731
    return op.set_infer_shape(shape).set_reference(kernel)


def _gather() -> OpDef:
    op = tf_op("Gather").input("params").input("indices").output("output", follow=("params", DTYPE_ONLY))
    op.attr("validate_indices", BOOL, default=True)
    op.set_infer_shape(lambda ctx: ctx.set_output_shape(0, gather_shape(ctx.input_shape(0), ctx.input_shape(1), 0, 0)))
    return op.set_reference(lambda i, a: [np.take(i[0], i[1], axis=0)])


def _gather_nd() -> OpDef:
    op = tf_op("GatherNd").input("params").input("indices").output("output", follow=("params", DTYPE_ONLY))

    def shape(ctx: InferContext) -> None:
        params, indices = ctx.param("params").shape, ctx.param("indices").shape
        if params is None or indices is None or indices[-1:] == (-1,):
            ctx.set_output_shape(0, None)
            return
        if len(indices) < 1 or indices[-1] > len(params):
            raise ValueError(f"GatherNd indices {list(indices)} index deeper than params of rank {len(params)}")
        ctx.set_output_shape(0, indices[:-1] + params[indices[-1] :])

    def kernel(inputs: list[np.ndarray], attrs: dict[str, Any]) -> list[np.ndarray]:
        params, indices = inputs
        return [params[tuple(np.moveaxis(np.asarray(indices), -1, 0))]]

    return op.set_infer_shape(shape).set_reference(kernel)


def _one_hot() -> OpDef:
    op = tf_op("OneHot").input("indices").input("depth", value_depend=True, dtypes=(D.INT32,))
    op.input("on_value").input("off_value").output("output", follow=("on_value", DTYPE_ONLY)).attr("axis", INT, default=-1)

    def shape(ctx: InferContext) -> None:
        indices = ctx.param("indices").shape
        depth = scalar_int(ctx.param("depth"))
        if depth is not None and depth < 0:
            raise ValueError(f"OneHot depth must be non-negative, found {depth}")
        if indices is None:
            ctx.set_output_shape(0, None)
            return
        axis = ctx.attr("axis")
        a = len(indices) if axis == -1 else normalize_axis(axis, len(indices) + 1, "OneHot axis")
        ctx.set_output_shape(0, indices[:a] + (-1 if depth is None else depth,) + indices[a:])

    def kernel(inputs: list[np.ndarray], attrs: dict[str, Any]) -> list[np.ndarray]:
        indices, depth, on, off = inputs
        hot = np.asarray(indices)[..., None] == np.arange(int(depth))
        axis = attrs["axis"]
        if axis != -1:
            hot = np.moveaxis(hot, -1, axis)
        return [np.where(hot, on, off).astype(on.dtype)]

    return op.set_infer_shape(shape).set_reference(kernel)


def _scatter_nd() -> OpDef:
    op = tf_op("ScatterNd").input("indices").input("updates").input("shape", value_depend=True)
    op.output("output", follow=("updates", DTYPE_ONLY))
    op.set_infer_shape(lambda ctx: ctx.set_output_shape(0, shape_from_value(ctx.param("shape"), "ScatterNd shape")))

    def kernel(inputs: list[np.ndarray], attrs: dict[str, Any]) -> list[np.ndarray]:
        indices, updates, shape = inputs
        out = np.zeros([int(d) for d in shape], updates.dtype)
        np.add.at(out, tuple(np.moveaxis(np.asarray(indices), -1, 0)), updates)
        return [out]

    return op.set_reference(kernel)


def _tensor_scatter(name: str) -> OpDef:
    op = tf_op(name).input("tensor").input("indices").input("updates").output("output", follow=("tensor", ALL))

    def kernel(inputs: list[np.ndarray], attrs: dict[str, Any]) -> list[np.ndarray]:
        tensor, indices, updates = inputs
        out = np.array(tensor)
        where = tuple(np.moveaxis(np.asarray(indices), -1, 0))
        if name == "TensorScatterAdd":
            np.add.at(out, where, updates)
        else:
            out[where] = updates
        return [out]

    return op.set_reference(kernel)


def definitions() -> list[OpDef]:
    """Every slicing, joining and gathering ``tf`` op definition."""
    ops = [_strided_slice(), _slice(), _split(), _split_v(), _concat("ConcatV2"), _concat("Concat"), _pack(), _unpack()]
    ops += [_gather_v2(), _gather(), _gather_nd(), _one_hot(), _scatter_nd()]
    ops += [_tensor_scatter("TensorScatterUpdate"), _tensor_scatter("TensorScatterAdd")]
    return ops
