"""The model zoo as SavedModels: each zoo builder's model written with TensorFlow's own exporters.

The zoo builders (:mod:`tests.models.tf_models`, :mod:`tests.models.more_models`) build a model and
freeze it. :func:`write_saved_model` runs one of them with its freezing step swapped for an export of
the same model, so the SavedModel holds exactly the zoo model:

* Keras models: ``model.export`` (Keras 3's SavedModel export, signature ``serving_default``);
* plain ``tf.function`` models: ``tf.saved_model.save`` of a ``tf.Module`` with the function as its
  ``serving_default`` signature;
* TF1 graphs: ``tf.compat.v1.saved_model.Builder`` from the session, signature ``serving_default`` with
  the graph's placeholders as inputs and the frozen outputs as outputs (keys: the node names).
"""

from __future__ import annotations

from contextlib import contextmanager
from pathlib import Path
from typing import Any, Callable, Iterator

from tests.models import more_models, tf_models

__all__ = ["SAVED_ZOO", "write_saved_model"]

# Zoo model name -> its builder (see tests/e2e/zoo.py for the profiles converted).
SAVED_ZOO: dict[str, Callable[[], bytes]] = {
    "resnet50": lambda: tf_models.keras_resnet50(64),
    "mobilenet_v2": tf_models.keras_mobilenet_v2,
    "efficientnet_b0": more_models.keras_efficientnet_b0,
    "keras_transformer": more_models.keras_transformer_encoder,
    "keras_lstm": more_models.keras_lstm,
    "keras_gru": more_models.keras_gru,
    "tf_data_dependent": more_models.tf_function_data_dependent,
    "tf1_bert": tf_models.bert_encoder_tf1,
    "tf1_dynamic_rnn": tf_models.tf1_dynamic_rnn,
}


@contextmanager
def _exporting_to(path: Path) -> Iterator[None]:
    import tensorflow as tf

    def keras_export(model: Any, *args: Any, **kwargs: Any) -> bytes:
        model.export(str(path), verbose=False)
        return b""

    def function_save(fn: Any, specs: Any) -> bytes:
        module = tf.Module()
        module.serve = tf.function(fn, input_signature=list(specs))
        tf.saved_model.save(module, str(path), signatures={"serving_default": module.serve})
        return b""

    freeze_session = tf.compat.v1.graph_util.convert_variables_to_constants

    def session_save(sess: Any, graph_def: Any, output_names: list[str], *args: Any, **kwargs: Any) -> Any:
        graph = sess.graph
        inputs = {op.name: op.outputs[0] for op in graph.get_operations() if op.type == "Placeholder"}
        outputs = {name: graph.get_tensor_by_name(f"{name}:0") for name in output_names}
        builder = tf.compat.v1.saved_model.Builder(str(path))
        signature = tf.compat.v1.saved_model.predict_signature_def(inputs=inputs, outputs=outputs)
        builder.add_meta_graph_and_variables(sess, [tf.compat.v1.saved_model.SERVING],
                                             signature_def_map={"serving_default": signature})
        builder.save()
        return freeze_session(sess, graph_def, output_names, *args, **kwargs)

    patches = [
        (tf_models, "_freeze_keras", keras_export),
        (more_models, "_freeze_keras", keras_export),
        (more_models, "_freeze", function_save),
        (tf.compat.v1.graph_util, "convert_variables_to_constants", session_save),
    ]
    saved = [(owner, name, getattr(owner, name)) for owner, name, _ in patches]
    for owner, name, replacement in patches:
        setattr(owner, name, replacement)
    try:
        yield
    finally:
        for owner, name, original in saved:
            setattr(owner, name, original)


def write_saved_model(name: str, path: Path) -> Path:
    """Writes zoo model ``name`` as a SavedModel directory at ``path``."""
    with _exporting_to(path):
        SAVED_ZOO[name]()
    if not (path / "saved_model.pb").is_file():
        raise RuntimeError(f"zoo model {name}: its builder exported no SavedModel")
    return path


def write_checkpoint_of_every_dtype(path: Path) -> Path:
    """A ``tf.train.Checkpoint`` (prefix ``path/ckpt``) with one variable per numeric dtype and a string one."""
    import numpy as np
    import tensorflow as tf

    rng = np.random.default_rng(0)
    values = {
        "f32": rng.normal(size=(3, 4)).astype(np.float32),
        "f64": rng.normal(size=(5,)),
        "f16": rng.normal(size=(2, 2)).astype(np.float16),
        "bf16": tf.constant(rng.normal(size=(4,)), tf.bfloat16),
        "i8": np.arange(-3, 3, dtype=np.int8),
        "u8": np.arange(250, 256, dtype=np.uint8),
        "i16": np.array([-300, 7], np.int16),
        "u16": np.array([65535, 1], np.uint16),
        "i32": np.arange(12, dtype=np.int32).reshape(3, 4),
        "u32": np.array([4294967295], np.uint32),
        "i64": np.array([-(2**40), 2**40], np.int64),
        "u64": np.array([2**63], np.uint64),
        "flag": np.array([True, False, True]),
        "c64": np.array([1 + 2j, -3j], np.complex64),
        "c128": np.array([0.5 - 1j], np.complex128),
        "scalar": np.float32(2.5),
        "empty": np.zeros((0, 3), np.float32),
        "words": np.array([[b"", b"scope"], [b"fusion" * 40, "\u00e9t\u00e9".encode()]], dtype=object),
    }
    checkpoint = tf.train.Checkpoint(**{name: tf.Variable(value) for name, value in values.items()})
    path.mkdir(parents=True, exist_ok=True)
    checkpoint.write(str(path / "ckpt"))
    return path


def write_lookup_table_model(path: Path) -> Path:
    """A ``tf.Module`` whose signature looks words up in a ``StaticHashTable`` (a captured resource)."""
    import tensorflow as tf

    class Vocabulary(tf.Module):
        def __init__(self) -> None:
            super().__init__()
            init = tf.lookup.KeyValueTensorInitializer(tf.constant(["scope", "fusion"]), tf.constant([1, 2], tf.int64))
            self.table = tf.lookup.StaticHashTable(init, default_value=-1)

        @tf.function(input_signature=[tf.TensorSpec([None], tf.string, name="words")])
        def serve(self, words: Any) -> Any:
            return {"ids": self.table.lookup(words)}

    module = Vocabulary()
    tf.saved_model.save(module, str(path), signatures={"serving_default": module.serve})
    return path


def write_assigning_model(path: Path) -> Path:
    """A ``tf.Module`` whose signature adds its input to a variable (an assignment inside the signature)."""
    import tensorflow as tf

    class Counter(tf.Module):
        def __init__(self) -> None:
            super().__init__()
            self.total = tf.Variable(0.0, name="total")

        @tf.function(input_signature=[tf.TensorSpec([], tf.float32, name="x")])
        def serve(self, x: Any) -> Any:
            self.total.assign_add(x)
            return {"total": self.total.read_value()}

    module = Counter()
    tf.saved_model.save(module, str(path), signatures={"serving_default": module.serve})
    return path
