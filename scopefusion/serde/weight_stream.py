"""Serialized models whose large tensors go from their arrays to the file without a copy in a message.

A writer builds its protobuf message with every large tensor's data left out: in its place the ``bytes``
field (GE ``TensorDef.data``, ONNX ``TensorProto.raw_data``) holds a marker, a random token and an index
into a :class:`DeferredWeights` table that keeps the array. Protobuf serializes that small message
(deterministically, as ever); :func:`frame` then walks its wire form down the message types to each
marker and returns the model as :class:`ModelBytes`: runs of the serialized bytes and :class:`Weight`
pieces, every enclosing length prefix recomputed for the real data. Protobuf writes a message's fields
in an order that does not depend on their contents, so the pieces joined are, byte for byte, what
protobuf writes for the complete message.

A writer asks for deferral through :func:`deferring`: while the ``with`` block runs, :func:`defer_array`
gives a marker for each array worth deferring (at least :data:`DEFER_MIN_BYTES` of data the format
writes as its plain C-order bytes, on a little-endian host) and the table (:func:`active_weights`) gives the
array back for a marker, so a pass that reads a tensor it wrote (ONNX's clean-up folds some) sees the real values.
Outside the block nothing is deferred, and messages are complete.

NOTE: memory. No second whole copy of a tensor is made. The arrays of a loaded model are mostly views
of the model file, memory-mapped, and a page of a mapped file the process touched counts in its
resident set (``VmRSS`` / ``VmHWM``) until it is unmapped: writing every weight through the mapping at once
would make the whole file resident. So a contiguous view of a mapped file is written from the mapping in
chunks of :data:`CHUNK_BYTES`, each chunk's pages mapped in one call before it is written
(``madvise(MADV_POPULATE_READ)``: a fault per page costs more than the copy) and given back once it is
(``madvise(MADV_DONTNEED)``, below), so one chunk at most is resident. That takes less CPU time than the
kernel's file-to-file copy (``os.sendfile``), which is slower when a tensor's offsets in the two files are
not aligned alike within a page, as they seldom are. Where the
kernel cannot map a range in one call (before Linux 5.14), the view is not read at all: iterating
:class:`ModelBytes` gives it as a :class:`~scopefusion.files.FileRange` of the same file, opened again
(found in ``/proc/self/maps``, checked by device and inode), which :mod:`scopefusion.files` copies in the
kernel (``os.sendfile``). Any other array is written in chunks of :data:`CHUNK_BYTES`: a C-contiguous one
as views of its own memory, a non-contiguous one (a transposed view) put in C order block by block, by a
worker thread ahead of the write and by the writing thread when it would otherwise wait (:class:`_Ahead`), in
:data:`AHEAD_BUFFERS` buffers reused for the whole write (:class:`Scratch`; new pages cost the kernel more than
the copy);
the mapped pages a chunk touched are then given back (``madvise(MADV_DONTNEED)``, harmless on a read-only
file mapping: the data stays in the page cache, and a later read maps it again). ``os.pread`` into a
buffer would not map pages either, but costs a copy of every byte through this process.
:meth:`ModelBytes.tobytes` writes each piece straight into the returned bytes' buffer.
"""

from __future__ import annotations

import io
import mmap
import os
import stat
import sys
import threading
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any, Callable, Iterator, Sequence, TypeVar, Union

import numpy as np
from google.protobuf.descriptor import FieldDescriptor
from numpy.lib.array_utils import byte_bounds

from ..files import FileRange
from ..parser.wire import encode_varint, read_varint
from .marked_fields import marked_fields, marks_of

__all__ = [
    "CHUNK_BYTES",
    "DEFER_MIN_BYTES",
    "DeferredWeights",
    "ModelBytes",
    "Weight",
    "active_weights",
    "call_deferring",
    "defer_array",
    "deferring",
    "frame",
    "stream_message",
]

T = TypeVar("T")

# Arrays smaller than this stay in the message: their bytes are cheap, a piece of their own is not.
DEFER_MIN_BYTES = 1 << 14
CHUNK_BYTES = 2 << 20
# Transposed blocks being copied or written at once (see _Ahead), each in a buffer of about CHUNK_BYTES.
AHEAD_BUFFERS = 3
# A non-contiguous array (a transposed view) up to this size is copied to C order whole, larger ones in chunks.
WHOLE_COPY_BYTES = 64 << 20
_TILE = (64, 256)  # rows x columns of the source's last two axes copied at a time (see _c_order)
_MAX_TILES = 1 << 14
_CACHED_COPY_BYTES = 1 << 15  # a non-contiguous array up to this size is copied by numpy at once (see _c_order)
_INDEX_BYTES = 4
# The length of a marker's random token. :func:`frame` looks for the token through the whole serialized message
# (every small tensor's data included); CPython's substring search skips ahead by up to the token's length at a
# time, so a 64-byte token is found about five times faster than a 12-byte one. A marker stays small against the
# array of at least DEFER_MIN_BYTES it stands for, and the framed bytes do not depend on its length.
TOKEN_BYTES = 64
_PAGE = mmap.PAGESIZE
_BYTES_TYPE = FieldDescriptor.TYPE_BYTES
_MADV_POPULATE_READ = getattr(mmap, "MADV_POPULATE_READ", 22)  # Linux 5.14; Python 3.11's mmap does not name it
# Bytes either side of a range whose pages the kernel maps with it (Linux's fault_around_bytes, by default).
_FAULT_AROUND = 64 << 10
# Whether madvise(MADV_POPULATE_READ) works in this process: None until a write tries it (see _Mapping.populates).
_POPULATE: list[bool | None] = [None]


class Weight:
    """One deferred tensor's data: the C-order bytes of ``array``, written chunk by chunk."""

    __slots__ = ("array", "nbytes")

    def __init__(self, array: np.ndarray) -> None:
        self.array = array
        self.nbytes = int(array.nbytes)

    def chunks(self, release: bool = True, scratch: "Scratch | None" = None) -> Iterator[memoryview]:
        """The data in chunks; with ``release``, the mapped file pages a chunk touched are given back once
        the next chunk is asked for (see the module NOTE). With ``scratch``, a non-contiguous array is put in
        C order chunk by chunk in that buffer, so a chunk is valid only until the next one is asked for."""
        array = self.array
        mapping = _Mapping.of(array) if release else None
        if array.flags.c_contiguous:
            flat = array.reshape(-1).view(np.uint8).data
            address = array.ctypes.data
            for start in range(0, len(flat), CHUNK_BYTES):
                chunk = flat[start : start + CHUNK_BYTES]
                if mapping is not None:
                    mapping.populate(address + start, len(chunk))
                yield chunk
                if mapping is not None:
                    mapping.release(address + start, len(chunk), _FAULT_AROUND)
            return
        if scratch is None and self.nbytes <= WHOLE_COPY_BYTES:
            yield _c_order(array)
        else:
            rows = array.shape[0]
            step = max(1, CHUNK_BYTES // max(1, self.nbytes // rows))
            for first in range(0, rows, step):
                block = array[first : first + step]
                yield _c_order(block, scratch.take(block.nbytes) if scratch is not None else None)
        if mapping is not None:
            low, high = byte_bounds(array)
            mapping.release(low, high - low)

    def blocks(self) -> "list[_Block]":
        """A non-contiguous array's data as blocks of whole rows (leading axis) of about :data:`CHUNK_BYTES`;
        the last one gives the mapped file pages the array touched back once it is put in C order."""
        array = self.array
        rows = array.shape[0]
        step = max(1, CHUNK_BYTES // max(1, self.nbytes // max(1, rows)))
        out = [_Block(array[first : first + step]) for first in range(0, rows, step)] or [_Block(array)]
        out[-1].release = _Mapping.of(array)
        out[-1].whole = array
        return out

    def file_range(self, sources: "_FileSources") -> FileRange | None:
        """The data as a range of the file the array maps, when it is a contiguous view of one and the kernel
        cannot map its pages in one call (see the module NOTE)."""
        array = self.array
        if not array.flags.c_contiguous:
            return None
        mapping = _Mapping.of(array)
        if mapping is None or mapping.populates():
            return None
        found = sources.find(mapping)
        if found is None:
            return None
        fd, offset = found
        return FileRange(fd, offset + array.ctypes.data - mapping.address, self.nbytes)

    def tobytes(self) -> bytes:
        return b"".join(self.chunks(release=False))

    def copy_into(self, target: np.ndarray) -> None:
        """Writes the data into ``target`` (a uint8 array of ``nbytes``), put in C order there directly."""
        array = self.array
        if array.flags.c_contiguous:
            target[:] = array.reshape(-1).view(np.uint8)
        else:
            _c_order(array, target)


class _Block:
    """Rows of a non-contiguous array to write in C order; the last block of an array carries the mapping
    whose pages the whole array touched (``release``), given back once it is copied."""

    __slots__ = ("array", "release", "whole")

    def __init__(self, array: np.ndarray) -> None:
        self.array = array
        self.release: _Mapping | None = None
        self.whole: np.ndarray | None = None

    def c_order(self, scratch: "Scratch") -> memoryview:
        out = _c_order(self.array, scratch.take(self.array.nbytes))
        if self.release is not None and self.whole is not None:
            low, high = byte_bounds(self.whole)
            self.release.release(low, high - low)
        return out


class _Ahead:
    """Puts ``blocks`` in C order, in order, on a worker thread and on the caller's thread together.

    NOTE: why. A conv filter is written transposed (``HWIO`` → ``OIHW``): putting it in C order costs more
    than writing it. numpy's copies and ``os.write`` / ``os.sendfile`` run without the GIL, so a
    worker copies the blocks ahead while the caller writes; a caller that finds its next block not yet copied
    copies one itself instead of waiting (the oldest not started, possibly a later one), so both cores copy.
    Block ``j`` goes into buffer ``j % len(buffers)`` (:data:`AHEAD_BUFFERS`, each reused for the whole write,
    :class:`Scratch`) and is started only once block ``j - len(buffers)`` is given back, that is once the
    caller has asked for the block after it (a chunk is valid until the next one is asked for). Blocks come
    out in order; an error while copying a block is raised when the caller reaches that block."""

    def __init__(self, blocks: Sequence[_Block]) -> None:
        self._blocks = blocks
        self._scratch = [Scratch() for _ in range(max(1, AHEAD_BUFFERS))]
        self._results: list[tuple[bool, Any] | None] = [None] * len(blocks)
        self._claimed = 0  # blocks a thread has started
        self._handed = 0  # blocks given to the caller
        self._released = 0  # blocks whose buffers are free again
        self._stopped = False
        self._lock = threading.Condition(threading.Lock())
        self._thread: threading.Thread | None = threading.Thread(target=self._work, name="scopefusion-c-order",
                                                                 daemon=True)
        try:
            self._thread.start()
        except RuntimeError:  # no thread can be started (the process is at its limit): the caller copies
            self._thread = None

    def _claim(self) -> int | None:
        """The next block to copy, now marked started, or None when none may start (call with the lock held)."""
        index = self._claimed
        if self._stopped or index >= len(self._blocks) or index >= self._released + len(self._scratch):
            return None
        self._claimed += 1
        return index

    def _copy(self, index: int) -> None:
        """Copies block ``index`` (without the lock: numpy releases the GIL) and records the outcome. An error
        reaches the caller when it gets to that block; an interrupt on the caller's own thread goes up at once."""
        try:
            result: tuple[bool, Any] = (True, self._blocks[index].c_order(self._scratch[index % len(self._scratch)]))
        except BaseException as e:
            result = (False, e)
        with self._lock:
            self._results[index] = result
            self._lock.notify_all()
        ok, value = result
        if not ok and not isinstance(value, Exception) and threading.current_thread() is not self._thread:
            raise value

    def _work(self) -> None:
        while True:
            with self._lock:
                index = self._claim()
                while index is None:
                    if self._stopped or self._claimed >= len(self._blocks):
                        return
                    self._lock.wait()
                    index = self._claim()
            self._copy(index)

    def next(self) -> memoryview:
        """The next block in C order (valid until the next call)."""
        with self._lock:
            self._released = self._handed  # the block handed out last is written: its buffer is free
            self._lock.notify_all()
            wanted = self._handed
        while True:
            with self._lock:
                result = self._results[wanted]
                if result is not None:
                    break
                index = self._claim()
                if index is None:  # the block is being copied, and no other may start yet
                    self._lock.wait()
                    continue
            self._copy(index)
        self._results[wanted] = None
        self._handed += 1
        ok, value = result
        if not ok:
            raise value
        return value

    def close(self) -> None:
        """Stops the worker (after the block it is copying, if any)."""
        with self._lock:
            self._stopped = True
            self._lock.notify_all()
        if self._thread is not None:
            self._thread.join()


class Scratch:
    """One buffer reused for every C-order chunk of a write: a fresh buffer per tensor would make the
    process touch (and the kernel clear) new pages for every transposed weight, which costs more than the copy."""

    __slots__ = ("_buffer",)

    def __init__(self) -> None:
        self._buffer = np.empty(0, np.uint8)

    def take(self, nbytes: int) -> np.ndarray:
        """The buffer's first ``nbytes`` bytes (grown when smaller); its previous contents are no longer valid."""
        if self._buffer.nbytes < nbytes:
            self._buffer = np.empty(max(nbytes, CHUNK_BYTES), np.uint8)
        return self._buffer[:nbytes]


def _c_order(array: np.ndarray, into: np.ndarray | None = None) -> memoryview:
    """A C-order copy of a non-contiguous array, as bytes; in ``into`` (a uint8 buffer of its size) when given.

    NOTE: numpy copies a transposed view element by element in the order of the destination, reading the
    source with a long stride (a conv filter ``HWIO`` → ``OIHW`` jumps ``I·O`` elements per read), several
    times slower than memory. Here the destination is written through a view in the source's own axis
    order, one tile of the source's last two axes (all leading axes at once) at a time: the reads are
    contiguous runs and each tile's writes stay in cache. An array of at most :data:`_CACHED_COPY_BYTES` stays in
    cache whole: numpy's own copy is the faster one there (the same bytes either way).
    """
    out = np.empty(array.shape, array.dtype) if into is None else into.view(array.dtype).reshape(array.shape)
    if array.nbytes <= _CACHED_COPY_BYTES:
        np.copyto(out, array)
        return out.reshape(-1).view(np.uint8).data
    order = sorted(range(array.ndim), key=lambda k: -abs(array.strides[k]))
    source = array.transpose(order)
    target = out.transpose(order)
    rows, cols = source.shape[-2:] if source.ndim >= 2 else (0, 0)
    tiles = -(-rows // _TILE[0]) * -(-cols // _TILE[1])
    if source.ndim < 2 or 0 in array.strides or tiles > _MAX_TILES:
        np.copyto(out, array)
    else:
        for row in range(0, rows, _TILE[0]):
            for col in range(0, cols, _TILE[1]):
                tile = (Ellipsis, slice(row, row + _TILE[0]), slice(col, col + _TILE[1]))
                target[tile] = source[tile]
    return out.reshape(-1).view(np.uint8).data


class _Mapping:
    """The read-only memory-mapped file an array is a view of, to give its pages back or to find the file."""

    __slots__ = ("mapped", "address")

    def __init__(self, mapped: mmap.mmap, address: int) -> None:
        self.mapped = mapped
        self.address = address

    @classmethod
    def of(cls, array: np.ndarray) -> "_Mapping | None":
        base: Any = array
        while isinstance(base, np.ndarray):
            base = base.base
        if isinstance(base, memoryview):
            base = base.obj
        if not isinstance(base, mmap.mmap) or not hasattr(base, "madvise") or base.closed or not len(base):
            return None
        with memoryview(base) as view:
            if not view.readonly:  # a writable (or copy-on-write) mapping may hold what the file does not
                return None
        return cls(base, np.frombuffer(base, np.uint8, count=1).ctypes.data)

    def populates(self) -> bool:
        """Whether this kernel maps a range's pages in one call (``MADV_POPULATE_READ``, Linux 5.14); tried on
        this mapping's first page once per process."""
        if _POPULATE[0] is None:
            try:
                self.mapped.madvise(_MADV_POPULATE_READ, 0, min(_PAGE, len(self.mapped)))
                _POPULATE[0] = True
            except (OSError, ValueError):
                _POPULATE[0] = False
        return bool(_POPULATE[0])

    def populate(self, address: int, length: int) -> None:
        """Maps the pages of a range in one call, so that writing it from memory takes no page fault per
        page (where the kernel cannot, the pages are faulted in as they are read). The kernel maps some
        pages around the range too (:data:`_FAULT_AROUND`; more where the file's page cache holds larger
        blocks): a write gives back every page of the mappings it read once it ends."""
        if not _POPULATE[0]:
            return
        start = address - self.address
        end = min(start + length, len(self.mapped))
        start -= start % _PAGE
        if start < 0 or end <= start:
            return
        try:
            self.mapped.madvise(_MADV_POPULATE_READ, start, end - start)
        except (OSError, ValueError):  # pragma: no cover - refused after the probe said it works
            pass

    def release(self, address: int, length: int, around: int = 0) -> None:
        """Gives back the mapped pages of a range, and of ``around`` bytes either side (within the mapping)."""
        start = address - self.address
        end = min(start + length + around, len(self.mapped))
        start = max(0, start - around)
        start -= start % _PAGE
        if end <= start:
            return
        try:
            self.mapped.madvise(mmap.MADV_DONTNEED, start, end - start)
        except (OSError, ValueError):  # pragma: no cover - a kernel without madvise on this mapping
            pass


class _FileSources:
    """The files behind the memory maps of one write, opened again to copy from (``os.sendfile``).

    A mapping's file is found in ``/proc/self/maps`` (its path, device and inode) and opened by that path;
    it is used only when the opened file is the mapped one (same device and inode), so a renamed or
    replaced file falls back to writing through the mapping."""

    def __init__(self) -> None:
        self._found: dict[int, tuple[int, int] | None] = {}
        self._maps: dict[int, tuple[int, int, int, str]] | None = None

    def find(self, mapping: _Mapping) -> tuple[int, int] | None:
        """``(fd, file offset of the mapping's first byte)``, or None."""
        if mapping.address not in self._found:
            self._found[mapping.address] = self._open(mapping.address)
        return self._found[mapping.address]

    def _open(self, address: int) -> tuple[int, int] | None:
        if self._maps is None:
            self._maps = _read_maps()
        entry = self._maps.get(address)
        if entry is None:
            return None
        offset, device, inode, path = entry
        try:
            fd = os.open(path, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
        except OSError:
            return None
        info = os.fstat(fd)
        if info.st_ino != inode or info.st_dev != device or not stat.S_ISREG(info.st_mode):
            os.close(fd)
            return None
        return fd, offset

    def close(self) -> None:
        for found in self._found.values():
            if found is not None:
                os.close(found[0])
        self._found.clear()


def _read_maps() -> dict[int, tuple[int, int, int, str]]:
    """The file mappings of this process: start address -> (file offset, device, inode, path)."""
    out: dict[int, tuple[int, int, int, str]] = {}
    try:
        with open("/proc/self/maps", encoding="utf-8", errors="surrogateescape") as f:
            for line in f:
                fields = line.rstrip("\n").split(maxsplit=5)
                if len(fields) < 6 or not fields[5].startswith("/") or fields[4] == "0":
                    continue
                major, _, minor = fields[3].partition(":")
                start = int(fields[0].partition("-")[0], 16)
                out[start] = (int(fields[2], 16), os.makedev(int(major, 16), int(minor, 16)), int(fields[4]), fields[5])
    except (OSError, ValueError):
        return {}
    return out


class DeferredWeights:
    """The arrays left out of a message, by marker: ``token`` (random, per table) + the entry's index.

    The token is drawn when the first array is deferred: a table that defers nothing (a small model's)
    costs no system call, and has no marker to look for."""

    __slots__ = ("_token", "_arrays", "_min_bytes")

    def __init__(self, min_bytes: int | None = None) -> None:
        self._token = b""
        self._arrays: list[np.ndarray] = []
        self._min_bytes = DEFER_MIN_BYTES if min_bytes is None else min_bytes

    @property
    def token(self) -> bytes:
        """The random bytes every marker of this table starts with."""
        if not self._token:
            self._token = os.urandom(TOKEN_BYTES)  # as secrets.token_bytes, without importing hmac and hashlib
        return self._token

    def __len__(self) -> int:
        return len(self._arrays)

    def defer(self, array: np.ndarray) -> bytes | None:
        """A marker standing for ``array``'s C-order bytes, or None when the array stays in the message."""
        if array.nbytes < self._min_bytes or not _deferrable(array, self._min_bytes):  # most initializers are small
            return None
        self._arrays.append(array)
        return self.token + (len(self._arrays) - 1).to_bytes(_INDEX_BYTES, "little")

    def array(self, data: bytes) -> np.ndarray | None:
        """The array ``data`` stands for when it is one of this table's markers, else None."""
        if not self._arrays:
            return None
        if len(data) != len(self._token) + _INDEX_BYTES or not data.startswith(self._token):
            return None
        index = int.from_bytes(data[len(self.token) :], "little")
        return self._arrays[index] if index < len(self._arrays) else None


def _deferrable(array: np.ndarray, min_bytes: int) -> bool:
    """Whether ``array`` may be deferred: the caller has checked that the format writes its C-order bytes
    as they are (not packed, not strings); here only size, byte order and element kind are checked."""
    if sys.byteorder != "little" or array.nbytes < min_bytes or array.ndim == 0:
        return False
    dtype = array.dtype
    return dtype.byteorder != ">" and not dtype.hasobject and dtype.fields is None and dtype.kind not in "OSUM"


_ACTIVE: ContextVar["DeferredWeights | None"] = ContextVar("scopefusion_deferred_weights", default=None)


@contextmanager
def deferring(weights: DeferredWeights) -> Iterator[DeferredWeights]:
    """While the block runs, writers leave large arrays out of their messages, in ``weights``."""
    token = _ACTIVE.set(weights)
    try:
        yield weights
    finally:
        _ACTIVE.reset(token)


def call_deferring(weights: DeferredWeights, fn: Callable[..., T], *args: Any) -> T:
    """``fn(*args)`` while writers defer into ``weights``, as in a :func:`deferring` block, without a context
    manager's cost (an export of a small model is a few hundred microseconds)."""
    token = _ACTIVE.set(weights)
    try:
        return fn(*args)
    finally:
        _ACTIVE.reset(token)


def defer_array(array: np.ndarray) -> bytes | None:
    """The marker to write instead of ``array``'s bytes, or None (no deferral active, or a small array)."""
    weights = _ACTIVE.get()
    return weights.defer(array) if weights is not None else None


def active_weights() -> DeferredWeights | None:
    """The table writers defer large arrays into now (:func:`deferring`), or None."""
    return _ACTIVE.get()


# ----------------------------------------------------------------------------- framing
Piece = Union[bytes, Weight]


class ModelBytes:
    """A serialized model as pieces: serialized bytes and :class:`Weight` data, in file order.

    Iterating gives the chunks to write (bytes, or :class:`~scopefusion.files.FileRange` for data the kernel
    copies from a model file; see the module NOTE), for :func:`scopefusion.files.write_atomic`;
    :meth:`tobytes` joins the bytes."""

    __slots__ = ("pieces", "size")

    def __init__(self, pieces: Sequence[Piece]) -> None:
        self.pieces = tuple(pieces)
        self.size = sum(len(p) if isinstance(p, bytes) else p.nbytes for p in self.pieces)

    def __len__(self) -> int:
        return self.size

    def __iter__(self) -> Iterator[bytes | memoryview | FileRange]:
        """The chunks to write; a chunk is valid only until the next one is asked for (write it first).

        A transposed weight's blocks are put in C order by a worker thread ahead of the caller, and by the
        caller when its next block is not ready (see :class:`_Ahead`), while the caller writes the chunks before it."""
        sources = _FileSources()
        ahead: _Ahead | None = None
        plan: list[bytes | FileRange | Weight | _Block] = []
        try:
            for piece in self.pieces:
                if isinstance(piece, bytes):
                    plan.append(piece)
                    continue
                found = piece.file_range(sources)
                if found is not None:
                    plan.append(found)
                elif piece.array.flags.c_contiguous:
                    plan.append(piece)
                else:
                    plan.extend(piece.blocks())
            blocks = [item for item in plan if isinstance(item, _Block)]
            if blocks:
                ahead = _Ahead(blocks)
            for item in plan:
                if isinstance(item, Weight):
                    yield from item.chunks()
                elif isinstance(item, _Block):
                    yield ahead.next()  # type: ignore[union-attr]
                else:
                    yield item
        finally:
            if ahead is not None:
                ahead.close()
            sources.close()
            _release_mappings(plan)

    def tobytes(self) -> bytes:
        """The joined bytes. Each piece is written once, in place, into the buffer of the returned ``bytes``
        (a transposed weight is put in C order there, not in an array of its own first)."""
        if len(self.pieces) == 1 and isinstance(self.pieces[0], bytes):
            return self.pieces[0]
        if not self.size:
            return b""
        buffer = io.BytesIO()
        buffer.seek(self.size - 1)
        buffer.write(b"\0")  # the buffer at its final size; getvalue() then hands it over without a copy
        with buffer.getbuffer() as view:
            _fill(np.frombuffer(view, np.uint8), self.pieces)
        return buffer.getvalue()


def _release_mappings(plan: Sequence[object]) -> None:
    """Gives back every page of each mapped file the write read weights from (see :meth:`_Mapping.populate`)."""
    released: set[int] = set()
    for item in plan:
        mapping = _Mapping.of(item.array) if isinstance(item, Weight) and item.array.flags.c_contiguous else None
        if mapping is not None and mapping.address not in released:
            released.add(mapping.address)
            mapping.release(mapping.address, len(mapping.mapped))


def _fill(target: np.ndarray, pieces: Sequence[Piece]) -> None:
    at = 0
    for piece in pieces:
        if isinstance(piece, bytes):
            target[at : at + len(piece)] = np.frombuffer(piece, np.uint8)
            at += len(piece)
        else:
            piece.copy_into(target[at : at + piece.nbytes])
            at += piece.nbytes


def stream_message(build: Callable[[], Any]) -> ModelBytes:
    """The serialized form of the protobuf message ``build()`` makes while large arrays are deferred, as pieces."""
    weights = DeferredWeights()
    with deferring(weights):
        message = build()
    return frame(message.SerializeToString(deterministic=True), message.DESCRIPTOR, weights)


def stream_bytes(build: Callable[[], bytes], descriptor: Any) -> ModelBytes:
    """The serialized message ``build()`` writes (of protobuf type ``descriptor``) while large arrays are
    deferred, as pieces."""
    weights = DeferredWeights()
    with deferring(weights):
        data = build()
    return frame(data, descriptor, weights)


def frame(data: bytes, descriptor: Any, weights: DeferredWeights) -> ModelBytes:
    """The pieces of serialized message ``data`` (of protobuf type ``descriptor``) with each marker of
    ``weights`` replaced by its array's bytes and every enclosing length recomputed."""
    marks = marks_of(data, weights.token) if len(weights) else []
    if not marks:
        return ModelBytes([data])
    pieces, _ = _message(data, 0, len(data), descriptor, weights, marks)
    merged: list[Piece] = []
    run: list[bytes] = []
    for piece in pieces:
        if isinstance(piece, bytes):
            run.append(piece)
            continue
        if run:
            merged.append(b"".join(run))
            run = []
        merged.append(piece)
    if run:
        merged.append(b"".join(run))
    return ModelBytes(merged)


def _message(data: bytes, start: int, end: int, descriptor: Any, weights: DeferredWeights,
             marks: list[int]) -> tuple[list[Piece], int]:
    """The pieces of the message in ``data[start:end]`` and their total size."""
    pieces: list[Piece] = []
    size = 0
    run = start  # the verbatim bytes not yet emitted start here
    for number, field_start, payload, field_end in marked_fields(data, start, end, marks):
        field = descriptor.fields_by_number.get(number)
        if field is None:
            continue
        inner: list[Piece]
        array = weights.array(data[payload:field_end]) if field.type == _BYTES_TYPE else None
        if array is not None:
            weight = Weight(array)
            inner, inner_size = [weight], weight.nbytes
        elif field.message_type is not None:
            inner, inner_size = _message(data, payload, field_end, field.message_type, weights, marks)
        else:
            continue
        _, key_end = read_varint(data, field_start, field_end)
        head = data[run:key_end] + encode_varint(inner_size)
        pieces.append(head)
        pieces.extend(inner)
        size += len(head) + inner_size
        run = field_end
    pieces.append(data[run:end])
    return pieces, size + end - run
