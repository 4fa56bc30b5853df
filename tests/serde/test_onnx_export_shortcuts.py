"""Shortcuts of the ONNX export checked against the general path they stand for: a matmul and a bias add in
their usual forms written as plain ops (no emitter), and numpy's error state set only once a folding kernel runs."""

from __future__ import annotations

import warnings
from pathlib import Path

import numpy as np
import pytest

from scopefusion.convert import convert
from scopefusion.serde import onnx_fold
from scopefusion.serde.onnx_export import model_to_onnx_bytes
from scopefusion.serde.onnx_lowering import default_lowerings
from scopefusion.serde.onnx_lowering.registry import PlainOp

from ._emitter_paths import through_emitters


@pytest.fixture(scope="module", params=["keras_activation_cnn", "keras_transformer"])
def zoo_pb(request, model_store) -> Path:
    from tests.e2e.zoo import model_file

    return model_file(model_store, request.param)


def test_matmul_and_bias_add_export_as_through_an_emitter(zoo_pb):
    model = convert(zoo_pb)
    assert {"MatMul", "BiasAdd"} & {n.op_type for n in model.graph.nodes}
    assert model_to_onnx_bytes(model) == model_to_onnx_bytes(model, lowerings=through_emitters())


@pytest.mark.parametrize("fixture", ["tf_convnet_pb", "tf_bert_pb"])  # bert's attention transposes a matmul operand
def test_matmuls_of_any_flags_export_as_through_an_emitter(fixture, request):
    model = convert(request.getfixturevalue(fixture))
    assert model_to_onnx_bytes(model) == model_to_onnx_bytes(model, lowerings=through_emitters())


def test_a_flagged_matmul_or_channels_first_bias_add_takes_the_emitter(tf_convnet_pb):
    model = convert(tf_convnet_pb)
    lowerings = default_lowerings()
    for op_type, flag, value, onnx_op in (("MatMul", "transpose_b", True, "MatMul"),
                                           ("BiasAdd", "data_format", "NCHW", "Add")):
        plain = lowerings.get(op_type)
        assert isinstance(plain, PlainOp) and plain.onnx_op == onnx_op
        node = next(n for n in model.graph.nodes if n.op_type == op_type)
        assert plain.inputs_of(node, ["a", "b"], 23) == ["a", "b"]
        node.attrs.set_attr(flag, value)
        assert plain.inputs_of(node, ["a", "b"], 23) is None  # its lowering writes more than the one op


def test_folding_sets_numpy_error_state_only_around_kernels_and_restores_it(tf_convnet_pb, monkeypatch):
    model = convert(tf_convnet_pb)
    run = onnx_fold._run
    states: list[dict] = []

    def recording(node, arrays):
        states.append(np.geterr())
        return run(node, arrays)

    monkeypatch.setattr(onnx_fold, "_run", recording)
    before = np.geterr()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        folded = onnx_fold.fold_constants(model.graph)  # no known values: its kernels run
    assert folded and states
    assert all(set(s.values()) == {"ignore"} for s in states)
    assert np.geterr() == before


def test_a_cast_out_of_range_in_a_fold_warns_nothing():
    from types import SimpleNamespace

    from scopefusion.dtypes import INT32

    value = SimpleNamespace(type=SimpleNamespace(dtype=INT32))  # what the check reads of an IR value

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        array = onnx_fold._checked_array(np.array([np.nan, 1.0], np.float32), value)
    assert array is not None and array.dtype == np.int32


@pytest.mark.parametrize("fixture", ["tf_convnet_pb", "tf_bert_pb", "tf_rnn_pb", "tf2_control_flow_pb"])
def test_every_node_read_answers_as_the_walk_from_the_outputs(fixture, request, monkeypatch):
    from scopefusion.serde import onnx_optimize, onnx_prune

    model = convert(request.getfixturevalue(fixture))
    real = onnx_prune.every_node_read
    answers: list[bool] = []

    def checked(index):
        found = real(index)
        _, live = onnx_prune.live_nodes(index)
        assert found == (len(live) == len(index.nodes))
        answers.append(found)
        return found

    monkeypatch.setattr(onnx_optimize, "every_node_read", checked)
    exported = model_to_onnx_bytes(model)
    assert answers
    monkeypatch.setattr(onnx_optimize, "every_node_read", lambda index: False)  # the walk, always
    assert model_to_onnx_bytes(model) == exported
