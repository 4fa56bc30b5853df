"""More TensorFlow model builders for the model zoo: frozen GraphDef bytes, built from code.

Like :mod:`tests.models.tf_models`: each builder imports TensorFlow lazily, traces a ``tf.function`` with
an unknown batch dimension, freezes its variables with ``convert_variables_to_constants_v2`` and returns
the GraphDef bytes. Weights are seeded and sizes small, so each model builds in seconds.

Input names are the ``TensorSpec`` names (``image``, ``tokens``, ``sequence``, ``boxes``...); functional
control flow (``While`` and its bodies) is kept as traced, not lowered to TF1 frames.
"""

from __future__ import annotations

import os
from typing import Any, Callable, Sequence

__all__ = [
    "keras_efficientnet_b0",
    "keras_gru",
    "keras_lstm",
    "keras_transformer_encoder",
    "tf_function_data_dependent",
]

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")


def _tf():
    import tensorflow as tf

    return tf


def _freeze(fn: Callable[..., Any], specs: Sequence[Any]) -> bytes:
    """Traces ``fn`` at ``specs`` and freezes it (functional control flow kept); returns GraphDef bytes."""
    tf = _tf()
    from tensorflow.python.framework.convert_to_constants import convert_variables_to_constants_v2

    concrete = tf.function(fn, input_signature=list(specs)).get_concrete_function()
    frozen = convert_variables_to_constants_v2(concrete, lower_control_flow=False)
    return frozen.graph.as_graph_def().SerializeToString()


def _freeze_keras(model: Any, name: str, shape: tuple[int | None, ...], dtype: str = "float32") -> bytes:
    tf = _tf()
    return _freeze(lambda x: model(x, training=False), [tf.TensorSpec(shape, dtype, name=name)])


def keras_efficientnet_b0(size: int = 64, classes: int = 10) -> bytes:
    """Keras EfficientNetB0 (weights=None, seeded), input ``image`` [?, size, size, 3]; ~16 MB of weights."""
    import keras

    keras.utils.set_random_seed(0)
    model = keras.applications.EfficientNetB0(weights=None, input_shape=(size, size, 3), classes=classes)
    return _freeze_keras(model, "image", (None, size, size, 3))


def keras_transformer_encoder(
    num_layers: int = 4,
    seq: int = 16,
    d_model: int = 32,
    heads: int = 4,
    ff: int = 64,
    vocab: int = 100,
) -> bytes:
    """A Keras transformer encoder: token + position embeddings, then ``num_layers`` post-norm blocks.

    Each block is ``MultiHeadAttention`` → residual add → ``LayerNormalization`` → ``Dense(ff, gelu)`` (exact
    gelu: ``Erfc``) → ``Dense(d_model)`` → residual add → ``LayerNormalization``, under the name scope
    ``encoder_1/layer_N_1/`` (sublayers ``attention_1``, ``attention_norm_1``, ``intermediate_1``,
    ``output_1``, ``output_norm_1``: Keras 3 suffixes its scopes with ``_1``). Input ``tokens``
    (int32 [?, seq]); output the sequence [?, seq, d_model]. Per block: one attention, two layer norms,
    one gelu.
    """
    import keras

    class EncoderLayer(keras.layers.Layer):
        def __init__(self, name: str) -> None:
            super().__init__(name=name)
            self.attention = keras.layers.MultiHeadAttention(heads, d_model // heads, name="attention")
            self.attention_norm = keras.layers.LayerNormalization(epsilon=1e-6, name="attention_norm")
            self.intermediate = keras.layers.Dense(ff, activation="gelu", name="intermediate")
            self.output_dense = keras.layers.Dense(d_model, name="output")
            self.output_norm = keras.layers.LayerNormalization(epsilon=1e-6, name="output_norm")

        def call(self, x: Any) -> Any:
            x = self.attention_norm(x + self.attention(x, x))
            return self.output_norm(x + self.output_dense(self.intermediate(x)))

    keras.utils.set_random_seed(0)
    tokens = keras.Input((seq,), dtype="int32", name="tokens")
    x = keras.layers.Embedding(vocab, d_model, name="token_embedding")(tokens)
    x = x + keras.layers.Embedding(seq, d_model, name="position_embedding")(keras.ops.arange(seq))
    for i in range(num_layers):
        x = EncoderLayer(f"layer_{i}")(x)
    model = keras.Model(tokens, x, name="encoder")
    return _freeze_keras(model, "tokens", (None, seq), "int32")


def _keras_rnn(layer: str, steps: int, features: int, units: int) -> bytes:
    import keras

    keras.utils.set_random_seed(0)
    inputs = keras.Input((steps, features), name="sequence")
    x = getattr(keras.layers, layer)(units, return_sequences=True, unroll=False, name=layer.lower())(inputs)
    outputs = keras.layers.Dense(3, name="head")(x)
    model = keras.Model(inputs, outputs, name=f"keras_{layer.lower()}")
    return _freeze_keras(model, "sequence", (None, steps, features))


def keras_lstm(steps: int = 6, features: int = 5, units: int = 8) -> bytes:
    """Keras ``LSTM(units, return_sequences=True, unroll=False)`` + ``Dense(3)``: a TF2 ``While`` loop over
    TensorLists. Input ``sequence`` [?, steps, features]."""
    return _keras_rnn("LSTM", steps, features, units)


def keras_gru(steps: int = 6, features: int = 5, units: int = 8) -> bytes:
    """Keras ``GRU(units, return_sequences=True, unroll=False)`` + ``Dense(3)``, as :func:`keras_lstm`."""
    return _keras_rnn("GRU", steps, features, units)


def tf_function_data_dependent(features: int = 8, max_boxes: int = 5) -> bytes:
    """A ``tf.function`` with an unknown batch ``n`` and data-dependent ops.

    Inputs ``boxes`` [n, 4], ``scores`` [n], ``feats`` [n, features] (float32). Outputs, in order:

    0. ``selected``: ``non_max_suppression`` then ``gather`` of the boxes: [k, 4], k known only at run time;
    1. ``masked``: ``boolean_mask`` of the features by ``scores > 0.5``, reshaped to [m, 2, features / 2]
       (a reshape to a shape computed from the masked tensor's own, data-dependent, shape);
    2. ``grid``: ``feats`` reshaped to the computed shape [n * 2, features / 2] (``Shape`` → ``StridedSlice``
       → ``Mul`` → ``Pack``), through a Dense layer: static once ``n`` is;
    3. ``score_sum``: the sum of the masked scores, a scalar.
    """
    tf = _tf()
    rng = tf.random.Generator.from_seed(0)
    kernel = tf.constant(rng.normal((features // 2, 3)).numpy())

    def fn(boxes: Any, scores: Any, feats: Any) -> Any:
        with tf.name_scope("nms"):
            keep = tf.image.non_max_suppression(boxes, scores, max_output_size=max_boxes, iou_threshold=0.5)
            selected = tf.gather(boxes, keep, name="selected")
        with tf.name_scope("mask"):
            chosen = scores > 0.5
            rows = tf.boolean_mask(feats, chosen)
            masked = tf.reshape(rows, tf.stack([tf.shape(rows)[0], 2, features // 2]), name="masked")
            score_sum = tf.reduce_sum(tf.boolean_mask(scores, chosen), name="score_sum")
        with tf.name_scope("computed_reshape"):
            n = tf.shape(feats)[0]
            grid = tf.reshape(feats, tf.stack([n * 2, features // 2]))
            grid = tf.nn.relu(tf.matmul(grid, kernel), name="grid")
        return selected, masked, grid, score_sum

    specs = [
        tf.TensorSpec((None, 4), tf.float32, name="boxes"),
        tf.TensorSpec((None,), tf.float32, name="scores"),
        tf.TensorSpec((None, features), tf.float32, name="feats"),
    ]
    return _freeze(fn, specs)
