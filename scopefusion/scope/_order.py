"""Cycle checks for fusions, incrementally, on the graph contracted by every accepted fusion.

Contracting a set S of vertices into one vertex creates a cycle exactly when some path leaves S and
comes back. We keep a topological numbering ``pos`` of the contracted graph (edges go from lower to
higher ``pos``); along any path ``pos`` grows, so a path from a successor of S back to a predecessor
of S can only visit vertices numbered at most ``P``, the highest-numbered predecessor. When every
successor is numbered above ``P`` there is no such path and no search at all; otherwise the bounded
region reachable from the successors is searched; only an edge from that region back into S closes a
cycle, and :func:`find_cycle` (networkx's ``find_cycle`` walk, on plain dicts) spells it out. After a contraction the group gets a number between its
predecessors and successors, moving the searched region after it when needed, so the numbering stays
valid without renumbering the graph.

TF1 loop back edges (``NextIteration`` -> ``Merge``) are not edges here, as in SourceGraph's sort.
"""

from __future__ import annotations

import math
from typing import Hashable, Iterable, Iterator, Mapping, Sequence, TypeVar, cast

from ..errors import FusionError
from ..parser.source_graph import SourceGraph, SourceNode, is_back_edge_op_pair

__all__ = ["Contraction", "ContractedOrder", "find_cycle"]

V = TypeVar("V", bound=Hashable)


class _Group(tuple[str]):
    """The contracted vertex of one fusion (a tuple subclass, so it never equals a node name)."""

    __slots__ = ()

    def __repr__(self) -> str:
        return f"<fusion {self[0]}>"


class Contraction:
    """What :meth:`ContractedOrder.find_cycle` learned about one fusion, handed back to
    :meth:`ContractedOrder.contract`: the vertices it merges and their nodes, the highest predecessor
    number ``top``, the lowest successor number ``low``, the region to renumber, and the nodes' numbers in
    the base order (``positions``, one per node)."""

    __slots__ = ("vertices", "nodes", "top", "low", "region", "positions")

    def __init__(
        self, vertices: set[Hashable], nodes: list[str], top: float, low: float, region: list[Hashable] | None = None,
        positions: list[int] | None = None,
    ) -> None:
        self.vertices = vertices
        self.nodes = nodes
        self.positions: list[int] = positions if positions is not None else []
        self.top = top
        self.low = low
        self.region: list[Hashable] = region if region is not None else []


class ContractedOrder:
    """A topological numbering of the source graph contracted by accepted fusions."""

    def __init__(
        self, source: SourceGraph, position: Mapping[str, int], has_back_edges: bool, known_valid: bool = False
    ) -> None:
        """``position`` numbers the nodes 0 to n-1; ``known_valid`` says it is already topological (the index in
        a :class:`SourceGraph` whose edges run forward), so it is not checked."""
        self._source = source
        self._has_back_edges = has_back_edges
        self._succ = source.out_edges
        self._pred = source.in_edges
        self._base = position
        self._override: dict[Hashable, float] = {}
        self._nodes_renumbered = False  # whether some node (not only fusions) has a number in _override
        # The fusion holding each node, by the node's number in ``position``: a fusion's nodes and most of their
        # neighbours have numbers close together, so this list is read near one place, where a table keyed by
        # name would be read at random places of a graph-sized index (on a large graph, mostly cache misses).
        self._group_at: list[_Group | None] = [None] * len(position)
        self._members: dict[_Group, list[str]] = {}
        self._checked = known_valid

    # ------------------------------------------------------------------ adjacency
    def _is_back_edge(self, producer: str, consumer: str) -> bool:
        source = self._source
        return is_back_edge_op_pair(source.node(producer).op_type, source.node(consumer).op_type)

    def group_of(self, node: str) -> tuple[str] | None:
        """The contracted vertex (``(fusion name,)``) holding ``node``, else None (also for no such node)."""
        at = self._base.get(node)
        return None if at is None else self._group_at[at]

    def first_claimed(self, nodes: Iterable[str], positions: Iterable[int] | None = None) -> tuple[str, str] | None:
        """The first of ``nodes`` that a contracted fusion holds, with that fusion's name, else None;
        ``positions``: their numbers in the base order when the caller has them (no look-up by name)."""
        if not self._members:  # no fusion yet
            return None
        group_at = self._group_at
        if positions is None:
            base = self._base
            for node in nodes:
                at = base.get(node)
                group = None if at is None else group_at[at]
                if group is not None:
                    return node, group[0]
            return None
        for node, at in zip(nodes, positions):
            group = group_at[at]
            if group is not None:
                return node, group[0]
        return None

    def _vertex(self, node: str) -> Hashable:
        group = self._group_at[self._base[node]]
        return node if group is None else group

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
        be); if it is not, numbers the vertices from a topological sort instead."""
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
        """Numbers every vertex of the contracted graph from scratch: a topological sort by generations
        (vertices with no predecessor left, in graph order, then those they free, in edge order)."""
        vertices = list(dict.fromkeys(self._vertex(n.name) for n in self._source.nodes))
        succ = {vertex: list(dict.fromkeys(self.successors(vertex))) for vertex in vertices}
        waiting: dict[Hashable, int] = dict.fromkeys(vertices, 0)
        for targets in succ.values():
            for other in targets:
                waiting[other] += 1
        generation = [v for v in vertices if not waiting[v]]
        order: list[Hashable] = []
        while generation:
            order.extend(generation)
            freed = []
            for vertex in generation:
                for other in succ[vertex]:
                    waiting[other] -= 1
                    if not waiting[other]:
                        freed.append(other)
            generation = freed
        if len(order) < len(vertices):
            raise FusionError(
                f"{self._source.path or self._source.name or 'the graph'}: the graph's data edges form a cycle, so fusions cannot be ordered; "
                "fix the model's edges"
            )
        self._override = {v: float(i) for i, v in enumerate(order)}
        self._nodes_renumbered = True

    # ------------------------------------------------------------------ the check
    def find_cycle(
        self, name: str, members: Iterable[str], unclaimed: Mapping[str, SourceNode] | None = None,
        consumers: Mapping[str, Mapping[str, object]] | None = None, positions: Mapping[str, int] | None = None,
        outside: tuple[Sequence[str], Sequence[str]] | None = None,
    ) -> tuple[list[str] | None, Contraction | None]:
        """Whether contracting ``members`` (as fusion ``name``) closes a cycle.

        Returns ``(cycle, contraction)``: ``cycle`` is None when there is none (and ``contraction`` is
        handed back to :meth:`contract`), else the cycle as vertex names starting and ending at the
        fusion (and ``contraction`` is None).

        A caller that has checked that no member belongs to an accepted fusion may pass ``unclaimed``, each
        member's node by name, ``consumers``, each member's ``out_edges`` entry by name, and ``positions``,
        each member's number: the producers are then read from the nodes' inputs and the consumers from
        that table, instead of from the graph-sized edge tables (on a large graph such look-ups mostly miss
        the CPU's caches). A node's inputs and control inputs name the same producers as its ``in_edges``
        entry (repeats and absent inputs aside, which the highest predecessor number does not depend on).
        Such a caller that has also walked the members' edges may pass ``outside``: the producers (data and
        control) and the consumers the members have outside themselves, repeats allowed; in a graph without
        back edges only those neighbours' numbers are read (see :meth:`_number_range`)."""
        self._ensure_valid()
        nodes = list(members)
        group_vertices: set[Hashable] = set(nodes)
        if outside is not None and positions is not None and not self._has_back_edges:
            top, low = self._number_range(outside[0], outside[1])
            numbers = [positions[n] for n in nodes]
            if top < low:
                return None, Contraction(group_vertices, nodes, top, low, positions=numbers)
            return self._search_region(name, nodes, group_vertices, top, low, numbers)
        if unclaimed is not None and consumers is not None and positions is not None:
            return self._find_cycle_of_unclaimed(name, nodes, group_vertices, unclaimed, consumers, positions)
        vertex = self._vertex
        if self._members and any(vertex(m) is not m for m in nodes):  # members of earlier fusions
            group_vertices = {vertex(m) for m in nodes}
            nodes = []
            for v in group_vertices:
                nodes.extend(self._nodes_of(v))
        back = self._has_back_edges
        pred_of, succ_of = self._pred, self._succ
        override, base = self._override, self._base
        top = -math.inf
        low = math.inf
        # NOTE: most edges of a fusion's nodes join two of its own nodes; a neighbour that is a vertex of the
        # group itself is skipped before the look-up of its fusion in the graph-sized table (a plain node in
        # group_vertices belongs to no fusion, so the look-up would give that node back).
        for node in nodes:
            for producer in pred_of[node]:
                if producer in group_vertices:
                    continue
                other = vertex(producer)
                if other in group_vertices or (back and self._is_back_edge(producer, node)):
                    continue
                value = override.get(other)
                if value is None:
                    value = base[other]  # type: ignore[index]
                if value > top:
                    top = value
            for consumer in succ_of[node]:
                if consumer in group_vertices:
                    continue
                other = vertex(consumer)
                if other in group_vertices or (back and self._is_back_edge(node, consumer)):
                    continue
                value = override.get(other)
                if value is None:
                    value = base[other]  # type: ignore[index]
                if value < low:
                    low = value
        numbers = [base[n] for n in nodes]
        if top < low:
            return None, Contraction(group_vertices, nodes, top, low, positions=numbers)
        return self._search_region(name, nodes, group_vertices, top, low, numbers)

    def _find_cycle_of_unclaimed(
        self, name: str, nodes: list[str], group_vertices: set[Hashable], node_of: Mapping[str, SourceNode],
        consumers: Mapping[str, Mapping[str, object]], positions: Mapping[str, int],
    ) -> tuple[list[str] | None, Contraction | None]:
        """:meth:`find_cycle` of members that belong to no accepted fusion, with their nodes, consumers and
        numbers at hand: the same numbers compared (:meth:`_number_range` of the neighbours outside the
        members, back edges left out), read without the graph-sized edge tables. The members are plain
        nodes, so a fusion is never one of them."""
        back = self._has_back_edges
        producers: list[str] = []
        successors: list[str] = []
        for node in nodes:
            for producer in _producers(node_of[node]):
                if producer not in group_vertices and not (back and self._is_back_edge(producer, node)):
                    producers.append(producer)
            for consumer in consumers[node]:
                if consumer not in group_vertices and not (back and self._is_back_edge(node, consumer)):
                    successors.append(consumer)
        top, low = self._number_range(producers, successors)
        numbers = [positions[n] for n in nodes]
        if top < low:
            return None, Contraction(group_vertices, nodes, top, low, positions=numbers)
        return self._search_region(name, nodes, group_vertices, top, low, numbers)

    def _number_range(self, producers: Sequence[str], consumers: Sequence[str]) -> tuple[float, float]:
        """``(top, low)``: the highest number among the vertices holding ``producers`` and the lowest among those
        holding ``consumers`` (-inf and inf for none), as :meth:`_find_cycle_of_unclaimed` finds them while
        walking the members' edges; here the neighbours outside the members are given, so no edge is walked
        and no neighbour is tested for membership, and with no back edge none is skipped."""
        base = self._base.__getitem__
        group_at = self._group_at.__getitem__
        above, below = list(map(base, producers)), list(map(base, consumers))
        if not self._nodes_renumbered and not any(map(group_at, above)) and not any(map(group_at, below)):
            # No neighbour lies in a fusion and no node was renumbered: each is its own vertex, numbered by position.
            return max(above, default=-math.inf), min(below, default=math.inf)
        number = self._number_of_node
        return max(map(number, producers), default=-math.inf), min(map(number, consumers), default=math.inf)

    def _number_of_node(self, name: str) -> float:
        """The number of the vertex holding node ``name``: its fusion's, else its own (in the overrides once
        nodes were renumbered), else its position."""
        at = self._base[name]
        group = self._group_at[at]
        if group is not None:
            value = self._override.get(group)
            return self._base[group] if value is None else value  # type: ignore[index]
        value = self._override.get(name) if self._nodes_renumbered else None
        return at if value is None else value

    def _search_region(
        self, name: str, nodes: list[str], group_vertices: set[Hashable], top: float, low: float, numbers: list[int]
    ) -> tuple[list[str] | None, Contraction | None]:
        """The rest of :meth:`find_cycle` when some successor is numbered below the highest predecessor;
        ``numbers``: the nodes' numbers in the base order."""
        vertex_of = self._vertex
        back = self._has_back_edges
        succ_of = self._succ
        succs: dict[Hashable, None] = {}  # dicts, not sets: the cycle reported does not depend on hashing
        for node in nodes:
            for consumer in succ_of[node]:
                other = vertex_of(consumer)
                if other not in group_vertices and not (back and self._is_back_edge(node, consumer)):
                    succs[other] = None
        # Search the successors' descendants numbered <= top, the only ones that can reach a predecessor.
        region: list[Hashable] = []
        stack = [s for s in succs if self.pos(s) <= top]
        seen = dict.fromkeys(stack)
        local: dict[Hashable, dict[Hashable, None]] = {}
        group = _Group((name,))
        closes = False
        while stack:
            vertex = stack.pop()
            region.append(vertex)
            out = local.setdefault(vertex, {})
            for nxt in self.successors(vertex):
                if nxt in group_vertices:
                    out[group] = None
                    closes = True
                    continue
                if self.pos(nxt) <= top:
                    out[nxt] = None
                    if nxt not in seen:
                        seen[nxt] = None
                        stack.append(nxt)
        if closes:  # only cycles through the group are possible; spell one out
            local[group] = dict.fromkeys(s for s in seen if s in succs)
            edges = find_cycle(local, group)
            if edges:
                path = [_label(u) for u, _ in edges] + [_label(edges[0][0])]
                return path, None
        return None, Contraction(group_vertices, nodes, top, low, region, numbers)

    def contract(self, name: str, contraction: Contraction) -> None:
        """Contracts the fusion's members into its vertex; ``contraction`` comes from :meth:`find_cycle`."""
        group_vertices, top, low, region = contraction.vertices, contraction.top, contraction.low, contraction.region
        group = _Group((name,))
        nodes = contraction.nodes
        drop = self._override.pop
        renumbered = self._nodes_renumbered  # else only fusions have a number to drop
        for vertex in group_vertices:
            if vertex.__class__ is _Group:
                drop(vertex, None)
                del self._members[vertex]
            elif renumbered:
                drop(vertex, None)
        self._members[group] = nodes
        group_at = self._group_at
        for at in contraction.positions:
            group_at[at] = group
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
        self._nodes_renumbered = self._nodes_renumbered or any(v.__class__ is not _Group for v in ordered)


def _producers(node: SourceNode) -> list[str]:
    """The names of ``node``'s producers, data then control, repeats kept, absent inputs left out."""
    found = [producer for producer, _ in node.inputs if producer]
    if node.control_inputs:
        found.extend(node.control_inputs)
    return found


def _label(vertex: Hashable) -> str:
    return f"<fusion {vertex[0]}>" if isinstance(vertex, _Group) else str(vertex)


def find_cycle(succ: Mapping[V, Iterable[V]], source: V | None = None) -> list[tuple[V, V]]:
    """A cycle of the directed graph ``succ`` (vertex -> successors, in order) as its edges, found as
    networkx's ``find_cycle`` finds it: a depth-first walk over edges from ``source`` (else from each
    vertex in turn), the first edge that reaches a vertex on the current path closing the cycle; ``[]``
    when there is none. Vertices only named as successors count as vertices without successors."""
    explored: set[V] = set()
    starts: Iterable[V] = (source,) if source is not None else list(succ)
    for start in starts:
        if start in explored:
            continue
        edges: list[tuple[V, V]] = []
        seen = {start}
        active = {start}
        previous_head: V | None = None
        for tail, head in _edge_dfs(succ, start):
            if head in explored:
                continue
            if previous_head is not None and tail != previous_head:
                # Backtracked: pop the path back to the edge that ends at ``tail``.
                while True:
                    if not edges:
                        active = {tail}
                        break
                    active.remove(edges.pop()[1])
                    if edges and edges[-1][1] == tail:
                        break
            edges.append((tail, head))
            if head in active:
                for i, (first, _) in enumerate(edges):
                    if first == head:
                        return edges[i:]
                return edges[-1:]
            seen.add(head)
            active.add(head)
            previous_head = head
        explored |= seen
    return []


def _edge_dfs(succ: Mapping[V, Iterable[V]], start: V) -> Iterator[tuple[V, V]]:
    """Every edge reachable from ``start``, depth first, each once (networkx's ``edge_dfs`` order)."""
    pending: dict[V, Iterator[V]] = {}
    stack = [start]
    while stack:
        current = stack[-1]
        if current not in pending:
            pending[current] = iter(succ.get(current, ()))
        nxt = next(pending[current], _END)
        if nxt is _END:
            stack.pop()
        else:
            stack.append(cast(V, nxt))
            yield current, cast(V, nxt)


_END = object()
