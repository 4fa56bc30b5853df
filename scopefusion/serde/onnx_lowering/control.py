"""Functional control flow: ``If`` / ``StatelessIf`` → ``If``, ``Case`` / ``StatelessCase`` → nested ``If``,
``While`` / ``StatelessWhile`` → ``Loop``; ``PartitionedCall`` / ``StatefulPartitionedCall`` → the body inline.

Each TF body is an IR graph whose inputs are the op's operands (by their ``index``); it is written lowered,
its inputs bound to the operands' tensors (ONNX bodies read enclosing tensors by name).

* ``If(cond, args…)``: both branches become ONNX ``If`` branches with no inputs; a non-boolean ``cond`` is
  compared with zero (TF's truth of a scalar).
* ``Case(index, args…)``: ``If(index == 0, b0, If(index == 1, b1, … b_last))`` — an index out of range
  runs the last branch, as TF's default.
* ``While(vars…)``: ``Loop(M = "", c0, vars…)`` where ``c0 = cond(vars)`` is computed before the loop and
  the loop body is ``vars' = body(vars); c = cond(vars')`` (TF checks the condition before each iteration).
* TF1 frames (``Enter`` / ``Merge`` / ``Switch`` / ``NextIteration`` / ``Exit``) are rebuilt as ``While`` and
  ``If`` before lowering (:mod:`.tf1_frames`); what is left of them forms no loop or cond and declines, saying so.
"""

from __future__ import annotations

from typing import Callable, Sequence

import numpy as np

from ...dialects.tf.control import merged_shape
from ...ir.graph import DATA_OP, Graph
from ...ir.types import TensorType
from ..onnx_attrs import type_proto
from ..onnx_node import append_nodes
from ..onnx_proto import GraphProto, TensorProto, ValueInfoProto, make_node, make_tensor_value_info
from .bodies import typed_body
from .emitter import LoweringEmitter
from .loop_scans import scanned_lists
from .tensor_lists import declared_element_array, holds_list, list_element_type

__all__ = ["LOWERINGS"]


def _truth(e: LoweringEmitter, name: str, i: int) -> str:
    dtype = e.dtype(i)
    if dtype.numpy == np.dtype(np.bool_):
        return name
    if e.rank(i) != 0:
        e.decline("its condition is not a scalar")
    return e.op("Not", [e.op("Equal", [name, e.typed_scalar(0, dtype, "zero")])[0]])[0]


def _outputs_info(graph: Graph, names: Sequence[str]) -> list[ValueInfoProto]:
    infos = []
    for value, name in zip(graph.outputs, names):
        info = ValueInfoProto(name=name)
        if isinstance(value.type, TensorType) and value.type.rank is not None:
            info.type.CopyFrom(type_proto(value.type.with_shape([-1] * value.type.rank)))
        elif isinstance(value.type, TensorType):
            info.type.CopyFrom(type_proto(value.type))
        infos.append(info)
    return infos


def _branch(e: LoweringEmitter, graph: Graph, args: Sequence[str]) -> GraphProto:
    branch = GraphProto(name=e.fresh(graph.name or "branch"))
    outputs = e.inline(graph, args, into=branch)
    # A branch output must be computed in the branch (or be an outer tensor ONNX can pass through an Identity).
    final = []
    for name in outputs:
        out = e.fresh("out")
        branch.node.append(make_node("Identity", [name], [out], name=e.fresh("Identity")))
        final.append(out)
    branch.output.extend(_outputs_info(graph, final))
    return branch


def _if(e: LoweringEmitter) -> None:
    args = [e.input(i) for i in range(1, len(e.inputs))]
    types = [e.input_type(i) for i in range(1, len(e.inputs))]
    then_branch = _branch(e, typed_body(e.body("then_branch"), types), args)
    else_branch = _branch(e, typed_body(e.body("else_branch"), types), args)
    e.op("If", [_truth(e, e.input(0), 0)], outputs=list(e.outputs), then_branch=then_branch, else_branch=else_branch)


def _case(e: LoweringEmitter) -> None:
    count = sum(1 for k in e.node.subgraphs if k.startswith("branches:"))
    if count == 0:
        e.decline("it has no branches")
    args = [e.input(i) for i in range(1, len(e.inputs))]
    index = e.input(0)
    dtype = e.dtype(0)

    def chain(k: int, outputs: Sequence[str | None]) -> list[str]:
        if k == count - 1:
            body = e.body(f"branches:{k}")
            names = e.inline(body, args)
            return [e.op("Identity", [n], outputs=[o])[0] for n, o in zip(names, outputs)]
        taken = _branch(e, e.body(f"branches:{k}"), args)
        rest = GraphProto(name=e.fresh(f"case_rest_{k}"))
        saved, e.nodes = e.nodes, []
        rest_outputs = chain(k + 1, [None] * len(outputs))
        append_nodes(rest, e.nodes)
        e.nodes = saved
        rest.output.extend(_outputs_info(e.body(f"branches:{k + 1}"), rest_outputs))
        test = e.op("Equal", [index, e.typed_scalar(k, dtype, "branch")])[0]
        return e.op("If", [test], outputs=list(outputs), then_branch=taken, else_branch=rest)

    chain(0, list(e.outputs))


def _loop_variables(e: LoweringEmitter, body: Graph) -> tuple[list[TensorType | None], ...]:
    """Per loop variable: the type its body argument gets (TF's shape invariant: the dims the loop's operand
    and result agree on; an argument the body returns unchanged keeps its operand's type), the type of
    its elements when it is a list, and the type the ONNX ``Loop`` carries it as."""
    arguments: list[TensorType | None] = []
    elements: list[TensorType | None] = []
    carried: list[TensorType | None] = []
    returned = [v.producer.attrs.get("index") if v.producer.op == DATA_OP else None for v in body.outputs]
    for k, value in enumerate(e.node.inputs):
        t = value.type if value is not None and isinstance(value.type, TensorType) else None
        if value is not None and holds_list(value):
            element = list_element_type(value)
            if element is None:
                e.decline(f"no op touching the list of loop variable {k} tells its element dtype and rank")
            arguments.append(t)
            elements.append(element)
            carried.append(element.with_shape((-1,) * (1 + len(element.shape))))
            continue
        out = e.node.outputs[k].type if k < len(e.node.outputs) else None
        at = returned[k] if k < len(returned) else None
        unchanged = at is not None and int(at) == k
        if t is not None and t.rank is not None and not unchanged:
            shape = merged_shape([t.shape, out.shape]) if isinstance(out, TensorType) and out.rank is not None else None
            t = t.with_shape(shape if shape is not None else (-1,) * t.rank)
        arguments.append(t)
        elements.append(None)
        carried.append(t.with_shape((-1,) * t.rank) if t is not None and t.rank is not None else t)
    return arguments, elements, carried


def _info(name: str, t: TensorType | None) -> ValueInfoProto:
    info = ValueInfoProto(name=name)
    if t is not None:
        info.type.CopyFrom(type_proto(t))
    return info


def _while(e: LoweringEmitter) -> None:
    arguments, elements, carried_types = _loop_variables(e, e.body("body"))
    declared = [declared_element_array(e, v) for v in e.node.inputs]
    cond = typed_body(e.body("cond"), arguments, elements, declared)
    body = typed_body(e.body("body"), arguments, elements, declared)
    scans = scanned_lists(body, cond, list(e.node.inputs))
    # Loop invariants (returned unchanged) and scanned lists are not carried: the body reads the outer tensor.
    skipped = {s.index for s in scans} | _invariants(body)
    kept = [k for k in range(len(e.inputs)) if k not in skipped]
    initial = [e.input(i) for i in range(len(e.inputs))]
    first = e.inline(cond, initial)
    if len(first) != 1:
        e.decline("its condition has more than one output")
    loop = GraphProto(name=e.fresh("loop_body"))
    iteration, carried_cond = e.fresh("iteration"), e.fresh("cond_in")
    carried = {k: e.fresh(f"var{k}") for k in kept}
    loop.input.append(make_tensor_value_info(iteration, TensorProto.INT64, []))
    loop.input.append(make_tensor_value_info(carried_cond, TensorProto.BOOL, []))
    loop.input.extend(_info(carried[k], carried_types[k]) for k in kept)
    updated = e.inline(body, [carried.get(k, initial[k]) for k in range(len(initial))], into=loop)
    if len(updated) != len(initial) + len(scans):
        e.decline(f"its body gives {len(updated) - len(scans)} values for {len(initial)} loop variables")
    again = e.inline(cond, updated[: len(initial)], into=loop)
    names = []
    for name in [again[0], *(updated[k] for k in kept), *updated[len(initial):]]:
        out = e.fresh("next")
        loop.node.append(make_node("Identity", [name], [out], name=e.fresh("Identity")))
        names.append(out)
    loop.output.append(make_tensor_value_info(names[0], TensorProto.BOOL, []))
    loop.output.extend(_info(name, carried_types[k]) for name, k in zip(names[1:], kept))
    for name, scan in zip(names[1 + len(kept):], scans):
        t = scan.item.type if isinstance(scan.item.type, TensorType) else elements[scan.index]
        loop.output.append(_info(name, t.with_shape((-1,) * t.rank) if t is not None and t.rank is not None else t))
    start = _truth_of(e, first[0], cond)
    # Every Loop output is named (onnxruntime does not take a Loop output left out); unused ones are pruned later.
    stacked = [e.fresh("stacked") for _ in scans]
    e.op("Loop", ["", start, *(initial[k] for k in kept)],
         outputs=[*(e.outputs[k] if e.used(k) else None for k in kept), *stacked], body=loop)
    for scan, name in zip(scans, stacked):
        if e.used(scan.index):
            _pad_to_reserved(e, name, initial[scan.index], e.outputs[scan.index])
    for k in sorted(skipped - {s.index for s in scans}):
        if e.used(k):
            e.op("Identity", [initial[k]], outputs=[e.outputs[k]])


def _invariants(body: Graph) -> set[int]:
    """The loop variables ``body`` returns as it got them."""
    found = set()
    for k, value in enumerate(body.outputs):
        node = value.producer
        if node.op == DATA_OP and node.attrs.get("_outer_name") is None and node.attrs.get("index") == k:
            found.add(k)
    return found


def _pad_to_reserved(e: LoweringEmitter, stacked: str, reserved: str, out: str) -> None:
    """``stacked`` (the elements the loop wrote) followed by zero elements up to the reserved list's length."""
    written = e.op("Shape", [stacked], start=0, end=1)[0]
    length = e.op("Shape", [reserved], start=0, end=1)[0]
    missing = e.op("Max", [e.op("Sub", [length, written])[0], e.ints([0], "none")])[0]
    shape = e.op("Concat", [missing, e.op("Shape", [stacked], start=1)[0]], axis=0)[0]
    zeros = e.op("ConstantOfShape", [shape])[0]
    zeros = e.op("CastLike", [zeros, stacked])[0]
    e.op("Concat", [stacked, zeros], outputs=[out], axis=0)


def _truth_of(e: LoweringEmitter, name: str, cond: Graph) -> str:
    t = cond.outputs[0].type if cond.outputs else None
    if isinstance(t, TensorType) and t.dtype.numpy != np.dtype(np.bool_):
        return e.op("Cast", [name], to=TensorProto.BOOL)[0]
    return e.op("Reshape", [name, e.ints([], "scalar")])[0]


def _tf1_frame(e: LoweringEmitter) -> None:
    e.decline(
        "TF1 control-flow frames (Enter, Merge, Switch, NextIteration, Exit) that form no while loop or cond the "
        "exporter can rebuild are not lowered to ONNX; export the model with TF2 control flow (While / If) instead"
    )


def _call(e: LoweringEmitter) -> None:
    keys = list(e.node.subgraphs)
    if len(keys) != 1:
        e.decline(f"it has {len(keys)} bodies, not one")
    names = e.inline(e.body(keys[0]), [e.input(i) for i in range(len(e.inputs))])
    for k, name in enumerate(names):
        if e.used(k):
            e.op("Identity", [name], outputs=[e.outputs[k]])


LOWERINGS: list[tuple[str, Callable[[LoweringEmitter], None]]] = [
    ("If", _if), ("StatelessIf", _if), ("Case", _case), ("StatelessCase", _case), ("While", _while),
    ("StatelessWhile", _while), ("PartitionedCall", _call), ("StatefulPartitionedCall", _call),
    *((op, _tf1_frame) for op in ("Enter", "Exit", "Merge", "Switch", "NextIteration", "LoopCond")),
]  # fmt: skip
