"""HardSwishFusion: Keras hard_swish, MobileNetV3, ONNX HardSigmoid / Clip forms; the SE gate is left alone."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

from scopefusion.convert import convert
from tests.fusion_rules.harness import check_fusions
from tests.models import onnx_models

TOL = 1e-5


def _tf_file(tmp_path: Path, name: str, fn) -> Path:
    import tensorflow as tf

    from tests.models.tf_models import freeze_concrete_function

    spec = [tf.TensorSpec((None, 6), tf.float32, name="x")]
    path = tmp_path / f"{name}.pb"
    path.write_bytes(freeze_concrete_function(tf.function(fn, input_signature=spec).get_concrete_function()))
    return path


def _fused(model) -> list:
    return [f for f in model.fusion_run.accepted if f.type == "HardSwish"]


def _refusals(model) -> list[str]:
    return [r.reason for r in model.fusion_run.refused if r.pass_name == "HardSwishFusion"]


def _mobilenet_v3() -> tuple[bytes, int]:
    import keras

    from tests.models.tf_models import _freeze_keras

    keras.utils.set_random_seed(0)
    model = keras.applications.MobileNetV3Small(
        weights=None, input_shape=(32, 32, 3), alpha=0.75, classes=10, include_preprocessing=False
    )
    hard_swish = keras.activations.get("hard_swish")
    count = sum(1 for layer in model.layers if isinstance(layer, keras.layers.Activation) and layer.activation is hard_swish)
    return _freeze_keras(model, [(None, 32, 32, 3)]), count


def test_mobilenet_v3_every_hard_swish_fused(model_store):
    counted: list[int] = []

    def build() -> bytes:
        data, count = _mobilenet_v3()
        counted.append(count)
        return data

    path = model_store.file("mobilenet_v3_small.pb", build)
    expected = counted[0] if counted else _mobilenet_v3()[1]
    assert expected == 19
    report = check_fusions(path, "HardSwish")
    assert len(report) == expected and report.max_error <= TOL
    # The squeeze-and-excitation gates x * hard_sigmoid(conv(x)) have the same ops and are not fused.
    assert _refusals(report.model) == []
    assert [f for f in report.model.fusion_run.accepted if f.type == "Clip"] == []


@pytest.mark.parametrize("form", ["keras_hard_swish", "times_sixth", "divided_after"])
def test_tf_forms(tmp_path, form):
    import keras
    import tensorflow as tf

    fn = {
        "keras_hard_swish": lambda x: keras.activations.hard_swish(x),
        "times_sixth": lambda x: x * (tf.nn.relu6(x + 3.0) * (1.0 / 6.0)),
        "divided_after": lambda x: x * tf.clip_by_value(x + 3.0, 0.0, 6.0) / 6.0,
    }[form]
    report = check_fusions(_tf_file(tmp_path, form, fn), "HardSwish", feeds={"x": np.linspace(-5, 5, 12, dtype=np.float32).reshape(2, 6)})
    (fusion,) = _fused(report.model)
    assert [i.producer for i in fusion.inputs] == ["x"] and report.max_error <= TOL
    assert [f for f in report.model.fusion_run.accepted if f.type == "Clip"] == []


@pytest.mark.parametrize("form", ["hard_sigmoid", "clip"])
def test_onnx_without_scope_names(tmp_path, form):
    if form == "hard_sigmoid":
        nodes = [helper.make_node("HardSigmoid", ["x"], ["h"], alpha=1.0 / 6.0, beta=0.5), helper.make_node("Mul", ["x", "h"], ["y"])]
        inits = []
    else:
        nodes = [
            helper.make_node("Add", ["x", "three"], ["a"]),
            helper.make_node("Clip", ["a", "zero", "six"], ["c"]),
            helper.make_node("Mul", ["x", "c"], ["m"]),
            helper.make_node("Div", ["m", "six"], ["y"]),
        ]
        inits = [numpy_helper.from_array(np.array(v, np.float32), n) for n, v in (("three", 3.0), ("zero", 0.0), ("six", 6.0))]
    value = lambda n: helper.make_tensor_value_info(n, TensorProto.FLOAT, ["n", 6])  # noqa: E731
    graph = helper.make_graph(nodes, form, [value("x")], [value("y")], inits)
    path = onnx_models.save(onnx_models._model(graph), tmp_path / f"{form}.onnx")
    report = check_fusions(path, "HardSwish", feeds={"x": np.linspace(-5, 5, 12, dtype=np.float32).reshape(2, 6)})
    assert len(report) == 1 and report.max_error <= TOL


def test_wrong_shift_refused_with_reason(tmp_path):
    import tensorflow as tf

    model = convert(_tf_file(tmp_path, "shift2", lambda x: x * tf.nn.relu6(x + 2.0) / 6.0))
    assert _fused(model) == []
    (reason,) = _refusals(model)
    assert "the shift 3 is 2.0" in reason


def test_hard_sigmoid_with_other_slope_refused(tmp_path):
    nodes = [helper.make_node("HardSigmoid", ["x"], ["h"], alpha=0.2, beta=0.5), helper.make_node("Mul", ["x", "h"], ["y"])]
    value = lambda n: helper.make_tensor_value_info(n, TensorProto.FLOAT, ["n", 6])  # noqa: E731
    graph = helper.make_graph(nodes, "hs", [value("x")], [value("y")])
    model = convert(onnx_models.save(onnx_models._model(graph), tmp_path / "hs.onnx"))
    assert _fused(model) == []
    (reason,) = _refusals(model)
    assert "HardSigmoid has alpha=0.2" in reason


def test_mobilenet_v2_relu6_is_not_hard_swish(tf_mobilenet_pb):
    model = convert(tf_mobilenet_pb)
    assert _fused(model) == [] and _refusals(model) == []
