"""Fixtures for the scope layer: hand-made SourceGraphs and real tf.compat.v1 graphs.

``mk`` builds small graphs from text: ``mk.node("a/b/c", "Mul", "x", "y:1", "^ctrl", T="float")`` and
``mk.graph(*nodes, outputs=["c"])``. The TensorFlow graphs (a BERT-like layer, a Keras model) are
built once per session, frozen, written as ``.pb`` files and read with ``scopefusion.parser.load``.
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest

from scopefusion.parser.source_graph import GraphOutput, SourceGraph, SourceNode


def _parse_input(text: str) -> tuple[str, int]:
    name, _, index = text.partition(":")
    return name, int(index) if index else 0


def make_node(name: str, op: str, *inputs: str, _value: Any = None, **attrs: Any) -> SourceNode:
    data = [_parse_input(t) for t in inputs if not t.startswith("^")]
    control = [t[1:] for t in inputs if t.startswith("^")]
    return SourceNode(
        name,
        op,
        inputs=data,
        control_inputs=control,
        attrs=dict(attrs),
        value=None if _value is None else np.asarray(_value),
    )


def make_graph(*nodes: SourceNode, outputs: tuple[str, ...] = (), sort: bool = True) -> SourceGraph:
    outs = [GraphOutput(o, *_parse_input(o)) for o in outputs]
    return SourceGraph(nodes, outputs=outs, framework="test", name="test", sort=sort)


def ops(*specs: tuple) -> list[SourceNode]:
    """``ops(("a/x", "Mul", "p", "q"), ...)`` -> nodes."""
    return [make_node(*spec) for spec in specs]


@pytest.fixture(scope="session")
def mk() -> SimpleNamespace:
    return SimpleNamespace(node=make_node, graph=make_graph, ops=ops)


# ---------------------------------------------------------------------- TensorFlow
def _bert_layer_graph_def() -> Any:
    import tensorflow as tf

    v1 = tf.compat.v1
    graph = tf.Graph()
    rng = np.random.default_rng(0)
    hidden = 16
    with graph.as_default():
        x = v1.placeholder(tf.float32, [2, 4, hidden], name="input_ids_embedding")

        def layer_norm(t: Any, scope: str) -> Any:
            with v1.variable_scope(scope):
                gamma = v1.get_variable("gamma", initializer=np.ones(hidden, np.float32))
                beta = v1.get_variable("beta", initializer=np.zeros(hidden, np.float32))
                mean, variance = tf.nn.moments(t, axes=[-1], keepdims=True)
                return tf.nn.batch_normalization(t, mean, variance, beta, gamma, 1e-12)

        def dense(t: Any, units: int, scope: str) -> Any:
            with v1.variable_scope(scope):
                kernel = v1.get_variable("kernel", initializer=rng.standard_normal((t.shape[-1], units)).astype(np.float32))
                bias = v1.get_variable("bias", initializer=np.zeros(units, np.float32))
                flat = tf.reshape(t, [-1, t.shape[-1]])
                return tf.reshape(tf.nn.bias_add(tf.matmul(flat, kernel), bias), [2, 4, units])

        with v1.variable_scope("bert/encoder/layer_0"):
            with v1.variable_scope("attention/self"):
                q = dense(x, hidden, "query")
                k = dense(x, hidden, "key")
                v = dense(x, hidden, "value")
                scores = tf.matmul(q, k, transpose_b=True) * (1.0 / np.sqrt(hidden))
                probs = tf.nn.softmax(scores)
                ctx = tf.matmul(probs, v)
            with v1.variable_scope("attention/output"):
                attn = dense(ctx, hidden, "dense")
                attn = layer_norm(attn + x, "LayerNorm")
            with v1.variable_scope("intermediate"):
                inter = dense(attn, 4 * hidden, "dense")
                inter = inter * 0.5 * (1.0 + tf.math.erf(inter / np.sqrt(2.0)))
            with v1.variable_scope("output"):
                out = dense(inter, hidden, "dense")
                out = layer_norm(out + attn, "LayerNorm")
        tf.identity(out, name="sequence_output")
        with v1.Session(graph=graph) as sess:
            sess.run(v1.global_variables_initializer())
            frozen = v1.graph_util.convert_variables_to_constants(sess, graph.as_graph_def(), ["sequence_output"])
    return frozen


def _keras_graph_def() -> Any:
    import tensorflow as tf
    from tensorflow.python.framework.convert_to_constants import convert_variables_to_constants_v2

    keras = tf.keras
    inputs = keras.Input(shape=(8,), name="features")
    h = keras.layers.Dense(16, activation="relu", name="hidden")(inputs)
    h = keras.layers.LayerNormalization(name="norm")(h)
    outputs = keras.layers.Dense(3, activation="softmax", name="head")(h)
    model = keras.Model(inputs, outputs, name="classifier")
    fn = tf.function(lambda t: model(t), autograph=False).get_concrete_function(tf.TensorSpec([None, 8], tf.float32))
    return convert_variables_to_constants_v2(fn).graph.as_graph_def()


def _load(tmp_path_factory: pytest.TempPathFactory, name: str, graph_def: Any) -> SourceGraph:
    from scopefusion.parser import load

    path = tmp_path_factory.mktemp("scope_models") / f"{name}.pb"
    path.write_bytes(graph_def.SerializeToString())
    return load(path)


@pytest.fixture(scope="session")
def bert_source(tmp_path_factory: pytest.TempPathFactory) -> SourceGraph:
    """A frozen BERT-like encoder layer (tf.compat.v1, layer norms from tf.nn.moments and
    tf.nn.batch_normalization), read back with the TF frontend."""
    return _load(tmp_path_factory, "bert_layer", _bert_layer_graph_def())


@pytest.fixture(scope="session")
def keras_source(tmp_path_factory: pytest.TempPathFactory) -> SourceGraph:
    """A frozen Keras model (Dense, LayerNormalization, Dense + softmax), read back with the TF frontend."""
    return _load(tmp_path_factory, "keras_classifier", _keras_graph_def())
