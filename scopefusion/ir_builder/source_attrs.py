"""Framework attribute values (as the frontends decode them) to typed IR attribute values.

The frontends give plain values: ``int``, ``float``, ``bool``, ``str``/``bytes``, tuples, read-only numpy
arrays, :class:`~scopefusion.dtypes.DType`, shapes as tuples (``None`` for an unknown rank), function
references, nested source graphs. When the op definition declares the attribute, its declared type id
decides the conversion (an empty list becomes that list kind; a shape becomes ``LIST_INT``); otherwise
the type id is inferred from the value. Values with no IR form (an unknown rank, a foreign dtype such as
TF's resource, a placeholder left in a function body) are dropped and listed, never guessed.

NOTE: most attribute values repeat from node to node (``T``, ``padding``, ``strides``, ``epsilon``...). The
conversions of plain values whose equality is exact (str, int, bool, DType, floats with their sign, since
``0.0 == -0.0``, empty tuples and tuples of ints, strs or dtypes; not tuples of floats or bools, where ``True == 1``)
are remembered once per process, keyed by the declared type id, the value's type and the value, in a table
of bounded size (:data:`CONVERTED_LIMIT`).
An :class:`AttrValue` is immutable, so nodes share it.
"""

from __future__ import annotations

from math import copysign
from typing import Any, Callable, Mapping

import numpy as np

from .. import dtypes as _dt
from ..dtypes import DType
from ..ir import attrs as A
from ..ir.attrs import AttrType, AttrValue, NamedAttrs, infer_attr_type
from ..ir.opdef import OpDef

__all__ = ["CONVERTED_LIMIT", "convert_attrs", "convert_value"]

CONVERTED_LIMIT = 4096  # remembered conversions; the table starts afresh when full
_converted: dict[tuple[Any, ...], AttrValue] = {}


_HANDLE_DTYPES = {"DT_RESOURCE": _dt.RESOURCE, "DT_VARIANT": _dt.VARIANT}


def _handle_dtype(value: Any) -> Any:
    """TF's resource and variant handle dtypes (``ForeignDType`` from the parser) as the IR's handle dtypes."""
    if type(value).__name__ == "ForeignDType":
        return _HANDLE_DTYPES.get(value.name, value)
    return value


def convert_value(value: Any, declared: AttrType | None = None, *, graph_converter: Callable[[Any], Any] | None = None) -> AttrValue | None:
    """One attribute value as an :class:`AttrValue`, or None when it has no IR form."""
    if value is None:
        return None
    value = _handle_dtype(value)
    if isinstance(value, tuple):
        value = tuple(_handle_dtype(v) for v in value)
    kind = type(value).__name__
    if kind == "FunctionRef":
        return AttrValue(A.NAMED_ATTRS, _named(value.name, dict(value.attrs)))
    if kind == "SourceGraph":
        if graph_converter is None:
            return None
        return AttrValue(A.GRAPH, graph_converter(value))
    if kind in ("AttrPlaceholder", "ForeignDType"):
        return None
    if isinstance(value, bytes) and declared is A.STR:
        try:
            value = value.decode("utf-8")
        except UnicodeDecodeError:
            return None
    if isinstance(value, tuple):
        if any(v is None for v in value) or any(type(v).__name__ in ("ForeignDType", "AttrPlaceholder") for v in value):
            return None
        if any(type(v).__name__ == "FunctionRef" for v in value):
            return AttrValue(A.LIST_NAMED_ATTRS, tuple(_named(v.name, dict(v.attrs)) for v in value))
        if not value:
            return AttrValue(declared if declared is not None and declared.name.startswith("list") else A.LIST_INT, ())
        if isinstance(value[0], tuple):
            if declared is A.LIST_LIST_FLOAT:
                return AttrValue(A.LIST_LIST_FLOAT, value)
            try:
                return AttrValue(A.LIST_LIST_INT, value)
            except (TypeError, ValueError):
                return AttrValue(A.LIST_LIST_FLOAT, value)
    if declared is not None:
        try:
            return AttrValue(declared, value)
        except (TypeError, ValueError):
            if declared is A.FLOAT and isinstance(value, (int, np.integer)):
                return AttrValue(A.FLOAT, float(value))
            raise
    try:
        return AttrValue(infer_attr_type(value), value)
    except TypeError:
        return None


def _named(name: str, attrs: Mapping[str, Any]) -> NamedAttrs:
    converted = {}
    for key, value in attrs.items():
        v = convert_value(value)
        if v is not None:
            converted[key] = v
    return NamedAttrs(name, converted)


def convert_attrs(
    attrs: Mapping[str, Any],
    opdef: OpDef | None,
    *,
    graph_converter: Callable[[Any], Any] | None = None,
    declared_kinds_only: bool = False,
) -> tuple[dict[str, AttrValue], list[str]]:
    """Converts a node's attributes; returns ``(converted, names dropped for having no IR form)``.

    ``declared_kinds_only``: a converted value whose kind contradicts its declared one is left out of
    ``converted`` too (and not listed: it has an IR form)."""
    out: dict[str, AttrValue] = {}
    dropped: list[str] = []
    specs = opdef.attrs if opdef is not None else {}
    for name, value in attrs.items():
        spec = specs.get(name)
        declared = spec.type_id if spec is not None else None
        kind = type(value)
        # _key(value, declared), its common answers spelled out
        if kind is str or kind is DType or kind is int or kind is bool:
            key: tuple[Any, ...] | None = (declared, kind, value)
        else:
            key = _key(value, declared)
        converted = _converted.get(key) if key is not None else None
        if converted is None:
            try:
                converted = convert_value(value, declared, graph_converter=graph_converter)
            except (TypeError, ValueError):
                converted = None
            if converted is not None and key is not None:
                if len(_converted) >= CONVERTED_LIMIT:
                    _converted.clear()
                _converted[key] = converted
        if converted is None:
            if value is not None:
                dropped.append(name)
            continue
        if declared_kinds_only and declared is not None and converted.type_id is not declared:
            continue
        out[name] = converted
    return out, dropped


def _key(value: Any, declared: AttrType | None) -> tuple[Any, ...] | None:
    """The key under which ``value``'s conversion is remembered, or None when it is not (see the NOTE)."""
    kind = type(value)
    if kind is str or kind is int or kind is bool or kind is _dt.DType:
        return (declared, kind, value)
    if kind is float:
        return (declared, kind, value, copysign(1.0, value))  # NaN never equals itself: never found
    if kind is tuple and not value:
        return (declared, kind, value)
    if kind is tuple:
        first = type(value[0])
        if (first is int or first is str or first is _dt.DType) and all(type(v) is first for v in value):
            return (declared, first, value)
    return None
