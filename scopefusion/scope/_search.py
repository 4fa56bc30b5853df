"""The backtracking search behind :meth:`DataflowPattern.find <.dataflow.DataflowPattern.find>`: one
:class:`SearchRun` per anchor (and per part of a pattern tested at a node), binding pattern ops, variables and
constants to the graph's nodes and tensors and remembering the deepest failure (the near miss)."""

from __future__ import annotations

from functools import partial
from typing import TYPE_CHECKING, Any, Callable, Sequence

import numpy as np

from ..parser.source_graph import SourceNode
from .features import values_match
from .graph import ScopeGraph
from .pattern_values import ConstPattern, OpOutput, OpPattern, Tensor, ValuePattern, Var
from .tree import Scope

if TYPE_CHECKING:  # pragma: no cover
    from .dataflow import DataflowPattern

__all__ = ["SearchRun", "SearchState", "Then", "accept_state"]

# The bindings of the search branch being tried: pattern op -> node name, variable or constant -> tensor
# (pattern objects compare by identity, so each is its own key). One dict per search: a binding is added
# before the rest of the search runs and removed when that fails, so a branch never sees its siblings'
# bindings, and a success leaves every binding in place.
SearchState = dict[Any, Any]


# The rest of a search once a value is bound: the final state it accepts, or None.
Then = Callable[["SearchState"], "SearchState | None"]



def accept_state(state: SearchState) -> SearchState:
    return state


# Why a failure failed: the reason itself, or a formatter and the values it writes the reason from.
Reason = str | tuple[Any, ...]


def _omitted(value: ValuePattern) -> str:
    return f"an omitted optional input stands where {value!r} is expected"


def _bound_twice(value: ValuePattern, bound: Tensor, tensor: Tensor) -> str:
    return f"{value!r} is {bound[0]}:{bound[1]} in one place and {tensor[0]}:{tensor[1]} in another"


def _not_constant(tensor: Tensor, value: ValuePattern) -> str:
    return f"{tensor[0]}:{tensor[1]} is not a constant, expected {value!r}"


def _wrong_output(tensor: Tensor, out: OpOutput) -> str:
    return f"{tensor[0]}:{tensor[1]} is output {tensor[1]}, expected output {out.index} of {out.op!r}"


def _op_bound_twice(op: OpPattern, bound: str, name: str) -> str:
    return f"{op!r} is {bound} in one place and {name} in another"


def _node_bound_twice(name: str) -> str:
    return f"{name} is already bound to another pattern op"


def _wrong_type(node: SourceNode, op: OpPattern) -> str:
    return f"{node.name} is {node.op_type}, expected {'|'.join(op.op_types)}"


def _no_operand_order(node: SourceNode, values: Sequence[ValuePattern]) -> str:
    return f"no order of {node.name}'s operands matches {[repr(v) for v in values]}"


class SearchRun:
    """One anchored search: backtracking over bindings, remembering the deepest failure.

    The search is written in continuation-passing style: each ``match_*`` method gets ``then``, the rest
    of the search as a function of the state once its own value is bound, and returns the first final
    state that ``then`` accepts (None when every choice fails). The choices are tried in the same depth-first
    order a generator of states would yield them, without passing each state up through one generator
    per pattern level.

    A failure's reason is kept only when it is the deepest so far (:meth:`deeper`), since most attempts fail
    shallowly, and it is kept unwritten (a formatter and its values) until :attr:`best_reason` is read: a deeper
    failure or a match makes most reasons moot, and a search asked for its match only never reads them."""

    __slots__ = ("pattern", "graph", "within", "best_depth", "_why", "_nodes", "_chain", "_bound")

    def __init__(self, pattern: DataflowPattern, graph: ScopeGraph, within: Scope | None) -> None:
        self.pattern = pattern
        self.graph = graph
        self.within = None if within is None or within.is_root else within
        self.best_depth = -1
        self._why: Reason = ""
        self._nodes = graph.source.by_name
        self._chain = graph.shared_constant_chain
        self._bound: set[str] = set()  # the node names bound to pattern ops (the state's string values)

    @property
    def best_reason(self) -> str:
        """Why the deepest failure so far failed ("" before any failure)."""
        why = self._why
        if isinstance(why, str):
            return why
        return str(why[0](*why[1:]))

    @best_reason.setter
    def best_reason(self, reason: str) -> None:
        self._why = reason

    @property
    def bound_nodes(self) -> set[str]:
        """The names of the nodes bound to pattern ops in the state being tried (a final state's, once a search
        succeeded): one per bound op, as the state holds them. The search's own set: read it, do not change it."""
        return self._bound

    @property
    def pending_reason(self) -> Reason:
        """:attr:`best_reason` as kept: the reason, or a formatter and its values, not yet written."""
        return self._why

    def deeper(self, state: SearchState) -> bool:
        """Whether a failure at ``state`` is the deepest so far (then the caller sets its reason)."""
        depth = len(state)
        if depth > self.best_depth:
            self.best_depth = depth
            return True
        return False

    def fail(self, state: SearchState, reason: str) -> None:
        if self.deeper(state):
            self.best_reason = reason

    def match_value(self, value: ValuePattern, tensor: Tensor, state: SearchState, then: Then) -> SearchState | None:
        if not tensor[0]:
            if self.deeper(state):
                self._why = (_omitted, value)
            return None
        if value.__class__ is OpOutput:  # only pattern ops are bound, by the op itself
            return self.match_op(value, tensor, state, then)
        bound = state.get(value)
        if bound is not None:
            if bound == tensor:
                return then(state)
            if self.deeper(state):
                self._why = (_bound_twice, value, bound, tensor)
            return None
        if isinstance(value, Var):
            state[value] = tensor
            found = then(state)
            if found is None:
                del state[value]
            return found
        if isinstance(value, ConstPattern):
            chain = self._chain(tensor[0])
            if not chain:
                if self.deeper(state):
                    self._why = (_not_constant, tensor, value)
                return None
            why = value.why_not(np.asarray(chain[-1].value))
            if why is not None:
                if self.deeper(state):
                    self._why = f"constant {chain[-1].name} {why}"
                return None
            return self._bind(value, tensor, state, then)
        return self.match_op(value, tensor, state, then)  # type: ignore[arg-type]

    def match_op(self, out: OpOutput, tensor: Tensor, state: SearchState, then: Then) -> SearchState | None:
        op = out.op
        name, index = tensor
        if index != out.index:
            if self.deeper(state):
                self._why = (_wrong_output, tensor, out)
            return None
        bound = state.get(op)
        if bound is not None:
            if bound == name:
                return then(state)
            if self.deeper(state):
                self._why = (_op_bound_twice, op, bound, name)
            return None
        node = self._nodes[name]
        if node.op_type not in op.op_types or self.within is not None or op.checked or len(node.inputs) != op.arity:
            why = self._node_why_not(op, node)
            if why is not None:
                if self.deeper(state):
                    self._why = why
                return None
        if name in self._bound:
            if self.deeper(state):
                self._why = (_node_bound_twice, name)
            return None
        state[op] = name
        self._bound.add(name)
        values = op.inputs
        if not op.commute:
            if op.arity == 1:
                found = self.match_value(values[0], node.inputs[0], state, then)
            elif op.arity == 2:  # _match_inputs' tries, without its call per operand
                match_value = self.match_value
                second, other = values[1], node.inputs[1]
                found = match_value(values[0], node.inputs[0], state, lambda st: match_value(second, other, st, then))
            else:
                found = self._match_inputs(values, node.inputs, 0, state, then)
        elif op.arity == 2:
            order = op.operand_order
            found = self._match_two_operands(node, values, values[order[0]], values[order[1]], node.inputs, state, then)
        else:
            found = self._match_commutative(node, op, node.inputs, state, then)
        if found is None:
            del state[op]
            self._bound.discard(name)
        return found

    @staticmethod
    def _bind(key: Any, tensor: Tensor, state: SearchState, then: Then) -> SearchState | None:
        state[key] = tensor
        found = then(state)
        if found is None:
            del state[key]
        return found

    def _node_why_not(self, op: OpPattern, node: SourceNode) -> str | None:
        if node.op_type not in op.op_types:
            return f"{node.name} is {node.op_type}, expected {'|'.join(op.op_types)}"
        if self.within is not None and not self.within.contains(self.graph.tree.scope_of(node.name)):
            return f"{node.name} lies outside scope {self.within.name}"
        if len(node.inputs) != len(op.inputs):
            return f"{node.name} ({node.op_type}) has {len(node.inputs)} input(s), the pattern expects {len(op.inputs)}"
        for attr, want in op.attrs.items():
            if attr not in node.attrs:
                return f"{node.name} has no attribute {attr!r}"
            found = node.attrs[attr]
            if callable(want):
                reason = want(found)
                if reason not in (None, True):
                    return f"{node.name} attribute {attr}={found!r}: {reason if isinstance(reason, str) else 'rejected'}"
            elif not values_match(found, want):
                return f"{node.name} has {attr}={found!r}, expected {want!r}"
        if op.check is not None:
            reason = op.check(node)
            if reason is not None:
                return f"{node.name}: {reason}"
        return None

    def _match_inputs(
        self, values: Sequence[ValuePattern], tensors: Sequence[Tensor], k: int, state: SearchState, then: Then
    ) -> SearchState | None:
        if k == len(values):
            return then(state)
        if k + 1 == len(values):
            return self.match_value(values[k], tensors[k], state, then)
        return self.match_value(values[k], tensors[k], state, partial(self._match_inputs, values, tensors, k + 1, then=then))

    def _cannot_match(self, value: ValuePattern, tensor: Tensor, state: SearchState) -> bool:
        """A cheap test that skips hopeless operand assignments of commutative ops; a skipped assignment
        is a failure at ``state`` (its reason recorded when it is the deepest)."""
        name = tensor[0]
        if not name:
            if self.deeper(state):
                self._why = (_omitted, value)
            return True
        if isinstance(value, OpOutput):
            node = self._nodes[name]
            op = value.op
            if node.op_type not in op.op_types:
                if self.deeper(state):
                    self._why = (_wrong_type, node, op)
                return True
            if tensor[1] != value.index:
                if self.deeper(state):
                    self._why = (_wrong_output, tensor, value)
                return True
            return False
        if isinstance(value, ConstPattern) and not self._chain(name):
            if self.deeper(state):
                self._why = (_not_constant, tensor, value)
            return True
        return False

    def _match_commutative(
        self, node: SourceNode, op: OpPattern, tensors: Sequence[Tensor], state: SearchState, then: Then
    ) -> SearchState | None:
        values = op.inputs
        order = op.operand_order  # most specific operands first: ops, then constants, then variables
        last = len(order)
        if last == 2:
            return self._match_two_operands(node, values, values[order[0]], values[order[1]], tensors, state, then)
        any_assignment = False

        def assign(k: int, free: list[int], st: SearchState) -> SearchState | None:
            nonlocal any_assignment
            if k == last:
                any_assignment = True
                return then(st)
            value = values[order[k]]
            for pos in free:
                if self._cannot_match(value, tensors[pos], st):
                    continue
                rest = [p for p in free if p != pos]
                found = self.match_value(value, tensors[pos], st, partial(assign, k + 1, rest))
                if found is not None:
                    return found
            return None

        found = assign(0, list(range(len(tensors))), state)
        if found is None and not any_assignment and self.deeper(state):
            self._why = (_no_operand_order, node, values)
        return found

    def _match_two_operands(
        self,
        node: SourceNode,
        values: Sequence[ValuePattern],
        first: ValuePattern,
        second: ValuePattern,
        tensors: Sequence[Tensor],
        state: SearchState,
        then: Then,
    ) -> SearchState | None:
        """:meth:`_match_commutative` of a two-operand op, the same tries in the same order: ``first`` (the
        more specific operand) on input 0 then on input 1, and ``second`` on the other input each time.

        NOTE: unlike :meth:`_match_commutative`, no "no order of the operands matches" reason is written when
        every try fails: each try writes its own reason at this node's depth or deeper first (a skipped try
        too, in :meth:`_cannot_match`), so that reason could never be the deepest one."""
        cannot_match = self._cannot_match
        match_value = self.match_value
        # An op operand that _cannot_match allowed has a producer: match_op needs no match_value in between.
        match_first = self.match_op if first.__class__ is OpOutput else match_value
        other = tensors[1]

        if second.__class__ is Var:
            # _cannot_match of a variable fails only on an omitted input, as match_value does, with the same reason.
            def rest(st: SearchState) -> SearchState | None:
                return match_value(second, other, st, then)
        else:
            def rest(st: SearchState) -> SearchState | None:
                if cannot_match(second, other, st):
                    return None
                return match_value(second, other, st, then)

        here = tensors[0]
        if not cannot_match(first, here, state):
            found = match_first(first, here, state, rest)  # type: ignore[arg-type]
            if found is not None:
                return found
        here, other = other, here
        if not cannot_match(first, here, state):
            return match_first(first, here, state, rest)  # type: ignore[arg-type]
        return None
