"""Dataflow patterns: confirm what a scope computes, or find a subgraph where names carry no scopes.

A pattern is written as a function of an op builder and its input variables, in the style of
onnxscript's rewriter::

    def gelu_erf(op, x):
        return op.Mul(op.Mul(x, 0.5), op.AddV2(op.Erf(op.RealDiv(x, 1.4142135)), 1.0))

    GELU = DataflowPattern(gelu_erf)

* The pattern is a DAG: a variable (``x``) or an op value used twice must bind to one tensor / node.
* Literals (``0.5``) and ``op.const(name, value=, shape=, dtype=, check=)`` match constants (also
  through ``Identity`` reads of a constant, as frozen TF graphs have).
* ``op.Add`` etc. name an op type; ``op.op(("Add", "AddV2"), a, b)`` takes alternatives; keyword
  arguments ``_name`` (capture name), ``_attrs`` (attribute values or predicates), ``_outputs`` (number
  of outputs, returns a tuple), ``_commute`` and ``_check`` (a function of the node returning a reason
  or None) refine a node.
* Operands of commutative ops (``Add``, ``Mul``, ... see :data:`COMMUTATIVE_OPS`) match in either order.
  Operands are assigned most specific first and an assignment is tried only if the graph input can
  match it (right op type, constant-ness), so commutative nodes do not multiply the search.
* Candidates come from the :class:`ScopeGraph`'s op-type index: only nodes of the output op's type are
  tried as anchors.

Every failed attempt has a reason; the deepest failure (most pattern nodes bound) is kept as the near
miss, so ``Matches.near_miss`` answers "why did it not match here?".
"""

from __future__ import annotations

import inspect
import weakref
from dataclasses import dataclass, field
from inspect import CO_VARARGS, CO_VARKEYWORDS
from types import FunctionType
from typing import AbstractSet, Any, Callable, Iterable, Mapping, Sequence

import numpy as np

from ..errors import FusionError
from ..parser.source_graph import SourceNode
from ._search import SearchRun, SearchState, accept_state
from .graph import ScopeGraph
from .pattern_values import (
    COMMUTATIVE_OPS,
    ConstPattern,
    OpBuilder,
    OpOutput,
    OpPattern,
    Tensor,
    Var,
    structure_key,
)
from .tree import Scope

__all__ = [
    "COMMUTATIVE_OPS",
    "ConstPattern",
    "DataflowPattern",
    "Match",
    "Matches",
    "NearMiss",
    "OpBuilder",
    "OpPattern",
    "Var",
]

class NearMiss:
    """The deepest failed attempt: the anchor node tried, how many pattern nodes (ops, constants,
    variables) were bound when it failed, and why. Compares, hashes and prints as a frozen dataclass of
    those three fields does.

    A search makes one per failed anchor, and most are never read (a search for matches only, a nearer miss
    elsewhere): its reason may be given unwritten, as a formatter and the values it writes the reason from
    (see :class:`~._search.SearchRun`), and is then written on first read."""

    __slots__ = ("anchor", "depth", "_reason")

    def __init__(self, anchor: str, depth: int, reason: str | tuple[Any, ...]) -> None:
        self.anchor = anchor
        self.depth = depth
        self._reason = reason

    @property
    def reason(self) -> str:
        why = self._reason
        if not isinstance(why, str):
            why = self._reason = str(why[0](*why[1:])) or "no match"
        return why

    def _fields(self) -> tuple[str, int, str]:
        return (self.anchor, self.depth, self.reason)

    def __eq__(self, other: object) -> bool:
        if other.__class__ is self.__class__:
            return self._fields() == other._fields()
        return NotImplemented

    def __hash__(self) -> int:
        return hash(self._fields())

    def __repr__(self) -> str:
        return f"NearMiss(anchor={self.anchor!r}, depth={self.depth!r}, reason={self.reason!r})"

    def __str__(self) -> str:
        return f"at {self.anchor} ({self.depth} pattern node(s) matched): {self.reason}"


@dataclass
class Match:
    """One match: op nodes bound (graph order), captures by name, and the pattern's inputs and outputs.

    ``match[name]`` is the :class:`SourceNode` of a named op or constant, or the ``(producer, index)``
    tensor of a variable; ``match.value(name)`` is a constant's array.
    """

    pattern: DataflowPattern
    nodes: list[SourceNode]
    captures: dict[str, Any]
    inputs: list[Tensor]
    outputs: list[Tensor]
    constants: list[list[SourceNode]] = field(default_factory=list)

    def __getitem__(self, name: str) -> Any:
        try:
            return self.captures[name]
        except KeyError:
            raise FusionError(
                f"pattern {self.pattern.name} has no capture {name!r}; captures are {sorted(self.captures)}"
            ) from None

    def value(self, name: str) -> np.ndarray:
        node = self[name]
        if not isinstance(node, SourceNode) or node.value is None:
            raise FusionError(f"capture {name!r} of pattern {self.pattern.name} is not a constant")
        return node.value

    @property
    def node_names(self) -> list[str]:
        """The names of :attr:`nodes`, a new list on each call; listed once per match, as a match is not
        changed after its search and several passes ask (matches are shared through the graph's memo)."""
        names = self.__dict__.get("_node_names")
        if names is None:
            names = self.__dict__["_node_names"] = tuple([n.name for n in self.nodes])
        return list(names)

    def node_positions(self, graph: ScopeGraph) -> tuple[int, ...]:
        """The indexes of :attr:`nodes` in graph order in ``graph`` (the graph searched), found once per match
        (a search gives them with the match). A set of indexes, unlike one of names, is filled and read near
        one place for the nodes of one part of a graph: sets of matched nodes are kept as indexes."""
        found = self.__dict__.get("_node_positions")
        if found is None:
            position = graph.positions
            found = self.__dict__["_node_positions"] = tuple([position[n.name] for n in self.nodes])
        return found


class Matches(list["Match"]):
    """The matches of one search (a list), with the best near miss when some anchor failed."""

    near_miss: NearMiss | None = None
    tried: int = 0


# What building a pattern makes: reading one of these builds a deferred pattern.
_BUILT = frozenset({"vars", "outputs", "anchor_types", "_ops", "_consts", "_reach", "_op_type_alternatives", "_all_op_types",
                    "_anchors_key", "_may_match_key", "_required_at", "_ops_by_type", "_binding_keys",
                    "_above_anchor_types", "_above_anchor_singles", "_above_anchor_alternatives"})


class DataflowPattern:
    """A dataflow pattern built from a function ``fn(op, *vars)``; see the module docstring.

    Args:
        fn: builds the pattern; its parameters after ``op`` become variables of those names.
        name: the pattern's name in reports (default: the function's name).
        commutative: op types whose operands match in either order.
        deferred: build the pattern (call ``fn``) on its first use instead of now, so that a module
            defining many patterns costs nothing to import; a mistake in ``fn`` then raises at that use.
    """

    def __init__(self, fn: Callable[..., Any], *, name: str | None = None,
                 commutative: Iterable[str] = COMMUTATIVE_OPS, deferred: bool = False) -> None:
        self.name: str = name or str(getattr(fn, "__name__", "pattern"))
        self._fn: Callable[..., Any] | None = fn
        self._commutative = frozenset(commutative)
        self._parts: dict[int, tuple[OpPattern, _Part]] = {}  # id(op) -> (op, key of the pattern part below it)
        if not deferred:
            self._build_pattern()

    def __getattr__(self, attr: str) -> Any:
        # A deferred pattern is built on the first use of what building makes (again after a failure).
        if attr in _BUILT and self.__dict__.get("_fn") is not None:
            try:
                self._build_pattern()
            except BaseException:
                for built in _BUILT:
                    self.__dict__.pop(built, None)
                raise
            return getattr(self, attr)
        raise AttributeError(f"{type(self).__name__!r} object has no attribute {attr!r}")

    def _build_pattern(self) -> None:
        fn = self._fn
        assert fn is not None
        params = _parameter_names(fn)
        if not params:
            raise FusionError(f"pattern function {self.name} must take the op builder as its first parameter")
        variables = [Var(p) for p in params[1:]]
        built = fn(OpBuilder(self._commutative), *variables)
        outs = list(built) if isinstance(built, (list, tuple)) else [built]
        if not outs or not all(isinstance(o, OpOutput) for o in outs):
            raise FusionError(f"pattern function {self.name} must return the output(s) of pattern ops, got {built!r}")
        self.vars: list[Var] = variables
        self.outputs: list[OpOutput] = outs
        self._ops = self._collect_ops()
        self._op_type_alternatives = tuple({op.op_types: None for op in self._ops})
        self._all_op_types = frozenset(t for op in self._ops for t in op.op_types)
        self._ops_by_type: dict[str, list[OpPattern]] = {}
        for op in self._ops:
            for op_type in op.op_types:
                self._ops_by_type.setdefault(op_type, []).append(op)
        self._required_at = self._ops_at_depths()
        # What a match's state is read by, in the order Match lists it (see _build).
        self._binding_keys = (
            list(self._ops),
            [(op.name, op) for op in self._ops if op.name],
            [(c, c.name) for c in self._consts],
            [(v, v.name) for v in variables],
            [(o.op, o.index) for o in outs],
        )
        self._reach = max(hops for hops, _ in self._required_at)
        first = self.outputs[0].op
        #: The op types of the first output's op: a match is anchored at a node of one of them.
        self.anchor_types: tuple[str, ...] = first.op_types
        self._anchor_arity = len(first.inputs)
        # The op types of each op but the first output's, once per distinct tuple: a match binds each such op to
        # a node above the anchor (see earliest_anchor).
        self._above_anchor_types = tuple({op.op_types: None for op in self._ops if op is not first})
        # The same, split for earliest_anchor: the types of the ops of one type, and the tuples of alternatives.
        self._above_anchor_singles = frozenset(types[0] for types in self._above_anchor_types if len(types) == 1)
        self._above_anchor_alternatives = tuple(types for types in self._above_anchor_types if len(types) > 1)
        self._anchor_input_types = tuple(v.op.op_types for v in first.inputs if isinstance(v, OpOutput))
        # Keys of answers kept in a graph's memo, made once: patterns with the same keys share the answers.
        self._anchors_key = ("possible anchors", first.op_types, self._anchor_arity, self._anchor_input_types)
        self._may_match_key = ("may match", self._op_type_alternatives)
        names = [getattr(p, "name", None) for p in self._ops] + [v.name for v in self.vars]
        names += [c.name for c in self._consts if c.name]
        dup = {n for n in names if n and names.count(n) > 1}
        if dup:
            raise FusionError(f"pattern {self.name} uses the capture name(s) {sorted(dup)} twice; names must be unique")
        self._fn = None

    def _collect_ops(self) -> list[OpPattern]:
        ops: dict[int, OpPattern] = {}
        consts: dict[int, ConstPattern] = {}
        stack = [o.op for o in self.outputs]
        while stack:
            op = stack.pop()
            if id(op) in ops:
                continue
            ops[id(op)] = op
            for value in op.inputs:
                if isinstance(value, OpOutput):
                    stack.append(value.op)
                elif isinstance(value, ConstPattern):
                    consts[id(value)] = value
        self._consts = list(consts.values())
        return list(ops.values())

    def _ops_at_depths(self) -> tuple[tuple[int, tuple[str, ...]], ...]:
        """``(hops, op types)`` for each op reachable from the first output, ``hops`` the length of its shortest
        input path from that output: a match binds it to a node that many input steps above the anchor."""
        depth = {id(self.outputs[0].op): 0}
        level = [self.outputs[0].op]
        found: dict[tuple[int, tuple[str, ...]], None] = {(0, level[0].op_types): None}
        hops = 0
        while level:
            hops += 1
            following = []
            for op in level:
                for value in op.inputs:
                    if isinstance(value, OpOutput) and id(value.op) not in depth:
                        depth[id(value.op)] = hops
                        following.append(value.op)
                        found[(hops, value.op.op_types)] = None
            level = following
        return tuple(found)

    def earliest_anchor(self, graph: ScopeGraph) -> int:
        """The lowest index in graph order that a match's anchor can have (0 says nothing): when every edge of
        the graph runs from an earlier to a later node, each op of the pattern but the first output's is bound
        to a node above the anchor, so earlier than it, and the anchor comes after the first node of some type
        of each such op. The nodes of each type are listed in graph order, so the first is the earliest. Asked
        once per graph; with a type of no node at all, no node can be an anchor (the graph's size is given)."""
        key = ("earliest anchor", self)
        earliest = graph.memo.get(key)
        if earliest is None:
            earliest = graph.memo[key] = self._earliest_anchor(graph)
        return earliest

    def _earliest_anchor(self, graph: ScopeGraph) -> int:
        source = graph.source
        count = len(source.nodes)
        if not source.edges_run_forward:
            return 0
        firsts = graph.first_positions()  # shared by the patterns
        singles = self._above_anchor_singles
        if not firsts.keys() >= singles:
            return count  # a type of no node: no anchor at all
        latest = max(map(firsts.__getitem__, singles), default=-1)  # the first node of each single type
        for types in self._above_anchor_alternatives:
            first = min([firsts.get(op_type, count) for op_type in types])
            if first > latest:
                latest = first
        return min(latest + 1, count)

    def may_anchor(self, graph: ScopeGraph, node: SourceNode) -> bool:
        """False when ``node`` cannot be the first output's op: another input count, or no input made by an
        op type of one of that op's op operands (cheaper than :meth:`may_match_at`; True says nothing)."""
        if len(node.inputs) != self._anchor_arity:
            return False
        known = graph.memo.get("op types of the inputs")
        if known is None:
            known = graph.memo["op types of the inputs"] = {}
        types = known.get(node.name)
        if types is None:
            by_name = graph.source.by_name
            types = known[node.name] = frozenset([by_name[producer].op_type for producer, _ in node.inputs if producer])
        for alternatives in self._anchor_input_types:
            if types.isdisjoint(alternatives):
                return False
        return True

    def may_match_at(self, graph: ScopeGraph, node: str) -> bool:
        """False when some op of the pattern has no node of its types exactly as many data-input steps above
        ``node`` as the op lies below the first output (each edge of a match is an edge of the graph), so
        that no match anchored at ``node`` exists (a cheap test; True says nothing)."""
        levels = graph.op_types_by_steps(node, self._reach)
        reached = len(levels)
        for hops, types in self._required_at:
            if hops >= reached or levels[hops].isdisjoint(types):
                return False
        return True

    def may_hold(self, graph: ScopeGraph, node: SourceNode) -> bool:
        """False when no match can bind ``node``: for each op of the pattern of ``node``'s type, what the
        pattern computes below that op (its inputs, theirs, ...) does not match at ``node`` (a test of a
        part of the pattern, so cheaper than a search; True says nothing about a whole match)."""
        for op, part in self.parts_of_type(node.op_type):
            if self.part_holds(graph, op, part, node):
                return True
        return False

    def parts_of_type(self, op_type: str) -> list[tuple[OpPattern, Any]]:
        """``(op, part)`` for each op of the pattern of ``op_type``: ``part`` stands for the structure of the
        pattern below the op (:func:`structure_key`), one object for alike parts of any pattern."""
        found = []
        for op in self._ops_by_type.get(op_type, ()):
            part = self._parts.get(id(op))  # patterns whose parts are alike share the answer
            if part is None:
                part = self._parts[id(op)] = (op, _part_of(structure_key(op) or op))
            found.append((op, part[1]))
        return found

    def part_holds(self, graph: ScopeGraph, op: OpPattern, part: Any, node: SourceNode) -> bool:
        """Whether the pattern below ``op`` (of :meth:`parts_of_type`, with its ``part``) matches at ``node``;
        asked once per graph, part and node."""
        key = ("sub-pattern matches", part, node.name)
        answer = graph.memo.get(key)
        if answer is None:
            if _part_refuted(graph, op, node):
                answer = False
            else:
                run = SearchRun(self, graph, None)
                answer = run.match_op(OpOutput(op, 0), (node.name, 0), {}, accept_state) is not None
            graph.memo[key] = answer
        return answer

    def has_op_type(self, op_type: str) -> bool:
        """Whether some op of the pattern may have ``op_type`` (a match binds a node of that type only then)."""
        return op_type in self._all_op_types

    def may_match(self, graph: ScopeGraph) -> bool:
        """False when ``graph`` lacks every op type of some op of the pattern, so that no anchor can match
        (a cheap test from the op-type index; True says nothing about a match)."""
        answer = graph.memo.get(self._may_match_key)
        if answer is None:
            present = graph.present_types
            answer = graph.memo[self._may_match_key] = all(not present.isdisjoint(types) for types in self._op_type_alternatives)
        return answer

    # ------------------------------------------------------------------ search
    def find(self, graph: ScopeGraph, within: Scope | None = None, *, overlap: bool = False, near_miss: bool = True,
             taken: AbstractSet[str] = frozenset()) -> Matches:
        """Every match anchored at a node of the output op's type (from the op-type index), in graph
        order. With ``within``, anchors and every matched op node must lie inside that scope. Unless
        ``overlap``, a match sharing an op node with an earlier one is skipped. With ``near_miss`` False
        anchors ruled out by :meth:`may_anchor` or lying before :meth:`earliest_anchor` are skipped
        (``Matches.near_miss`` may miss the deepest).

        ``taken``: op nodes the caller drops every match of (they are another pattern's already). A match
        anchored at one of them is left out of the answer and searched only when a later anchor matches
        (it may still hide that match, as an earlier overlapping match does); the near miss then says
        nothing of those anchors."""
        types = self.anchor_types
        if within is None or within.is_root:
            if len(types) == 1:
                anchors: Sequence[SourceNode] = graph.nodes_by_type(types[0])
            else:  # the nodes of several types in graph order, listed once per graph and tuple of types
                key = ("nodes of types", types)
                listed = graph.memo.get(key)
                if listed is None:
                    listed = graph.memo[key] = _nodes_of_types(graph, types)
                anchors = listed
        else:
            anchors = [n for n in within.all_nodes if n.op_type in types]
        found = Matches()
        used: set[int] = set()  # the matched op nodes' indexes
        best: NearMiss | None = None
        found.tried = len(anchors)
        if not near_miss:
            anchors = self._possible_anchors(graph, anchors, within)
            if taken and all(node.name in taken for node in anchors):
                anchors = ()  # each would only be deferred, and no later anchor is searched to reveal it
            else:
                anchors = _from_position(anchors, self.earliest_anchor(graph), graph.positions)
        deferred: list[SourceNode] = []
        for node in anchors:
            if node.name in taken:
                deferred.append(node)
                continue
            result, miss = self._match_anchor(graph, node, within)
            if result is None:
                if miss is not None and (best is None or miss.depth > best.depth):
                    best = miss
                continue
            spots = result.node_positions(graph)
            if not overlap:
                if deferred:  # the matches at the taken anchors before this one, as if searched in order
                    for earlier in deferred:
                        hidden = self._match_anchor(graph, earlier, within)[0]
                        if hidden is not None:
                            hidden_spots = hidden.node_positions(graph)
                            if used.isdisjoint(hidden_spots):
                                used.update(hidden_spots)
                    deferred.clear()
                if not used.isdisjoint(spots):
                    continue
            used.update(spots)
            found.append(result)
        found.near_miss = best
        return found

    def _possible_anchors(self, graph: ScopeGraph, anchors: Sequence[SourceNode], within: Scope | None) -> Sequence[SourceNode]:
        """The ``anchors`` that :meth:`may_anchor` allows; over the whole graph, asked once per graph and kind
        of anchor (patterns ending in the same op with the same operand op types share the answer)."""
        if within is not None and not within.is_root:
            return self._anchors_allowed(graph, anchors)
        key = self._anchors_key
        possible = graph.memo.get(key)
        if possible is None:
            possible = graph.memo[key] = self._anchors_allowed(graph, anchors)
        return possible

    def _anchors_allowed(self, graph: ScopeGraph, anchors: Sequence[SourceNode]) -> list[SourceNode]:
        """``[n for n in anchors if self.may_anchor(graph, n)]``: the same tests, with what they look up (the
        graph's table of input op types, the pattern's anchor arity and operand types) fetched once."""
        by_name = graph.source.by_name
        arity = self._anchor_arity
        wanted = self._anchor_input_types
        allowed = []
        for node in anchors:
            inputs = node.inputs
            if len(inputs) != arity:
                continue
            for alternatives in wanted:
                for producer, _ in inputs:
                    if producer and by_name[producer].op_type in alternatives:
                        break
                else:
                    break
            else:
                allowed.append(node)
        return allowed

    def match_at(self, graph: ScopeGraph, node: SourceNode | str, within: Scope | None = None) -> Match | NearMiss:
        """The match anchored at ``node`` (the pattern's first output), or the near miss saying why not."""
        if isinstance(node, str):
            node = graph.node(node)
        if node.op_type not in self.anchor_types:
            return NearMiss(node.name, 0, f"{node.name} is {node.op_type}, expected {'|'.join(self.anchor_types)}")
        result, miss = self._match_anchor(graph, node, within)
        return result if result is not None else miss  # type: ignore[return-value]

    def _match_anchor(self, graph: ScopeGraph, node: SourceNode, within: Scope | None) -> tuple[Match | None, NearMiss | None]:
        """The match at ``node`` or the near miss; asked once per graph, pattern, anchor and scope (the
        graph never changes, and passes sharing patterns ask the same questions)."""
        key = (self, node.name, None if within is None or within.is_root else within.name)
        answer = graph.memo.get(key)
        if answer is None:
            answer = graph.memo[key] = self._search_anchor(graph, node, within)
        return answer

    def _search_anchor(self, graph: ScopeGraph, node: SourceNode, within: Scope | None) -> tuple[Match | None, NearMiss | None]:
        run = SearchRun(self, graph, within)
        # One output: every final state is accepted as is (_rest_outputs has no other output to check).
        then = accept_state if len(self.outputs) == 1 else lambda state: self._rest_outputs(run, state)
        final = run.match_value(self.outputs[0], (node.name, self.outputs[0].index), {}, then)
        if final is not None:
            return self._build(graph, final, run.bound_nodes), None
        return None, NearMiss(node.name, run.best_depth, run.pending_reason or "no match")

    def _rest_outputs(self, run: SearchRun, state: SearchState) -> SearchState | None:
        for out in self.outputs[1:]:
            node = state.get(out.op)
            if node is None:
                run.fail(state, f"pattern output {out!r} is not connected to the first output")
                return None
        return state

    def _build(self, graph: ScopeGraph, state: SearchState, bound: AbstractSet[str]) -> Match:
        """The match of a final ``state``; ``bound``: the names of the nodes its ops are bound to (the search
        keeps them)."""
        position = graph.positions
        by_name = graph.source.by_name
        _, named_ops, consts, variables, outputs_at = self._binding_keys
        at = sorted([position[n] for n in bound])  # the node at each index is graph.source.nodes[index]
        graph_nodes = graph.source.nodes
        nodes = [graph_nodes[index] for index in at]
        captures: dict[str, Any] = {name: by_name[state[op]] for name, op in named_ops}
        chains: list[list[SourceNode]] = []
        for const, name in consts:
            tensor = state.get(const)
            if tensor is None:
                continue
            chain = graph.shared_constant_chain(tensor[0])
            if chain:
                chains.append(list(chain))
                if name:
                    captures[name] = chain[-1]
        inputs = []
        for variable, name in variables:
            tensor = state.get(variable)
            if tensor is not None:
                captures[name] = tensor
                inputs.append(tensor)
        outputs = [(state[op], index) for op, index in outputs_at]
        match = Match(self, nodes, captures, inputs, outputs, chains)
        match.__dict__["_node_positions"] = tuple(at)
        return match

    def __repr__(self) -> str:
        return f"DataflowPattern({self.name!r})"


def _nodes_of_types(graph: ScopeGraph, types: Sequence[str]) -> Sequence[SourceNode]:
    """The nodes of ``types`` in graph order: the op-type index's list itself when only one of the types is
    present (``Add`` of ``Add|AddV2`` in a TF2 graph), else those lists merged by position."""
    lists = [found for found in map(graph.nodes_by_type, types) if found]
    if len(lists) <= 1:
        return lists[0] if lists else ()
    position = graph.positions
    return sorted((n for found in lists for n in found), key=lambda n: position[n.name])


def _from_position(anchors: Sequence[SourceNode], earliest: int, position: Mapping[str, int]) -> Sequence[SourceNode]:
    """``anchors`` without those at the start (graph order) whose index is below ``earliest``
    (:meth:`DataflowPattern.earliest_anchor`), which no match has."""
    skip = 0
    while skip < len(anchors) and position[anchors[skip].name] < earliest:
        skip += 1
    return anchors[skip:] if skip else anchors


def _part_refuted(graph: ScopeGraph, op: OpPattern, node: SourceNode) -> bool:
    """True when the part of a pattern below ``op`` cannot match at ``node``, told from ``node`` and the producers
    of its inputs without a search: a match binds ``op`` to a node of one of its types and input count, and each
    op operand to a producer of one of that op's types and input count, on the operand's own input (any input
    for a commutative op), whose constant operands are constants (on their own inputs, or on any input of a
    commutative op). False says nothing. Most seeds of a rule that looks for a small computation (a ``Relu6``
    that feeds no HardSwish) fail right there, and the search's set-up costs more than these look-ups."""
    if node.op_type not in op.op_types or len(node.inputs) != op.arity:
        return True
    by_name = graph.source.by_name
    inputs = node.inputs
    for slot, value in enumerate(op.inputs):
        if value.__class__ is not OpOutput:
            continue
        operand: OpPattern = value.op
        index: int = value.index
        for tensor in (inputs if op.commute else (inputs[slot],)):
            producer = tensor[0]
            if producer and tensor[1] == index and _may_produce(graph, operand, by_name[producer]):
                break
        else:
            return True
    return False


def _may_produce(graph: ScopeGraph, op: OpPattern, node: SourceNode) -> bool:
    """Whether ``node`` has one of ``op``'s types and input count and a constant where each constant operand of
    ``op`` reads (any input when ``op`` is commutative): what a match binding ``op`` to ``node`` needs first."""
    if node.op_type not in op.op_types or len(node.inputs) != op.arity:
        return False
    chain = graph.shared_constant_chain
    inputs = node.inputs
    for slot, value in enumerate(op.inputs):
        if value.__class__ is not ConstPattern:
            continue
        if op.commute:
            if not any(tensor[0] and chain(tensor[0]) for tensor in inputs):
                return False
        elif not (inputs[slot][0] and chain(inputs[slot][0])):
            return False
    return True


class _Part:
    """The one stand-in of a pattern part's structure key (see :func:`structure_key`): parts with equal keys
    get the same object, so a graph's memo is keyed by it, hashed and compared by identity, rather than by
    the nested key, hashed and compared element by element at each look-up."""

    __slots__ = ("key", "__weakref__")

    def __init__(self, key: Any) -> None:
        self.key = key


# NOTE: a pure cache: structure key -> its stand-in, while some pattern holds it.
_PARTS: weakref.WeakValueDictionary[Any, _Part] = weakref.WeakValueDictionary()


def _part_of(key: Any) -> _Part:
    part = _PARTS.get(key)
    if part is None:
        part = _PARTS[key] = _Part(key)
    return part


def _parameter_names(fn: Callable[..., Any]) -> list[str]:
    """``fn``'s parameter names; a plain function's are read from its code (``inspect`` is slower)."""
    code = fn.__code__ if isinstance(fn, FunctionType) and not hasattr(fn, "__wrapped__") else None
    if code is not None and not code.co_flags & (CO_VARARGS | CO_VARKEYWORDS) and not code.co_kwonlyargcount:
        return list(code.co_varnames[: code.co_argcount])
    return list(inspect.signature(fn).parameters)
