"""Numpy kernels of the shape-arithmetic ``onnx`` ops, computing what ``onnx.reference`` computes for them.

Folding a model's shape arithmetic (Unsqueeze, Concat, Gather, Reshape...) runs a kernel per node; going
through an ``onnx.reference`` implementation instance costs its argument checks and bookkeeping each
time. :func:`native_outputs` computes the same arrays (same numpy calls, same dtypes) directly for the
default domain from opset 13 on, on the inputs those calls take as the reference does; for anything else
(an unusual input, a numpy error) it gives None and the caller runs the reference implementation, which
answers or fails as before.
"""

from __future__ import annotations

from typing import Any, Callable, Sequence

import numpy as np

__all__ = ["NATIVE_KERNELS", "native_outputs"]

MIN_OPSET = 13

Arrays = Sequence[np.ndarray | None]


def native_outputs(
    op_type: str, domain: str, opset: int, arrays: Arrays, attrs: dict[str, Any]
) -> list[np.ndarray] | None:
    """The outputs of ``op_type`` on ``arrays`` as the reference implementation gives them, or None."""
    kernel = NATIVE_KERNELS.get(op_type)
    if kernel is None or domain != "" or opset < MIN_OPSET:
        return None
    if any(a is None or a.__class__ is not np.ndarray for a in arrays):
        return None
    try:
        return kernel(arrays, attrs)
    except (TypeError, ValueError, IndexError):  # numpy's AxisError is both of the last two
        return None


def _unsqueeze(arrays: Arrays, attrs: dict[str, Any]) -> list[np.ndarray] | None:
    if len(arrays) != 2:
        return None
    data, axes = arrays
    if axes.ndim != 1 or axes.dtype.kind not in "iu":  # type: ignore[union-attr]
        return None
    return [np.expand_dims(data, axis=tuple(axes))]  # type: ignore[arg-type]


def _squeeze(arrays: Arrays, attrs: dict[str, Any]) -> list[np.ndarray] | None:
    if len(arrays) == 1:
        return [np.asarray(np.squeeze(arrays[0]))]  # type: ignore[arg-type]
    if len(arrays) != 2 or arrays[1].ndim != 1 or arrays[1].dtype.kind not in "iu":  # type: ignore[union-attr]
        return None
    return [np.asarray(np.squeeze(arrays[0], axis=tuple(arrays[1])))]  # type: ignore[arg-type]


def _concat(arrays: Arrays, attrs: dict[str, Any]) -> list[np.ndarray] | None:
    axis = attrs.get("axis")
    if not arrays or not isinstance(axis, int) or any(a.ndim == 0 or not -a.ndim <= axis < a.ndim for a in arrays):  # type: ignore[union-attr]
        return None
    return [np.concatenate(arrays, axis)]  # type: ignore[arg-type]


def _gather(arrays: Arrays, attrs: dict[str, Any]) -> list[np.ndarray] | None:
    if len(arrays) != 2 or arrays[1].dtype.kind not in "iu":  # type: ignore[union-attr]
        return None
    axis = attrs.get("axis")
    return [np.asarray(np.take(arrays[0], arrays[1], axis=0 if axis is None else axis))]  # type: ignore[arg-type]


def _reshape(arrays: Arrays, attrs: dict[str, Any]) -> list[np.ndarray] | None:
    if len(arrays) != 2:
        return None
    data, shape = arrays
    if shape.ndim != 1 or shape.dtype.kind not in "iu":  # type: ignore[union-attr]
        return None
    target = [int(d) for d in shape]  # type: ignore[union-attr]
    if attrs.get("allowzero") != 1:
        if any(d == 0 and i >= data.ndim for i, d in enumerate(target)):  # type: ignore[union-attr]
            return None
        target = [data.shape[i] if d == 0 else d for i, d in enumerate(target)]  # type: ignore[union-attr]
    return [np.reshape(data, target)]  # type: ignore[arg-type]


def _identity(arrays: Arrays, attrs: dict[str, Any]) -> list[np.ndarray] | None:
    return [arrays[0].copy()] if len(arrays) == 1 else None  # type: ignore[union-attr]


def _binary(fn: Callable[[np.ndarray, np.ndarray], Any], kinds: str) -> Callable[[Arrays, dict[str, Any]], Any]:
    def kernel(arrays: Arrays, attrs: dict[str, Any]) -> list[np.ndarray] | None:
        if len(arrays) != 2:
            return None
        a, b = arrays
        if a.dtype != b.dtype or a.dtype.kind not in kinds:  # type: ignore[union-attr]
            return None
        out = np.asarray(fn(a, b))  # type: ignore[arg-type]
        return [out] if out.dtype == a.dtype else None  # type: ignore[union-attr]

    return kernel


def _int_div(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Integer division truncated toward zero (ONNX's ``Div`` on integers), in integer arithmetic."""
    quotient = np.floor_divide(a, b)
    inexact = (np.remainder(a, b) != 0) & ((a < 0) ^ (b < 0))
    return quotient + inexact.astype(quotient.dtype)


def _div(arrays: Arrays, attrs: dict[str, Any]) -> list[np.ndarray] | None:
    if len(arrays) == 2 and arrays[0].dtype.kind in "iu":  # type: ignore[union-attr]
        return _binary(_int_div, "iu")(arrays, attrs)
    return _binary(np.divide, "f")(arrays, attrs)


def _mod(arrays: Arrays, attrs: dict[str, Any]) -> list[np.ndarray] | None:
    return _binary(np.fmod if attrs.get("fmod") == 1 else np.mod, "iuf")(arrays, attrs)


# ``Cast``'s ``to`` codes (TensorProto.DataType) whose conversion is numpy's ``astype``.
_CAST_TARGETS = {
    1: np.float32, 2: np.uint8, 3: np.int8, 4: np.uint16, 5: np.int16, 6: np.int32, 7: np.int64, 9: np.bool_,
    10: np.float16, 11: np.float64, 12: np.uint32, 13: np.uint64,
}  # fmt: skip


def _cast(arrays: Arrays, attrs: dict[str, Any]) -> list[np.ndarray] | None:
    target = _CAST_TARGETS.get(attrs.get("to"))  # type: ignore[arg-type]
    if len(arrays) != 1 or target is None or arrays[0].dtype.kind not in "biuf":  # type: ignore[union-attr]
        return None
    return [arrays[0].astype(target)]  # type: ignore[union-attr]


def _slice(arrays: Arrays, attrs: dict[str, Any]) -> list[np.ndarray] | None:
    if not 3 <= len(arrays) <= 5 or any(a.ndim != 1 or a.dtype.kind not in "iu" for a in arrays[1:]):  # type: ignore[union-attr]
        return None
    data, starts, ends = arrays[0], arrays[1], arrays[2]
    axes = [int(a) for a in arrays[3]] if len(arrays) > 3 else list(range(len(starts)))  # type: ignore[union-attr, arg-type]
    steps = [int(d) for d in arrays[4]] if len(arrays) > 4 else [1] * len(starts)  # type: ignore[union-attr, arg-type]
    if not len(starts) == len(ends) == len(axes) == len(steps) or 0 in steps:  # type: ignore[arg-type]
        return None
    if any(not -data.ndim <= a < data.ndim for a in axes):  # type: ignore[union-attr]
        return None
    index = [slice(None)] * data.ndim  # type: ignore[union-attr]
    for start, end, axis, step in zip(starts, ends, axes, steps):  # type: ignore[arg-type]
        index[axis] = slice(int(start), int(end), step)
    return [data[tuple(index)]]  # type: ignore[index]


NATIVE_KERNELS: dict[str, Callable[[Arrays, dict[str, Any]], list[np.ndarray] | None]] = {
    "Unsqueeze": _unsqueeze,
    "Squeeze": _squeeze,
    "Concat": _concat,
    "Gather": _gather,
    "Reshape": _reshape,
    "Identity": _identity,
    "Add": _binary(np.add, "iuf"),
    "Sub": _binary(np.subtract, "iuf"),
    "Mul": _binary(np.multiply, "iuf"),
    "Div": _div,
    "Mod": _mod,
    "Cast": _cast,
    "Slice": _slice,
}
