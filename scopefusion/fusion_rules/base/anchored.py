"""The base of the rules that find a small computation by dataflow, seeded from the op-type index.

An :class:`AnchoredDataflowPass` looks at every node of its ``seed_types`` (``Erf``, ``Sigmoid``,
``Minimum``...), tries its dataflow ``patterns`` anchored at the node or at ``anchors()`` downstream of it,
and keeps the largest match that holds the seed. A match becomes a one-to-one fusion of ``fused_type``
whose ports follow the pattern's inputs and outputs and whose attributes ``parameters()`` reads from the
matched constants. A seed in a scope named like the computation (``scope_words``) that matches nothing is
reported as a refusal with the nearest miss, so "why did it not fuse?" has an answer.

NOTE: these rules define no scope patterns: candidates come from the op-type index, so a graph without
scope names fuses the same way; scope names only decide which non-matches are worth reporting.
"""

from __future__ import annotations

import math
from typing import Any, Callable, ClassVar, Iterable, Mapping, Sequence

import numpy as np

from scopefusion.scope import (
    DataflowPattern,
    FusionScopesResult,
    Match,
    NearMiss,
    PatternCheck,
    Scope,
    ScopeBasePass,
    ScopeGraph,
    ScopesResult,
    claimed_nodes,
    map_ports,
    reads_op_type_counts,
)

__all__ = [
    "AnchoredDataflowPass",
    "best_match",
    "downstream",
    "fusion_name",
    "named_like",
    "scalar_constants_reason",
    "seeded_miss",
]


class AnchoredDataflowPass(ScopeBasePass):
    """A dataflow rule seeded from the op-type index; subclasses declare the class attributes below and
    may override :meth:`anchors` and :meth:`parameters`.

    Class attributes:
        fused_type: the fused op type (``Gelu``).
        what: how reasons and descriptions name the computation (``GELU``).
        seed_types: op types whose nodes start a search.
        scope_words: words of a scope name under which a non-matching seed is reported.
        patterns: ``(tag, DataflowPattern)`` pairs; the tag of the match reaches :meth:`parameters`.
        no_match: what a refusal says when there is no near miss at all.
    """

    general = True
    fused_type: ClassVar[str] = ""
    what: ClassVar[str] = ""
    seed_types: ClassVar[tuple[str, ...]] = ()
    scope_words: ClassVar[tuple[str, ...]] = ()
    patterns: ClassVar[Sequence[tuple[Any, DataflowPattern]]] = ()
    no_match: ClassVar[str] = "nothing matched"

    def define_patterns(self) -> tuple:
        return ()

    def anchors(self, graph: ScopeGraph, seed: str) -> list[str]:
        """The nodes a pattern is anchored at for ``seed`` (default: the seed itself)."""
        return [seed]

    def parameters(self, match: Match, tag: Any, result: FusionScopesResult) -> str | None:
        """Reads the fused op's attributes from ``match`` into ``result.attrs``; returns why the matched
        dataflow is not this computation after all (a wrong constant), or None."""
        return None

    def refusal(self, seed: str, op_type: str, miss: NearMiss | None) -> str:
        return (
            f"{seed} ({op_type}) in a {self.what}-named scope does not compute a {self.what}: "
            + (str(miss) if miss is not None else self.no_match)
        )

    def explain(self, scope: Scope, graph: ScopeGraph | None = None) -> list[PatternCheck]:
        """The dataflow tried from every seed in ``scope``: a match, or the nearest miss (or no seed at all)."""
        where = f"dataflow pattern {self.what} (in {len(self.patterns)} forms)"
        if graph is None:
            return [PatternCheck(where, "not tried without a graph")]
        return [PatternCheck(where, seeded_miss(graph, scope, self.seed_types, self.anchors, self.patterns))]

    @reads_op_type_counts
    def selects_nothing(self, graph: ScopeGraph) -> bool:
        """The selection starts from the seeds alone: none when the graph has no node of a seed type."""
        present = graph.present_types
        return self._selects_as(AnchoredDataflowPass) and not any(t in present for t in self.seed_types)

    def last_match_scopes_and_ops(self, graph: ScopeGraph, matches: Sequence[Any]) -> list[ScopesResult]:
        selected: list[ScopesResult] = []
        taken: set[str] = set()
        for op_type in self.seed_types:
            seeds = graph.nodes_by_type(op_type)
            if not seeds:
                continue
            parts = _distinct_parts(self.patterns, op_type)
            for node in seeds:
                if node.name in taken:
                    continue
                named = named_like(graph.tree.scope_of(node.name).name, self.scope_words)
                # No pattern's part below the seed matches there, or no anchor: no match holds the seed. The
                # part test comes first: its answers are kept in the graph's memo, the anchors are walked anew.
                if not named and not any(pattern.part_holds(graph, op, part, node) for pattern, op, part in parts):
                    continue
                anchors = self.anchors(graph, node.name)
                if not named and not anchors:
                    continue
                tag, match, miss = best_match(graph, anchors, self.patterns, node.name, near_miss=named)
                if match is not None:
                    taken.update(match.node_names)
                    captures = {"match": match, "tag": tag}
                    selected.append(ScopesResult.of_node_names(claimed_nodes(graph, match), captures))
                elif named:
                    why = self.refusal(node.name, op_type, miss)
                    selected.append(ScopesResult(nodes=[node.name], refusal=why))
        return selected

    def generate_fusion_result(self, scopes: Sequence[Any], result: FusionScopesResult, graph: ScopeGraph) -> None:
        match: Match = result.captures["match"]
        output = match["out"].name
        result.op_type = self.fused_type
        result.name = fusion_name(graph, result.nodes, output)
        result.description = f"{self.what} ({match.pattern.name})"
        map_ports(result, graph, match)
        reason = self.parameters(match, result.captures["tag"], result)
        del result.captures["match"], result.captures["tag"]  # handed to the rule, not kept with the fusion
        if reason is not None:
            result.invalidate(f"{output} has the dataflow of a {self.what} but {reason}")


def seeded_miss(
    graph: ScopeGraph,
    scope: Scope,
    seed_types: Sequence[str],
    anchors: Callable[[ScopeGraph, str], list[str]],
    patterns: Sequence[tuple[Any, DataflowPattern]],
) -> str | None:
    """None when a pattern matches from some seed of ``seed_types`` in ``scope``; else why not: no seed
    there, or the nearest miss over every seed."""
    seeds = [n.name for n in scope.all_nodes if n.op_type in seed_types]
    label = scope.name or "the graph"
    if not seeds:
        return f"no {'|'.join(seed_types)} node in {label} (the pass starts its search from those)"
    nearest: NearMiss | None = None
    for seed in seeds:
        _, match, miss = best_match(graph, anchors(graph, seed), patterns, seed)
        if match is not None:
            return None
        if miss is not None and (nearest is None or miss.depth > nearest.depth):
            nearest = miss
    tried = f"{len(seeds)} {'|'.join(seed_types)} node(s) tried in {label}"
    return f"no match: {tried}; nearest miss {nearest}" if nearest is not None else f"no match: {tried}"


def downstream(graph: ScopeGraph, name: str, hops: int, op_types: Sequence[str]) -> list[str]:
    """Nodes of ``op_types`` reached from ``name`` along data edges in at most ``hops`` steps, farthest first."""
    seen: dict[str, int] = {}
    frontier = [name]
    for depth in range(1, hops + 1):
        following = []
        for node in frontier:
            for consumer, slot, _ in graph.shared_consumers(node):
                if slot >= 0 and consumer not in seen:
                    seen[consumer] = depth
                    following.append(consumer)
        frontier = following
    hits = [n for n in seen if graph.node(n).op_type in op_types]
    return sorted(hits, key=lambda n: (-seen[n], graph.position(n)))


def fusion_name(graph: ScopeGraph, claimed: Iterable[str], output: str) -> str:
    """The name of the innermost scope holding every claimed node when the fusion replaces all of that
    scope (and no other node has the name), else the output node's name."""
    claimed = set(claimed)
    tree = graph.tree
    # The scope found below holds the output's scope, so its subtree has at least as many nodes: when the output's
    # scope alone holds more nodes than are claimed (all of the graph's), no scope is replaced whole (the usual
    # answer, told without finding the claimed nodes' scopes).
    if sum(tree.scope_of(output).op_counts.values()) > len(claimed) and tree.positions.keys() >= claimed:
        return output
    scopes = {s.name: s for s in map(tree.scope_of, claimed)}.values()
    common = tree.scope_of(output)
    while common.parent is not None and not all(common.contains(s) for s in scopes):
        common = common.parent
    # Every claimed node lies in ``common``'s subtree, so the fusion replaces all of it exactly when the subtree
    # holds as many nodes as are claimed (its op counts add up to its size: no walk over its nodes).
    if common.is_root or sum(common.op_counts.values()) != len(claimed):
        return output
    name = common.name.rstrip("/")
    return name if graph.get(name) is None or name in claimed else output


def best_match(
    graph: ScopeGraph,
    anchors: Sequence[str],
    patterns: Sequence[tuple[Any, DataflowPattern]],
    must_hold: str | None = None,
    accept: Callable[[Match], bool] | None = None,
    near_miss: bool = True,
) -> tuple[Any, Match | None, NearMiss | None]:
    """``(tag, match, None)`` for the largest match over ``anchors`` x ``patterns`` that binds op node
    ``must_hold`` and that ``accept`` takes; else ``(None, None, deepest near miss)``. With ``near_miss``
    False the miss is not wanted (None stands for it), so patterns that cannot be anchored at a node
    (:meth:`~scopefusion.scope.DataflowPattern.may_anchor`) are not searched there.

    NOTE: :meth:`~scopefusion.scope.DataflowPattern.may_match_at` is not asked: the anchors come from a seed's
    neighbours, where a match is likely, and the walk it makes over the levels above an anchor costs about what a
    search that fails costs; it is pure cost at the anchor of a match."""
    if near_miss:
        # The patterns that can match are tried first, without near misses: a match found there is the
        # answer; only when there is none are all of them searched again for the nearest miss.
        quick = best_match(graph, anchors, patterns, must_hold, accept, near_miss=False)
        if quick[1] is not None:
            return quick
    best: tuple[Any, Match] | None = None
    miss: NearMiss | None = None
    if not near_miss and must_hold is not None and anchors:  # only a pattern with an op of the node's type can bind it
        patterns = _holding_patterns(patterns, graph.node(must_hold).op_type)
    for anchor in anchors:
        node = graph.node(anchor)
        for tag, pattern in patterns:
            if node.op_type not in pattern.anchor_types:
                continue
            # A match binds one node per pattern op, so a pattern with no more ops than the best match's nodes
            # cannot replace it (only a larger match does); once there is a best match, no miss is answered.
            if best is not None and len(pattern._ops) <= len(best[1].nodes):
                continue
            if not near_miss and not pattern.may_anchor(graph, node):
                continue
            found = pattern.match_at(graph, anchor)
            if isinstance(found, Match):
                wanted = (must_hold is None or must_hold in found.node_names) and (accept is None or accept(found))
                if wanted and (best is None or len(found.nodes) > len(best[1].nodes)):
                    best = (tag, found)
            elif miss is None or found.depth > miss.depth:
                miss = found
    if best is None:
        return None, None, miss if near_miss else None
    return best[0], best[1], None


# NOTE: a pure cache: (id of a tuple of (tag, pattern) pairs, op type) -> (that tuple, its pairs whose pattern has
# an op of that type, largest first). The tuple is kept with its answer, so its id is not reused while the answer is.
_HOLDING: dict[tuple[int, str], tuple[Any, list[tuple[Any, DataflowPattern]]]] = {}
_HOLDING_SIZE = 256


def _holding_patterns(patterns: Sequence[tuple[Any, DataflowPattern]], op_type: str) -> list[tuple[Any, DataflowPattern]]:
    """The ``(tag, pattern)`` pairs whose pattern has an op of ``op_type``, largest first (:func:`_largest_first`;
    do not modify the list): kept per tuple of pairs and op type, as the rules pass the same module-level tuples
    for every seed and graph."""
    if not isinstance(patterns, tuple):
        return _largest_first([(tag, pattern) for tag, pattern in patterns if pattern.has_op_type(op_type)])
    key = (id(patterns), op_type)
    cached = _HOLDING.get(key)
    if cached is None or cached[0] is not patterns:
        if len(_HOLDING) >= _HOLDING_SIZE:
            _HOLDING.clear()
        holding = [(tag, pattern) for tag, pattern in patterns if pattern.has_op_type(op_type)]
        cached = _HOLDING[key] = (patterns, _largest_first(holding))
    return cached[1]


def _largest_first(patterns: list[tuple[Any, DataflowPattern]]) -> list[tuple[Any, DataflowPattern]]:
    """``patterns`` with those of more ops first, in order among equals: :func:`best_match` without near misses
    keeps the same match trying them so (the first largest at each anchor, anchors in order), and a pattern
    no larger than a match found at the anchor is not tried after it."""
    return sorted(patterns, key=lambda pair: -len(pair[1]._ops))


# NOTE: a pure cache: (id of a tuple of (tag, pattern) pairs, op type) -> (that tuple, its distinct parts below ops
# of that type). The tuple is kept with its answer, so its id is not reused while the answer is.
_SEED_PARTS: dict[tuple[int, str], tuple[Any, list[tuple[DataflowPattern, Any, Any]]]] = {}


def _distinct_parts(patterns: Sequence[tuple[Any, DataflowPattern]], op_type: str) -> list[tuple[DataflowPattern, Any, Any]]:
    """``(pattern, op, part)`` for each distinct part below an op of ``op_type`` in ``patterns``, in the order
    ``any(pattern.may_hold(...) for ...)`` meets them: what that asks of a seed of ``op_type``. A part met again
    has the answer it had (one memo entry per part and node), so it is asked once; kept per pattern tuple and type."""
    key = (id(patterns), op_type)
    cached = _SEED_PARTS.get(key) if isinstance(patterns, tuple) else None
    if cached is None or cached[0] is not patterns:
        found: dict[Any, tuple[DataflowPattern, Any, Any]] = {}
        for _, pattern in patterns:
            for op, part in pattern.parts_of_type(op_type):
                found.setdefault(part, (pattern, op, part))
        cached = (patterns, list(found.values()))
        if isinstance(patterns, tuple):
            if len(_SEED_PARTS) >= _HOLDING_SIZE:
                _SEED_PARTS.clear()
            _SEED_PARTS[key] = cached
    return cached[1]


def named_like(scope_name: str, words: Sequence[str]) -> bool:
    last = scope_name.rstrip("/").rsplit("/", 1)[-1].lower()
    return any(w in last for w in words)


def scalar_constants_reason(
    match: Match, expected: Mapping[str, tuple[float, str]], rtol: float, abs_tol: float = 0.0, any_rank: bool = False
) -> str | None:
    """Why a match's scalar constants are not the expected ones, or None when each has its value.

    ``expected`` maps a capture name to ``(value, what it is)``; captures the match lacks are skipped. With
    ``any_rank``, a one-value constant of any rank counts (tf2onnx's ``[1, 1, 1, 1]``); the caller checks that
    it does not broadcast its input to a higher rank.
    """
    for name, (want, what) in expected.items():
        if name not in match.captures:
            continue
        found = np.asarray(match.value(name))
        if found.size != 1 or (found.ndim > 1 and not any_rank):
            return f"{what} is {match[name].name}, a constant of shape {found.shape}, not a scalar"
        value = float(found.reshape(()))
        if not math.isclose(value, want, rel_tol=rtol, abs_tol=abs_tol):
            return f"{what} is {value!r} ({match[name].name}), expected {want!r}"
    return None
