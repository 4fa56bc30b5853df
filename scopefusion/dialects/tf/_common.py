"""Shared pieces of the ``tf`` dialect: the op constructor, shape algebra and kernel helpers.

Shapes are tuples of ints with ``-1`` for an unknown dim, or None for an unknown rank. Every helper
degrades to unknown dims or rank when what it needs is unknown, and raises ``ValueError`` only on a
real contradiction between known facts (the op definition's ``infer`` turns it into an InferenceError
naming the node).
"""

from __future__ import annotations

import math
from typing import Any, Callable, Iterable, Sequence

import numpy as np

from ...dtypes import DType
from ...ir.opdef import FollowType, InputInfo, OpDef

__all__ = [
    "ALL",
    "DTYPE_ONLY",
    "Shape",
    "broadcast",
    "broadcast_all",
    "first_dtype",
    "int64_product",
    "int_list",
    "merge_dim",
    "merge_shapes",
    "normalize_axis",
    "num_elements",
    "quiet",
    "rank_of",
    "scalar_int",
    "shape_from_value",
    "tf_op",
    "unknown",
]

Shape = tuple[int, ...] | None
ALL = FollowType.ALL
DTYPE_ONLY = FollowType.DTYPE


def tf_op(name: str, doc: str = "") -> OpDef:
    """A new ``tf`` dialect op definition; framework ops keep every attribute the model gives them."""
    return OpDef(name, "tf", doc=doc, open_attrs=True)


# ------------------------------------------------------------------------------------------ shapes
def rank_of(shape: Shape) -> int | None:
    return None if shape is None else len(shape)


def unknown(rank: int | None) -> Shape:
    """A shape of ``rank`` unknown dims, or an unknown rank."""
    return None if rank is None else (-1,) * rank


def num_elements(shape: Shape) -> int | None:
    if shape is None or any(d < 0 for d in shape):
        return None
    return int64_product(shape)


_INT64_SPAN = 1 << 64
_INT64_HALF = 1 << 63


def int64_product(values: Sequence[Any]) -> int:
    """``int(np.prod(values, dtype=np.int64))`` (an int64 product, wrapping as numpy's does), computed
    without numpy for a short sequence of Python ints that fit in int64."""
    if all(type(v) is int and -_INT64_HALF <= v < _INT64_HALF for v in values):
        return (math.prod(values) + _INT64_HALF) % _INT64_SPAN - _INT64_HALF
    return int(np.prod(values, dtype=np.int64))


def merge_dim(a: int, b: int, what: str = "dims") -> int:
    """The dim both ``a`` and ``b`` describe; raises when both are known and differ."""
    if a < 0:
        return b
    if b < 0 or a == b:
        return a
    raise ValueError(f"{what} disagree: {a} vs {b}")


def merge_shapes(a: Shape, b: Shape, what: str = "shapes") -> Shape:
    """The most precise shape compatible with both; raises on a rank or dim contradiction."""
    if a is None:
        return b
    if b is None:
        return a
    if len(a) != len(b):
        raise ValueError(f"{what} have different ranks: {list(a)} vs {list(b)}")
    return tuple(merge_dim(x, y, f"{what} {list(a)} and {list(b)}") for x, y in zip(a, b))


def broadcast(a: Shape, b: Shape) -> Shape:
    """Numpy broadcasting of two shapes with unknown dims; raises when known dims cannot broadcast."""
    if a is None or b is None:
        return None
    n = max(len(a), len(b))
    a2 = (1,) * (n - len(a)) + tuple(a)
    b2 = (1,) * (n - len(b)) + tuple(b)
    out = []
    for x, y in zip(a2, b2):
        if x == 1:
            out.append(y)
        elif y == 1:
            out.append(x)
        elif x < 0:
            out.append(y if y > 1 else -1)
        elif y < 0:
            out.append(x)
        elif x == y:
            out.append(x)
        else:
            raise ValueError(f"shapes {list(a)} and {list(b)} cannot broadcast (dims {x} and {y})")
    return tuple(out)


def broadcast_all(shapes: Iterable[Shape]) -> Shape:
    out: Shape = ()
    for s in shapes:
        out = broadcast(out, s)
    return out


def normalize_axis(axis: int, rank: int, what: str = "axis") -> int:
    """``axis`` in ``[0, rank)``; raises when it is out of ``[-rank, rank)``."""
    if not -rank <= axis < rank:
        raise ValueError(f"{what} {axis} is out of range for rank {rank}")
    return axis + rank if axis < 0 else axis


# ------------------------------------------------------------------------------------------ values
def int_list(info: InputInfo | None) -> list[int] | None:
    """A value-dependent input's data as a flat list of ints, or None when the value is unknown."""
    if info is None or info.data is None:
        return None
    return [int(v) for v in np.asarray(info.data).reshape(-1).tolist()]


def scalar_int(info: InputInfo | None) -> int | None:
    values = int_list(info)
    if values is None:
        return None
    if len(values) != 1:
        raise ValueError(f"expected a scalar, found {len(values)} values")
    return values[0]


def shape_from_value(info: InputInfo, what: str = "shape") -> Shape:
    """The shape a 1-D int tensor describes (negative entries are unknown dims).

    Unknown value: as many unknown dims as the tensor has elements, when its length is known. A scalar
    ``-1`` (TF's ``element_shape`` for an unknown rank) is an unknown rank.
    """
    if info.data is not None:
        data = np.asarray(info.data)
        if data.ndim == 0:
            if int(data) == -1:
                return None
            raise ValueError(f"{what} must be a vector, found scalar {int(data)}")
        if data.ndim != 1:
            raise ValueError(f"{what} must be a vector, found rank {data.ndim}")
        return tuple(int(d) if d >= 0 else -1 for d in data.tolist())
    if info.shape is not None and len(info.shape) == 1 and info.shape[0] >= 0:
        return (-1,) * info.shape[0]
    return None


def first_dtype(infos: Sequence[InputInfo | None]) -> DType | None:
    """The first known dtype among ``infos``; raises when two known dtypes differ."""
    found: DType | None = None
    for info in infos:
        if info is None or info.dtype is None:
            continue
        if found is None:
            found = info.dtype
        elif info.dtype is not found:
            raise ValueError(f"inputs must share one dtype, found {found} and {info.dtype}")
    return found


def quiet(fn: Callable[..., Any]) -> Callable[..., Any]:
    """Wraps a numpy kernel so floating-point warnings (overflow, division by zero) stay silent."""

    def run(*args: Any, **kwargs: Any) -> Any:
        with np.errstate(all="ignore"):
            return fn(*args, **kwargs)

    run.__name__ = getattr(fn, "__name__", "kernel")
    run.__doc__ = fn.__doc__
    return run
