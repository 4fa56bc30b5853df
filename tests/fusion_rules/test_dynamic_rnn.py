"""DynamicRNNFusion: Keras LSTMs (TF2 While loops) and TF1 ``dynamic_rnn`` LSTMs (TF1 frames) → one
``fused.DynamicRNN`` each, checked end to end with ``verify`` and per fusion with the harness.

The TF1 and Keras builders here are shared with ``test_dynamic_gru.py``. Weights are drawn with a
standard deviation of 0.5 so that every gate works in its non-linear range.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable

import numpy as np
import pytest

from scopefusion.convert import convert
from scopefusion.verify import verify
from tests.fusion_rules.harness import check_fusions

TOL = 1e-5


# ------------------------------------------------------------------------------------------ TF1 cells
class TF1Cell:
    """An RNN cell with the interface ``dynamic_rnn`` duck-types (Keras 3 has no v1 cells).

    ``kind``: ``"lstm"`` (TF's BasicLSTMCell: concatenated kernel, gates i, j, f, o, ``forget_bias`` added
    to f), ``"peephole"`` (the same with ``w_f·c`` added to f's pre-activation) or ``"gru"`` (TF's
    GRUCell: ``gates`` r, u split after the sigmoid, ``candidate`` over ``[x, r·h]``).
    """

    def __init__(self, kind: str, units: int, forget_bias: float = 1.0) -> None:
        self.kind = kind
        self.units = units
        self.forget_bias = forget_bias

    @property
    def state_size(self) -> Any:
        return self.units if self.kind == "gru" else (self.units, self.units)

    @property
    def output_size(self) -> int:
        return self.units

    def zero_state(self, batch_size: Any, dtype: Any) -> Any:
        import tensorflow as tf

        if self.kind == "gru":
            return tf.zeros([batch_size, self.units], dtype)
        return tuple(tf.zeros([batch_size, self.units], dtype) for _ in range(2))

    def _dense(self, tf: Any, x: Any, units: int, name: str) -> Any:
        init = tf.compat.v1.random_normal_initializer(stddev=0.5)
        with tf.compat.v1.variable_scope(name):
            kernel = tf.compat.v1.get_variable("kernel", [int(x.shape[-1]), units], initializer=init)
            bias = tf.compat.v1.get_variable("bias", [units], initializer=init)
            return tf.nn.bias_add(tf.matmul(x, kernel), bias)

    def __call__(self, inputs: Any, state: Any, scope: Any = None) -> Any:
        import tensorflow as tf

        name = "gru_cell" if self.kind == "gru" else "lstm_cell"
        with tf.compat.v1.variable_scope(scope or name, reuse=tf.compat.v1.AUTO_REUSE):
            if self.kind == "gru":
                value = tf.sigmoid(self._dense(tf, tf.concat([inputs, state], 1), 2 * self.units, "gates"))
                r, u = tf.split(value, 2, axis=1)
                c = tf.tanh(self._dense(tf, tf.concat([inputs, r * state], 1), self.units, "candidate"))
                new_h = u * state + (1 - u) * c
                return new_h, new_h
            c, h = state
            i, j, f, o = tf.split(self._dense(tf, tf.concat([inputs, h], 1), 4 * self.units, "kernel"), 4, axis=1)
            if self.kind == "peephole":
                w_f = tf.compat.v1.get_variable("w_f_diag", [self.units], initializer=tf.compat.v1.ones_initializer())
                f = f + w_f * c
            new_c = c * tf.sigmoid(f + self.forget_bias) + tf.sigmoid(i) * tf.tanh(j)
            new_h = tf.tanh(new_c) * tf.sigmoid(o)
            return new_h, (new_c, new_h)


def tf1_rnn(
    kind: str,
    *,
    batch: int = 2,
    steps: int = 5,
    features: int = 3,
    units: int = 4,
    time_major: bool = False,
    initial_state: bool = False,
    fetch_state: bool = False,
    escape: bool = False,
) -> bytes:
    """A frozen TF1 graph: ``dynamic_rnn`` over :class:`TF1Cell` ``kind`` under scope ``rnn_model/``.

    Input ``x`` (``[batch, steps, features]``, or time-major); with ``initial_state`` the states are
    inputs (``c0``, ``h0`` or ``h0``). Outputs: ``y`` (the output sequence), ``state_k`` (the final
    states) with ``fetch_state``, and ``steps`` (the loop's final time counter, an intermediate of the
    loop) with ``escape``.
    """
    import tensorflow as tf

    tf.compat.v1.disable_control_flow_v2()
    try:
        graph = tf.Graph()
        with graph.as_default():
            tf.compat.v1.set_random_seed(0)
            shape = [steps, batch, features] if time_major else [batch, steps, features]
            x = tf.compat.v1.placeholder(tf.float32, shape, name="x")
            cell = TF1Cell(kind, units)
            init = None
            if initial_state:
                h0 = tf.compat.v1.placeholder(tf.float32, [batch, units], name="h0")
                init = h0 if kind == "gru" else (tf.compat.v1.placeholder(tf.float32, [batch, units], name="c0"), h0)
            with tf.compat.v1.variable_scope("rnn_model"):
                outputs, state = tf.compat.v1.nn.dynamic_rnn(
                    cell, x, initial_state=init, dtype=tf.float32, time_major=time_major
                )
            names = [tf.identity(outputs, name="y").op.name]
            if fetch_state:
                flat = [state] if kind == "gru" else list(state)
                names += [tf.identity(s, name=f"state_{k}").op.name for k, s in enumerate(flat)]
            if escape:
                counter = graph.get_tensor_by_name("rnn_model/rnn/while/Exit_1:0")
                names.append(tf.identity(counter, name="steps").op.name)
            with tf.compat.v1.Session(graph=graph) as sess:
                sess.run(tf.compat.v1.global_variables_initializer())
                frozen = tf.compat.v1.graph_util.convert_variables_to_constants(sess, graph.as_graph_def(), names)
    finally:
        tf.compat.v1.enable_control_flow_v2()
    return frozen.SerializeToString()


# ------------------------------------------------------------------------------------------ Keras
def keras_rnn(
    layer: str, *, steps: int | None = 6, features: int = 5, units: int = 8, initial_state: bool = False, **options: Any
) -> bytes:
    """A frozen Keras model: ``layer`` (``"LSTM"`` / ``"GRU"``, ``unroll=False``) over input ``sequence``
    ``[?, steps, features]``; ``options`` go to the layer. With ``initial_state`` the states are inputs
    ``h0`` (and ``c0``). Outputs: what the layer returns."""
    import keras
    import tensorflow as tf

    from tests.models.tf_models import freeze_concrete_function

    keras.utils.set_random_seed(0)
    sequence = keras.Input((steps, features), name="sequence")
    names = (["h0"] if layer == "GRU" else ["h0", "c0"]) if initial_state else []
    states = [keras.Input((units,), name=n) for n in names] or None
    rnn = getattr(keras.layers, layer)(units, unroll=False, name=layer.lower(), **options)
    outputs = rnn(sequence, initial_state=states) if states else rnn(sequence)
    model = keras.Model([sequence, *(states or [])], outputs, name=f"keras_{layer.lower()}")
    specs = [tf.TensorSpec((None, steps, features), tf.float32, name="sequence")]
    specs += [tf.TensorSpec((None, units), tf.float32, name=s.name) for s in states or []]
    concrete = tf.function(
        lambda *args: model(list(args) if len(args) > 1 else args[0], training=False), input_signature=specs
    )
    return freeze_concrete_function(concrete.get_concrete_function())


def keras_stack() -> bytes:
    """``LSTM(8)`` → ``Bidirectional(GRU(4))`` → ``LSTM(3, go_backwards=True)`` (last output) over
    ``sequence`` [?, 6, 5]: each loop reads the output of the one before it."""
    import keras

    from tests.models.more_models import _freeze_keras

    keras.utils.set_random_seed(0)
    sequence = keras.Input((6, 5), name="sequence")
    x = keras.layers.LSTM(8, return_sequences=True, name="first")(sequence)
    # Every layer is named: an unnamed one takes a process-wide counter that depends on the models built before.
    x = keras.layers.Bidirectional(keras.layers.GRU(4, return_sequences=True, name="gru"), name="both")(x)
    x = keras.layers.LSTM(3, go_backwards=True, name="last")(x)
    return _freeze_keras(keras.Model(sequence, x, name="stack"), "sequence", (None, 6, 5))


def without_scopes(graph_def_bytes: bytes) -> bytes:
    """The GraphDef with every ``/`` of node names replaced by ``_`` (and colocation hints dropped)."""
    import tensorflow as tf

    graph_def = tf.compat.v1.GraphDef.FromString(graph_def_bytes)
    for node in graph_def.node:
        node.name = node.name.replace("/", "_")
        node.input[:] = [i.replace("/", "_") for i in node.input]
        if "_class" in node.attr:
            del node.attr["_class"]
    return graph_def.SerializeToString()


def built(model_store: Any, name: str, build: Callable[[], bytes]) -> Path:
    return model_store.file(f"fr_{name}.pb", build)


def fused(model: Any, fused_type: str) -> list[Any]:
    return [f for f in model.fusion_run.accepted if f.type == fused_type]


def refusals(model: Any, pass_name: str) -> list[str]:
    return [r.reason for r in model.fusion_run.refused if r.pass_name == pass_name]


def loop_ops_left(model: Any) -> list[str]:
    """Control-flow and list ops of the source loops that are still in the converted graph."""
    kinds = {"While", "StatelessWhile", "Enter", "Exit", "Merge", "Switch", "NextIteration", "LoopCond",
             "TensorArrayV3", "TensorListFromTensor", "TensorListStack", "TensorListReserve"}  # fmt: skip
    return sorted(n.op for n in model.graph.nodes if n.op.split(".", 1)[-1] in kinds)


# ------------------------------------------------------------------------------------------ fixtures
@pytest.fixture(scope="module")
def keras_lstm_pb(model_store) -> Path:
    """The model zoo's Keras LSTM (``LSTM(8, return_sequences=True)`` + Dense, input ``sequence`` [?, 6, 5])."""
    from tests.models import more_models

    return model_store.file("zoo_keras_lstm.pb", more_models.keras_lstm)


@pytest.fixture(scope="module")
def keras_lstm_states_pb(model_store) -> Path:
    """``LSTM(8, return_state=True)`` (last output) with initial states ``h0`` / ``c0`` as inputs."""

    def build() -> bytes:
        return keras_rnn("LSTM", initial_state=True, return_sequences=False, return_state=True)

    return built(model_store, "keras_lstm_states", build)


# ------------------------------------------------------------------------------------------ positives
def test_both_rules_are_general_builtins_with_their_fused_ops():
    from scopefusion.dialects.fused import definitions
    from scopefusion.fusion_rules import BUILTIN_RULES, dynamic_gru, dynamic_rnn

    passes = (dynamic_rnn.PASS, dynamic_gru.PASS)
    assert [p.name for p in passes] == ["DynamicRNNFusion", "DynamicGRUFusion"]
    assert all(p in BUILTIN_RULES and p.general for p in passes)
    assert {"DynamicRNN", "DynamicGRU"} <= {d.name for d in definitions() if d.dialect == "fused"}


def test_keras_lstm_one_fusion_replaces_the_while_loop(keras_lstm_pb):
    report = verify(keras_lstm_pb, input_shapes={"sequence": [2, 6, 5]})
    assert report.ok and report.max_abs <= TOL
    assert report.fusions == {"DynamicRNNFusion": 1}
    model = convert(keras_lstm_pb, input_shapes={"sequence": [2, 6, 5]})
    (fusion,) = fused(model, "DynamicRNN")
    assert fusion.name == "keras_lstm_1/lstm_1"
    assert [(i.port, i.producer) for i in fusion.inputs] == [(0, "sequence")]  # zero initial states dropped
    assert [(o.port, o.inner_node) for o in fusion.outputs] == [(0, "keras_lstm_1/lstm_1/transpose_1")]
    assert loop_ops_left(model) == []
    attrs = fusion.attrs
    assert (attrs["hidden_size"], attrs["time_major"], attrs["return_sequences"]) == (8, False, True)
    assert attrs["w"].shape == (5 + 8, 32) and attrs["b"].shape == (32,)
    # Keras' i, f, c, o kernel blocks, stacked (kernel over recurrent_kernel) and reordered to i, j, f, o.
    kernel = model.source.node("keras_lstm_1/lstm_1/lstm_cell_1/Cast/ReadVariableOp/resource").value
    recurrent = model.source.node("keras_lstm_1/lstm_1/lstm_cell_1/Cast_1/ReadVariableOp/resource").value
    blocks = [0, 2, 1, 3]
    expected = np.vstack([kernel, recurrent]).reshape(13, 4, 8)[:, blocks].reshape(13, 32)
    np.testing.assert_array_equal(attrs["w"], expected)
    assert refusals(model, "DynamicRNNFusion") == []
    errors = check_fusions(keras_lstm_pb, "DynamicRNN", model=model, input_shapes={"sequence": [2, 6, 5]}).errors
    assert list(errors) == ["keras_lstm_1/lstm_1"] and max(errors.values()) <= TOL


def test_keras_lstm_unknown_batch_verifies(keras_lstm_pb):
    report = verify(keras_lstm_pb)  # one profile, batch -1: drawn as 2 at run time
    assert report.ok and report.max_abs <= TOL and report.fusions == {"DynamicRNNFusion": 1}


def test_keras_lstm_initial_states_last_output_and_final_states(keras_lstm_states_pb):
    shapes = {"sequence": [3, 6, 5], "h0": [3, 8], "c0": [3, 8]}
    report = verify(keras_lstm_states_pb, input_shapes=shapes)
    assert report.ok and report.max_abs <= TOL and report.fusions == {"DynamicRNNFusion": 1}
    model = convert(keras_lstm_states_pb, input_shapes=shapes)
    (fusion,) = fused(model, "DynamicRNN")
    assert [(i.port, i.producer) for i in fusion.inputs] == [(0, "sequence"), (1, "h0"), (2, "c0")]
    assert [(o.port, o.index) for o in fusion.outputs] == [(0, 0), (1, 4), (2, 5)]  # y, While:4 (h), While:5 (c)
    assert fusion.attrs["return_sequences"] is False
    errors = check_fusions(keras_lstm_states_pb, "DynamicRNN", model=model, input_shapes=shapes).errors
    assert max(errors.values()) <= TOL
    assert [list(v.type.shape) for v in model.graph.get_node(fusion.name).outputs] == [[-1, 8]] * 3
    (profile,) = model.profiles
    assert [list(v.type.shape) for v in profile.graph.get_node(fusion.name).outputs] == [[3, 8]] * 3


def test_tf1_dynamic_rnn_fixture_is_fused_and_becomes_executable(tf_rnn_pb):
    report = verify(tf_rnn_pb)
    assert report.ok and report.max_abs <= TOL and report.fusions == {"DynamicRNNFusion": 1}
    model = convert(tf_rnn_pb)
    (fusion,) = fused(model, "DynamicRNN")
    assert fusion.name == "rnn_model/rnn"
    assert loop_ops_left(model) == []
    assert [(i.port, i.producer) for i in fusion.inputs] == [(0, "x")]
    outputs = [(o.port, o.inner_node, o.consumers) for o in fusion.outputs]
    assert outputs == [(0, "rnn_model/rnn/transpose_1", (("y", 0),))]
    # TF's concatenated kernel is already i, j, f, o; the cell's `f + 1.0` is folded into b's f block.
    kernel = model.source.node("rnn_model/rnn/lstm_cell/gates/kernel").value
    bias = model.source.node("rnn_model/rnn/lstm_cell/gates/bias").value
    np.testing.assert_array_equal(fusion.attrs["w"], kernel)
    np.testing.assert_allclose(fusion.attrs["b"], bias + np.repeat([0.0, 0.0, 1.0, 0.0], 4), rtol=0, atol=1e-7)
    errors = check_fusions(tf_rnn_pb, "DynamicRNN", model=model).errors
    assert max(errors.values()) <= TOL


@pytest.mark.parametrize("time_major", [False, True])
def test_tf1_lstm_with_initial_and_final_states(model_store, time_major):
    def build() -> bytes:
        return tf1_rnn("lstm", time_major=time_major, initial_state=True, fetch_state=True)

    path = built(model_store, f"tf1_lstm_states_{time_major}", build)
    report = verify(path)
    assert report.ok and report.max_abs <= TOL and report.fusions == {"DynamicRNNFusion": 1}
    model = convert(path)
    (fusion,) = fused(model, "DynamicRNN")
    assert fusion.attrs["time_major"] is time_major
    assert [(i.port, i.producer) for i in fusion.inputs] == [(0, "x"), (1, "h0"), (2, "c0")]
    # Outputs: y, then h (Exit_4) and c (Exit_3), read by state_1 and state_0.
    outputs = [(o.port, o.consumers) for o in fusion.outputs]
    assert outputs[1:] == [(1, (("state_1", 0),)), (2, (("state_0", 0),))]
    assert loop_ops_left(model) == []
    errors = check_fusions(path, "DynamicRNN", model=model).errors
    assert max(errors.values()) <= TOL


def test_stacked_bidirectional_and_backward_loops_each_fuse(model_store):
    path = built(model_store, "keras_stack", keras_stack)
    report = verify(path, input_shapes={"sequence": [2, 6, 5]})
    assert report.ok and report.max_abs <= TOL
    assert report.fusions == {"DynamicRNNFusion": 2, "DynamicGRUFusion": 2}
    model = convert(path, input_shapes={"sequence": [2, 6, 5]})
    assert loop_ops_left(model) == []
    names = sorted(f.name for f in model.fusion_run.accepted)
    assert names == ["stack_1/both_1/backward_gru_1", "stack_1/both_1/forward_gru_1", "stack_1/first_1", "stack_1/last_1"]
    (last,) = [f for f in fused(model, "DynamicRNN") if f.name == "stack_1/last_1"]
    # go_backwards: the ReverseV2 in front of the loop stays outside and the fused op reads its time-major
    # output; the zero states, sized from the batch-major input, stay outside as inputs too.
    assert (last.attrs["time_major"], last.attrs["return_sequences"]) == (True, False)
    assert [i.producer for i in last.inputs] == [f"stack_1/last_1/{n}" for n in ("ReverseV2", "zeros", "zeros_1")]
    for fused_type in ("DynamicRNN", "DynamicGRU"):
        errors = check_fusions(path, fused_type, model=model, input_shapes={"sequence": [2, 6, 5]}).errors
        assert len(errors) == 2 and max(errors.values()) <= TOL


def test_tf1_lstm_without_scope_names_is_found_by_op_type(model_store, tf_rnn_pb):
    path = built(model_store, "tf1_lstm_flat", lambda: without_scopes(tf_rnn_pb.read_bytes()))
    report = verify(path)
    assert report.ok and report.max_abs <= TOL and report.fusions == {"DynamicRNNFusion": 1}
    model = convert(path)
    assert model.fusion_run["DynamicRNNFusion"].scopes_matched == []
    (fusion,) = fused(model, "DynamicRNN")
    assert fusion.name == "rnn_model_rnn_while_LoopCond"
    assert loop_ops_left(model) == []


# ------------------------------------------------------------------------------------------ negatives
def test_keras_lstm_with_relu_activation_is_refused_with_the_node_that_differs(model_store):
    path = built(model_store, "keras_lstm_relu", lambda: keras_rnn("LSTM", activation="relu", return_sequences=True))
    model = convert(path)
    assert fused(model, "DynamicRNN") == []
    (reason,) = refusals(model, "DynamicRNNFusion")
    assert reason == (
        "keras_lstm_1/lstm_1/while is not an LSTM over a sequence: the cell applies Relu (keras_lstm_1/lstm_1/while/"
        "lstm_cell_1/Relu), Relu (keras_lstm_1/lstm_1/while/lstm_cell_1/Relu_1) where an LSTM applies tanh; only "
        "sigmoid gates with tanh activations are fused"
    )
    assert "While" in {n.op.split(".")[-1] for n in model.graph.nodes}  # the loop stays as it was
    assert verify(path).ok


def test_tf1_peephole_lstm_is_refused(model_store):
    path = built(model_store, "tf1_peephole", lambda: tf1_rnn("peephole"))
    model = convert(path)
    assert fused(model, "DynamicRNN") == []
    (reason,) = refusals(model, "DynamicRNNFusion")
    assert reason.startswith("rnn_model/rnn/while/LoopCond is not an LSTM over a sequence: ")
    assert "rnn_model/rnn/while/lstm_cell/mul (Mul) is not an affine function of the step's input and state" in reason


def test_tf1_lstm_whose_gate_is_a_graph_output_is_refused(tf_rnn_pb):
    from scopefusion.fusion_rules.dynamic_rnn import PASS
    from scopefusion.parser import load
    from scopefusion.scope import PassManager, PassRegistry, ScopeGraph

    gate = "rnn_model/rnn/while/lstm_cell/Sigmoid_2"  # the output gate, inside the loop
    registry = PassRegistry()
    registry.load_builtins([PASS])
    report = PassManager(registry, strict=True).run(ScopeGraph.build(load(tf_rnn_pb, outputs=["y", gate])))
    assert report.accepted == []
    (refusal,) = report.plan.refused
    assert refusal.reason == (
        f"graph output '{gate}' ({gate}:0) is inside the fusion but no fused output port maps it"
    )
    unfused = PassManager(registry, strict=True).run(ScopeGraph.build(load(tf_rnn_pb)))
    assert [f.name for f in unfused.accepted] == ["rnn_model/rnn"]


def test_tf1_lstm_whose_loop_counter_is_read_outside_is_refused(model_store):
    path = built(model_store, "tf1_lstm_escape", lambda: tf1_rnn("lstm", escape=True))
    model = convert(path)
    assert fused(model, "DynamicRNN") == []
    (reason,) = refusals(model, "DynamicRNNFusion")
    assert reason == (
        "intermediate value rnn_model/rnn/while/Exit_1:0 is consumed outside the fusion by steps (input 0); "
        "map it to a fused output port or leave the node out"
    )


# ------------------------------------------------------------------------------------------ the fused op
def run_onnx_node(node: Any, inputs: dict[str, np.ndarray], outputs: list[str]) -> list[np.ndarray]:
    """Runs one ONNX node (opset 14) with onnxruntime; every input is a float32 graph input."""
    import onnxruntime as ort
    from onnx import TensorProto, helper

    graph = helper.make_graph(
        [node],
        "one",
        [helper.make_tensor_value_info(k, TensorProto.FLOAT, v.shape) for k, v in inputs.items()],
        [helper.make_empty_tensor_value_info(o) for o in outputs],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 14)])
    model.ir_version = 8
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return session.run(outputs, inputs)


def test_fused_op_is_onnx_lstm_with_the_documented_gate_order():
    from onnx import helper

    from scopefusion.dialects.fused.dynamic_rnn import definition

    rng = np.random.default_rng(0)
    batch, steps, size, hidden = 2, 5, 3, 4
    w = rng.standard_normal((size + hidden, 4 * hidden)).astype(np.float32)
    b = rng.standard_normal(4 * hidden).astype(np.float32)
    x = rng.standard_normal((batch, steps, size)).astype(np.float32)
    h0, c0 = (rng.standard_normal((batch, hidden)).astype(np.float32) for _ in range(2))
    attrs = {"hidden_size": hidden, "w": w, "b": b, "time_major": False, "return_sequences": True}
    y, h, c = definition().reference([x, h0, c0], attrs)
    assert y.shape == (batch, steps, hidden) and y.dtype == np.float32

    def onnx_order(m: np.ndarray) -> np.ndarray:  # blocks i, j, f, o → ONNX's i, o, f, c
        return m.reshape(m.shape[0], 4, hidden)[:, [0, 3, 2, 1]].reshape(m.shape[0], 4 * hidden)

    feeds = {
        "X": x.transpose(1, 0, 2).copy(),
        "W": onnx_order(w[:size]).T[None].copy(),
        "R": onnx_order(w[size:]).T[None].copy(),
        "B": np.concatenate([onnx_order(b[None])[0], np.zeros(4 * hidden, np.float32)])[None],
        "H0": h0[None],
        "C0": c0[None],
    }
    node = helper.make_node("LSTM", ["X", "W", "R", "B", "", "H0", "C0"], ["Y", "Y_h", "Y_c"], hidden_size=hidden)
    want_y, want_h, want_c = run_onnx_node(node, feeds, ["Y", "Y_h", "Y_c"])
    assert np.max(np.abs(y - want_y[:, 0].transpose(1, 0, 2))) <= TOL
    assert np.max(np.abs(h - want_h[0])) <= TOL and np.max(np.abs(c - want_c[0])) <= TOL
    (last, *_) = definition().reference([x.transpose(1, 0, 2)], attrs | {"time_major": True, "return_sequences": False})
    zero = run_onnx_node(node, feeds | {"H0": np.zeros_like(h0[None]), "C0": np.zeros_like(c0[None])}, ["Y_h"])[0]
    assert np.max(np.abs(last - zero[0])) <= TOL


def test_fused_op_inference():
    from scopefusion import dtypes as D
    from scopefusion.dialects.fused.dynamic_rnn import definition
    from scopefusion.ir.attrs import BOOL, INT, TENSOR, AttrValue
    from scopefusion.ir.opdef import InferContext, InputInfo

    op = definition()

    def infer(x_shape, outputs=3, time_major=False, sequences=True, init=()):
        attrs = {
            "hidden_size": AttrValue(INT, 4),
            "w": AttrValue(TENSOR, np.zeros((7, 16), np.float32)),
            "b": AttrValue(TENSOR, np.zeros(16, np.float32)),
            "time_major": AttrValue(BOOL, time_major),
            "return_sequences": AttrValue(BOOL, sequences),
        }
        inputs = [InputInfo(x_shape, D.FLOAT32)] + [InputInfo(s, D.FLOAT32) for s in init]
        ctx = InferContext(op, "rnn", inputs, attrs, outputs)
        op.infer(ctx)
        return [ctx.output_shape(i) for i in range(outputs)], ctx.output_dtype(0)

    assert infer((-1, 5, 3)) == ([(-1, 5, 4), (-1, 4), (-1, 4)], D.FLOAT32)
    assert infer((5, 2, 3), 1, time_major=True)[0] == [(5, 2, 4)]
    assert infer((2, -1, 3), 2, sequences=False)[0] == [(2, 4), (2, 4)]
    with pytest.raises(Exception, match="x has 6 features, the weights expect 3"):
        infer((2, 5, 6))
    with pytest.raises(Exception, match=r"init_h has shape \[2, 5\], expected \[batch, 4\]"):
        infer((2, 5, 3), init=[(2, 5), (2, 4)])
