"""Writing output files whole or not at all, and never leaving a temporary file behind.

NOTE: how a file is written. On Linux the data goes into an unnamed file (``O_TMPFILE``) in the target's
directory, which gets a name only once it is complete (``linkat`` through ``/proc/self/fd``, then a rename
over the target): a process killed at any point, even by SIGKILL, leaves nothing. Where ``O_TMPFILE`` is not
available (another OS, a file system without it) the data goes into a named ``.scopefusion-*`` file beside
the target, removed on any error and on SIGTERM / SIGINT (only SIGKILL can leave that one). A file gets
the mode the umask gives (0644 under umask 022), like any file a program creates. Only a regular file
or a missing path is replaced: devices, FIFOs and directories are refused.

The data is bytes or an iterable of chunks, so a large output is written as it is produced; a
:class:`FileRange` chunk (bytes of another open file, such as a model's weights in its input file) is
copied by the kernel (``os.sendfile``) without passing through this process's memory. The file is flushed
to the disk (``fsync``) before it is named.
"""

from __future__ import annotations

import errno
import os
import signal
import stat
import threading
from contextlib import contextmanager
from os import PathLike
from typing import Iterable, Iterator, Sequence, Union

__all__ = ["Data", "FileRange", "default_file_mode", "describe_write_error", "iter_bytes", "write_atomic", "write_together"]



class FileRange:
    """A chunk of output that is ``length`` bytes of the open file ``fd`` from ``offset``: the kernel copies
    it into the output file (``os.sendfile``), so the bytes never pass through this process's memory."""

    # NOTE: a plain class, not a dataclass: making a dataclass costs a third of a millisecond on a process's
    # first write.
    __slots__ = ("fd", "offset", "length")

    def __init__(self, fd: int, offset: int, length: int) -> None:
        self.fd = fd
        self.offset = offset
        self.length = length

    def __repr__(self) -> str:
        return f"FileRange(fd={self.fd}, offset={self.offset}, length={self.length})"

    def chunks(self, size: int = 8 << 20) -> Iterator[bytes]:
        """The bytes, read in pieces of at most ``size``.

        Raises:
            OSError: the file ends before the range does (it changed since the range was taken)."""
        done = 0
        while done < self.length:
            data = os.pread(self.fd, min(size, self.length - done), self.offset + done)
            if not data:
                raise _shrunk(self)
            done += len(data)
            yield data


# Bytes, or an iterable of chunks (such as a streamed model, ``serde.weight_stream.ModelBytes``).
Data = Union[bytes, bytearray, memoryview, Iterable[Union[bytes, memoryview, FileRange]]]
_PREFIX = ".scopefusion-"
# Named temporaries of this process, removed by the signal handlers.
_named_temporaries: set[str] = set()
_lock = threading.Lock()


def default_file_mode() -> int:
    """The mode a new file gets under the current umask (0o644 under umask 022)."""
    with _lock:
        mask = os.umask(0o022)
        os.umask(mask)
    return 0o666 & ~mask


def _temporary_name(directory: str) -> str:
    """A fresh temporary's path in ``directory``; the random part comes from ``os.urandom`` (what
    ``secrets.token_hex`` gives, without importing hmac and hashlib on every overwrite)."""
    return os.path.join(directory, f"{_PREFIX}{os.urandom(6).hex()}")


def _check_target(path: str) -> None:
    try:
        info = os.stat(path)
    except FileNotFoundError:
        return
    if not stat.S_ISREG(info.st_mode):
        kind = "a directory" if stat.S_ISDIR(info.st_mode) else "not a regular file"
        raise OSError(errno.EINVAL, f"{kind}; only a regular file or a new path can be written", path)


def _shrunk(chunk: FileRange) -> OSError:
    return OSError(errno.EIO, f"a source file ended before byte {chunk.offset + chunk.length:,}; it changed while being written")


def _chunks(data: Data) -> Iterator[bytes | memoryview | FileRange]:
    if isinstance(data, (bytes, bytearray, memoryview)):
        yield bytes(data) if isinstance(data, memoryview) else data  # type: ignore[misc]
    else:
        yield from data


def iter_bytes(data: Data) -> Iterator[bytes | memoryview]:
    """The bytes of ``data`` in chunks, :class:`FileRange` chunks read from their files."""
    for chunk in _chunks(data):
        if isinstance(chunk, FileRange):
            yield from chunk.chunks()
        else:
            yield chunk


def _write_fd(fd: int, data: Data) -> None:
    for chunk in _chunks(data):
        if isinstance(chunk, FileRange):
            _copy_range(fd, chunk)
            continue
        _write_all(fd, chunk)
    os.fsync(fd)


def _write_all(fd: int, chunk: bytes | memoryview) -> None:
    view = memoryview(chunk)
    while view:
        written = os.write(fd, view)
        view = view[written:]


def _copy_range(fd: int, chunk: FileRange) -> None:
    """Copies ``chunk`` into ``fd`` in the kernel; through memory where ``sendfile`` cannot (another OS)."""
    done = 0
    sendfile = getattr(os, "sendfile", None)
    while sendfile is not None and done < chunk.length:
        try:
            sent = sendfile(fd, chunk.fd, chunk.offset + done, chunk.length - done)
        except OSError as e:
            if done or e.errno not in (errno.EINVAL, errno.ENOSYS, errno.EOPNOTSUPP, errno.EXDEV):
                raise
            break
        if not sent:
            raise _shrunk(chunk)
        done += sent
    if done < chunk.length:
        for data in FileRange(chunk.fd, chunk.offset + done, chunk.length - done).chunks():
            _write_all(fd, data)


_AT_FDCWD = -100
_AT_SYMLINK_FOLLOW = 0x400
_libc_linkat = None


def _link_unnamed(fd: int, path: str) -> None:
    """Gives the unnamed file ``fd`` the name ``path`` (``linkat`` following ``/proc/self/fd/N``).

    Python's ``os.link`` calls ``link``, which does not follow the ``/proc`` link, so libc's ``linkat`` is
    called directly."""
    global _libc_linkat
    if _libc_linkat is None:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        _libc_linkat = libc.linkat
        _libc_linkat.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_int]
    import ctypes

    if _libc_linkat(_AT_FDCWD, f"/proc/self/fd/{fd}".encode(), _AT_FDCWD, os.fsencode(path), _AT_SYMLINK_FOLLOW) != 0:
        code = ctypes.get_errno()
        raise OSError(code, os.strerror(code), path)


class _Pending:
    """One file written but not yet in place: an unnamed file (``fd``) or a named temporary (``temp``)."""

    def __init__(self, path: str, fd: int, temp: str | None) -> None:
        self.path, self.fd, self.temp = path, fd, temp

    def commit(self) -> None:
        directory = os.path.dirname(self.path)
        if self.temp is None:
            try:
                _link_unnamed(self.fd, self.path)
                return
            except FileExistsError:
                pass
            temp = _temporary_name(directory)
            _named_temporaries.add(temp)
            _link_unnamed(self.fd, temp)
            self.temp = temp
        _check_target(self.path)
        os.replace(self.temp, self.path)
        _named_temporaries.discard(self.temp)
        self.temp = None

    def discard(self) -> None:
        if self.temp is not None:
            _named_temporaries.discard(self.temp)
            try:
                os.unlink(self.temp)
            except FileNotFoundError:
                pass
            self.temp = None

    def close(self) -> None:
        os.close(self.fd)


def _open_unnamed(directory: str, mode: int) -> int | None:
    flag = getattr(os, "O_TMPFILE", None)
    if flag is None or not os.path.isdir("/proc/self/fd"):
        return None
    try:
        return os.open(directory, flag | os.O_WRONLY | getattr(os, "O_CLOEXEC", 0), mode)
    except OSError as e:
        if e.errno in (errno.EOPNOTSUPP, errno.EISDIR, errno.EINVAL):
            return None  # the file system has no unnamed files
        raise


def _prepare(path: str, data: Data, mode: int, unnamed: bool) -> _Pending:
    directory = os.path.dirname(path)
    if not os.path.isdir(directory):
        raise OSError(errno.ENOENT, "no such directory", directory)
    _check_target(path)
    fd = _open_unnamed(directory, mode) if unnamed else None
    pending: _Pending
    if fd is not None:
        pending = _Pending(path, fd, None)
    else:
        temp = _temporary_name(directory)
        _named_temporaries.add(temp)
        try:
            fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0), 0o600)
        except BaseException:
            _named_temporaries.discard(temp)
            raise
        pending = _Pending(path, fd, temp)
    try:
        os.fchmod(fd, mode)
        _write_fd(fd, data)
    except BaseException:
        pending.discard()
        pending.close()
        raise
    return pending


def _on_signal(signum: int, frame) -> None:  # pragma: no cover - exercised in a subprocess
    for temp in list(_named_temporaries):
        try:
            os.unlink(temp)
        except OSError:
            pass
    _named_temporaries.clear()
    signal.signal(signum, signal.SIG_DFL)
    os.kill(os.getpid(), signum)


@contextmanager
def _cleanup_on_signals() -> Iterator[None]:
    """While writing, SIGTERM and SIGINT remove this process's named temporaries before ending it."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {}
    for signum in (signal.SIGTERM, signal.SIGINT):
        try:
            previous[signum] = signal.signal(signum, _on_signal)
        except (ValueError, OSError):  # pragma: no cover - no signal handling here
            pass
    try:
        yield
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)


def write_together(files: Sequence[tuple[str | PathLike, Data]], *, unnamed: bool = True) -> None:
    """Writes every ``(path, data)``; each file appears whole, and none appears unless all were written.

    ``data`` is bytes or an iterable of byte chunks. ``unnamed=False`` forces the named-temporary way.

    Raises:
        OSError: a directory is missing or not writable, a path is not a regular file, the disk is full.
    """
    mode = default_file_mode()
    targets = [(os.path.abspath(os.fspath(p)), d) for p, d in files]
    pending: list[_Pending] = []
    with _cleanup_on_signals():
        try:
            for path, data in targets:
                pending.append(_prepare(path, data, mode, unnamed))
            for item in pending:
                item.commit()
        finally:
            for item in pending:
                item.discard()
                item.close()


def write_atomic(path: str | PathLike, data: Data, *, unnamed: bool = True) -> None:
    """Writes ``data`` (bytes, or an iterable of byte chunks) to ``path``, whole or not at all.

    Raises:
        OSError: the directory does not exist or is not writable, ``path`` is not a regular file, the
            disk is full.
    """
    write_together([(path, data)], unnamed=unnamed)


def describe_write_error(error: OSError, path: str | PathLike) -> str:
    """One sentence for a failed write: what, where, what to do."""
    where = error.filename or os.fspath(path)
    if error.errno == errno.ENOSPC:
        return f"cannot write {where}: no space left on the device; free some space or write elsewhere"
    if error.errno == errno.EDQUOT:
        return f"cannot write {where}: the disk quota is exceeded; free some space or write elsewhere"
    if error.errno in (errno.EACCES, errno.EPERM, errno.EROFS):
        return f"cannot write {where}: permission denied ({error.strerror}); choose a writable directory"
    return f"cannot write {where} ({error.strerror or error}); check the directory exists and is writable"
