"""The command line's progress display: one ``rich`` progress row per stage, on stderr, in a terminal only.

It turns the library's ``progress(stage, done, total, detail)`` calls (:mod:`scopefusion.progress`) into
rows: the stage, what it is working on, a bar (bytes for the load, passes for the fusion, nodes for
inference, files for the write), and the time spent. A stage with ``total == 0`` shows a moving bar.
The rows vanish when the command ends, so the summary follows on a clean screen.
"""

from __future__ import annotations

from contextlib import contextmanager
from typing import Iterator

from rich.console import Console
from rich.progress import (
    BarColumn,
    DownloadColumn,
    Progress,
    ProgressColumn,
    Task,
    TaskID,
    TextColumn,
    TimeElapsedColumn,
)
from rich.text import Text

from .progress import ProgressFn

__all__ = ["progress_display"]

BYTE_STAGES = frozenset({"load"})


class _CountColumn(ProgressColumn):
    """``done/total`` for counted stages, bytes (``1.2/13.5 MB``) for the byte stages, nothing while unknown."""

    def __init__(self) -> None:
        super().__init__()
        self._bytes = DownloadColumn()

    def render(self, task: Task) -> Text:
        if not task.total:
            return Text("")
        if task.fields.get("stage") in BYTE_STAGES:
            return self._bytes.render(task)
        return Text(f"{int(task.completed)}/{int(task.total)}")


@contextmanager
def progress_display(console: Console, *, enabled: bool = True) -> Iterator[ProgressFn | None]:
    """Yields the ``progress`` callable to pass to :func:`~scopefusion.convert.convert`, or None when
    ``enabled`` is false or ``console`` is not an interactive terminal (a pipe, a CI log, ``TTY_INTERACTIVE=0``)."""
    if not enabled or not console.is_interactive:
        yield None
        return
    columns = (
        TextColumn("{task.fields[stage]:<12}"),
        TextColumn("{task.fields[detail]}", style="dim"),
        BarColumn(),
        _CountColumn(),
        TimeElapsedColumn(),
    )
    with Progress(*columns, console=console, transient=True) as bar:
        tasks: dict[str, TaskID] = {}

        def update(stage: str, done: int, total: int, detail: str = "") -> None:
            if stage not in tasks:
                tasks[stage] = bar.add_task(stage, total=total or None, stage=stage, detail=detail)
            bar.update(tasks[stage], completed=done, total=total or None, detail=detail)

        yield update
