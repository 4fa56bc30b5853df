"""The fields of a serialized protobuf message that hold a marker (the framing of :mod:`.weight_stream`).

A writer defers its large arrays: it writes a marker in place of each one's bytes, serializes, then finds
the markers and replaces each with the array's bytes, recomputing the length of every field around it. This
module finds those fields: the markers' positions, and the length-delimited fields of one message that
hold one.

NOTE: speed. A model's main graph has hundreds of fields (its nodes) before the initializers that hold the
markers; every one is read to find where the next starts. :func:`marked_fields` reads a one-byte key of a
length-delimited field (field numbers below 16: every field of an ONNX graph but its sparse initializers
and metadata) and its length inline, and a one-byte key of a varint field with a one-byte value (a tensor's
dims and data type) too, and any other field as :func:`~scopefusion.parser.wire.iter_fields` reads it (so
with its errors); and it tests a field for a marker only when the next marker lies before the
field's end.
"""

from __future__ import annotations

import bisect

from ..parser.wire import LEN, VARINT, iter_fields, read_varint

__all__ = ["marked_fields", "marks_of"]


def marks_of(data: bytes, token: bytes) -> list[int]:
    """The positions of ``token`` in ``data``, in order, none overlapping."""
    found = []
    at = data.find(token)
    while at >= 0:
        found.append(at)
        at = data.find(token, at + len(token))
    return found


def marked_fields(data: bytes, start: int, end: int, marks: list[int]) -> list[tuple[int, int, int, int]]:
    """``(field number, field start, payload start, field end)`` of each length-delimited field of the message
    in ``data[start:end]`` whose payload holds a marker (a position of ``marks``), in order. The fields are
    read up to the first that starts after the message's last marker: the rest hold none."""
    found = []
    last = _last_mark(marks, end)
    upcoming = _next_mark(marks, start, end)  # the first marker at or after the field being read
    pos = start
    while pos < end:
        key = data[pos]
        if 8 <= key < 0x80 and key & 7 == LEN:
            if pos + 3 <= end and data[pos + 1] < 0x80:  # a one-byte length
                length, payload = data[pos + 1], pos + 2
            elif pos + 3 <= end and data[pos + 2] < 0x80:  # a two-byte length
                length, payload = (data[pos + 1] & 0x7F) | data[pos + 2] << 7, pos + 3
            else:
                length, payload = read_varint(data, pos + 1, end)
            number, wire_type, field_start, field_end = key >> 3, LEN, pos, payload + length
            if field_end > end:  # a length past the message: iter_fields says so
                number, wire_type, field_start, payload, field_end = next(iter_fields(data, pos, end))
        elif 8 <= key < 0x80 and key & 7 == VARINT and pos + 2 <= end and data[pos + 1] < 0x80:
            # A one-byte varint (a tensor's dims and data type): what iter_fields reads, inline.
            number, wire_type, field_start, payload, field_end = key >> 3, VARINT, pos, pos + 1, pos + 2
        else:
            number, wire_type, field_start, payload, field_end = next(iter_fields(data, pos, end))
        if field_start > last:
            break
        pos = field_end
        if upcoming < field_end:  # a marker in this field (else none: the test below would say so)
            if wire_type == LEN and _marked(marks, payload, field_end):
                found.append((number, field_start, payload, field_end))
            upcoming = _next_mark(marks, field_end, end)
    return found


def _last_mark(marks: list[int], end: int) -> int:
    """The position of the last marker before ``end`` (-1 when there is none): a message's fields after it hold
    none, so its walk stops there (a message's tail, such as an ONNX graph's inputs, outputs and value infos
    after its initializers, is not read field by field)."""
    i = bisect.bisect_left(marks, end)
    return marks[i - 1] if i else -1


def _next_mark(marks: list[int], start: int, end: int) -> int:
    """The position of the first marker at or after ``start``; ``end`` when there is none."""
    i = bisect.bisect_left(marks, start)
    return marks[i] if i < len(marks) else end


def _marked(marks: list[int], start: int, end: int) -> bool:
    i = bisect.bisect_left(marks, start)
    return i < len(marks) and marks[i] < end
