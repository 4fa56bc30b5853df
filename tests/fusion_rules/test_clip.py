"""ClipFusion: tf.clip_by_value and Min(Max(...)) in both orders; bounds read and checked."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

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
    return [f for f in model.fusion_run.accepted if f.type == "Clip"]


def _refusals(model) -> list[str]:
    return [r.reason for r in model.fusion_run.refused if r.pass_name == "ClipFusion"]


@pytest.mark.parametrize("form", ["clip_by_value", "max_then_min"])
def test_tf_forms(tmp_path, form):
    import tensorflow as tf

    fn = {
        "clip_by_value": lambda x: tf.clip_by_value(x, -1.0, 2.0),
        "max_then_min": lambda x: tf.minimum(2.0, tf.maximum(x, -1.0)),
    }[form]
    report = check_fusions(_tf_file(tmp_path, form, fn), "Clip", feeds={"x": np.linspace(-3, 3, 12, dtype=np.float32).reshape(2, 6)})
    (fusion,) = _fused(report.model)
    assert (fusion.attrs["min"], fusion.attrs["max"]) == (-1.0, 2.0)
    assert report.max_error <= TOL


def test_onnx_min_max_without_scope_names(tmp_path):
    nodes = [helper.make_node("Max", ["lo", "x"], ["m"]), helper.make_node("Min", ["m", "hi"], ["y"])]
    inits = [numpy_helper.from_array(np.array(v, np.float32), n) for n, v in (("lo", 0.0), ("hi", 6.0))]
    value = lambda n: helper.make_tensor_value_info(n, TensorProto.FLOAT, ["n", 6])  # noqa: E731
    graph = helper.make_graph(nodes, "relu6", [value("x")], [value("y")], inits)
    report = check_fusions(onnx_models.save(onnx_models._model(graph), tmp_path / "clip.onnx"), "Clip")
    (fusion,) = _fused(report.model)
    assert (fusion.attrs["min"], fusion.attrs["max"]) == (0.0, 6.0) and report.max_error <= TOL


def test_crossed_bounds_refused(tmp_path):
    import tensorflow as tf

    model = convert(_tf_file(tmp_path, "crossed", lambda x: tf.maximum(tf.minimum(x, -1.0), 2.0)))
    assert _fused(model) == []
    (reason,) = _refusals(model)
    assert "the lower bound 2.0 exceeds the upper bound -1.0" in reason


def test_tensor_bounds_not_fused_and_reported_in_clip_scope(tmp_path):
    import tensorflow as tf

    model = convert(_tf_file(tmp_path, "dynamic", lambda x, lo: tf.clip_by_value(x, lo, 2.0), inputs=("x", "lo")))
    assert _fused(model) == []
    (reason,) = _refusals(model)
    assert "in a clip-named scope does not clip by constants" in reason and "lo:0 is not a constant" in reason


def test_mobilenet_relu6_is_not_a_clip(tf_mobilenet_pb):
    model = convert(tf_mobilenet_pb)
    assert _fused(model) == [] and _refusals(model) == []
