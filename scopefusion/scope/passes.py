"""``ScopeBasePass`` (CANN's scope fusion pass) and the lighter function forms of a rule.

A pass runs in three steps, as in CANN:

1. ``define_patterns()`` -> pattern sets, matched against the scope tree (:mod:`.matching`);
2. ``last_match_scopes_and_ops(graph, matches)`` -> :class:`ScopesResult` candidates (default: one per
   matched scope); an empty answer clears the sub_types this pass set, as CANN does on failure;
3. ``generate_fusion_result(scopes, result, graph)`` fills one :class:`FusionScopesResult` per candidate;
   ``result.invalidate(reason)`` declines it with a reason.

A pass in a graph that lacks the op types it looks for skips steps 1 and 2: matching when no pattern of a
set's first batch has its required op types present, the selection when ``selects_nothing(graph)`` says
that, with no matched scope, it would select nothing (the rule bases answer from the op-type index; a rule
of its own need not answer: the default runs the selection).

``run`` does those steps and returns a :class:`PassOutcome`; it never touches the fusion plan, so a pass
that raises leaves nothing behind. The :class:`~.manager.PassManager` validates the results.

Function forms::

    @scope_rule(ScopePattern("gelu", NodeOpTypeFeature("Erf", 1)), name="MyGelu", type="Gelu")
    def my_gelu(scope, result, graph):   # one call per matched scope; return a reason to decline
        result.insert_inputs("mul", [0, FUSION_DISABLE_INDEX])

    @dataflow_rule(DataflowPattern(gelu_erf), name="MyGeluDF", type="Gelu")
    def my_gelu_df(match, result, graph):  # ports are mapped from the pattern's inputs and outputs
        result.attrs["approximate"] = "none"
"""

from __future__ import annotations

from typing import AbstractSet, Any, Callable, Iterable, Sequence, TypeVar

from ..errors import FusionError
from ..parser.source_graph import SourceNode
from ..records import Record
from .accepted import PatternCheck
from .dataflow import DataflowPattern, Match
from .features import ScopePattern
from .graph import ScopeGraph
from .matching import match_pattern_sets, normalize_patterns
from .pattern_values import Tensor
from .result import FUSION_DISABLE_INDEX, FusionScopesResult, ScopesResult
from .tree import Scope

__all__ = [
    "claimed_nodes",
    "dataflow_rule",
    "DataflowRulePass",
    "FunctionScopePass",
    "PassOutcome",
    "scope_rule",
    "reads_op_type_counts",
    "ScopeBasePass",
]


class PassOutcome(Record):
    """What one pass produced, before validation."""

    _fields = ("matched", "results", "notes")

    def __init__(
        self,
        matched: list[Scope] | None = None,
        results: list[FusionScopesResult] | None = None,
        notes: list[str] | None = None,
    ) -> None:
        self.matched = [] if matched is None else matched
        self.results = [] if results is None else results
        self.notes = [] if notes is None else notes


_IDLE_CACHE_SIZE = 64  # op-type counts kept per pass by ScopeBasePass.idle_in (a bound for long-lived rules)

_SelectsNothing = TypeVar("_SelectsNothing", bound=Callable[..., bool])


def reads_op_type_counts(selects_nothing: _SelectsNothing) -> _SelectsNothing:
    """Marks a :meth:`ScopeBasePass.selects_nothing` whose answer follows from the graph's op types and node
    counts per type alone (``present_types``, the sizes of ``nodes_by_type``), so that
    :meth:`ScopeBasePass.idle_in` may keep its answer per :meth:`~.ScopeGraph.op_type_counts`."""
    selects_nothing.reads_op_type_counts = True  # type: ignore[attr-defined]
    return selects_nothing


class ScopeBasePass:
    """Base class of a scope fusion pass; see the module docstring.

    Class attributes:
        name: the pass's registered name (default: the class name).
        general: whether the pass is on by default when registered without an explicit flag.
        select_without_matches: when True, ``last_match_scopes_and_ops`` runs (with no matched scopes)
            even if no scope pattern matched, so a rule that narrows by scope names can still find its
            dataflow in a graph whose names carry no scopes. CANN stops there (False, the default).
    """

    name: str = ""
    general: bool = False
    select_without_matches: bool = False
    _notes: list[str] | None = None  # the running outcome's notes, see note()

    @property
    def pass_name(self) -> str:
        return self.name or type(self).__name__

    # ------------------------------------------------------------------ what a rule overrides
    def define_patterns(self) -> Any:
        """Pattern sets > batches > alternative ScopePatterns (a bare pattern stands for a list)."""
        return []

    def last_match_scopes_and_ops(self, graph: ScopeGraph, matches: Sequence[Scope]) -> Iterable[ScopesResult]:
        """Chooses what to fuse among the final matches; default: each matched scope on its own."""
        return [ScopesResult(scopes=[scope]) for scope in matches]

    def generate_fusion_result(self, scopes: Sequence[Scope], result: FusionScopesResult, graph: ScopeGraph) -> None:
        """Sets the result's name, type, index maps (and inner nodes); the default declines."""
        result.invalidate(f"pass {self.pass_name} does not implement generate_fusion_result")

    @reads_op_type_counts
    def selects_nothing(self, graph: ScopeGraph) -> bool:
        """True when ``last_match_scopes_and_ops(graph, [])`` would select nothing and note nothing, so that
        :meth:`run` can skip it when no scope can match (a graph without the op types the pass needs). It must
        be cheap (a look at ``graph.present_types`` or :meth:`~.ScopeGraph.nodes_by_type`) and exact; the
        default, False, always runs the selection. An override that reads nothing but which op types the
        graph has and how many nodes of each may say so with :func:`reads_op_type_counts`."""
        return False

    def idle_in(self, graph: ScopeGraph) -> bool:
        """True when :meth:`run` on ``graph`` would return an empty outcome before any matching or selection:
        the first batches' required op types are absent (or there are no pattern sets) and, as
        :meth:`selects_nothing` says, the selection without matched scopes would select nothing.

        When the :meth:`selects_nothing` in use reads only the op types and their node counts (marked with
        :func:`reads_op_type_counts`, as the base's and the builtin rules' are), the answer is kept per
        :meth:`~.ScopeGraph.op_type_counts` value while ``define_patterns()`` gives the same immutable value (a
        pattern or nested tuples of them), so a pass that cannot act in a graph costs one look-up there;
        otherwise it is worked out each time."""
        defined = self.define_patterns()
        cached: tuple[Any, dict[Any, bool]] | None = self.__dict__.get("_idle_cache")
        if cached is None or cached[0] is not defined or len(cached[1]) >= _IDLE_CACHE_SIZE:
            # Kept only for patterns that cannot change (as pattern_sets keeps its sets).
            if not (_immutable_patterns(defined) and getattr(type(self).selects_nothing, "reads_op_type_counts", False)):
                return self._idle_given(self.pattern_sets(), graph)
            cached = self.__dict__["_idle_cache"] = (defined, {})
        answers = cached[1]
        key = (graph.op_type_counts(), self.select_without_matches)
        idle = answers.get(key)
        if idle is None:
            idle = answers[key] = self._idle_given(self.pattern_sets(), graph)
        return idle

    def _idle_given(self, sets: list[list[list[ScopePattern]]], graph: ScopeGraph) -> bool:
        """:meth:`idle_in` worked out: the early return of :meth:`run`, with no scope matched."""
        if sets and (not _first_batches_absent(sets, graph.present_types)):
            return False
        return (bool(sets) and not self.select_without_matches) or self.selects_nothing(graph)

    def _selects_as(self, owner: type[ScopeBasePass]) -> bool:
        """True when this pass selects with ``owner``'s ``last_match_scopes_and_ops``: what ``owner``'s
        :meth:`selects_nothing` knows of that selection holds for this pass (not for a subclass that selects
        its own way)."""
        return type(self).last_match_scopes_and_ops is owner.last_match_scopes_and_ops

    # ------------------------------------------------------------------ the framework
    def pattern_sets(self) -> list[list[list[ScopePattern]]]:
        """``define_patterns()`` as pattern sets of batches (:func:`~.matching.normalize_patterns`). When it
        gives the very same immutable value as last time (a pattern or nested tuples of them, as a rule
        that builds its patterns once does), the sets made last time are given again."""
        defined = self.define_patterns()
        cached: tuple[Any, list[list[list[ScopePattern]]]] | None = self.__dict__.get("_pattern_sets")
        if cached is not None and cached[0] is defined:
            return cached[1]
        sets = normalize_patterns(defined, self.pass_name)
        if _immutable_patterns(defined):
            self.__dict__["_pattern_sets"] = (defined, sets)
        return sets

    def run(self, graph: ScopeGraph) -> PassOutcome:
        """Matches, selects and generates; see the module docstring. Exceptions propagate, with every
        sub_type this pass set cleared first."""
        outcome = PassOutcome()
        self._notes = outcome.notes
        try:
            sets = self.pattern_sets()
            if sets and not _first_batches_absent(sets, graph.present_types):
                outcome.matched = match_pattern_sets(graph.tree, sets)
            if not outcome.matched and ((sets and not self.select_without_matches) or self.selects_nothing(graph)):
                return outcome
            selected = list(self.last_match_scopes_and_ops(graph, outcome.matched) or [])
            if not selected:
                if outcome.matched:
                    outcome.notes.append("last_match_scopes_and_ops selected nothing")
                _rollback(outcome.matched)
                return outcome
            for candidate in selected:
                if not isinstance(candidate, ScopesResult):
                    raise FusionError(
                        f"pass {self.pass_name}: last_match_scopes_and_ops returned {candidate!r}; return ScopesResult objects"
                    )
                result = FusionScopesResult(
                    self._default_name(candidate),
                    scopes=candidate.scopes,
                    nodes=candidate.nodes,
                    captures=candidate.captures,
                )
                result.pass_name = self.pass_name
                if candidate.refusal is not None:
                    result.invalidate(candidate.refusal)
                else:
                    self.generate_fusion_result(list(candidate.scopes), result, graph)
                outcome.results.append(result)
        except BaseException:
            _rollback(outcome.matched)
            raise
        return outcome

    def note(self, text: str) -> None:
        """Adds a line to this pass's report for the current run (e.g. why nothing was selected)."""
        if self._notes is not None:
            self._notes.append(text)

    @staticmethod
    def _default_name(candidate: ScopesResult) -> str:
        if candidate.name:
            return candidate.name
        if candidate.scopes:
            return candidate.scopes[0].name.rstrip("/")
        return candidate.nodes[-1] if candidate.nodes else ""

    def explain(self, scope: Scope, graph: ScopeGraph | None = None) -> list[PatternCheck]:
        """Each pattern of each batch of each set tried on ``scope``: a match or the first failing feature.

        For a multi-batch set, a batch's patterns are judged on the scope as it stands now (the
        sub_types the last run left).
        """
        checks = []
        for i, batches in enumerate(self.pattern_sets()):
            for j, batch in enumerate(batches):
                for pattern in batch:
                    where = f"set {i} batch {j} pattern {pattern.sub_type!r}"
                    checks.append(PatternCheck(where, pattern.check(scope)))
        return checks

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.pass_name!r}>"


def _immutable_patterns(defined: Any) -> bool:
    """True for a :class:`ScopePattern` or nested tuples of them (a value whose nesting cannot change)."""
    if isinstance(defined, ScopePattern):
        return True
    return isinstance(defined, tuple) and all(_immutable_patterns(item) for item in defined)


def _first_batches_absent(sets: Sequence[Sequence[Sequence[ScopePattern]]], present: AbstractSet[str]) -> bool:
    """True when no pattern of any set's first batch has all its required op types in ``present`` (the op
    types of the graph): :func:`~.matching.match_pattern_sets` then skips each of those patterns on sight,
    so every set stops at its first batch having tagged no scope, and nothing matches."""
    for batches in sets:
        for pattern in batches[0]:
            required = pattern.required_op_types
            if not required or present >= required:
                return False
    return True


def _rollback(scopes: Iterable[Scope]) -> None:
    for scope in scopes:
        scope.sub_type = ""
        for sub in scope.descendants():
            sub.sub_type = ""


class FunctionScopePass(ScopeBasePass):
    """A pass made by :func:`scope_rule`: one function call per matched scope."""

    def __init__(self, fn: Callable[..., str | None], patterns: Any, name: str, fused_type: str, general: bool) -> None:
        self.fn = fn
        self.patterns = patterns
        self.name = name
        self.fused_type = fused_type
        self.general = general
        normalize_patterns(patterns, name)

    def define_patterns(self) -> Any:
        return self.patterns

    def generate_fusion_result(self, scopes: Sequence[Scope], result: FusionScopesResult, graph: ScopeGraph) -> None:
        result.op_type = self.fused_type
        reason = self.fn(scopes[0], result, graph)
        if reason is not None:
            result.invalidate(str(reason))


def scope_rule(patterns: Any, *, name: str | None = None, type: str = "", general: bool = False) -> Callable[[Callable[..., str | None]], FunctionScopePass]:
    """Decorator: ``fn(scope, result, graph) -> reason | None`` becomes a pass matching ``patterns``.

    ``type`` presets ``result.type``; the function may change it. The pass's name defaults to the
    function's name.
    """

    def wrap(fn: Callable[..., str | None]) -> FunctionScopePass:
        return FunctionScopePass(fn, patterns, name or fn.__name__, type, general)

    return wrap


class DataflowRulePass(ScopeBasePass):
    """A pass made by :func:`dataflow_rule`: every match of a dataflow pattern is one fusion.

    Without ``within`` the pattern is searched over the whole graph (anchors from the op-type index);
    with ``within`` (scope patterns) it is searched inside each matched scope only. The fused input
    ports are the pattern's variables in parameter order, the output ports its outputs in order; the
    result is named after the node of the first output, and claims the matched op nodes and the
    constants (with their ``Identity`` reads) that nothing else reads.
    """

    def __init__(
        self,
        fn: Callable[..., str | None] | None,
        pattern: DataflowPattern,
        name: str,
        fused_type: str,
        general: bool,
        within: Any = None,
    ) -> None:
        if not isinstance(pattern, DataflowPattern):
            raise FusionError(f"dataflow rule {name}: expected a DataflowPattern, got {pattern!r}")
        self.fn = fn
        self.pattern = pattern
        self.name = name
        self.fused_type = fused_type
        self.general = general
        self.within = within
        if within is not None:
            normalize_patterns(within, name)

    def define_patterns(self) -> Any:
        return self.within if self.within is not None else ()

    @reads_op_type_counts
    def selects_nothing(self, graph: ScopeGraph) -> bool:
        """With no matched scope there is no search under ``within``; without ``within`` the one search over
        the graph starts from the nodes of the pattern's anchor types: none when the graph has no such node."""
        if not self._selects_as(DataflowRulePass):
            return False
        present = graph.present_types
        return self.within is not None or not any(t in present for t in self.pattern.anchor_types)

    def last_match_scopes_and_ops(self, graph: ScopeGraph, matches: Sequence[Scope]) -> list[ScopesResult]:
        found: list[Match] = []
        searches = [self.pattern.find(graph)] if self.within is None else [self.pattern.find(graph, within=s) for s in matches]
        used: set[int] = set()  # indexes of the nodes of the matches kept
        for search in searches:
            for match in search:  # nested scope matches find one subgraph twice: keep the first
                spots = match.node_positions(graph)
                if used.isdisjoint(spots):
                    used.update(spots)
                    found.append(match)
        if not found:
            misses = [s.near_miss for s in searches if s.near_miss is not None]
            if misses:
                best = max(misses, key=lambda m: m.depth)
                self.note(f"dataflow pattern {self.pattern.name!r} did not match; nearest miss {best}")
        return [ScopesResult.of_node_names(claimed_nodes(graph, m), {"match": m}) for m in found]

    def generate_fusion_result(self, scopes: Sequence[Scope], result: FusionScopesResult, graph: ScopeGraph) -> None:
        match: Match = result.captures.pop("match")  # handed to the rule, not kept with the fusion
        result.op_type = self.fused_type
        result.name = match.outputs[0][0]
        map_ports(result, graph, match)
        if self.fn is not None:
            reason = self.fn(match, result, graph)
            if reason is not None:
                result.invalidate(str(reason))

    def explain(self, scope: Scope, graph: ScopeGraph | None = None) -> list[PatternCheck]:
        checks = super().explain(scope, graph) if self.within is not None else []
        if self.within is not None and not any(c.matched for c in checks):
            return checks
        where = f"dataflow pattern {self.pattern.name!r}"
        if graph is None:
            return checks + [PatternCheck(where, "not tried without a graph")]
        found = self.pattern.find(graph, within=scope)
        if found:
            checks.append(PatternCheck(where, None))
        elif found.tried == 0:
            checks.append(PatternCheck(where, f"no {'|'.join(self.pattern.anchor_types)} node in {scope.name}"))
        else:
            checks.append(PatternCheck(where, f"no match in {scope.name}; nearest miss {found.near_miss}"))
        return checks


def claimed_nodes(graph: ScopeGraph, *matches: Match) -> list[str]:
    """What a fusion of ``matches`` claims: their op nodes, plus each constant chain (a constant and its
    Identity reads) whose every consumer is claimed, so no constant is left feeding nothing."""
    claimed: dict[str, None] = {}
    for match in matches:
        claimed.update(dict.fromkeys(match.node_names))
    readers = graph.source.out_edges  # node -> its consumers -> slots
    for match in matches:
        for chain in match.constants:
            for node in chain:
                if node.name in claimed:
                    continue
                if claimed.keys() >= readers[node.name].keys():  # every consumer is claimed
                    claimed[node.name] = None
                else:
                    break
    return list(claimed)


def map_ports(result: FusionScopesResult, graph: ScopeGraph, match: Match) -> None:
    """Maps a dataflow match's variables to fused input ports and its outputs to output ports.

    Port ``k`` of the inputs reads the tensor of the ``k``-th pattern variable, mapped on the first
    matched node (graph order) that reads it; the other readers see the same tensor.
    """
    wanted = set(match.inputs)
    if len(wanted) == len(match.inputs):
        in_maps = _input_maps_of_distinct(match, wanted)
    else:
        in_maps = _input_maps(match, wanted)
    _add_made_maps(in_maps, result._inputs, result.insert_inputs)
    out_maps: dict[str, list[int]] = {}
    for port, (node_name, index) in enumerate(match.outputs):
        index_map = out_maps.setdefault(node_name, [])
        index_map.extend([FUSION_DISABLE_INDEX] * (index + 1 - len(index_map)))
        index_map[index] = port
    _add_made_maps(out_maps, result._outputs, result.insert_outputs)


def _input_maps(match: Match, wanted: AbstractSet[Tensor]) -> dict[str, list[int]]:
    """:func:`map_ports`' input index maps: port ``k`` on the first reader (graph order, then slot order) of the
    ``k``-th input tensor whose slot no earlier port took; ``wanted``: the input tensors."""
    readers: dict[Tensor, list[tuple[SourceNode, int]]] = {}
    for node in match.nodes:
        for slot, seen in enumerate(node.inputs):
            if seen in wanted:
                readers.setdefault(seen, []).append((node, slot))
    in_maps: dict[str, list[int]] = {}
    for port, tensor in enumerate(match.inputs):
        for node, slot in readers.get(tensor, ()):
            index_map = in_maps.get(node.name)
            if index_map is None:
                index_map = in_maps[node.name] = [FUSION_DISABLE_INDEX] * len(node.inputs)
            if index_map[slot] == FUSION_DISABLE_INDEX:
                index_map[slot] = port
                break
    return in_maps


def _input_maps_of_distinct(match: Match, wanted: AbstractSet[Tensor]) -> dict[str, list[int]]:
    """:func:`_input_maps` of a match whose input tensors are distinct: each port takes the first reader of its
    own tensor (a slot reads one tensor, so no other port took it), found in one pass without listing every
    reader; the maps are made in the same order."""
    first: dict[Tensor, tuple[SourceNode, int]] = {}
    for node in match.nodes:
        for slot, seen in enumerate(node.inputs):
            if seen in wanted and seen not in first:
                first[seen] = (node, slot)
    in_maps: dict[str, list[int]] = {}
    for port, tensor in enumerate(match.inputs):
        reader = first.get(tensor)
        if reader is None:
            continue
        node, slot = reader
        index_map = in_maps.get(node.name)
        if index_map is None:
            index_map = in_maps[node.name] = [FUSION_DISABLE_INDEX] * len(node.inputs)
        index_map[slot] = port
    return in_maps


def _add_made_maps(
    made: dict[str, list[int]], into: dict[str, list[int]], insert: Callable[[str, list[int]], Any]
) -> None:
    """Adds the index maps :func:`map_ports` made (graph node names; ports >= 0 and FUSION_DISABLE_INDEX in
    fresh lists): what ``insert_inputs`` / ``insert_outputs`` check holds by construction, except for a node
    mapped already, which goes through them to be reported."""
    for node_name, index_map in made.items():
        if node_name and node_name not in into:
            into[node_name] = index_map
        else:
            insert(node_name, index_map)


def dataflow_rule(
    pattern: DataflowPattern,
    *,
    name: str | None = None,
    type: str = "",
    general: bool = False,
    within: Any = None,
) -> Callable[[Callable[..., str | None]], DataflowRulePass]:
    """Decorator: ``fn(match, result, graph) -> reason | None`` becomes a pass fusing every match of
    ``pattern`` (inside scopes matched by ``within`` if given); see :class:`DataflowRulePass`."""

    def wrap(fn: Callable[..., str | None]) -> DataflowRulePass:
        return DataflowRulePass(fn, pattern, name or fn.__name__, type, general, within)

    return wrap
