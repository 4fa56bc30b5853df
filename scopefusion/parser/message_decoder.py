"""Protobuf messages decoded in Python from a schema table, for the model formats' parsers.

A parser declares its messages with :func:`message_class` and :func:`field` (the field numbers, names and
types of its ``.proto``), then calls :func:`decode`. The decoder reads only what every protobuf writer
writes: for anything else (a malformed field, a field with the wrong wire type, a string that is not
UTF-8, a message or ``oneof`` field given twice, an odd map entry, a closed enum's unknown value, groups,
deep nesting, a varint out of its field's range, a field the schema refuses) it raises
:class:`NeedsProtobuf`, and the caller parses the bytes with protobuf instead, which then gives protobuf's
result or error. So bytes decode here exactly as protobuf decodes them, or not at all (the tests fuzz
this against the generated protobuf classes).

Decoded messages have the field names, defaults and the few methods (``HasField``, ``WhichOneof``,
``SerializeToString``) the parsers read. Differences that nothing reads: repeated fields are lists (``()``
when empty), maps are dicts, an unset message field is a shared empty message, and ``SerializeToString``
returns the bytes the message was read from (a valid encoding of it: its users key caches by it or parse it
again).
"""

from __future__ import annotations

import struct
from types import MappingProxyType
from typing import Any, Callable

__all__ = [
    "BOOL", "BYTES", "DOUBLE", "ENUM", "FLOAT", "INT32", "INT64", "MAP", "MESSAGE", "STRING", "UINT32", "UINT64",
    "MAX_CACHED_ENTRY", "MAX_DEPTH", "DecodedMessage", "NeedsProtobuf", "decode", "decode_or_none", "field", "finish",
    "map_entry", "message_class", "skip_field", "varint",
]

# Field kinds; ENUM is a closed enum (its field's spec holds the known values), an open one is INT32.
INT32, INT64, UINT32, UINT64, BOOL, ENUM, FLOAT, DOUBLE, STRING, BYTES, MESSAGE, MAP = range(12)
_WIRE_TYPE = {INT32: 0, INT64: 0, UINT32: 0, UINT64: 0, BOOL: 0, ENUM: 0, FLOAT: 5, DOUBLE: 1,
              STRING: 2, BYTES: 2, MESSAGE: 2, MAP: 2}
MAX_DEPTH = 32  # protobuf allows 100 levels; deeper messages are left to it
_MASK32 = (1 << 32) - 1


class NeedsProtobuf(Exception):
    """The bytes hold something this decoder leaves to protobuf (see the module docstring)."""


class DecodedMessage:
    """One decoded message: set fields are instance attributes, unset ones fall back to class defaults."""

    _fields: dict[int, tuple[str, int, bool, Any]] = {}  # field number -> (name, kind, repeated, sub), see field()
    _presence: frozenset[str] = frozenset()  # the fields HasField answers for
    _explicit_presence = False  # whether every singular field has presence (proto2), else only messages and oneofs
    _fast: Callable[[bytes, int, int, int], Any] | None = None  # a decoder for this class's common case
    _entry_cache: dict[bytes, tuple[Any, Any]] | None = None  # map entries with these values, by their bytes
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


def message_class(
    name: str,
    fields: dict[int, tuple[str, int, bool, Any]] | None = None,
    oneof: tuple[str, list[str]] | None = None,
    refused: frozenset[int] = frozenset(),
    explicit_presence: bool = False,
) -> Any:
    """A :class:`DecodedMessage` subclass for ``fields`` (which may be added to until :func:`finish`);
    ``refused``: field numbers left to protobuf; ``explicit_presence``: every singular field has presence."""
    members = frozenset(oneof[1]) if oneof else frozenset()
    return type(name, (DecodedMessage,), {
        "_fields": {} if fields is None else fields, "_refused": refused, "_explicit_presence": explicit_presence,
        "_oneof": (oneof[0], members) if oneof else None, "_presence": members,
    })


def finish(*classes: Any) -> None:
    """Completes message classes once their fields are declared: which fields have presence, and class
    attributes for unset fields (message defaults are shared empty messages: nothing writes them)."""
    for cls in classes:
        singular = {n for n, kind, repeated, _ in cls._fields.values() if not repeated and kind != MAP}
        if not cls._explicit_presence:
            singular = {n for n, kind, _, _ in cls._fields.values() if n in singular and kind == MESSAGE}
        cls._presence = frozenset(singular) | (cls._oneof[1] if cls._oneof else frozenset())
        _set_defaults(cls)


def _set_defaults(cls) -> None:
    # NOTE: a closed enum's default is its first value, 0 for every enum of the schemas declared here.
    for name, kind, repeated, sub in cls._fields.values():
        if kind == MAP:
            value: Any = MappingProxyType({})
        elif repeated:
            value = ()
        elif kind == MESSAGE:
            value = sub.__new__(sub)
        elif kind == STRING:
            value = ""
        elif kind == BYTES:
            value = b""
        elif kind in (FLOAT, DOUBLE):
            value = 0.0
        elif kind == BOOL:
            value = False
        else:
            value = 0
        setattr(cls, name, value)


def field(name: str, kind: int, repeated: bool = False, sub: Any = None) -> tuple[str, int, bool, Any]:
    """A field's spec: ``sub`` is a message field's class, a map's ``(key kind, value kind or class)``, or a
    closed enum's known values."""
    return (name, kind, repeated, sub)


def decode_or_none(cls: Any, data: bytes) -> Any:
    """The message of class ``cls`` in ``data`` (read by the class's own decoder, if it has one), or None when
    protobuf must parse it."""
    fast = cls._fast
    try:
        if fast is not None:
            return fast(data, 0, len(data), 0)
        return decode(cls, data, 0, len(data), 0)
    except (NeedsProtobuf, IndexError, struct.error):
        return None


def varint(data: bytes, pos: int, end: int) -> tuple[int, int]:
    """The varint at ``pos`` and the position after it; a varint past ``end`` or of more than 64 bits is
    left to protobuf."""
    result = 0
    shift = 0
    while True:
        if pos >= end:
            raise NeedsProtobuf
        b = data[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if b < 0x80:
            if shift == 63 and b > 1:
                raise NeedsProtobuf
            return result, pos
        shift += 7
        if shift > 63:
            raise NeedsProtobuf


def _scalar(kind: int, value: int) -> int | bool:
    """A varint as its field's type; a value no writer gives that type (which protobuf would truncate) is
    left to protobuf."""
    if kind == INT64:
        return value - (1 << 64) if value >> 63 else value
    if kind == INT32:
        if value < 0x80000000:
            return value
        if value >= (1 << 64) - 0x80000000:
            return value - (1 << 64)
    elif kind == BOOL:
        if value <= 1:
            return value == 1
    elif kind == UINT32:
        if value <= _MASK32:
            return value
    elif kind == UINT64:
        return value
    raise NeedsProtobuf


def _enum(known: frozenset[int], value: int) -> int:
    """A closed enum's value; protobuf keeps an unknown one aside as an unknown field: left to it."""
    if value not in known:
        raise NeedsProtobuf
    return value


def _skip(data: bytes, pos: int, end: int, wire_type: int) -> int:
    """The position after an unknown field's value (protobuf keeps it aside; nothing reads it)."""
    if wire_type == 0:
        return varint(data, pos, end)[1]
    if wire_type == 2:
        length, pos = varint(data, pos, end)
        pos += length
    elif wire_type == 1:
        pos += 8
    elif wire_type == 5:
        pos += 4
    else:  # groups, and wire types that do not exist
        raise NeedsProtobuf
    if pos > end:
        raise NeedsProtobuf
    return pos


skip_field = _skip  # for decoders written for one message, which skip unknown fields as decode does


def _packed(kind: int, data: bytes, pos: int, end: int) -> list:
    """The values of a packed repeated number field in ``data[pos:end]``."""
    if kind == FLOAT or kind == DOUBLE:
        size = 4 if kind == FLOAT else 8
        count, extra = divmod(end - pos, size)
        if extra:
            raise NeedsProtobuf
        return list(struct.unpack_from(f"<{count}{'f' if kind == FLOAT else 'd'}", data, pos))
    values: list = []
    while pos < end:
        b = data[pos]
        if b < 0x80:
            if kind == BOOL:
                if b > 1:
                    raise NeedsProtobuf
                values.append(b == 1)
            else:
                values.append(b)
            pos += 1
        else:
            value, pos = varint(data, pos, end)
            values.append(_scalar(kind, value))
    return values


def decode(cls, data: bytes, pos: int, end: int, depth: int) -> Any:
    """Decodes the message of class ``cls`` in ``data[pos:end]``."""
    if depth > MAX_DEPTH:
        raise NeedsProtobuf
    message = cls.__new__(cls)
    values: dict[str, Any] = {"_raw": data if pos == 0 and end == len(data) else data[pos:end]}
    fields = cls._fields
    oneof = cls._oneof
    while pos < end:
        tag = data[pos]
        if tag < 0x80:
            pos += 1
        else:
            tag, pos = varint(data, pos, end)
        number, wire_type = tag >> 3, tag & 7
        spec = fields.get(number)
        if spec is None:
            if number == 0 or number >= 1 << 29 or number in cls._refused:
                raise NeedsProtobuf
            pos = _skip(data, pos, end, wire_type)
            continue
        name, kind, repeated, sub = spec
        if pos >= end:
            raise NeedsProtobuf
        if wire_type == 2:
            length = data[pos]
            if length < 0x80:
                pos += 1
            else:
                length, pos = varint(data, pos, end)
            start, pos = pos, pos + length
            if pos > end:
                raise NeedsProtobuf
            if kind == STRING:
                try:
                    value: Any = data[start:pos].decode("utf-8")
                except UnicodeDecodeError:
                    raise NeedsProtobuf from None
            elif kind == MESSAGE:
                fast = sub._fast
                value = decode(sub, data, start, pos, depth + 1) if fast is None else fast(data, start, pos, depth + 1)
            elif kind == BYTES:
                value = data[start:pos]
            elif kind == MAP:
                found = values.get(name)
                if found is None:
                    found = values[name] = {}
                map_entry(found, sub, data, start, pos, depth)
                continue
            elif repeated:
                found = values.get(name)
                if found is None:
                    values[name] = _packed(kind, data, start, pos)
                else:
                    found.extend(_packed(kind, data, start, pos))
                continue
            else:
                raise NeedsProtobuf
        elif wire_type != _WIRE_TYPE[kind]:
            raise NeedsProtobuf
        elif wire_type == 0:
            if data[pos] < 0x80 and kind <= UINT64:  # pos < end: checked above; a one-byte integer
                value = data[pos]
                pos += 1
            else:
                raw, pos = varint(data, pos, end)
                value = _enum(sub, raw) if kind == ENUM else _scalar(kind, raw)
        else:
            size = 4 if wire_type == 5 else 8
            if pos + size > end:
                raise NeedsProtobuf
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
                raise NeedsProtobuf  # a oneof given twice: protobuf merges or replaces
            values["_which"] = name
        if kind == MESSAGE and name in values:
            raise NeedsProtobuf  # a message given twice: protobuf merges the two
        values[name] = value
    message.__dict__.update(values)
    return message


def map_entry(into: dict, types: tuple[int, Any], data: bytes, pos: int, end: int, depth: int) -> None:
    """Adds one map entry (a key, field 1, then a value, field 2, as every writer writes them) to ``into``."""
    key_kind, value_type = types
    cache = None
    if isinstance(value_type, type) and issubclass(value_type, DecodedMessage) and end - pos <= MAX_CACHED_ENTRY:
        cache = value_type._entry_cache
    if cache is not None:
        entry = data[pos:end]
        known = cache.get(entry)
        if known is not None:
            if known[0] in into:
                raise NeedsProtobuf
            into[known[0]] = known[1]
            return
    if pos >= end:
        raise NeedsProtobuf
    tag = data[pos]
    if key_kind == STRING:
        if tag != 0x0A:
            raise NeedsProtobuf
        length, pos = varint(data, pos + 1, end)
        start, pos = pos, pos + length
        if pos > end:
            raise NeedsProtobuf
        try:
            key: Any = data[start:pos].decode("utf-8")
        except UnicodeDecodeError:
            raise NeedsProtobuf from None
    else:
        if tag != 0x08:
            raise NeedsProtobuf
        raw, pos = varint(data, pos + 1, end)
        key = _scalar(key_kind, raw)
    if key in into or pos >= end:
        raise NeedsProtobuf  # a repeated key, or no value
    tag = data[pos]
    if value_type == UINT32:
        if tag != 0x10:
            raise NeedsProtobuf
        raw, pos = varint(data, pos + 1, end)
        value: Any = _scalar(UINT32, raw)
    else:
        if tag != 0x12:
            raise NeedsProtobuf
        length, pos = varint(data, pos + 1, end)
        start, pos = pos, pos + length
        if pos > end:
            raise NeedsProtobuf
        if value_type == STRING:
            try:
                value = data[start:pos].decode("utf-8")
            except UnicodeDecodeError:
                raise NeedsProtobuf from None
        else:
            value = decode(value_type, data, start, pos, depth + 2)
    if pos != end:
        raise NeedsProtobuf
    into[key] = value
    if cache is not None:
        if len(cache) >= _MAX_CACHED_ENTRIES:
            cache.clear()
        cache[entry] = (key, value)


# A map entry whose value class has an ``_entry_cache`` is decoded once per process for each distinct
# encoding (a model's nodes share a few dozen distinct attributes: dtypes, strides, paddings). Equal bytes
# decode to equal messages, and nothing writes a decoded message, so the maps may share one.
MAX_CACHED_ENTRY = 512
_MAX_CACHED_ENTRIES = 4096
