"""A binary GraphDef decoded in Python, so that converting a frozen graph does not import protobuf.

:func:`decode_graph_def` reads the stripped GraphDef bytes that :func:`.wire.strip` leaves and returns
message objects with the field names, defaults and the few methods (``HasField``, ``WhichOneof``,
``SerializeToString``) that :mod:`.tf_nodes`, :mod:`.tf_attrs`, :mod:`.tf_tensors` and :mod:`.tf_functions`
read, for the messages of ``proto/tf_framework.proto`` that a GraphDef holds.

The decoder reads only what every TensorFlow writer writes: for anything else (a malformed field, a field
with the wrong wire type, a string that is not UTF-8, a message or ``oneof`` field given twice, an odd map
entry, a resource or variant tensor, groups, deep nesting, a varint out of its field's range) it returns
``None`` and the caller parses the bytes with protobuf instead, which then gives protobuf's result or
error. So a GraphDef decodes here exactly as protobuf decodes it, or not at all (the tests fuzz this).

Differences that nothing reads: repeated fields are lists (``()`` when empty), maps are dicts, an unset
message field is a shared empty message, and ``SerializeToString`` returns the bytes the message was read
from (its users key caches by it: equal bytes decode to equal values).
"""

from __future__ import annotations

import struct
from types import MappingProxyType
from typing import Any

__all__ = ["GraphDefMessage", "decode_graph_def"]

# Field kinds; varint kinds first.
_INT32, _INT64, _UINT32, _UINT64, _BOOL, _FLOAT, _DOUBLE, _STRING, _BYTES, _MESSAGE, _MAP = range(11)
_WIRE_TYPE = {_INT32: 0, _INT64: 0, _UINT32: 0, _UINT64: 0, _BOOL: 0, _FLOAT: 5, _DOUBLE: 1,
              _STRING: 2, _BYTES: 2, _MESSAGE: 2, _MAP: 2}
_MAX_DEPTH = 32  # protobuf allows 100 levels; deeper GraphDefs are left to it
_MASK32 = (1 << 32) - 1
_MASK64 = (1 << 64) - 1


class _NeedsProtobuf(Exception):
    """The bytes hold something this decoder leaves to protobuf (see the module docstring)."""


class GraphDefMessage:
    """One decoded message: set fields are instance attributes, unset ones fall back to class defaults."""

    _fields: dict[int, tuple[str, int, bool, Any]] = {}  # field number -> (name, kind, repeated, message class)
    _presence: frozenset[str] = frozenset()  # fields HasField answers for (message fields and oneof members)
    _oneof: tuple[str, frozenset[str]] | None = None  # (oneof name, member names), for WhichOneof
    _which: str | None = None  # the oneof member set
    _raw = b""
    _refused: frozenset[int] = frozenset()  # field numbers whose presence leaves the message to protobuf

    def HasField(self, name: str) -> bool:  # noqa: N802 (protobuf's name)
        if name not in self._presence:
            raise ValueError(f"{type(self).__name__} has no field {name!r} with presence")
        return name in self.__dict__

    def WhichOneof(self, group: str) -> str | None:  # noqa: N802 (protobuf's name)
        if self._oneof is None or self._oneof[0] != group:
            raise ValueError(f"{type(self).__name__} has no oneof {group!r}")
        return self._which

    def SerializeToString(self) -> bytes:  # noqa: N802 (protobuf's name)
        """The bytes this message was decoded from (a protobuf encoding of it)."""
        return self._raw

    def __repr__(self) -> str:
        shown = ", ".join(f"{k}={v!r}" for k, v in self.__dict__.items() if k[0] != "_")
        return f"{type(self).__name__}({shown})"


def _message_class(
    name: str,
    fields: dict[int, tuple[str, int, bool, Any]],
    oneof: tuple[str, list[str]] | None = None,
    refused: frozenset[int] = frozenset(),
):
    """A :class:`GraphDefMessage` subclass for ``fields``; ``refused`` are field numbers left to protobuf."""
    members = frozenset(oneof[1]) if oneof else frozenset()
    presence = frozenset(n for n, kind, repeated, _ in fields.values() if kind == _MESSAGE and not repeated)
    return type(name, (GraphDefMessage,), {
        "_fields": fields, "_refused": refused, "_presence": presence | members,
        "_oneof": (oneof[0], members) if oneof else None,
    })


def _set_defaults(cls) -> None:
    """Class attributes for unset fields; message defaults are shared empty messages (nothing writes them)."""
    for name, kind, repeated, sub in cls._fields.values():
        if kind == _MAP:
            value: Any = MappingProxyType({})
        elif repeated:
            value = ()
        elif kind == _MESSAGE:
            value = sub.__new__(sub)
        elif kind == _STRING:
            value = ""
        elif kind == _BYTES:
            value = b""
        elif kind in (_FLOAT, _DOUBLE):
            value = 0.0
        elif kind == _BOOL:
            value = False
        else:
            value = 0
        setattr(cls, name, value)


def _f(name: str, kind: int, repeated: bool = False, sub: Any = None) -> tuple[str, int, bool, Any]:
    return (name, kind, repeated, sub)


# The messages of tf_framework.proto that a GraphDef holds (ResourceHandleProto and VariantTensorDataProto
# are left to protobuf: their tensors' values are their serialization).
Dim = _message_class("Dim", {1: _f("size", _INT64), 2: _f("name", _STRING)})
TensorShapeProto = _message_class("TensorShapeProto", {2: _f("dim", _MESSAGE, True, Dim), 3: _f("unknown_rank", _BOOL)})
TensorProto = _message_class("TensorProto", {
    1: _f("dtype", _INT32), 2: _f("tensor_shape", _MESSAGE, False, TensorShapeProto), 3: _f("version_number", _INT32),
    4: _f("tensor_content", _BYTES), 5: _f("float_val", _FLOAT, True), 6: _f("double_val", _DOUBLE, True),
    7: _f("int_val", _INT32, True), 8: _f("string_val", _BYTES, True), 9: _f("scomplex_val", _FLOAT, True),
    10: _f("int64_val", _INT64, True), 11: _f("bool_val", _BOOL, True), 12: _f("dcomplex_val", _DOUBLE, True),
    13: _f("half_val", _INT32, True), 16: _f("uint32_val", _UINT32, True), 17: _f("uint64_val", _UINT64, True),
    18: _f("float8_val", _BYTES),
}, refused=frozenset({14, 15}))  # resource_handle_val, variant_val
NameAttrList = _message_class("NameAttrList", {1: _f("name", _STRING)})  # field 2 (attr) is added below
ListValue = _message_class("ListValue", {
    2: _f("s", _BYTES, True), 3: _f("i", _INT64, True), 4: _f("f", _FLOAT, True), 5: _f("b", _BOOL, True),
    6: _f("type", _INT32, True), 7: _f("shape", _MESSAGE, True, TensorShapeProto),
    8: _f("tensor", _MESSAGE, True, TensorProto), 9: _f("func", _MESSAGE, True, NameAttrList),
})
_ATTR_VALUE_MEMBERS = ["list", "s", "i", "f", "b", "type", "shape", "tensor", "placeholder", "func"]
AttrValue = _message_class("AttrValue", {
    1: _f("list", _MESSAGE, False, ListValue), 2: _f("s", _BYTES), 3: _f("i", _INT64), 4: _f("f", _FLOAT),
    5: _f("b", _BOOL), 6: _f("type", _INT32), 7: _f("shape", _MESSAGE, False, TensorShapeProto),
    8: _f("tensor", _MESSAGE, False, TensorProto), 9: _f("placeholder", _STRING),
    10: _f("func", _MESSAGE, False, NameAttrList),
}, ("value", _ATTR_VALUE_MEMBERS))
NameAttrList._fields[2] = _f("attr", _MAP, False, (_STRING, AttrValue))
DebugInfo = _message_class("ExperimentalDebugInfo", {
    1: _f("original_node_names", _STRING, True), 2: _f("original_func_names", _STRING, True),
})
_ATTR_MAP = (_STRING, AttrValue)
NodeDef = _message_class("NodeDef", {
    1: _f("name", _STRING), 2: _f("op", _STRING), 3: _f("input", _STRING, True), 4: _f("device", _STRING),
    5: _f("attr", _MAP, False, (_STRING, AttrValue)), 6: _f("experimental_debug_info", _MESSAGE, False, DebugInfo),
})
DtypeAndShape = _message_class("DtypeAndShape", {1: _f("dtype", _INT32), 2: _f("shape", _MESSAGE, False, TensorShapeProto)})
ArgDef = _message_class("ArgDef", {
    1: _f("name", _STRING), 2: _f("description", _STRING), 3: _f("type", _INT32), 4: _f("type_attr", _STRING),
    5: _f("number_attr", _STRING), 6: _f("type_list_attr", _STRING), 7: _f("handle_data", _MESSAGE, True, DtypeAndShape),
    16: _f("is_ref", _BOOL),
})
AttrDef = _message_class("AttrDef", {
    1: _f("name", _STRING), 2: _f("type", _STRING), 3: _f("default_value", _MESSAGE, False, AttrValue),
    4: _f("description", _STRING), 5: _f("has_minimum", _BOOL), 6: _f("minimum", _INT64),
    7: _f("allowed_values", _MESSAGE, False, AttrValue),
})
OpDef = _message_class("OpDef", {
    1: _f("name", _STRING), 2: _f("input_arg", _MESSAGE, True, ArgDef), 3: _f("output_arg", _MESSAGE, True, ArgDef),
    4: _f("attr", _MESSAGE, True, AttrDef), 5: _f("summary", _STRING), 6: _f("description", _STRING),
    16: _f("is_aggregate", _BOOL), 17: _f("is_stateful", _BOOL), 18: _f("is_commutative", _BOOL),
    19: _f("allows_uninitialized_input", _BOOL), 20: _f("control_output", _STRING, True),
})
ArgAttrs = _message_class("ArgAttrs", {1: _f("attr", _MAP, False, (_STRING, AttrValue))})
FunctionDef = _message_class("FunctionDef", {
    1: _f("signature", _MESSAGE, False, OpDef), 3: _f("node_def", _MESSAGE, True, NodeDef),
    4: _f("ret", _MAP, False, (_STRING, _STRING)), 5: _f("attr", _MAP, False, (_STRING, AttrValue)),
    6: _f("control_ret", _MAP, False, (_STRING, _STRING)), 7: _f("arg_attr", _MAP, False, (_UINT32, ArgAttrs)),
    8: _f("resource_arg_unique_id", _MAP, False, (_UINT32, _UINT32)),
})
GradientDef = _message_class("GradientDef", {1: _f("function_name", _STRING), 2: _f("gradient_func", _STRING)})
FunctionDefLibrary = _message_class("FunctionDefLibrary", {
    1: _f("function", _MESSAGE, True, FunctionDef), 2: _f("gradient", _MESSAGE, True, GradientDef),
})
VersionDef = _message_class("VersionDef", {
    1: _f("producer", _INT32), 2: _f("min_consumer", _INT32), 3: _f("bad_consumers", _INT32, True),
})
GraphDef = _message_class("GraphDef", {
    1: _f("node", _MESSAGE, True, NodeDef), 2: _f("library", _MESSAGE, False, FunctionDefLibrary),
    3: _f("version", _INT32), 4: _f("versions", _MESSAGE, False, VersionDef),
})
for _cls in (Dim, TensorShapeProto, TensorProto, NameAttrList, ListValue, AttrValue, DebugInfo, NodeDef,
             DtypeAndShape, ArgDef, AttrDef, OpDef, ArgAttrs, FunctionDef, GradientDef, FunctionDefLibrary,
             VersionDef, GraphDef):
    _set_defaults(_cls)


def decode_graph_def(data: bytes) -> GraphDefMessage | None:
    """The GraphDef in ``data``, or None when protobuf must parse it (see the module docstring)."""
    try:
        return _decode(GraphDef, data, 0, len(data), 0)
    except (_NeedsProtobuf, IndexError, struct.error):
        return None


def _varint(data: bytes, pos: int, end: int) -> tuple[int, int]:
    """The varint at ``pos`` and the position after it; a varint past ``end`` or of more than 64 bits is
    left to protobuf."""
    result = 0
    shift = 0
    while True:
        if pos >= end:
            raise _NeedsProtobuf
        b = data[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if b < 0x80:
            if shift == 63 and b > 1:
                raise _NeedsProtobuf
            return result, pos
        shift += 7
        if shift > 63:
            raise _NeedsProtobuf


def _scalar(kind: int, value: int) -> int | bool:
    """A varint as its field's type; a value no writer gives that type (which protobuf would truncate) is
    left to protobuf."""
    if kind == _INT64:
        return value - (1 << 64) if value >> 63 else value
    if kind == _INT32:
        if value < 0x80000000:
            return value
        if value >= (1 << 64) - 0x80000000:
            return value - (1 << 64)
    elif kind == _BOOL:
        if value <= 1:
            return value == 1
    elif kind == _UINT32:
        if value <= _MASK32:
            return value
    elif kind == _UINT64:
        return value
    raise _NeedsProtobuf


def _skip(data: bytes, pos: int, end: int, wire_type: int) -> int:
    """The position after an unknown field's value (protobuf keeps it aside; nothing reads it)."""
    if wire_type == 0:
        return _varint(data, pos, end)[1]
    if wire_type == 2:
        length, pos = _varint(data, pos, end)
        pos += length
    elif wire_type == 1:
        pos += 8
    elif wire_type == 5:
        pos += 4
    else:  # groups, and wire types that do not exist
        raise _NeedsProtobuf
    if pos > end:
        raise _NeedsProtobuf
    return pos


def _packed(kind: int, data: bytes, pos: int, end: int) -> list:
    """The values of a packed repeated number field in ``data[pos:end]``."""
    if kind == _FLOAT or kind == _DOUBLE:
        size = 4 if kind == _FLOAT else 8
        count, extra = divmod(end - pos, size)
        if extra:
            raise _NeedsProtobuf
        return list(struct.unpack_from(f"<{count}{'f' if kind == _FLOAT else 'd'}", data, pos))
    values: list = []
    while pos < end:
        b = data[pos]
        if b < 0x80:
            if kind == _BOOL:
                if b > 1:
                    raise _NeedsProtobuf
                values.append(b == 1)
            else:
                values.append(b)
            pos += 1
        else:
            value, pos = _varint(data, pos, end)
            values.append(_scalar(kind, value))
    return values


def _decode(cls, data: bytes, pos: int, end: int, depth: int) -> Any:
    """Decodes the message of class ``cls`` in ``data[pos:end]``."""
    if depth > _MAX_DEPTH:
        raise _NeedsProtobuf
    message = cls.__new__(cls)
    values: dict[str, Any] = {"_raw": data if pos == 0 and end == len(data) else data[pos:end]}
    fields = cls._fields
    oneof = cls._oneof
    while pos < end:
        tag = data[pos]
        if tag < 0x80:
            pos += 1
        else:
            tag, pos = _varint(data, pos, end)
        number, wire_type = tag >> 3, tag & 7
        spec = fields.get(number)
        if spec is None:
            if number == 0 or number >= 1 << 29 or number in cls._refused:
                raise _NeedsProtobuf
            pos = _skip(data, pos, end, wire_type)
            continue
        name, kind, repeated, sub = spec
        if pos >= end:
            raise _NeedsProtobuf
        if wire_type == 2:
            length = data[pos]
            if length < 0x80:
                pos += 1
            else:
                length, pos = _varint(data, pos, end)
            start, pos = pos, pos + length
            if pos > end:
                raise _NeedsProtobuf
            if kind == _STRING:
                try:
                    value: Any = data[start:pos].decode("utf-8")
                except UnicodeDecodeError:
                    raise _NeedsProtobuf from None
            elif kind == _MESSAGE:
                if sub is NodeDef:
                    value = _decode_node_def(data, start, pos, depth + 1)
                else:
                    value = _decode(sub, data, start, pos, depth + 1)
            elif kind == _BYTES:
                value = data[start:pos]
            elif kind == _MAP:
                found = values.get(name)
                if found is None:
                    found = values[name] = {}
                _map_entry(found, sub, data, start, pos, depth)
                continue
            elif repeated:
                found = values.get(name)
                if found is None:
                    values[name] = _packed(kind, data, start, pos)
                else:
                    found.extend(_packed(kind, data, start, pos))
                continue
            else:
                raise _NeedsProtobuf
        elif wire_type != _WIRE_TYPE[kind]:
            raise _NeedsProtobuf
        elif wire_type == 0:
            if data[pos] < 0x80 and kind != _BOOL:  # pos < end: checked above
                value = data[pos]
                pos += 1
            else:
                raw, pos = _varint(data, pos, end)
                value = _scalar(kind, raw)
        else:
            size = 4 if wire_type == 5 else 8
            if pos + size > end:
                raise _NeedsProtobuf
            value = struct.unpack_from("<f" if size == 4 else "<d", data, pos)[0]
            pos += size
        if repeated:
            found = values.get(name)
            if found is None:
                values[name] = [value]
            else:
                found.append(value)
            continue
        if oneof is not None and name in oneof[1]:
            if "_which" in values:
                raise _NeedsProtobuf  # a oneof given twice: protobuf merges or replaces
            values["_which"] = name
        if kind == _MESSAGE and name in values:
            raise _NeedsProtobuf  # a message given twice: protobuf merges the two
        values[name] = value
    message.__dict__.update(values)
    return message


_NODE_TAGS = frozenset({0x0A, 0x12, 0x1A, 0x22, 0x2A})  # NodeDef's fields 1 to 5, each of wire type 2
_NODE_STRINGS = {0x0A: "name", 0x12: "op", 0x22: "device"}  # tags of NodeDef's string fields 1, 2 and 4


def _decode_node_def(data: bytes, pos: int, end: int, depth: int) -> Any:
    """:func:`_decode` of a NodeDef whose fields are all among name, op, input, device and attr (as nearly
    every node's are), decoded as :func:`_decode` decodes them; any other node goes to :func:`_decode`."""
    start = pos
    values: dict[str, Any] = {"_raw": data[pos:end]}
    inputs: list[str] | None = None
    attr: dict[str, Any] | None = None
    strings = _NODE_STRINGS
    entries = _ATTR_ENTRIES
    while pos < end:
        tag = data[pos]
        if tag not in _NODE_TAGS or pos + 1 >= end:
            return _decode(NodeDef, data, start, end, depth)
        length = data[pos + 1]
        if length < 0x80:
            pos += 2
        else:
            length, pos = _varint(data, pos + 1, end)
        field_start, pos = pos, pos + length
        if pos > end:
            raise _NeedsProtobuf
        if tag == 0x2A:
            if attr is None:
                attr = values["attr"] = {}
            known = entries.get(data[field_start:pos]) if length <= _MAX_CACHED_ENTRY else None
            if known is None or known[0] in attr:
                _map_entry(attr, _ATTR_MAP, data, field_start, pos, depth)
            else:
                attr[known[0]] = known[1]
            continue
        try:
            text = data[field_start:pos].decode("utf-8")
        except UnicodeDecodeError:
            raise _NeedsProtobuf from None
        if tag == 0x1A:
            if inputs is None:
                inputs = values["input"] = [text]
            else:
                inputs.append(text)
        else:
            values[strings[tag]] = text
    node = NodeDef.__new__(NodeDef)
    node.__dict__.update(values)
    return node


def _map_entry(into: dict, types: tuple[int, Any], data: bytes, pos: int, end: int, depth: int) -> None:
    """Adds one map entry (a key, field 1, then a value, field 2, as every writer writes them) to ``into``."""
    key_kind, value_type = types
    cacheable = value_type is AttrValue and end - pos <= _MAX_CACHED_ENTRY
    if cacheable:
        entry = data[pos:end]
        known = _ATTR_ENTRIES.get(entry)
        if known is not None:
            if known[0] in into:
                raise _NeedsProtobuf
            into[known[0]] = known[1]
            return
    if pos >= end:
        raise _NeedsProtobuf
    tag = data[pos]
    if key_kind == _STRING:
        if tag != 0x0A:
            raise _NeedsProtobuf
        length, pos = _varint(data, pos + 1, end)
        start, pos = pos, pos + length
        if pos > end:
            raise _NeedsProtobuf
        try:
            key: Any = data[start:pos].decode("utf-8")
        except UnicodeDecodeError:
            raise _NeedsProtobuf from None
    else:
        if tag != 0x08:
            raise _NeedsProtobuf
        raw, pos = _varint(data, pos + 1, end)
        key = _scalar(key_kind, raw)
    if key in into or pos >= end:
        raise _NeedsProtobuf  # a repeated key, or no value
    tag = data[pos]
    if value_type == _UINT32:
        if tag != 0x10:
            raise _NeedsProtobuf
        raw, pos = _varint(data, pos + 1, end)
        value: Any = _scalar(_UINT32, raw)
    else:
        if tag != 0x12:
            raise _NeedsProtobuf
        length, pos = _varint(data, pos + 1, end)
        start, pos = pos, pos + length
        if pos > end:
            raise _NeedsProtobuf
        if value_type == _STRING:
            try:
                value = data[start:pos].decode("utf-8")
            except UnicodeDecodeError:
                raise _NeedsProtobuf from None
        else:
            value = _decode(value_type, data, start, pos, depth + 2)
    if pos != end:
        raise _NeedsProtobuf
    into[key] = value
    if cacheable:
        if len(_ATTR_ENTRIES) >= _MAX_CACHED_ENTRIES:
            _ATTR_ENTRIES.clear()
        _ATTR_ENTRIES[entry] = (key, value)


# Decoded attribute map entries by their encoding: a model's nodes share a few dozen distinct attributes
# (dtypes, strides, paddings), so most entries are decoded once per process. Equal bytes decode to equal
# messages, and nothing writes a decoded message, so the nodes may share one.
_ATTR_ENTRIES: dict[bytes, tuple[str, Any]] = {}
_MAX_CACHED_ENTRY = 512
_MAX_CACHED_ENTRIES = 4096
