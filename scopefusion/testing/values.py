"""Attribute values compared within a tolerance, and the hashable node signatures the matcher prunes with.

Floating-point payloads (float scalars, float lists, float and complex tensors, bfloat16 and the other
``ml_dtypes`` floats) are close when ``|a - b| <= atol + rtol * |b|`` element-wise, NaN equal to NaN;
with ``rtol == atol == 0`` they must be equal bit for bit (as :func:`~scopefusion.ir.attrs.values_equal`
has it). Everything else compares exactly: integers, strings, dtypes, tensor shapes and dtypes. Types
compare by parameters (:func:`~scopefusion.ir.compare.types_equal`), so graphs built in different
contexts can be equal. Graph-valued attributes are compared structurally by the caller's ``graphs``
callback (names ignored unless asked), not by the schedule-order comparison.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

from ..ir.attrs import AttrValue, NamedAttrs, values_equal
from ..ir.compare import types_equal
from ..ir.graph import Graph, Node
from ..ir.types import Type

__all__ = ["NAME_ATTRS", "Tolerance", "attr_difference", "node_signature", "payload_difference", "type_key"]

# Attributes that only record names: ignored unless names are checked.
NAME_ATTRS = frozenset({"_original_nodes", "_outer_name", "_input_name", "_output_names"})

GraphsEqual = Callable[[Graph, Graph], bool]


@dataclass(frozen=True)
class Tolerance:
    """How values compare: ``rtol`` / ``atol`` for floating-point payloads (0, 0: bit-exact)."""

    rtol: float = 0.0
    atol: float = 0.0

    @property
    def exact(self) -> bool:
        return self.rtol == 0 and self.atol == 0


def type_key(t: Type | None) -> str:
    """A hashable key equal for types that :func:`types_equal` calls equal."""
    if t is None:
        return "?"
    return f"{type(t).__name__}:{t}:{getattr(t, 'format', '')}"


def _is_float_array(a: np.ndarray) -> bool:
    return a.dtype.kind in "fc" or (a.dtype.kind == "V" and "float" in a.dtype.name) or "float" in str(a.dtype)


def _array_difference(a: np.ndarray, b: np.ndarray, tol: Tolerance) -> str | None:
    if a.dtype != b.dtype:
        return f"dtype {a.dtype} vs {b.dtype}"
    if a.shape != b.shape:
        return f"shape {list(a.shape)} vs {list(b.shape)}"
    if tol.exact or not _is_float_array(a):
        if values_equal(a, b):
            return None
        if a.size == 0:
            return "values differ"
        differs = np.asarray(a != b)
        if a.dtype.kind in "fc":
            differs &= ~(np.isnan(a) & np.isnan(b))
        where = np.argwhere(differs)
        if not len(where):
            return "bits differ (signed zeros or NaN payloads)"
        at = tuple(int(i) for i in where[0])
        return f"{int(differs.sum())} of {a.size} elements differ, first at {list(at)}: {_item(a[at])!r} vs {_item(b[at])!r}"
    wide = np.complex128 if a.dtype.kind == "c" else np.float64
    x, y = a.astype(wide), b.astype(wide)
    close = np.isclose(x, y, rtol=tol.rtol, atol=tol.atol, equal_nan=True)
    if close.all():
        return None
    error = np.where(close, 0.0, np.abs(x - y))
    error = np.nan_to_num(error, nan=np.inf)
    at = tuple(int(i) for i in np.unravel_index(int(np.argmax(error)), a.shape)) if a.ndim else ()
    return (
        f"{int((~close).sum())} of {a.size} elements differ beyond rtol={tol.rtol:g}, atol={tol.atol:g}; "
        f"largest at {list(at)}: {_item(x[at])!r} vs {_item(y[at])!r}"
    )


def _item(x: Any) -> Any:
    """A numpy scalar as the Python value it holds (``0.5``, not ``np.float32(0.5)``)."""
    try:
        return x.item()
    except (AttributeError, ValueError):
        return x


def _float_close(a: float, b: float, tol: Tolerance) -> bool:
    if math.isnan(a) or math.isnan(b):
        return math.isnan(a) and math.isnan(b)
    if tol.exact:
        return a == b
    return abs(a - b) <= tol.atol + tol.rtol * abs(b)


def payload_difference(a: Any, b: Any, tol: Tolerance, graphs: GraphsEqual) -> str | None:
    """None when two attribute payloads are equal within ``tol``, else a short description of how they differ."""
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        if not (isinstance(a, np.ndarray) and isinstance(b, np.ndarray)):
            return f"{type(a).__name__} vs {type(b).__name__}"
        return _array_difference(a, b, tol)
    if isinstance(a, float) and isinstance(b, float):
        return None if _float_close(a, b, tol) else f"{a!r} vs {b!r}"
    if isinstance(a, tuple) and isinstance(b, tuple):
        if len(a) != len(b):
            return f"{len(a)} items vs {len(b)}"
        for i, (x, y) in enumerate(zip(a, b)):
            diff = payload_difference(x, y, tol, graphs)
            if diff is not None:
                return f"item {i}: {diff}"
        return None
    if isinstance(a, Graph) and isinstance(b, Graph):
        return None if graphs(a, b) else f"graphs {a.name!r} and {b.name!r} differ"
    if isinstance(a, NamedAttrs) and isinstance(b, NamedAttrs):
        if a.name != b.name:
            return f"named attributes {a.name!r} vs {b.name!r}"
        if sorted(a.attrs) != sorted(b.attrs):
            return f"named attributes {a.name!r} hold {sorted(a.attrs)} vs {sorted(b.attrs)}"
        for key in sorted(a.attrs):
            diff = attr_difference(a.attrs[key], b.attrs[key], tol, graphs)
            if diff is not None:
                return f"{a.name}.{key}: {diff}"
        return None
    if isinstance(a, Type) and isinstance(b, Type):
        return None if types_equal(a, b) else f"{a} vs {b}"
    return None if values_equal(a, b) else f"{a!r} vs {b!r}"


def attr_difference(a: AttrValue, b: AttrValue, tol: Tolerance, graphs: GraphsEqual) -> str | None:
    """None when two attribute values (kind and payload) are equal within ``tol``."""
    if a.type_id is not b.type_id:
        return f"kind {a.type_id.name} vs {b.type_id.name}"
    return payload_difference(a.value, b.value, tol, graphs)


def _hashable(value: AttrValue, tol: Tolerance) -> Any:
    """A hashable stand-in for an attribute value that equal values share (coarse for toleranced floats)."""
    x = value.value
    if isinstance(x, np.ndarray):
        if tol.exact or not _is_float_array(x):
            body: Any = hash(x.tobytes()) if x.dtype != object else hash(repr(x.ravel().tolist()))
        else:
            body = None
        return (value.type_id.name, str(x.dtype), x.shape, body)
    if isinstance(x, (Graph, NamedAttrs)) or (isinstance(x, tuple) and any(isinstance(v, (Graph, NamedAttrs, np.ndarray)) for v in x)):
        return (value.type_id.name, len(x) if isinstance(x, tuple) else None)
    if isinstance(x, float) or (isinstance(x, tuple) and any(isinstance(v, float) for v in x)):
        return (value.type_id.name, None if not tol.exact else repr(x))
    if isinstance(x, Type):
        return (value.type_id.name, type_key(x))
    try:
        hash(x)
    except TypeError:
        return (value.type_id.name, repr(x))
    return (value.type_id.name, x)


def node_signature(node: Node, *, check_names: bool, check_attrs: bool, ignore: frozenset[str], tol: Tolerance) -> tuple:
    """A hashable signature that two nodes the matcher may pair always share (equal signatures do not
    imply a match: toleranced floats and graph-valued attributes are left out)."""
    attrs: tuple = ()
    if check_attrs:
        attrs = tuple((k, _hashable(v, tol)) for k, v in sorted(node.attrs.items()) if k not in ignore)
    return (
        node.op,
        node.name if check_names else None,
        tuple((v is not None, v.index if v is not None else -1) for v in node.inputs),
        tuple(type_key(v.type) for v in node.outputs),
        len(node.control_inputs),
        tuple(sorted(node.subgraphs)),
        attrs,
    )
