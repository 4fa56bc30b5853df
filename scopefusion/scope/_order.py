"""Cycle checks for fusions, incrementally, on the graph contracted by every accepted fusion.

Contracting a set S of vertices into one vertex creates a cycle exactly when some path leaves S and
comes back. We keep a topological numbering ``pos`` of the contracted graph (edges go from lower to
higher ``pos``); along any path ``pos`` grows, so a path from a successor of S back to a predecessor
of S can only visit vertices numbered at most ``P``, the highest-numbered predecessor. When every
successor is numbered above ``P`` there is no such path and no search at all; otherwise the bounded
region reachable from the successors is searched, and networkx finds (and spells out) the cycle in that
region plus the contracted vertex. After a contraction the group gets a number between its
predecessors and successors, moving the searched region after it when needed, so the numbering stays
valid without renumbering the graph.

TF1 loop back edges (``NextIteration`` -> ``Merge``) are not edges here, as in SourceGraph's sort.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Hashable, Iterable, Iterator, Mapping, cast

import networkx as nx

from ..parser.source_graph import SourceGraph, is_back_edge_op_pair

__all__ = ["Contraction", "ContractedOrder"]


class _Group(tuple[str]):
    """The contracted vertex of one fusion (a tuple subclass, so it never equals a node name)."""

    __slots__ = ()

    def __repr__(self) -> str:
        return f"<fusion {self[0]}>"


@dataclass(frozen=True)
class Contraction:
    """What :meth:`ContractedOrder.find_cycle` learned about one fusion, handed back to
    :meth:`ContractedOrder.contract`: the vertices it merges, their outside neighbours, the highest
    predecessor number ``top``, the lowest successor number ``low``, and the region to renumber."""

    vertices: set[_Group | str]
    predecessors: set[Hashable]
    successors: set[Hashable]
    top: float
    low: float
    region: list[Hashable] = field(default_factory=list)


class ContractedOrder:
    """A topological numbering of the source graph contracted by accepted fusions."""

    def __init__(self, source: SourceGraph, position: Mapping[str, int], has_back_edges: bool) -> None:
        self._source = source
        self._has_back_edges = has_back_edges
        self._succ = source.nx._succ
        self._pred = source.nx._pred
        self._base = position
        self._override: dict[Hashable, float] = {}
        self._group_of: dict[str, _Group] = {}
        self._members: dict[_Group, list[str]] = {}
        self._checked = False

    # ------------------------------------------------------------------ adjacency
    def _is_back_edge(self, producer: str, consumer: str) -> bool:
        source = self._source
        return is_back_edge_op_pair(source.node(producer).op_type, source.node(consumer).op_type)

    def group_of(self, node: str) -> tuple[str] | None:
        """The contracted vertex (``(fusion name,)``) holding ``node``, else None."""
        return self._group_of.get(node)

    def _vertex(self, node: str) -> Hashable:
        return self._group_of.get(node, node)

    def _nodes_of(self, vertex: Hashable) -> list[str]:
        return self._members[vertex] if isinstance(vertex, _Group) else [cast(str, vertex)]

    def successors(self, vertex: Hashable) -> Iterator[Hashable]:
        for node in self._nodes_of(vertex):
            for consumer in self._succ[node]:
                other = self._vertex(consumer)
                if other != vertex and not self._is_back_edge_fast(node, consumer):
                    yield other

    def predecessors(self, vertex: Hashable) -> Iterator[Hashable]:
        for node in self._nodes_of(vertex):
            for producer in self._pred[node]:
                other = self._vertex(producer)
                if other != vertex and not self._is_back_edge_fast(producer, node):
                    yield other

    def _is_back_edge_fast(self, producer: str, consumer: str) -> bool:
        return self._has_back_edges and self._is_back_edge(producer, consumer)

    def pos(self, vertex: Hashable) -> float:
        value = self._override.get(vertex)
        return value if value is not None else self._base[vertex]  # type: ignore[index]

    # ------------------------------------------------------------------ validity of the base order
    def _ensure_valid(self) -> None:
        """Checks once that graph order is topological (a SourceGraph built with ``sort=False`` may not
        be); if it is not, numbers the vertices from networkx's topological sort instead."""
        if self._checked:
            return
        self._checked = True
        source = self._source
        base = self._base
        ok = True
        for node in source.nodes:
            here = base[node.name]
            for producer, _ in node.inputs:
                if producer and base[producer] >= here and not self._is_back_edge_fast(producer, node.name):
                    ok = False
                    break
            if not ok:
                break
            for producer in node.control_inputs:
                if base[producer] >= here and not self._is_back_edge_fast(producer, node.name):
                    ok = False
                    break
            if not ok:
                break
        if not ok:
            self._renumber()

    def _renumber(self) -> None:
        """Numbers every vertex of the contracted graph from scratch (networkx topological sort)."""
        dag = nx.DiGraph()
        vertices = list(dict.fromkeys(self._vertex(n.name) for n in self._source.nodes))
        dag.add_nodes_from(vertices)
        for vertex in vertices:
            dag.add_edges_from((vertex, other) for other in self.successors(vertex))
        self._override = {v: float(i) for i, v in enumerate(nx.topological_sort(dag))}

    # ------------------------------------------------------------------ the check
    def find_cycle(self, name: str, members: Iterable[str]) -> tuple[list[str] | None, Contraction | None]:
        """Whether contracting ``members`` (as fusion ``name``) closes a cycle.

        Returns ``(cycle, contraction)``: ``cycle`` is None when there is none (and ``contraction`` is
        handed back to :meth:`contract`), else the cycle as vertex names starting and ending at the
        fusion (and ``contraction`` is None).
        """
        self._ensure_valid()
        group_of = self._group_of
        group_vertices = {group_of.get(m, m) for m in members}
        nodes = [n for v in group_vertices for n in self._nodes_of(v)]
        preds: set[Hashable] = set()
        succs: set[Hashable] = set()
        back = self._has_back_edges
        for node in nodes:
            for producer in self._pred[node]:
                other = group_of.get(producer, producer)
                if other not in group_vertices and not (back and self._is_back_edge(producer, node)):
                    preds.add(other)
            for consumer in self._succ[node]:
                other = group_of.get(consumer, consumer)
                if other not in group_vertices and not (back and self._is_back_edge(node, consumer)):
                    succs.add(other)
        pos = self.pos
        top = max((pos(p) for p in preds), default=-math.inf)
        low = min((pos(s) for s in succs), default=math.inf)
        if top < low:
            return None, Contraction(group_vertices, preds, succs, top, low)
        # Search the successors' descendants numbered <= top, the only ones that can reach a predecessor.
        region: list[Hashable] = []
        seen: set[Hashable] = set()
        stack = [s for s in succs if self.pos(s) <= top]
        seen.update(stack)
        local = nx.DiGraph()
        group = _Group((name,))
        while stack:
            vertex = stack.pop()
            region.append(vertex)
            for nxt in self.successors(vertex):
                if nxt in group_vertices:
                    local.add_edge(vertex, group)
                    continue
                if self.pos(nxt) <= top:
                    local.add_edge(vertex, nxt)
                    if nxt not in seen:
                        seen.add(nxt)
                        stack.append(nxt)
        local.add_edges_from((group, s) for s in seen if s in succs)
        if local.has_node(group):
            try:
                edges = nx.find_cycle(local, source=group)
            except nx.NetworkXNoCycle:
                edges = None
            if edges:
                path = [_label(u) for u, _ in edges] + [_label(edges[0][0])]
                return path, None
        return None, Contraction(group_vertices, preds, succs, top, low, region)

    def contract(self, name: str, contraction: Contraction) -> None:
        """Contracts the fusion's members into its vertex; ``contraction`` comes from :meth:`find_cycle`."""
        group_vertices, top, low, region = contraction.vertices, contraction.top, contraction.low, contraction.region
        group = _Group((name,))
        nodes: list[str] = []
        for vertex in group_vertices:
            nodes.extend(self._nodes_of(vertex))
            self._override.pop(vertex, None)
            if isinstance(vertex, _Group):
                del self._members[vertex]
        self._members[group] = nodes
        for node in nodes:
            self._group_of[node] = group
        if not region:
            if top == -math.inf and low == math.inf:
                value = 0.0
            elif top == -math.inf:
                value = low - 1.0
            elif low == math.inf:
                value = top + 1.0
            else:
                value = (top + low) / 2.0
            if not top < value < low:
                self._renumber()
                return
            self._override[group] = value
            return
        # Move the region (everything reachable from the successors numbered <= top) after the group.
        region_set = set(region)
        upper = math.inf
        for member in [group, *region]:
            for nxt in self.successors(member):
                if nxt not in region_set and nxt != group:
                    upper = min(upper, self.pos(nxt))
        ordered = sorted(region, key=self.pos)
        count = len(ordered) + 2
        step = 1.0 if upper == math.inf else (upper - top) / count
        values = [top + (k + 1) * step for k in range(len(ordered) + 1)]
        if step <= 0 or not all(a < b for a, b in zip([top, *values], [*values, upper])):
            self._renumber()
            return
        self._override[group] = values[0]
        for moved, value in zip(ordered, values[1:]):
            self._override[moved] = value


def _label(vertex: Hashable) -> str:
    return f"<fusion {vertex[0]}>" if isinstance(vertex, _Group) else str(vertex)
