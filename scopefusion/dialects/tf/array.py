"""Shape-manipulating ``tf`` ops: Reshape, Squeeze, ExpandDims, Transpose, Tile, Pad, Fill, Range,
BroadcastTo, ReverseV2, SpaceToBatchND / BatchToSpaceND, and the data-dependent Where and Unique.

The inputs that decide an output's shape (Reshape's ``shape``, Tile's ``multiples``, Pad's ``paddings``...)
are value-dependent: with their value known the output shape is exact, without it the rank is kept where
it is still known. Reshape-like ops (Reshape, Squeeze, ExpandDims) forward their input's memory.
Where and Unique return as many rows as the data holds: their lengths are -1.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ... import dtypes as D
from ...ir.attrs import DTYPE, LIST_INT, STR
from ...ir.opdef import InferContext, OpDef
from ._common import (
    ALL,
    DTYPE_ONLY,
    Shape,
    int64_product,
    int_list,
    merge_dim,
    merge_shapes,
    normalize_axis,
    num_elements,
    rank_of,
    shape_from_value,
    tf_op,
    unknown,
)

__all__ = ["definitions", "reshape_shape"]


# ------------------------------------------------------------------------------------------ reshape family
def reshape_shape(x: Shape, target: Shape, target_known: bool) -> Shape:
    """Reshape's output: ``target`` with its one -1 resolved from ``x``'s element count where known.

    ``target_known`` tells a target value (where -1 means "infer") from a target of unknown dims.
    """
    if target is None:
        return None
    if not target_known:
        total = num_elements(x)
        return (total,) if len(target) == 1 and total is not None else target
    dims = list(target)
    holes = [i for i, d in enumerate(dims) if d < 0]
    if len(holes) > 1:
        raise ValueError(f"Reshape target {dims} has more than one -1")
    total = num_elements(x)
    known = int64_product([d for d in dims if d >= 0])
    if holes:
        if total is not None:
            dims[holes[0]] = _missing_dim(x, dims)  # type: ignore[arg-type]
    elif total is not None and total != known:
        raise ValueError(f"cannot reshape a tensor of {total} elements {list(x or ())} to {dims} ({known} elements)")
    return tuple(dims)


def _missing_dim(x: tuple[int, ...], dims: list[int]) -> int:
    """The -1 of a Reshape target (TF's kernel rule: with a zero in the target, zeros count on neither side)."""
    zero_target = 0 in dims
    have = int64_product([d for d in x if d > 0 or not zero_target])
    want = int64_product([d for d in dims if d > 0])
    if want == 0 or have % want:
        raise ValueError(f"cannot reshape a tensor of shape {list(x)} to {dims}")
    return have // want


def _reshape_kernel(inputs: list[np.ndarray], attrs: dict[str, Any]) -> list[np.ndarray]:
    x, dims = inputs[0], [int(d) for d in np.asarray(inputs[1]).reshape(-1).tolist()]
    if -1 in dims:
        dims[dims.index(-1)] = _missing_dim(x.shape, dims)
    return [np.reshape(x, dims)]


def _reshape() -> OpDef:
    op = tf_op("Reshape").input("tensor").input("shape", value_depend=True, dtypes=(D.INT32, D.INT64))
    op.output("output", follow=("tensor", DTYPE_ONLY)).set_memory_forward(0)

    def shape(ctx: InferContext) -> None:
        info = ctx.param("shape")
        target = shape_from_value(info, "Reshape shape") if info.data is None else tuple(int_list(info) or ())
        if info.data is not None and np.ndim(info.data) != 1:
            raise ValueError(f"Reshape shape must be a vector, found rank {np.ndim(info.data)}")
        ctx.set_output_shape(0, reshape_shape(ctx.param("tensor").shape, target, info.data is not None))

    return op.set_infer_shape(shape).set_reference(_reshape_kernel)


def _squeeze() -> OpDef:
    op = tf_op("Squeeze").input("input").output("output", follow=("input", DTYPE_ONLY)).set_memory_forward(0)
    op.attr("squeeze_dims", LIST_INT, default=())

    def shape(ctx: InferContext) -> None:
        x = ctx.param("input").shape
        axes = ctx.attr("squeeze_dims")
        if x is None:
            ctx.set_output_shape(0, None)
            return
        if axes:
            picked = {normalize_axis(a, len(x), "squeeze dim") for a in axes}
            for a in picked:
                if x[a] >= 0 and x[a] != 1:
                    raise ValueError(f"cannot squeeze dim {a} of size {x[a]} in shape {list(x)}")
            ctx.set_output_shape(0, [d for i, d in enumerate(x) if i not in picked])
        elif any(d < 0 for d in x):
            ctx.set_output_shape(0, None)  # an unknown dim may or may not be 1
        else:
            ctx.set_output_shape(0, [d for d in x if d != 1])

    def kernel(inputs: list[np.ndarray], attrs: dict[str, Any]) -> list[np.ndarray]:
        axes = attrs["squeeze_dims"]
        return [np.squeeze(inputs[0], axis=tuple(axes) if axes else None)]

    return op.set_infer_shape(shape).set_reference(kernel)


def _expand_dims() -> OpDef:
    op = tf_op("ExpandDims").input("input").input("dim", value_depend=True, dtypes=(D.INT32, D.INT64))
    op.output("output", follow=("input", DTYPE_ONLY)).set_memory_forward(0)

    def shape(ctx: InferContext) -> None:
        x = ctx.param("input").shape
        axis = int_list(ctx.param("dim"))
        if axis is not None and len(axis) != 1:
            raise ValueError(f"ExpandDims dim must hold one value, found {len(axis)}")
        if x is None:
            ctx.set_output_shape(0, None)
        elif axis is None:
            ctx.set_output_shape(0, unknown(len(x) + 1))
        else:
            a = normalize_axis(axis[0], len(x) + 1, "ExpandDims dim")
            ctx.set_output_shape(0, x[:a] + (1,) + x[a:])

    return op.set_infer_shape(shape).set_reference(lambda i, a: [np.expand_dims(i[0], int(np.asarray(i[1]).reshape(-1)[0]))])


def _transpose(name: str) -> OpDef:
    op = tf_op(name).input("x").input("perm", value_depend=True, dtypes=(D.INT32, D.INT64))
    op.output("y", follow=("x", DTYPE_ONLY))

    def shape(ctx: InferContext) -> None:
        x = ctx.param("x").shape
        perm = int_list(ctx.param("perm"))
        if perm is None:
            n = rank_of(x)
            p = ctx.param("perm").shape
            if n is None and p is not None and len(p) == 1 and p[0] >= 0:
                n = p[0]
            ctx.set_output_shape(0, unknown(n))
            return
        if x is not None and len(perm) != len(x):
            raise ValueError(f"perm {perm} does not fit a rank-{len(x)} input")
        n = len(perm)
        axes = [normalize_axis(p, n, "perm entry") for p in perm]
        if sorted(axes) != list(range(n)):
            raise ValueError(f"perm {perm} is not a permutation")
        ctx.set_output_shape(0, [-1 if x is None else x[a] for a in axes])

    def kernel(inputs: list[np.ndarray], attrs: dict[str, Any]) -> list[np.ndarray]:
        y = np.transpose(inputs[0], [int(p) for p in inputs[1]])
        return [np.conj(y) if name == "ConjugateTranspose" else y]

    return op.set_infer_shape(shape).set_reference(kernel)


def _tile() -> OpDef:
    op = tf_op("Tile").input("input").input("multiples", value_depend=True, dtypes=(D.INT32, D.INT64))
    op.output("output", follow=("input", DTYPE_ONLY))

    def shape(ctx: InferContext) -> None:
        x = ctx.param("input").shape
        m = int_list(ctx.param("multiples"))
        if m is None:
            p = ctx.param("multiples").shape
            n = rank_of(x) if x is not None else (p[0] if p is not None and len(p) == 1 and p[0] >= 0 else None)
            ctx.set_output_shape(0, unknown(n))
            return
        if x is not None and len(m) != len(x):
            raise ValueError(f"Tile multiples {m} do not fit a rank-{len(x)} input")
        x = x if x is not None else (-1,) * len(m)
        out = [0 if k == 0 else (d if k == 1 else (d * k if d >= 0 else -1)) for d, k in zip(x, m)]
        ctx.set_output_shape(0, out)

    return op.set_infer_shape(shape).set_reference(lambda i, a: [np.tile(i[0], [int(k) for k in i[1]])])


def _padded(ctx: InferContext, input_name: str) -> None:
    x = ctx.param(input_name).shape
    info = ctx.param("paddings")
    if info.data is None:
        p = info.shape
        n = rank_of(x) if x is not None else (p[0] if p is not None and len(p) == 2 and p[0] >= 0 else None)
        ctx.set_output_shape(0, unknown(n))
        return
    pads = np.asarray(info.data).reshape(-1, 2) if np.asarray(info.data).size else np.zeros((0, 2), np.int64)
    if np.asarray(info.data).ndim != 2 or np.asarray(info.data).shape[1] != 2:
        raise ValueError(f"paddings must be an [n, 2] matrix, found shape {list(np.asarray(info.data).shape)}")
    if x is not None and len(pads) != len(x):
        raise ValueError(f"paddings for {len(pads)} dims do not fit a rank-{len(x)} input")
    if (pads < 0).any():
        raise ValueError(f"paddings must be non-negative, found {pads.tolist()}")
    x = x if x is not None else (-1,) * len(pads)
    ctx.set_output_shape(0, [d + int(a) + int(b) if d >= 0 else -1 for d, (a, b) in zip(x, pads)])


def _pad(name: str) -> OpDef:
    op = tf_op(name).input("input").input("paddings", value_depend=True, dtypes=(D.INT32, D.INT64))
    if name == "PadV2":
        op.input("constant_values")
    if name == "MirrorPad":
        op.attr("mode", STR)
    op.output("output", follow=("input", DTYPE_ONLY)).set_infer_shape(lambda ctx: _padded(ctx, "input"))

    def kernel(inputs: list[np.ndarray], attrs: dict[str, Any]) -> list[np.ndarray]:
        x, pads = inputs[0], np.asarray(inputs[1]).astype(np.int64).tolist()
        if name == "MirrorPad":
            return [np.pad(x, pads, mode="reflect" if attrs["mode"] == "REFLECT" else "symmetric")]
        value = inputs[2] if name == "PadV2" else np.zeros((), x.dtype)
        return [np.pad(x, pads, mode="constant", constant_values=value)]

    return op.set_reference(kernel)


def _fill() -> OpDef:
    op = tf_op("Fill").input("dims", value_depend=True, dtypes=(D.INT32, D.INT64)).input("value")
    op.output("output", follow=("value", DTYPE_ONLY))

    def shape(ctx: InferContext) -> None:
        v = ctx.param("value").shape
        if v is not None and len(v) != 0:
            raise ValueError(f"Fill value must be a scalar, found shape {list(v)}")
        dims = int_list(ctx.param("dims"))
        if dims is not None and any(d < 0 for d in dims):
            raise ValueError(f"Fill dims must be non-negative, found {dims}")
        ctx.set_output_shape(0, shape_from_value(ctx.param("dims"), "Fill dims"))

    return op.set_infer_shape(shape).set_reference(lambda i, a: [np.full([int(d) for d in i[0]], i[1], dtype=i[1].dtype)])


def range_size(start: float, limit: float, delta: float, integral: bool) -> int:
    """The length of ``Range(start, limit, delta)`` (TF's rule); raises on a zero or wrong-signed delta."""
    if delta == 0:
        raise ValueError("Range delta must not be 0")
    if (delta > 0 and start > limit) or (delta < 0 and start < limit):
        raise ValueError(f"Range from {start} to {limit} never ends with delta {delta}")
    if integral:
        return int((abs(int(limit) - int(start)) + abs(int(delta)) - 1) // abs(int(delta)))
    return int(np.ceil(abs((limit - start) / delta)))


def _range() -> OpDef:
    op = tf_op("Range").input("start", value_depend=True).input("limit", value_depend=True).input("delta", value_depend=True)
    op.output("output", follow=("start", DTYPE_ONLY))

    def shape(ctx: InferContext) -> None:
        infos = [ctx.param(n) for n in ("start", "limit", "delta")]
        for n, info in zip(("start", "limit", "delta"), infos):
            if info.shape is not None and len(info.shape) != 0:
                raise ValueError(f"Range {n} must be a scalar, found shape {list(info.shape)}")
        if any(info.data is None for info in infos):
            ctx.set_output_shape(0, (-1,))
            return
        start, limit, delta = (np.asarray(info.data).item() for info in infos)
        dtype = infos[0].dtype
        ctx.set_output_shape(0, (range_size(start, limit, delta, dtype is not None and dtype.is_integer),))

    def kernel(inputs: list[np.ndarray], attrs: dict[str, Any]) -> list[np.ndarray]:
        start, limit, delta = (np.asarray(x) for x in inputs)
        n = range_size(start.item(), limit.item(), delta.item(), start.dtype.kind in "iu")
        return [(start + delta * np.arange(n)).astype(start.dtype)]

    return op.set_infer_shape(shape).set_reference(kernel)


def _broadcast_to() -> OpDef:
    op = tf_op("BroadcastTo").input("input").input("shape", value_depend=True, dtypes=(D.INT32, D.INT64))
    op.output("output", follow=("input", DTYPE_ONLY))

    def shape(ctx: InferContext) -> None:
        x = ctx.param("input").shape
        target = shape_from_value(ctx.param("shape"), "BroadcastTo shape")
        if target is None or x is None:
            ctx.set_output_shape(0, target)
            return
        if len(x) > len(target):
            raise ValueError(f"cannot broadcast shape {list(x)} to the lower rank {list(target)}")
        out = list(target)
        offset = len(target) - len(x)
        for i, d in enumerate(x):
            t = target[offset + i]
            if d > 1:
                out[offset + i] = merge_dim(t, d, f"input dim {i} and target dim")
        ctx.set_output_shape(0, out)

    return op.set_infer_shape(shape).set_reference(lambda i, a: [np.array(np.broadcast_to(i[0], [int(d) for d in i[1]]))])


def _reverse() -> OpDef:
    op = tf_op("ReverseV2").input("tensor").input("axis", value_depend=True, dtypes=(D.INT32, D.INT64))
    op.output("output", follow=("tensor", ALL))
    return op.set_reference(lambda i, a: [np.flip(i[0], axis=tuple(int(x) for x in np.asarray(i[1]).reshape(-1)))])


def _space_batch(name: str) -> OpDef:
    third = "paddings" if name == "SpaceToBatchND" else "crops"
    op = tf_op(name).input("input").input("block_shape", value_depend=True).input(third, value_depend=True)
    op.output("output", follow=("input", DTYPE_ONLY))

    def shape(ctx: InferContext) -> None:
        x = ctx.param("input").shape
        block = int_list(ctx.param("block_shape"))
        pads = int_list(ctx.param(third))
        if x is None:
            ctx.set_output_shape(0, None)
            return
        if block is None or pads is None:
            bs = ctx.param("block_shape").shape
            m = len(block) if block is not None else (bs[0] if bs is not None and len(bs) == 1 and bs[0] >= 0 else None)
            ctx.set_output_shape(0, unknown(len(x)) if m is None else (-1,) * (1 + m) + x[1 + m :])
            return
        if len(pads) != 2 * len(block) or len(x) < 1 + len(block):
            raise ValueError(f"{name}: block_shape {block} and {third} {pads} do not fit shape {list(x)}")
        prod = int(np.prod(block, dtype=np.int64))
        out = list(x)
        if name == "SpaceToBatchND":
            out[0] = x[0] * prod if x[0] >= 0 else -1
            for i, b in enumerate(block):
                d = x[1 + i]
                if d >= 0:
                    padded = d + pads[2 * i] + pads[2 * i + 1]
                    if padded % b:
                        raise ValueError(f"padded size {padded} of dim {1 + i} is not divisible by block {b}")
                    out[1 + i] = padded // b
                else:
                    out[1 + i] = -1
        else:
            if x[0] >= 0 and x[0] % prod:
                raise ValueError(f"batch {x[0]} is not divisible by the block size product {prod}")
            out[0] = x[0] // prod if x[0] >= 0 else -1
            for i, b in enumerate(block):
                d = x[1 + i]
                out[1 + i] = d * b - pads[2 * i] - pads[2 * i + 1] if d >= 0 else -1
        ctx.set_output_shape(0, out)

    return op.set_infer_shape(shape)


# ------------------------------------------------------------------------------------------ data-dependent
def _where() -> OpDef:
    """``Where(condition)``: the coordinates of true (non-zero) elements, ``[count, rank]`` int64."""
    op = tf_op("Where").input("input").output("index", dtypes=(D.INT64,))
    op.set_infer_shape(lambda ctx: ctx.set_output_shape(0, (-1, -1 if (s := ctx.param("input").shape) is None else len(s))))
    return op.set_reference(lambda i, a: [np.argwhere(np.asarray(i[0]) != 0).astype(np.int64)])


def _unique() -> OpDef:
    op = tf_op("Unique").input("x").output("y", follow=("x", DTYPE_ONLY)).output("idx").attr("out_idx", DTYPE, default=D.INT32)

    def shape(ctx: InferContext) -> None:
        x = ctx.param("x").shape
        if x is not None and len(x) != 1:
            raise ValueError(f"Unique takes a vector, found rank {len(x)}")
        ctx.set_output_shape(0, (-1,))
        ctx.set_output_shape(1, x if x is not None else (-1,))

    def dtype(ctx: InferContext) -> None:
        ctx.set_output_dtype(0, ctx.param("x").dtype)
        ctx.set_output_dtype(1, ctx.attr("out_idx"))

    def kernel(inputs: list[np.ndarray], attrs: dict[str, Any]) -> list[np.ndarray]:
        x = np.asarray(inputs[0])
        values, first, inverse = np.unique(x, return_index=True, return_inverse=True)
        order = np.argsort(first, kind="stable")  # TF keeps the order of first occurrence
        rank = np.empty_like(order)
        rank[order] = np.arange(len(order))
        return [values[order], rank[inverse.reshape(-1)].astype(attrs["out_idx"].numpy)]

    return op.set_infer_shape(shape).set_infer_dtype(dtype).set_reference(kernel)


def _invert_permutation() -> OpDef:
    op = tf_op("InvertPermutation").input("x").output("y", follow=("x", ALL))
    op.set_infer_shape(lambda ctx: ctx.set_output_shape(0, merge_shapes(ctx.input_shape(0), (-1,), "InvertPermutation input")))
    return op.set_reference(lambda i, a: [np.argsort(i[0]).astype(i[0].dtype)])


def definitions() -> list[OpDef]:
    """Every shape-manipulating ``tf`` op definition."""
    ops = [_reshape(), _squeeze(), _expand_dims(), _transpose("Transpose"), _transpose("ConjugateTranspose"), _tile()]
    ops += [_pad("Pad"), _pad("PadV2"), _pad("MirrorPad"), _fill(), _range(), _broadcast_to(), _reverse()]
    ops += [_space_batch("SpaceToBatchND"), _space_batch("BatchToSpaceND")]
    ops += [_where(), _unique(), _invert_permutation()]
    return ops
