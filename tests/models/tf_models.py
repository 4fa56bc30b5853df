"""TensorFlow model builders: frozen GraphDefs, text GraphDefs and SavedModels, built from code.

Every builder imports TensorFlow lazily, builds its model in a fresh ``tf.Graph`` or as a ``tf.function``
and returns serialized bytes or writes a directory. Weights are seeded, so a builder's output is the same
on every call (TensorFlow's own serialization order permitting).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

__all__ = [
    "bert_encoder_tf1",
    "freeze_concrete_function",
    "keras_mobilenet_v2",
    "keras_resnet50",
    "keras_small_convnet",
    "tf1_dynamic_rnn",
    "tf1_while_and_cond",
    "tf2_control_flow",
    "tf2_nested_calls",
    "write_text_graphdef",
    "saved_model_keras_export",
    "saved_model_tf_module",
    "saved_model_tf1_builder",
    "saved_model_tf1_simple_save",
]

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")


def _tf():
    import tensorflow as tf

    return tf


def freeze_concrete_function(concrete_function, lower_control_flow: bool = False) -> bytes:
    """Freezes a concrete function's variables into constants; returns the GraphDef bytes."""
    from tensorflow.python.framework.convert_to_constants import convert_variables_to_constants_v2

    frozen = convert_variables_to_constants_v2(concrete_function, lower_control_flow=lower_control_flow)
    return frozen.graph.as_graph_def().SerializeToString()


def _freeze_keras(model, input_shapes: list[tuple[int | None, ...]], dtypes: list[str] | None = None) -> bytes:
    tf = _tf()
    dtypes = dtypes or ["float32"] * len(input_shapes)
    specs = [tf.TensorSpec(s, d, name=f"input_{i}") for i, (s, d) in enumerate(zip(input_shapes, dtypes))]

    @tf.function(input_signature=specs)
    def serve(*args):
        return model(list(args) if len(args) > 1 else args[0], training=False)

    return freeze_concrete_function(serve.get_concrete_function())


def keras_resnet50(size: int = 224) -> bytes:
    """Keras ResNet50 (weights=None, seeded) frozen to GraphDef bytes; ~100 MB at any input size."""
    tf = _tf()
    import keras

    keras.utils.set_random_seed(0)
    model = keras.applications.ResNet50(weights=None, input_shape=(size, size, 3))
    del tf
    return _freeze_keras(model, [(None, size, size, 3)])


def keras_mobilenet_v2(size: int = 32, alpha: float = 0.35) -> bytes:
    """A small Keras MobileNetV2 (weights=None, seeded) frozen to GraphDef bytes."""
    import keras

    keras.utils.set_random_seed(0)
    model = keras.applications.MobileNetV2(weights=None, input_shape=(size, size, 3), alpha=alpha, classes=10)
    return _freeze_keras(model, [(None, size, size, 3)])


def _small_convnet():
    import keras

    keras.utils.set_random_seed(0)
    inputs = keras.Input((8, 8, 3), name="image")
    x = keras.layers.Conv2D(4, 3, padding="same", name="conv")(inputs)
    x = keras.layers.BatchNormalization(name="bn")(x)
    x = keras.layers.ReLU(name="relu")(x)
    x = keras.layers.GlobalAveragePooling2D(name="pool")(x)
    x = keras.layers.LayerNormalization(name="ln")(x)
    outputs = keras.layers.Dense(5, activation="softmax", name="head")(x)
    return keras.Model(inputs, outputs, name="small_convnet")


def keras_small_convnet() -> bytes:
    """Conv / BatchNorm / ReLU / pooling / LayerNorm / Dense, frozen to GraphDef bytes."""
    return _freeze_keras(_small_convnet(), [(None, 8, 8, 3)])


def write_text_graphdef(graph_def_bytes: bytes, path: Path) -> Path:
    """Writes GraphDef bytes as a text GraphDef (.pbtxt) with TensorFlow's own text writer."""
    tf = _tf()
    graph_def = tf.compat.v1.GraphDef.FromString(graph_def_bytes)
    path.write_text(str(graph_def))
    return path


# ---------------------------------------------------------------------------------------------- TF1 graphs
def _tf1_dense(tf, x, units: int, name: str, activation=None):
    with tf.compat.v1.variable_scope(name):
        in_dim = int(x.shape[-1])
        kernel = tf.compat.v1.get_variable(
            "kernel", [in_dim, units], initializer=tf.compat.v1.truncated_normal_initializer(stddev=0.02)
        )
        bias = tf.compat.v1.get_variable("bias", [units], initializer=tf.compat.v1.zeros_initializer())
        y = tf.nn.bias_add(tf.matmul(x, kernel), bias)
        return activation(y) if activation else y


def _tf1_layer_norm(tf, x, name: str = "LayerNorm"):
    with tf.compat.v1.variable_scope(name):
        dim = int(x.shape[-1])
        beta = tf.compat.v1.get_variable("beta", [dim], initializer=tf.compat.v1.zeros_initializer())
        gamma = tf.compat.v1.get_variable("gamma", [dim], initializer=tf.compat.v1.ones_initializer())
        mean, variance = tf.nn.moments(x, [-1], keepdims=True)
        return tf.nn.batch_normalization(x, mean, variance, beta, gamma, 1e-12)


def _tf1_gelu(tf, x):
    cdf = 0.5 * (1.0 + tf.tanh(0.7978845608028654 * (x + 0.044715 * tf.pow(x, 3))))
    return x * cdf


def bert_encoder_tf1(
    num_layers: int = 2,
    hidden: int = 32,
    heads: int = 2,
    intermediate: int = 64,
    vocab: int = 100,
    seq: int = 8,
    max_position: int = 16,
) -> bytes:
    """A BERT encoder written the way google-research/bert writes it (TF1 graph, ``bert/...`` scopes).

    Returns the frozen GraphDef bytes (outputs ``bert/pooler/dense/Tanh`` and ``bert/encoder/Reshape_final``).
    At ``num_layers=12, hidden=768, heads=12, intermediate=3072, vocab=30522`` this is BERT-base (~440 MB).
    """
    tf = _tf()
    graph = tf.Graph()
    with graph.as_default():
        tf.compat.v1.set_random_seed(0)
        input_ids = tf.compat.v1.placeholder(tf.int32, [None, seq], name="input_ids")
        input_mask = tf.compat.v1.placeholder(tf.int32, [None, seq], name="input_mask")
        token_type_ids = tf.compat.v1.placeholder(tf.int32, [None, seq], name="token_type_ids")
        with tf.compat.v1.variable_scope("bert"):
            with tf.compat.v1.variable_scope("embeddings"):
                init = tf.compat.v1.truncated_normal_initializer(stddev=0.02)
                word = tf.compat.v1.get_variable("word_embeddings", [vocab, hidden], initializer=init)
                x = tf.gather(word, input_ids)
                token = tf.compat.v1.get_variable("token_type_embeddings", [2, hidden], initializer=init)
                x += tf.gather(token, token_type_ids)
                pos = tf.compat.v1.get_variable("position_embeddings", [max_position, hidden], initializer=init)
                x += tf.expand_dims(tf.slice(pos, [0, 0], [seq, -1]), 0)
                x = _tf1_layer_norm(tf, x)
            with tf.compat.v1.variable_scope("encoder"):
                mask = tf.cast(tf.reshape(input_mask, [-1, 1, 1, seq]), tf.float32)
                adder = (1.0 - mask) * -10000.0
                head_dim = hidden // heads
                x2d = tf.reshape(x, [-1, hidden])
                for i in range(num_layers):
                    with tf.compat.v1.variable_scope(f"layer_{i}"):
                        with tf.compat.v1.variable_scope("attention"):
                            with tf.compat.v1.variable_scope("self"):

                                def split(t):
                                    t = tf.reshape(t, [-1, seq, heads, head_dim])
                                    return tf.transpose(t, [0, 2, 1, 3])

                                q = split(_tf1_dense(tf, x2d, hidden, "query"))
                                k = split(_tf1_dense(tf, x2d, hidden, "key"))
                                v = split(_tf1_dense(tf, x2d, hidden, "value"))
                                scores = tf.matmul(q, k, transpose_b=True) * (1.0 / head_dim**0.5)
                                probs = tf.nn.softmax(scores + adder)
                                ctx = tf.transpose(tf.matmul(probs, v), [0, 2, 1, 3])
                                ctx = tf.reshape(ctx, [-1, hidden])
                            with tf.compat.v1.variable_scope("output"):
                                attn = _tf1_dense(tf, ctx, hidden, "dense")
                                attn = _tf1_layer_norm(tf, attn + x2d)
                        with tf.compat.v1.variable_scope("intermediate"):
                            inter = _tf1_dense(tf, attn, intermediate, "dense", lambda t: _tf1_gelu(tf, t))
                        with tf.compat.v1.variable_scope("output"):
                            out = _tf1_dense(tf, inter, hidden, "dense")
                            x2d = _tf1_layer_norm(tf, out + attn)
                seq_out = tf.reshape(x2d, [-1, seq, hidden], name="Reshape_final")
            with tf.compat.v1.variable_scope("pooler"):
                first = tf.squeeze(seq_out[:, 0:1, :], axis=1)
                pooled = _tf1_dense(tf, first, hidden, "dense", tf.tanh)
        with tf.compat.v1.Session(graph=graph) as sess:
            sess.run(tf.compat.v1.global_variables_initializer())
            frozen = tf.compat.v1.graph_util.convert_variables_to_constants(
                sess, graph.as_graph_def(), [pooled.op.name, seq_out.op.name]
            )
    return frozen.SerializeToString()


class _TinyLSTMCell:
    """A minimal LSTM cell with the RNNCell interface that ``dynamic_rnn`` duck-types (Keras 3 has none)."""

    def __init__(self, units: int) -> None:
        self.units = units

    @property
    def state_size(self):
        return (self.units, self.units)

    @property
    def output_size(self) -> int:
        return self.units

    def zero_state(self, batch_size, dtype):
        tf = _tf()
        return tuple(tf.zeros([batch_size, self.units], dtype) for _ in range(2))

    def __call__(self, inputs, state, scope=None):
        tf = _tf()
        c, h = state
        with tf.compat.v1.variable_scope(scope or "lstm_cell", reuse=tf.compat.v1.AUTO_REUSE):
            gates = _tf1_dense(tf, tf.concat([inputs, h], axis=1), 4 * self.units, "gates")
            i, j, f, o = tf.split(gates, 4, axis=1)
            new_c = c * tf.sigmoid(f + 1.0) + tf.sigmoid(i) * tf.tanh(j)
            new_h = tf.tanh(new_c) * tf.sigmoid(o)
        return new_h, (new_c, new_h)


def tf1_dynamic_rnn(batch: int = 2, steps: int = 5, features: int = 3, units: int = 4) -> bytes:
    """A TF1 LSTM run by ``dynamic_rnn`` with TF1 control flow (Enter/Merge/Switch/NextIteration/Exit)."""
    tf = _tf()
    tf.compat.v1.disable_control_flow_v2()
    try:
        graph = tf.Graph()
        with graph.as_default():
            tf.compat.v1.set_random_seed(0)
            x = tf.compat.v1.placeholder(tf.float32, [batch, steps, features], name="x")
            with tf.compat.v1.variable_scope("rnn_model"):
                outputs, _ = tf.compat.v1.nn.dynamic_rnn(_TinyLSTMCell(units), x, dtype=tf.float32)
            y = tf.identity(outputs, name="y")
            with tf.compat.v1.Session(graph=graph) as sess:
                sess.run(tf.compat.v1.global_variables_initializer())
                frozen = tf.compat.v1.graph_util.convert_variables_to_constants(sess, graph.as_graph_def(), [y.op.name])
    finally:
        tf.compat.v1.enable_control_flow_v2()
    return frozen.SerializeToString()


def tf1_while_and_cond() -> bytes:
    """A TF1 graph with a ``while_loop`` and a ``cond`` in TF1 control flow; no variables."""
    tf = _tf()
    tf.compat.v1.disable_control_flow_v2()
    try:
        graph = tf.Graph()
        with graph.as_default():
            n = tf.compat.v1.placeholder(tf.int32, [], name="n")
            x = tf.compat.v1.placeholder(tf.float32, [3], name="x")
            with tf.name_scope("loop"):
                _, acc = tf.while_loop(lambda i, a: i < n, lambda i, a: (i + 1, a * 2.0), [0, x])
            with tf.name_scope("branch"):
                y = tf.cond(n > 2, lambda: acc + 1.0, lambda: acc - 1.0)
            tf.identity(y, name="y")
    finally:
        tf.compat.v1.enable_control_flow_v2()
    return graph.as_graph_def().SerializeToString()


# ---------------------------------------------------------------------------------------------- TF2 graphs
def tf2_control_flow() -> bytes:
    """A ``tf.function`` with a while loop (a cond inside its body), a cond and a switch_case.

    The graph is taken as traced (no grappler), so the functional ops ``While`` / ``StatelessWhile``,
    ``If`` / ``StatelessIf`` and ``Case`` and their bodies stay as written. Inputs ``x`` (float32 [2, 3])
    and ``n`` (int32 scalar); output node ``Identity``.
    """
    tf = _tf()

    @tf.function(
        input_signature=[tf.TensorSpec([2, 3], tf.float32, name="x"), tf.TensorSpec([], tf.int32, name="n")]
    )
    def f(x, n):
        scale = tf.constant([0.5, 1.0, 2.0])

        def body(i, acc):
            with tf.name_scope("step"):
                acc = tf.cond(tf.reduce_sum(acc) > 100.0, lambda: acc * 0.5, lambda: acc * 2.0 + scale)
            return i + 1, acc

        with tf.name_scope("loop"):
            _, acc = tf.while_loop(lambda i, acc: i < n, body, [tf.constant(0), x])
        with tf.name_scope("branch"):
            picked = tf.cond(n > 2, lambda: acc + 1.0, lambda: acc - 1.0)
            switched = tf.switch_case(n % 3, [lambda: picked + 1.0, lambda: picked - 1.0, lambda: picked * 3.0])
        return tf.identity(switched, name="result")

    return f.get_concrete_function().graph.as_graph_def().SerializeToString()


def tf2_nested_calls() -> bytes:
    """A ``tf.function`` graph that calls nested ``tf.function``s (PartitionedCall / StatefulPartitionedCall).

    The graph is taken as traced (no grappler inlining), so the calls and the function library stay.
    Inputs ``x`` (float32 [4]); output node ``Identity``.
    """
    tf = _tf()

    @tf.function
    def inner(a, b):
        with tf.name_scope("inner_scope"):
            return tf.nn.relu(a * b), a - b

    @tf.function
    def middle(a):
        p, q = inner(a, a + 1.0)
        return tf.concat([p, q], axis=0, name="joined")

    @tf.function(input_signature=[tf.TensorSpec([4], tf.float32, name="x")])
    def outer(x):
        with tf.name_scope("block"):
            y = middle(x)
        return tf.reduce_sum(y) + tf.cast(tf.size(y), tf.float32)

    return outer.get_concrete_function().graph.as_graph_def().SerializeToString()


# ---------------------------------------------------------------------------------------------- SavedModels
def saved_model_keras_export(path: Path) -> Path:
    """A small Keras 3 model exported as a SavedModel with ``model.export`` (signature ``serving_default``)."""
    model = _small_convnet()
    model.export(str(path), verbose=False)
    return path


def saved_model_tf_module(path: Path) -> Path:
    """A ``tf.Module`` with variables, a while loop and two signatures (``serving_default``, ``double``)."""
    tf = _tf()

    class Model(tf.Module):
        def __init__(self):
            super().__init__(name="module_model")
            self.w = tf.Variable(tf.reshape(tf.range(12, dtype=tf.float32), [4, 3]) / 10.0, name="w")
            self.b = tf.Variable(tf.ones([3]), name="b")

        @tf.function(input_signature=[tf.TensorSpec([None, 4], tf.float32, name="features")])
        def serve(self, features):
            with tf.name_scope("dense"):
                y = tf.nn.relu(tf.matmul(features, self.w) + self.b)
            total = tf.while_loop(lambda i, t: i < 3, lambda i, t: (i + 1, t + y), [0, tf.zeros_like(y)])[1]
            return {"scores": total, "argmax": tf.argmax(total, axis=-1)}

        @tf.function(input_signature=[tf.TensorSpec([2], tf.float32, name="v")])
        def double(self, v):
            return {"doubled": v * 2.0}

    module = Model()
    tf.saved_model.save(module, str(path), signatures={"serving_default": module.serve, "double": module.double})
    return path


def saved_model_tf1_builder(path: Path) -> Path:
    """A TF1 SavedModel written from a session by ``tf.compat.v1.saved_model.Builder`` (tag ``serve``)."""
    tf = _tf()
    graph = tf.Graph()
    with graph.as_default():
        tf.compat.v1.set_random_seed(0)
        x = tf.compat.v1.placeholder(tf.float32, [None, 3], name="x")
        with tf.compat.v1.variable_scope("layer"):
            w = tf.compat.v1.get_variable("w", [3, 2], initializer=tf.compat.v1.constant_initializer(0.25))
            b = tf.compat.v1.get_variable("b", [2], initializer=tf.compat.v1.constant_initializer(1.0))
            y = tf.nn.sigmoid(tf.matmul(x, w) + b, name="probs")
        with tf.compat.v1.Session(graph=graph) as sess:
            sess.run(tf.compat.v1.global_variables_initializer())
            builder = tf.compat.v1.saved_model.Builder(str(path))
            signature = tf.compat.v1.saved_model.predict_signature_def(inputs={"features": x}, outputs={"probs": y})
            builder.add_meta_graph_and_variables(
                sess, [tf.compat.v1.saved_model.SERVING], signature_def_map={"predict": signature}
            )
            builder.save()
    return path


def saved_model_tf1_simple_save(path: Path) -> Path:
    """A TF1 SavedModel written by ``tf.compat.v1.saved_model.simple_save`` (signature ``serving_default``)."""
    tf = _tf()
    graph = tf.Graph()
    with graph.as_default():
        a = tf.compat.v1.placeholder(tf.float32, [2], name="a")
        b = tf.compat.v1.placeholder(tf.float32, [2], name="b")
        unused = tf.compat.v1.placeholder(tf.float32, [2], name="unused")
        scale = tf.compat.v1.get_variable("scale", [2], initializer=tf.compat.v1.constant_initializer(3.0))
        total = tf.add(a * scale, b, name="total")
        with tf.compat.v1.Session(graph=graph) as sess:
            sess.run(tf.compat.v1.global_variables_initializer())
            tf.compat.v1.saved_model.simple_save(
                sess, str(path), inputs={"a": a, "b": b, "unused": unused}, outputs={"total": total}
            )
    return path


def tf_graph_def_class() -> Any:
    """TensorFlow's own GraphDef class (for tests that compare our protos with TensorFlow's)."""
    return _tf().compat.v1.GraphDef
