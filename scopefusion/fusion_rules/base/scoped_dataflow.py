"""The base of the rules whose fusions are dataflow matches and whose scope features find candidate
regions (the normalization rules): :class:`ScopedDataflowPass`.
"""

from __future__ import annotations

import abc
from typing import Any, Sequence

from scopefusion.records import Record
from scopefusion.scope import (
    DataflowPattern,
    FusionScopesResult,
    Match,
    PatternCheck,
    Refused,
    Scope,
    ScopeBasePass,
    ScopeGraph,
    ScopesResult,
    claimed_nodes,
    map_ports,
    reads_op_type_counts,
)

__all__ = ["ScopedDataflowPass"]


class _Judged(Record):
    """What :meth:`ScopedDataflowPass.judge` made of one match: ``attrs`` to fuse it, the ``reason`` it
    refused it, or neither (the match belongs to another rule and is left alone)."""

    _fields = ("attrs", "reason")

    def __init__(self, attrs: dict[str, Any] | None = None, reason: str | None = None) -> None:
        self.attrs = attrs
        self.reason = reason

    @property
    def skips(self) -> bool:
        return self.attrs is None and self.reason is None

    @classmethod
    def of(cls, rule: ScopedDataflowPass, graph: ScopeGraph, match: Match) -> _Judged:
        try:
            return cls(attrs=rule.judge(graph, match))
        except Refused as refused:
            return cls(reason=refused.reason)


class ScopedDataflowPass(ScopeBasePass, abc.ABC):
    """A rule whose fusions are dataflow matches and whose scope features find candidate regions: a match
    in a region is named after it, a region without a match is refused with the nearest miss.

    A subclass sets ``name``, ``fused_type``, ``what`` (``"a layer norm"``, for reasons), ``patterns``
    (dataflow patterns tried in order, inputs = fused input ports, first output = fused output 0) and
    implements :meth:`judge`; it may override :meth:`define_patterns`, :meth:`region` (the scope searched
    for a matched scope: default itself) and :meth:`records_refusal` (whether a candidate region with no
    dataflow match is reported: default yes).

    Each match becomes one result: fused (``judge`` returns its attributes), refused with the reason
    (``judge`` raises :class:`~scopefusion.scope.Refused`), or left alone (``judge`` returns None). A region where no pattern matches is
    refused with the nearest miss of the pattern that came closest.
    """

    # A graph whose names carry no scopes is still searched (its dataflow at the root).
    select_without_matches = True
    general = True
    fused_type = ""
    what = ""
    patterns: tuple[DataflowPattern, ...] = ()

    # ------------------------------------------------------------------ what a rule overrides
    @abc.abstractmethod
    def judge(self, graph: ScopeGraph, match: Match) -> dict[str, Any] | None:
        """The fused op's attributes when ``match`` is this rule's computation; None when it is another
        rule's to judge.

        Raises:
            Refused: ``match`` looks like this rule's computation but is not; the reason, one sentence.
        """

    def region(self, graph: ScopeGraph, scope: Scope) -> Scope:
        return scope

    def records_refusal(self, region: Scope) -> bool:
        return True

    def required_ops(self, pattern: DataflowPattern) -> tuple[str, ...]:
        """Op types that must all be present where ``pattern`` is searched (a cheap filter; default none)."""
        return ()

    @reads_op_type_counts
    def selects_nothing(self, graph: ScopeGraph) -> bool:
        """With no matched scope there is no candidate region, so the selection is the whole graph's matches:
        none when no pattern can match there (the test :meth:`_matches_in_graph` starts with)."""
        return self._selects_as(ScopedDataflowPass) and not self._usable_patterns(graph)

    # ------------------------------------------------------------------ candidates
    def _required_by_pattern(self) -> tuple[tuple[DataflowPattern, frozenset[str]], ...]:
        """``(pattern, required_ops(pattern))`` for each pattern, asked once per pass and tuple of patterns."""
        cached = self.__dict__.get("_required_cache")
        if cached is None or cached[0] is not self.patterns:
            pairs = tuple((pattern, frozenset(self.required_ops(pattern))) for pattern in self.patterns)
            cached = self.__dict__["_required_cache"] = (self.patterns, pairs)
        return cached[1]

    def _usable_patterns(self, graph: ScopeGraph) -> tuple[DataflowPattern, ...]:
        """The patterns, in order, whose required ops are all in ``graph`` and that may match there
        (:meth:`~scopefusion.scope.DataflowPattern.may_match`). Both tests read only the set of op types the
        graph holds, so the answer is kept per set of op types (every graph of one model has the same) rather
        than each pattern tested again for each graph."""
        present = graph.present_type_set()
        pairs = self._required_by_pattern()
        # NOTE: a pure cache: (the pairs it was made for, set of op types -> usable patterns)
        cached = self.__dict__.get("_usable_cache")
        if cached is None or cached[0] is not pairs:
            cached = self.__dict__["_usable_cache"] = (pairs, {})
        by_types: dict[frozenset[str], tuple[DataflowPattern, ...]] = cached[1]
        usable = by_types.get(present)
        if usable is None:
            usable = by_types[present] = tuple(p for p, needed in pairs if present >= needed and p.may_match(graph))
        return usable

    def _matches_in_graph(self, graph: ScopeGraph) -> list[Match]:
        """The matches of :meth:`_search` over the whole graph without near misses. That search depends only
        on the graph and on which patterns can match in it, in order, so rules whose patterns are the same
        there (LayerNormFusion's and InstanceNormFusion's) share one answer, kept in the graph's memo (the
        list is shared: do not modify it)."""
        usable = self._usable_patterns(graph)
        key = ("scoped dataflow matches", usable)
        found = graph.memo.get(key)
        if found is None:
            found = graph.memo[key] = self._search_patterns(graph, None, usable, near_miss=False)[0]
        return found

    def _search(self, graph: ScopeGraph, within: Scope | None, near_miss: bool = True) -> tuple[list[Match], str]:
        root = within is None or within.is_root
        present = graph.present_types
        usable = []
        for pattern, needed in self._required_by_pattern():
            if root:
                if not present >= needed:
                    continue
            elif any(within.op_count(t) < 0 for t in needed):  # type: ignore[union-attr]
                continue
            if root and not pattern.may_match(graph):
                continue
            usable.append(pattern)
        return self._search_patterns(graph, within, usable, near_miss)

    @staticmethod
    def _search_patterns(
        graph: ScopeGraph, within: Scope | None, patterns: Sequence[DataflowPattern], near_miss: bool
    ) -> tuple[list[Match], str]:
        """The matches of ``patterns`` in order (none sharing a node with an earlier one) and the nearest miss."""
        found: list[Match] = []
        taken: set[str] = set()
        best = None
        for pattern in patterns:
            # Without near misses, an anchor an earlier pattern's match holds is not searched for its own
            # match (it could not be kept), only for the later matches it would hide.
            matches = pattern.find(graph, within=within, near_miss=near_miss, taken=taken if not near_miss else frozenset())
            for match in matches:
                names = set(match.node_names)
                if names & taken:
                    continue
                taken |= names
                found.append(match)
            miss = matches.near_miss
            if miss is not None and (best is None or miss.depth > best[1].depth):
                best = (pattern.name, miss)
        where = "" if best is None else f"nearest miss of pattern {best[0]!r} {best[1]}"
        return found, where

    def last_match_scopes_and_ops(self, graph: ScopeGraph, matches: Sequence[Scope]) -> list[ScopesResult]:
        regions: dict[str, Scope] = {}
        for scope in matches:
            region = self.region(graph, scope)
            if not region.is_root:
                regions.setdefault(region.name, region)
        # One search of the whole graph; each match answers for the candidate region holding one of its
        # nodes (tf.math.l2_normalize names its last op beside its scope, so "any node" rather than "all").
        found = self._matches_in_graph(graph)
        judged: list[tuple[Match, _Judged, Scope | None]] = []
        answered: dict[str, int] = {}
        rank = {name: i for i, name in enumerate(regions)}
        listed = list(regions.values())
        first_rank: dict[str, int | None] = {}
        for match in found:
            verdict = _Judged.of(self, graph, match)
            home = _home(graph, match, rank, listed, first_rank)
            if home is not None:  # a region answered only by other rules' matches is not refused either
                answered[home.name] = answered.get(home.name, 0) + (0 if verdict.skips else 1)
            judged.append((match, verdict, home))
        results: list[ScopesResult] = []
        for match, verdict, home in judged:
            if verdict.skips:
                continue
            name = home.name.rstrip("/") if home is not None and answered[home.name] == 1 else None
            results.append(self._candidate(graph, match, verdict, name))
        for region in regions.values():
            if region.name in answered or not self.records_refusal(region):
                continue
            _, miss = self._search(graph, region)
            reason = f"{region.name} does not compute {self.what}: {miss or 'no candidate node'}"
            results.append(ScopesResult(scopes=[region], refusal=reason))
        return results

    def _candidate(self, graph: ScopeGraph, match: Match, verdict: _Judged, name: str | None) -> ScopesResult:
        nodes = claimed_nodes(graph, match)
        output = match.outputs[0][0]
        if name is None or (graph.get(name) is not None and name not in nodes):
            name = output
        captures = {"match": match, "verdict": verdict, "name": name}
        return ScopesResult.of_node_names(nodes, captures)

    def generate_fusion_result(self, scopes: Sequence[Scope], result: FusionScopesResult, graph: ScopeGraph) -> None:
        # Handed to the rule, not kept with the fusion: the match and its verdict would stay alive as long as
        # the converted model.
        captures = result.captures
        match: Match = captures.pop("match")
        verdict: _Judged = captures.pop("verdict")
        result.name = captures.pop("name")
        if verdict.reason is not None:
            result.invalidate(f"{match.outputs[0][0]} is not {self.what}: {verdict.reason}")
            return
        result.op_type = self.fused_type
        result.description = f"{self.pass_name}: pattern {match.pattern.name}"
        result.attrs.update(verdict.attrs or {})
        map_ports(result, graph, match)

    # ------------------------------------------------------------------ the framework
    def explain(self, scope: Scope, graph: ScopeGraph | None = None) -> list[PatternCheck]:
        """The scope features, then what decides: the dataflow searched in ``scope`` (the whole graph for
        the root) and what :meth:`judge` makes of each match, or the nearest miss."""
        checks = self._feature_checks(scope, graph)
        where = f"dataflow pattern {self.what} (in {len(self.patterns)} forms)"
        if graph is None:
            return checks
        found, miss = self._search(graph, None if scope.is_root else scope)
        label = scope.name or "the graph"
        if not found:
            if miss:
                return checks + [PatternCheck(where, f"no match in {label}; {miss}")]
            ends = sorted({t for p in self.patterns for t in p.anchor_types})
            present = {n.op_type for n in scope.all_nodes}
            absent = sorted({t for p in self.patterns for t in self.required_ops(p)} - present)
            why = f"no {'|'.join(ends)} node in {label} (its patterns end at those)" if not present & set(ends) else (
                f"no match in {label}: each form needs an op that is not there ({'|'.join(absent)} absent)")
            return checks + [PatternCheck(where, why)]
        reasons = []
        for match in found:
            verdict = _Judged.of(self, graph, match)
            if verdict.attrs is not None:
                return checks + [PatternCheck(where, None)]
            at = match.outputs[0][0] if match.outputs else match.node_names[-1]
            reasons.append(verdict.reason or f"the dataflow at {at} is not {self.what} (another rule's computation)")
        return checks + [PatternCheck(where, f"{len(found)} match(es) in {label}, none {self.what}: {reasons[0]}")]

    def _feature_checks(self, scope: Scope, graph: ScopeGraph | None = None) -> list[PatternCheck]:
        """The scope patterns on ``scope``; when none matches, also on its direct children, since a
        candidate region is often the parent of the matched scope (``LayerNorm/`` of ``LayerNorm/moments/``)."""
        checks = super().explain(scope, graph)
        if any(c.matched for c in checks):
            return checks
        for child in scope.children:
            if graph is None or self.region(graph, child) is not scope:
                continue
            for check in super().explain(child, graph):
                if check.matched:
                    checks.append(PatternCheck(f"sub-scope {child.name}: {check.where}", None))
        return checks



def _home(
    graph: ScopeGraph, match: Match, rank: dict[str, int], listed: list[Scope], first_rank: dict[str, int | None]
) -> Scope | None:
    """The first candidate region (``rank``: region name -> place in ``listed``) holding one of the
    match's nodes; each node's scope and its ancestors are looked up, rather than every region tested
    against every node. ``first_rank`` keeps, by the text of a node name up to its last ``/``, the first
    rank among the node's scope and its ancestors, shared by the matches of one search: the scope holding a
    node depends on that text alone (:meth:`~scopefusion.scope.ScopeTree.scope_of`), so a node whose
    prefix was seen needs no look-up of its scope."""
    if not rank:
        return None
    scope_of = graph.tree.scope_of
    first: int | None = None
    previous: str | None = None  # the last prefix looked at: a match's nodes mostly share one
    for node in match.nodes:
        name = node.name
        prefix = name[: name.rfind("/") + 1] if name[-1:] != "/" else None  # a name ending in "/": no key
        if prefix is not None:
            if prefix == previous:
                continue  # the rank of the node before, which ``first`` holds already
            previous = prefix
        here = first_rank.get(prefix, _UNSEEN) if prefix is not None else _UNSEEN
        if here is _UNSEEN:
            here = None
            scope: Scope | None = scope_of(name)
            while scope is not None:
                i = rank.get(scope.name)
                if i is not None and (here is None or i < here):
                    here = i
                scope = scope.parent
            if prefix is not None:
                first_rank[prefix] = here
        if here is not None and (first is None or here < first):
            first = here
    return None if first is None else listed[first]


_UNSEEN: Any = object()  # no rank kept yet for a prefix
