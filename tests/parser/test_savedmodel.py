"""SavedModels: one signature, variables frozen, inputs and outputs named by the signature's keys.

Each behaviour is checked with both loaders: ``native`` (the default, no TensorFlow) and ``tensorflow``.
"""

from __future__ import annotations

import numpy as np
import pytest

from scopefusion import dtypes
from scopefusion.errors import ModelLoadError
from scopefusion.parser import GraphInput, GraphOutput, load

from . import tf_graph_util as tg

LOADERS = pytest.mark.parametrize("loader", ["native", "tensorflow"])


def _run_signature(directory, signature, feeds):
    import tensorflow as tf

    function = tf.saved_model.load(str(directory)).signatures[signature]
    return {k: v.numpy() for k, v in function(**{k: tf.constant(v) for k, v in feeds.items()}).items()}


def _run_graph(graph, feeds):
    by_input = {i.name: i.node for i in graph.inputs}
    values = tg.run_tf(tg.to_tf_graph_def(graph), {by_input[k]: v for k, v in feeds.items()},
                       [f"{o.node}:{o.index}" for o in graph.outputs])
    return dict(zip((o.name for o in graph.outputs), values))


@LOADERS
def test_keras_export_is_frozen_and_named_by_the_signature(saved_model_keras, loader):
    graph = load(saved_model_keras, savedmodel_loader=loader)
    assert graph.inputs == [GraphInput("image", "image", dtypes.FLOAT32, (-1, 8, 8, 3), 0)]
    assert [o.name for o in graph.outputs] == ["output_0"]
    assert graph.metadata["signature"] == "serving_default" and graph.metadata["saved_model_kind"] == "tf2"
    assert graph.metadata["savedmodel_loader"] == loader
    ops = graph.op_types()
    assert "ReadVariableOp" not in ops and "VarHandleOp" not in ops and ops["Const"] >= 6
    assert "Conv2D" in ops and "Softmax" in ops
    feeds = {"image": np.linspace(-1, 1, 2 * 8 * 8 * 3, dtype=np.float32).reshape(2, 8, 8, 3)}
    expected = _run_signature(saved_model_keras, "serving_default", feeds)
    np.testing.assert_allclose(_run_graph(graph, feeds)["output_0"], expected["output_0"], rtol=1e-5, atol=1e-6)


@LOADERS
def test_tf_module_signatures_keep_the_while_loop_and_freeze_the_variables(saved_model_module, loader):
    graph = load(saved_model_module, savedmodel_loader=loader)
    assert [i.name for i in graph.inputs] == ["features"]
    assert [o.name for o in graph.outputs] == ["argmax", "scores"]
    loop = next(n for n in graph if n.op_type in ("While", "StatelessWhile"))
    assert sorted(loop.subgraphs) == ["body", "cond"]
    constants = [n.value for n in graph if n.value is not None]
    assert any(v.shape == (4, 3) and np.allclose(v, np.arange(12).reshape(4, 3) / 10.0) for v in constants)
    double = load(saved_model_module, signature="double", savedmodel_loader=loader)
    assert double.inputs == [GraphInput("v", "v", dtypes.FLOAT32, (2,), 0)]
    assert double.outputs == [GraphOutput("doubled", "Identity", 0)]
    if loader == "tensorflow":
        lowered = load(saved_model_module, lower_control_flow=True, savedmodel_loader=loader)
        assert "StatelessWhile" not in lowered.op_types() and "NextIteration" in lowered.op_types()
    else:
        with pytest.raises(ModelLoadError, match="lowering control flow needs TensorFlow; pass --savedmodel-loader tensorflow"):
            load(saved_model_module, lower_control_flow=True)


@LOADERS
def test_tf1_builder_saved_model_is_frozen_from_a_session(saved_model_tf1, loader):
    graph = load(saved_model_tf1, signature="predict", tags=["serve"], savedmodel_loader=loader)
    assert graph.metadata["saved_model_kind"] == "tf1"
    assert graph.inputs == [GraphInput("features", "x", dtypes.FLOAT32, (-1, 3), 0)]
    assert graph.outputs == [GraphOutput("probs", "layer/probs", 0)]
    w = next(n for n in graph if n.op_type == "Const" and n.value is not None and n.value.shape == (3, 2))
    np.testing.assert_array_equal(w.value, np.full((3, 2), 0.25, np.float32))
    feeds = {"features": np.array([[1.0, 2.0, 3.0]], np.float32)}
    expected = 1 / (1 + np.exp(-(feeds["features"] @ np.full((3, 2), 0.25) + 1.0)))
    np.testing.assert_allclose(_run_graph(graph, feeds)["probs"], expected, rtol=1e-6)


@LOADERS
def test_simple_save_keeps_every_signature_input_even_an_unused_one(saved_model_simple_save, loader):
    graph = load(saved_model_simple_save, savedmodel_loader=loader)
    assert [(i.name, i.node) for i in graph.inputs] == [("a", "a"), ("b", "b"), ("unused", "unused")]
    assert graph.outputs == [GraphOutput("total", "total", 0)]
    assert graph.node("unused").op_type == "Placeholder"
    feeds = {"a": np.array([1.0, 2.0], np.float32), "b": np.array([0.5, 0.5], np.float32),
             "unused": np.zeros(2, np.float32)}
    np.testing.assert_allclose(_run_graph(graph, feeds)["total"], [3.5, 6.5])


def test_the_saved_model_pb_path_reads_its_directory(saved_model_tf1):
    graph = load(saved_model_tf1 / "saved_model.pb", signature="predict")
    assert graph.path == str(saved_model_tf1)


def test_a_missing_signature_lists_the_signatures_there_are(saved_model_module, saved_model_tf1):
    with pytest.raises(ModelLoadError, match=r"no signature 'serve'; its signatures are 'double', 'serving_default'") as info:
        load(saved_model_module, signature="serve")
    assert str(saved_model_module) in str(info.value)
    with pytest.raises(ModelLoadError, match="its signatures are 'predict'"):
        load(saved_model_tf1)


def test_missing_tags_list_the_tag_sets_there_are(saved_model_tf1):
    with pytest.raises(ModelLoadError, match=r"no meta graph tagged gpu,serve; its tag sets are serve"):
        load(saved_model_tf1, signature="predict", tags=["serve", "gpu"])


def test_a_directory_that_is_not_a_saved_model(tmp_path):
    with pytest.raises(ModelLoadError, match="no saved_model.pb or saved_model.pbtxt"):
        load(tmp_path)
    (tmp_path / "saved_model.pb").write_bytes(b"")
    with pytest.raises(ModelLoadError, match="empty"):
        load(tmp_path)
    (tmp_path / "saved_model.pb").write_bytes(b"\x08\x01")
    with pytest.raises(ModelLoadError, match="holds no meta graph"):
        load(tmp_path)


def test_a_saved_model_whose_variables_are_gone_is_a_model_load_error(saved_model_module, tmp_path):
    import shutil

    broken = tmp_path / "broken"
    shutil.copytree(saved_model_module, broken)
    shutil.rmtree(broken / "variables")
    with pytest.raises(ModelLoadError, match="TensorFlow could not load and freeze signature 'serving_default'"):
        load(broken, savedmodel_loader="tensorflow")
    with pytest.raises(ModelLoadError, match=r"variables\.index: the checkpoint index is missing; .*--savedmodel-loader tensorflow"):
        load(broken)


def test_an_unknown_loader_is_named(saved_model_module):
    with pytest.raises(ModelLoadError, match="unknown SavedModel loader 'tf'; expected one of native, tensorflow"):
        load(saved_model_module, savedmodel_loader="tf")
