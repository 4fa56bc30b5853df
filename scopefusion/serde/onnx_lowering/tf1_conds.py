"""TF1 conditionals (a v1 ``tf.cond``) become functional ``If`` nodes before lowering, so :mod:`.control`
writes them as ONNX ``If``.

A v1 ``tf.cond(p, true_fn, false_fn)`` is flat: each tensor a branch reads passes a ``Switch(x, p)`` (output 1
into the true branch, output 0 into the false one), constants hang on a pivot (``Identity(Switch(p, p):k)``)
by a control edge, and each result is ``Merge(false_result, true_result)``. :func:`conds_to_if` rewrites each
such Merge as ``If(p, x…)`` whose ``then_branch`` computes the true result from arguments ``Switch(x, p):1``
and ``else_branch`` the false one from ``Switch(x, p):0`` (constants copied in); the Merge's readers read the
If, and the frame ops and branch nodes nothing reads any more are removed. A Merge whose inputs do not come
from two sides of one predicate (a loop's Merge, a cond inside a branch not rebuilt first) is left as it is.
Works in place on a graph the caller owns (a copy of the model's).
"""

from __future__ import annotations

from ...ir.graph import CONST_OP, DATA_OP, Graph, Node, Value

__all__ = ["conds_to_if"]


class _NotACond(Exception):
    pass


def conds_to_if(graph: Graph) -> bool:
    """Rewrites each v1 cond's Merge of ``graph`` as an ``If`` (see the module docstring); True if any was."""
    touched: dict[int, Node] = {}  # what a rewritten cond was made of: removed once nothing reads it
    for merge in [n for n in graph.nodes if n.dialect == "tf" and n.op_type == "Merge"]:
        try:
            _rewrite(graph, merge, touched)
        except _NotACond:
            continue
    if not touched:
        return False
    predicates = {id(_root(n.inputs[0])) for n in graph.nodes if n.op_type == "If" and n.inputs and n.inputs[0] is not None}
    for node in graph.nodes:  # the pivots: Switch(p, p) and the Identities of its outputs
        if node.op_type == "Switch" and node.inputs[1] is not None and id(_root(node.inputs[1])) in predicates:
            touched[id(node)] = node
            for value in node.outputs:
                touched.update((id(u), u) for u, _ in value.uses if u.op_type == "Identity")
    _sweep(graph, touched)
    return True


def _root(value: Value) -> Value:
    """``value`` before the Identities it went through (a cond's data Switches read ``Identity(p)``, its pivot
    Switch ``p``)."""
    while value.producer.op_type == "Identity" and value.producer.inputs and value.producer.inputs[0] is not None:
        value = value.producer.inputs[0]
    return value


def _switch_side(value: Value) -> tuple[Value, int] | None:
    """(the predicate, before its Identities, and the side) when ``value`` is a Switch output, else None."""
    node = value.producer
    if node.op_type == "Switch" and node.inputs[1] is not None:
        return _root(node.inputs[1]), value.index
    return None


def _pivot_side(node: Node) -> tuple[Value, int] | None:
    """(the predicate, the side) of a control input that is a cond's pivot (an Identity of a Switch output)."""
    while node.op_type == "Identity" and node.inputs and node.inputs[0] is not None:
        side = _switch_side(node.inputs[0])
        if side is not None:
            return side
        node = node.inputs[0].producer
    return None


def _branch(result: Value) -> tuple[list[Node], dict[int, Value], set[tuple[int, int]], Value | None]:
    """The nodes computing ``result`` back to Switch outputs: (nodes, Switch outputs read by id, the
    (predicate id, side) pairs met, the predicate)."""
    found: dict[int, Node] = {}
    reads: dict[int, Value] = {}
    sides: set[tuple[int, int]] = set()
    predicate: Value | None = None
    stack = [result]
    while stack:
        value = stack.pop()
        side = _switch_side(value)
        if side is not None:
            reads[id(value)] = value
            sides.add((id(side[0]), side[1]))
            predicate = side[0]
            continue
        node = value.producer
        if id(node) in found:
            continue
        if node.op_type in ("Merge", "Enter", "Exit", "NextIteration", "LoopCond") or node.op == DATA_OP:
            raise _NotACond
        found[id(node)] = node
        for control in node.control_inputs:
            pivot = _pivot_side(control)
            if pivot is not None:
                sides.add((id(pivot[0]), pivot[1]))
                predicate = pivot[0]
        if node.op != CONST_OP:
            stack.extend(v for v in node.inputs if v is not None)
    return [n for n in result.producer.graph.nodes if id(n) in found], reads, sides, predicate


def _rewrite(graph: Graph, merge: Node, touched: dict[int, Node]) -> Node:
    if len(merge.inputs) != 2 or any(v is None for v in merge.inputs) or merge.outputs[1].uses:
        raise _NotACond
    branches = [_branch(v) for v in merge.inputs]  # type: ignore[arg-type]
    predicate = next((b[3] for b in branches if b[3] is not None), None)  # before its Identities
    if predicate is None:
        raise _NotACond
    sides = []
    for _, _, met, _ in branches:
        if len({p for p, _ in met}) != 1 or next(iter(met))[0] != id(predicate) or len({s for _, s in met}) != 1:
            raise _NotACond
        sides.append(next(iter(met))[1])
    if sorted(sides) != [0, 1]:
        raise _NotACond
    then_k, else_k = sides.index(1), sides.index(0)
    switches: list[Node] = []  # the Switch of each argument, by its data input
    for _, reads, _, _ in (branches[then_k], branches[else_k]):
        for value in reads.values():
            if value.producer not in switches:
                switches.append(value.producer)
    switches.sort(key=lambda n: graph.nodes.index(n))
    arguments = [s.inputs[0] for s in switches]
    bodies = {}
    for key, k, side in (("then_branch", then_k, 1), ("else_branch", else_k, 0)):
        bodies[key] = _body(graph, f"{merge.name}/{key}", branches[k][0], merge.inputs[k], switches, side)  # type: ignore[arg-type]
    node = graph.add_node("tf.If", [predicate, *arguments], name=graph.unique_name(f"{merge.name}/if"),
                          output_types=[merge.outputs[0].type], subgraphs=bodies)
    graph.replace_all_uses_with(merge.outputs[0], node.outputs[0])
    touched[id(merge)] = merge
    for nodes, _, _, _ in branches:
        touched.update((id(n), n) for n in nodes)
    touched.update((id(n), n) for n in switches)
    graph.nodes.remove(node)
    graph.nodes.insert(graph.nodes.index(merge), node)
    return node


def _body(graph: Graph, name: str, nodes: list[Node], result: Value, switches: list[Node], side: int) -> Graph:
    body = Graph(name, graph.context, graph.registry)
    mapped: dict[int, Value] = {}
    for switch in switches:
        value = body.add_input(body.unique_name(f"{switch.name}/arg"), switch.inputs[0].type)  # type: ignore[union-attr]
        mapped[id(switch.outputs[side])] = value

    def read(value: Value) -> Value:
        found = mapped.get(id(value))
        if found is None:
            raise _NotACond  # the other side's Switch output, read on this side
        return found

    for node in nodes:
        if node.op == CONST_OP:
            mapped[id(node.outputs[0])] = body.add_const(node.attrs.as_tensor("value"), node.name, unique=True)
            continue
        copy = body.add_node(node.op, [None if v is None else read(v) for v in node.inputs], name=node.name,
                             attrs=dict(node.attrs.items()), output_types=[v.type for v in node.outputs],
                             subgraphs={k: b.clone() for k, b in node.subgraphs.items()}, allow_unknown=True)
        for old, new in zip(node.outputs, copy.outputs):
            new.meta = dict(old.meta)
            mapped[id(old)] = new
    body.set_outputs([read(result)])
    return body


def _sweep(graph: Graph, candidates: dict[int, Node]) -> None:
    """Removes the ``candidates`` nothing reads any more (latest first, until none is left to remove)."""
    outputs = {id(v) for v in graph.outputs}
    changed = True
    while changed:
        changed = False
        controlling = {id(c) for n in graph.nodes for c in n.control_inputs}
        for node in reversed(list(graph.nodes)):
            if id(node) not in candidates or id(node) in controlling:
                continue
            if any(v.uses or id(v) in outputs for v in node.outputs):
                continue
            graph.remove_node(node)
            del candidates[id(node)]
            changed = True
