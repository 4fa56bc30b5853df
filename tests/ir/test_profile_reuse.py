"""A shape profile's inference that reuses the main graph's answers (``infer_graph(earlier=...)``) gives
exactly what inferring the clone from scratch gives: every value's type, every known value, the counts."""

from __future__ import annotations

from pathlib import Path

import pytest

from scopefusion.convert import convert
from scopefusion.ir.graph import Graph
from scopefusion.ir_builder.shape_inference import InferenceResult
from tests.ir.inference_checks import assert_same_values, fixed_shapes, from_scratch

REPO = Path(__file__).resolve().parents[2]
MODELS = ["tf_mobilenet_pb", "tf_bert_pb", "tf1_cond_pb", "tf_rnn_pb", "tf2_control_flow_pb", "torch_encoder"]


@pytest.fixture(params=MODELS)
def model_path(request) -> Path:
    if request.param == "torch_encoder":
        return REPO / "testdata" / "torch_encoder_opset17.onnx"
    return request.getfixturevalue(request.param)


def assert_same_inference(got: Graph, got_result: InferenceResult, want: Graph, want_result: InferenceResult) -> None:
    assert [n.name for n in got.nodes] == [n.name for n in want.nodes]
    assert_same_values(got, got_result, want, want_result)
    assert got_result.uninferred_nodes == want_result.uninferred_nodes


@pytest.mark.parametrize("fix_dims", [False, True], ids=["model_shapes", "fixed_dims"])
def test_profile_inference_equals_inference_from_scratch(model_path, fix_dims):
    model = convert(model_path)
    shapes = fixed_shapes(model.graph) if fix_dims else {}
    model = convert(model_path, input_shapes=shapes)
    profile = model.profiles[0]
    want, want_result = from_scratch(model.graph, shapes)
    assert_same_inference(profile.graph, profile.inference, want, want_result)


def test_nodes_reading_only_weights_take_the_main_graph_answer(tf_mobilenet_pb):
    model = convert(tf_mobilenet_pb)
    model = convert(tf_mobilenet_pb, input_shapes=fixed_shapes(model.graph))
    main, profile = model.graph, model.profiles[0].graph
    shared = changed = 0
    for node, twin in zip(profile.nodes, main.nodes):
        for value, twin_value in zip(node.outputs, twin.outputs):
            known = model.profiles[0].inference.known(value)
            if known is not None and node.op != "ge.Const":
                assert known is model.inference.known(twin_value), f"{node.name} was folded again"
                shared += 1
            changed += value.type is not twin_value.type
    assert shared > 0, "no folded value was taken over from the main graph"
    assert changed > 0, "fixing the batch dim changed no type: the profile did not infer the activations again"
