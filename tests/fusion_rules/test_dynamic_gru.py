"""DynamicGRUFusion: Keras GRUs (TF2 While loops, reset after and before) and TF1 ``dynamic_rnn`` GRUs
(TF1 frames, TF's GRUCell) → one ``fused.DynamicGRU`` each, checked with ``verify`` and the harness."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from scopefusion.convert import convert
from scopefusion.verify import verify
from tests.fusion_rules.harness import check_fusions
from tests.fusion_rules.test_dynamic_rnn import TOL, built, fused, keras_rnn, loop_ops_left, refusals, tf1_rnn


@pytest.fixture(scope="module")
def keras_gru_pb(model_store) -> Path:
    """The model zoo's Keras GRU (``GRU(8, return_sequences=True)``, reset after, + Dense; ``sequence`` [?, 6, 5])."""
    from tests.models import more_models

    return model_store.file("zoo_keras_gru.pb", more_models.keras_gru)


# ------------------------------------------------------------------------------------------ positives
def test_keras_gru_one_fusion_replaces_the_while_loop(keras_gru_pb):
    shapes = {"sequence": [2, 6, 5]}
    report = verify(keras_gru_pb, input_shapes=shapes)
    assert report.ok and report.max_abs <= TOL and report.fusions == {"DynamicGRUFusion": 1}
    model = convert(keras_gru_pb, input_shapes=shapes)
    (fusion,) = fused(model, "DynamicGRU")
    assert fusion.name == "keras_gru_1/gru_1"
    assert [(i.port, i.producer) for i in fusion.inputs] == [(0, "sequence")]
    assert loop_ops_left(model) == []
    attrs = fusion.attrs
    assert (attrs["hidden_size"], attrs["reset_after"], attrs["time_major"]) == (8, True, False)
    # Keras' kernel is already z, r, h; its (2, 24) bias holds the input and the recurrent biases.
    kernel = model.source.node("keras_gru_1/gru_1/gru_cell_1/Cast/ReadVariableOp/resource").value
    recurrent = model.source.node("keras_gru_1/gru_1/gru_cell_1/Cast_1/ReadVariableOp/resource").value
    bias = model.source.node("keras_gru_1/gru_1/gru_cell_1/split/ReadVariableOp/resource").value
    np.testing.assert_array_equal(attrs["w_input"], kernel)
    np.testing.assert_array_equal(attrs["w_hidden"], recurrent)
    np.testing.assert_allclose(attrs["b_input"], bias[0] + np.concatenate([bias[1, :16], np.zeros(8)]), atol=1e-7)
    np.testing.assert_array_equal(attrs["b_hidden"], np.concatenate([np.zeros(16), bias[1, 16:]]))
    assert refusals(model, "DynamicGRUFusion") == [] and refusals(model, "DynamicRNNFusion") == []
    errors = check_fusions(keras_gru_pb, "DynamicGRU", model=model, input_shapes=shapes).errors
    assert list(errors) == ["keras_gru_1/gru_1"] and max(errors.values()) <= TOL


def test_keras_gru_reset_before_with_unknown_length_and_initial_state(model_store):
    def build() -> bytes:
        return keras_rnn("GRU", steps=None, reset_after=False, initial_state=True, return_sequences=True, return_state=True)

    path = built(model_store, "keras_gru_before", build)
    for shapes in ({"sequence": [2, 7, 5], "h0": [2, 8]}, {"sequence": [1, 3, 5], "h0": [1, 8]}):
        report = verify(path, input_shapes=shapes)
        assert report.ok and report.max_abs <= TOL and report.fusions == {"DynamicGRUFusion": 1}
    model = convert(path, input_shapes=shapes)
    (fusion,) = fused(model, "DynamicGRU")
    assert fusion.attrs["reset_after"] is False
    assert [(i.port, i.producer) for i in fusion.inputs] == [(0, "sequence"), (1, "h0")]
    assert [o.port for o in fusion.outputs] == [0, 1]
    errors = check_fusions(path, "DynamicGRU", model=model, input_shapes=shapes).errors
    assert max(errors.values()) <= TOL


@pytest.mark.parametrize("time_major", [False, True])
def test_tf1_dynamic_rnn_gru(model_store, time_major):
    path = built(model_store, f"tf1_gru_{time_major}", lambda: tf1_rnn("gru", time_major=time_major, fetch_state=True))
    report = verify(path)
    assert report.ok and report.max_abs <= TOL and report.fusions == {"DynamicGRUFusion": 1}
    model = convert(path)
    (fusion,) = fused(model, "DynamicGRU")
    assert fusion.name == "rnn_model/rnn" and loop_ops_left(model) == []
    assert (fusion.attrs["reset_after"], fusion.attrs["time_major"]) == (False, time_major)
    assert [(o.port, o.consumers) for o in fusion.outputs][1:] == [(1, (("state_0", 0),))]
    # TF's gates kernel [x; h] x (r, u) becomes the z (= u) and r blocks; its candidate kernel the n block.
    gates = model.source.node("rnn_model/rnn/gru_cell/gates/kernel").value
    candidate = model.source.node("rnn_model/rnn/gru_cell/candidate/kernel").value
    expected = np.hstack([gates[:, 4:], gates[:, :4], candidate])
    np.testing.assert_array_equal(np.vstack([fusion.attrs["w_input"], fusion.attrs["w_hidden"]]), expected)
    errors = check_fusions(path, "DynamicGRU", model=model).errors
    assert max(errors.values()) <= TOL


# ------------------------------------------------------------------------------------------ negatives
def test_keras_gru_with_relu_activation_is_refused(model_store):
    path = built(model_store, "keras_gru_relu", lambda: keras_rnn("GRU", activation="relu", return_sequences=True))
    model = convert(path)
    assert fused(model, "DynamicGRU") == []
    (reason,) = refusals(model, "DynamicGRUFusion")
    assert reason == (
        "keras_gru_1/gru_1/while is not a GRU over a sequence: the candidate applies Relu "
        "(keras_gru_1/gru_1/while/gru_cell_1/Relu) where a GRU applies tanh; only sigmoid gates with tanh activations "
        "are fused"
    )
    assert refusals(model, "DynamicRNNFusion") == []  # one state: not the LSTM rule's business
    assert verify(path).ok


def test_tf1_gru_whose_loop_counter_is_read_outside_is_refused(model_store):
    path = built(model_store, "tf1_gru_escape", lambda: tf1_rnn("gru", escape=True))
    model = convert(path)
    assert fused(model, "DynamicGRU") == []
    (reason,) = refusals(model, "DynamicGRUFusion")
    assert reason.startswith("intermediate value rnn_model/rnn/while/Exit_1:0 is consumed outside the fusion by steps")


def test_tf1_lstm_is_left_to_the_lstm_rule(tf_rnn_pb):
    model = convert(tf_rnn_pb)
    assert fused(model, "DynamicGRU") == [] and refusals(model, "DynamicGRUFusion") == []
    assert len(fused(model, "DynamicRNN")) == 1


# ------------------------------------------------------------------------------------------ the fused op
@pytest.mark.parametrize("reset_after", [True, False])
def test_fused_op_is_onnx_gru_with_the_documented_gate_order(reset_after):
    from onnx import helper

    from scopefusion.dialects.fused.dynamic_gru import definition
    from tests.fusion_rules.test_dynamic_rnn import run_onnx_node

    rng = np.random.default_rng(1)
    batch, steps, size, hidden = 2, 5, 3, 4
    w_input = rng.standard_normal((size, 3 * hidden)).astype(np.float32)
    w_hidden = rng.standard_normal((hidden, 3 * hidden)).astype(np.float32)
    b_input, b_hidden = (rng.standard_normal(3 * hidden).astype(np.float32) for _ in range(2))
    x = rng.standard_normal((steps, batch, size)).astype(np.float32)
    h0 = rng.standard_normal((batch, hidden)).astype(np.float32)
    attrs = {"hidden_size": hidden, "w_input": w_input, "w_hidden": w_hidden, "b_input": b_input, "b_hidden": b_hidden,
             "reset_after": reset_after, "time_major": True, "return_sequences": True}  # fmt: skip
    y, h = definition().reference([x, h0], attrs)
    # z, r, n blocks are ONNX's z, r, h; reset_after is linear_before_reset.
    feeds = {"X": x, "W": w_input.T[None].copy(), "R": w_hidden.T[None].copy(),
             "B": np.concatenate([b_input, b_hidden])[None], "H0": h0[None]}  # fmt: skip
    node = helper.make_node("GRU", ["X", "W", "R", "B", "", "H0"], ["Y", "Y_h"], hidden_size=hidden,
                            linear_before_reset=int(reset_after))  # fmt: skip
    want_y, want_h = run_onnx_node(node, feeds, ["Y", "Y_h"])
    assert np.max(np.abs(y - want_y[:, 0])) <= TOL and np.max(np.abs(h - want_h[0])) <= TOL


def test_fused_op_inference_checks_the_weights():
    from scopefusion import dtypes as D
    from scopefusion.dialects.fused.dynamic_gru import definition
    from scopefusion.ir.attrs import BOOL, INT, TENSOR, AttrValue
    from scopefusion.ir.opdef import InferContext, InputInfo

    op = definition()

    def infer(w_hidden_shape, x_shape=(2, 5, 3)):
        attrs = {"hidden_size": AttrValue(INT, 4), "w_input": AttrValue(TENSOR, np.zeros((3, 12), np.float32)),
                 "w_hidden": AttrValue(TENSOR, np.zeros(w_hidden_shape, np.float32)),
                 "b_input": AttrValue(TENSOR, np.zeros(12, np.float32)),
                 "b_hidden": AttrValue(TENSOR, np.zeros(12, np.float32)),
                 "reset_after": AttrValue(BOOL, True), "time_major": AttrValue(BOOL, False),
                 "return_sequences": AttrValue(BOOL, True)}  # fmt: skip
        ctx = InferContext(op, "gru", [InputInfo(x_shape, D.FLOAT32)], attrs, 2)
        op.infer(ctx)
        return [ctx.output_shape(0), ctx.output_shape(1)]

    assert infer((4, 12)) == [(2, 5, 4), (2, 4)]
    with pytest.raises(Exception, match=r"w_hidden has shape \[3, 12\], expected \[4, 12\]"):
        infer((3, 12))
