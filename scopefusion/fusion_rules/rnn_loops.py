"""What DynamicRNNFusion and DynamicGRUFusion share: recognising a recurrent loop over a sequence.

Two loop forms are read, both as a list of loop variables (initial value, value inside the body, next
value, final value) and the comparisons of the loop condition:

* TF2 functional control flow (Keras ``LSTM`` / ``GRU`` with ``unroll=False``, frozen): one ``While`` /
  ``StatelessWhile`` node whose ``body`` and ``cond`` functions are separate graphs; a body output that
  returns its own input unchanged is loop-invariant (the weights, the input list, the bound);
* TF1 frames (``tf.compat.v1.nn.dynamic_rnn``): ``Enter`` → ``Merge`` → ``Switch`` → ``Identity`` ... →
  ``NextIteration`` → back to the ``Merge``, ``Exit`` out of the ``Switch``, one ``LoopCond``; loop
  invariants come in through ``Enter(is_constant=True)``.

:func:`analyze_sequence_loop` then proves that the loop is an RNN over the time axis of one sequence:

* the sequence is unstacked along its first axis (``TensorListFromTensor``; ``TensorArrayScatterV3``
  over ``Range(0, T)``), after an optional ``Transpose`` of perm ``[1, 0, 2]`` from batch-major;
* each step reads element ``t`` of it (``TensorListGetItem``, ``TensorArrayReadV3``) where ``t`` is a
  counter (starts at 0, adds 1 per step);
* each step writes one value at index ``t`` (or always at 0, Keras ``return_sequences=False``) into an
  output list that is stacked after the loop (``TensorListStack``, ``TensorArrayGatherV3`` over
  ``Range(0, T)``), with an optional ``Transpose`` back to batch-major;
* every comparison of the condition tests a counter against a bound, the smallest bound being the
  number of steps ``T`` of the sequence (a static number, or the sequence's own dimension read
  through ``Shape`` / ``StridedSlice`` / ``Minimum`` / ``Maximum``), so the loop runs exactly ``T`` steps;
* the remaining loop variables are the cell's states, left to the cell rule to identify.

Values (weights, perms, bounds, shapes) are read through :mod:`.rnn_values`.

NOTE: the trip count is proven under the assumption that a sequence has at least one step (TF1's
``dynamic_rnn`` bounds its loop by ``Minimum(T, Maximum(1, T))``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterable

from scopefusion.scope import ScopeGraph

from .base.constants import WHILE
from .rnn_values import ADD_OPS, Env, LazyShape, Refused, Tensor, full_slice, int_list, shape_of, slice_index, sym

__all__ = [
    "WHILE_OPS",
    "Loop",
    "LoopVar",
    "SequenceLoop",
    "analyze_sequence_loop",
    "frame_loop",
    "while_loop",
]

WHILE_OPS = WHILE


# ------------------------------------------------------------------------------------------ loops
@dataclass
class LoopVar:
    """One loop variable: ``init`` (enclosing graph), ``body`` and ``next`` (the body's graph), the
    final value ``exit`` when the graph has one, and where ``init`` enters the loop (``entry``: node
    and input slot)."""

    index: int
    init: Tensor
    body: Tensor
    next: Tensor
    exit: Tensor | None
    entry: tuple[str, int]
    merge: str = ""
    switch: str = ""


@dataclass
class Loop:
    """A loop of either form; ``core`` holds its enclosing-graph nodes (the While, or every frame node)."""

    form: str  # "while" or "frame"
    node: Any  # the While node, or the LoopCond
    main: Env
    body: Env
    vars: list[LoopVar]
    invariants: dict[int, Tensor]  # var index -> enclosing tensor (While form only)
    conds: list[tuple[LoopVar, Any]]  # (counter, bound as sym)
    core: set[str]


def while_loop(graph: ScopeGraph, node: Any) -> Loop:
    """The TF2 ``While`` loop ``node`` as a :class:`Loop`; Refused when its bodies are not readable."""
    body_src = node.subgraphs.get("body")
    cond_src = node.subgraphs.get("cond")
    if body_src is None or cond_src is None:
        raise Refused(f"{node.name} has no body and cond graphs")
    n = len(node.inputs)
    if (len(body_src.inputs), len(body_src.outputs), len(cond_src.inputs)) != (n, n, n) or not cond_src.outputs:
        raise Refused(f"{node.name}: the body or cond signature does not match the {n} loop inputs")
    main = Env(graph)
    body_graph = ScopeGraph.build(body_src, tree=False)  # read by dataflow only
    probe = Env(body_graph)
    invariant: dict[int, Tensor] = {}
    for k in range(n):
        out = body_src.outputs[k]
        if probe.resolve((out.node, out.index)) == (probe, (body_src.inputs[k].node, 0)):
            invariant[k] = node.inputs[k]
    body = Env(body_graph, outer=main, invariants={body_src.inputs[k].node: t for k, t in invariant.items()})
    cond_invariants = {cond_src.inputs[k].node: t for k, t in invariant.items()}
    cond = Env(ScopeGraph.build(cond_src, tree=False), outer=main, invariants=cond_invariants)
    variables = []
    for k in range(n):
        if k in invariant:
            continue
        out = body_src.outputs[k]
        body_value = (body_src.inputs[k].node, 0)
        variables.append(LoopVar(k, node.inputs[k], body_value, (out.node, out.index), (node.name, k), (node.name, k)))
    by_input = {cond_src.inputs[v.index].node: v for v in variables}
    result = cond_src.outputs[0]
    tested = [(by_input.get(var_t[0]), bound) for var_t, bound in _comparisons(cond, (result.node, result.index))]
    conds = [(v, bound) for v, bound in tested if v is not None]
    if len(conds) != len(tested):
        raise Refused(f"{node.name}: a comparison of the loop condition does not test a loop variable")
    return Loop("while", node, main, body, variables, invariant, conds, {node.name})


def _comparisons(env: Env, tensor: Tensor) -> list[tuple[Tensor, Any]]:
    """The ``Less(variable, bound)`` terms of a condition written as a ``LogicalAnd`` of them."""
    _, node, _ = env.producer(tensor)
    if node.op_type == "LogicalAnd":
        return [c for a in node.inputs for c in _comparisons(env, a)]
    if node.op_type == "Less":
        variable = env.resolve(node.inputs[0])[1]
        return [(variable, sym(env, node.inputs[1]))]
    raise Refused(
        f"the loop condition uses {node.name} ({node.op_type}); only a LogicalAnd of Less comparisons is read"
    )


def frame_loop(graph: ScopeGraph, loop_cond: Any) -> Loop:
    """The TF1 frame whose ``LoopCond`` is ``loop_cond`` as a :class:`Loop`."""
    main = Env(graph)
    switches = [graph.node(c) for c, slot, _ in graph.consumers(loop_cond.name) if slot == 1]
    variables: list[LoopVar] = []
    for k, switch in enumerate(switches):
        merge = graph.node(switch.inputs[0][0])
        if switch.op_type != "Switch" or merge.op_type != "Merge" or len(merge.inputs) != 2:
            raise Refused(f"{switch.name} does not switch a Merge of the loop")
        enter, back = (graph.node(p) for p, _ in merge.inputs)
        if enter.op_type == "NextIteration":
            enter, back = back, enter
        if enter.op_type != "Enter" or back.op_type != "NextIteration":
            raise Refused(f"{merge.name} does not merge an Enter and a NextIteration")
        body: Tensor = (switch.name, 1)
        readers = [c for c, slot, index in graph.consumers(switch.name) if index == 1 and slot >= 0]
        if len(readers) == 1 and graph.node(readers[0]).op_type == "Identity":
            body = (readers[0], 0)
        exits = [c for c, _, index in graph.consumers(switch.name) if index == 0 and graph.node(c).op_type == "Exit"]
        variables.append(LoopVar(k, enter.inputs[0], body, back.inputs[0], (exits[0], 0) if exits else None,
                                 (enter.name, 0), merge.name, switch.name))
    frame = enter_frame = None
    for v in variables:
        enter_frame = graph.node(v.entry[0]).attrs.get("frame_name")
        frame = frame or enter_frame
        if enter_frame != frame:
            raise Refused(f"the loop variables of {loop_cond.name} enter different frames")
    core = _frame_nodes(graph, frame, loop_cond.name)
    by_merge = {v.merge: v for v in variables}
    tested = [(by_merge.get(var_t[0]), bound) for var_t, bound in _comparisons(main, loop_cond.inputs[0])]
    conds = [(v, bound) for v, bound in tested if v is not None]
    if len(conds) != len(tested):
        raise Refused(f"{loop_cond.name}: a comparison of the loop condition does not test a loop variable")
    return Loop("frame", loop_cond, main, main, variables, {}, conds, core)


def _frame_nodes(graph: ScopeGraph, frame: str | None, loop_cond: str) -> set[str]:
    """Every node of the frame: reached from its ``Enter`` nodes, up to and including its ``Exit`` nodes."""
    enters = [n.name for n in graph.nodes_by_type("Enter") if n.attrs.get("frame_name") == frame]
    seen = set(enters)
    stack = list(enters)
    by_name = graph.source.by_name
    readers = graph.source.out_edges  # node -> each consumer once, in first-edge order
    while stack:
        name = stack.pop()
        node = by_name[name]
        if node.op_type == "Exit":
            continue
        for consumer in readers[name]:
            if consumer in seen:
                continue
            found = by_name[consumer]
            if found.op_type == "Enter" and found.attrs.get("frame_name") != frame:
                raise Refused(f"the loop of {loop_cond} holds a nested loop ({consumer})")
            if found.op_type == "LoopCond" and found.name != loop_cond:
                raise Refused(f"the loop of {loop_cond} holds a second loop condition ({consumer})")
            seen.add(consumer)
            stack.append(consumer)
    return seen


# ------------------------------------------------------------------------------------------ the sequence
@dataclass
class SequenceLoop:
    """A loop proven to run a cell over the steps of one sequence; see the module docstring.

    ``x`` is the time-major sequence the loop unstacks, entering the loop at ``x_entry`` (node, input
    slot); ``x_t`` the step's input and ``written`` the value written per step, both in the body's graph;
    ``y`` the tensor standing for the time-major output sequence (or, when ``return_sequences`` is False,
    for the last output); ``states`` the loop variables left to the cell; ``core`` the enclosing-graph
    nodes a fusion must claim. ``batch_in`` / ``batch_out`` name the Transposes from and back to
    batch-major when both are there (``batch_out`` is None when only the last output is read).
    """

    loop: Loop
    x: Tensor
    x_entry: tuple[str, int]
    input_size: int
    x_t: Tensor
    written: Tensor
    y: Tensor
    return_sequences: bool
    states: list[LoopVar]
    core: set[str]
    batch_in: str | None = None
    batch_out: str | None = None


def _counters(loop: Loop) -> dict[int, LoopVar]:
    """Loop variables that start at 0 and add 1 per step."""
    found = {}
    for v in loop.vars:
        start = loop.main.value(v.init)
        if start is None or start.size != 1 or start.dtype.kind not in "iu" or int(start.reshape(())) != 0:
            continue
        env, node, _ = loop.body.producer(v.next)
        if env is not loop.body or node.op_type not in ADD_OPS:
            continue
        a, b = node.inputs
        for var, step in ((a, b), (b, a)):
            one = loop.body.value(step)
            if loop.body.same(var, v.body) and one is not None and one.size == 1 and int(one.reshape(())) == 1:
                found[v.index] = v
    return found


def _single(items: Iterable[Any], what: str) -> Any:
    items = list(items)
    if len(items) != 1:
        raise Refused(f"{what}: found {len(items)}, expected one")
    return items[0]


def _consumers(graph: ScopeGraph, name: str, index: int | None = None) -> list[tuple[Any, int]]:
    found = graph.consumers(name)
    return [(graph.node(c), slot) for c, slot, i in found if slot >= 0 and (index is None or i == index)]


def _is_time_batch_swap(env: Env, node: Any) -> bool:
    perm = int_list(env.value(node.inputs[1])) if node.op_type == "Transpose" else None
    return perm is not None and len(perm) >= 2 and perm[:2] == [1, 0] and perm[2:] == list(range(2, len(perm)))


def _is_range(env: Env, tensor: Tensor, steps: Any) -> bool:
    _, node, _ = env.producer(tensor)
    if node.op_type != "Range":
        return False
    start, limit, delta = (sym(env, a) for a in node.inputs)
    return start == 0 and delta == 1 and limit == steps


def analyze_sequence_loop(loop: Loop) -> SequenceLoop:
    """Proves ``loop`` is an RNN over one sequence (see the module docstring); Refused says what is not."""
    graph = loop.main.graph
    body = loop.body
    counters = _counters(loop)
    var_of_body = {body.resolve(v.body): v for v in loop.vars}
    core = set(loop.core)

    # --- the read: element t of the unstacked sequence
    if loop.form == "while":
        reads = [n for n in body.graph.nodes_by_type("TensorListGetItem")]
        read = _single(reads, f"{loop.node.name}: reads of a sequence in the loop body")
        list_env, unstack, _ = body.producer(read.inputs[0])
        if list_env is not loop.main or unstack.op_type != "TensorListFromTensor":
            raise Refused(f"{read.name} does not read a loop-invariant TensorListFromTensor")
        time_major_t = unstack.inputs[0]
        element = int_list(loop.main.value(unstack.inputs[1]))
        x_entry = (unstack.name, 0)
        core.add(unstack.name)
    else:
        reads = [graph.node(n) for n in loop.core if graph.node(n).op_type == "TensorArrayReadV3"]
        read = _single(reads, f"{loop.node.name}: TensorArray reads in the loop")
        handle = loop.main.producer(read.inputs[0])[1]
        _, scatter, _ = loop.main.producer(read.inputs[2])
        fills = scatter.op_type == "TensorArrayScatterV3" and scatter.inputs[0] == (handle.name, 0)
        if handle.op_type != "TensorArrayV3" or not fills:
            raise Refused(f"{read.name} does not read a TensorArray filled by TensorArrayScatterV3")
        time_major_t = scatter.inputs[2]
        known = handle.attrs.get("element_shape")
        element = [int(d) for d in known] if isinstance(known, (list, tuple)) and None not in known else None
        x_entry = (scatter.name, 2)
        core |= {handle.name, scatter.name}
    index_var = var_of_body.get(body.resolve(read.inputs[1]))
    if index_var is None or index_var.index not in counters:
        raise Refused(f"{read.name} reads the sequence at an index that is not a step counter")
    shape = _sequence_shape(loop, time_major_t, element)
    if shape is None:
        raise Refused(f"the sequence {time_major_t[0]} is not shown to have rank 3 and a static feature size")
    steps = shape[0]
    if loop.form == "frame" and not _is_range(loop.main, scatter.inputs[1], steps):
        raise Refused(f"{scatter.name} does not scatter the whole sequence over Range(0, {steps})")

    # --- the write: one value per step into the output list, stacked after the loop
    written, y, return_sequences, out_var = _output(loop, index_var, steps, core)

    # --- the condition: the loop runs exactly `steps` steps
    if not loop.conds:
        raise Refused(f"{loop.node.name}: the loop condition compares nothing")
    exact = False
    for var, bound in loop.conds:
        if var.index not in counters:
            raise Refused(f"the loop condition tests loop variable {var.index}, which is not a step counter")
        if bound == steps:
            exact = True
        elif not (isinstance(bound, int) and isinstance(steps, int) and bound >= steps):
            raise Refused(
                f"the loop condition bounds a counter by {bound!r}, which is not shown to be at least the "
                f"{steps!r} steps of the sequence"
            )
    if not exact:
        raise Refused(f"no comparison of the loop condition bounds it by the {steps!r} steps of the sequence")

    states = [v for v in loop.vars if v.index not in counters and v is not out_var]
    # --- batch-major: a Transpose swapping the first two axes on both sides (or on the input alone when
    # only the last output is read)
    _, pre, _ = loop.main.producer(time_major_t)
    post = _consumers(graph, y[0], y[1]) if return_sequences else []
    named = any(o.node == y[0] and o.index == y[1] for o in graph.source.outputs)
    swap_in = pre.op_type == "Transpose" and _is_time_batch_swap(loop.main, pre)
    swap_out = len(post) == 1 and _is_time_batch_swap(loop.main, post[0][0]) and not named
    return SequenceLoop(
        loop, time_major_t, x_entry, shape[2], body.resolve((read.name, 0))[1], written, y, return_sequences,
        states, core, pre.name if swap_in and (swap_out or not return_sequences) else None,
        post[0][0].name if swap_in and swap_out else None,
    )


def _sequence_shape(loop: Loop, tensor: Tensor, element: list[int] | None) -> tuple | None:
    """``(steps, batch, features)`` of the time-major sequence, from its shape and the element shape of
    the list it is unstacked into; None unless the rank is 3 and the feature size static."""
    shape = shape_of(loop.main, tensor)
    if element is not None and len(element) == 1 and element[0] < 0:
        element = None  # an element shape of unknown rank
    if isinstance(shape, LazyShape):
        if element is None or len(element) != 2:
            return None
        shape = (shape[0], shape[1], shape[2])
    features = shape[2] if len(shape) == 3 else None
    if element is not None and len(element) == 2 and element[1] >= 0:
        features = element[1] if not isinstance(features, int) or features == element[1] else None
    if len(shape) != 3 or not isinstance(features, int):
        return None
    return (shape[0], shape[1], features)


def _output(loop: Loop, index_var: LoopVar, steps: Any, core: set[str]) -> tuple[Tensor, Tensor, bool, LoopVar]:
    """``(written, y, return_sequences, output variable)``; adds the stacking nodes to ``core``."""
    graph = loop.main.graph
    body = loop.body
    found = []
    for v in loop.vars:
        env, node, _ = body.producer(v.next)
        if env is body and node.op_type in ("TensorListSetItem", "TensorArrayWriteV3"):
            found.append((v, node))
    out_var, write = _single(found, f"{loop.node.name}: loop variables written per step")
    flow_slot, index_slot, value_slot = (0, 1, 2) if write.op_type == "TensorListSetItem" else (3, 1, 2)
    if not body.same(write.inputs[flow_slot], out_var.body):
        raise Refused(f"{write.name} does not write into the list it carries")
    at = body.resolve(write.inputs[index_slot])
    index = body.value(write.inputs[index_slot])
    if at == body.resolve(index_var.body):
        return_sequences = True
    elif write.op_type == "TensorListSetItem" and index is not None and index.size == 1 and not index.reshape(()):
        return_sequences = False  # Keras return_sequences=False: the last output, always at index 0
    else:
        raise Refused(f"{write.name} writes at an index that is neither the step counter nor 0")
    written = body.resolve(write.inputs[value_slot])[1]
    if out_var.exit is None:
        raise Refused(f"the output sequence of {loop.node.name} is not read after the loop")
    if write.op_type == "TensorListSetItem":
        _, reserve, _ = loop.main.producer(out_var.init)
        size = sym(loop.main, reserve.inputs[1]) if reserve.op_type == "TensorListReserve" else None
        if size != (steps if return_sequences else 1):
            raise Refused(f"the output list of {loop.node.name} is not reserved with one element per step")
        stack, _ = _single(_consumers(graph, *out_var.exit), f"readers of {out_var.exit[0]}:{out_var.exit[1]}")
        if stack.op_type != "TensorListStack":
            raise Refused(f"the output list of {loop.node.name} is read by {stack.name} ({stack.op_type}), not stacked")
        core |= {reserve.name, stack.name}
        y: Tensor = (stack.name, 0)
        if not return_sequences:
            last, _ = _single(_consumers(graph, stack.name, 0), f"readers of {stack.name}")
            bounds = [int_list(loop.main.value(a)) for a in last.inputs[1:]]
            begin, end, strides = bounds if len(bounds) == 3 else (None, None, None)
            idx = None
            if last.op_type == "StridedSlice" and begin is not None and end is not None and strides is not None:
                idx = slice_index(last, begin, end, strides, rank=3)
            if idx is None or idx[0] not in (0, -1) or not all(full_slice(s) for s in idx[1:]):
                raise Refused(f"the last output of {loop.node.name} is read by {last.name}, not taken as element -1")
            core.add(last.name)
            y = (last.name, 0)
        return written, y, return_sequences, out_var
    # TF1: TensorArrayWriteV3(Enter(handle), t, value, flow) ... TensorArrayGatherV3(handle, Range(0, T), Exit(flow))
    handle = loop.main.producer(write.inputs[0])[1]
    if handle.op_type != "TensorArrayV3" or not loop.main.same(out_var.init, (handle.name, 1)):
        raise Refused(f"{write.name} does not write the TensorArray whose flow the loop carries")
    if sym(loop.main, handle.inputs[0]) != steps:
        raise Refused(f"the output TensorArray {handle.name} does not hold one element per step")
    gather, _ = _single(_consumers(graph, *out_var.exit), f"readers of {out_var.exit[0]}")
    gathers = gather.op_type == "TensorArrayGatherV3" and gather.inputs[0] == (handle.name, 0)
    if not gathers or not _is_range(loop.main, gather.inputs[1], steps):
        raise Refused(f"the output TensorArray of {loop.node.name} is not gathered whole over Range(0, {steps!r})")
    core |= {handle.name, gather.name}
    return written, (gather.name, 0), True, out_var
