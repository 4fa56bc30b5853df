"""``tf`` ops ONNX has no counterpart for, written as exact compositions of ONNX ops: Atan2, Cumprod,
InTopKV2, BroadcastGradientArgs.

* ``Atan2(y, x)`` → ``Atan(y / x)``, plus ``π`` (``y`` positive) or ``-π`` (``y`` negative) where ``x`` is
  negative; the signs of zeros count as IEEE's ``atan2`` counts them (``-0`` is negative: its reciprocal is
  ``-inf``). Two infinite operands are replaced by their signs first (``±π/4`` or ``±3π/4``, as in
  TensorFlow), and ``x = ±0`` by ``±1`` where ``y = ±0`` too (``±0`` or ``±π``); NaN stays NaN. float64
  has no ``Atan`` kernel in onnxruntime: its ``Atan`` is a series (:func:`atan`).
* ``Cumprod(x, axis)`` → ``ReduceProd`` over a masked copy: ``out[i] = ∏ x[j]`` for ``j ≤ i`` (``j < i``
  with ``exclusive``; ``≥`` / ``>`` with ``reverse``), the other factors replaced by 1. It holds ``n²``
  elements per scanned line (``n`` the axis length).
* ``InTopKV2(predictions, targets, k)`` → TF's rule: row ``b`` is true when fewer than ``k`` predictions
  exceed ``predictions[b, targets[b]]``, false when the target is out of range or the row holds a
  non-finite prediction.
* ``BroadcastGradientArgs(s0, s1)`` → for each shape, the axes (of the broadcast rank) where it is 1 or
  missing (``NonZero`` of the padded shape equal to 1); the shapes' lengths must be static.
"""

from __future__ import annotations

from typing import Callable

import numpy as np

from ...dtypes import DType
from .emitter import LoweringEmitter

__all__ = ["LOWERINGS", "atan"]


def _atan2(e: LoweringEmitter) -> None:
    # NOTE: onnxruntime's Where turns a -0 it takes from its second input into +0, so every Where here takes
    # a zero only from its third input; the signed zeros then come out of Div and Atan.
    dtype = e.dtype(0)
    zero, one, minus_one = (e.typed_scalar(v, dtype, hint) for v, hint in ((0, "zero"), (1, "one"), (-1, "minus_one")))
    y, x = e.input(0), e.input(1)
    inf = e.typed_scalar(np.inf, dtype, "inf")  # Abs(v) = inf, not IsInf: onnxruntime has no float16 IsInf
    both_infinite = e.op("And", [e.op("Equal", [e.op("Abs", [v])[0], inf])[0] for v in (y, x)])[0]
    y = e.op("Where", [both_infinite, e.op("Sign", [y])[0], y])[0]  # atan2(±inf, ±inf) = atan2(±1, ±1)
    x = e.op("Where", [both_infinite, e.op("Sign", [x])[0], x])[0]
    negative_x = _negative(e, x, zero)
    both_zero = e.op("And", [e.op("Equal", [y, zero])[0], e.op("Equal", [x, zero])[0]])[0]
    x = e.op("Where", [both_zero, e.op("Where", [negative_x, minus_one, one])[0], x])[0]  # atan2(±0, ±0) = atan2(±0, ±1)
    angle = atan(e, e.op("Div", [y, x])[0], dtype)
    half_turn = e.op("Where", [_negative(e, y, zero), e.typed_scalar(-np.pi, dtype, "minus_pi"),
                               e.typed_scalar(np.pi, dtype, "pi")])[0]
    e.result("Where", [negative_x, e.op("Add", [angle, half_turn])[0], angle])


def atan(e: LoweringEmitter, t: str, dtype: DType) -> str:
    """``Atan(t)``; for float64 (onnxruntime has no float64 Atan kernel) a composition exact to a few ulps:
    ``|t| > 1`` folded to ``±π/2 - atan(1/t)``, two half-angle steps ``u → u / (1 + √(1 + u²))`` bring ``|u|``
    under ``tan(π/16)``, then 13 terms of ``u - u³/3 + u⁵/5 - …`` (the next is under 1e-19). Every step is
    odd in ``u``, so ``-0`` stays ``-0``."""
    if dtype.numpy != np.dtype(np.float64):
        return e.op("Atan", [t])[0]
    one = e.typed_scalar(1, dtype, "one")
    folded = e.op("Greater", [e.op("Abs", [t])[0], one])[0]
    u = e.op("Where", [folded, e.op("Reciprocal", [t])[0], t])[0]
    for _ in range(2):
        u = e.op("Div", [u, e.op("Add", [one, e.op("Sqrt", [e.op("Add", [one, e.op("Mul", [u, u])[0]])[0]])[0]])[0]])[0]
    square = e.op("Mul", [u, u])[0]
    series = e.typed_scalar(1 / 25, dtype, "term")
    for k in range(11, -1, -1):  # Horner: Σ (-1)^k u^(2k+1) / (2k+1)
        series = e.op("Add", [e.typed_scalar((-1) ** k / (2 * k + 1), dtype, "term"), e.op("Mul", [series, square])[0]])[0]
    angle = e.op("Mul", [e.op("Mul", [series, u])[0], e.typed_scalar(4, dtype, "four")])[0]
    quarter_turn = e.op("Where", [e.op("Less", [t, e.typed_scalar(0, dtype, "zero")])[0],
                                  e.typed_scalar(-np.pi / 2, dtype, "minus_half_pi"), e.typed_scalar(np.pi / 2, dtype, "half_pi")])[0]
    return e.op("Where", [folded, e.op("Sub", [quarter_turn, angle])[0], angle])[0]


def _negative(e: LoweringEmitter, v: str, zero: str) -> str:
    """True where ``v`` is below zero or is ``-0`` (whose reciprocal is ``-inf``)."""
    return e.op("Or", [e.op("Less", [v, zero])[0], e.op("Less", [e.op("Reciprocal", [v])[0], zero])[0]])[0]


def _cumprod(e: LoweringEmitter) -> None:
    rank = e.rank(0)
    axis = int(e.require_const(1, "axis").reshape(-1)[0])
    if not -rank <= axis < rank:
        e.decline(f"axis {axis} is out of range for rank {rank}")
    axis %= rank
    t = e.input_type(0)
    length = t.shape[axis] if t is not None else -1
    if length >= 0:
        positions = e.ints(np.arange(length), "positions")
    else:
        size = e.op("Gather", [e.op("Shape", [e.input(0)])[0], e.const(np.asarray(axis, np.int64), "axis")], axis=0)[0]
        positions = e.op("Range", [e.const(np.asarray(0, np.int64), "zero"), size,
                                   e.const(np.asarray(1, np.int64), "one")])[0]
    rows, columns = e.unsqueeze(positions, [1]), e.unsqueeze(positions, [0])  # i (output), j (factor)
    reverse, exclusive = bool(e.attr("reverse", False)), bool(e.attr("exclusive", False))
    compare = {(False, False): "LessOrEqual", (False, True): "Less", (True, False): "GreaterOrEqual",
               (True, True): "Greater"}[(reverse, exclusive)]
    mask = e.op(compare, [columns, rows])[0]
    trailing = rank - axis - 1
    if trailing:
        mask = e.unsqueeze(mask, list(range(2, 2 + trailing)))
    spread = e.op("Where", [mask, e.unsqueeze(e.input(0), [axis]), e.typed_scalar(1, e.dtype(0), "one")])[0]
    product = e.reduce("ReduceProd", spread, [axis + 1], keepdims=0)
    e.result("Identity", [product])


def _in_top_k(e: LoweringEmitter) -> None:
    predictions = e.input(0)
    targets = e.op("Cast", [e.input(1)], to=7)[0]
    classes = e.op("Gather", [e.op("Shape", [predictions])[0], e.const(np.asarray(1, np.int64), "axis")], axis=0)[0]
    zero = e.const(np.asarray(0, np.int64), "zero")
    in_range = e.op("And", [e.op("GreaterOrEqual", [targets, zero])[0], e.op("Less", [targets, classes])[0]])[0]
    safe = e.op("Where", [in_range, targets, zero])[0]
    target_score = e.op("GatherElements", [predictions, e.unsqueeze(safe, [1])], axis=1)[0]
    above = e.cast(e.op("Greater", [predictions, target_score])[0], np.int64)
    count = e.reduce("ReduceSum", above, [1], keepdims=0)
    k = e.op("Cast", [e.input(2)], to=7)[0]
    bad = e.op("Or", [e.op("IsNaN", [predictions])[0], e.op("IsInf", [predictions])[0]])[0]
    finite = e.op("Not", [e.cast(e.reduce("ReduceMax", e.cast(bad, np.int32), [1], keepdims=0), np.bool_)])[0]
    valid = e.op("And", [in_range, finite])[0]
    e.result("And", [valid, e.op("Less", [count, k])[0]])


def _broadcast_gradient_args(e: LoweringEmitter) -> None:
    lengths = []
    for i in (0, 1):
        t = e.input_type(i)
        if t is None or t.rank != 1 or t.shape[0] < 0:
            e.decline(f"the length of shape s{i} is not static")
        lengths.append(t.shape[0])
    rank = max(lengths)
    for i, length in enumerate(lengths):
        if not e.used(i):
            continue
        shape = e.input(i)
        if length < rank:
            shape = e.op("Concat", [e.const(np.ones(rank - length, e.dtype(i).numpy), "ones"), shape], axis=0)[0]
        ones = e.op("Equal", [shape, e.typed_scalar(1, e.dtype(i), "one")])[0]
        axes = e.op("Reshape", [e.op("NonZero", [ones])[0], e.ints([-1], "flat")])[0]
        e.result("Cast", [axes], i, to=e.onnx_type(e.out_dtype(i)))


LOWERINGS: list[tuple[str, Callable[[LoweringEmitter], None]]] = [
    ("Atan2", _atan2), ("Cumprod", _cumprod), ("InTopKV2", _in_top_k),
    ("BroadcastGradientArgs", _broadcast_gradient_args),
]  # fmt: skip
