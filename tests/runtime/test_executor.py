"""The reference executor: arena placement, memory forwarding, checked mode, profiles, dynamic shapes."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

from scopefusion import VerifyError
from scopefusion.convert import convert
from scopefusion.runtime import Executor
from scopefusion.runtime.source_runner import source_runner
from scopefusion.verify import make_inputs

BERT_INPUTS = ("input_ids", "input_mask", "token_type_ids")


@pytest.fixture(scope="module")
def bert(tf_bert_pb):
    return convert(tf_bert_pb, input_shapes=[{n: [1, 8] for n in BERT_INPUTS}, {n: [3, 8] for n in BERT_INPUTS}])


def test_checked_run_matches_tensorflow_in_every_profile(bert):
    runner = source_runner(bert.source)
    executor = Executor(bert, checked=True)
    for profile in bert.profiles:
        feeds = make_inputs(profile.graph, seed=profile.index)
        ours = executor.run(feeds)
        assert ours.profile == profile.index
        assert ours.arena_bytes == profile.memory_plan.arena_bytes
        theirs = runner.run(feeds)
        for name, expected in theirs.items():
            np.testing.assert_allclose(ours.outputs[name], expected, rtol=1e-4, atol=1e-5)


def test_static_profiles_allocate_nothing_at_run_time(bert):
    feeds = make_inputs(bert.profiles[0].graph, seed=0)
    assert Executor(bert).run(feeds).dynamic_allocations == 0


def test_reshapes_forward_their_input_buffer(bert):
    plan = bert.profiles[0].memory_plan
    assert plan.forwards, "the BERT graph reshapes activations: the plan must forward some buffers"
    for alias, owner in plan.forwards.items():
        assert plan.offset(alias) == plan.offset(owner)


def test_checked_mode_exposes_an_overlapping_plan(bert):
    feeds = make_inputs(bert.profiles[0].graph, seed=0)
    good = Executor(bert, checked=True).run(feeds).ordered
    plan = bert.profiles[0].memory_plan
    # Break the plan: move every buffer to offset 0, so tensors alive at the same time overlap.
    saved = dict(plan.offsets)
    try:
        for ref in plan.offsets:
            plan.offsets[ref] = 0
        with pytest.raises(AssertionError):
            plan.validate()
        bad = Executor(bert, checked=True).run(feeds).ordered
    finally:
        plan.offsets.update(saved)
    assert any(not np.allclose(a, b, equal_nan=False) for a, b in zip(good, bad))


def test_an_unmatched_shape_lists_the_profiles(bert):
    feeds = {n: np.zeros((5, 8), np.int32) for n in BERT_INPUTS}
    with pytest.raises(VerifyError, match=r"match no shape profile.*profile 0: input_ids:\[1, 8\].*profile 1: input_ids:\[3, 8\]"):
        Executor(bert).run(feeds)


def test_missing_inputs_are_named(bert):
    with pytest.raises(VerifyError, match="needs inputs input_mask, token_type_ids"):
        Executor(bert).run({"input_ids": np.zeros((1, 8), np.int32)})


@pytest.fixture(scope="module")
def nonzero_onnx(tmp_path_factory):
    # y = Gather(x, NonZero(x > 0)): a data-dependent output shape.
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [6])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, None)
    zero = helper.make_tensor("zero", TensorProto.FLOAT, [], [0.0])
    nodes = [
        helper.make_node("Greater", ["x", "zero"], ["pos"], name="/mask/Greater"),
        helper.make_node("NonZero", ["pos"], ["idx"], name="/mask/NonZero"),
        helper.make_node("Squeeze", ["idx"], ["flat"], name="/mask/Squeeze", axes=[0]) if False else
        helper.make_node("Reshape", ["idx", "minus_one"], ["flat"], name="/mask/Reshape"),
        helper.make_node("Gather", ["x", "flat"], ["y"], name="/mask/Gather"),
    ]
    minus_one = helper.make_tensor("minus_one", TensorProto.INT64, [1], [-1])
    graph = helper.make_graph(nodes, "nz", [x], [y], [zero, minus_one])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    path = tmp_path_factory.mktemp("nz") / "nonzero.onnx"
    onnx.save(model, path)
    return path


def test_dynamic_outputs_are_allocated_at_run_time(nonzero_onnx):
    model = convert(nonzero_onnx)
    profile = model.profiles[0]
    assert profile.memory_plan.dynamic_tensors > 0
    x = np.array([1.0, -2.0, 3.0, 0.0, 5.0, -1.0], np.float32)
    result = Executor(model, checked=True).run({"x": x})
    np.testing.assert_array_equal(result.outputs["y"], x[x > 0])
    assert result.dynamic_allocations >= 2


def test_onnx_control_flow_runs_its_bodies(onnx_control_flow):
    model = convert(onnx_control_flow)
    feeds = make_inputs(model.profiles[0].graph, seed=3)
    ours = Executor(model, checked=True).run(feeds)
    theirs = source_runner(model.source).run(feeds)
    for name, expected in theirs.items():
        np.testing.assert_allclose(ours.outputs[name], expected, rtol=1e-5, atol=1e-6)


def test_tf2_while_runs_its_bodies(tf2_control_flow_pb):
    model = convert(tf2_control_flow_pb)
    assert any(n.op_type in ("While", "StatelessWhile") for n in model.graph.nodes)
    feeds = make_inputs(model.profiles[0].graph, seed=1)
    ours = Executor(model).run(feeds)
    theirs = source_runner(model.source).run(feeds)
    for name, expected in theirs.items():
        np.testing.assert_allclose(ours.outputs[name], expected, rtol=1e-5, atol=1e-6)
