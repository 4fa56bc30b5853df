"""Writing output files whole or not at all."""

from __future__ import annotations

import os
import tempfile
from os import PathLike

__all__ = ["write_atomic"]


def write_atomic(path: str | PathLike, data: bytes) -> None:
    """Writes ``data`` beside ``path`` and renames it into place, so a failure leaves no partial file.

    Raises:
        OSError: the directory does not exist or is not writable.
    """
    path = os.fspath(path)
    directory = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(directory):
        raise OSError(2, "no such directory", directory)
    fd, tmp = tempfile.mkstemp(prefix=".scopefusion-", dir=directory)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
