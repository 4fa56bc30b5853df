"""A small protobuf wire-format walker that cuts large byte fields out of a message.

Parsing a 400 MB GraphDef with protobuf copies every weight at least once. This module walks the wire
format of a buffer (typically an ``mmap`` of the model file) and returns a copy of the message with the
large ``bytes`` fields named by a :class:`Spec` removed, plus where each removed field lies in the buffer,
so the caller parses the small remainder with protobuf and turns each cut field into a zero-copy
``np.frombuffer(buffer, offset=..., count=...)`` view.

A cut is addressed by its :data:`Path`: one ``(field number, key)`` step per nesting level, where ``key``
is the occurrence number of that field inside its parent message (0, 1, 2... in wire order) or, for a
map field declared with :class:`MapField`, the entry's key decoded as UTF-8.

Fields shorter than ``threshold`` bytes are copied verbatim and never walked, so the Python work is
proportional to the number of large fields, not to the size of the model.

NOTE: the walker reads a file through :class:`FileReader` (``pread`` into a small cache) rather than
through the ``mmap`` that the views use. Touching an mmap maps whole page-cache folios into the process
(hundreds of KB each for a freshly written file), so walking the headers between the weights through
the mmap would make the weights resident; ``pread`` copies only the bytes it is asked for. (A file of at
most ``loader.WHOLE_READ_BYTES`` is read whole, with one ``pread``, and walked as bytes.)
"""

from __future__ import annotations

import os
from typing import Callable, Union

from ..records import FrozenRecord, Record

__all__ = [
    "CUT", "Cut", "FileReader", "MapField", "Path", "Spec", "WireError", "encode_varint", "field_kinds", "iter_fields",
    "read_varint", "strip",
]

Path = tuple[tuple[int, Union[int, str]], ...]

# Wire types.
VARINT, I64, LEN, SGROUP, EGROUP, I32 = 0, 1, 2, 3, 4, 5


class WireError(ValueError):
    """The bytes are not a well-formed protobuf message; ``offset`` is where the walker stopped."""

    def __init__(self, message: str, offset: int) -> None:
        super().__init__(f"{message} at byte {offset}")
        self.offset = offset


class FileReader:
    """Byte and slice access to a file through ``os.pread``, with a one-chunk cache.

    Supports what the walker needs: ``len()``, ``reader[i]`` (an int) and ``reader[a:b]`` (bytes).
    """

    def __init__(
        self, fd: int, size: int, chunk: int = 1 << 16, progress: Callable[[int, int], None] | None = None
    ) -> None:
        self._fd = fd
        self._size = size
        self._chunk = chunk
        self._start = 0
        self._data = b""
        self._progress = progress  # called as progress(furthest byte read, size) when a chunk is loaded
        self._furthest = 0

    def __len__(self) -> int:
        return self._size

    def _load(self, pos: int) -> None:
        self._start = pos - pos % self._chunk
        self._data = os.pread(self._fd, self._chunk, self._start)
        if self._progress is not None:
            self._advance(self._start + len(self._data))

    def _load_at(self, pos: int) -> None:
        """Caches the chunk that starts at ``pos`` (the walker's next bytes, wherever chunks are aligned)."""
        self._start = pos
        self._data = os.pread(self._fd, self._chunk, pos)
        if self._progress is not None:
            self._advance(pos + len(self._data))

    def _advance(self, end: int) -> None:
        """Reports the furthest byte read, at most once per 1 MiB of progress."""
        report = self._progress
        if report is not None and (end >= self._furthest + (1 << 20) or (end == self._size and end > self._furthest)):
            self._furthest = end
            report(end, self._size)

    def __getitem__(self, key):
        if isinstance(key, slice):
            start, stop, step = key.indices(self._size)
            if step != 1:
                raise ValueError("FileReader slices must be contiguous")
            if stop <= start:
                return b""
            if self._start <= start and stop <= self._start + len(self._data):
                return self._data[start - self._start:stop - self._start]
            if self._progress is not None:
                self._advance(stop)
            return os.pread(self._fd, stop - start, start)
        if key < 0:
            key += self._size
        if not 0 <= key < self._size:
            raise IndexError("FileReader index out of range")
        offset = key - self._start
        if not 0 <= offset < len(self._data):
            self._load(key)
            offset = key - self._start
        return self._data[offset]


class _CutMarker:
    __slots__ = ()

    def __repr__(self) -> str:
        return "CUT"


CUT = _CutMarker()
"""Spec leaf: cut this ``bytes`` field out when it is at least ``threshold`` bytes long."""


class MapField(FrozenRecord):
    """Spec node for a ``map<string, V>`` field: entries are addressed by key; ``value`` walks field 2."""

    _fields = ("value", "entry")
    _not_shown = _not_compared = frozenset({"entry"})

    def __init__(self, value: "Spec") -> None:
        self.value = value
        #: The spec of one map entry (``value`` at field 2), made once.
        self.entry = Spec({2: value})


class Spec(Record):
    """Which fields of a message to walk into (a nested :class:`Spec` or :class:`MapField`) or cut (:data:`CUT`)."""

    _fields = ("fields",)

    def __init__(self, fields: "dict[int, Spec | MapField | _CutMarker] | None" = None) -> None:
        self.fields = {} if fields is None else fields


class Cut(FrozenRecord):
    """A removed field: its path and where its payload lies in the buffer."""

    _fields = ("path", "offset", "length")

    def __init__(self, path: Path, offset: int, length: int) -> None:
        self.path = path
        self.offset = offset
        self.length = length


def read_varint(buf, pos: int, end: int) -> tuple[int, int]:
    """Reads a base-128 varint at ``pos``; returns ``(value, next position)``."""
    # Fast path: the varint's ten possible bytes lie inside the message and inside the bytes at hand
    # (a FileReader's cached chunk), so they are read from those bytes directly.
    if buf.__class__ is FileReader:
        data = buf._data
        offset = pos - buf._start
    else:
        data = buf
        offset = pos
    if pos + 10 <= end and 0 <= offset and offset + 10 <= len(data):
        b = data[offset]
        if b < 0x80:
            return b, pos + 1
        result = b & 0x7F
        shift = 7
        for k in range(offset + 1, offset + 10):
            b = data[k]
            result |= (b & 0x7F) << shift
            if b < 0x80:
                return result, pos + (k - offset) + 1
            shift += 7
        raise WireError("varint longer than 10 bytes", pos + 10)
    result = 0
    shift = 0
    while True:
        if pos >= end:
            raise WireError("truncated varint", pos)
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if not b & 0x80:
            return result, pos
        shift += 7
        if shift >= 70:
            raise WireError("varint longer than 10 bytes", pos)


def _skip(buf, pos: int, end: int, wire_type: int, field_number: int) -> tuple[int, int]:
    """Skips one field value; returns ``(payload start, next position)``."""
    if wire_type == VARINT:
        _, nxt = read_varint(buf, pos, end)
        return pos, nxt
    if wire_type == LEN:
        length, start = read_varint(buf, pos, end)
        nxt = start + length
        if nxt > end:
            raise WireError(f"field {field_number} claims {length} bytes but the message ends first", start)
        return start, nxt
    if wire_type == I64:
        nxt = pos + 8
    elif wire_type == I32:
        nxt = pos + 4
    elif wire_type == SGROUP:
        # Groups are obsolete; walk to the matching end-group tag.
        p = pos
        while True:
            key, p = read_varint(buf, p, end)
            wt = key & 7
            if wt == EGROUP:
                if key >> 3 != field_number:
                    raise WireError("mismatched end-group tag", p)
                return pos, p
            _, p = _skip(buf, p, end, wt, key >> 3)
    else:
        raise WireError(f"invalid wire type {wire_type} for field {field_number}", pos)
    if nxt > end:
        raise WireError(f"field {field_number} runs past the end of the message", pos)
    return pos, nxt


def iter_fields(buf, start: int, end: int):
    """Yields ``(field number, wire type, field start, payload start, field end)`` for each field."""
    pos = start
    while pos < end:
        field_start = pos
        key, pos = read_varint(buf, pos, end)
        field_number, wire_type = key >> 3, key & 7
        if field_number == 0:
            raise WireError("field number 0", field_start)
        payload, pos = _skip(buf, pos, end, wire_type, field_number)
        yield field_number, wire_type, field_start, payload, pos


def field_kinds(buf, start: int, end: int, limit: int) -> list[tuple[int, int]]:
    """``(field number, wire type)`` of the first ``limit`` fields of the message in ``buf[start:end]`` (fewer
    when it has fewer), read as :func:`iter_fields` reads them, without walking into any field.

    Raises:
        WireError: one of those fields is malformed.
    """
    out: list[tuple[int, int]] = []
    reader = buf.__class__ is FileReader
    data, base = (buf._data, buf._start) if reader else (buf, 0)
    size = len(data)
    pos = start
    while pos < end and len(out) < limit:
        field_start = pos
        offset = pos - base
        if reader and pos + 11 <= end and not (0 <= offset and offset + 11 <= size):
            buf._load_at(pos)
            data, base = buf._data, buf._start
            size = len(data)
            offset = 0
        if pos + 11 <= end and 0 <= offset and offset + 11 <= size and data[offset] < 0x80 and data[offset] & 7 == LEN:
            number = data[offset] >> 3
            if number == 0:
                raise WireError("field number 0", field_start)
            b = data[offset + 1]
            if b < 0x80:
                length, payload = b, pos + 2
            elif data[offset + 2] < 0x80:
                length, payload = (b & 0x7F) | (data[offset + 2] << 7), pos + 3
            else:
                length, payload = read_varint(buf, pos + 1, end)
            pos = payload + length
            if pos > end:
                raise WireError(f"field {number} claims {length} bytes but the message ends first", payload)
            out.append((number, LEN))
            continue
        key, pos = read_varint(buf, pos, end)
        number, wire_type = key >> 3, key & 7
        if number == 0:
            raise WireError("field number 0", field_start)
        _, pos = _skip(buf, pos, end, wire_type, number)
        out.append((number, wire_type))
    return out


def encode_varint(value: int) -> bytes:
    """The protobuf varint of a non-negative ``value``."""
    out = bytearray()
    while True:
        b = value & 0x7F
        value >>= 7
        if value:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def _map_key(buf, start: int, end: int) -> str | None:
    # Fast path: the key (field 1, shorter than 128 bytes) comes first, as every writer puts it.
    head = buf[start:start + 2] if start + 2 <= end else b""
    if len(head) == 2 and head[0] == 0x0A and head[1] < 0x80 and start + 2 + head[1] <= end:
        return bytes(buf[start + 2:start + 2 + head[1]]).decode("utf-8", "replace")
    for number, wire_type, _, payload, nxt in iter_fields(buf, start, end):
        if number == 1 and wire_type == LEN:
            return bytes(buf[payload:nxt]).decode("utf-8", "replace")
    return None


def strip(buf, start: int, end: int, spec: Spec, threshold: int = 1024) -> tuple[bytes, list[Cut]]:
    """Copies the message in ``buf[start:end]`` without the large fields that ``spec`` marks :data:`CUT`.

    Returns the remaining message bytes (parse them with protobuf) and the cuts, in wire order.

    Raises:
        WireError: the bytes are not a well-formed message (truncated, bad wire type, bad lengths).
    """
    cuts: list[Cut] = []
    data = _strip(buf, start, end, spec, threshold, (), cuts)
    return data, cuts


_ONE_BYTE = [bytes((i,)) for i in range(0x80)]  # the varints of 0..127


def _strip(buf, start: int, end: int, spec: Spec, threshold: int, path: Path, cuts: list[Cut]) -> bytes:
    pieces: list[bytes] = []
    run_start = start  # start of the current run of verbatim fields
    counts: dict[int, int] = {}
    fields = spec.fields
    # iter_fields written out: a field whose key is one byte and whose length is at most two (nearly every
    # field of a GraphDef) is read from the bytes at hand (a FileReader's cached chunk) without a call.
    reader = buf.__class__ is FileReader
    data, base = (buf._data, buf._start) if reader else (buf, 0)
    size = len(data)
    pos = start
    while pos < end:
        field_start = pos
        offset = pos - base
        if reader and pos + 11 <= end and not (0 <= offset and offset + 11 <= size):
            buf._load_at(pos)
            data, base = buf._data, buf._start
            size = len(data)
            offset = 0
        if pos + 11 <= end and 0 <= offset and offset + 11 <= size and data[offset] < 0x80:
            key = data[offset]
            number, wire_type = key >> 3, key & 7
            if number == 0:
                raise WireError("field number 0", field_start)
            if wire_type != LEN:
                _, pos = _skip(buf, pos + 1, end, wire_type, number)
                continue
            b = data[offset + 1]
            if b < 0x80:
                length, payload = b, pos + 2
            elif data[offset + 2] < 0x80:
                length, payload = (b & 0x7F) | (data[offset + 2] << 7), pos + 3
            else:
                length, payload = read_varint(buf, pos + 1, end)
        else:
            key, pos = read_varint(buf, pos, end)
            number, wire_type = key >> 3, key & 7
            if number == 0:
                raise WireError("field number 0", field_start)
            if wire_type != LEN:
                _, pos = _skip(buf, pos, end, wire_type, number)
                continue
            length, payload = read_varint(buf, pos, end)
        nxt = pos = payload + length
        if nxt > end:
            raise WireError(f"field {number} claims {length} bytes but the message ends first", payload)
        sub = fields.get(number)
        if sub is None:
            continue
        ordinal = counts.get(number, 0)
        counts[number] = ordinal + 1
        if length < threshold:
            continue
        if run_start < field_start:
            pieces.append(buf[run_start:field_start])
        run_start = nxt
        if isinstance(sub, _CutMarker):
            cuts.append(Cut(path + ((number, ordinal),), payload, length))
            continue
        if isinstance(sub, MapField):
            key = _map_key(buf, payload, nxt)
            step: tuple[int, int | str] = (number, key if key is not None else "")
            inner = sub.entry
        else:
            step = (number, ordinal)
            inner = sub
        body = _strip(buf, payload, nxt, inner, threshold, path + (step,), cuts)
        if reader:
            data, base = buf._data, buf._start
            size = len(data)
        tag = (number << 3) | LEN
        pieces.append(_ONE_BYTE[tag] if tag < 0x80 else encode_varint(tag))
        pieces.append(_ONE_BYTE[len(body)] if len(body) < 0x80 else encode_varint(len(body)))
        pieces.append(body)
    if not pieces:
        return bytes(buf[start:end])
    if run_start < end:
        pieces.append(buf[run_start:end])
    return b"".join(pieces)
