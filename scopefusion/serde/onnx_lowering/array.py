"""Reshaping ``tf`` ops: Reshape, Squeeze, ExpandDims, Transpose, Tile, Pad, Fill, Range, BroadcastTo,
ReverseV2, Where, Unique, InvertPermutation.

* ``Reshape`` → ``Reshape`` (int64 shape); a constant shape holding 0 sets ``allowzero`` (TF's 0 is an
  empty dim, ONNX's copies the input's).
* ``Pad`` / ``PadV2`` / ``MirrorPad`` (``[rank, 2]`` paddings) → ``Pad`` with ONNX's ``[begins…, ends…]``;
  ``REFLECT`` → ``reflect``, ``SYMMETRIC`` has no ONNX mode.
* ``Fill(dims, value)`` → ``Expand(value, dims)``; ``ReverseV2`` → ``Slice`` with step −1 on each axis;
  ``Where(x)`` (one input) → ``Transpose(NonZero(x))``; ``Unique`` → ``Unique(sorted=0)`` (first-seen
  order, as TF), its inverse indices cast to ``out_idx``; ``InvertPermutation(p)`` →
  ``ScatterElements(zeros, p, Range(0, n))``.
"""

from __future__ import annotations

from typing import Callable

import numpy as np

from .emitter import INT64_MIN, LoweringEmitter

__all__ = ["LOWERINGS"]


def _reshape(e: LoweringEmitter) -> None:
    shape = e.const_value(1)
    zero = shape is not None and np.count_nonzero(np.asarray(shape) == 0) > 0
    e.result("Reshape", [e.input(0), e.int64(1)], allowzero=1 if zero else None)


def _squeeze(e: LoweringEmitter) -> None:
    axes = list(e.attr("squeeze_dims", ()) or e.attr("axis", ()) or ())
    if not axes:
        t = e.input_type(0)
        if t is None or not t.is_static:
            e.result("Squeeze", [e.input(0)])
            return
        axes = [i for i, d in enumerate(t.shape) if d == 1]
    e.squeeze(e.input(0), axes, out=e.outputs[0])


def _expand_dims(e: LoweringEmitter) -> None:
    axis = e.const_value(1)
    if axis is not None:
        e.unsqueeze(e.input(0), [int(np.asarray(axis).reshape(-1)[0])], out=e.outputs[0])
        return
    e.result("Unsqueeze", [e.input(0), e.op("Reshape", [e.int64(1), e.ints([1], "shape")])[0]])


def _transpose(e: LoweringEmitter) -> None:
    perm = e.require_const(1, "permutation")
    e.result("Transpose", [e.input(0)], perm=[int(p) for p in np.asarray(perm).reshape(-1)])


def _tile(e: LoweringEmitter) -> None:
    e.result("Tile", [e.input(0), e.int64(1)])


def _onnx_pads(e: LoweringEmitter, i: int) -> str:
    value = e.const_value(i)
    if value is not None:
        pairs = np.asarray(value, np.int64).reshape(-1, 2)
        return e.ints(np.concatenate([pairs[:, 0], pairs[:, 1]]), "pads")
    flat = e.op("Reshape", [e.op("Transpose", [e.int64(i)], perm=[1, 0])[0], e.ints([-1], "flat")])[0]
    return flat


def _pad(e: LoweringEmitter) -> None:
    pads = _onnx_pads(e, 1)
    if e.node.op_type == "MirrorPad":
        mode = str(e.attr("mode", "REFLECT"))
        if mode != "REFLECT":
            e.decline(f"MirrorPad mode {mode!r} has no ONNX Pad mode")
        e.result("Pad", [e.input(0), pads], mode="reflect")
        return
    value = e.input(2) if e.node.op_type == "PadV2" else ""
    e.result("Pad", [e.input(0), pads, value])


def _fill(e: LoweringEmitter) -> None:
    e.result("Expand", [e.input(1), e.int64(0)])


def _range(e: LoweringEmitter) -> None:
    dtype = e.out_dtype(0)
    names = []
    for i in range(3):
        name = e.input(i)
        if e.dtype(i) != dtype:
            name = e.cast(name, dtype)
        names.append(name)
    e.result("Range", names)


def _broadcast_to(e: LoweringEmitter) -> None:
    e.result("Expand", [e.input(0), e.int64(1)])


def _reverse(e: LoweringEmitter) -> None:
    axes = [int(a) for a in np.asarray(e.require_const(1, "axes")).reshape(-1)]
    if not axes:
        e.result("Identity", [e.input(0)])
        return
    n = len(axes)
    e.result("Slice", [e.input(0), e.ints([-1] * n, "starts"), e.ints([INT64_MIN] * n, "ends"), e.ints(axes, "axes"),
                       e.ints([-1] * n, "steps")])


def _where(e: LoweringEmitter) -> None:
    if len(e.inputs) != 1:
        e.result("Where", [e.input(0), e.input(1), e.input(2)])
        return
    e.result("Transpose", [e.op("NonZero", [e.input(0)])[0]], perm=[1, 0])


def _unique(e: LoweringEmitter) -> None:
    if e.rank(0) != 1:
        e.decline("its input is not a vector")
    x, dtype = e.input(0), e.dtype(0)
    carried = dtype.numpy in (np.dtype(np.float32), np.dtype(np.float64), np.dtype(np.int64), np.dtype(np.int8))
    if not carried:  # onnxruntime's Unique has kernels for these types only; the others go through int64
        x = e.cast(x, np.int64)
    y, _, inverse = e.op("Unique", [x], outputs=[e.outputs[0] if carried else None, "", None], sorted=0)
    if not carried:
        e.cast(y, dtype, out=e.outputs[0])
    if e.used(1):
        e.cast(inverse, e.out_dtype(1), out=e.outputs[1])


def _invert_permutation(e: LoweringEmitter) -> None:
    p = e.input(0)
    n = e.op("Squeeze", [e.op("Shape", [p])[0], e.ints([0], "axes")])[0]
    dtype = e.dtype(0)
    count = e.cast(n, dtype)
    positions = e.op("Range", [e.typed_scalar(0, dtype, "zero"), count, e.typed_scalar(1, dtype, "one")])[0]
    zeros = e.op("Expand", [e.typed_scalar(0, dtype, "zero"), e.op("Shape", [p])[0]])[0]
    e.result("ScatterElements", [zeros, e.cast(p, np.int64), positions], axis=0)


LOWERINGS: list[tuple[str, Callable[[LoweringEmitter], None]]] = [
    ("Reshape", _reshape), ("Squeeze", _squeeze), ("ExpandDims", _expand_dims), ("Transpose", _transpose),
    ("ConjugateTranspose", _transpose), ("Tile", _tile), ("Pad", _pad), ("PadV2", _pad), ("MirrorPad", _pad),
    ("Fill", _fill), ("Range", _range), ("BroadcastTo", _broadcast_to), ("ReverseV2", _reverse), ("Where", _where),
    ("Unique", _unique), ("InvertPermutation", _invert_permutation),
]  # fmt: skip
