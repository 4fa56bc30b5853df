"""Loops exported to ONNX as loops: the zoo's RNNs converted with every fusion pass off (so their TF2
``While`` with TensorList ops, or their TF1 frames with TensorArrays, stay), a ``tf.function`` whose
``tf.while_loop`` writes a ``tf.TensorArray`` (in order: a scan output; backwards, reading it back: carried),
a Keras RNN over a cell no rule fuses, a TF1 ``while_loop`` that is no RNN and TF1 loops one inside the other
with a v1 cond; each from its frozen graph and its SavedModel. The ONNX model passes the full checker, has only
default-domain nodes, runs in onnxruntime's CPU provider and matches TensorFlow within 1e-4 at batch 1 and
batch 4 (where the batch is dynamic)."""

from __future__ import annotations

from pathlib import Path

import onnx
import onnxruntime as ort
import pytest

from scopefusion.convert import convert, fusion_setup
from scopefusion.runtime.source_runner import source_runner
from scopefusion.serde.onnx_export import model_to_onnx
from tests.e2e.test_zoo_onnx import TOLERANCE, _batched, _source, keras_rnn_stack_pb, max_error  # noqa: F401
from tests.models import loop_models

# (name, session fixture of the frozen graph, the batch is dynamic, converted with every fusion pass off)
# The models whose loops write a list one element per iteration: written as the Loop's scan outputs.
SCANNED = {"keras_lstm", "keras_gru", "rnn_stack", "tf1_dynamic_rnn", "tf_function_tensor_array", "keras_custom_cell_rnn"}
LOOPS = [
    ("keras_lstm", "keras_lstm_pb", True, True),
    ("keras_gru", "keras_gru_pb", True, True),
    ("rnn_stack", "keras_rnn_stack_pb", True, True),
    ("tf1_dynamic_rnn", "tf_rnn_pb", False, True),
    ("tf_function_tensor_array", "tf_tensor_array_pb", True, False),
    ("tf_function_list_carried", "tf_list_carried_pb", True, False),
    ("keras_custom_cell_rnn", "keras_custom_cell_rnn_pb", True, False),
    ("tf1_while_loop", "tf1_while_loop_pb", True, False),
    ("tf1_nested_loops", "tf1_nested_loops_pb", True, False),
]


@pytest.fixture(scope="session")
def tf_tensor_array_pb(model_store) -> Path:
    return model_store.file("loop_tensor_array.pb", loop_models.tf_function_tensor_array)


@pytest.fixture(scope="session")
def tf_list_carried_pb(model_store) -> Path:
    return model_store.file("loop_list_carried.pb", loop_models.tf_function_list_carried)


@pytest.fixture(scope="session")
def keras_custom_cell_rnn_pb(model_store) -> Path:
    return model_store.file("loop_custom_cell_rnn.pb", loop_models.keras_custom_cell_rnn)


@pytest.fixture(scope="session")
def tf1_while_loop_pb(model_store) -> Path:
    return model_store.file("loop_tf1_while.pb", loop_models.tf1_while_loop)


@pytest.fixture(scope="session")
def tf1_nested_loops_pb(model_store) -> Path:
    return model_store.file("loop_tf1_nested.pb", loop_models.tf1_nested_loops)


def _every_pass() -> list[str]:
    registry, _ = fusion_setup(entry_points=False)
    return [entry.name for entry in registry.passes()]


@pytest.mark.parametrize("source", ["frozen", "saved_model"])
@pytest.mark.parametrize("name,fixture,dynamic_batch,unfused", LOOPS, ids=[m[0] for m in LOOPS])
def test_loops_export_to_onnx_loops_that_onnxruntime_runs_like_tensorflow(name, fixture, dynamic_batch, unfused,
                                                                          source, request):
    path = _source(request, name, fixture, source)
    model = convert(path, disable=_every_pass() if unfused else ())
    kinds = {n.op_type for n in model.graph.nodes}
    assert kinds & {"While", "StatelessWhile", "Enter"}, "the loop must stay unfused"
    proto = model_to_onnx(model)
    assert {n.op_type for n in model.graph.nodes} == kinds, "the export must leave the model's graph as it was"
    onnx.checker.check_model(proto, full_check=True)
    assert {n.domain for n in proto.graph.node} == {""}
    loops = [n for n in proto.graph.node if n.op_type == "Loop"]
    assert loops
    scan_outputs = sum(len(n.output) - (len(n.input) - 2) for n in loops)
    assert (scan_outputs > 0) == (name in SCANNED)
    session = ort.InferenceSession(proto.SerializeToString(), providers=["CPUExecutionProvider"])
    runner = source_runner(model.source)
    for batch in (1, 4) if dynamic_batch else (2,):
        feeds = _batched(model, batch, seed=3)
        names = [i.name for i in session.get_inputs()]
        ours = dict(zip([o.name for o in session.get_outputs()], session.run(None, {n: feeds[n] for n in names})))
        theirs = runner.run(feeds)
        assert sorted(ours) == sorted(theirs)
        for key, expected in theirs.items():
            error = max_error(ours[key], expected)
            assert error <= TOLERANCE, f"{name} ({source}) output {key} at batch {batch}: error {error:.3g}"


@pytest.mark.parametrize("name,fixture,dynamic_batch,unfused", LOOPS, ids=[m[0] for m in LOOPS])
def test_loops_export_at_the_lowest_opset(name, fixture, dynamic_batch, unfused, request):
    model = convert(request.getfixturevalue(fixture), disable=_every_pass() if unfused else ())
    proto = model_to_onnx(model, opset=17)
    onnx.checker.check_model(proto, full_check=True)
    session = ort.InferenceSession(proto.SerializeToString(), providers=["CPUExecutionProvider"])
    feeds = _batched(model, 4 if dynamic_batch else 2, seed=5)
    ours = dict(zip([o.name for o in session.get_outputs()],
                    session.run(None, {i.name: feeds[i.name] for i in session.get_inputs()})))
    for key, expected in source_runner(model.source).run(feeds).items():
        assert max_error(ours[key], expected) <= TOLERANCE, f"{name} output {key} at opset 17"
