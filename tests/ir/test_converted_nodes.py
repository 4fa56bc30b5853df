"""Framework nodes converted one to one are added through ``Graph._add_converted``, without ``add_node``'s
general steps: the graphs (attribute maps in order, uses in order, control inputs) and the converted bytes
are exactly what ``add_node`` gives, on TF and ONNX models, and the general steps still refuse what they
refused. Values inside TF1 loop frames are marked as such, and only those."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from scopefusion.convert import convert
from scopefusion.ir.attrs import FLOAT, AttrValue
from scopefusion.ir.compare import first_difference
from scopefusion.ir.core_ops import core_ops
from scopefusion.ir.graph import Graph, GraphError
from scopefusion.ir.opdef import OpDef, OpRegistry
from scopefusion.ir.types import IRContext

REPO = Path(__file__).resolve().parents[2]
MODELS = ["tf_mobilenet_pb", "tf_bert_pb", "tf1_cond_pb", "tf2_control_flow_pb", "torch_opset17"]


@pytest.fixture(params=MODELS)
def model_path(request) -> Path:
    if request.param.startswith("torch_opset"):
        return REPO / "testdata" / f"torch_encoder_opset{request.param[-2:]}.onnx"
    return request.getfixturevalue(request.param)


def _layout(graph: Graph) -> list:
    """What graph comparison leaves out: attribute order, uses in order, control inputs by name, bodies too."""
    out: list = []
    for node in graph.nodes:
        uses = [[(user.name, slot) for user, slot in value._uses] for value in node.outputs]
        out.append((node.name, list(node.attrs.names()), uses, [c.name for c in node.control_inputs]))
        for key, body in node.subgraphs.items():
            out.append((key, _layout(body)))
    return out


def test_converted_nodes_are_what_add_node_makes(model_path, monkeypatch):
    added: Counter = Counter()
    original = Graph._add_converted

    def counted(self, *args, **options):
        node = original(self, *args, **options)
        added[node is not None] += 1
        return node

    monkeypatch.setattr(Graph, "_add_converted", counted)
    fast = convert(model_path)
    assert added[True] > added[False], "most one-to-one nodes take the shortcut"
    monkeypatch.setattr(Graph, "_add_converted", lambda self, *args, **options: None)
    slow = convert(model_path)
    assert first_difference(fast.graph, slow.graph) is None
    assert _layout(fast.graph) == _layout(slow.graph)
    for fmt in ("ge", "ge-text", "onnx"):
        assert fast.to_bytes(fmt) == slow.to_bytes(fmt), fmt


def _graph() -> tuple[Graph, OpDef]:
    op = OpDef("Scale", "t").input("x").output("y").attr("factor", FLOAT, default=2.0)
    graph = Graph("g", IRContext(), OpRegistry([*core_ops(), op]))
    return graph, op


def test_the_shortcut_declines_what_add_node_decides():
    graph, op = _graph()
    x = graph.add_input("x", None)
    # Counts the definition has not accepted yet: add_node checks them first.
    assert graph._add_converted("t.Scale", "t", "Scale", op, [x], "a", {}, 1) is None
    first = graph.add_node("t.Scale", [x], name="a", attrs={}, allow_unknown=True, attrs_of_declared_kinds=True)
    assert first.attrs.get("factor") == 2.0
    # A taken name, an undeclared public name: add_node's answer (an error) is left to it.
    assert graph._add_converted("t.Scale", "t", "Scale", op, [x], "a", {}, 1) is None
    assert graph._add_converted("t.Scale", "t", "Scale", op, [x], "b", {"other": AttrValue.of(1)}, 1) is None
    with pytest.raises(GraphError, match="no attribute 'other'"):
        graph.add_node("t.Scale", [x], name="b", attrs={"other": AttrValue.of(1)}, allow_unknown=True,
                       attrs_of_declared_kinds=True)
    # A missing optional attribute gets its default, a private one is kept, in add_node's order.
    made = graph._add_converted("t.Scale", "t", "Scale", op, [x], "c", {"_note": AttrValue.of("n")}, 1)
    assert made is not None and list(made.attrs.names()) == ["_note", "factor"]
    assert [(user.name, slot) for user, slot in x._uses] == [("a", 0), ("c", 0)]
    graph.verify()


@pytest.mark.parametrize("name", ["tf_rnn_pb", "tf1_cond_pb", "tf_mobilenet_pb"])
def test_values_computed_inside_a_tf1_loop_frame_are_marked(name, request):
    """From each Enter up to its Exit every value is marked ``in_frame`` (the memory plan leaves them to run
    time); a graph without an Enter has no such value."""
    graph = convert(request.getfixturevalue(name)).graph
    marked = {value.ref for value in graph.values() if value.meta.get("in_frame")}
    enters = [node for node in graph.nodes if node.op_type in ("Enter", "RefEnter")]
    assert bool(marked) == bool(enters)
    for node in graph.nodes:
        if node.op_type in ("Enter", "RefEnter"):
            assert all(value.ref in marked for value in node.outputs)
            assert all(user.op_type in ("Exit", "RefExit") or user.outputs[0].ref in marked
                       for value in node.outputs for user, _ in value._uses if user.outputs)
        if node.op_type in ("Exit", "RefExit"):
            assert not any(value.ref in marked for value in node.outputs)


def test_nodes_with_control_inputs_take_the_shortcut_as_add_node_adds_them():
    graph, op = _graph()
    x = graph.add_input("x", None)
    graph.add_node("t.Scale", [x], name="a", allow_unknown=True)
    first = graph.add_node("t.Scale", [x], name="b", allow_unknown=True)
    controls = [first]
    made = graph._add_converted("t.Scale", "t", "Scale", op, [x], "c", {}, 1, controls)
    assert made is not None and made.control_inputs is controls
    assert graph._add_converted("t.Scale", "t", "Scale", op, [x], "d", {}, 1, []) is not None
    assert graph.node("d").control_inputs == ()
    graph.verify()


def test_constants_are_what_add_node_makes(model_path, monkeypatch):
    """Constants added through ``Graph._new_const`` (its checks of the definition remembered with its bindings)
    are what ``add_node`` adds, in a first conversion and in later ones."""
    convert(model_path)
    fast = convert(model_path)
    monkeypatch.setattr(Graph, "_new_const", lambda self, name, typed: None)
    slow = convert(model_path)
    assert first_difference(fast.graph, slow.graph) is None
    assert _layout(fast.graph) == _layout(slow.graph)
    for fmt in ("ge", "ge-text", "onnx"):
        assert fast.to_bytes(fmt) == slow.to_bytes(fmt), fmt


def test_a_constant_definition_declaring_more_is_checked_again():
    import numpy as np

    ops = {op.qualified_name: op.copy() for op in core_ops()}
    graph = Graph("g", IRContext(), OpRegistry(ops.values()))
    graph.add_const(np.zeros(2, np.float32), "a")
    graph.add_const(np.zeros(2, np.float32), "b")
    ops["ge.Const"].attr("note", FLOAT, default=1.5)  # a definition that declares more forgets what it noted
    made = graph.add_const(np.zeros(2, np.float32), "c").producer
    assert made.attrs.get("note") == 1.5
    assert "note" not in graph.node("b").attrs.names()


def test_fused_nodes_take_the_shortcut_as_add_node_adds_them(model_path, monkeypatch):
    """A fused op whose converted attributes add_node would store as they are is added through
    ``Graph._add_converted``: the same graph, layout and bytes as through ``add_node``."""
    from scopefusion.ir import graph as graph_module

    fast = convert(model_path)
    monkeypatch.setattr(graph_module, "_of_declared_kinds", lambda attrs, opdef: False)  # every fused op: add_node
    slow = convert(model_path)
    if "mobilenet" in model_path.name or "bert" in model_path.name:
        assert any(n.op.startswith("fused.") for n in fast.graph.nodes)
    assert first_difference(fast.graph, slow.graph) is None
    assert _layout(fast.graph) == _layout(slow.graph)
    for fmt in ("ge", "ge-text", "onnx"):
        assert fast.to_bytes(fmt) == slow.to_bytes(fmt), fmt


def test_attributes_of_another_kind_go_through_add_node_unless_vouched():
    graph, op = _graph()
    x = graph.add_input("x", None)
    graph.add_node("t.Scale", [x], name="first")  # the definition has accepted these counts
    args = ("t.Scale", "t", "Scale", op, [x])
    # An INT where a FLOAT is declared: add_node's checks decide, unless the caller vouches for the kinds.
    assert graph._add_converted(*args, "a", {"factor": AttrValue.of(1)}, 1, kinds_vouched=False) is None
    assert graph._add_converted(*args, "b", {"factor": AttrValue(FLOAT, 1.0), "_rule": AttrValue.of("r")}, 1,
                                kinds_vouched=False) is not None
    assert graph._add_converted(*args, "c", {"": AttrValue(FLOAT, 1.0)}, 1, kinds_vouched=False) is None
    with pytest.raises(GraphError):
        graph.add_node("t.Scale", [x], name="a", attrs={"factor": AttrValue.of(1)}, attrs_of_declared_kinds=False)
