"""Layout tracking in the ONNX lowering (``scopefusion/serde/onnx_lowering/layout.py``) on the zoo's NHWC CNNs:
the lowering hands the clean-up one Transpose (where the NHWC input meets the NCHW body) instead of two around
every channels-last op, so fewer nodes; the final export has no more nodes and no more Transposes than with the
tracking off, runs in onnxruntime like that export, and matches TensorFlow. Plus a graph of the ops the layout
passes through (bias, broadcast constants, pads, means with and without kept dims, fused activations) and of
those it does not (a mean whose kept dims would change order, a reshape, a graph output read channels last)."""

from __future__ import annotations

import collections
import functools
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import onnx.numpy_helper
import pytest

from scopefusion.convert import convert
from scopefusion.serde import onnx_export, onnx_optimize
from scopefusion.serde.onnx_export import DEFAULT_EXPORT_OPSET, model_to_onnx
from scopefusion.serde.onnx_fused import fused_exporters_for
from scopefusion.serde.onnx_graph import GraphWriter
from scopefusion.serde.onnx_lowering import default_lowerings, layout
from scopefusion.serde.onnx_lowering.layout import ChannelsFirstType
from scopefusion.verify import make_inputs
from tests.serde._onnx_runs import assert_runs_like_source, ort_outputs

CNNS = [("small_convnet", "tf_convnet_pb"), ("mobilenet_v2", "tf_mobilenet_pb"),
        ("keras_activation_cnn", "keras_activation_cnn_pb")]


def _lowered(model: Any, track_layout: bool) -> tuple[list, list[str]]:
    """The nodes the lowering of ``model``'s main graph hands to the clean-up, and the graph's input names."""
    writer = GraphWriter(DEFAULT_EXPORT_OPSET, fused_exporters_for(model.graph.registry),
                         lowerings=default_lowerings(), track_layout=track_layout)
    graph, nodes, _, _ = writer.write_nodes(model.graph, leave_out_unread=True)
    assert not writer.unlowered
    return nodes, [i.name for i in graph.input]


def _export(model: Any, track_layout: bool, monkeypatch: pytest.MonkeyPatch) -> onnx.ModelProto:
    with monkeypatch.context() as patched:
        patched.setattr(onnx_export, "GraphWriter", functools.partial(GraphWriter, track_layout=track_layout))
        return model_to_onnx(model)


@pytest.mark.parametrize("name,fixture", CNNS)
def test_the_lowering_of_an_nhwc_cnn_writes_one_transpose_where_its_input_meets_the_body(name, fixture, request):
    model = convert(request.getfixturevalue(fixture))
    (plain, _), (tracked, inputs) = _lowered(model, False), _lowered(model, True)
    plain_ops = collections.Counter(n.op_type for n in plain)
    tracked_ops = collections.Counter(n.op_type for n in tracked)
    # Held channels first, a batch norm of a Conv's output is written as the Mul its clean-up would make of it.
    as_scale = tracked_ops["Mul"] - plain_ops["Mul"]
    assert 0 <= as_scale <= plain_ops["BatchNormalization"]
    plain_ops.update({"Mul": as_scale, "BatchNormalization": -as_scale})
    convs = plain_ops["Conv"]
    assert convs >= 1 and plain_ops["Transpose"] >= 2 * convs  # each channels-last op between two transposes
    assert [n.input[0] for n in tracked if n.op_type == "Transpose"] == inputs  # the NHWC input's, only
    # The transposes are gone, and identities of held values and their zero-bias adds: nothing else changes.
    assert not tracked_ops - plain_ops and tracked_ops["Conv"] == convs
    gone = plain_ops - tracked_ops
    assert set(gone) <= {"Transpose", "Identity", "Add"} and gone["Transpose"] == plain_ops["Transpose"] - 1


@pytest.mark.parametrize("name,fixture", CNNS)
def test_a_tracked_export_has_no_more_nodes_and_runs_like_the_untracked_one_and_tensorflow(
        name, fixture, request, monkeypatch):
    model = convert(request.getfixturevalue(fixture))
    plain, tracked = _export(model, False, monkeypatch), _export(model, True, monkeypatch)
    onnx.checker.check_model(tracked, full_check=True)
    plain_ops = collections.Counter(n.op_type for n in plain.graph.node)
    tracked_ops = collections.Counter(n.op_type for n in tracked.graph.node)
    assert len(tracked.graph.node) <= len(plain.graph.node)
    assert tracked_ops["Transpose"] == plain_ops["Transpose"] == 1
    assert [i.name for i in tracked.graph.input] == [i.name for i in plain.graph.input]
    assert [o.name for o in tracked.graph.output] == [o.name for o in plain.graph.output]
    feeds = make_inputs(model.graph, 7)
    ours, theirs = ort_outputs(tracked, feeds), ort_outputs(plain, feeds)
    for key, expected in theirs.items():
        np.testing.assert_allclose(ours[key], expected, rtol=1e-6, atol=1e-6, err_msg=f"{name} output {key}")
    assert_runs_like_source(model, tracked, [feeds], name, rtol=1e-4, atol=1e-4)


def _layout_mix() -> Any:
    import tensorflow as tf

    rng = np.random.default_rng(5)

    def const(*shape: int) -> Any:
        return tf.constant(rng.standard_normal(shape).astype(np.float32))

    w1, w2, w3 = const(3, 3, 4, 6), const(1, 1, 6, 6), const(3, 3, 6, 1)
    bias, per_channel, row = const(6), const(1, 1, 1, 6), const(1, 1, 6, 1)

    def fn(x: Any) -> Any:
        y = tf.nn.relu6(tf.nn.bias_add(tf.nn.conv2d(x, w1, 1, "SAME"), bias))
        y = y * per_channel + 0.5  # a [1, 1, 1, C] constant and a scalar
        y = tf.pad(y, [[0, 0], [1, 0], [0, 1], [0, 0]])
        z = tf.nn.conv2d(y, w2, 1, "VALID")
        z = tf.nn.depthwise_conv2d(tf.maximum(z, row), tf.reshape(w3, [3, 3, 6, 1]), [1, 2, 2, 1], "SAME")
        pooled = tf.reduce_mean(z, axis=[1, 2])  # kept dims in the same order either way: [N, C]
        kept = tf.reduce_max(z, axis=[1, 2], keepdims=True)
        rows = tf.reduce_sum(z, axis=2)  # kept dims [N, H, C] in another order channels first: read channels last
        flat = tf.reshape(tf.nn.max_pool2d(z, 2, 1, "VALID") + z[:, :1, :1, :], [-1, 6 * 2 * 2])
        return pooled, kept, rows, flat, tf.sigmoid(z)  # the last: a graph output held channels first

    return fn


@pytest.fixture(scope="module")
def layout_mix_pb(model_store) -> Path:
    def build() -> bytes:
        import tensorflow as tf

        from tests.models.more_models import _freeze

        return _freeze(_layout_mix(), [tf.TensorSpec([None, 5, 5, 4], tf.float32, name="in0")])

    return model_store.file("onnx_layout_mix.pb", build)


def test_ops_the_layout_passes_through_and_those_it_does_not_compute_what_tensorflow_computes(layout_mix_pb,
                                                                                             monkeypatch):
    model = convert(layout_mix_pb)
    (plain, _), (tracked, _) = _lowered(model, False), _lowered(model, True)
    assert sum(n.op_type == "Transpose" for n in tracked) < sum(n.op_type == "Transpose" for n in plain)
    proto = _export(model, True, monkeypatch)
    onnx.checker.check_model(proto, full_check=True)
    untracked = _export(model, False, monkeypatch)
    assert len(proto.graph.node) <= len(untracked.graph.node)
    count = collections.Counter(n.op_type for n in proto.graph.node)["Transpose"]
    assert count <= collections.Counter(n.op_type for n in untracked.graph.node)["Transpose"]
    rng = np.random.default_rng(3)
    feeds = [{"in0": rng.standard_normal((b, 5, 5, 4)).astype(np.float32)} for b in (1, 3)]
    assert_runs_like_source(model, proto, feeds, "layout mix", rtol=1e-5, atol=1e-5)


def test_the_scalar_constants_lowerings_make_are_one_initializer_per_value_and_dtype(tf_mobilenet_pb):
    model = convert(tf_mobilenet_pb)
    proto = model_to_onnx(model)
    scalars = [onnx.numpy_helper.to_array(t) for t in proto.graph.initializer if not t.dims]
    keys = [(a.dtype.str, a.tobytes()) for a in scalars]
    assert len(keys) == len(set(keys))
    clips = [n for n in proto.graph.node if n.op_type == "Clip"]
    assert len(clips) == 35 and len({tuple(n.input[1:]) for n in clips}) == 1  # every ReLU6 reads one 0 and one 6


def test_constant_parameters_of_fused_ops_are_written_in_the_form_onnx_wants(tf_convnet_pb):
    # The convnet's LayerNorm reads gamma and beta reshaped by TF ([1, 4]): the export writes them as the [4]
    # vectors LayerNormalization wants, not as Reshape nodes of the constants for the clean-up to fold.
    model = convert(tf_convnet_pb)
    nodes, _ = _lowered(model, True)
    assert "Reshape" not in {n.op_type for n in nodes}
    proto = model_to_onnx(model)
    initializers = {t.name: onnx.numpy_helper.to_array(t) for t in proto.graph.initializer}
    (norm,) = [n for n in proto.graph.node if n.op_type == "LayerNormalization"]
    assert [initializers[name].shape for name in norm.input[1:]] == [(4,), (4,)]


def test_a_zero_bias_or_an_identity_writes_nothing(request):
    # The convnet's convolution and dense layer have zero biases (Keras initializes biases to zero), one added to
    # a value held channels first, one to a plain one; the activation CNN's Swish outputs go through IdentityN
    # (Keras' custom gradient), one held channels first, one plain; each graph output is TF's Identity of the last op: none of them is a node of the
    # lowered graph (the node before a graph output's Identity writes the output itself).
    for fixture, gone in (("tf_convnet_pb", {"Add": 2, "Identity": 1}),
                          ("keras_activation_cnn_pb", {"Add": 4, "Identity": 3})):
        model = convert(request.getfixturevalue(fixture))
        (plain, _), (tracked, _) = _lowered(model, False), _lowered(model, True)
        removed = collections.Counter(n.op_type for n in plain) - collections.Counter(n.op_type for n in tracked)
        removed -= collections.Counter(Transpose=removed["Transpose"])
        # and a batch norm of a Conv's output is written as the Mul by its scale (test_onnx_batch_norm_scale.py)
        added = collections.Counter(n.op_type for n in tracked) - collections.Counter(n.op_type for n in plain)
        removed -= collections.Counter(BatchNormalization=added["Mul"])
        assert removed == collections.Counter(gone), fixture
        outputs = {o.name for o in model_to_onnx(model).graph.output}
        assert outputs <= {name for n in tracked for name in n.output}, fixture


@pytest.mark.parametrize("name,fixture", CNNS)
def test_the_channels_first_forms_give_the_clean_up_their_shapes_and_get_no_value_info(name, fixture, request,
                                                                                      monkeypatch):
    model = convert(request.getfixturevalue(fixture))
    held = {name for name, _ in _held_infos(model)}
    written = model_to_onnx(model)
    with monkeypatch.context() as patched:
        patched.setattr(onnx_optimize, "ChannelsFirstType", type("Nothing", (), {}))  # every value info written
        with_all = model_to_onnx(model)
    assert [n.SerializeToString() for n in written.graph.node] == [n.SerializeToString() for n in with_all.graph.node]
    names = [i.name for i in written.graph.value_info]
    left_out = [i.name for i in with_all.graph.value_info if i.name not in names]
    assert left_out and set(left_out) <= held  # only those of channels-first forms, and some were left out
    assert names == [i.name for i in with_all.graph.value_info if i.name not in held]


def _held_infos(model: Any) -> list:
    """The value infos of the channels-first forms the lowering of ``model``'s main graph holds."""
    writer = GraphWriter(DEFAULT_EXPORT_OPSET, fused_exporters_for(model.graph.registry),
                         lowerings=default_lowerings())
    _, _, value_infos, _ = writer.write_nodes(model.graph, leave_out_unread=True)
    return [(name, t) for name, t in value_infos if isinstance(t, ChannelsFirstType)]


@pytest.mark.parametrize("name,fixture", CNNS)
def test_the_global_pools_and_conv_pads_the_clean_up_makes_first_are_those_it_made_last(name, fixture, request, monkeypatch):
    model = convert(request.getfixturevalue(fixture))
    first = onnx_export.model_to_onnx_bytes(model)
    monkeypatch.setattr(onnx_optimize, "early_global_pools", lambda index: False)
    monkeypatch.setattr(onnx_optimize, "early_pads_into_convs", lambda index: False)
    assert first == onnx_export.model_to_onnx_bytes(model)


def test_an_identity_n_of_a_plain_value_written_as_nothing_gives_the_graph_the_clean_up_makes(
        keras_activation_cnn_pb, monkeypatch):
    model = convert(keras_activation_cnn_pb)
    tracked, _ = _lowered(model, True)
    assert not any(n.op_type == "Identity" and "IdentityN" in n.name for n in tracked)
    as_nothing = onnx_export.model_to_onnx_bytes(model)
    monkeypatch.setattr(layout, "_first_alone", lambda node, outputs: False)  # written as an Identity
    tracked, _ = _lowered(model, True)
    assert any(n.op_type == "Identity" and "IdentityN" in n.name for n in tracked)
    assert as_nothing == onnx_export.model_to_onnx_bytes(model)
