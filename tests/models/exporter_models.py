"""Models written the way users' model code and exporters write them: frozen GraphDef bytes.

* :func:`bert_dynamic_batch_tf1`: a BERT encoder in the style of google-research's TF1 ``modeling.py``: the
  batch is read at run time (``tf.shape(x)[0]``) and packed with constants into every reshape target
  (``Pack``), the ``input_mask`` becomes a ``[B, 1, S, S]`` additive mask inside each layer.
* :func:`keras_masked_encoder`: Keras 3 ``MultiHeadAttention`` called with ``attention_mask=`` (a padding mask
  from a second input ``padding_mask`` [B, S]) or with ``use_causal_mask=True``.

* :func:`keras_activation_cnn`: Keras convolutions and dense layers with BatchNormalization, swish and
  hard_swish, the forms tf2onnx rewrites.

Weights are seeded, sizes small. TensorFlow and Keras are imported lazily.
"""

from __future__ import annotations

import os
from typing import Any

import numpy as np

__all__ = ["bert_dynamic_batch_tf1", "keras_activation_cnn", "keras_masked_encoder"]

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")


def _tf():
    import tensorflow as tf

    return tf


# ---------------------------------------------------------------------------------------------- TF1 BERT
def bert_dynamic_batch_tf1(
    num_layers: int = 4, hidden: int = 32, heads: int = 4, intermediate: int = 64, vocab: int = 100, seq: int = 8
) -> bytes:
    """A BERT encoder with a dynamic batch, as google-research's TF1 code builds it; frozen GraphDef bytes.

    Inputs ``input_ids``, ``input_mask``, ``token_type_ids`` (int32 [?, seq]); outputs ``bert/pooler/dense/Tanh``
    and ``bert/encoder/sequence_output``. Per layer (``bert/encoder/layer_N``): one attention
    (``attention/self``), two layer norms (moments + batch-norm arithmetic) and one tanh GELU.
    """
    tf = _tf()
    v1 = tf.compat.v1
    rng = np.random.default_rng(7)
    graph = tf.Graph()
    size = hidden // heads

    def weight(shape, name, scale=0.1):
        return v1.get_variable(name, initializer=(rng.standard_normal(shape) * scale).astype(np.float32))

    def dense(x, units, name, activation=None):
        with v1.variable_scope(name):
            y = tf.nn.bias_add(tf.matmul(x, weight([int(x.shape[-1]), units], "kernel")), weight([units], "bias"))
            return activation(y) if activation is not None else y

    def layer_norm(x):
        with v1.variable_scope("LayerNorm"):
            dim = int(x.shape[-1])
            beta = weight([dim], "beta")
            gamma = v1.get_variable("gamma", initializer=(1.0 + rng.standard_normal(dim) * 0.1).astype(np.float32))
            mean, variance = tf.nn.moments(x, [-1], keepdims=True)
            return tf.nn.batch_normalization(x, mean, variance, beta, gamma, 1e-12)

    def gelu(x):
        return x * (0.5 * (1.0 + tf.tanh(np.sqrt(2.0 / np.pi) * (x + 0.044715 * tf.pow(x, 3)))))

    def shape_list(x):
        """Static dims as ints, dynamic ones as scalars sliced from ``tf.shape``."""
        dynamic = tf.shape(x)
        return [d if d is not None else dynamic[i] for i, d in enumerate(x.shape.as_list())]

    with graph.as_default():
        input_ids = v1.placeholder(tf.int32, [None, seq], name="input_ids")
        input_mask = v1.placeholder(tf.int32, [None, seq], name="input_mask")
        token_type_ids = v1.placeholder(tf.int32, [None, seq], name="token_type_ids")
        with v1.variable_scope("bert"):
            with v1.variable_scope("embeddings"):
                batch = shape_list(input_ids)[0]
                flat_ids = tf.reshape(input_ids, [-1])
                x = tf.gather(weight([vocab, hidden], "word_embeddings"), flat_ids)
                x = tf.reshape(x, [batch, seq, hidden])
                one_hot = tf.one_hot(tf.reshape(token_type_ids, [-1]), depth=2)
                x += tf.reshape(tf.matmul(one_hot, weight([2, hidden], "token_type_embeddings")), [batch, seq, hidden])
                x += tf.expand_dims(tf.slice(weight([16, hidden], "position_embeddings"), [0, 0], [seq, -1]), 0)
                x = layer_norm(x)
            with v1.variable_scope("encoder"):
                batch = shape_list(x)[0]
                # [B, 1, S] * ones [B, S, 1] -> [B, S, S]: which keys each query may attend to.
                to_mask = tf.cast(tf.reshape(input_mask, [batch, 1, seq]), tf.float32)
                attention_mask = tf.ones([batch, seq, 1], tf.float32) * to_mask
                x2d = tf.reshape(x, [-1, hidden])
                for i in range(num_layers):
                    with v1.variable_scope(f"layer_{i}"):
                        with v1.variable_scope("attention"):
                            with v1.variable_scope("self"):

                                def heads_of(t):
                                    return tf.transpose(tf.reshape(t, [batch, seq, heads, size]), [0, 2, 1, 3])

                                q = heads_of(dense(x2d, hidden, "query"))
                                k = heads_of(dense(x2d, hidden, "key"))
                                v = heads_of(dense(x2d, hidden, "value"))
                                scores = tf.multiply(tf.matmul(q, k, transpose_b=True), 1.0 / np.sqrt(float(size)))
                                adder = (1.0 - tf.cast(tf.expand_dims(attention_mask, axis=[1]), tf.float32)) * -10000.0
                                probs = tf.nn.softmax(scores + adder)
                                context = tf.transpose(tf.matmul(probs, v), [0, 2, 1, 3])
                                context = tf.reshape(context, [batch * seq, heads * size])
                            with v1.variable_scope("output"):
                                attn = layer_norm(dense(context, hidden, "dense") + x2d)
                        with v1.variable_scope("intermediate"):
                            inter = dense(attn, intermediate, "dense", gelu)
                        with v1.variable_scope("output"):
                            x2d = layer_norm(dense(inter, hidden, "dense") + attn)
                sequence_output = tf.reshape(x2d, [batch, seq, hidden], name="sequence_output")
            with v1.variable_scope("pooler"):
                first = tf.squeeze(sequence_output[:, 0:1, :], axis=1)
                pooled = dense(first, hidden, "dense", tf.tanh)
        with v1.Session(graph=graph) as sess:
            sess.run(v1.global_variables_initializer())
            frozen = v1.graph_util.convert_variables_to_constants(
                sess, graph.as_graph_def(), [pooled.op.name, sequence_output.op.name]
            )
    return frozen.SerializeToString()


# ---------------------------------------------------------------------------------------------- Keras masks
def keras_masked_encoder(
    mask: str = "padding", num_layers: int = 2, seq: int = 8, d_model: int = 32, heads: int = 4
) -> bytes:
    """A Keras 3 encoder whose ``MultiHeadAttention`` is masked; frozen GraphDef bytes.

    ``mask="padding"``: inputs ``tokens`` (int32 [?, seq]) and ``padding_mask`` (int32 [?, seq], 1 = a real
    token), passed as ``attention_mask=padding_mask[:, None, :]`` ([B, 1, S] broadcast over the queries).
    ``mask="causal"``: input ``tokens`` only, ``use_causal_mask=True``. Per block: one attention, two
    LayerNormalization, one exact GELU (``Erfc``) in ``Dense(activation="gelu")``.
    """
    tf = _tf()
    import keras
    from tensorflow.python.framework.convert_to_constants import convert_variables_to_constants_v2

    if mask not in ("padding", "causal"):
        raise ValueError(f"mask {mask!r}, expected 'padding' or 'causal'")

    class Block(keras.layers.Layer):
        def __init__(self, name: str) -> None:
            super().__init__(name=name)
            self.attention = keras.layers.MultiHeadAttention(heads, d_model // heads, name="attention")
            self.attention_norm = keras.layers.LayerNormalization(epsilon=1e-6, name="attention_norm")
            self.intermediate = keras.layers.Dense(2 * d_model, activation="gelu", name="intermediate")
            self.output_dense = keras.layers.Dense(d_model, name="output")
            self.output_norm = keras.layers.LayerNormalization(epsilon=1e-6, name="output_norm")

        def call(self, x: Any, attention_mask: Any = None) -> Any:
            if mask == "causal":
                attended = self.attention(x, x, use_causal_mask=True)
            else:
                attended = self.attention(x, x, attention_mask=attention_mask)
            x = self.attention_norm(x + attended)
            return self.output_norm(x + self.output_dense(self.intermediate(x)))

    keras.utils.set_random_seed(0)
    embed = keras.layers.Embedding(100, d_model, name="token_embedding")
    blocks = [Block(f"layer_{i}") for i in range(num_layers)]

    def encode(tokens: Any, padding: Any = None) -> Any:
        x = embed(tokens)
        attention_mask = None if padding is None else tf.cast(padding, tf.bool)[:, None, :]
        for block in blocks:
            x = block(x, attention_mask)
        return x

    # Trained models have non-zero biases and layer-norm parameters (Keras initializes them to 0 and 1, and
    # tf2onnx drops an Add of zeros): give every one a seeded value.
    encode(tf.zeros((1, seq), tf.int32), tf.ones((1, seq), tf.int32) if mask == "padding" else None)
    rng = np.random.default_rng(13)
    for block in blocks:
        for weight in block.weights:
            last = weight.path.rsplit("/", 1)[-1]
            if last in ("bias", "beta", "gamma"):
                base = 1.0 if last == "gamma" else 0.0
                weight.assign((base + 0.2 * rng.standard_normal(tuple(weight.shape))).astype(np.float32))
    specs = [tf.TensorSpec((None, seq), "int32", name="tokens")]
    if mask == "padding":
        specs.append(tf.TensorSpec((None, seq), "int32", name="padding_mask"))
    concrete = tf.function(encode, input_signature=specs).get_concrete_function()
    frozen = convert_variables_to_constants_v2(concrete, lower_control_flow=False)
    return frozen.graph.as_graph_def().SerializeToString()


# ---------------------------------------------------------------------------------------------- Keras CNN
def keras_activation_cnn(size: int = 8) -> bytes:
    """Input ``image`` (float32 [?, size, size, 3]) → Conv2D → BatchNormalization → swish → Conv2D (hard_swish)
    → global pooling → Dense → BatchNormalization → swish → Dense(4); frozen GraphDef bytes, output ``logits``.

    The BatchNormalization layers have non-trivial moving statistics (set from a seeded generator), so a
    fusion that dropped them would show.
    """
    tf = _tf()
    import keras
    from tensorflow.python.framework.convert_to_constants import convert_variables_to_constants_v2

    keras.utils.set_random_seed(0)
    inputs = keras.Input((size, size, 3), name="image")
    x = keras.layers.Conv2D(8, 3, padding="same", name="conv0")(inputs)
    x = keras.layers.BatchNormalization(name="bn0")(x)
    x = keras.layers.Activation("swish", name="swish0")(x)
    x = keras.layers.Conv2D(8, 3, padding="same", activation="hard_swish", name="conv1")(x)
    x = keras.layers.GlobalAveragePooling2D(name="pool")(x)
    x = keras.layers.Dense(16, name="dense0")(x)
    x = keras.layers.BatchNormalization(name="bn1")(x)
    x = keras.layers.Activation("swish", name="swish1")(x)
    outputs = keras.layers.Dense(4, name="logits")(x)
    model = keras.Model(inputs, outputs, name="activation_cnn")
    rng = np.random.default_rng(11)
    for layer in (model.get_layer("bn0"), model.get_layer("bn1")):
        gamma, beta, mean, var = layer.get_weights()
        layer.set_weights([1 + 0.2 * rng.standard_normal(gamma.shape), 0.2 * rng.standard_normal(beta.shape),
                           0.5 * rng.standard_normal(mean.shape), 0.5 + rng.random(var.shape)])
    spec = tf.TensorSpec((None, size, size, 3), "float32", name="image")
    concrete = tf.function(lambda x: model(x, training=False), input_signature=[spec]).get_concrete_function()
    frozen = convert_variables_to_constants_v2(concrete, lower_control_flow=False)
    return frozen.graph.as_graph_def().SerializeToString()
