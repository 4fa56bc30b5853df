"""Slicing and joining ``tf`` ops: StridedSlice, Slice, Split, SplitV, Concat, Pack, Unpack, gathers, OneHot,
scatters.

``StridedSlice`` follows TF's sparse spec: each spec entry is a new axis (``new_axis_mask``), the ellipsis
(``ellipsis_mask``, the dims no other entry names; an implicit one at the end), or one input dim sliced with
``begin`` / ``end`` / ``stride`` where ``begin_mask`` / ``end_mask`` mean "from the start / to the end in
the stride's direction" and ``shrink_axis_mask`` takes the one element at ``begin`` and drops the dim. That
becomes ``Slice`` over the named dims, ``Squeeze`` of the shrunk ones, ``Unsqueeze`` of the new axes.
Constant ``begin`` / ``end`` are resolved at export time; tensor ones are masked with ``Where`` against the
defaults, and a shrunk dim's end is ``begin + 1`` (or the end of the dim when ``begin`` is −1).

* ``Slice(x, begin, size)`` → ``Slice(x, begin, begin + size)``, a size of −1 meaning to the end.
* ``Split`` → ``Split`` into equal parts; ``SplitV`` → ``Split`` with its sizes (one −1 resolved from a
  static dim). ``Pack`` → ``Unsqueeze`` each, ``Concat``; ``Unpack`` → ``Split``, ``Squeeze``.
* ``GatherV2(params, indices, axis)`` → ``Gather``; with ``batch_dims`` > 0 → ``GatherND`` on the indices
  with the batch positions' ``batch_dims`` when ``axis == batch_dims``. ``GatherNd`` → ``GatherND``.
* ``OneHot(indices, depth, on, off)`` → ``OneHot(indices, depth, [off, on])``; ``ScatterNd`` → ``ScatterND``
  (``reduction="add"``, as TF sums duplicates) into zeros; ``TensorScatterUpdate`` / ``Add`` → ``ScatterND``.
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np

from .emitter import INT64_MAX, INT64_MIN, LoweringEmitter

__all__ = ["LOWERINGS"]


def _bits(mask: int, n: int) -> list[bool]:
    return [bool(mask >> i & 1) for i in range(n)]


def _strided_slice(e: LoweringEmitter) -> None:
    rank = e.rank(0)
    strides = [int(s) for s in np.asarray(e.require_const(3, "strides")).reshape(-1)]
    n = len(strides)
    begin_c, end_c = e.const_value(1), e.const_value(2)
    kinds = ("begin", "end", "ellipsis", "new_axis", "shrink_axis")
    masks = {k: _bits(int(e.attr(f"{k}_mask", 0) or 0), n) for k in kinds}
    if sum(masks["ellipsis"]) > 1:
        e.decline("more than one ellipsis")
    # Dense spec: (spec index or None for a full dim, input dim); new axes: positions in the output.
    entries: list[tuple[int | None, int]] = []
    new_axes: list[int] = []
    out_dims = 0
    dim = 0
    named = sum(1 for i in range(n) if not masks["new_axis"][i] and not masks["ellipsis"][i])
    has_ellipsis = any(masks["ellipsis"])
    for i in range(n):
        if masks["ellipsis"][i]:
            for _ in range(rank - named):
                entries.append((None, dim))
                dim += 1
                out_dims += 1
        elif masks["new_axis"][i]:
            new_axes.append(out_dims)
            out_dims += 1
        else:
            entries.append((i, dim))
            if not masks["shrink_axis"][i]:
                out_dims += 1
            dim += 1
    if not has_ellipsis:
        while dim < rank:
            entries.append((None, dim))
            dim += 1
    if dim != rank:
        e.decline(f"its spec names {dim} dims of a rank-{rank} input")
    sliced = [(i, d) for i, d in entries if i is not None]
    shrink = [d for i, d in sliced if masks["shrink_axis"][i]]
    x = e.input(0)
    if sliced:
        axes = [d for _, d in sliced]
        steps = [1 if masks["shrink_axis"][i] else strides[i] for i, _ in sliced]
        if any(s == 0 for s in steps):
            e.decline("a stride is 0")
        default_begin = [0 if step > 0 else -1 for step in steps]
        default_end = [INT64_MAX if step > 0 else INT64_MIN for step in steps]
        use_begin = [not masks["begin"][i] or masks["shrink_axis"][i] for i, _ in sliced]
        use_end = [not masks["end"][i] and not masks["shrink_axis"][i] for i, _ in sliced]
        shrunk = [masks["shrink_axis"][i] for i, _ in sliced]
        index = [i for i, _ in sliced]
        if begin_c is not None and end_c is not None:
            b = np.asarray(begin_c, np.int64).reshape(-1)
            en = np.asarray(end_c, np.int64).reshape(-1)
            starts = [int(b[i]) if ub else db for i, ub, db in zip(index, use_begin, default_begin)]
            ends = []
            for k, (i, ue, de) in enumerate(zip(index, use_end, default_end)):
                if shrunk[k]:
                    ends.append(INT64_MAX if starts[k] == -1 else starts[k] + 1)
                else:
                    ends.append(int(en[i]) if ue else de)
            starts_n, ends_n = e.ints(starts, "starts"), e.ints(ends, "ends")
        else:
            picked = e.ints(index, "spec")
            b_n = e.op("Gather", [e.int64(1), picked], axis=0)[0]
            en_n = e.op("Gather", [e.int64(2), picked], axis=0)[0]
            use_begin_n = e.const(np.asarray(use_begin), "use_begin")
            starts_n = e.op("Where", [use_begin_n, b_n, e.ints(default_begin, "default_begin")])[0]
            past = e.op("Where", [e.op("Equal", [starts_n, e.ints([-1], "minus_one")])[0], e.ints([INT64_MAX], "max"),
                                  e.op("Add", [starts_n, e.ints([1], "one")])[0]])[0]
            ends_n = e.op("Where", [e.const(np.asarray(use_end), "use_end"), en_n, e.ints(default_end, "default_end")])[0]
            if any(shrunk):
                ends_n = e.op("Where", [e.const(np.asarray(shrunk), "shrunk"), past, ends_n])[0]
        last = not shrink and not new_axes
        x = e.op("Slice", [x, starts_n, ends_n, e.ints(axes, "axes"), e.ints(steps, "steps")],
                 outputs=[e.outputs[0] if last else None])[0]
        if last:
            return
    if shrink:
        x = e.squeeze(x, shrink, out=None if new_axes else e.outputs[0])
    if new_axes:
        x = e.unsqueeze(x, new_axes, out=e.outputs[0])
    if not shrink and not new_axes:
        e.result("Identity", [x])


def _slice(e: LoweringEmitter) -> None:
    begin_c, size_c = e.const_value(1), e.const_value(2)
    rank = e.rank(0)
    if begin_c is not None and size_c is not None:
        b = np.asarray(begin_c, np.int64).reshape(-1)
        s = np.asarray(size_c, np.int64).reshape(-1)
        ends = np.where(s == -1, INT64_MAX, b + s)
        e.result("Slice", [e.input(0), e.ints(b, "starts"), e.ints(ends, "ends"), e.ints(range(rank), "axes")])
        return
    b_n, s_n = e.int64(1), e.int64(2)
    ends_n = e.op("Where", [e.op("Equal", [s_n, e.ints([-1], "minus_one")])[0], e.ints([INT64_MAX], "max"),
                            e.op("Add", [b_n, s_n])[0]])[0]
    e.result("Slice", [e.input(0), b_n, ends_n])


def _axis(e: LoweringEmitter, i: int, rank: int) -> int:
    axis = int(np.asarray(e.require_const(i, "axis")).reshape(-1)[0])
    return axis + rank if axis < 0 else axis


def _split_outputs(e: LoweringEmitter) -> list[str | None]:
    return [name if e.used(k) else None for k, name in enumerate(e.outputs)]


def _split(e: LoweringEmitter) -> None:
    rank = e.rank(1)
    axis = _axis(e, 0, rank)
    count = len(e.outputs)
    extra: dict[str, Any] = {"num_outputs": count} if e.opset >= 18 else {}
    e.op("Split", [e.input(1)], outputs=_split_outputs(e), axis=axis, **extra)


def _split_v(e: LoweringEmitter) -> None:
    rank = e.rank(0)
    axis = _axis(e, 2, rank)
    sizes = [int(v) for v in np.asarray(e.require_const(1, "sizes")).reshape(-1)]
    if -1 in sizes:
        total = e.dim(0, axis)
        sizes[sizes.index(-1)] = total - (sum(sizes) + 1)
    e.op("Split", [e.input(0), e.ints(sizes, "split")], outputs=_split_outputs(e), axis=axis)


def _concat(e: LoweringEmitter) -> None:
    axis_slot = 0 if e.node.op_type == "Concat" else len(e.inputs) - 1
    data = [i for i in range(len(e.inputs)) if i != axis_slot]
    rank = e.rank(data[0])
    axis = _axis(e, axis_slot, rank)
    e.result("Concat", [e.input(i) for i in data], axis=axis)


def _pack(e: LoweringEmitter) -> None:
    rank = e.rank(0) + 1
    axis = int(e.attr("axis", 0))
    axis = axis + rank if axis < 0 else axis
    pieces = [e.unsqueeze(e.input(i), [axis]) for i in range(len(e.inputs))]
    if len(pieces) == 1:
        e.result("Identity", pieces)
        return
    e.result("Concat", pieces, axis=axis)


def _unpack(e: LoweringEmitter) -> None:
    rank = e.rank(0)
    axis = int(e.attr("axis", 0))
    axis = axis + rank if axis < 0 else axis
    count = len(e.outputs)
    extra: dict[str, Any] = {"num_outputs": count} if e.opset >= 18 else {}
    parts = e.op("Split", [e.input(0)], outputs=count, axis=axis, **extra)
    for k, part in enumerate(parts):
        if e.used(k):
            e.squeeze(part, [axis], out=e.outputs[k])


def _gather_v2(e: LoweringEmitter) -> None:
    rank = e.rank(0)
    if e.node.op_type == "Gather":
        axis = 0
    else:
        axis = _axis(e, 2, rank)
    batch_dims = int(e.attr("batch_dims", 0) or 0)
    if batch_dims < 0:
        batch_dims += e.rank(1)
    if batch_dims == 0:
        e.result("Gather", [e.input(0), e.input(1)], axis=axis)
        return
    if axis != batch_dims:
        e.decline(f"batch_dims {batch_dims} with axis {axis} has no ONNX form")
    e.result("GatherND", [e.input(0), e.unsqueeze(e.int64(1), [-1])], batch_dims=batch_dims)


def _gather_nd(e: LoweringEmitter) -> None:
    e.result("GatherND", [e.input(0), e.int64(1)])


_ONE_HOT_VALUES = (np.dtype(np.float32), np.dtype(np.int64), np.dtype(np.int32))


def _one_hot(e: LoweringEmitter) -> None:
    on, off = e.input(2), e.input(3)
    dtype = e.dtype(2)
    carried = dtype.numpy in _ONE_HOT_VALUES  # the value types onnxruntime's OneHot has kernels for
    if not carried:
        on, off = e.cast(on, np.float32), e.cast(off, np.float32)
    values = e.op("Concat", [e.unsqueeze(off, [0]), e.unsqueeze(on, [0])], axis=0)[0]
    depth = e.op("Reshape", [e.int64(1), e.ints([], "scalar")])[0]
    indices = e.int64(0)
    # TF gives an all-off row for a negative index; ONNX counts it from the end, so move it out of range.
    indices = e.op("Where", [e.op("Less", [indices, e.ints([0], "zero")])[0], depth, indices])[0]
    axis = int(e.attr("axis", -1))
    if carried:
        e.result("OneHot", [indices, depth, values], axis=axis)
    else:
        e.cast(e.op("OneHot", [indices, depth, values], axis=axis)[0], dtype, out=e.outputs[0])


def _scatter_nd(e: LoweringEmitter) -> None:
    if e.opset < 16:
        e.decline("ScatterND with reduction needs opset 16")
    zeros = e.op("Expand", [e.typed_scalar(0, e.dtype(1), "zero"), e.int64(2)])[0]
    e.result("ScatterND", [zeros, e.int64(0), e.input(1)], reduction="add")


def _tensor_scatter(reduction: str | None) -> Callable[[LoweringEmitter], None]:
    def lower(e: LoweringEmitter) -> None:
        e.result("ScatterND", [e.input(0), e.int64(1), e.input(2)], reduction=reduction)

    return lower


LOWERINGS: list[tuple[str, Callable[[LoweringEmitter], None]]] = [
    ("StridedSlice", _strided_slice), ("Slice", _slice), ("Split", _split), ("SplitV", _split_v),
    ("ConcatV2", _concat), ("Concat", _concat), ("Pack", _pack), ("Unpack", _unpack), ("GatherV2", _gather_v2),
    ("Gather", _gather_v2), ("GatherNd", _gather_nd), ("OneHot", _one_hot), ("ScatterNd", _scatter_nd),
    ("TensorScatterUpdate", _tensor_scatter(None)), ("TensorScatterAdd", _tensor_scatter("add")),
]  # fmt: skip
