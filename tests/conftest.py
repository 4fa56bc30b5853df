"""Session-scoped model fixtures shared by the test suites.

Every model is built from code (``tests/models``) once per test session: under pytest-xdist the
workers share one directory, and a file lock per model makes the first worker that needs a model build
it while the others wait and reuse it. TensorFlow is imported only by the fixtures that build TF models.
"""

from __future__ import annotations

import fcntl
import os
import sys
from pathlib import Path
from typing import Callable

import pytest

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))  # `tests.models` under --import-mode=importlib

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")  # test-process noise only; the package never sets it


class ModelStore:
    """Builds each named model file or directory once per session, shared across xdist workers."""

    def __init__(self, root: Path) -> None:
        self.root = root
        root.mkdir(parents=True, exist_ok=True)

    def _once(self, name: str, make: Callable[[Path], None]) -> Path:
        target = self.root / name
        done = self.root / f"{name}.done"
        with open(self.root / f"{name}.lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            try:
                if not done.exists():
                    make(target)
                    done.touch()
            finally:
                fcntl.flock(lock, fcntl.LOCK_UN)
        return target

    def file(self, name: str, build: Callable[[], bytes]) -> Path:
        """A file holding ``build()``'s bytes."""
        return self._once(name, lambda target: target.write_bytes(build()))

    def written(self, name: str, build: Callable[[Path], object]) -> Path:
        """A file or directory that ``build(path)`` writes."""
        return self._once(name, lambda target: build(target))


@pytest.fixture(scope="session")
def model_store(tmp_path_factory: pytest.TempPathFactory) -> ModelStore:
    base = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        base = base.parent  # shared by all workers of this run
    return ModelStore(base / "models")


# ------------------------------------------------------------------------------------------- TensorFlow
@pytest.fixture(scope="session")
def tf_convnet_pb(model_store: ModelStore) -> Path:
    """Keras Conv/BatchNorm/ReLU/pool/LayerNorm/Dense, frozen (input ``input_0`` [?, 8, 8, 3])."""
    from tests.models import tf_models

    return model_store.file("convnet.pb", tf_models.keras_small_convnet)


@pytest.fixture(scope="session")
def tf_mobilenet_pb(model_store: ModelStore) -> Path:
    """Keras MobileNetV2 (weights=None, 32x32, alpha 0.35), frozen."""
    from tests.models import tf_models

    return model_store.file("mobilenet.pb", tf_models.keras_mobilenet_v2)


@pytest.fixture(scope="session")
def tf_bert_pb(model_store: ModelStore) -> Path:
    """A 2-layer BERT encoder written as a TF1 graph with ``bert/encoder/layer_N/...`` scopes, frozen."""
    from tests.models import tf_models

    return model_store.file("bert.pb", tf_models.bert_encoder_tf1)


@pytest.fixture(scope="session")
def tf_bert_pbtxt(model_store: ModelStore, tf_bert_pb: Path) -> Path:
    """The same BERT encoder as a text GraphDef written by TensorFlow."""
    from tests.models import tf_models

    return model_store.written(
        "bert.pbtxt", lambda path: tf_models.write_text_graphdef(tf_bert_pb.read_bytes(), path)
    )


@pytest.fixture(scope="session")
def tf_rnn_pb(model_store: ModelStore) -> Path:
    """A TF1 ``dynamic_rnn`` LSTM in TF1 control flow (Enter/Merge/Switch/NextIteration/Exit), frozen."""
    from tests.models import tf_models

    return model_store.file("dynamic_rnn.pb", tf_models.tf1_dynamic_rnn)


@pytest.fixture(scope="session")
def tf1_cond_pb(model_store: ModelStore) -> Path:
    """A TF1 ``while_loop`` and ``cond`` in TF1 control flow."""
    from tests.models import tf_models

    return model_store.file("tf1_while_cond.pb", tf_models.tf1_while_and_cond)


@pytest.fixture(scope="session")
def tf2_control_flow_pb(model_store: ModelStore) -> Path:
    """A traced ``tf.function`` with StatelessWhile / StatelessIf / StatelessCase and their bodies."""
    from tests.models import tf_models

    return model_store.file("tf2_control_flow.pb", tf_models.tf2_control_flow)


@pytest.fixture(scope="session")
def tf2_calls_pb(model_store: ModelStore) -> Path:
    """A traced ``tf.function`` calling nested ``tf.function``s through PartitionedCall."""
    from tests.models import tf_models

    return model_store.file("tf2_calls.pb", tf_models.tf2_nested_calls)


@pytest.fixture(scope="session")
def saved_model_keras(model_store: ModelStore) -> Path:
    from tests.models import tf_models

    return model_store.written("sm_keras", tf_models.saved_model_keras_export)


@pytest.fixture(scope="session")
def saved_model_module(model_store: ModelStore) -> Path:
    from tests.models import tf_models

    return model_store.written("sm_module", tf_models.saved_model_tf_module)


@pytest.fixture(scope="session")
def saved_model_tf1(model_store: ModelStore) -> Path:
    from tests.models import tf_models

    return model_store.written("sm_tf1", tf_models.saved_model_tf1_builder)


@pytest.fixture(scope="session")
def saved_model_simple_save(model_store: ModelStore) -> Path:
    from tests.models import tf_models

    return model_store.written("sm_simple_save", tf_models.saved_model_tf1_simple_save)


# ------------------------------------------------------------------------------------------- ONNX
def _onnx_file(store: ModelStore, name: str, builder: str) -> Path:
    from tests.models import onnx_models

    return store.file(f"{name}.onnx", lambda: getattr(onnx_models, builder)().SerializeToString())


@pytest.fixture(scope="session")
def onnx_attention(model_store: ModelStore) -> Path:
    return _onnx_file(model_store, "attention", "attention_block")


@pytest.fixture(scope="session")
def onnx_control_flow(model_store: ModelStore) -> Path:
    return _onnx_file(model_store, "control_flow", "control_flow")


@pytest.fixture(scope="session")
def onnx_function(model_store: ModelStore) -> Path:
    return _onnx_file(model_store, "function", "local_function")


@pytest.fixture(scope="session")
def onnx_messy(model_store: ModelStore) -> Path:
    return _onnx_file(model_store, "messy", "messy_names")


@pytest.fixture(scope="session")
def onnx_external(model_store: ModelStore) -> Path:
    """``model.onnx`` with its weight ``w`` in ``weights.bin`` beside it."""
    from tests.models import onnx_models

    return model_store.written("external", onnx_models.external_data) / "model.onnx"
