"""The difference between two IR graphs, as data (:class:`GraphDiff`) and as the text a failing test shows.

The text puts the smallest difference first: the first unmatched node on each side (nearest to a graph
output) with its path from that output, then the differing attributes side by side, then differing
output types; never two dumps of the graphs.

A path reads from a graph output towards the node: ``return[0] <- %ln.in[0] <- %add.in[1]`` is the node
read by input 1 of ``add``, which is read by input 0 of ``ln``, which is graph output 0. In a body the
path starts at the op that holds the body: ``%loop{body} return[0] <- ...``.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

__all__ = ["AttrDifference", "GraphDiff", "NodeRef", "TypeDifference", "UnmatchedNode"]

_WIDTH = 36


@dataclass(frozen=True)
class NodeRef:
    """A node of one side: its name, qualified op, and its path from a graph output (``""`` if none reaches it)."""

    name: str
    op: str
    path: str

    def __str__(self) -> str:
        where = self.path or "(no graph output reads it)"
        return f"%{self.name} = {self.op}  at {where}"


@dataclass(frozen=True)
class UnmatchedNode:
    """A node with no counterpart: why, and the node of the other side it was compared with (if any)."""

    node: NodeRef
    reason: str
    counterpart: NodeRef | None = None


@dataclass(frozen=True)
class AttrDifference:
    """One attribute of a matched pair that differs; a value is None where that side lacks the attribute."""

    a: NodeRef
    b: NodeRef
    name: str
    a_value: str | None
    b_value: str | None
    detail: str = ""


@dataclass(frozen=True)
class TypeDifference:
    """Output ``output`` of a matched pair has a different type on each side."""

    a: NodeRef
    b: NodeRef
    output: int
    a_type: str
    b_type: str


@dataclass(frozen=True)
class GraphDiff:
    """How graph ``a`` differs from graph ``b``; ``equal`` when it does not.

    Lists are in discovery order: nearest to a graph output first. ``unlisted`` counts the unpaired nodes
    left out of the lists because the other side has their twins (the weights a changed op reads).
    """

    unmatched_a: tuple[UnmatchedNode, ...] = ()
    unmatched_b: tuple[UnmatchedNode, ...] = ()
    attrs: tuple[AttrDifference, ...] = ()
    types: tuple[TypeDifference, ...] = ()
    interface: tuple[str, ...] = ()
    matched: int = 0
    unlisted: int = 0

    @property
    def equal(self) -> bool:
        return not (self.unmatched_a or self.unmatched_b or self.attrs or self.types or self.interface)

    def summary(self) -> str:
        """One line: what kinds of difference there are, and how many."""
        if self.equal:
            return f"graphs are equal ({self.matched} nodes matched)"
        parts = []
        if self.interface:
            parts.append(_count(len(self.interface), "interface difference"))
        if self.unmatched_a or self.unmatched_b:
            parts.append(f"{_count(len(self.unmatched_a), 'unmatched node')} in a, {len(self.unmatched_b)} in b")
        if self.attrs:
            parts.append(_count(len(self.attrs), "attribute difference"))
        if self.types:
            parts.append(_count(len(self.types), "type difference"))
        unlisted = f"; {self.unlisted} unpaired nodes with twins on the other side not listed" if self.unlisted else ""
        return f"graphs differ: {', '.join(parts)} ({self.matched} nodes matched{unlisted})"

    def format(self, limit: int = 8) -> str:
        """The difference as text, smallest first; at most ``limit`` rows per section."""
        lines = [self.summary()]
        for text in self.interface[:limit]:
            lines.append(f"  {text}")
        for side, other, items in (("a", "b", self.unmatched_a), ("b", "a", self.unmatched_b)):
            if items:
                first = items[0]
                lines.append(f"first unmatched node in {side}: {first.node}")
                lines.append(f"    why: {first.reason}")
                if first.counterpart is not None:
                    lines.append(f"    compared with {other}'s %{first.counterpart.name} = {first.counterpart.op}")
                if len(items) > 1:
                    shown = ", ".join(f"%{u.node.name}" for u in items[1:limit])
                    more = f" and {len(items) - limit} more" if len(items) > limit else ""
                    lines.append(f"    also unmatched in {side}: {shown}{more}")
        if self.attrs:
            lines.append(f"attribute differences ({len(self.attrs)}), a | b:")
            rows: list[tuple[str, ...]] = [("node in a | node in b", "attribute", "a", "b")]
            rows += [(_pair(d.a, d.b), d.name, _cell(d.a_value), _cell(d.b_value)) for d in self.attrs[:limit]]
            lines.extend(_table(rows))
            for d in self.attrs[:limit]:
                if _worth_detail(d):
                    lines.append(f"    {_pair(d.a, d.b)} {d.name}: {d.detail}")
            if len(self.attrs) > limit:
                lines.append(f"    ... and {len(self.attrs) - limit} more")
        if self.types:
            lines.append(f"type differences ({len(self.types)}), a | b:")
            rows = [("node in a | node in b", "output", "a", "b")]
            rows += [(_pair(d.a, d.b), str(d.output), d.a_type, d.b_type) for d in self.types[:limit]]
            lines.extend(_table(rows))
            if len(self.types) > limit:
                lines.append(f"    ... and {len(self.types) - limit} more")
        return "\n".join(lines)

    def to_dict(self) -> dict[str, Any]:
        return {"equal": self.equal, **asdict(self)}

    def __str__(self) -> str:
        return self.format()


def _worth_detail(d: AttrDifference) -> bool:
    """The detail says more than the two cells: tensors (digests), long values, kinds, bodies."""
    values = (d.a_value or "", d.b_value or "")
    if not d.detail or d.a_value is None or d.b_value is None:
        return False
    return any(len(v) > _WIDTH or v.startswith("tensor<") or "graph<" in v for v in values) or "kind" in d.detail


def _count(n: int, what: str) -> str:
    return f"{n} {what}{'' if n == 1 else 's'}"


def _pair(a: NodeRef, b: NodeRef) -> str:
    return f"%{a.name}" if a.name == b.name else f"%{a.name} | %{b.name}"


def _cell(text: str | None) -> str:
    if text is None:
        return "(absent)"
    return text if len(text) <= _WIDTH else text[: _WIDTH - 3] + "..."


def _table(rows: list[tuple[str, ...]]) -> list[str]:
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return ["    " + "  ".join(c.ljust(w) for c, w in zip(row, widths)).rstrip() for row in rows]
