"""Cloning real converted models gives the same graph, use lists included."""

from __future__ import annotations

from pathlib import Path

import pytest

from scopefusion.convert import convert
from scopefusion.ir.compare import first_difference
from scopefusion.ir.graph import Graph, Value

ROOT = Path(__file__).resolve().parents[2]


def _all_graphs(graph: Graph):
    yield graph
    for node in graph.nodes:
        for body in node.subgraphs.values():
            yield from _all_graphs(body)


def _uses(graph: Graph) -> list[tuple[str, list[tuple[str, int]]]]:
    """Every value's uses as ``(consumer name, slot)``, in order, over the graph and its bodies."""
    out = []
    for g in _all_graphs(graph):
        for value in g.values():
            out.append((f"{g.name}/{value.ref}", [(n.name, slot) for n, slot in value.uses]))
    return out


def _rebuilt(graph: Graph) -> Graph:
    """The graph rebuilt node by node through ``add_node``: uses in schedule order, back edges last."""
    other = Graph(graph.name, graph.context, graph.registry)
    mapping: dict[int, Value] = {}
    later = []
    for node in graph.nodes:
        inputs = [mapping.get(id(v)) if v is not None else None for v in node.inputs]
        new = other.add_node(
            node.op,
            inputs,
            name=node.name,
            attrs={k: v.copy() for k, v in node.attrs.items()},
            output_types=[v.type for v in node.outputs],
            control_inputs=[other.node(c.name) for c in node.control_inputs],
            subgraphs={k: _rebuilt(b) for k, b in node.subgraphs.items()},
            allow_unknown=True,
        )
        later += [(new, slot, v) for slot, v in enumerate(node.inputs) if v is not None and inputs[slot] is None]
        for old_v, new_v in zip(node.outputs, new.outputs):
            mapping[id(old_v)] = new_v
    for new, slot, v in later:
        new.replace_input_with(slot, mapping[id(v)])
    other.inputs = [mapping[id(v)] for v in graph.inputs]
    other.outputs = [mapping[id(v)] for v in graph.outputs]
    return other


def _meta(graph: Graph) -> list[object]:
    return [
        (n.meta, [v.meta for v in n.outputs], n.opdef) for g in _all_graphs(graph) for n in g.nodes
    ]


@pytest.fixture(scope="module")
def converted(tf_bert_pb, tf_rnn_pb, tf2_control_flow_pb) -> dict[str, Graph]:
    paths = {
        "bert": tf_bert_pb,
        "rnn": tf_rnn_pb,
        "tf2_control_flow": tf2_control_flow_pb,
        "torch_encoder": ROOT / "testdata" / "torch_encoder_opset17.onnx",
    }
    graphs = {name: convert(path).graph for name, path in paths.items()}
    # Unfused, the TF1 dynamic_rnn keeps its while loop with NextIteration -> Merge back edges.
    graphs["rnn_loop"] = convert(tf_rnn_pb, disable=["DynamicRNNFusion", "DynamicGRUFusion"]).graph
    return graphs


@pytest.mark.parametrize("name", ["bert", "rnn", "rnn_loop", "tf2_control_flow", "torch_encoder"])
def test_clone_equals_its_source(converted, name):
    source = converted[name]
    clone = source.clone()
    clone.verify()
    assert first_difference(source, clone) is None
    assert _meta(clone) == _meta(source)
    assert dict(clone.attrs.items()) == dict(source.attrs.items())
    assert _uses(clone) == _uses(source) == _uses(_rebuilt(source))
    assert _uses(clone.clone()) == _uses(clone)
    for old, new in zip(source.nodes, clone.nodes):
        assert new.graph is clone and new is not old
        assert all(b is not old.subgraphs[k] for k, b in new.subgraphs.items())


def test_models_exercise_back_edges_and_bodies(converted):
    graphs = [g for graph in converted.values() for g in _all_graphs(graph)]
    assert any(v.meta.get("back_edge") for g in graphs for v in g.values())
    assert any(n.subgraphs for g in graphs for n in g.nodes)
