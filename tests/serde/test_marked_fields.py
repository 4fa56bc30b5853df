"""The fields of a serialized message that hold a weight marker (``serde.marked_fields``): the same fields, and
the same errors, as reading every field with ``parser.wire.iter_fields`` and searching each for a marker."""

from __future__ import annotations

import bisect
import random

import pytest

from scopefusion.parser.wire import LEN, WireError, encode_varint, iter_fields
from scopefusion.serde.marked_fields import marked_fields, marks_of

TOKEN = b"\x00MARK\x01"


def _reference(data: bytes, start: int, end: int, marks: list[int]) -> list[tuple[int, int, int, int]]:
    """Every field read by iter_fields up to the first after the last marker, each searched for a marker."""
    before_end = bisect.bisect_left(marks, end)
    last = marks[before_end - 1] if before_end else -1
    found = []
    for number, wire_type, field_start, payload, field_end in iter_fields(data, start, end):
        if field_start > last:
            break
        i = bisect.bisect_left(marks, payload)
        if wire_type == LEN and i < len(marks) and marks[i] < field_end:
            found.append((number, field_start, payload, field_end))
    return found


def _field(number: int, wire_type: int, body: bytes) -> bytes:
    key = encode_varint(number << 3 | wire_type)
    return key + encode_varint(len(body)) + body if wire_type == LEN else key + body


def _message(rng: random.Random, depth: int = 0) -> bytes:
    """Fields of every wire type, one-byte and longer keys and lengths, markers at any depth."""
    out = b""
    for _ in range(rng.randint(0, 12)):
        number = rng.choice([1, 2, 5, 7, 15, 16, 17, 300, 2**20])
        kind = rng.random()
        if kind < 0.15:
            out += _field(number, 0, encode_varint(rng.choice([0, 1, 127, 128, 2**40])))
        elif kind < 0.22:
            out += _field(number, 1, bytes(8))
        elif kind < 0.28:
            out += _field(number, 5, bytes(4))
        elif kind < 0.5 and depth < 3:
            out += _field(number, LEN, _message(rng, depth + 1))
        else:
            size = rng.choice([0, 3, 100, 127, 128, 300, 16383, 16384, 20000])
            body = bytearray(rng.getrandbits(8) & 0x7E for _ in range(size))  # no marker by chance
            if size >= len(TOKEN) and rng.random() < 0.4:
                at = rng.randrange(size - len(TOKEN) + 1)
                body[at : at + len(TOKEN)] = TOKEN
            out += _field(number, LEN, bytes(body))
    return out


@pytest.mark.parametrize("seed", range(40))
def test_marked_fields_are_those_a_field_by_field_search_finds(seed):
    rng = random.Random(seed)
    data = _message(rng)
    marks = marks_of(data, TOKEN)
    assert marked_fields(data, 0, len(data), marks) == _reference(data, 0, len(data), marks)
    for _, _, payload, field_end in _reference(data, 0, len(data), marks):  # and inside each marked field
        try:
            expected = _reference(data, payload, field_end, marks)
        except WireError:
            continue  # a bytes payload that does not read as a message
        assert marked_fields(data, payload, field_end, marks) == expected


def test_markers_are_found_in_order_without_overlap():
    data = b"ab" + TOKEN + TOKEN + b"c" + TOKEN
    assert marks_of(data, TOKEN) == [2, 2 + len(TOKEN), 3 + 2 * len(TOKEN)]
    assert marks_of(b"nothing here", TOKEN) == []


@pytest.mark.parametrize("data", [
    _field(1, LEN, b"x" * 10)[:-3] + TOKEN,  # a length past the end of the message
    _field(1, LEN, b"x" * 300)[:2],  # a length cut short
    b"\x02\x03ab" + TOKEN,  # field number 0
    _field(2, 0, b"")[:1] + b"\xff" * 3,  # a truncated varint
])
def test_a_malformed_message_raises_as_iter_fields_does(data):
    marks = marks_of(data, TOKEN) or [len(data) - 1]
    with pytest.raises(WireError) as expected:
        _reference(data, 0, len(data), marks)
    with pytest.raises(WireError) as found:
        marked_fields(data, 0, len(data), marks)
    assert str(found.value) == str(expected.value)
