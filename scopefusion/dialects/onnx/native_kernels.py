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
    "Div": _binary(np.divide, "f"),
}
