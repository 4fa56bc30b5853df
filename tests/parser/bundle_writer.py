"""A minimal writer of checkpoint index tables, for tests that need an index TensorFlow would not write
(an entry with a wrong shape, say).

The layout is the one :mod:`scopefusion.parser.tensor_bundle` reads: one data block (every entry a
restart point, keys not prefix-shared), an empty meta-index block, an index block with one entry
pointing at the data block, each block followed by its compression byte and masked CRC32C, then the
48-byte footer ending in the table magic.
"""

from __future__ import annotations

import struct

from scopefusion.parser.tensor_bundle import TABLE_MAGIC, crc32c, mask_crc, read_table
from scopefusion.parser.wire import encode_varint

__all__ = ["read_table", "rewrite_index", "write_table"]


def _block(entries: list[tuple[bytes, bytes]]) -> bytes:
    body = bytearray()
    restarts = []
    for key, value in entries:
        restarts.append(len(body))
        body += encode_varint(0) + encode_varint(len(key)) + encode_varint(len(value)) + key + value
    restarts = restarts or [0]
    body += b"".join(struct.pack("<I", r) for r in restarts) + struct.pack("<I", len(restarts))
    return bytes(body)


def _with_trailer(block: bytes) -> bytes:
    return block + b"\x00" + struct.pack("<I", mask_crc(crc32c(block + b"\x00")))


def write_table(entries: list[tuple[bytes, bytes]]) -> bytes:
    """A table holding ``entries`` (sorted by key)."""
    entries = sorted(entries)
    data = _block(entries)
    out = bytearray(_with_trailer(data))
    meta_offset = len(out)
    meta = _block([])
    out += _with_trailer(meta)
    index_offset = len(out)
    last = entries[-1][0] if entries else b""
    index = _block([(last, encode_varint(0) + encode_varint(len(data)))])
    out += _with_trailer(index)
    handles = encode_varint(meta_offset) + encode_varint(len(meta)) + encode_varint(index_offset) + encode_varint(len(index))
    out += handles + b"\x00" * (40 - len(handles)) + struct.pack("<Q", TABLE_MAGIC)
    return bytes(out)


def rewrite_index(data: bytes, key: str, change) -> bytes:
    """The index ``data`` with the value under ``key`` replaced by ``change(value bytes)``."""
    entries = [(k, change(v) if k == key.encode() else v) for k, v in read_table(data)]
    return write_table(entries)
