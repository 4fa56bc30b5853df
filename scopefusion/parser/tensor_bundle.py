"""TensorFlow checkpoints (the TensorBundle format) read without TensorFlow.

A checkpoint ``prefix`` (``variables/variables`` in a SavedModel) is two kinds of file:

* ``prefix.index``: a sorted key/value table in the LevelDB table layout. Data blocks of
  prefix-compressed entries with a restart array, each block followed by a one-byte compression type
  (none, as TensorFlow writes them, or snappy) and the masked CRC32C of the block; an index block pointing at the data blocks; a 48-byte footer
  ending in the table magic. The value under the empty key is a ``BundleHeaderProto``; every other key
  is a tensor name whose value is a ``BundleEntryProto`` (dtype, shape, shard, offset, size, masked
  CRC32C of the bytes).
* ``prefix.data-SSSSS-of-NNNNN``: the shards holding the tensors' bytes, little-endian, one after the
  other. A numeric tensor is its raw bytes; a ``string`` tensor is the varint64 lengths of its
  elements, a masked CRC32C of those lengths, then the bytes of every element.

Shards are memory-mapped: a numeric tensor is a read-only numpy view of the mapping, so reading a
checkpoint costs no copy of its weights. Every tensor's CRC32C is checked when it is read, every
block's when the index is read. Every failure is a :class:`~scopefusion.errors.ModelLoadError` naming
the file.
"""

from __future__ import annotations

import mmap
import os
import struct
from typing import Iterator

import crc32c as _crc32c
import numpy as np
from google.protobuf import message as _message

from ..errors import ModelLoadError
from .proto import tf_checkpoint_pb2 as ckpb
from .tf_tensors import numpy_dtype_of_tf, shape_of, tf_dtype
from .wire import WireError, read_varint

__all__ = [
    "CORRUPT_HINT",
    "FALLBACK_HINT",
    "TensorBundle",
    "crc32c",
    "mask_crc",
    "read_table",
    "snappy_decompress",
    "unmask_crc",
]

FALLBACK_HINT = "pass --savedmodel-loader tensorflow to let TensorFlow load it"
CORRUPT_HINT = "re-export the SavedModel, or pass --savedmodel-loader tensorflow to let TensorFlow try"

TABLE_MAGIC = 0xDB4775248B80FB57
_FOOTER_SIZE = 48
_BLOCK_TRAILER = 5
_MASK_DELTA = 0xA282EAD8
_NO_COMPRESSION = 0
_SNAPPY = 1
_STRING_DTYPE = 7


def crc32c(data, value: int = 0) -> int:
    """The CRC32C (Castagnoli) of ``data``, continuing from ``value``."""
    return _crc32c.crc32c(data, value)


def mask_crc(crc: int) -> int:
    """TensorFlow's (and LevelDB's) masked form of a CRC, as stored beside data that holds CRCs."""
    return ((((crc >> 15) | (crc << 17)) & 0xFFFFFFFF) + _MASK_DELTA) & 0xFFFFFFFF


def unmask_crc(masked: int) -> int:
    rot = (masked - _MASK_DELTA) & 0xFFFFFFFF
    return ((rot >> 17) | (rot << 15)) & 0xFFFFFFFF


class _Corrupt(ValueError):
    """The table bytes are inconsistent; the message says how (the caller adds the file name)."""


def _varint(data: bytes, pos: int, end: int) -> tuple[int, int]:
    try:
        return read_varint(data, pos, end)
    except WireError as exc:
        raise _Corrupt(f"{exc} at byte {pos}") from None


def _block_handle(data: bytes, pos: int, end: int) -> tuple[int, int, int]:
    offset, pos = _varint(data, pos, end)
    size, pos = _varint(data, pos, end)
    return offset, size, pos


def _read_block(data: bytes, offset: int, size: int) -> bytes:
    end = offset + size
    if offset < 0 or end + _BLOCK_TRAILER > len(data):
        raise _Corrupt(f"a block at byte {offset} of {size} bytes runs past the end of the file ({len(data)} bytes)")
    contents = data[offset:end]
    kind = data[end]
    (stored,) = struct.unpack_from("<I", data, end + 1)
    if unmask_crc(stored) != crc32c(data[offset:end + 1]):
        raise _Corrupt(f"the block at byte {offset} fails its CRC32C check")
    if kind == _NO_COMPRESSION:
        return contents
    if kind == _SNAPPY:
        return snappy_decompress(contents)
    raise _Corrupt(f"the block at byte {offset} has unknown compression type {kind}")


def snappy_decompress(data: bytes) -> bytes:
    """Decodes a raw snappy stream (the compression a table block may use; TensorFlow writes checkpoint
    indexes uncompressed, so this is for tables other writers made)."""
    size, pos = _varint(data, 0, len(data))
    out = bytearray()
    while pos < len(data):
        tag = data[pos]
        pos += 1
        kind = tag & 3
        if kind == 0:
            length = (tag >> 2) + 1
            if length > 60:
                extra = length - 60
                length = int.from_bytes(data[pos:pos + extra], "little") + 1
                pos += extra
            if pos + length > len(data):
                raise _Corrupt("a snappy literal runs past the end of its block")
            out += data[pos:pos + length]
            pos += length
            continue
        if kind == 1:
            length = ((tag >> 2) & 7) + 4
            distance = ((tag >> 5) << 8) | data[pos] if pos < len(data) else 0
            pos += 1
        else:
            width = 2 if kind == 2 else 4
            length = (tag >> 2) + 1
            distance = int.from_bytes(data[pos:pos + width], "little")
            pos += width
        if not 0 < distance <= len(out) or pos > len(data):
            raise _Corrupt("a snappy copy reaches before the start of its block")
        for _ in range(length):  # copies may overlap what they write
            out.append(out[-distance])
    if len(out) != size:
        raise _Corrupt(f"a snappy block decodes to {len(out)} bytes, not the {size} it declares")
    return bytes(out)


def _block_entries(block: bytes) -> Iterator[tuple[bytes, bytes]]:
    if len(block) < 4:
        raise _Corrupt("a block is shorter than its restart count")
    (restarts,) = struct.unpack_from("<I", block, len(block) - 4)
    limit = len(block) - 4 - 4 * restarts
    if restarts < 1 or limit < 0:
        raise _Corrupt(f"a block claims {restarts} restart points, which do not fit in its {len(block)} bytes")
    pos = 0
    key = b""
    while pos < limit:
        shared, pos = _varint(block, pos, limit)
        unshared, pos = _varint(block, pos, limit)
        value_size, pos = _varint(block, pos, limit)
        if shared > len(key) or pos + unshared + value_size > limit:
            raise _Corrupt(f"a block entry at byte {pos} does not fit its block")
        key = key[:shared] + block[pos:pos + unshared]
        pos += unshared
        yield key, block[pos:pos + value_size]
        pos += value_size


def read_table(data: bytes) -> list[tuple[bytes, bytes]]:
    """Every ``(key, value)`` of a LevelDB-layout table, in order.

    Raises:
        ValueError: the bytes are not a well-formed table (bad magic, truncated, a block's CRC fails,
            keys out of order); the message says which.
    """
    try:
        return _read_table(data)
    except _Corrupt as exc:
        raise ValueError(str(exc)) from None


def _read_table(data: bytes) -> list[tuple[bytes, bytes]]:
    if len(data) < _FOOTER_SIZE:
        raise _Corrupt(f"the file has {len(data)} bytes, fewer than a table footer's {_FOOTER_SIZE}")
    footer = len(data) - _FOOTER_SIZE
    (magic,) = struct.unpack_from("<Q", data, len(data) - 8)
    if magic != TABLE_MAGIC:
        raise _Corrupt("the table footer's magic number is wrong (the file is truncated or not a checkpoint index)")
    _, _, pos = _block_handle(data, footer, len(data) - 8)
    index_offset, index_size, _ = _block_handle(data, pos, len(data) - 8)
    entries: list[tuple[bytes, bytes]] = []
    for _, handle in _block_entries(_read_block(data, index_offset, index_size)):
        offset, size, _ = _block_handle(handle, 0, len(handle))
        for key, value in _block_entries(_read_block(data, offset, size)):
            if entries and key <= entries[-1][0]:
                raise _Corrupt(f"key {key[:60]!r} is out of order")
            entries.append((key, value))
    return entries


class TensorBundle:
    """The index of one checkpoint and lazily mapped data shards.

    Args:
        prefix: the checkpoint prefix (``.../variables/variables``).

    Raises:
        ModelLoadError: the index is missing, truncated or corrupt, has no header, or its header
            describes a checkpoint this reader does not handle (big-endian).
    """

    def __init__(self, prefix: str) -> None:
        self.prefix = prefix
        self.index_path = f"{prefix}.index"
        try:
            with open(self.index_path, "rb") as f:
                data = f.read()
        except FileNotFoundError:
            raise ModelLoadError(f"{self.index_path}: the checkpoint index is missing; {FALLBACK_HINT}") from None
        except OSError as exc:
            raise ModelLoadError(f"{self.index_path}: cannot read the checkpoint index ({exc.strerror or exc})") from None
        try:
            table = _read_table(data)
        except _Corrupt as exc:
            raise ModelLoadError(f"{self.index_path}: not a valid checkpoint index: {exc}; {CORRUPT_HINT}") from None
        if not table or table[0][0] != b"":
            raise ModelLoadError(f"{self.index_path}: the checkpoint index has no header entry; {CORRUPT_HINT}")
        self.header = ckpb.BundleHeaderProto()
        self._parse(self.header, table[0][1], "the header")
        if self.header.endianness != ckpb.BundleHeaderProto.LITTLE:
            raise ModelLoadError(f"{self.index_path}: the checkpoint is big-endian, which the native reader does not read; {CORRUPT_HINT}")
        if self.header.num_shards < 1:
            raise ModelLoadError(f"{self.index_path}: the header claims {self.header.num_shards} data shards; {CORRUPT_HINT}")
        self._entries: dict[str, bytes] = {}
        for key, value in table[1:]:
            try:
                name = key.decode("utf-8")
            except UnicodeDecodeError:
                raise ModelLoadError(f"{self.index_path}: a tensor name is not UTF-8 ({key[:60]!r}); {CORRUPT_HINT}") from None
            self._entries[name] = value
        self._shards: dict[int, mmap.mmap | bytes] = {}

    def _parse(self, msg, value: bytes, what: str) -> None:
        try:
            msg.ParseFromString(value)
        except _message.DecodeError:
            raise ModelLoadError(f"{self.index_path}: {what} of the checkpoint index is not a valid record; {CORRUPT_HINT}") from None

    def __contains__(self, key: object) -> bool:
        return key in self._entries

    def keys(self) -> list[str]:
        """Every tensor name, sorted."""
        return list(self._entries)

    def entry(self, key: str):
        """The ``BundleEntryProto`` of tensor ``key``."""
        value = self._entries.get(key)
        if value is None:
            raise ModelLoadError(f"{self.index_path}: the checkpoint has no tensor {key!r}; {CORRUPT_HINT}")
        entry = ckpb.BundleEntryProto()
        self._parse(entry, value, f"the entry of tensor {key!r}")
        return entry

    def shard_path(self, shard: int) -> str:
        return f"{self.prefix}.data-{shard:05d}-of-{self.header.num_shards:05d}"

    def _shard(self, shard: int):
        mapped = self._shards.get(shard)
        if mapped is not None:
            return mapped
        path = self.shard_path(shard)
        try:
            with open(path, "rb") as f:
                size = os.fstat(f.fileno()).st_size
                # An empty file cannot be mapped; it can only hold empty tensors.
                mapped = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) if size else b""
        except FileNotFoundError:
            raise ModelLoadError(f"{path}: the checkpoint data shard is missing; {CORRUPT_HINT}") from None
        except (OSError, ValueError) as exc:
            raise ModelLoadError(f"{path}: cannot map the checkpoint data shard ({exc}); {CORRUPT_HINT}") from None
        self._shards[shard] = mapped
        return mapped

    def tensor(self, key: str, *, expected_shape: tuple[int, ...] | None = None) -> np.ndarray:
        """Tensor ``key`` as a read-only array: a view of the mapped shard for numeric dtypes.

        Raises:
            ModelLoadError: no such tensor; an unknown dtype; sliced storage; a shard that is missing,
                too short or whose bytes fail the CRC32C check; a size that does not match the shape;
                a shape other than ``expected_shape``.
        """
        entry = self.entry(key)
        where = f"{self.index_path}: tensor {key!r}"
        if entry.slices:
            raise ModelLoadError(f"{where} is stored in slices (a partitioned variable), which the native reader does not join; {FALLBACK_HINT}")
        dtype = numpy_dtype_of_tf(entry.dtype)
        if dtype is None or (dtype == np.dtype(object) and entry.dtype != _STRING_DTYPE):
            raise ModelLoadError(f"{where} has dtype {tf_dtype(entry.dtype)}, which the native reader cannot read; {FALLBACK_HINT}")
        shape = shape_of(entry.shape)
        if shape is None or any(d < 0 for d in shape):
            raise ModelLoadError(f"{where} has no fully known shape; the index is corrupt; {CORRUPT_HINT}")
        if expected_shape is not None and tuple(expected_shape) != shape:
            raise ModelLoadError(
                f"{where} has shape {list(shape)}, but the SavedModel declares {list(expected_shape)}; {CORRUPT_HINT}"
            )
        count = int(np.prod(shape, dtype=np.int64))
        if not 0 <= entry.shard_id < self.header.num_shards:
            raise ModelLoadError(f"{where} names data shard {entry.shard_id}, but the header declares {self.header.num_shards}; {CORRUPT_HINT}")
        shard = self._shard(entry.shard_id)
        start, size = entry.offset, entry.size
        if start < 0 or size < 0 or start + size > len(shard):
            raise ModelLoadError(
                f"{self.shard_path(entry.shard_id)}: tensor {key!r} lies at bytes {start}..{start + size}, past the end of "
                f"the shard ({len(shard)} bytes); the shard is truncated; {CORRUPT_HINT}"
            )
        raw = memoryview(shard)[start:start + size]
        if entry.dtype == _STRING_DTYPE:
            array, crc = self._strings(raw, count, shape, where)
        else:
            array, crc = None, crc32c(raw)
        if unmask_crc(entry.crc32c) != crc:
            raise ModelLoadError(
                f"{self.shard_path(entry.shard_id)}: the bytes of tensor {key!r} fail their CRC32C check; the shard is "
                f"corrupt; {CORRUPT_HINT}"
            )
        if array is not None:
            return array
        if size != count * dtype.itemsize:
            raise ModelLoadError(
                f"{where} has {size} bytes, but shape {list(shape)} of {dtype.name} needs {count * dtype.itemsize}; {CORRUPT_HINT}"
            )
        array = np.frombuffer(shard, dtype=dtype.newbyteorder("<"), count=count, offset=start) if count else np.zeros(0, dtype)
        array = array.reshape(shape)
        array.flags.writeable = False
        return array

    def content_view(self, key: str) -> tuple[object, int, int]:
        """``(mapped shard, offset, size)`` of tensor ``key``'s bytes (read it with :meth:`tensor` first,
        which checks them)."""
        entry = self.entry(key)
        return self._shard(entry.shard_id), entry.offset, entry.size

    def _strings(self, raw: memoryview, count: int, shape: tuple[int, ...], where: str) -> tuple[np.ndarray, int]:
        """The elements of a string tensor and the CRC32C TensorFlow computes over it: the lengths as
        little-endian uint32, the stored masked CRC of those, then the elements' bytes."""
        data = bytes(raw)
        lengths = []
        pos = 0
        try:
            for _ in range(count):
                length, pos = read_varint(data, pos, len(data))
                lengths.append(length)
        except WireError:
            raise ModelLoadError(f"{where}: the string tensor's length table is truncated; {CORRUPT_HINT}") from None
        if pos + 4 + sum(lengths) != len(data) or any(n > 0xFFFFFFFF for n in lengths):
            raise ModelLoadError(f"{where}: the string tensor's lengths do not add up to its size; {CORRUPT_HINT}")
        crc = crc32c(struct.pack(f"<{count}I", *lengths))
        crc = crc32c(data[pos:], crc)
        pos += 4
        out = np.empty(count, dtype=object)
        for i, length in enumerate(lengths):
            out[i] = data[pos:pos + length]
            pos += length
        out = out.reshape(shape)
        out.flags.writeable = False
        return out, crc
