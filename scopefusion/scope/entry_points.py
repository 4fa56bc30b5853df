"""The installed packages' entry points of one group, found without reading every package's metadata.

``importlib.metadata.entry_points(group=...)`` imports ``importlib.metadata`` (with ``email``, ``zipfile``
and ``csv``) and parses the entry points of every installed distribution, on each call. Most
environments have no package declaring fusion rules, so :func:`installed_entry_points` first looks, once
per state of ``sys.path``, for a distribution whose ``entry_points.txt`` names the group at all; only
then does it ask ``importlib.metadata``, which gives the answer.

NOTE: the look-up follows where ``importlib.metadata``'s path finder looks (``*.dist-info`` and
``*.egg-info`` directories in each ``sys.path`` directory, names compared ignoring case). An entry it
cannot read that way (a zip archive or an ``.egg`` on the path, another meta-path finder that finds
distributions) sends the question to ``importlib.metadata`` unfiltered. Each ``sys.path`` directory's
answer is kept with its modification time (which changes when a distribution is installed or removed
there) and given again while it is the same: a file written to one directory (the current one, often)
has only that directory looked at again.
"""

from __future__ import annotations

import os
import sys
from importlib.machinery import PathFinder  # loaded with the interpreter: costs no import time
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # pragma: no cover
    from importlib.metadata import EntryPoint

__all__ = ["installed_entry_points"]

_METADATA_SUFFIXES = (".dist-info", ".egg-info")
# NOTE: a pure cache: (group, sys.path directory) -> (the directory's modification time when it was looked at,
# whether a distribution there names the group)
_dir_answers: dict[tuple[str, str], tuple[int, bool]] = {}


def installed_entry_points(group: str) -> list[EntryPoint]:
    """``importlib.metadata``'s entry points in ``group``; an empty list, without
    importing ``importlib.metadata``, when no installed distribution's entry points name the group."""
    if not _may_declare(group):
        return []
    import importlib.metadata

    return list(importlib.metadata.entry_points(group=group))


def _may_declare(group: str) -> bool:
    if any(_finds_distributions_elsewhere(finder) for finder in sys.meta_path):
        return True
    needle = group.encode()
    for entry in sys.path:
        root = entry or "."
        mtime = _mtime(root)
        last = _dir_answers.get((group, root))
        if last is not None and last[0] == mtime:
            found = last[1]
        else:
            found = _scan(needle, [root])
            _dir_answers[(group, root)] = (mtime, found)
        if found:
            return True
    return False


def _finds_distributions_elsewhere(finder: Any) -> bool:
    """A meta-path finder other than the standard path finder that can find distributions."""
    return finder is not PathFinder and callable(getattr(finder, "find_distributions", None))


def _mtime(path: str) -> int:
    try:
        return os.stat(path).st_mtime_ns
    except OSError:
        return -1


def _scan(needle: bytes, roots: list[str]) -> bool:
    for root in roots:
        if root.lower().endswith(".egg"):
            return True
        try:
            names = os.listdir(root)
        except NotADirectoryError:
            return True  # a zip archive on the path
        except OSError:
            continue
        for name in names:
            if not name.lower().endswith(_METADATA_SUFFIXES):
                continue
            try:
                with open(os.path.join(root, name, "entry_points.txt"), "rb") as f:
                    if needle in f.read():
                        return True
            except OSError:
                continue
    return False
