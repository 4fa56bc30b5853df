from __future__ import annotations

import numpy as np
import pytest

from scopefusion import dtypes
from scopefusion.ir.attrs import STR, TENSOR
from scopefusion.ir.compare import first_difference
from scopefusion.ir.core_ops import core_ops as builtin_ops
from scopefusion.ir.graph import Graph, GraphError
from scopefusion.ir.opdef import OpRegistry
from scopefusion.ir.types import IRContext
from scopefusion.ir_builder import format_graph, graphs_equal

F32 = dtypes.FLOAT32


@pytest.fixture
def g():
    reg = OpRegistry(builtin_ops())
    reg.define("Add", "t").input("x").input("y").output("z", follow="x")
    reg.define("Split", "t").input("x").output("a", follow="x").output("b", follow="x")
    reg.define("While", "t").input("x").output("y", follow="x")
    return Graph("main", IRContext(), reg)


def build_small(g: Graph):
    ctx = g.context
    x = g.add_input("x", ctx.tensor(F32, (2,)))
    c = g.add_const(np.ones(2, np.float32), "c")
    a = g.add_node("t.Add", [x, c], name="add", output_types=[ctx.tensor(F32, (2,))])
    s = g.add_node("t.Split", [a.outputs[0]], name="split", output_types=[ctx.tensor(F32, (2,))] * 2)
    b = g.add_node("t.Add", [s.outputs[0], s.outputs[1]], name="add", unique=True, control_inputs=[a])
    g.set_outputs([b.outputs[0], s.outputs[1]])
    return x, c, a, s, b


def test_nodes_register_as_uses_in_insertion_order(g):
    x, c, a, s, b = build_small(g)
    assert x.uses == [(a, 0)]
    assert s.outputs[0].uses == [(b, 0)] and s.outputs[1].uses == [(b, 1)]
    assert a.outputs[0].consumers == [s]
    assert b.name == "add_1"
    g.verify()


def test_nodes_and_values_compare_and_hash_by_identity(g):
    # Writers and fusion searches key sets and dicts by nodes and values themselves: two nodes with the same
    # fields must stay two keys.
    x, c, a, s, b = build_small(g)
    twin = g.add_node("t.Add", [x, c], name="add", unique=True, output_types=[g.context.tensor(F32, (2,))])
    assert len({a, twin}) == 2 and a != twin
    assert len({a.outputs[0], twin.outputs[0]}) == 2
    assert {a.outputs[0]: 1}.get(twin.outputs[0]) is None
    assert hash(a) == object.__hash__(a) and hash(x) == object.__hash__(x)


def test_unique_names_are_deterministic(g):
    g.add_input("n", None)
    names = [g.add_node("t.Add", [g.inputs[0], g.inputs[0]], name="n", unique=True).name for _ in range(3)]
    assert names == ["n_1", "n_2", "n_3"]
    with pytest.raises(GraphError, match="a node named 'n' already exists"):
        g.add_node("t.Add", [g.inputs[0], g.inputs[0]], name="n")


def test_replace_all_uses_with_rewires_consumers_and_outputs(g):
    x, c, a, s, b = build_small(g)
    g.replace_all_uses_with(s.outputs[1], x)
    assert b.inputs[1] is x and s.outputs[1].uses == []
    assert g.outputs[1] is x
    assert (b, 1) in x._uses
    g.verify()


def test_remove_node_requires_no_uses(g):
    x, c, a, s, b = build_small(g)
    with pytest.raises(GraphError, match="still used by split"):
        g.remove_node(a)
    g.set_outputs([s.outputs[1]])
    g.remove_node(b)
    assert "add_1" not in g and s.outputs[0].uses == []
    g.verify()


def test_verify_finds_order_dangling_and_stale_uses(g):
    x, c, a, s, b = build_small(g)
    g.nodes.remove(a)
    g.nodes.append(a)
    with pytest.raises(GraphError, match="reads add:0, which is scheduled later"):
        g.verify()
    g.nodes.remove(a)
    g.nodes.insert(2, a)
    g.verify()
    other = Graph("other", g.context, g.registry)
    y = other.add_input("y", None)
    s.inputs[0] = y  # bypassing replace_input_with leaves the use lists wrong
    with pytest.raises(GraphError, match=r"producer is not in this graph.*missing from the uses"):
        g.verify()


def test_values_from_another_graph_are_refused(g):
    body = Graph("body", g.context, g.registry)
    inner = body.add_input("i", None)
    with pytest.raises(GraphError, match="reads i:0 from graph 'body'"):
        g.add_node("t.Add", [inner, inner])


def test_subgraph_bodies_clone_and_verify(g):
    ctx = g.context
    body = Graph("body", ctx, g.registry)
    i = body.add_input("i", ctx.tensor(F32, (2,)))
    body.set_outputs([body.add_node("t.Add", [i, i]).outputs[0]])
    x = g.add_input("x", ctx.tensor(F32, (2,)))
    w = g.add_node("t.While", [x], subgraphs={"body": body})
    g.set_outputs(w.outputs)
    g.verify()
    clone = g.clone()
    assert graphs_equal(g, clone) and clone.nodes[1].subgraphs["body"] is not body
    clone.nodes[1].subgraphs["body"].nodes[1].set_attr("_tag", 1)
    assert "body" in first_difference(g, clone) and "_tag" in first_difference(g, clone)


def test_text_form_is_stable_and_readable(g):
    build_small(g)
    text = format_graph(g)
    assert text == format_graph(g.clone())
    assert text.splitlines() == [
        "graph main(%x: f32[2]) {",
        "  %c = ge.Const() {value=tensor<f32[2]>(1.0, 1.0)}",
        "  %add = t.Add(%x, %c) : f32[2]",
        "  %split:0, %split:1 = t.Split(%add) : f32[2], f32[2]",
        "  %add_1 = t.Add(%split:0, %split:1, ^add) : ?",
        "  return %add_1, %split:1",
        "}",
    ]


def test_large_constants_print_a_digest(g):
    g.add_const(np.arange(100, dtype=np.float32), "big")
    text = format_graph(g)
    assert "tensor<f32[100]>:" in text and "99.0" not in text


def test_graph_comparison_reports_the_first_difference(g):
    build_small(g)
    other = g.clone()
    assert first_difference(g, other) is None
    other.node("c").set_attr("value", np.zeros(2, np.float32))
    assert first_difference(g, other) == (
        "main/c: attribute 'value' AttrValue(tensor, array([1., 1.], dtype=float32)) vs "
        "AttrValue(tensor, array([0., 0.], dtype=float32))"
    )


def test_const_values_are_read_only_and_shared(g):
    arr = np.arange(4, dtype=np.int32)
    arr.flags.writeable = False
    v = g.add_const(arr, "k")
    assert v.const_value is arr and v.type is g.context.tensor(dtypes.INT32, (4,))


def test_add_const_makes_the_node_add_node_makes():
    """Constants skip add_node's general steps once the registry's ge.Const is known: the nodes, names,
    attributes and types are the same as add_node's, a taken name is still made unique, and a registry
    whose ge.Const needs another attribute still refuses the constant."""
    arrays = [np.ones(2, np.float32), np.arange(6, dtype=np.int64).reshape(2, 3), np.array(3.5, np.float32)]
    fast, slow = Graph("main", IRContext(), OpRegistry(builtin_ops())), Graph("main", IRContext(), OpRegistry(builtin_ops()))
    for i, array in enumerate(arrays * 2):
        fast.add_const(array, f"c{i % 3}")
        out = slow.add_node("ge.Const", name=f"c{i % 3}", attrs={"value": array}, unique=True).outputs[0]
        out.type = slow.context.array_type(array)
    assert [n.name for n in fast.nodes] == ["c0", "c1", "c2", "c0_1", "c1_1", "c2_1"]
    assert graphs_equal(fast, slow) and format_graph(fast) == format_graph(slow)
    assert first_difference(fast, slow) is None
    for made, expected in zip(fast.nodes, slow.nodes):
        assert made.opdef is fast.registry.lookup("ge.Const") and expected.opdef is slow.registry.lookup("ge.Const")
        assert made.op == expected.op and list(made.attrs._attrs) == list(expected.attrs._attrs)
        assert made.outputs[0].type is fast.context.array_type(expected.attrs.as_tensor("value"))
    with pytest.raises(GraphError, match="already exists"):
        fast.add_const(arrays[0], "c0", unique=False)

    registry = OpRegistry([d for d in builtin_ops() if d.name != "Const"])
    registry.define("Const", "ge").output("y").attr("value", TENSOR).attr("origin", STR)
    strict = Graph("main", IRContext(), registry)
    with pytest.raises(GraphError, match="needs attribute 'origin'"):
        strict.add_const(arrays[0], "c")
    assert not strict.nodes


def test_attributes_of_declared_kinds_are_stored_as_the_checks_would_store_them():
    """A framework op (open attributes) keeps attributes of their declared kinds as add_node's checks would
    keep them; a closed op, or an empty name, still goes through the checks and their errors."""
    from scopefusion.ir.attrs import INT, AttrValue
    from scopefusion.ir.opdef import OpDef

    reg = OpRegistry(builtin_ops())
    reg.register(OpDef("Open", "t", open_attrs=True).input("x").output("y", follow="x").attr("axis", INT, default=0))
    reg.define("Closed", "t").input("x").output("y", follow="x").attr("axis", INT, default=0)
    graphs = [Graph("main", IRContext(), reg) for _ in range(2)]
    attrs = {"axis": AttrValue(INT, 2), "extra": AttrValue(STR, "kept"), "_class": AttrValue(STR, "loc")}
    for graph, vouched in zip(graphs, (False, True)):
        x = graph.add_input("x", graph.context.tensor(F32, (2,)))
        graph.add_node("t.Open", [x], name="open", attrs=dict(attrs), attrs_of_declared_kinds=vouched)
        graph.add_node("t.Open", [x], name="bare", attrs_of_declared_kinds=vouched)
        with pytest.raises(GraphError, match="no attribute 'extra'"):
            graph.add_node("t.Closed", [x], name="closed", attrs=dict(attrs), attrs_of_declared_kinds=vouched)
        with pytest.raises(GraphError):
            graph.add_node("t.Open", [x], name="empty", attrs={"": AttrValue(INT, 1)}, attrs_of_declared_kinds=vouched)
    checked, vouched_graph = graphs
    for name in ("open", "bare"):
        assert checked.node(name).attrs._attrs == vouched_graph.node(name).attrs._attrs
        assert list(checked.node(name).attrs._attrs) == list(vouched_graph.node(name).attrs._attrs)
    assert list(vouched_graph.node("open").attrs._attrs) == ["axis", "extra", "_class"]
    assert vouched_graph.node("bare").attrs._attrs == {"axis": AttrValue(INT, 0)}
    assert format_graph(checked) == format_graph(vouched_graph)


def test_nodes_without_inputs_share_one_unchangeable_empty_list(tf_convnet_pb):
    from scopefusion.convert import convert
    from scopefusion.ir.graph import NO_VALUES

    graph = convert(tf_convnet_pb).graph
    no_inputs = [n for n in graph.nodes if not n.inputs]
    assert {n.op for n in no_inputs} >= {"ge.Const", "ge.Data"}
    assert all(n.inputs is NO_VALUES for n in no_inputs)
    assert NO_VALUES == [] and list(NO_VALUES) == []
    with pytest.raises(TypeError, match="assign a new list"):
        no_inputs[0].inputs.append(None)
    with pytest.raises(TypeError):
        no_inputs[0].inputs += [None]
    assert NO_VALUES == []
    clone = graph.clone()  # a copy's nodes have lists of their own
    clone.nodes[0].inputs.append(None)
    assert NO_VALUES == []
