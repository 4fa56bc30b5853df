"""Every TensorFlow model of the zoo, from its frozen graph and from its SavedModel, exported to ONNX: the full
checker passes, every node is in the default domain, onnxruntime's CPU provider runs it, and it matches
TensorFlow within 1e-4 (max abs, or max rel where values exceed 1) at batch 1 and batch 4 where the batch is
dynamic; the NHWC CNNs keep one Transpose. The large CNNs are in the ``slow`` tier (still run by ``make test``)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest

from scopefusion.convert import convert
from scopefusion.runtime.source_runner import source_runner
from scopefusion.serde.onnx_export import model_to_onnx
from scopefusion.verify import make_inputs
from tests.e2e.zoo import ZOO
from tests.models.frozen_saved_model import saved_model_from_frozen
from tests.models.saved_models import SAVED_ZOO, write_saved_model

TOLERANCE = 1e-4
LARGE = {"resnet50", "efficientnet_b0"}
# NHWC CNNs: one Transpose, where the NHWC input meets the NCHW body (their outputs are [batch, classes]).
ONE_TRANSPOSE = {"resnet50", "mobilenet_v2", "efficientnet_b0", "small_convnet", "mobilenet_v3_small"}

# (name, session fixture giving the frozen graph, the input whose first dim is the batch, or None)
MODELS = [(m.name, m.fixture, m.unknown_batch) for m in ZOO if m.builder is not None]
MODELS += [("small_convnet", "tf_convnet_pb", True), ("mobilenet_v3_small", "tf_mobilenet_v3_pb", True),
           ("rnn_stack", "keras_rnn_stack_pb", True)]


def _params():
    for name, fixture, batch in MODELS:
        for source in ("frozen", "saved_model"):
            marks = [pytest.mark.slow] if name in LARGE else []
            yield pytest.param(name, fixture, batch, source, id=f"{name}-{source}", marks=marks)


@pytest.fixture(scope="session")
def tf_mobilenet_v3_pb(model_store) -> Path:
    """Keras MobileNetV3Small (weights=None, 32x32, alpha 0.75), frozen (input [?, 32, 32, 3])."""
    from tests.models import tf_models

    def build() -> bytes:
        import keras

        keras.utils.set_random_seed(0)
        model = keras.applications.MobileNetV3Small(weights=None, input_shape=(32, 32, 3), alpha=0.75, classes=10,
                                                    include_preprocessing=False)
        return tf_models._freeze_keras(model, [(None, 32, 32, 3)])

    return model_store.file("mobilenet_v3_small.pb", build)


@pytest.fixture(scope="session")
def keras_rnn_stack_pb(model_store) -> Path:
    """LSTM → Bidirectional(GRU) → LSTM(go_backwards), frozen (input ``sequence`` [?, 6, 5])."""
    from tests.fusion_rules.test_dynamic_rnn import keras_stack

    def build() -> bytes:
        import keras

        try:
            return keras_stack()
        finally:  # Keras numbers layer names per process: leave the counters as a later builder expects them
            keras.utils.clear_session()

    return model_store.file("onnx_rnn_stack.pb", build)  # not the fusion test's file: layer names vary


def _source(request, name: str, fixture: str, source: str) -> Path:
    """The model's file: its frozen graph, or its SavedModel — written by TensorFlow's own exporters for the
    zoo models that have one (``tests/models/saved_models.py``), else the frozen graph behind a signature."""
    store = request.getfixturevalue("model_store")
    if source == "saved_model" and name in SAVED_ZOO:
        return store.written(f"sm_zoo_{name}", lambda path: write_saved_model(name, path))
    frozen = request.getfixturevalue(fixture)
    if source == "frozen":
        return frozen
    return store.written(f"sm_{frozen.stem}", lambda path: saved_model_from_frozen(frozen.read_bytes(), path))


def _batched(model, batch: int, seed: int) -> dict[str, np.ndarray]:
    feeds = make_inputs(model.graph, seed)
    out = {}
    for value, (name, array) in zip(model.graph.inputs, feeds.items()):
        shape = value.type.shape
        if shape and shape[0] < 0:
            reps = -(-batch // array.shape[0])
            array = np.concatenate([array] * reps)[:batch]
            if batch > 1:  # distinct rows: the batch dim must not be broadcast away
                rng = np.random.default_rng(seed + batch)
                if array.dtype.kind == "f":
                    array = rng.standard_normal(array.shape).astype(array.dtype)
        out[name] = array
    return out


def max_error(got: np.ndarray, expected: np.ndarray) -> float:
    """Max abs difference, relative where |expected| > 1."""
    got, expected = np.asarray(got, np.float64), np.asarray(expected, np.float64)
    assert got.shape == expected.shape
    if not got.size:
        return 0.0
    return float((np.abs(got - expected) / np.maximum(1.0, np.abs(expected))).max())


@pytest.mark.parametrize("name,fixture,dynamic_batch,source", list(_params()))
def test_zoo_model_exports_to_onnx_that_onnxruntime_runs_like_tensorflow(name, fixture, dynamic_batch, source, request):
    path = _source(request, name, fixture, source)
    model = convert(path)
    proto = model_to_onnx(model)
    onnx.checker.check_model(proto, full_check=True)
    assert {n.domain for n in proto.graph.node} == {""}
    assert [o.domain for o in proto.opset_import] == [""]
    if name in ONE_TRANSPOSE:
        assert [n.op_type for n in proto.graph.node].count("Transpose") == 1
    session = ort.InferenceSession(proto.SerializeToString(), providers=["CPUExecutionProvider"])
    runner = source_runner(model.source)
    for batch in (1, 4) if dynamic_batch else (None,):
        feeds = _batched(model, batch, seed=3) if batch else make_inputs(model.graph, 3)
        names = [i.name for i in session.get_inputs()]
        ours = dict(zip([o.name for o in session.get_outputs()], session.run(None, {n: feeds[n] for n in names})))
        theirs = runner.run(feeds)
        assert sorted(ours) == sorted(theirs)
        for key, expected in theirs.items():
            error = max_error(ours[key], expected)
            assert error <= TOLERANCE, f"{name} ({source}) output {key} at batch {batch}: error {error:.3g}"


@pytest.mark.parametrize("opset", [17, 20])
@pytest.mark.parametrize("name,fixture", [("keras_transformer", "keras_transformer_pb"), ("tf1_bert", "tf_bert_pb")])
def test_transformers_export_at_older_opsets_through_exact_decompositions(name, fixture, opset, request):
    model = convert(request.getfixturevalue(fixture))
    proto = model_to_onnx(model, opset=opset)
    onnx.checker.check_model(proto, full_check=True)
    ops = {n.op_type for n in proto.graph.node}
    assert "Attention" not in ops and ("Gelu" in ops) == (opset >= 20) and "LayerNormalization" in ops
    session = ort.InferenceSession(proto.SerializeToString(), providers=["CPUExecutionProvider"])
    feeds = _batched(model, 4, seed=5)
    ours = dict(zip([o.name for o in session.get_outputs()],
                    session.run(None, {i.name: feeds[i.name] for i in session.get_inputs()})))
    for key, expected in source_runner(model.source).run(feeds).items():
        assert max_error(ours[key], expected) <= TOLERANCE
