"""TF1 loop frames become functional ``While`` nodes before lowering, so :mod:`.control` writes them as ONNX
``Loop``.

A TF1 ``while_loop`` is a frame of flat nodes: per loop variable ``k``, ``Enter(init_k)`` and
``NextIteration(next_k)`` meet in ``Merge_k``; ``Switch_k(Merge_k, LoopCond(c))`` sends the value into the
body (output 1) or out through ``Exit_k`` (output 0); loop invariants come in through constant ``Enter``\\ s.
:func:`functional_loops` rebuilds each frame as ``While(init…)`` with

* ``cond``: arguments ``Merge_k``, output ``c`` (the nodes ``c`` is computed from, back to the arguments);
* ``body``: arguments ``Switch_k:1``, outputs ``next_k`` (the nodes they are computed from);
* invariants (constant Enters) as further loop variables the body returns unchanged, a TensorArray's
  resource handle as a placeholder constant (its lowerings never read it); constants copied in;

and ``Exit_k``'s readers read ``While:k``; a loop variable's ``Enter`` taken for a graph output gives the
initial value (what TF fetches from it: it runs once, at the first iteration). The model's graph is not touched: the result is a copy.

V1 conds are rebuilt first (:mod:`.tf1_conds`), and inner loops before the loops around them. A frame is
left as it is (its ops then fail to lower, naming themselves) when it is no such loop: a loop variable whose
Merge does not join one Enter and one NextIteration, a body that reads a frame op other than its
arguments, a Switch no Merge joins. A value of the body or condition (or an invariant's constant ``Enter``) taken for a graph
output fails the export naming it: it has one value per iteration, and TensorFlow cannot fetch it either.
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass

import numpy as np

from ...errors import SerdeError
from ...ir.graph import CONST_OP, DATA_OP, Graph, Node, Value
from ...ir.types import TensorType
from .bodies import infer_again
from .registry import FRAME_MARKERS
from .tensor_lists import declared_element_shape, holds_list, list_element_type
from .tf1_conds import conds_to_if

__all__ = ["functional_loops"]

_FRAME_OPS = frozenset({"Enter", "Exit", "Merge", "Switch", "NextIteration", "LoopCond"})


class _NotALoop(Exception):
    pass


@dataclass
class _Variable:
    enter: Node
    merge: Node
    switch: Node
    next_iteration: Node
    exits: list[Node]
    initial: Value  # what the Enter makes available
    result: Value  # what the NextIteration feeds back


@dataclass
class _Frame:
    name: str
    loop_cond: Node
    condition: Value  # what the LoopCond reads
    variables: list[_Variable]


def functional_loops(graph: Graph) -> Graph:
    """``graph`` with each TF1 loop frame as a ``tf.While`` and each v1 cond as a ``tf.If`` (a copy), or
    ``graph`` itself when it has neither."""
    for node in graph.nodes:
        if node.op in FRAME_MARKERS:
            break
    else:
        return graph  # no loop frame and no v1 cond
    copy = graph.clone()
    conds_to_if(copy)  # first: a cond inside a loop body is then one node of it
    rebuilt = True
    while rebuilt:  # an inner loop first: then it is one node of the loop around it
        rebuilt = False
        for loop_cond in [n for n in copy.nodes if n.dialect == "tf" and n.op_type == "LoopCond"]:
            try:
                frame = _frame(loop_cond)
                members = _members(frame)
                cond, body, operands = _bodies(copy, frame)
            except _NotALoop:
                continue
            _replace(copy, frame, members, cond, body, operands)
            rebuilt = True
    return copy


# ----------------------------------------------------------------------------- finding the frame
def _frame(loop_cond: Node) -> _Frame:
    variables = []
    for user, slot in loop_cond.outputs[0].uses:
        if user.op_type != "Switch" or slot != 1:
            continue
        data = user.inputs[0]
        if data is None or data.index != 0:
            raise _NotALoop
        merge = data.producer
        if merge.op_type != "Merge" or len(merge.inputs) != 2 or merge.outputs[1].uses:
            raise _NotALoop
        producers = [v.producer if v is not None else None for v in merge.inputs]
        enter = next((p for p in producers if p is not None and p.op_type == "Enter"), None)
        back = next((p for p in producers if p is not None and p.op_type == "NextIteration"), None)
        if enter is None or back is None or enter.inputs[0] is None or back.inputs[0] is None:
            raise _NotALoop
        exits = [u for u, s in user.outputs[0].uses if u.op_type == "Exit"]
        if len(exits) != len(user.outputs[0].uses):
            raise _NotALoop
        variables.append(_Variable(enter, merge, user, back, exits, enter.inputs[0], back.inputs[0]))
    if not variables:
        raise _NotALoop
    names = {v.enter.attrs.get("frame_name") for v in variables}
    if len(names) != 1:
        raise _NotALoop
    if loop_cond.inputs[0] is None:
        raise _NotALoop
    return _Frame(str(names.pop()), loop_cond, loop_cond.inputs[0], variables)


def _slice(roots: list[Value], arguments: dict[int, int], frame: _Frame, invariants: dict[int, Value]) -> list[Node]:
    """The nodes that compute ``roots`` from the arguments (value id → index), constants and invariants
    (each constant Enter's output, recorded in ``invariants``)."""
    found: dict[int, Node] = {}
    stack = [v for v in roots if id(v) not in arguments]
    while stack:
        value = stack.pop()
        node = value.producer
        if id(node) in found or node.op == CONST_OP:
            continue
        if node.op_type == "Enter":
            if not node.attrs.get("is_constant") or node.attrs.get("frame_name") != frame.name:
                raise _NotALoop  # a loop variable read directly, or another frame's value
            if node.inputs[0] is None:
                raise _NotALoop
            invariants[id(node.outputs[0])] = node.inputs[0]
            continue
        if node.op_type in _FRAME_OPS or node.op == DATA_OP or node.dialect != "tf":
            raise _NotALoop
        found[id(node)] = node
        stack.extend(v for v in node.inputs if v is not None and id(v) not in arguments)
    return [n for n in frame.loop_cond.graph.nodes if id(n) in found]


def _bodies(graph: Graph, frame: _Frame) -> tuple[Graph, Graph, list[Value]]:
    """The cond and body graphs and the loop's operands: each variable's initial value, then each invariant
    (carried through the loop unchanged)."""
    invariants: dict[int, Value] = {}  # id(Enter output) -> the outer value it makes available
    m = len(frame.variables)
    cond_args = {id(v.merge.outputs[0]): k for k, v in enumerate(frame.variables)}
    body_args = {id(v.switch.outputs[1]): k for k, v in enumerate(frame.variables)}
    cond_nodes = _slice([frame.condition], cond_args, frame, invariants)
    results = [v.result for v in frame.variables]
    body_nodes = _slice(results, body_args, frame, invariants)
    handles = {key for key, outer in invariants.items() if _is_handle(outer)}
    carried = [key for key in invariants if key not in handles]
    for j, key in enumerate(carried):
        cond_args[key] = body_args[key] = m + j
    operands = [v.initial for v in frame.variables] + [invariants[key] for key in carried]
    names = [v.merge.name for v in frame.variables] + [invariants[key].producer.name for key in carried]
    cond = _Body(graph, f"{frame.name}/cond", cond_args, operands, names, handles, m)
    cond.copy(cond_nodes)
    cond.graph.set_outputs([cond.read(frame.condition)])
    body = _Body(graph, f"{frame.name}/body", body_args, operands, names, handles, m)
    body.copy(body_nodes)
    body.graph.set_outputs([body.read(v) for v in results] + list(body.graph.inputs[m:]))
    return cond.graph, body.graph, operands


def _is_handle(value: Value) -> bool:
    t = value.type
    return isinstance(t, TensorType) and t.dtype.name == "resource"


# ----------------------------------------------------------------------------- building the bodies
class _Body:
    """One body being built: its graph and what each frame value became in it."""

    def __init__(self, graph: Graph, name: str, arguments: dict[int, int], operands: list[Value], names: list[str],
                 handles: set[int], variables: int) -> None:
        self.graph = Graph(name, graph.context, graph.registry)
        self.mapped: dict[int, Value] = {}
        for k, (operand, base) in enumerate(zip(operands, names)):
            t = operand.type
            if k < variables and isinstance(t, TensorType) and t.rank is not None:
                t = t.with_shape((-1,) * t.rank)  # a loop variable keeps its rank; its dims may change
            value = self.graph.add_input(self.graph.unique_name(f"{base}/arg"), t)
            element = list_element_type(operand) if holds_list(operand) else None
            if element is not None:
                value.meta["list_element"] = element
                declared = declared_element_shape(operand)
                if isinstance(declared, Value) and declared.producer.op == CONST_OP:
                    value.meta["list_declared_shape"] = declared.producer.attrs.as_tensor("value")
            for key, index in arguments.items():
                if index == k:
                    self.mapped[key] = value
        for key in handles:  # a TensorArray's handle: a placeholder its lowerings never read
            self.mapped[key] = self.graph.add_const(np.zeros(2, np.float32), "handle", unique=True)

    def read(self, value: Value) -> Value:
        found = self.mapped.get(id(value))
        if found is not None:
            return found
        if value.producer.op != CONST_OP:
            raise _NotALoop
        found = self.graph.add_const(value.producer.attrs.as_tensor("value"), value.producer.name, unique=True)
        self.mapped[id(value)] = found
        return found

    def copy(self, nodes: list[Node]) -> None:
        for node in nodes:
            inputs = [None if v is None else self.read(v) for v in node.inputs]
            copy = self.graph.add_node(node.op, inputs, name=node.name, attrs=dict(node.attrs.items()),
                                       output_types=[v.type for v in node.outputs], allow_unknown=True,
                                       subgraphs={k: b.clone() for k, b in node.subgraphs.items()})
            for old, new in zip(node.outputs, copy.outputs):
                new.meta = dict(old.meta)
                self.mapped[id(old)] = new


# ----------------------------------------------------------------------------- replacing the frame
def _members(frame: _Frame) -> list[Node]:
    """Every node of the frame: what its Enters reach, up to and with its Exits; raises when a value of the
    frame is read from outside other than through an Exit."""
    graph = frame.loop_cond.graph
    starts = [n for n in graph.nodes if n.op_type == "Enter" and n.attrs.get("frame_name") == frame.name]
    found: dict[int, Node] = {}
    stack = list(starts)
    while stack:
        node = stack.pop()
        if id(node) in found:
            continue
        found[id(node)] = node
        if node.op_type == "Exit":
            continue
        for value in node.outputs:
            stack.extend(user for user, _ in value.uses)
        stack.extend(n for n in graph.nodes if node in n.control_inputs)
    exits = {id(n) for v in frame.variables for n in v.exits}
    outputs = {id(v) for v in graph.outputs}
    for node in found.values():
        if node.op_type == "Exit" and id(node) not in exits:
            raise _NotALoop
        fetchable = node.op_type == "Exit" or (node.op_type == "Enter" and not node.attrs.get("is_constant"))
        if not fetchable and any(id(v) in outputs for v in node.outputs):
            raise SerdeError(
                f"graph output {node.outputs[0].name!r} is computed inside TF1 loop {frame.name!r} (node {node.name!r}, "
                f"{node.op_type}) and takes one value per iteration, which TensorFlow cannot fetch either; take it off "
                "the model's outputs or return it from the loop as a loop variable"
            )
    return [n for n in graph.nodes if id(n) in found]


def _replace(graph: Graph, frame: _Frame, members: list[Node], cond: Graph, body: Graph, operands: list[Value]) -> None:
    # TF1 keeps a loop variable's rank (its shape invariant); the dims may change from one iteration to the next.
    types = [t.with_shape((-1,) * t.rank) if isinstance(t, TensorType) and t.rank is not None else t
             for t in (v.type for v in operands)]
    loop = graph.add_node("tf.While", operands, name=graph.unique_name(frame.name.rsplit("/", 1)[0] or "while"),
                          output_types=types, subgraphs={"cond": cond, "body": body})
    for k, variable in enumerate(frame.variables):
        for exit_node in variable.exits:
            graph.replace_all_uses_with(exit_node.outputs[0], loop.outputs[k])
    for node in members:  # a loop variable's Enter fetched as a graph output gives its initial value, as in TF
        if node.op_type == "Enter" and node.inputs[0] is not None:
            graph.outputs = [node.inputs[0] if v is node.outputs[0] else v for v in graph.outputs]
    for node in members:
        for slot in range(len(node.inputs)):
            node.replace_input_with(slot, None)
        node.control_inputs = []
    for node in reversed(members):
        graph.remove_node(node)
    _schedule(graph)
    infer_again(graph.nodes[graph.nodes.index(loop) + 1:])  # what the Exits' readers did not know


def _schedule(graph: Graph) -> None:
    """Reorders the nodes topologically (the While was added last), keeping their order where it is one; a
    loop's back edge (NextIteration → Merge) is no dependency."""
    position = {id(n): i for i, n in enumerate(graph.nodes)}
    waiting: dict[int, int] = {}
    readers: dict[int, list[Node]] = {}
    for node in graph.nodes:
        producers = {id(v.producer) for v in node.inputs
                     if v is not None and not (node.op_type == "Merge" and v.producer.op_type == "NextIteration")}
        producers |= {id(c) for c in node.control_inputs}
        producers &= position.keys()
        producers.discard(id(node))
        waiting[id(node)] = len(producers)
        for p in producers:
            readers.setdefault(p, []).append(node)
    ready = [(position[id(n)], n) for n in graph.nodes if waiting[id(n)] == 0]
    heapq.heapify(ready)
    order = []
    while ready:
        _, node = heapq.heappop(ready)
        order.append(node)
        for reader in readers.get(id(node), []):
            waiting[id(reader)] -= 1
            if waiting[id(reader)] == 0:
                heapq.heappush(ready, (position[id(reader)], reader))
    if len(order) == len(graph.nodes):
        graph.nodes[:] = order
