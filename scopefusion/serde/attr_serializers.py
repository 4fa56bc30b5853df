"""Attribute values ⇄ GE ``AttrDef`` through a registry of stateless serializers keyed by type id (seed 000).

A serializer is any object with

* ``case``: the ``AttrDef.value`` oneof field it writes (``"i"``, ``"s"``, ``"list"``, ``"bt"``...);
* ``list_type``: the ``ListValue.val_type`` it writes when ``case == "list"``, else ``None``;
* ``serialize(value, attr_def, ctx)``: writes an :class:`AttrValue` into an empty ``AttrDef``;
* ``deserialize(attr_def, ctx) -> AttrValue``: reads one back;
* optionally ``claims(attr_def) -> bool``: for a serializer that shares its case with another (a
  marked payload in ``bt``, say), whether this ``AttrDef`` is its own.

Serializers hold no state, so one instance serves every thread and every model. On the way out the
registry picks the serializer by the value's type id; on the way back it reads the ``AttrDef``'s oneof
case (and for ``list`` its ``val_type``), asks that key's claiming serializers in registration order,
then falls back to the key's one plain (non-claiming) serializer.

Registering a new attribute type is one call::

    registry = default_serializer_registry()
    registry.register(JSON, JsonSerializer())

NOTE: GE stores floats as 32-bit ``float``; FLOAT, LIST_FLOAT and LIST_LIST_FLOAT values round to
float32 on the wire, so a round trip is exact only for float32-representable values (and writing the
read-back value gives the same bytes). STR values are written as UTF-8 (``surrogateescape``, so any
bytes GE stores in ``s`` read back and write again unchanged); BYTES go to ``bt``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable, Iterator, Protocol, cast, runtime_checkable

from ..errors import SerdeError
from ..ir import attrs as A
from ..ir.attrs import AttrType, AttrValue, NamedAttrs
from ..ir.types import IRContext
from . import ge_ir_pb2 as pb
from .tensors import (
    array_from_tensor_def,
    array_to_tensor_def,
    dtype_from_ge,
    tensor_type_from_desc,
    tensor_type_to_desc,
)

if TYPE_CHECKING:  # pragma: no cover
    from ..ir.graph import Graph
    from ..ir.opdef import OpRegistry

__all__ = [
    "AttrSerializer",
    "AttrSerializerRegistry",
    "ListSerializer",
    "SerdeContext",
    "ValueSerializer",
    "default_registry",
    "default_serializer_registry",
]

VT = pb.AttrDef.ListValue
ATTR_CASES = frozenset(f.name for f in pb.AttrDef.DESCRIPTOR.oneofs_by_name["value"].fields)

# ListValue repeated field of each val_type, in field-number order (used to type an untyped list).
_LIST_FIELDS: tuple[tuple[str, int], ...] = (
    ("s", VT.VT_LIST_STRING), ("i", VT.VT_LIST_INT), ("f", VT.VT_LIST_FLOAT), ("b", VT.VT_LIST_BOOL),
    ("bt", VT.VT_LIST_BYTES), ("td", VT.VT_LIST_TENSOR_DESC), ("t", VT.VT_LIST_TENSOR), ("g", VT.VT_LIST_GRAPH),
    ("na", VT.VT_LIST_NAMED_ATTRS), ("dt", VT.VT_LIST_DATA_TYPE),
)  # fmt: skip

# Errors a serializer may raise on a bad payload; the registry turns them into SerdeError.
_WRAPPED = (TypeError, ValueError, KeyError, IndexError, OverflowError, UnicodeError, AttributeError)


@runtime_checkable
class AttrSerializer(Protocol):
    """What the registry needs of a serializer (see the module docstring)."""

    case: str
    list_type: int | None

    def serialize(self, value: AttrValue, attr_def: pb.AttrDef, ctx: "SerdeContext") -> None: ...

    def deserialize(self, attr_def: pb.AttrDef, ctx: "SerdeContext") -> AttrValue: ...


class SerdeContext:
    """What serializers may use: the IR context for types, the registry for nested values, the op
    registry for graphs, and ``where`` (the location named in error messages)."""

    __slots__ = ("ir", "registry", "ops", "where")

    def __init__(
        self,
        ir: IRContext | None = None,
        registry: "AttrSerializerRegistry | None" = None,
        ops: "OpRegistry | None" = None,
        where: str = "attribute",
    ) -> None:
        self.ir = ir if ir is not None else IRContext()
        self.registry = registry if registry is not None else default_serializer_registry()
        self.ops = ops
        self.where = where

    def at(self, where: str) -> "SerdeContext":
        """The same context naming another location."""
        return SerdeContext(self.ir, self.registry, self.ops, where)

    def write_attr(self, value: AttrValue, attr_def: pb.AttrDef) -> None:
        self.registry.serialize(value, attr_def, self)

    def read_attr(self, attr_def: pb.AttrDef) -> AttrValue:
        return self.registry.deserialize(attr_def, self)

    def write_graph(self, graph: "Graph", graph_def: pb.GraphDef) -> None:
        """Writes a standalone graph (its bodies nested in it) for a GRAPH attribute."""
        from .ge import write_standalone_graph

        write_standalone_graph(graph, graph_def, self)

    def read_graph(self, graph_def: pb.GraphDef) -> "Graph":
        from .ge_read import read_standalone_graph

        return read_standalone_graph(graph_def, self)


# ----------------------------------------------------------------------------- registry
class AttrSerializerRegistry:
    """Serializers by type id, and the readers of each ``(case, val_type)`` key. An ordinary object."""

    __slots__ = ("_by_type", "_plain", "_claiming")

    def __init__(self) -> None:
        self._by_type: dict[AttrType, Any] = {}
        self._plain: dict[tuple[str, int | None], AttrType] = {}
        self._claiming: dict[tuple[str, int | None], list[AttrType]] = {}

    def register(self, type_id: AttrType, serializer: Any, *, replace: bool = False) -> None:
        """Registers ``serializer`` for ``type_id``; a second serializer for a type id needs ``replace=True``."""
        if not isinstance(type_id, AttrType):
            raise TypeError(f"register needs an AttrType as type id, found {type(type_id).__name__}")
        if not isinstance(serializer, AttrSerializer):
            raise TypeError(
                f"serializer {serializer!r} for {type_id.name} needs case, list_type, serialize and deserialize"
            )
        key = _key_of(serializer, type_id)
        if type_id in self._by_type and not replace:
            raise ValueError(f"attribute type {type_id.name} already has a serializer; pass replace=True to swap it")
        owner = self._plain.get(key)
        if not hasattr(serializer, "claims") and owner is not None and owner is not type_id:
            raise ValueError(
                f"AttrDef key {_key_text(key)} is already read by {owner.name}; give the serializer for "
                f"{type_id.name} a claims(attr_def) method to share it"
            )
        if type_id in self._by_type:
            self._forget(type_id)
        self._by_type[type_id] = serializer
        if hasattr(serializer, "claims"):
            self._claiming.setdefault(key, []).append(type_id)
        else:
            self._plain[key] = type_id

    def _forget(self, type_id: AttrType) -> None:
        serializer = self._by_type.pop(type_id)
        key = _key_of(serializer, type_id)
        if self._plain.get(key) is type_id:
            del self._plain[key]
        if type_id in self._claiming.get(key, ()):
            self._claiming[key].remove(type_id)

    def copy(self) -> "AttrSerializerRegistry":
        """A registry with the same entries, to extend without touching this one."""
        other = AttrSerializerRegistry()
        other._by_type = dict(self._by_type)
        other._plain = dict(self._plain)
        other._claiming = {k: list(v) for k, v in self._claiming.items()}
        return other

    def serializer(self, type_id: AttrType) -> Any:
        found = self._by_type.get(type_id)
        if found is None:
            raise SerdeError(
                f"attribute type {type_id.name!r} has no serializer; register one with "
                "AttrSerializerRegistry.register(type_id, serializer)"
            )
        return found

    def __contains__(self, type_id: object) -> bool:
        return type_id in self._by_type

    def __iter__(self) -> Iterator[AttrType]:
        return iter(self._by_type)

    def __len__(self) -> int:
        return len(self._by_type)

    def recognise(self, attr_def: pb.AttrDef, where: str = "attribute") -> AttrType:
        """The type id of the value an ``AttrDef`` holds (by oneof case, ``val_type`` and claims)."""
        case = attr_def.WhichOneof("value")
        if case is None:
            raise SerdeError(f"{where}: the AttrDef has no value set; expected exactly one case of its oneof")
        list_type = _list_type(attr_def.list, where) if case == "list" else None
        key = (case, list_type)
        for type_id in self._claiming.get(key, ()):
            if self._by_type[type_id].claims(attr_def):
                return type_id
        found = self._plain.get(key)
        if found is None:
            raise SerdeError(
                f"{where}: no attribute serializer reads an AttrDef of {_key_text(key)}; "
                "register one for it with AttrSerializerRegistry.register"
            )
        return found

    def serialize(self, value: AttrValue, attr_def: pb.AttrDef, ctx: SerdeContext) -> None:
        """Writes ``value`` into the empty ``attr_def``."""
        if not isinstance(value, AttrValue):
            raise SerdeError(f"{ctx.where}: expected an AttrValue, found {type(value).__name__}")
        try:
            serializer = self.serializer(value.type_id)
        except SerdeError as e:
            raise SerdeError(f"{ctx.where}: {e}") from None
        try:
            serializer.serialize(value, attr_def, ctx)
        except SerdeError:
            raise
        except _WRAPPED as e:
            raise SerdeError(f"{ctx.where}: cannot write a {value.type_id.name} value ({e})") from None
        written = attr_def.WhichOneof("value")
        if written != serializer.case:
            raise SerdeError(
                f"{ctx.where}: the serializer of {value.type_id.name} wrote AttrDef case {written!r}, "
                f"but declares case {serializer.case!r}; fix the serializer"
            )

    def deserialize(self, attr_def: pb.AttrDef, ctx: SerdeContext) -> AttrValue:
        """Reads the value an ``AttrDef`` holds."""
        type_id = self.recognise(attr_def, ctx.where)
        try:
            value = self._by_type[type_id].deserialize(attr_def, ctx)
        except SerdeError:
            raise
        except _WRAPPED as e:
            raise SerdeError(f"{ctx.where}: cannot read a {type_id.name} value ({e})") from None
        if not isinstance(value, AttrValue):
            raise SerdeError(f"{ctx.where}: the serializer of {type_id.name} returned a {type(value).__name__}, not an AttrValue")
        return value


def _key_of(serializer: Any, type_id: AttrType) -> tuple[str, int | None]:
    case, list_type = serializer.case, serializer.list_type
    if case not in ATTR_CASES:
        raise ValueError(f"serializer for {type_id.name}: case {case!r} is not an AttrDef case ({', '.join(sorted(ATTR_CASES))})")
    if (case == "list") != (list_type is not None):
        raise ValueError(f"serializer for {type_id.name}: list_type must be set exactly when case is 'list'")
    return (case, list_type)


def _key_text(key: tuple[str, int | None]) -> str:
    case, list_type = key
    if list_type is None:
        return f"case {case!r}"
    name = VT.ListValueType.Name(list_type) if list_type in VT.ListValueType.values() else str(list_type)
    return f"case 'list' with val_type {name}"


def _list_type(lv: pb.AttrDef.ListValue, where: str) -> int:
    if lv.val_type != VT.VT_LIST_NONE:
        return lv.val_type
    # NOTE: older GE models leave val_type unset; the one populated field then types the list, and an
    # untyped empty list reads as an empty list of ints.
    filled = [vt for field, vt in _LIST_FIELDS if len(getattr(lv, field))]
    if len(filled) > 1:
        raise SerdeError(f"{where}: an untyped AttrDef list fills {len(filled)} kinds of items; expected one kind")
    return filled[0] if filled else VT.VT_LIST_INT


# ----------------------------------------------------------------------------- item codecs
class _Codec:
    """How one item travels: as a scalar field value, or written into / read from a sub-message."""

    __slots__ = ("message", "write", "read")

    def __init__(self, message: bool, write: Callable[..., Any], read: Callable[..., Any]) -> None:
        self.message = message
        self.write = write
        self.read = read


def _write_str(x: str, ctx: SerdeContext) -> bytes:
    return x.encode("utf-8", "surrogateescape")


def _read_str(x: bytes, ctx: SerdeContext) -> str:
    return x.decode("utf-8", "surrogateescape")


def _write_tensor(x: Any, msg: pb.TensorDef, ctx: SerdeContext) -> None:
    array_to_tensor_def(x, msg, ctx.where)


def _read_tensor(msg: pb.TensorDef, ctx: SerdeContext) -> Any:
    return array_from_tensor_def(msg, ctx.where)


def _write_desc(x: Any, msg: pb.TensorDescriptor, ctx: SerdeContext) -> None:
    tensor_type_to_desc(x, msg)


def _read_desc(msg: pb.TensorDescriptor, ctx: SerdeContext) -> Any:
    return tensor_type_from_desc(msg, ctx.ir, ctx.where)


def _write_named(x: NamedAttrs, msg: pb.NamedAttrs, ctx: SerdeContext) -> None:
    msg.name = x.name
    for key, value in x.attrs.items():
        ctx.at(f"{ctx.where} field {key!r}").write_attr(value, msg.attr[key])


def _read_named(msg: pb.NamedAttrs, ctx: SerdeContext) -> NamedAttrs:
    return NamedAttrs(msg.name, {k: ctx.at(f"{ctx.where} field {k!r}").read_attr(v) for k, v in sorted(msg.attr.items())})


def _write_graph(x: Any, msg: pb.GraphDef, ctx: SerdeContext) -> None:
    ctx.write_graph(x, msg)


def _read_graph(msg: pb.GraphDef, ctx: SerdeContext) -> Any:
    return ctx.read_graph(msg)


def _plain(x: Any, ctx: SerdeContext) -> Any:
    return x


INT_CODEC = _Codec(False, _plain, _plain)
FLOAT_CODEC = _Codec(False, _plain, _plain)
BOOL_CODEC = _Codec(False, _plain, _plain)
STR_CODEC = _Codec(False, _write_str, _read_str)
BYTES_CODEC = _Codec(False, _plain, _plain)
DTYPE_CODEC = _Codec(False, lambda x, ctx: x.ge, lambda x, ctx: dtype_from_ge(x, ctx.where))
TENSOR_CODEC = _Codec(True, _write_tensor, _read_tensor)
DESC_CODEC = _Codec(True, _write_desc, _read_desc)
NAMED_CODEC = _Codec(True, _write_named, _read_named)
GRAPH_CODEC = _Codec(True, _write_graph, _read_graph)


# ----------------------------------------------------------------------------- serializers
class ValueSerializer:
    """One value in one oneof case of ``AttrDef``."""

    __slots__ = ("type_id", "case", "codec")
    list_type = None

    def __init__(self, type_id: AttrType, case: str, codec: _Codec) -> None:
        self.type_id = type_id
        self.case = case
        self.codec = codec

    def serialize(self, value: AttrValue, attr_def: pb.AttrDef, ctx: SerdeContext) -> None:
        if self.codec.message:
            msg = getattr(attr_def, self.case)
            msg.SetInParent()
            self.codec.write(value.value, msg, ctx)
        else:
            setattr(attr_def, self.case, self.codec.write(value.value, ctx))

    def deserialize(self, attr_def: pb.AttrDef, ctx: SerdeContext) -> AttrValue:
        return AttrValue(self.type_id, self.codec.read(getattr(attr_def, self.case), ctx))

    def __repr__(self) -> str:
        return f"ValueSerializer({self.type_id.name} -> {self.case})"


class ListSerializer:
    """A list in one repeated field of ``AttrDef.ListValue``, typed by ``val_type``."""

    __slots__ = ("type_id", "field", "list_type", "codec")
    case = "list"

    def __init__(self, type_id: AttrType, field: str, list_type: int, codec: _Codec) -> None:
        self.type_id = type_id
        self.field = field
        self.list_type = list_type
        self.codec = codec

    def serialize(self, value: AttrValue, attr_def: pb.AttrDef, ctx: SerdeContext) -> None:
        lv = attr_def.list
        lv.SetInParent()
        lv.val_type = cast("pb.AttrDef.ListValue.ListValueType", self.list_type)
        items = getattr(lv, self.field)
        if self.codec.message:
            for i, x in enumerate(value.value):
                self.codec.write(x, items.add(), ctx.at(f"{ctx.where} item {i}"))
        else:
            items.extend(self.codec.write(x, ctx) for x in value.value)

    def deserialize(self, attr_def: pb.AttrDef, ctx: SerdeContext) -> AttrValue:
        items = getattr(attr_def.list, self.field)
        if self.codec.message:
            payload = tuple(self.codec.read(x, ctx.at(f"{ctx.where} item {i}")) for i, x in enumerate(items))
        else:
            payload = tuple(self.codec.read(x, ctx) for x in items)
        return AttrValue(self.type_id, payload)

    def __repr__(self) -> str:
        return f"ListSerializer({self.type_id.name} -> list.{self.field})"


class ListListSerializer:
    """A list of lists in ``list_list_int`` or ``list_list_float``."""

    __slots__ = ("type_id", "case", "inner")
    list_type = None

    def __init__(self, type_id: AttrType, case: str, inner: str) -> None:
        self.type_id = type_id
        self.case = case
        self.inner = inner

    def serialize(self, value: AttrValue, attr_def: pb.AttrDef, ctx: SerdeContext) -> None:
        outer = getattr(attr_def, self.case)
        outer.SetInParent()
        rows = getattr(outer, f"list_list_{self.inner}")
        for row in value.value:
            getattr(rows.add(), f"list_{self.inner}").extend(row)

    def deserialize(self, attr_def: pb.AttrDef, ctx: SerdeContext) -> AttrValue:
        rows = getattr(getattr(attr_def, self.case), f"list_list_{self.inner}")
        return AttrValue(self.type_id, tuple(tuple(getattr(row, f"list_{self.inner}")) for row in rows))

    def __repr__(self) -> str:
        return f"ListListSerializer({self.type_id.name} -> {self.case})"


BUILTIN_SERIALIZERS: tuple[tuple[AttrType, Any], ...] = (
    (A.INT, ValueSerializer(A.INT, "i", INT_CODEC)),
    (A.FLOAT, ValueSerializer(A.FLOAT, "f", FLOAT_CODEC)),
    (A.BOOL, ValueSerializer(A.BOOL, "b", BOOL_CODEC)),
    (A.STR, ValueSerializer(A.STR, "s", STR_CODEC)),
    (A.BYTES, ValueSerializer(A.BYTES, "bt", BYTES_CODEC)),
    (A.DTYPE, ValueSerializer(A.DTYPE, "dt", DTYPE_CODEC)),
    (A.TENSOR, ValueSerializer(A.TENSOR, "t", TENSOR_CODEC)),
    (A.TENSOR_DESC, ValueSerializer(A.TENSOR_DESC, "td", DESC_CODEC)),
    (A.NAMED_ATTRS, ValueSerializer(A.NAMED_ATTRS, "func", NAMED_CODEC)),
    (A.GRAPH, ValueSerializer(A.GRAPH, "g", GRAPH_CODEC)),
    (A.LIST_INT, ListSerializer(A.LIST_INT, "i", VT.VT_LIST_INT, INT_CODEC)),
    (A.LIST_FLOAT, ListSerializer(A.LIST_FLOAT, "f", VT.VT_LIST_FLOAT, FLOAT_CODEC)),
    (A.LIST_BOOL, ListSerializer(A.LIST_BOOL, "b", VT.VT_LIST_BOOL, BOOL_CODEC)),
    (A.LIST_STR, ListSerializer(A.LIST_STR, "s", VT.VT_LIST_STRING, STR_CODEC)),
    (A.LIST_BYTES, ListSerializer(A.LIST_BYTES, "bt", VT.VT_LIST_BYTES, BYTES_CODEC)),
    (A.LIST_DTYPE, ListSerializer(A.LIST_DTYPE, "dt", VT.VT_LIST_DATA_TYPE, DTYPE_CODEC)),
    (A.LIST_TENSOR, ListSerializer(A.LIST_TENSOR, "t", VT.VT_LIST_TENSOR, TENSOR_CODEC)),
    (A.LIST_TENSOR_DESC, ListSerializer(A.LIST_TENSOR_DESC, "td", VT.VT_LIST_TENSOR_DESC, DESC_CODEC)),
    (A.LIST_NAMED_ATTRS, ListSerializer(A.LIST_NAMED_ATTRS, "na", VT.VT_LIST_NAMED_ATTRS, NAMED_CODEC)),
    (A.LIST_GRAPH, ListSerializer(A.LIST_GRAPH, "g", VT.VT_LIST_GRAPH, GRAPH_CODEC)),
    (A.LIST_LIST_INT, ListListSerializer(A.LIST_LIST_INT, "list_list_int", "i")),
    (A.LIST_LIST_FLOAT, ListListSerializer(A.LIST_LIST_FLOAT, "list_list_float", "f")),
)


def default_serializer_registry() -> AttrSerializerRegistry:
    """A fresh registry holding a serializer for every builtin attribute type."""
    registry = AttrSerializerRegistry()
    for type_id, serializer in BUILTIN_SERIALIZERS:
        registry.register(type_id, serializer)
    return registry


#: The name this function had first; kept for code written against it.
default_registry = default_serializer_registry
