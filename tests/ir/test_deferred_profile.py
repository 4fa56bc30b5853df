"""Without a progress display, ``convert`` makes the profile of the model's own shapes and the memory plans
on first use: the results, and the errors and where they surface, are those of making them up front (as
``convert`` does with ``progress=``)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from scopefusion.convert import convert
from scopefusion.errors import InferenceError
from scopefusion.ir.compare import first_difference
from scopefusion.ir.types import TensorType
from scopefusion.ir_builder.profiles import input_name
from tests.models import hostile_models as hostile

REPO = Path(__file__).resolve().parents[2]
MODELS = ["tf_mobilenet_pb", "tf_bert_pb", "tf1_cond_pb", "tf_rnn_pb", "tf2_control_flow_pb", "torch_encoder"]


@pytest.fixture(params=MODELS)
def model_path(request) -> Path:
    if request.param == "torch_encoder":
        return REPO / "testdata" / "torch_encoder_opset17.onnx"
    return request.getfixturevalue(request.param)


def quiet(stage: str, done: int, total: int, detail: str = "") -> None:
    """A progress display that shows nothing: ``convert`` then makes everything up front."""


def without_timings(report: dict) -> dict:
    """The report without what measures time: the stage timings, each pass's time."""
    out = {k: v for k, v in report.items() if k != "timings_s"}
    out["passes"] = [{k: v for k, v in p.items() if k != "seconds"} for p in report["passes"]]
    return out


def assert_same_profiles(got, want) -> None:
    assert len(got.profiles) == len(want.profiles)
    for profile, expected in zip(got.profiles, want.profiles):
        assert profile.index == expected.index and profile.inputs == expected.inputs
        assert profile.graph is not got.graph and profile.graph.name == expected.graph.name
        assert first_difference(profile.graph, expected.graph) is None
        for value, twin in zip(profile.graph.values(), expected.graph.values()):
            assert value.meta == twin.meta, value.ref
            known, twin_known = profile.inference.known(value), expected.inference.known(twin)
            assert (known is None) == (twin_known is None), value.ref
            if known is not None:
                assert np.array_equal(known, twin_known), value.ref
        for field in ("folded", "unfolded", "dynamic_values", "uninferred", "uninferred_nodes"):
            assert getattr(profile.inference, field) == getattr(expected.inference, field), field
        assert profile.memory_plan == expected.memory_plan


def test_deferred_profiles_and_plans_equal_those_made_up_front(model_path):
    deferred, up_front = convert(model_path), convert(model_path, progress=quiet)
    # The GE bytes hold every profile's graph and memory plan.
    assert deferred.to_bytes("ge") == up_front.to_bytes("ge")
    assert_same_profiles(deferred, up_front)
    assert without_timings(deferred.report()) == without_timings(up_front.report())


def test_deferred_work_is_timed_in_its_stage(tf_mobilenet_pb):
    model = convert(tf_mobilenet_pb)
    before = dict(model.timings)
    assert model.profiles[0].memory_plan.schedule_length == len(model.profiles[0].graph.nodes)
    assert model.timings["infer"] > before["infer"] and model.timings["memory_plan"] > before["memory_plan"]
    assert set(model.timings) == set(before)


def test_a_deferred_profile_folds_within_the_conversion_budget(tf2_control_flow_pb):
    # Bodies are inferred again in a profile: under the default budget they would fold what this one does not.
    deferred = convert(tf2_control_flow_pb, max_folded_bytes=8)
    up_front = convert(tf2_control_flow_pb, max_folded_bytes=8, progress=quiet)
    assert up_front.profiles[0].inference.unfolded  # the budget leaves some values unfolded
    assert_same_profiles(deferred, up_front)


def test_explicit_shapes_are_checked_by_convert_itself(tf_bert_pb):
    model = convert(tf_bert_pb)
    shapes = {input_name(v): [2, 8] for v in model.graph.inputs if isinstance(v.type, TensorType)}
    name = next(iter(shapes))
    with pytest.raises(InferenceError, match="rank 2"):
        convert(tf_bert_pb, input_shapes=[{}, {name: [2, 8, 1]}])


@pytest.mark.parametrize("progress", [None, quiet], ids=["deferred", "up_front"])
def test_an_arena_past_int64_fails_the_conversion(tmp_path, progress):
    # Two live 2**62-byte tensors: each fits a size, their arena does not.
    dim = 1 << 58
    model = tmp_path / "wide.pb"
    model.write_bytes(hostile.tf_graph([
        hostile.placeholder("x", (dim, 4)),
        hostile._tf_node("y", "Relu", ["x"], T=hostile._float_type()),
        hostile._tf_node("z", "Relu", ["y"], T=hostile._float_type()),
        hostile._tf_node("w", "AddV2", ["y", "z"], T=hostile._float_type()),
    ]))
    with pytest.raises(InferenceError, match="the memory plan needs"):
        convert(model, progress=progress)


def test_the_onnx_export_makes_neither_the_default_profile_nor_a_plan(tf_mobilenet_pb):
    model = convert(tf_mobilenet_pb)
    before = dict(model.timings)
    data = model.to_bytes("onnx")
    assert model.timings == before  # deferred work would have added its time to "infer" / "memory_plan"
    assert data == convert(tf_mobilenet_pb, progress=quiet).to_bytes("onnx")
