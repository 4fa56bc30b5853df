"""End-to-end conversion on models built from code: profiles, inference, memory plans, output."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

from scopefusion import InferenceError, ModelLoadError
from scopefusion.convert import convert
from scopefusion.ir.compare import first_difference
from scopefusion.ir.types import TensorType
from scopefusion.serde import ge

BERT_INPUTS = ("input_ids", "input_mask", "token_type_ids")


def bert_profile(batch: int, seq: int = 8) -> dict[str, list[int]]:
    return {name: [batch, seq] for name in BERT_INPUTS}


@pytest.fixture(scope="module")
def bert_model(tf_bert_pb):
    return convert(tf_bert_pb, input_shapes=[bert_profile(1), bert_profile(4)])


def test_profiles_resolve_shape_chains_to_static_shapes(bert_model):
    # The encoder reshapes through Shape -> StridedSlice -> Pack -> Reshape: static once the batch is.
    assert len(bert_model.profiles) == 2
    for profile, batch in zip(bert_model.profiles, (1, 4)):
        assert profile.inference.dynamic_values == []
        reshapes = [n for n in profile.graph.nodes if n.op == "tf.Reshape"]
        assert reshapes and all(n.outputs[0].type.is_static for n in reshapes)
        assert profile.graph.outputs[0].type.shape[0] == batch
    # The main graph keeps the model's unknown batch: those values are dynamic there.
    assert bert_model.inference.dynamic_values
    assert bert_model.uninferred_ops() == []


def test_memory_plans_are_valid_and_near_the_lower_bound(bert_model):
    for profile in bert_model.profiles:
        plan = profile.memory_plan
        plan.validate()
        assert plan.lower_bound_bytes <= plan.arena_bytes <= 1.05 * plan.lower_bound_bytes
        assert plan.arena_bytes < plan.naive_bytes
    assert bert_model.profiles[1].memory_plan.arena_bytes > bert_model.profiles[0].memory_plan.arena_bytes


def test_report_fields(bert_model):
    report = bert_model.report()
    assert set(report) >= {"fusions", "refused", "ops", "uninferred_ops", "profiles", "timings_s"}
    assert report["ops"]["tf.MatMul"] > 0 and report["ops"]["ge.Data"] == 3
    for p in report["profiles"]:
        assert set(p) >= {"inputs", "arena_bytes", "naive_bytes", "lower_bound_bytes", "dynamic_tensors"}
    assert set(report["timings_s"]) == {"load", "scope", "fusion", "build", "infer", "memory_plan"}


def test_ge_output_round_trips_and_is_deterministic(bert_model, tf_bert_pb, tmp_path):
    data = bert_model.to_bytes("ge")
    contents = ge.model_from_bytes(data)
    assert [g.name for g in contents.graphs] == ["main", "main_profile0", "main_profile1"]
    assert first_difference(bert_model.graph, contents.main) is None
    again = convert(tf_bert_pb, input_shapes=[bert_profile(1), bert_profile(4)])
    assert again.to_bytes("ge") == data
    bert_model.save(tmp_path / "m.ge")
    assert (tmp_path / "m.ge").read_bytes() == data


def test_memory_plan_offsets_are_in_the_tensor_descriptors(bert_model):
    from scopefusion.serde.model_io import model_to_proto

    proto = model_to_proto(bert_model)
    profile = bert_model.profiles[0]
    graph_def = proto.graph[1]
    offsets = {}
    for node, op_def in zip(profile.graph.nodes, graph_def.op):
        for value, desc in zip(node.outputs, op_def.output_desc):
            offsets[value.ref] = desc.data_offset
    plan = profile.memory_plan
    planned = [ref for ref in offsets if plan.offset(ref) is not None]
    assert planned and all(offsets[ref] == plan.offset(ref) for ref in planned)
    assert any(desc.reuse_input for op in graph_def.op for desc in op.output_desc)  # forwarded Reshapes


@pytest.mark.parametrize(
    "fixture",
    ["tf_convnet_pb", "tf_mobilenet_pb", "tf_rnn_pb", "tf1_cond_pb", "tf2_control_flow_pb", "tf2_calls_pb",
     "onnx_attention", "onnx_control_flow", "onnx_messy", "saved_model_keras"],
)  # fmt: skip
def test_real_models_convert_with_every_op_inferred(fixture, request):
    model = convert(request.getfixturevalue(fixture))
    assert model.uninferred_ops() == []
    model.graph.verify()
    for profile in model.profiles:
        profile.memory_plan.validate()
    assert ge.model_from_bytes(model.to_bytes("ge")).main is not None


def test_static_profile_of_a_keras_cnn(tf_mobilenet_pb):
    model = convert(tf_mobilenet_pb, input_shapes={"input_0": [2, 32, 32, 3]})
    profile = model.profiles[0]
    assert profile.inference.dynamic_values == []
    out = profile.graph.outputs[0].type
    assert isinstance(out, TensorType) and out.shape[0] == 2 and out.is_static
    plan = profile.memory_plan
    assert plan.arena_bytes <= 1.05 * plan.lower_bound_bytes
    # The frozen graph reads each weight through an Identity: a view of the constant, not an arena copy.
    weight_reads = [n.outputs[0] for n in profile.graph.nodes if n.op == "tf.Identity" and n.inputs[0].producer.op == "ge.Const"]
    assert weight_reads and all(plan.offset(v) is None and plan.forwarded_from(v) for v in weight_reads)


@pytest.mark.parametrize(
    "shapes, message",
    [
        ({"nope": [1, 8]}, "names 'nope', which is not a graph input; inputs are input_ids, input_mask, token_type_ids"),
        ({"input_ids": [1, 8, 2]}, "input 'input_ids' has rank 2"),
        ({"input_ids": [1, 9]}, "dim 1 is 8 in the model but 9 in the profile"),
    ],
)
def test_bad_profiles_are_clear_errors(tf_bert_pb, shapes, message):
    with pytest.raises(InferenceError, match=message):
        convert(tf_bert_pb, input_shapes=shapes)


def test_a_missing_model_is_a_load_error(tmp_path):
    with pytest.raises(ModelLoadError):
        convert(tmp_path / "missing.pb")


def test_converting_onnx_and_frozen_graphdefs_never_imports_tensorflow(onnx_attention, tf_bert_pb):
    code = (
        "import sys\nfrom scopefusion.convert import convert\n"
        f"convert({str(onnx_attention)!r}).to_bytes('ge')\nconvert({str(tf_bert_pb)!r}).to_bytes('ge')\n"
        "print('tensorflow' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_unfused_bert_keeps_numerics_of_constants(bert_model, tf_bert_pb):
    from scopefusion.parser import load

    source = load(tf_bert_pb)
    consts = {n.name: n.value for n in source.nodes if n.value is not None}
    for node in bert_model.graph.nodes:
        if node.op == "ge.Const" and node.name in consts:
            np.testing.assert_array_equal(node.attrs.get("value"), consts[node.name])


def test_the_convert_command_imports_no_runtime_framework_or_report(onnx_attention, tf_bert_pb, tmp_path):
    code = (
        "import sys\nfrom scopefusion.cli import main\n"
        "for model in sys.argv[1:]:\n"
        "    try:\n"
        f"        main(['convert', model, '-o', {str(tmp_path / 'out.ge')!r}, '-q'])\n"
        "    except SystemExit as e:\n"
        "        assert not e.code, e.code\n"
        "print(sorted(m for m in ('onnxruntime', 'tensorflow', 'scopefusion.html_report') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code, str(tf_bert_pb), str(onnx_attention)], capture_output=True, text=True, check=True)
    assert out.stdout.strip().splitlines()[-1] == "[]"


# What a conversion needs none of: the other framework's parser and dialect (and ONNX's package for a
# TensorFlow model, and ml_dtypes for one without bfloat16 or float8 tensors; ONNX's package for an ONNX model
# whose nodes the dialect infers natively), the writers, the executors,
# TensorFlow, the command line and its libraries, the reports.
NOT_NEEDED = (
    "onnxruntime", "tensorflow", "rich", "typer", "pydantic", "scopefusion.serde", "scopefusion.runtime",
    "scopefusion.verify", "scopefusion.html_report", "scopefusion.summary", "scopefusion.cli", "networkx",
)  # fmt: skip
NOT_NEEDED_FOR_TF = ("onnx", "scopefusion.parser.onnx_frontend", "scopefusion.dialects.onnx", "ml_dtypes",
                     "importlib.metadata", "hashlib", "logging", "importlib.resources", "tempfile", "difflib")
NOT_NEEDED_FOR_ONNX = ("scopefusion.parser.tf_graphdef", "scopefusion.parser.proto.tf_framework_pb2", "scopefusion.dialects.tf",
                       "onnx")


# Built-in dataflow patterns a conversion of these models never uses: they stay unbuilt (deferred).
UNUSED_PATTERNS = "from scopefusion.fusion_rules import dynamic_gru, dynamic_rnn\n" \
    "unused = (dynamic_gru.GRU_UPDATE, dynamic_gru.GRU_SKELETON, dynamic_rnn.LSTM_CELL, dynamic_rnn.LSTM_SKELETON)\n"


@pytest.mark.parametrize(("model", "not_needed"), [("tf_bert_pb", NOT_NEEDED_FOR_TF), ("onnx_attention", NOT_NEEDED_FOR_ONNX)])
def test_a_conversion_imports_only_what_it_needs(model, not_needed, request):
    code = (
        "import sys\nfrom scopefusion.convert import convert\n"
        "model = convert(sys.argv[1])\n"
        "assert len(model.graph.nodes) > 0\n"
        f"{UNUSED_PATTERNS}"
        "print([p.name for p in unused if vars(p)['_fn'] is None])\n"
        f"print(sorted(m for m in {NOT_NEEDED + not_needed!r} if m in sys.modules))"
    )
    path = request.getfixturevalue(model)
    out = subprocess.run([sys.executable, "-c", code, str(path)], capture_output=True, text=True, check=True)
    assert out.stdout.strip().splitlines()[-2:] == ["[]", "[]"]


@pytest.mark.parametrize("callers_freeze", [False, True])
def test_a_first_conversion_leaves_no_object_frozen_nor_thaws_the_callers(callers_freeze, tf_bert_pb):
    # A first conversion ages the objects it finds (see convert._promote_tracked_objects): the caller's
    # cyclic garbage is still collected, and objects the caller froze stay frozen.
    code = (
        "import gc, sys, weakref\nfrom scopefusion.convert import convert\n"
        "class Node:\n    pass\n"
        f"if {callers_freeze}:\n    kept = [[i] for i in range(1000)]\n    gc.freeze()\n"
        "cycle = Node()\ncycle.me = cycle\nalive = weakref.ref(cycle)\ndel cycle\n"
        "convert(sys.argv[1])\n"
        "frozen = gc.get_freeze_count()\ngc.collect()\n"
        "print(frozen >= 1000 if " + str(callers_freeze) + " else frozen == 0, alive() is None)"
    )
    out = subprocess.run([sys.executable, "-c", code, str(tf_bert_pb)], capture_output=True, text=True, check=True)
    assert out.stdout.strip().splitlines()[-1] == "True True"
