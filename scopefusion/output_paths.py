"""Checking output paths before any work starts, and writing every output together afterwards.

An output path must be a regular file or not exist yet (a device, FIFO, socket or directory is refused),
its directory must exist and be writable, and no two paths of one command may name the same file: not
two outputs, and no output and an input (the model, a rules file), compared by resolved path and by
inode so that links and ``./`` spellings cannot hide it. The path ``-`` is standard output (one output
at most); a binary output there is refused when standard output is a terminal.
"""

from __future__ import annotations

import os
import stat
import sys
from os import PathLike
from typing import Iterable, Sequence

from .errors import SerdeError
from .files import Data, describe_write_error, iter_bytes, write_together

__all__ = ["STDOUT", "OutputPathError", "check_output_paths", "write_outputs"]

STDOUT = "-"


class OutputPathError(SerdeError):
    """An output path that cannot or must not be written."""


def _kind(mode: int) -> str:
    if stat.S_ISDIR(mode):
        return "a directory"
    if stat.S_ISCHR(mode):
        return "a character device"
    if stat.S_ISBLK(mode):
        return "a block device"
    if stat.S_ISFIFO(mode):
        return "a FIFO"
    if stat.S_ISSOCK(mode):
        return "a socket"
    return "not a regular file"


def _identity(path: str) -> tuple[str, tuple[int, int] | None]:
    real = os.path.realpath(path)
    try:
        info = os.stat(real)
    except OSError:
        return real, None
    return real, (info.st_dev, info.st_ino)


def check_output_paths(outputs: Sequence[tuple[str, str | PathLike | None]],
                       inputs: Iterable[tuple[str, str | PathLike]] = (),
                       binary: Iterable[str] = ()) -> None:
    """Refuses output paths that cannot be written, or that name an input or another output.

    Args:
        outputs: ``(option, path)`` pairs, e.g. ``("-o", "out.ge")``; a None path is skipped.
        inputs: ``(what, path)`` pairs of files the command reads (``("the model", ...)``).
        binary: the options whose output is binary (refused on a terminal as ``-``).

    Raises:
        OutputPathError: naming the option, the path and what is wrong with it.
    """
    seen: list[tuple[str, str, tuple[str, tuple[int, int] | None]]] = []
    for what, path in inputs:
        seen.append((what, os.fspath(path), _identity(os.fspath(path))))
    to_stdout: list[str] = []
    for option, given in outputs:
        if given is None:
            continue
        path = os.fspath(given)
        if path == STDOUT:
            if to_stdout:
                raise OutputPathError(f"{option} - and {to_stdout[0]} - both write to standard output; give one a file")
            if option in binary and sys.stdout.isatty():
                raise OutputPathError(
                    f"{option} - would write a binary model to the terminal; redirect standard output or give a file"
                )
            to_stdout.append(option)
            continue
        try:
            info = os.stat(path)
        except FileNotFoundError:
            info = None
        except OSError as e:
            raise OutputPathError(f"{option} {path}: cannot be checked ({e.strerror}); choose another path") from None
        if info is not None and not stat.S_ISREG(info.st_mode):
            raise OutputPathError(
                f"{option} {path} is {_kind(info.st_mode)}; an output must be a regular file or a new path"
            )
        directory = os.path.dirname(os.path.abspath(path))
        if not os.path.isdir(directory):
            raise OutputPathError(f"{option} {path}: the directory {directory} does not exist; create it first")
        if not os.access(directory, os.W_OK | os.X_OK):
            raise OutputPathError(f"{option} {path}: the directory {directory} is not writable; choose another one")
        identity = _identity(path)
        for other_what, other_path, other_identity in seen:
            same_inode = identity[1] is not None and identity[1] == other_identity[1]
            if identity[0] == other_identity[0] or same_inode:
                raise OutputPathError(
                    f"{option} {path} is the same file as {other_what} ({other_path}); give each output its own path "
                    "and never overwrite an input"
                )
        seen.append((option, path, identity))


def write_outputs(files: Sequence[tuple[str | PathLike, Data]]) -> None:
    """Writes every output together (all or none).

    Raises:
        OutputPathError: one sentence naming the file that could not be written and why.
    """
    on_disk = [(p, d) for p, d in files if os.fspath(p) != STDOUT]
    try:
        write_together(on_disk)
    except OSError as e:
        raise OutputPathError(describe_write_error(e, on_disk[0][0] if on_disk else "")) from None
    for path, data in files:
        if os.fspath(path) == STDOUT:
            try:
                sys.stdout.flush()
                for chunk in iter_bytes(data):
                    sys.stdout.buffer.write(chunk)
                sys.stdout.buffer.flush()
            except (BrokenPipeError, OSError) as e:
                raise OutputPathError(f"cannot write to standard output ({e.strerror or e})") from None
