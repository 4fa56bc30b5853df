"""How a long conversion reports where it is: a plain callable passed down, no display, no global state.

``convert(path, progress=report)`` calls ``report(stage, done, total, detail)`` as it goes:

=================  ===============================================  =====================================
stage              done / total                                     detail
=================  ===============================================  =====================================
``load``           bytes read / file size (0 / 0: no byte count,    the model path, or the SavedModel
                   as for a SavedModel, which TensorFlow reads)     step ("freezing with TensorFlow")
``fusion``         passes run / enabled passes                      the pass about to run
``build``          0 / 1, then 1 / 1                                ""
``infer``          nodes inferred / nodes of the main graph         ""
``profile <i>``    nodes inferred / nodes of profile ``i``          the profile's input shapes
``memory plan``    profiles planned / profiles                      ""
``write``          files written / files (the command line)         the file being written
=================  ===============================================  =====================================

A stage may report several times and always ends with ``done == total``. The library never draws
anything: the command line passes a callable that drives a ``rich`` progress display
(:mod:`scopefusion.cli_progress`), a test passes a list's ``append``-like recorder, and ``None`` (the
default) costs nothing.
"""

from __future__ import annotations

from typing import Callable, Protocol

__all__ = ["ProgressFn", "StageProgress", "stage_progress"]


class ProgressFn(Protocol):
    """``progress(stage, done, total, detail="")``: see the module docstring for the stages."""

    def __call__(self, stage: str, done: int, total: int, detail: str = "") -> None: ...


StageProgress = Callable[[int, int], None]


def stage_progress(progress: ProgressFn | None, stage: str, detail: str = "") -> StageProgress | None:
    """A ``(done, total)`` callback for one stage (what the inner loops take), or None without ``progress``."""
    if progress is None:
        return None
    return lambda done, total: progress(stage, done, total, detail)
