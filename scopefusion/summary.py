"""The conversion summary ``convert`` prints: fusions, ops by dialect, un-inferred ops, profiles, timings.

One set of sections (:func:`summary_sections`, from the JSON report) and two renderings:

* :func:`summary_text`: plain aligned text for a pipe or a CI log. Columns are as wide as their widest
  cell, so no value is ever cut or wrapped, whatever the width of the log viewer.
* :func:`summary_tables`: ``rich`` tables for an interactive terminal. They fit the terminal's width by
  folding text cells onto more lines (a profile's input shapes, the op lists), never by cutting them
  short, and numbers are never broken; titles are lines of their own.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

__all__ = ["Section", "print_fusion_warnings", "print_sections", "print_summary", "summary_sections", "summary_tables", "summary_text"]


@dataclass(frozen=True)
class Section:
    """A titled table: ``numeric`` columns are right-aligned and never broken."""

    title: str
    columns: tuple[str, ...]
    rows: Sequence[tuple[str, ...]] = field(default_factory=list)
    numeric: frozenset[str] = frozenset()


def _shape_text(inputs: Mapping[str, Any]) -> str:
    return "; ".join(f"{name}:{'*' if dims is None else ','.join(map(str, dims))}" for name, dims in inputs.items())


def _fused_text(count: int, info: Mapping[str, Any] | None) -> str:
    """A rule's fusion count, with the builtin it replaces (and what that would fuse) or that it raised."""
    text = str(count)
    if info and info.get("replaces"):
        would = info.get("builtin_would_fuse")
        text += f" (replaces the {info['replaces']}" + (f", which would fuse {would})" if would is not None else ")")
    if info and info.get("error"):
        text += " (raised: see the warning)"
    return text


def print_fusion_warnings(warnings: Sequence[str]) -> None:
    """Writes one ``warning:`` line per fusion warning (a pass that raised, with its exception and
    ``file:line``; a replaced builtin that would have fused more) to stderr, as plain text."""
    import sys

    for line in warnings:
        sys.stderr.write(f"warning: {line}\n")


def summary_sections(report: Mapping[str, Any], output: str, fmt: str) -> list[Section]:
    """The summary of ``report`` (:meth:`~scopefusion.model.Model.report`) for a model written to ``output``."""
    fusions, refused = report["fusions"], report["refused"]
    passes = {p["name"]: p for p in report.get("passes", [])}
    rules = sorted(set(fusions) | set(refused) | {n for n, p in passes.items() if p["replaces"] or p["error"]})
    sections = [
        Section(
            f"Fusions ({sum(fusions.values())} applied)",
            ("rule", "fused", "refused"),
            [(rule, _fused_text(fusions.get(rule, 0), passes.get(rule)), str(len(refused.get(rule, []))))
             for rule in rules] or [("(none)", "0", "0")],
            frozenset({"fused", "refused"}),
        )
    ]

    by_dialect: dict[str, Counter] = {}
    for op, count in report["ops"].items():
        dialect, _, name = op.rpartition(".")
        by_dialect.setdefault(dialect or "(none)", Counter())[name] += count
    ops_rows = []
    for dialect, counts in sorted(by_dialect.items()):
        most_first = sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))
        ops_rows.append((dialect, str(sum(counts.values())), ", ".join(f"{name}×{n}" for name, n in most_first)))
    total = sum(report["ops"].values())
    sections.append(
        Section(f"Ops by dialect ({total} nodes)", ("dialect", "nodes", "ops"), ops_rows, frozenset({"nodes"}))
    )

    uninferred = report["uninferred_ops"]
    uninferred_rows = [(op,) for op in uninferred] or [("(none)",)]
    sections.append(Section(f"Un-inferred ops ({len(uninferred)})", ("op",), uninferred_rows))

    shape_rows, plan_rows = [], []
    for p in report["profiles"]:
        bound = p.get("lower_bound_bytes", 0)
        ratio = f"{p.get('arena_bytes', 0) / bound:.3f}" if bound else "-"
        shape_rows.append((str(p["index"]), _shape_text(p["inputs"])))
        plan_rows.append((
            str(p["index"]), f"{p.get('arena_bytes', 0):,}", f"{p.get('naive_bytes', 0):,}", f"{bound:,}", ratio,
            str(p.get("dynamic_tensors", 0)),
        ))  # fmt: skip
    sections.append(Section(f"Shape profiles ({len(shape_rows)})", ("profile", "inputs"), shape_rows))
    columns = ("profile", "arena bytes", "naive bytes", "lower bound", "arena / bound", "dynamic")
    sections.append(Section("Memory plans", columns, plan_rows, frozenset(columns[1:])))

    timings = [(stage, f"{seconds:.3f}") for stage, seconds in report["timings_s"].items()]
    exported = report.get("onnx")
    if fmt == "onnx" and exported is not None:
        runs = "will NOT run in onnxruntime (domain tf)" if exported.get("warning") else "runs in onnxruntime"
        fmt = f"onnx opset {exported['opset']}, {exported['nodes']} nodes, {exported['transposes']} Transposes, {runs}"
    title = f"Wrote {output} ({fmt}); seconds per stage"
    sections.append(Section(title, ("stage", "seconds"), timings, frozenset({"seconds"})))
    return sections


def summary_text(sections: Sequence[Section]) -> str:
    """Plain text: a title line, then aligned columns as wide as their content (nothing cut or wrapped)."""
    lines: list[str] = []
    for section in sections:
        if lines:
            lines.append("")
        lines.append(section.title)
        table = [section.columns, *section.rows]
        widths = [max(len(row[i]) for row in table) for i in range(len(section.columns))]
        for row in table:
            cells = [
                cell.rjust(width) if column in section.numeric else cell.ljust(width)
                for cell, width, column in zip(row, widths, section.columns, strict=True)
            ]
            lines.append("  " + "  ".join(cells).rstrip())
    return "\n".join(lines) + "\n"


def summary_tables(sections: Sequence[Section], width: int | None = None) -> list[Any]:
    """``rich`` renderables of the sections, for a terminal: each title (a line of its own, never wrapped
    by the table) then its table (see the module docstring for how they fit). A table that cannot fit
    ``width`` without cutting a number is given as its plain text instead (the terminal wraps it)."""
    from rich import box
    from rich.table import Table
    from rich.text import Text

    out: list[Any] = []
    for section in sections:
        table = Table(box=box.SIMPLE_HEAD, pad_edge=False, show_edge=False, collapse_padding=True)
        for index, column in enumerate(section.columns):
            if column in section.numeric:  # never narrower than its widest number; the header may wrap
                widest = max((len(row[index]) for row in section.rows), default=1)
                table.add_column(column, justify="right", overflow="fold", min_width=widest)
            else:
                table.add_column(column, overflow="fold")
        for row in section.rows:
            table.add_row(*(Text(cell) for cell in row))  # names from the model are text, never markup
        out.append(Text(section.title, style="bold", overflow="fold"))
        if width is not None and _narrowest(section) > width:
            out.append(Text(summary_text([Section("", section.columns, section.rows, section.numeric)]).strip("\n")))
        else:
            out.append(table)
    return out


def _narrowest(section: Section) -> int:
    """The narrowest a section's table can be without cutting a number or a word of text."""
    total = 2 * (len(section.columns) - 1)
    for index, column in enumerate(section.columns):
        cells = [row[index] for row in section.rows] + column.split()
        total += max(len(word) for cell in cells for word in (cell.split() or [""]))
    return total


def print_summary(report: Mapping[str, Any], output: str, fmt: str, *, to_stderr: bool = False) -> None:
    """Prints the summary on stdout (stderr with ``to_stderr``): tables in a terminal, plain text otherwise."""
    print_sections(summary_sections(report, output, fmt), to_stderr=to_stderr)


def print_sections(sections: Sequence[Section], *, to_stderr: bool = False) -> None:
    """Prints sections on stdout (stderr with ``to_stderr``): tables in a terminal, plain text otherwise."""
    import sys

    from rich.console import Console

    console = Console(stderr=to_stderr, highlight=False, markup=False)  # model names are text, never markup
    if console.is_terminal and not console.is_dumb_terminal:
        for renderable in summary_tables(sections, console.width):
            console.print(renderable)
        return
    stream = sys.stderr if to_stderr else sys.stdout
    stream.write(summary_text(sections))
    stream.flush()
