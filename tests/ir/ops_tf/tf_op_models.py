"""Models whose frozen graphs the ``tf`` dialect op definitions must cover.

Each builder returns a :class:`FrozenModel`: TensorFlow's ``GraphDef`` of the frozen model (variables
folded to constants, function bodies in its library) and the static shapes fed at its placeholders.
Weights are seeded; inputs are small so that building every model takes seconds.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np

__all__ = ["BUILDERS", "FrozenModel"]

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")


@dataclass
class FrozenModel:
    name: str
    graph_def: Any  # tensorflow GraphDef
    feeds: dict[str, tuple[int, ...]] = field(default_factory=dict)  # placeholder name -> static shape fed


def _tf():
    import tensorflow as tf

    return tf


def _freeze(name: str, fn: Callable, specs: list, feeds: dict[str, tuple[int, ...]], lower: bool = True) -> FrozenModel:
    """Freezes ``fn`` traced at ``specs``; ``lower=False`` keeps functional While/If and their bodies."""
    tf = _tf()
    from tensorflow.python.framework.convert_to_constants import convert_variables_to_constants_v2

    concrete = tf.function(fn).get_concrete_function(*specs)
    frozen = convert_variables_to_constants_v2(concrete, lower_control_flow=lower)
    return FrozenModel(name, frozen.graph.as_graph_def(), feeds)


def _keras_app(name: str, ctor_name: str, size: int, **kwargs: Any) -> FrozenModel:
    tf = _tf()
    import keras

    keras.utils.set_random_seed(0)
    model = getattr(keras.applications, ctor_name)(weights=None, input_shape=(size, size, 3), **kwargs)
    spec = tf.TensorSpec((None, size, size, 3), tf.float32, name="image")
    return _freeze(name, lambda x: model(x, training=False), [spec], {"image": (2, size, size, 3)})


def resnet50() -> FrozenModel:
    return _keras_app("resnet50", "ResNet50", 64, classes=10)


def mobilenet_v2() -> FrozenModel:
    return _keras_app("mobilenet_v2", "MobileNetV2", 96, alpha=0.35, classes=10)


def efficientnet_b0() -> FrozenModel:
    return _keras_app("efficientnet_b0", "EfficientNetB0", 64, classes=10)


def keras_transformer() -> FrozenModel:
    """One transformer encoder block: MultiHeadAttention, LayerNormalization, Dense with gelu."""
    tf = _tf()
    import keras

    keras.utils.set_random_seed(0)
    inputs = keras.Input((16, 32), name="tokens")
    attn = keras.layers.MultiHeadAttention(num_heads=4, key_dim=8, name="mha")(inputs, inputs)
    x = keras.layers.LayerNormalization(epsilon=1e-6, name="ln1")(inputs + attn)
    ff = keras.layers.Dense(64, activation="gelu", name="ff1")(x)
    ff = keras.layers.Dense(32, name="ff2")(ff)
    y = keras.layers.LayerNormalization(epsilon=1e-6, name="ln2")(x + ff)
    model = keras.Model(inputs, y)
    spec = tf.TensorSpec((None, 16, 32), tf.float32, name="tokens")
    return _freeze("keras_transformer", lambda x: model(x, training=False), [spec], {"tokens": (2, 16, 32)})


def _keras_rnn(name: str, layer: str) -> FrozenModel:
    tf = _tf()
    import keras

    keras.utils.set_random_seed(0)
    inputs = keras.Input((6, 5), name="sequence")
    x = getattr(keras.layers, layer)(8, return_sequences=True, name=layer.lower())(inputs)
    y = keras.layers.Dense(3, name="head")(x)
    model = keras.Model(inputs, y)
    spec = tf.TensorSpec((None, 6, 5), tf.float32, name="sequence")
    return _freeze(name, lambda x: model(x, training=False), [spec], {"sequence": (2, 6, 5)}, lower=False)


def keras_lstm() -> FrozenModel:
    return _keras_rnn("keras_lstm", "LSTM")


def keras_gru() -> FrozenModel:
    return _keras_rnn("keras_gru", "GRU")


def tf1_bert(layers: int = 2, hidden: int = 32, heads: int = 4, inter: int = 64, vocab: int = 50, seq: int = 8) -> FrozenModel:
    """A BERT encoder the way google-research/bert writes it, built with constants in a TF1 graph.

    Embedding lookup by GatherV2; layer norm by ``tf.nn.moments`` + ``tf.nn.batch_normalization``; erf gelu;
    self-attention by reshape / transpose / matmul / softmax; the batch size read at run time
    (Shape → StridedSlice → Pack → Reshape).
    """
    tf = _tf()
    rng = np.random.default_rng(0)

    def w(*shape: int) -> Any:
        return tf.constant(rng.normal(0.0, 0.02, shape).astype(np.float32))

    def dense(x: Any, units: int, name: str) -> Any:
        with tf.name_scope(name):
            return tf.nn.bias_add(tf.matmul(x, w(int(x.shape[-1]), units)), w(units))

    def layer_norm(x: Any, name: str = "LayerNorm") -> Any:
        with tf.name_scope(name):
            mean, variance = tf.nn.moments(x, [-1], keepdims=True)
            dim = int(x.shape[-1])
            return tf.nn.batch_normalization(x, mean, variance, w(dim), w(dim) + 1.0, 1e-12)

    def gelu(x: Any) -> Any:
        return x * 0.5 * (1.0 + tf.math.erf(x / tf.sqrt(2.0)))

    graph = tf.Graph()
    with graph.as_default():
        ids = tf.compat.v1.placeholder(tf.int32, [None, seq], name="input_ids")
        mask = tf.compat.v1.placeholder(tf.int32, [None, seq], name="input_mask")
        types = tf.compat.v1.placeholder(tf.int32, [None, seq], name="token_type_ids")
        with tf.name_scope("bert"):
            with tf.name_scope("embeddings"):
                batch = tf.shape(ids)[0]
                flat = tf.reshape(ids, [-1])
                x = tf.gather(w(vocab, hidden), flat)
                x = tf.reshape(x, tf.stack([batch, seq, hidden]))
                one_hot = tf.one_hot(tf.reshape(types, [-1]), depth=2)
                x += tf.reshape(tf.matmul(one_hot, w(2, hidden)), [batch, seq, hidden])
                x += tf.expand_dims(tf.slice(w(16, hidden), [0, 0], [seq, -1]), 0)
                x = layer_norm(x)
            with tf.name_scope("encoder"):
                m = tf.cast(tf.reshape(mask, [batch, 1, seq]), tf.float32)
                m = tf.ones(tf.stack([batch, seq, 1]), tf.float32) * m
                adder = (1.0 - tf.expand_dims(m, axis=[1])) * -10000.0
                head = hidden // heads
                x2d = tf.reshape(x, [-1, hidden])
                for i in range(layers):
                    with tf.name_scope(f"layer_{i}"):

                        def split(t: Any) -> Any:
                            t = tf.reshape(t, [batch, seq, heads, head])
                            return tf.transpose(t, [0, 2, 1, 3])

                        q = split(dense(x2d, hidden, "query"))
                        k = split(dense(x2d, hidden, "key"))
                        v = split(dense(x2d, hidden, "value"))
                        scores = tf.multiply(tf.matmul(q, k, transpose_b=True), 1.0 / np.sqrt(head))
                        probs = tf.nn.softmax(scores + adder)
                        ctx = tf.transpose(tf.matmul(probs, v), [0, 2, 1, 3])
                        ctx = tf.reshape(ctx, [batch * seq, hidden])
                        attn = layer_norm(dense(ctx, hidden, "attention_output") + x2d, "ln_attention")
                        inter_out = gelu(dense(attn, inter, "intermediate"))
                        x2d = layer_norm(dense(inter_out, hidden, "output") + attn, "ln_output")
                seq_out = tf.reshape(x2d, [batch, seq, hidden], name="sequence_output")
            with tf.name_scope("pooler"):
                first = tf.squeeze(seq_out[:, 0:1, :], axis=1)
                tf.tanh(dense(first, hidden, "dense"), name="pooled_output")
    feeds = {"input_ids": (2, seq), "input_mask": (2, seq), "token_type_ids": (2, seq)}
    return FrozenModel("tf1_bert", graph.as_graph_def(), feeds)


class _LstmCell:
    """A minimal LSTM cell with constant weights that ``dynamic_rnn`` accepts (Keras 3 has no v1 cells)."""

    def __init__(self, tf: Any, features: int, units: int) -> None:
        rng = np.random.default_rng(1)
        self._tf = tf
        self._units = units
        self._kernel = tf.constant(rng.normal(0.0, 0.3, (features + units, 4 * units)).astype(np.float32))
        self._bias = tf.constant(np.zeros(4 * units, np.float32))

    @property
    def state_size(self) -> tuple[int, int]:
        return (self._units, self._units)

    @property
    def output_size(self) -> int:
        return self._units

    def zero_state(self, batch: Any, dtype: Any) -> tuple[Any, Any]:
        tf = self._tf
        zeros = tf.zeros(tf.stack([batch, self._units]), dtype)
        return (zeros, zeros)

    def __call__(self, inputs: Any, state: tuple[Any, Any]) -> tuple[Any, tuple[Any, Any]]:
        tf = self._tf
        c, h = state
        gates = tf.nn.bias_add(tf.matmul(tf.concat([inputs, h], 1), self._kernel), self._bias)
        i, j, f, o = tf.split(gates, 4, axis=1)
        c = tf.sigmoid(f + 1.0) * c + tf.sigmoid(i) * tf.tanh(j)
        h = tf.tanh(c) * tf.sigmoid(o)
        return h, (c, h)


def tf1_dynamic_rnn(steps: int = 5, features: int = 3, units: int = 4) -> FrozenModel:
    """``tf.compat.v1.nn.dynamic_rnn`` over an LSTM cell, in TF1 control flow (TensorArrayV3, Enter...Exit)."""
    tf = _tf()
    tf.compat.v1.disable_control_flow_v2()
    try:
        graph = tf.Graph()
        with graph.as_default():
            x = tf.compat.v1.placeholder(tf.float32, [None, steps, features], name="x")
            with tf.compat.v1.variable_scope("rnn"):
                outputs, _ = tf.compat.v1.nn.dynamic_rnn(_LstmCell(tf, features, units), x, dtype=tf.float32)
            tf.identity(outputs, name="y")
    finally:
        tf.compat.v1.enable_control_flow_v2()
    return FrozenModel("tf1_dynamic_rnn", graph.as_graph_def(), {"x": (2, steps, features)})


def tf2_data_dependent() -> FrozenModel:
    """A ``tf.function`` with an unknown batch: boolean_mask, non_max_suppression, a reshape to a computed shape."""
    tf = _tf()

    def fn(boxes: Any, scores: Any, feats: Any) -> Any:
        keep = tf.image.non_max_suppression(boxes, scores, max_output_size=5, iou_threshold=0.5)
        picked = tf.gather(boxes, keep)
        masked = tf.boolean_mask(scores, scores > 0.5)
        n = tf.shape(feats)[0]
        flat = tf.reshape(feats, [n, -1])
        grid = tf.reshape(flat, tf.concat([[n], [4, 6]], axis=0))
        total = tf.cond(tf.reduce_sum(masked) > 1.0, lambda: tf.reduce_max(grid, axis=[1, 2]), lambda: tf.reduce_min(grid, axis=[1, 2]))
        top = tf.math.top_k(scores, k=3)
        idx = tf.where(scores > 0.2)
        return picked, masked, total, top.values, tf.cast(idx, tf.int32), tf.argmax(grid, axis=-1)

    specs = [
        tf.TensorSpec((None, 4), tf.float32, name="boxes"),
        tf.TensorSpec((None,), tf.float32, name="scores"),
        tf.TensorSpec((None, 4, 6), tf.float32, name="feats"),
    ]
    return _freeze("tf2_data_dependent", fn, specs, {"boxes": (10, 4), "scores": (10,), "feats": (3, 4, 6)}, lower=False)


BUILDERS: dict[str, Callable[[], FrozenModel]] = {
    "resnet50": resnet50,
    "mobilenet_v2": mobilenet_v2,
    "efficientnet_b0": efficientnet_b0,
    "keras_transformer": keras_transformer,
    "tf1_bert": tf1_bert,
    "keras_lstm": keras_lstm,
    "keras_gru": keras_gru,
    "tf1_dynamic_rnn": tf1_dynamic_rnn,
    "tf2_data_dependent": tf2_data_dependent,
}
