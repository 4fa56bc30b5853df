"""Session-scoped models for the fusion-rule tests, built from code once per session (see ``tests/conftest.py``).

Each TF1 builder writes a plain GraphDef with its weights as constants, its input a placeholder with a
known rank and its outputs ``tf.identity`` nodes named ``out_*``. Scoped graphs hold positives next to
look-alikes (a scope named like the op that computes something else) and fusions whose intermediate is
read outside; where the rule's docstring promises fusion without scope names, the builder writes one.
The ONNX builders follow PyTorch's exporter (``/encoder/layers.0/norm1/ReduceMean``) or use plain names.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable

import numpy as np
import pytest

REPO = Path(__file__).resolve().parents[2]
TESTDATA = REPO / "testdata"


def _tf():
    import tensorflow as tf

    return tf


def _graph_bytes(build: Callable[[Any], None]) -> bytes:
    """Runs ``build(tf)`` in a fresh ``tf.Graph`` and returns the GraphDef bytes."""
    tf = _tf()
    graph = tf.Graph()
    with graph.as_default():
        build(tf)
    return graph.as_graph_def().SerializeToString()


def _const(tf, rng, shape, name, low=None):
    value = rng.standard_normal(shape).astype(np.float32)
    if low is not None:
        value = np.abs(value) + low
    return tf.constant(value, name=name)


# ------------------------------------------------------------------------------------------ LayerNorm
def layer_norm_tf1_cases() -> bytes:
    """Layer norms in a TF1 graph, input ``x`` [?, 4, 8] → outputs ``out_*``:

    * ``good/LayerNorm``: moments + batch_normalization over [-1] (BERT's form), fused;
    * ``pos/LayerNorm``: the same over the positive axis [2] of the rank-3 input, fused (rank from ``x``);
    * ``bad_sub/LayerNorm``: ``beta + mean * inv`` where the batch norm subtracts (look-alike), refused;
    * ``bad_eps/LayerNorm``: ``(rsqrt(var) + eps) * gamma`` (epsilon in the wrong place), refused;
    * ``escape/LayerNorm``: a layer norm whose mean is also an output, refused by validation.
    """

    def build(tf) -> None:
        rng = np.random.default_rng(1)
        x = tf.compat.v1.placeholder(tf.float32, [None, 4, 8], name="x")

        def params(scope):
            return _const(tf, rng, [8], f"{scope}/gamma"), _const(tf, rng, [8], f"{scope}/beta")

        with tf.name_scope("good/LayerNorm"):
            gamma, beta = params("good")
            mean, var = tf.nn.moments(x, [-1], keepdims=True)
            tf.identity(tf.nn.batch_normalization(x, mean, var, beta, gamma, 1e-12), name="out_good")
        with tf.name_scope("pos/LayerNorm"):
            gamma, beta = params("pos")
            mean, var = tf.nn.moments(x, [2], keepdims=True)
            tf.identity(tf.nn.batch_normalization(x, mean, var, beta, gamma, 1e-5), name="out_pos")
        with tf.name_scope("bad_sub/LayerNorm"):
            gamma, beta = params("bad_sub")
            mean, var = tf.nn.moments(x, [-1], keepdims=True)
            with tf.name_scope("batchnorm"):
                inv = tf.math.rsqrt(var + 1e-12) * gamma
                tf.identity(x * inv + (beta + mean * inv), name="out_bad_sub")
        with tf.name_scope("bad_eps/LayerNorm"):
            gamma, beta = params("bad_eps")
            mean, var = tf.nn.moments(x, [-1], keepdims=True)
            with tf.name_scope("batchnorm"):
                inv = (tf.math.rsqrt(var) + 1e-5) * gamma
                tf.identity(x * inv + (beta - mean * inv), name="out_bad_eps")
        with tf.name_scope("escape/LayerNorm"):
            gamma, beta = params("escape")
            mean, var = tf.nn.moments(x, [-1], keepdims=True)
            tf.identity(tf.nn.batch_normalization(x, mean, var, beta, gamma, 1e-12), name="out_escape")
        tf.identity(mean * 2.0, name="out_escape_mean")

    return _graph_bytes(build)


def _onnx_model(nodes, inputs, outputs, initializers, opset: int):
    import onnx
    from onnx import helper

    graph = helper.make_graph(nodes, "g", inputs, outputs, initializer=initializers)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)], producer_name="scopefusion-tests")
    model.ir_version = 8
    onnx.checker.check_model(model)
    return model.SerializeToString()


def layer_norm_onnx(opset: int = 14) -> bytes:
    """Two PyTorch-style decomposed layer norms built with ``onnx.helper``, names without any ``/``.

    Input ``x`` [2, 3, 8] → ``ln0`` (variance of ``Pow(d, 2)``, eps 1e-5) → Relu → ``ln1`` (variance of
    ``Mul(d, d)``, eps 1e-6) → ``y``. At opset 18 ReduceMean takes its axes as an input.
    """
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(2)
    inits = []
    nodes = []

    def const(name, value):
        inits.append(numpy_helper.from_array(np.asarray(value), name))
        return name

    def reduce_mean(name, src):
        if opset >= 18:
            return helper.make_node("ReduceMean", [src, const(f"{name}_axes", np.array([-1], np.int64))], [name], name=name)
        return helper.make_node("ReduceMean", [src], [name], name=name, axes=[-1])

    def ln(p, src, eps, square):
        nodes.append(reduce_mean(f"{p}_mean", src))
        nodes.append(helper.make_node("Sub", [src, f"{p}_mean"], [f"{p}_d"], name=f"{p}_d"))
        if square == "pow":
            nodes.append(helper.make_node("Pow", [f"{p}_d", const(f"{p}_two", np.float32(2.0))], [f"{p}_sq"], name=f"{p}_sq"))
        else:
            nodes.append(helper.make_node("Mul", [f"{p}_d", f"{p}_d"], [f"{p}_sq"], name=f"{p}_sq"))
        nodes.append(reduce_mean(f"{p}_var", f"{p}_sq"))
        nodes.append(helper.make_node("Add", [f"{p}_var", const(f"{p}_eps", np.float32(eps))], [f"{p}_ve"], name=f"{p}_ve"))
        nodes.append(helper.make_node("Sqrt", [f"{p}_ve"], [f"{p}_std"], name=f"{p}_std"))
        nodes.append(helper.make_node("Div", [f"{p}_d", f"{p}_std"], [f"{p}_n"], name=f"{p}_n"))
        gamma = const(f"{p}_gamma", rng.standard_normal(8).astype(np.float32))
        beta = const(f"{p}_beta", rng.standard_normal(8).astype(np.float32))
        nodes.append(helper.make_node("Mul", [f"{p}_n", gamma], [f"{p}_g"], name=f"{p}_g"))
        nodes.append(helper.make_node("Add", [f"{p}_g", beta], [f"{p}_out"], name=f"{p}_out"))
        return f"{p}_out"

    h = ln("ln0", "x", 1e-5, "pow")
    nodes.append(helper.make_node("Relu", [h], ["h"], name="relu"))
    ln("ln1", "h", 1e-6, "mul")
    nodes.append(helper.make_node("Identity", ["ln1_out"], ["y"], name="y"))
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3, 8])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3, 8])
    return _onnx_model(nodes, [x], [y], inits, opset)


# ------------------------------------------------------------------------------------------ InstanceNorm
def instance_norm_tf1_cases() -> bytes:
    """Instance norms after convolutions in a TF1 graph, input ``image`` [?, 8, 8, 3] → outputs ``out_*``:

    * ``block1/instance_norm``: moments over [1, 2] + batch_normalization, fused;
    * ``block2/InstanceNorm``: moments + ``(h - mean) / sqrt(var + eps) * gamma + beta``, fused;
    * ``in3_*`` (no scopes): reduce_mean / squared_difference written at the root, fused;
    * ``block4/instance_norm``: ``(h - mean) * rsqrt(var) * gamma + beta`` (no epsilon), refused;
    * ``block5/instance_norm``: an instance norm whose variance is also an output, refused by validation.
    """

    def build(tf) -> None:
        rng = np.random.default_rng(3)
        image = tf.compat.v1.placeholder(tf.float32, [None, 8, 8, 3], name="image")
        h = tf.nn.conv2d(image, _const(tf, rng, [3, 3, 3, 4], "w0"), 1, "SAME", name="conv0")

        def conv(t, name):
            return tf.nn.conv2d(tf.nn.relu(t), _const(tf, rng, [3, 3, 4, 4], f"{name}_w"), 1, "SAME", name=name)

        with tf.name_scope("block1/instance_norm"):
            mean, var = tf.nn.moments(h, [1, 2], keepdims=True)
            h = tf.nn.batch_normalization(h, mean, var, _const(tf, rng, [4], "b1"), _const(tf, rng, [4], "g1"), 1e-5)
        h = conv(h, "conv1")
        with tf.name_scope("block2/InstanceNorm"):
            mean, var = tf.nn.moments(h, [1, 2], keepdims=True)
            h = (h - mean) / tf.sqrt(var + 1e-3) * _const(tf, rng, [4], "g2") + _const(tf, rng, [4], "b2")
        h = conv(h, "conv2")
        mean = tf.reduce_mean(h, [1, 2], keepdims=True, name="in3_mean")
        var = tf.reduce_mean(tf.math.squared_difference(h, mean, name="in3_sqdiff"), [1, 2], keepdims=True, name="in3_var")
        inv = tf.multiply(tf.math.rsqrt(tf.add(var, 1e-6, name="in3_add"), name="in3_rsqrt"), _const(tf, rng, [4], "g3"), name="in3_inv")
        h = tf.add(tf.multiply(h, inv, name="in3_mul"), tf.subtract(_const(tf, rng, [4], "b3"), tf.multiply(mean, inv, name="in3_mul2"), name="in3_sub"), name="in3_out")
        h = conv(h, "conv3")
        tf.identity(h, name="out_main")
        with tf.name_scope("block4/instance_norm"):
            mean, var = tf.nn.moments(h, [1, 2], keepdims=True)
            tf.identity((h - mean) * tf.math.rsqrt(var) * _const(tf, rng, [4], "g4") + _const(tf, rng, [4], "b4"), name="out_no_eps")
        with tf.name_scope("block5/instance_norm"):
            mean, var = tf.nn.moments(h, [1, 2], keepdims=True)
            tf.identity(tf.nn.batch_normalization(h, mean, var, _const(tf, rng, [4], "b5"), _const(tf, rng, [4], "g5"), 1e-5), name="out_escape")
        tf.identity(var, name="out_escape_var")

    return _graph_bytes(build)


# ------------------------------------------------------------------------------------------ BatchNorm
def batch_norm_tf1_cases() -> bytes:
    """Batch norms with constant statistics, inputs ``image`` [?, 6, 6, 4] (NHWC) and ``planes`` [?, 4, 5, 5] (NCHW):

    * ``bn1/batchnorm``: ``tf.nn.batch_normalization`` with [4] statistics, fused (NHWC);
    * ``bn2_*`` (no scopes): ``(x - mean) * rsqrt(var + eps) * scale + offset`` on ``planes`` with [4, 1, 1]
      statistics, fused (NCHW);
    * ``bn3/batchnorm``: ``x * inv + (offset + mean * inv)`` (look-alike), refused;
    * ``bn4/batchnorm``: batch_normalization whose variance is computed from the data, refused;
    * ``bn5/batchnorm``: a batch norm whose ``inv`` is also an output, refused by validation.
    """

    def build(tf) -> None:
        rng = np.random.default_rng(4)
        image = tf.compat.v1.placeholder(tf.float32, [None, 6, 6, 4], name="image")
        planes = tf.compat.v1.placeholder(tf.float32, [None, 4, 5, 5], name="planes")

        def stats(p, shape):
            return (_const(tf, rng, shape, f"{p}_mean"), _const(tf, rng, shape, f"{p}_var", low=0.1),
                    _const(tf, rng, shape, f"{p}_offset"), _const(tf, rng, shape, f"{p}_scale"))

        with tf.name_scope("bn1"):
            mean, var, offset, scale = stats("bn1", [4])
            tf.identity(tf.nn.batch_normalization(image, mean, var, offset, scale, 1e-3), name="out_bn1")
        mean, var, offset, scale = stats("bn2", [4, 1, 1])
        normed = tf.multiply(tf.subtract(planes, mean, name="bn2_sub"), tf.math.rsqrt(tf.add(var, 1e-5, name="bn2_add"), name="bn2_rsqrt"), name="bn2_norm")
        tf.identity(tf.add(tf.multiply(normed, scale, name="bn2_scale"), offset, name="bn2_out"), name="out_bn2")
        with tf.name_scope("bn3/batchnorm"):
            mean, var, offset, scale = stats("bn3", [4])
            inv = tf.math.rsqrt(var + 1e-3) * scale
            tf.identity(image * inv + (offset + mean * inv), name="out_bn3")
        with tf.name_scope("bn4"):
            mean, _, offset, scale = stats("bn4", [4])
            var = tf.reduce_max(tf.abs(image), [0, 1, 2], name="computed_var")
            tf.identity(tf.nn.batch_normalization(image, mean, var, offset, scale, 1e-3), name="out_bn4")
        with tf.name_scope("bn5"):
            mean, var, offset, scale = stats("bn5", [4])
            tf.identity(tf.nn.batch_normalization(image, mean, var, offset, scale, 1e-3), name="out_bn5")
        tf.identity(tf.compat.v1.get_default_graph().get_tensor_by_name("bn5/batchnorm/mul:0") * 2.0, name="out_bn5_inv")

    return _graph_bytes(build)


# ------------------------------------------------------------------------------------------ L2Normalize
def l2_normalize_tf1_cases() -> bytes:
    """L2 normalizations, input ``features`` [?, 8] → outputs ``out_*``:

    * ``l2_normalize``: ``tf.math.l2_normalize(x, -1)`` (its default scope), fused;
    * ``embed_norm``: ``tf.math.l2_normalize`` over axes [1, 2] of a [?, 2, 3] tensor, epsilon 1e-6, named
      so that no scope pattern sees it, fused;
    * ``bad/l2_normalize``: ``x * rsqrt(sum + eps)`` (Add where Maximum belongs), refused;
    * ``escape/l2_normalize``: an L2 normalization whose squared sum is also an output, refused by validation.
    """

    def build(tf) -> None:
        rng = np.random.default_rng(5)
        x = tf.compat.v1.placeholder(tf.float32, [None, 8], name="features")
        tf.identity(tf.math.l2_normalize(x, -1), name="out_plain")
        h = tf.reshape(tf.matmul(x, _const(tf, rng, [8, 6], "w")), [-1, 2, 3])
        tf.identity(tf.math.l2_normalize(h, [1, 2], epsilon=1e-6, name="embed_norm"), name="out_embed")
        with tf.name_scope("bad/l2_normalize"):
            square_sum = tf.reduce_sum(tf.square(x), [-1], keepdims=True)
            tf.identity(x * tf.math.rsqrt(square_sum + 1e-12), name="out_bad")
        with tf.name_scope("escape/l2_normalize"):
            square_sum = tf.reduce_sum(tf.square(x), [-1], keepdims=True)
            tf.identity(x * tf.math.rsqrt(tf.maximum(square_sum, 1e-12)), name="out_escape")
        tf.identity(square_sum, name="out_escape_sum")

    return _graph_bytes(build)


def l2_normalize_onnx() -> bytes:
    """Two L2 normalizations of input ``x`` [2, 3, 8] (opset 14), added into ``y``:

    * PyTorch's ``F.normalize(x, dim=-1)`` as its exporter writes it (``/head/ReduceL2``, Clip, Shape, Expand,
      Div; eps 1e-12);
    * ``x / max(sqrt(ReduceSumSquare(x, [1, 2])), 1e-4)`` written by hand with plain names.
    """
    from onnx import TensorProto, helper, numpy_helper

    inits = [numpy_helper.from_array(np.float32(1e-12), "eps0"), numpy_helper.from_array(np.float32(1e-4), "eps1")]
    nodes = [
        helper.make_node("ReduceL2", ["x"], ["n0"], name="/head/ReduceL2", axes=[-1], keepdims=1),
        helper.make_node("Clip", ["n0", "eps0"], ["c0"], name="/head/Clip"),
        helper.make_node("Shape", ["x"], ["s0"], name="/head/Shape"),
        helper.make_node("Expand", ["c0", "s0"], ["e0"], name="/head/Expand"),
        helper.make_node("Div", ["x", "e0"], ["y0"], name="/head/Div"),
        helper.make_node("ReduceSumSquare", ["x"], ["ss1"], name="ss1", axes=[1, 2], keepdims=1),
        helper.make_node("Sqrt", ["ss1"], ["n1"], name="n1"),
        helper.make_node("Max", ["n1", "eps1"], ["c1"], name="c1"),
        helper.make_node("Div", ["x", "c1"], ["y1"], name="y1"),
        helper.make_node("Add", ["y0", "y1"], ["y"], name="y"),
    ]
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3, 8])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3, 8])
    return _onnx_model(nodes, [x], [y], inits, 14)


# ------------------------------------------------------------------------------------------ fixtures
@pytest.fixture(scope="session")
def ln_tf1_pb(model_store) -> Path:
    return model_store.file("fr_layer_norm_cases.pb", layer_norm_tf1_cases)


@pytest.fixture(scope="session")
def ln_onnx14(model_store) -> Path:
    return model_store.file("fr_layer_norm_14.onnx", lambda: layer_norm_onnx(14))


@pytest.fixture(scope="session")
def ln_onnx18(model_store) -> Path:
    return model_store.file("fr_layer_norm_18.onnx", lambda: layer_norm_onnx(18))


@pytest.fixture(scope="session")
def keras_encoder4_pb(model_store) -> Path:
    """The Keras transformer encoder of the model zoo with 4 layers (2 LayerNormalization each)."""
    from tests.models import more_models

    return model_store.file("fr_keras_encoder4.pb", lambda: more_models.keras_transformer_encoder(num_layers=4))


@pytest.fixture(scope="session")
def torch_encoder14() -> Path:
    """PyTorch ``nn.TransformerEncoder`` (2 layers) + final LayerNorm, exported at opset 14 (see testdata/make_torch_onnx.py)."""
    return TESTDATA / "torch_encoder_opset14.onnx"


@pytest.fixture(scope="session")
def torch_encoder17() -> Path:
    """The same encoder exported at opset 17 (LayerNormalization ops)."""
    return TESTDATA / "torch_encoder_opset17.onnx"


@pytest.fixture(scope="session")
def in_tf1_pb(model_store) -> Path:
    return model_store.file("fr_instance_norm_cases.pb", instance_norm_tf1_cases)


@pytest.fixture(scope="session")
def bn_tf1_pb(model_store) -> Path:
    return model_store.file("fr_batch_norm_cases.pb", batch_norm_tf1_cases)


@pytest.fixture(scope="session")
def l2_tf1_pb(model_store) -> Path:
    return model_store.file("fr_l2_normalize_cases.pb", l2_normalize_tf1_cases)


@pytest.fixture(scope="session")
def l2_onnx(model_store) -> Path:
    return model_store.file("fr_l2_normalize.onnx", l2_normalize_onnx)


@pytest.fixture(scope="session")
def run_passes():
    """``run_passes(path, enable=(), disable=())`` → ``(manager, report)``: the builtin passes run on the
    model at ``path`` by a PassManager, so tests can ask ``manager.explain(scope)``."""
    from scopefusion.convert import fusion_setup
    from scopefusion.parser import load
    from scopefusion.scope import PassManager, ScopeGraph

    def run(path, enable=(), disable=()):
        registry, _ = fusion_setup(enable=enable, disable=disable, entry_points=False)
        manager = PassManager(registry)
        return manager, manager.run(ScopeGraph.build(load(path)))

    return run
