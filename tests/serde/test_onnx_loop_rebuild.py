"""The rebuilding of TF1 frames as While / If before the ONNX export, and what a list is known to hold."""

from __future__ import annotations

from scopefusion.convert import convert, fusion_setup
from scopefusion.serde.onnx_lowering.tensor_lists import holds_list, list_element_type
from scopefusion.serde.onnx_lowering.tf1_frames import functional_loops

FRAME_OPS = {"Enter", "Exit", "Merge", "Switch", "NextIteration", "LoopCond"}


def _unfused(path):
    registry, _ = fusion_setup(entry_points=False)
    return convert(path, disable=[entry.name for entry in registry.passes()])


def test_a_graph_without_frames_is_exported_as_it_is(tf2_control_flow_pb):
    graph = convert(tf2_control_flow_pb).graph
    assert functional_loops(graph) is graph


def test_a_dynamic_rnn_frame_becomes_one_while_on_a_copy(tf_rnn_pb):
    graph = _unfused(tf_rnn_pb).graph
    before = [(n.name, n.op) for n in graph.nodes]
    rebuilt = functional_loops(graph)
    assert [(n.name, n.op) for n in graph.nodes] == before  # the model's graph is left as it was
    ops = [n.op_type for n in rebuilt.nodes]
    assert ops.count("While") == 1 and not FRAME_OPS & set(ops)
    loop = next(n for n in rebuilt.nodes if n.op_type == "While")
    body_ops = {n.op_type for n in loop.subgraphs["body"].nodes}
    assert {"TensorArrayReadV3", "TensorArrayWriteV3", "MatMul"} <= body_ops and not FRAME_OPS & body_ops
    lists = [v for v in loop.inputs if holds_list(v)]
    # the output array (written in the loop) and the input array (scattered before it, read in it)
    assert [str(list_element_type(v)) for v in lists] == ["f32[2,4]", "f32[2,3]"]
    assert rebuilt.verify() is None


def test_a_keras_lstm_list_is_known_from_its_ops(model_store):
    from tests.e2e.zoo import model_file

    graph = _unfused(model_file(model_store, "keras_lstm")).graph
    loop = next(n for n in graph.nodes if n.op_type == "While")
    lists = {k: str(list_element_type(v)) for k, v in enumerate(loop.inputs) if holds_list(v)}
    assert list(lists.values()) == ["f32[?,8]", "f32[?,5]"]  # the output sequence, the input sequence
