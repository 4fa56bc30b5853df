"""GeluFusion: erf and tanh GELUs in Keras, TF1 BERT, PyTorch ONNX exports and hand-written graphs."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
from onnx import TensorProto, helper

from scopefusion.convert import convert
from tests.fusion_rules.harness import check_fusions
from tests.models import onnx_models

REPO = Path(__file__).resolve().parents[2]
TOL = 1e-5


def _keras_encoder(model_store, layers: int = 4) -> Path:
    from tests.models import more_models

    return model_store.file(f"keras_transformer_{layers}.pb", lambda: more_models.keras_transformer_encoder(num_layers=layers))


def _tf_file(tmp_path: Path, name: str, fn, shape=(None, 6)) -> Path:
    import tensorflow as tf

    from tests.models.tf_models import freeze_concrete_function

    concrete = tf.function(fn, input_signature=[tf.TensorSpec(shape, tf.float32, name="x")]).get_concrete_function()
    path = tmp_path / f"{name}.pb"
    path.write_bytes(freeze_concrete_function(concrete))
    return path


def _onnx_file(tmp_path: Path, name: str, nodes, inits=(), outputs=("y",)) -> Path:
    graph = helper.make_graph(
        nodes,
        name,
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", 6])],
        [helper.make_tensor_value_info(o, TensorProto.FLOAT, ["n", 6]) for o in outputs],
        [helper.make_tensor(k, TensorProto.FLOAT, [], [v]) for k, v in inits],
    )
    return onnx_models.save(onnx_models._model(graph), tmp_path / f"{name}.onnx")


def _refusals(model, pass_name: str = "GeluFusion") -> list[str]:
    return [r.reason for r in model.fusion_run.refused if r.pass_name == pass_name]


# ------------------------------------------------------------------------------------------ real models
def test_keras_encoder_every_gelu_fused(model_store):
    layers = 4  # one Dense(ff, activation="gelu") per layer
    report = check_fusions(_keras_encoder(model_store, layers), "Gelu", int_high=100)
    assert len(report) == layers
    assert all(f.attrs["approximate"] == "none" for f in report.model.fusion_run.accepted if f.type == "Gelu")
    assert sorted(report.errors) == [f"encoder_1/layer_{i}_1/intermediate_1/Gelu" for i in range(layers)]
    assert report.max_error <= TOL
    assert _refusals(report.model) == []


def test_tf1_bert_tanh_gelus_fused(tf_bert_pb):
    report = check_fusions(tf_bert_pb, "Gelu")
    assert len(report) == 2  # bert_encoder_tf1's default num_layers, one tanh GELU each
    assert {f.attrs["approximate"] for f in report.model.fusion_run.accepted if f.type == "Gelu"} == {"tanh"}
    assert report.max_error <= TOL


@pytest.mark.parametrize("opset", [14, 17])
def test_torch_encoder_erf_gelus_fused(opset):
    report = check_fusions(REPO / f"testdata/torch_encoder_opset{opset}.onnx", "Gelu", int_high=100)
    assert sorted(report.errors) == ["/encoder/layers.0/Mul_1", "/encoder/layers.1/Mul_1"]
    assert report.max_error <= TOL


def test_mobilenet_has_no_gelu(tf_mobilenet_pb):
    model = convert(tf_mobilenet_pb)
    assert [f for f in model.fusion_run.accepted if f.type == "Gelu"] == []
    assert _refusals(model) == []


# ------------------------------------------------------------------------------------------ written forms
def _tf_forms():
    import tensorflow as tf

    def bert_erf(x):  # google-research/bert
        return x * (0.5 * (1.0 + tf.math.erf(x / tf.sqrt(2.0))))

    def mul_inv_sqrt2(x):
        return 0.5 * x * (1.0 + tf.math.erf(x * 0.7071067811865476))

    def cube_tanh(x):
        return x * 0.5 * (1.0 + tf.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * (x * x * x))))

    return {
        "bert_erf": (bert_erf, "none"),
        "tf_nn_gelu_exact": (lambda x: tf.nn.gelu(x, approximate=False), "none"),
        "tf_nn_gelu_tanh": (lambda x: tf.nn.gelu(x, approximate=True), "tanh"),
        "mul_inv_sqrt2": (mul_inv_sqrt2, "none"),
        "cube_tanh": (cube_tanh, "tanh"),
    }


@pytest.mark.parametrize("form", ["bert_erf", "tf_nn_gelu_exact", "tf_nn_gelu_tanh", "mul_inv_sqrt2", "cube_tanh"])
def test_tf_forms(tmp_path, form):
    fn, approximate = _tf_forms()[form]
    report = check_fusions(_tf_file(tmp_path, form, fn), "Gelu")
    (fusion,) = [f for f in report.model.fusion_run.accepted if f.type == "Gelu"]
    assert fusion.attrs["approximate"] == approximate
    assert [i.producer for i in fusion.inputs] == ["x"]
    assert report.max_error <= TOL


def _torch_erf_nodes(x="x", divisor=1.4142135381698608, out="y"):
    return [
        helper.make_node("Div", [x, "sqrt2"], ["d"]),
        helper.make_node("Erf", ["d"], ["e"]),
        helper.make_node("Add", ["e", "one"], ["a"]),
        helper.make_node("Mul", [x, "a"], ["m"]),
        helper.make_node("Mul", ["m", "half"], [out]),
    ], [("sqrt2", divisor), ("one", 1.0), ("half", 0.5)]


def test_onnx_without_scope_names(tmp_path):
    nodes, inits = _torch_erf_nodes()
    report = check_fusions(_onnx_file(tmp_path, "erf", nodes, inits), "Gelu")
    assert len(report) == 1 and report.max_error <= TOL
    # PyTorch GELU(approximate="tanh"): 0.5 * (x * (1 + tanh(beta * (x + kappa * x * (x * x)))))
    tanh_nodes = [
        helper.make_node("Mul", ["x", "x"], ["xx"]),
        helper.make_node("Mul", ["x", "xx"], ["x3"]),
        helper.make_node("Mul", ["kappa", "x3"], ["kx3"]),
        helper.make_node("Add", ["x", "kx3"], ["inner"]),
        helper.make_node("Mul", ["beta", "inner"], ["scaled"]),
        helper.make_node("Tanh", ["scaled"], ["t"]),
        helper.make_node("Add", ["one", "t"], ["a"]),
        helper.make_node("Mul", ["x", "a"], ["m"]),
        helper.make_node("Mul", ["half", "m"], ["y"]),
    ]
    inits = [("kappa", 0.044715), ("beta", math.sqrt(2 / math.pi)), ("one", 1.0), ("half", 0.5)]
    report = check_fusions(_onnx_file(tmp_path, "tanh", tanh_nodes, inits), "Gelu")
    (fusion,) = [f for f in report.model.fusion_run.accepted if f.type == "Gelu"]
    assert fusion.attrs["approximate"] == "tanh" and report.max_error <= TOL


# ------------------------------------------------------------------------------------------ negatives
def test_wrong_constant_refused_with_reason(tmp_path):
    import tensorflow as tf

    def almost(x):
        with tf.name_scope("gelu"):
            return x * (0.5 * (1.0 + tf.math.erf(x / 1.5)))

    model = convert(_tf_file(tmp_path, "almost", almost))
    assert [f for f in model.fusion_run.accepted if f.type == "Gelu"] == []
    (reason,) = _refusals(model)
    assert "the divisor sqrt(2) is 1.5" in reason and "expected 1.414" in reason


def test_miswired_gelu_named_scope_refused(tmp_path):
    import tensorflow as tf

    def miswired(x):  # the erf term multiplies x / sqrt(2), not x
        with tf.name_scope("gelu"):
            t = x / 1.4142135
            return (t * 0.5) * (1.0 + tf.math.erf(t))

    model = convert(_tf_file(tmp_path, "miswired", miswired))
    assert [f for f in model.fusion_run.accepted if f.type == "Gelu"] == []
    (reason,) = _refusals(model)
    assert reason.startswith("gelu/Erf (Erf) in a GELU-named scope does not compute a GELU")


def test_intermediate_used_outside_refused(tmp_path):
    nodes, inits = _torch_erf_nodes()
    model = convert(_onnx_file(tmp_path, "leak", nodes, inits, outputs=("y", "e")))
    assert [f for f in model.fusion_run.accepted if f.type == "Gelu"] == []
    (reason,) = _refusals(model)
    assert "graph output 'e'" in reason


def test_erf_of_something_else_is_left_alone(tmp_path):
    import tensorflow as tf

    model = convert(_tf_file(tmp_path, "erf_only", lambda x: tf.math.erf(x) * 2.0 + x))
    assert [f for f in model.fusion_run.accepted if f.type == "Gelu"] == [] and _refusals(model) == []
