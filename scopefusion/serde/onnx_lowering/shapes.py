"""Shape ``tf`` ops: Shape, ShapeN, Size, Rank, BroadcastArgs (ONNX's int64 results cast to ``out_type``)."""

from __future__ import annotations

from typing import Callable

import numpy as np

from .emitter import LoweringEmitter

__all__ = ["LOWERINGS"]


def _to_out(e: LoweringEmitter, x: str, index: int = 0) -> None:
    dtype = e.out_dtype(index)
    if dtype.numpy == np.dtype(np.int64):
        e.result("Identity", [x], index)
    else:
        e.cast(x, dtype, out=e.outputs[index])


def _shape(e: LoweringEmitter) -> None:
    _to_out(e, e.op("Shape", [e.input(0)])[0])


def _shape_n(e: LoweringEmitter) -> None:
    for k in range(len(e.outputs)):
        if e.used(k):
            _to_out(e, e.op("Shape", [e.input(k)])[0], k)


def _size(e: LoweringEmitter) -> None:
    _to_out(e, e.op("Size", [e.input(0)])[0])


def _rank(e: LoweringEmitter) -> None:
    _to_out(e, e.op("Size", [e.op("Shape", [e.input(0)])[0]])[0])


def _broadcast_args(e: LoweringEmitter) -> None:
    zero = e.typed_scalar(0, np.dtype(np.int8), "zero")
    a = e.op("Expand", [zero, e.int64(0)])[0]
    b = e.op("Expand", [zero, e.int64(1)])[0]
    _to_out(e, e.op("Shape", [e.op("Add", [a, b])[0]])[0])


LOWERINGS: list[tuple[str, Callable[[LoweringEmitter], None]]] = [
    ("Shape", _shape), ("ShapeN", _shape_n), ("Size", _size), ("Rank", _rank), ("BroadcastArgs", _broadcast_args),
]  # fmt: skip
