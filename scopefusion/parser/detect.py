"""Which format a model path holds: from the path first, then from the bytes."""

from __future__ import annotations

import os
import re

from .wire import LEN, VARINT, WireError, field_kinds

__all__ = ["FORMATS", "SUFFIX_FORMATS", "format_from_path", "sniff", "sniff_against"]

FORMATS = ("savedmodel", "pb", "pbtxt", "onnx")

#: The format a file name's suffix (lower case) says.
SUFFIX_FORMATS = {".onnx": "onnx", ".pb": "pb", ".graphdef": "pb", ".pbtxt": "pbtxt", ".txt": "pbtxt"}
_TEXT_GRAPHDEF = re.compile(rb"^\s*(#[^\n]*\n\s*)*(node|library|versions)\s*[{:]")
_TEXT_ONNX = re.compile(rb"^\s*(#[^\n]*\n\s*)*(ir_version|graph|opset_import|producer_name)\s*[{:]")
_MAX_SNIFF_FIELDS = 64


def format_from_path(path: str, *, is_dir: bool | None = None) -> str | None:
    """The format a path's name says: a directory is a SavedModel; else by suffix; None when it says nothing.
    ``is_dir``: whether the path is a directory, when the caller knows (else the file system is asked)."""
    if os.path.isdir(path) if is_dir is None else is_dir:
        return "savedmodel"
    base = os.path.basename(path)
    if base in ("saved_model.pb", "saved_model.pbtxt"):
        return "savedmodel"
    return SUFFIX_FORMATS.get(os.path.splitext(base)[1].lower())


def sniff(buffer) -> str | None:
    """Guesses ``"onnx"``, ``"pb"`` (GraphDef), ``"savedmodel"`` (saved_model.pb), ``"pbtxt"`` or ``"onnx-text"``.

    Binary guesses come from the top-level fields' numbers and wire types: an ONNX ModelProto has
    ``ir_version`` (1, varint) and ``graph`` (7, bytes); a GraphDef has ``node`` (1, bytes); a SavedModel
    has a schema version (1, varint) and meta graphs (2, bytes) only. None when nothing fits.
    """
    text = _text_format(buffer)
    if text is not None:
        return text
    try:
        seen = _field_kinds(buffer, _MAX_SNIFF_FIELDS)
    except WireError:
        return None
    if seen is None:
        return None
    if seen.get(1) == LEN and set(seen) <= {1, 2, 3, 4, 5} and seen.get(3, VARINT) == VARINT:
        return "pb"
    if seen.get(7) == LEN and seen.get(1, VARINT) == VARINT:
        return "onnx"
    if seen.get(2) == LEN and set(seen) <= {1, 2} and seen.get(1, VARINT) == VARINT:
        return "savedmodel"
    return None


def sniff_against(buffer, named: str) -> str | None:
    """What :func:`sniff` finds in ``buffer`` when it is another format than ``named`` (the format the file's
    name says), else None: what a loader needs to refuse a misnamed file.

    For ``named == "pb"`` the first field usually settles it without walking 64 more: when it is a
    GraphDef's ``node`` (field 1, bytes), neither an ONNX model nor a SavedModel fits (both need field 1 to
    be a varint if present), so :func:`sniff` can only say ``"pb"`` or None once the text forms are ruled
    out; and when that field is malformed, so is the first field :func:`sniff` reads (None).
    """
    if named == "pb":
        text = _text_format(buffer)
        if text is not None:
            return text
        try:
            first = field_kinds(buffer, 0, len(buffer), 1)
        except WireError:
            return None
        if first == [(1, LEN)]:
            return None
    found = sniff(buffer)
    return None if found == named else found


def _text_format(buffer) -> str | None:
    """``"pbtxt"`` or ``"onnx-text"`` when the buffer's first bytes read as that text form, else None."""
    head = bytes(buffer[:256])
    if _TEXT_GRAPHDEF.match(head):
        return "pbtxt"
    if _TEXT_ONNX.match(head):
        return "onnx-text"
    return None


def _field_kinds(buffer, limit: int) -> dict[int, int] | None:
    """The wire type of each field number among the first ``limit + 1`` top-level fields, or None when one
    number comes with two wire types.

    Raises:
        WireError: one of those fields is malformed.
    """
    seen: dict[int, int] = {}
    for number, wire_type in field_kinds(buffer, 0, len(buffer), limit + 1):
        if seen.setdefault(number, wire_type) != wire_type:
            return None
    return seen
