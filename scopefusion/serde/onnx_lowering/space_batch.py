"""``SpaceToBatchND`` and ``BatchToSpaceND`` (``tf.space_to_batch_nd``, and what ``tf.nn.atrous_conv2d`` and
dilated depthwise convolutions are built from), and their chain around a convolution as one dilated ``Conv``.

With ``M`` block dims (input dims ``1…M``) and a constant ``block_shape`` ``b``:

* ``SpaceToBatchND(x)``: ``Pad`` the block dims, ``Reshape`` to ``[N, S₁/b₁, b₁, …, S_M/b_M, b_M, R…]``,
  ``Transpose`` to ``[b₁, …, b_M, N, S₁/b₁, …, S_M/b_M, R…]``, ``Reshape`` to ``[b₁⋯b_M·N, S₁/b₁, …, R…]``.
* ``BatchToSpaceND(x)``: the reverse (``Reshape`` to ``[b₁, …, b_M, B/(b₁⋯b_M), S…, R…]``, ``Transpose`` to
  ``[B/(b₁⋯b_M), S₁, b₁, …, S_M, b_M, R…]``, ``Reshape``), then a ``Slice`` that drops the crops.

``paddings`` and ``crops`` may be computed at run time (TF computes them from the input's shape when the
spatial dims are unknown). The reshape targets are constants where the shapes and pads are static apart
from the batch, else computed from ``Shape``.

**Dilated convolution.** ``SpaceToBatchND(x, b, pads) → Conv2D / DepthwiseConv2dNative (VALID, stride 1,
no dilation, constant filter) → BatchToSpaceND(b, crops)`` on NHWC data (or on NWC data with the
convolution as ``tf.nn.conv1d`` writes it, ``ExpandDims → Conv2D → Squeeze``) is the convolution of ``x`` with
dilations ``b`` and pads ``pads − crops`` (each batch slot of the middle convolution holds one phase of the
padded input, and interleaving the phases back is the dilated convolution; cropping its ends is padding
less). ``BatchToSpaceND`` writes that one ``Conv``, reading ``x`` directly (with constant pads and crops,
when every pad is at least its crop) or through a ``Pad`` by the run-time ``pads − crops`` (a negative
value crops); the two nodes before it are then unread and the clean-up removes them. Anything else is
lowered node by node, which computes the same values.
"""

from __future__ import annotations

from typing import Callable, Sequence

import numpy as np

from ...ir.graph import Node, Value
from .emitter import INT64_MAX, LoweringEmitter
from .nn import to_channels_first, to_channels_last

__all__ = ["LOWERINGS"]


def _block_and_pairs(e: LoweringEmitter, what: str) -> tuple[list[int], list[tuple[int, int]] | None]:
    """The constant ``block_shape`` and the ``paddings`` / ``crops`` pairs (None when computed at run time)."""
    block = [int(v) for v in e.require_const(1, "block_shape").reshape(-1)]
    rank = e.rank(0)
    if not block or any(b < 1 for b in block):
        e.decline(f"block_shape {block} is not M >= 1 positive sizes")
    if rank < 1 + len(block):
        e.decline(f"rank {rank} is too small for {len(block)} block dims")
    found = e.const_value(2)
    if found is None:
        t = e.input_type(2)
        if t is None or t.rank != 2 or t.shape[0] not in (-1, len(block)):
            e.decline(f"{what} is not a [{len(block)}, 2] tensor")
        return block, None
    pairs = np.asarray(found).reshape(-1)
    if len(pairs) != 2 * len(block) or any(p < 0 for p in pairs):
        e.decline(f"{what} {pairs.tolist()} is not {len(block)} pairs of sizes >= 0")
    return block, [(int(pairs[2 * i]), int(pairs[2 * i + 1])) for i in range(len(block))]


def _static(dims: Sequence[int] | None) -> bool:
    return dims is not None and all(d >= 0 for d in dims)


def _shape_parts(e: LoweringEmitter, x: str, m: int) -> tuple[str, str, str]:
    """``Shape(x)`` cut into the batch ``[1]``, the block dims ``[M]`` and the rest."""
    shape = e.op("Shape", [x])[0]

    def cut(start: int, end: int) -> str:
        return e.op("Slice", [shape, e.ints([start], "start"), e.ints([end], "end")])[0]

    return cut(0, 1), cut(1, 1 + m), cut(1 + m, INT64_MAX)


def _onnx_pads(e: LoweringEmitter, pairs: str, m: int, rank: int) -> str:
    """ONNX ``Pad``'s ``pads`` for a run-time ``[M, 2]`` int64 tensor of pairs on dims ``1…M``."""
    by_side = e.op("Transpose", [pairs], perm=[1, 0])[0]  # [2, M]: the begins, the ends
    parts = [e.const(np.zeros((2, 1), np.int64), "batch_pads"), by_side]
    if rank - 1 - m:
        parts.append(e.const(np.zeros((2, rank - 1 - m), np.int64), "rest_pads"))
    return e.op("Reshape", [e.op("Concat", parts, axis=1)[0], e.ints([-1], "flat")])[0]


def _space_to_batch(e: LoweringEmitter) -> None:
    block, pads = _block_and_pairs(e, "paddings")
    m, rank = len(block), e.rank(0)
    x = e.input(0)
    if pads is None:
        x = e.op("Pad", [x, _onnx_pads(e, e.int64(2), m, rank)])[0]
    elif any(p != (0, 0) for p in pads):
        begin = [0, *(p[0] for p in pads), *([0] * (rank - 1 - m))]
        end = [0, *(p[1] for p in pads), *([0] * (rank - 1 - m))]
        x = e.op("Pad", [x, e.ints(begin + end, "pads")])[0]
    t = e.input_type(0)
    dims = list(t.shape)[1:] if t is not None and t.rank == rank else None
    if pads is not None and dims is not None and _static(dims):
        padded = [d + a + b for d, (a, b) in zip(dims, pads)]
        if any(p % b for p, b in zip(padded, block)):
            e.decline(f"padded block dims {padded} are not multiples of block_shape {block}")
        quotients = [p // b for p, b in zip(padded, block)]
        rest = dims[m:]
        split = e.ints([0, *(v for q, b in zip(quotients, block) for v in (q, b)), *rest], "split_shape")
        joined = e.ints([-1, *quotients, *rest], "joined_shape")
    else:
        batch, spatial, rest_dims = _shape_parts(e, x, m)
        quotients_t = e.op("Div", [spatial, e.ints(block, "block")])[0]
        pairs = e.op("Concat", [e.unsqueeze(quotients_t, [1]),
                                e.const(np.asarray(block, np.int64).reshape(-1, 1), "block_column")], axis=1)[0]
        interleaved = e.op("Reshape", [pairs, e.ints([-1], "flat")])[0]
        split = e.op("Concat", [batch, interleaved, rest_dims], axis=0)[0]
        new_batch = e.op("Mul", [batch, e.ints([int(np.prod(block))], "block_product")])[0]
        joined = e.op("Concat", [new_batch, quotients_t, rest_dims], axis=0)[0]
    perm = [*range(2, 2 * m + 1, 2), 0, *range(1, 2 * m, 2), *range(2 * m + 1, rank + m)]
    y = e.op("Reshape", [x, split])[0]
    y = e.op("Transpose", [y], perm=perm)[0]
    e.result("Reshape", [y, joined])


def _batch_to_space(e: LoweringEmitter) -> None:
    if _dilated_conv(e):
        return
    block, crops = _block_and_pairs(e, "crops")
    m, rank = len(block), e.rank(0)
    product = int(np.prod(block))
    t = e.input_type(0)
    dims = list(t.shape)[1:] if t is not None and t.rank == rank else None
    if dims is not None and _static(dims):
        split = e.ints([*block, -1, *dims], "split_shape")
        joined = e.ints([-1, *(d * b for d, b in zip(dims, block)), *dims[m:]], "joined_shape")
    else:
        batch, spatial, rest_dims = _shape_parts(e, e.input(0), m)
        new_batch = e.op("Div", [batch, e.ints([product], "block_product")])[0]
        split = e.op("Concat", [e.ints(block, "block"), new_batch, spatial, rest_dims], axis=0)[0]
        grown = e.op("Mul", [spatial, e.ints(block, "block")])[0]
        joined = e.op("Concat", [new_batch, grown, rest_dims], axis=0)[0]
    perm = [m, *(v for i in range(m) for v in (m + 1 + i, i)), *range(2 * m + 1, rank + m)]
    y = e.op("Reshape", [e.input(0), split])[0]
    y = e.op("Transpose", [y], perm=perm)[0]
    axes = e.ints(list(range(1, m + 1)), "axes")
    if crops is None:
        y = e.op("Reshape", [y, joined])[0]
        pairs = e.int64(2)
        starts = e.op("Gather", [pairs, e.const(np.asarray(0, np.int64), "begin")], axis=1)[0]
        crop_ends = e.op("Gather", [pairs, e.const(np.asarray(1, np.int64), "end")], axis=1)[0]
        sizes = e.op("Slice", [e.op("Shape", [y])[0], e.ints([1], "start"), e.ints([1 + m], "stop")])[0]
        e.result("Slice", [y, starts, e.op("Sub", [sizes, crop_ends])[0], axes])
    elif not any(c != (0, 0) for c in crops):
        e.result("Reshape", [y, joined])
    else:
        y = e.op("Reshape", [y, joined])[0]
        starts_c = [c[0] for c in crops]
        ends = [-c[1] if c[1] else INT64_MAX for c in crops]
        e.result("Slice", [y, e.ints(starts_c, "starts"), e.ints(ends, "ends"), axes])


# ----------------------------------------------------------------------------- the dilated convolution
def _int_values(e: LoweringEmitter, node: Node, i: int) -> list[int] | None:
    found = e.value_const(node.inputs[i]) if i < len(node.inputs) else None
    return None if found is None else [int(v) for v in np.asarray(found).reshape(-1)]


def _producer(value: Value | None, op: str | tuple[str, ...]) -> Node | None:
    """The node computing ``value`` when its op is ``op`` (or one of them)."""
    if value is None:
        return None
    node = value.producer
    return node if node.op in ((op,) if isinstance(op, str) else op) else None


def _chain(e: LoweringEmitter) -> tuple[Node, Node, int] | None:
    """The ``SpaceToBatchND`` and the convolution of a chain ending at this node, and its spatial rank: 2, or 1
    for ``tf.nn.conv1d``'s ``ExpandDims(axis 1) → Conv2D → Squeeze(axis 1)``."""
    conv = _producer(e.node.inputs[0], ("tf.Conv2D", "tf.DepthwiseConv2dNative"))
    rank = 2
    if conv is None:
        squeeze = _producer(e.node.inputs[0], "tf.Squeeze")
        if squeeze is None or [int(v) % 4 for v in squeeze.attrs.get("squeeze_dims", ())] != [1]:
            return None
        conv, rank = _producer(squeeze.inputs[0], "tf.Conv2D"), 1
    if conv is None:
        return None
    source = conv.inputs[0]
    if rank == 1:
        expand = _producer(source, "tf.ExpandDims")
        axis = _int_values(e, expand, 1) if expand is not None else None
        if expand is None or axis is None or len(axis) != 1 or axis[0] % 4 != 1:
            return None
        source = expand.inputs[0]
    space = _producer(source, "tf.SpaceToBatchND")
    if space is None or str(conv.attrs.get("data_format", "NHWC")) != "NHWC":
        return None
    if str(conv.attrs.get("padding", "")) != "VALID":
        return None
    if any(int(v) != 1 for key in ("strides", "dilations") for v in conv.attrs.get(key, (1, 1, 1, 1))):
        return None
    return space, conv, rank


def _dilated_conv(e: LoweringEmitter) -> bool:
    """Writes ``SpaceToBatchND → convolution → BatchToSpaceND`` as one dilated ``Conv`` when the chain ending
    at this node is one (see the module docstring); returns whether it did."""
    found = _chain(e)
    if found is None:
        return False
    space, conv, r = found
    block = _int_values(e, e.node, 1)
    if block is None or len(block) != r or _int_values(e, space, 1) != block:
        return False
    weights = e.value_const(conv.inputs[1]) if len(conv.inputs) > 1 else None
    x = e.value_name(space.inputs[0]) if space.inputs[0] is not None else None
    x_type = space.inputs[0].type if space.inputs[0] is not None else None
    pads_value = space.inputs[2] if len(space.inputs) > 2 else None
    pads_name = e.value_name(pads_value) if pads_value is not None else None
    if weights is None or weights.ndim != 4 or x is None or getattr(x_type, "rank", None) != r + 2 or not pads_name:
        return False
    if r == 1:
        if weights.shape[0] != 1:
            return False
        weights = weights[0]
    kernel, (c_in, c_out) = list(weights.shape[:r]), weights.shape[r:]
    to_oi_spatial = [r + 1, r, *range(r)]
    if conv.op == "tf.DepthwiseConv2dNative":
        w = np.transpose(weights.reshape(*kernel, 1, c_in * c_out), to_oi_spatial)
        group = c_in
    else:
        channels = x_type.shape[-1]  # type: ignore[union-attr]
        if channels < 0 or channels % c_in:
            return False
        w, group = np.transpose(weights, to_oi_spatial), channels // c_in
    first = e.op("Transpose", [x], perm=to_channels_first(r + 2))[0]
    pads, crops = _int_values(e, space, 2), _int_values(e, e.node, 2)
    if pads is not None and crops is not None:
        if len(pads) != 2 * r or len(crops) != 2 * r:
            return False
        begin = [pads[2 * d] - crops[2 * d] for d in range(r)]
        end = [pads[2 * d + 1] - crops[2 * d + 1] for d in range(r)]
        if min(begin + end) < 0:
            return False
        conv_pads = begin + end
    else:  # pads and crops computed at run time: their difference pads (or, negative, crops) the input
        difference = e.op("Sub", [e.cast(pads_name, np.int64), e.cast(e.input(2), np.int64)])[0]
        first = e.op("Pad", [first, _onnx_pads_channels_first(e, difference, r)])[0]
        conv_pads = [0] * (2 * r)
    y = e.op("Conv", [first, e.const(w, "W")], kernel_shape=kernel, dilations=block, pads=conv_pads,
             group=group if group != 1 else None)[0]
    e.result("Transpose", [y], perm=to_channels_last(r + 2))
    return True


def _onnx_pads_channels_first(e: LoweringEmitter, pairs: str, r: int) -> str:
    """ONNX ``pads`` of a channels-first tensor for a run-time ``[r, 2]`` int64 tensor of (begin, end) pairs
    on its ``r`` spatial dims."""
    by_side = e.op("Transpose", [pairs], perm=[1, 0])[0]
    zeros = e.const(np.zeros((2, 2), np.int64), "batch_channel_pads")
    return e.op("Reshape", [e.op("Concat", [zeros, by_side], axis=1)[0], e.ints([-1], "flat")])[0]


LOWERINGS: list[tuple[str, Callable[[LoweringEmitter], None]]] = [
    ("SpaceToBatchND", _space_to_batch), ("BatchToSpaceND", _batch_to_space),
]  # fmt: skip
