"""SwishFusion: Keras swish, tf.nn.silu with beta, ONNX x * Sigmoid(x); gates are left alone."""

from __future__ import annotations

from pathlib import Path

import pytest
from onnx import TensorProto, helper

from scopefusion.convert import convert
from tests.fusion_rules.harness import check_fusions
from tests.models import onnx_models

TOL = 1e-5


def _tf_file(tmp_path: Path, name: str, fn, inputs=("x",)) -> Path:
    import tensorflow as tf

    from tests.models.tf_models import freeze_concrete_function

    specs = [tf.TensorSpec((None, 6), tf.float32, name=n) for n in inputs]
    path = tmp_path / f"{name}.pb"
    path.write_bytes(freeze_concrete_function(tf.function(fn, input_signature=specs).get_concrete_function()))
    return path


def _fused(model) -> list:
    return [f for f in model.fusion_run.accepted if f.type == "Swish"]


def _refusals(model) -> list[str]:
    return [r.reason for r in model.fusion_run.refused if r.pass_name == "SwishFusion"]


@pytest.mark.parametrize(("form", "scale"), [("keras_swish", 1.0), ("silu_beta", 1.5), ("written", 1.0)])
def test_tf_forms(tmp_path, form, scale):
    import keras
    import tensorflow as tf

    fn = {
        "keras_swish": lambda x: keras.activations.swish(x),
        "silu_beta": lambda x: tf.nn.silu(x, beta=1.5),
        "written": lambda x: tf.sigmoid(x) * x,
    }[form]
    report = check_fusions(_tf_file(tmp_path, form, fn), "Swish")
    (fusion,) = _fused(report.model)
    assert fusion.attrs["scale"] == pytest.approx(scale) and [i.producer for i in fusion.inputs] == ["x"]
    assert report.max_error <= TOL


def test_onnx_without_scope_names(tmp_path):
    nodes = [helper.make_node("Sigmoid", ["x"], ["s"]), helper.make_node("Mul", ["s", "x"], ["y"])]
    value = lambda n: helper.make_tensor_value_info(n, TensorProto.FLOAT, ["n", 6])  # noqa: E731
    graph = helper.make_graph(nodes, "silu", [value("x")], [value("y")])
    report = check_fusions(onnx_models.save(onnx_models._model(graph), tmp_path / "silu.onnx"), "Swish")
    assert len(report) == 1 and report.max_error <= TOL


def test_gate_is_not_a_swish(tmp_path):
    import tensorflow as tf

    model = convert(_tf_file(tmp_path, "gate", lambda x, g: x * tf.sigmoid(g), inputs=("x", "g")))
    assert _fused(model) == [] and _refusals(model) == []


def test_gate_in_swish_named_scope_refused(tmp_path):
    import tensorflow as tf

    def fake(x, g):
        with tf.name_scope("swish"):
            return x * tf.sigmoid(g)

    model = convert(_tf_file(tmp_path, "fake", fake, inputs=("x", "g")))
    (reason,) = _refusals(model)
    assert reason.startswith("swish/Sigmoid (Sigmoid) in a Swish-named scope does not compute a Swish")
    assert _fused(model) == []


def test_sigmoid_used_outside_refused(tmp_path):
    import tensorflow as tf

    def leak(x):
        s = tf.sigmoid(x)
        return x * s, s + 1.0

    model = convert(_tf_file(tmp_path, "leak", leak))
    (reason,) = _refusals(model)
    assert "intermediate value Sigmoid:0 is consumed outside the fusion" in reason
    assert _fused(model) == []


def test_mobilenet_has_no_swish(tf_mobilenet_pb):
    model = convert(tf_mobilenet_pb)
    assert _fused(model) == [] and _refusals(model) == []
