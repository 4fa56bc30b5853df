"""What the CLI shows: a progress display for long stages and the conversion summary tables."""

from __future__ import annotations

from collections import Counter
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Iterator

from rich.console import Console
from rich.progress import BarColumn, Progress, TaskID, TextColumn, TimeElapsedColumn
from rich.table import Table

if TYPE_CHECKING:  # pragma: no cover
    from .model import Model

__all__ = ["progress_display", "summary_tables"]


@contextmanager
def progress_display(console: Console, *, enabled: bool = True) -> Iterator[Callable[[str, int, int], None] | None]:
    """Yields a ``progress(stage, done, total)`` callback drawing one bar per stage (None when disabled)."""
    if not enabled or not console.is_terminal:
        yield None
        return
    columns = (TextColumn("{task.description}"), BarColumn(), TextColumn("{task.completed}/{task.total}"), TimeElapsedColumn())
    with Progress(*columns, console=console, transient=True) as bar:
        tasks: dict[str, TaskID] = {}

        def update(stage: str, done: int, total: int) -> None:
            if stage not in tasks:
                tasks[stage] = bar.add_task(stage, total=total)
            bar.update(tasks[stage], completed=done, total=total)

        yield update


def summary_tables(model: "Model", output: Path, fmt: str) -> list[Table]:
    """Fusions per rule, ops by dialect, un-inferred ops, profiles with their memory plans, timings."""
    report = model.report()
    tables = []

    fusions = Table(title=f"Fusions ({sum(report['fusions'].values())} applied)", title_justify="left")
    fusions.add_column("rule")
    fusions.add_column("fused", justify="right")
    fusions.add_column("refused", justify="right")
    rules = sorted(set(report["fusions"]) | set(report["refused"]))
    for rule in rules:
        fusions.add_row(rule, str(report["fusions"].get(rule, 0)), str(len(report["refused"].get(rule, []))))
    if not rules:
        fusions.add_row("(none)", "0", "0")
    tables.append(fusions)

    dialects: Counter = Counter()
    for op, count in report["ops"].items():
        dialects[op.rsplit(".", 1)[0] if "." in op else "(none)"] += count
    ops = Table(title=f"Ops by dialect ({sum(dialects.values())} nodes)", title_justify="left")
    ops.add_column("dialect")
    ops.add_column("nodes", justify="right")
    ops.add_column("most common")
    for dialect, count in sorted(dialects.items()):
        top = sorted(((c, op) for op, c in report["ops"].items() if op.startswith(dialect + ".")), reverse=True)[:4]
        ops.add_row(dialect, str(count), ", ".join(f"{op.split('.', 1)[1]}×{c}" for c, op in top))
    tables.append(ops)

    uninferred = report["uninferred_ops"]
    inf = Table(title="Un-inferred ops", title_justify="left")
    inf.add_column("op")
    for op in uninferred or ["(none)"]:
        inf.add_row(op)
    tables.append(inf)

    prof = Table(title="Shape profiles and memory plans", title_justify="left")
    for col in ("profile", "inputs", "arena bytes", "naive bytes", "lower bound", "arena/bound", "dynamic"):
        prof.add_column(col, justify="right" if col not in ("profile", "inputs") else "left")
    for p in report["profiles"]:
        inputs = "; ".join(f"{k}:{'*' if v is None else ','.join(map(str, v))}" for k, v in p["inputs"].items())
        bound = p.get("lower_bound_bytes", 0)
        ratio = f"{p['arena_bytes'] / bound:.3f}" if bound else "-"
        prof.add_row(
            str(p["index"]), inputs, f"{p.get('arena_bytes', 0):,}", f"{p.get('naive_bytes', 0):,}", f"{bound:,}", ratio,
            str(p["dynamic_tensors"]),
        )  # fmt: skip
    tables.append(prof)

    timing = Table(title=f"Wrote {output} ({fmt})", title_justify="left")
    timing.add_column("stage")
    timing.add_column("seconds", justify="right")
    for stage, seconds in report["timings_s"].items():
        timing.add_row(stage, f"{seconds:.3f}")
    tables.append(timing)
    return tables
