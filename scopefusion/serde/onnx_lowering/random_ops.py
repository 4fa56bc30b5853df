"""Random ``tf`` ops → ONNX's random ops, drawing from the same distributions (not the same numbers: TF's
Philox streams and seeds have no ONNX form, so a seeded TF op gives other samples in ONNX; the seed, when
set, is passed on so the ONNX model is deterministic as the TF one is).

* ``RandomUniform`` → ``RandomUniformLike`` over ``[0, 1)``; ``RandomStandardNormal`` → ``RandomNormalLike``.
* ``TruncatedNormal`` (a standard normal redrawn until it lies within two standard deviations) → 16
  normal draws per element, the first inside ``[-2, 2]`` taken (all 16 fall outside with probability
  ``0.0455¹⁶ ≈ 3e-22``; then the last draw is clipped).
* ``RandomUniformInt(shape, minval, maxval)`` → ``minval + ⌊u · (maxval - minval)⌋`` with ``u`` uniform in
  ``[0, 1)`` as float64, kept below ``maxval``.

The ``shape`` input becomes the shape of a ``ConstantOfShape`` the ``*Like`` ops read. Opset 22 gave the
random ops new versions that onnxruntime (1.32) has no kernel for, so from opset 22 on they decline, asking
for opset 21 or lower.
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np

from .emitter import LoweringEmitter

__all__ = ["LOWERINGS"]

_TRUNCATED_DRAWS = 16
LAST_RUNNABLE_OPSET = 21


def _runnable(e: LoweringEmitter) -> None:
    if e.opset > LAST_RUNNABLE_OPSET:
        e.decline(f"ONNX's random ops at opset {e.opset} have no onnxruntime kernel; export at --opset "
                  f"{LAST_RUNNABLE_OPSET} or lower")


def _seed(e: LoweringEmitter) -> dict[str, Any]:
    seed, seed2 = int(e.attr("seed", 0)), int(e.attr("seed2", 0))
    return {"seed": float(seed * 7919 + seed2)} if seed or seed2 else {}


def _shaped(e: LoweringEmitter, leading: int | None = None) -> str:
    """A zero tensor of the ``shape`` input (with a ``leading`` dim in front)."""
    _runnable(e)
    shape = e.int64(0)
    if leading is not None:
        shape = e.op("Concat", [e.ints([leading], "leading"), shape], axis=0)[0]
    return e.op("ConstantOfShape", [shape])[0]


def _uniform(e: LoweringEmitter) -> None:
    e.result("RandomUniformLike", [_shaped(e)], dtype=e.onnx_type(e.out_dtype()), low=0.0, high=1.0, **_seed(e))


def _normal(e: LoweringEmitter) -> None:
    e.result("RandomNormalLike", [_shaped(e)], dtype=e.onnx_type(e.out_dtype()), mean=0.0, scale=1.0, **_seed(e))


def _truncated_normal(e: LoweringEmitter) -> None:
    dtype = e.out_dtype()
    draws = e.op("RandomNormalLike", [_shaped(e, _TRUNCATED_DRAWS)], dtype=e.onnx_type(dtype), mean=0.0, scale=1.0,
                 **_seed(e))[0]
    inside = e.op("LessOrEqual", [e.op("Abs", [draws])[0], e.typed_scalar(2, dtype, "two")])[0]
    first = e.op("ArgMax", [e.cast(inside, np.int32)], axis=0, keepdims=1)[0]
    picked = e.op("GatherElements", [draws, first], axis=0)[0]
    picked = e.squeeze(picked, [0])
    e.result("Clip", [picked, e.typed_scalar(-2, dtype, "low"), e.typed_scalar(2, dtype, "high")])


def _uniform_int(e: LoweringEmitter) -> None:
    dtype = e.out_dtype()
    low, high = e.input(1), e.input(2)
    u = e.op("RandomUniformLike", [_shaped(e)], dtype=11, low=0.0, high=1.0, **_seed(e))[0]
    span = e.cast(e.op("Sub", [high, low])[0], np.float64)
    offset = e.cast(e.op("Floor", [e.op("Mul", [u, span])[0]])[0], dtype)
    top = e.op("Sub", [high, e.typed_scalar(1, dtype, "one")])[0]
    e.result("Min", [e.op("Add", [low, offset])[0], top])


LOWERINGS: list[tuple[str, Callable[[LoweringEmitter], None]]] = [
    ("RandomUniform", _uniform), ("RandomStandardNormal", _normal), ("TruncatedNormal", _truncated_normal),
    ("RandomUniformInt", _uniform_int),
]  # fmt: skip
