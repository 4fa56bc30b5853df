"""The tensor size checks: ``checked_arena_fits`` raises what ``check_tensor_sizes`` raises and answers what
``arena_fits`` answers, on graphs of every outcome."""

from __future__ import annotations

import pytest

from scopefusion import dtypes
from scopefusion.budgets import MAX_ELEMENTS
from scopefusion.errors import InferenceError
from scopefusion.ir.opdef import OpDef, ParamType
from scopefusion.ir_builder import Graph, IRContext, OpRegistry, builtin_ops
from scopefusion.ir_builder.memory_plan import DEFAULT_ALIGNMENT
from scopefusion.ir_builder.size_limits import arena_fits, check_tensor_sizes, checked_arena_fits

F32 = dtypes.FLOAT32
BIG = MAX_ELEMENTS // 16  # a dim whose float32 tensor takes a quarter of what a size can hold


def _graph(*shapes) -> Graph:
    """A chain of ops, one per shape, each output of that shape."""
    op = OpDef("Op", "m").input("x", ParamType.DYNAMIC).output("y", ParamType.DYNAMIC)
    g = Graph("g", IRContext(), OpRegistry(builtin_ops() + [op]))
    x = g.add_input("x", g.context.tensor(F32, (1,)))
    for i, shape in enumerate(shapes):
        x = g.add_node("m.Op", [x], name=f"n{i}", output_types=[g.context.tensor(F32, shape)]).outputs[0]
    g.set_outputs([x])
    return g


def _separately(graph: Graph):
    try:
        check_tensor_sizes(graph)
    except InferenceError as e:
        return str(e)
    return arena_fits(graph)


def _together(graph: Graph):
    try:
        return checked_arena_fits(graph)
    except InferenceError as e:
        return str(e)


@pytest.mark.parametrize("shapes, expected", [
    (((2, 3), (2, 3), (-1, 4)), True),  # the same type twice, and an unknown dim
    (((BIG,),), True),
    (((BIG,), (BIG // 2,), (BIG,)), False),  # each fits, their sum does not
    (((2, 3), (MAX_ELEMENTS + 1, 2)), "a dim larger than a size can hold"),
    (((BIG, 16), (1 << 62,)), "more than a tensor size can hold"),  # the first of two bad types is named
])
def test_one_walk_finds_what_the_check_and_the_arena_bound_find(shapes, expected):
    graph = _graph(*shapes)
    together = _together(graph)
    assert together == _separately(graph)
    assert together is expected if isinstance(expected, bool) else expected in together


def test_sizes_found_for_one_graph_serve_the_next_graph_of_its_context():
    first = _graph((2, 3), (BIG,))
    assert checked_arena_fits(first) is True
    remembered = first.context.memo["scopefusion.ir_builder.size_limits"]
    assert remembered[first.context.tensor(F32, (BIG,))] == BIG * 4 + DEFAULT_ALIGNMENT
    # A graph of the same context: the sizes found for the first count again, and a new type is still checked.
    second = Graph("h", first.context, first.registry)
    x = second.add_input("x", first.context.tensor(F32, (BIG,)))
    for i, shape in enumerate([(BIG,), (BIG // 2,), (MAX_ELEMENTS + 1, 2)]):
        x = second.add_node("m.Op", [x], name=f"n{i}", output_types=[first.context.tensor(F32, shape)]).outputs[0]
    second.set_outputs([x])
    assert _together(second) == _separately(second) and "a dim larger than a size can hold" in _together(second)
    second.nodes.pop()
    assert _together(second) is _separately(second) is False
