"""One large NodeDef's tensor contents cut out as :func:`.wire.strip` cuts them, for the layout writers give.

Decoding a GraphDef read whole in one walk (see :mod:`.tf_node_decoder`) strips each large node on its
own. :func:`.wire.strip` walks a node generically (a spec per level, a path and a :class:`.wire.Cut` per
cut, the views made from the paths afterwards), which costs more than decoding the node. Nearly every large
node of a frozen graph is a constant whose ``value`` attribute holds a tensor whose only large field is its
``tensor_content``, each level written with one-byte tags, the map key first. :func:`cut_node` strips such a
node directly: the bytes it gives are those ``strip`` gives (the fields before and after each cut content
copied, every enclosing length written again, as ``strip`` writes it), and the views those
``tg_def._views_by_node`` makes of ``strip``'s cuts. Any other node (a field of another wire type, a large
attribute of another layout, a content given twice) gives None, and the caller strips it with ``strip``.
"""

from __future__ import annotations

from typing import Any

from .wire import WireError, encode_varint, read_varint

__all__ = ["cut_entry", "cut_node"]

_ATTR_TAG = 0x2A  # NodeDef.attr (field 5, length-delimited)
_KEY_TAG, _VALUE_TAG = 0x0A, 0x12  # a map entry's key and value
_TENSOR_TAG = 0x42  # AttrValue.tensor (field 8)
_CONTENT_TAG = 0x22  # TensorProto.tensor_content (field 4)
_ONE_BYTE = [bytes((i,)) for i in range(0x80)]


def _length(data: bytes, pos: int, end: int) -> tuple[int, int]:
    """The length varint at ``pos`` and the position after it (:func:`.wire.read_varint`); ``(-1, pos)`` where
    that finds no varint before ``end``, so that the caller leaves the node to ``strip``."""
    try:
        return read_varint(data, pos, end)
    except WireError:
        return -1, pos


def _delimited(data: bytes, pos: int, end: int) -> tuple[int, int] | None:
    """``(payload start, payload end)`` of the length-delimited field whose one-byte tag is at ``pos``; None
    where its length is no varint or runs past ``end``. Most lengths are one byte, read without a call."""
    length = data[pos + 1] if pos + 1 < end else 0x80
    if length < 0x80:
        payload = pos + 2
    else:
        length, payload = _length(data, pos + 1, end)
    nxt = payload + length
    if length < 0 or nxt > end:
        return None
    return payload, nxt


def _varint(value: int) -> bytes:
    return _ONE_BYTE[value] if value < 0x80 else encode_varint(value)


def cut_node(data: bytes, start: int, end: int, threshold: int,
             buffer: Any) -> tuple[bytes, dict[str, tuple[Any, int, int]] | None] | None:
    """``(the bytes wire.strip leaves of the NodeDef in data[start:end], the cut contents' views by attribute
    name, None when none is cut)`` as ``strip`` with the GraphDef's node spec and ``threshold`` gives them,
    each view ``(buffer, offset, length)`` (``data`` holds ``buffer``'s bytes); None when the node's layout
    is not the common one (see the module docstring)."""
    pieces: list[bytes] = []
    views: dict[str, tuple[Any, int, int]] = {}
    run = pos = start
    while pos < end:
        tag = data[pos]
        if tag >= 0x80 or tag & 7 != 2 or tag < 8:
            return None  # a field of another wire type, a long tag or field number 0: left to strip
        field = _delimited(data, pos, end)
        if field is None:
            return None
        payload, nxt = field
        if tag == _ATTR_TAG and nxt - payload >= threshold:
            cut = cut_entry(data, payload, nxt, threshold)
            if cut is None:
                return None
            entry, key, content, content_length = cut
            if run < pos:
                pieces.append(data[run:pos])
            pieces.append(b"\x2a" + _varint(len(entry)))
            pieces.append(entry)
            views[key] = (buffer, content, content_length)
            run = nxt
        pos = nxt
    if not pieces:
        return data[start:end], None
    if run < end:
        pieces.append(data[run:end])
    return b"".join(pieces), views


def cut_entry(data: bytes, pos: int, end: int, threshold: int) -> tuple[bytes, str, int, int] | None:
    """``(stripped entry, key, content offset, content length)`` of the attribute map entry in
    ``data[pos:end]``, when it is a short key then a value holding only a tensor whose only large field is
    its one ``tensor_content``; else None."""
    if end - pos < 2 or data[pos] != _KEY_TAG or data[pos + 1] >= 0x80:
        return None
    key_end = pos + 2 + data[pos + 1]
    if key_end + 1 >= end or data[key_end] != _VALUE_TAG:
        return None
    value_length, value = _length(data, key_end + 1, end)
    if value_length < 0 or value + value_length != end or value + 1 >= end or data[value] != _TENSOR_TAG:
        return None
    tensor_length, tensor = _length(data, value + 1, end)
    if tensor_length < 0 or tensor + tensor_length != end:
        return None
    found = _find_content(data, tensor, end)
    if found is None:
        return None
    field, content, content_end = found
    if content_end - content < threshold or (field == tensor and content_end == end):
        return None  # a short content is not cut; a tensor of nothing else is copied whole by strip
    rest = data[tensor:field] + data[content_end:end]
    value_bytes = b"\x42" + _varint(len(rest)) + rest
    try:
        key = data[pos + 2:key_end].decode("utf-8")
    except UnicodeDecodeError:
        return None
    return data[pos:key_end] + b"\x12" + _varint(len(value_bytes)) + value_bytes, key, content, content_end - content


def _find_content(data: bytes, pos: int, end: int) -> tuple[int, int, int] | None:
    """``(field start, content start, content end)`` of the one ``tensor_content`` of the TensorProto in
    ``data[pos:end]``, its fields walked with one-byte tags; None when it has none, two, or another layout."""
    found = None
    while pos < end:
        tag = data[pos]
        if tag >= 0x80 or tag < 8:
            return None
        wire_type = tag & 7
        if wire_type == 2:
            field = _delimited(data, pos, end)
            if field is None:
                return None
            payload, nxt = field
            if tag == _CONTENT_TAG:
                if found is not None:
                    return None
                found = (pos, payload, nxt)
        elif wire_type == 0:
            nxt = pos + 1
            while nxt < end and data[nxt] >= 0x80:
                nxt += 1
            nxt += 1
            if nxt > end or nxt - pos > 11:
                return None
        else:
            return None  # fixed-width fields (no TensorProto field has them unpacked) and groups: left to strip
        pos = nxt
    return found
