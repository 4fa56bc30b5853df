"""The clean-up of lowered ONNX graphs: transposes pushed through layout-agnostic ops and cancelled, folded
into constants, identities and dead nodes removed; every rewrite computes what the graph computed before
(checked with onnx.reference)."""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper
from onnx.reference import ReferenceEvaluator

from scopefusion.convert import convert
from scopefusion.serde import onnx_optimize
from scopefusion.serde.onnx_fused import fused_exporters_for
from scopefusion.serde.onnx_graph import GraphWriter
from scopefusion.serde.onnx_lowering import default_lowerings
from scopefusion.serde.onnx_optimize import optimize_graph, optimize_nodes
from scopefusion.serde.onnx_proto import GraphProto

NHWC_TO_NCHW, NCHW_TO_NHWC = [0, 3, 1, 2], [0, 2, 3, 1]


def model(nodes, inputs, outputs, initializers=()):
    graph = helper.make_graph(nodes, "g", inputs, outputs, [numpy_helper.from_array(v, k) for k, v in initializers])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 23)])


def f(name, shape):
    return helper.make_tensor_value_info(name, TensorProto.FLOAT, shape)


def same_results(proto: onnx.ModelProto, feeds) -> tuple[onnx.ModelProto, list]:
    before = ReferenceEvaluator(proto).run(None, feeds)
    optimized = onnx.ModelProto()
    optimized.CopyFrom(proto)
    optimize_graph(optimized.graph)
    onnx.checker.check_model(optimized, full_check=True)
    after = ReferenceEvaluator(optimized).run(None, feeds)
    for a, b in zip(before, after):
        np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-6)
    return optimized, [n.op_type for n in optimized.graph.node]


def test_a_conv_chain_keeps_one_transpose_at_the_input_and_one_at_the_output():
    w = np.random.default_rng(0).standard_normal((4, 3, 3, 3)).astype(np.float32)
    bias = np.arange(4, dtype=np.float32)
    nodes = [
        helper.make_node("Transpose", ["x"], ["a"], perm=NHWC_TO_NCHW),
        helper.make_node("Conv", ["a", "w"], ["b"], pads=[1, 1, 1, 1]),
        helper.make_node("Transpose", ["b"], ["c"], perm=NCHW_TO_NHWC),
        helper.make_node("Add", ["c", "bias"], ["d"]),
        helper.make_node("Relu", ["d"], ["e"]),
        helper.make_node("Identity", ["e"], ["e2"]),
        helper.make_node("Pad", ["e2", "pads"], ["p"]),
        helper.make_node("Transpose", ["p"], ["q"], perm=NHWC_TO_NCHW),
        helper.make_node("Conv", ["q", "w2"], ["r"]),
        helper.make_node("Transpose", ["r"], ["s"], perm=NCHW_TO_NHWC),
        helper.make_node("ReduceMean", ["s", "axes"], ["y"], keepdims=0),
    ]
    proto = model(nodes, [f("x", [2, 5, 5, 3])], [f("y", [2, 4])],  # the pad folds into the Conv, the mean pools
                  [("w", w), ("bias", bias), ("pads", np.asarray([0, 1, 0, 0, 0, 1, 2, 0], np.int64)),
                   ("w2", np.ones((4, 4, 1, 1), np.float32)),
                   ("axes", np.asarray([1, 2], np.int64))])
    feeds = {"x": np.random.default_rng(1).standard_normal((2, 5, 5, 3)).astype(np.float32)}
    optimized, ops = same_results(proto, feeds)
    assert ops.count("Transpose") == 1 and "Identity" not in ops
    assert ops == ["Transpose", "Conv", "Add", "Relu", "Conv", "GlobalAveragePool", "Squeeze"]


def test_a_reduction_without_keepdims_gets_its_own_permutation():
    nodes = [helper.make_node("Transpose", ["x"], ["a"], perm=[2, 0, 1]),
             helper.make_node("Exp", ["a"], ["b"]),
             helper.make_node("ReduceSum", ["b", "axes"], ["y"], keepdims=0)]
    proto = model(nodes, [f("x", [2, 3, 4])], [f("y", [4, 3])], [("axes", np.asarray([1], np.int64))])
    _, ops = same_results(proto, {"x": np.random.default_rng(2).standard_normal((2, 3, 4)).astype(np.float32)})
    assert ops == ["Exp", "ReduceSum", "Transpose"]


def test_a_transpose_with_another_reader_is_not_duplicated():
    nodes = [helper.make_node("Transpose", ["x"], ["a"], perm=[1, 0]),
             helper.make_node("Relu", ["a"], ["y"]),
             helper.make_node("MatMul", ["a", "x"], ["z"])]
    proto = model(nodes, [f("x", [3, 3])], [f("y", [3, 3]), f("z", [3, 3])])
    _, ops = same_results(proto, {"x": np.random.default_rng(3).standard_normal((3, 3)).astype(np.float32)})
    assert ops.count("Transpose") == 1


@pytest.mark.parametrize("shape, kept", [([2, 1, 1, 5], "Reshape"), ([2, 3, 1, 5], "Transpose")])
def test_a_transpose_moving_only_unit_dims_becomes_a_reshape(shape, kept):
    nodes = [helper.make_node("Transpose", ["x"], ["y"], perm=NHWC_TO_NCHW)]
    out = [shape[i] for i in NHWC_TO_NCHW]
    proto = model(nodes, [f("x", shape)], [f("y", out)])
    proto.graph.node.insert(0, helper.make_node("Relu", ["x"], ["x1"]))
    proto.graph.node[1].input[0] = "x1"
    _, ops = same_results(proto, {"x": np.random.default_rng(4).standard_normal(shape).astype(np.float32)})
    assert kept in ops


def test_transposes_of_initializers_fold_and_dead_nodes_and_initializers_go():
    c = np.arange(6, dtype=np.float32).reshape(2, 3)
    nodes = [helper.make_node("Transpose", ["c"], ["ct"], perm=[1, 0]),
             helper.make_node("Add", ["x", "ct"], ["y"]),
             helper.make_node("Neg", ["x"], ["unused"])]
    proto = model(nodes, [f("x", [3, 2])], [f("y", [3, 2])], [("c", c), ("never", c)])
    optimized, ops = same_results(proto, {"x": np.ones((3, 2), np.float32)})
    assert ops == ["Add"] and [t.name for t in optimized.graph.initializer] == ["ct"]


def test_a_reshape_target_computed_from_shape_becomes_a_constant():
    nodes = [
        helper.make_node("ReduceMean", ["x", "axes"], ["m"], keepdims=0),
        helper.make_node("Shape", ["m"], ["s"]),
        helper.make_node("Slice", ["s", "zero", "one"], ["batch"]),
        helper.make_node("Concat", ["batch", "ones", "channels"], ["target"], axis=0),
        helper.make_node("Reshape", ["m", "target"], ["y"]),
    ]
    m = helper.make_tensor_value_info("m", TensorProto.FLOAT, ["n", 5])
    proto = model(nodes, [f("x", ["n", 3, 5])], [f("y", ["n", 1, 1, 5])],
                  [("axes", np.asarray([1], np.int64)), ("zero", np.asarray([0], np.int64)),
                   ("one", np.asarray([1], np.int64)), ("ones", np.asarray([1, 1], np.int64)),
                   ("channels", np.asarray([5], np.int64))])
    proto.graph.value_info.append(m)
    optimized, ops = same_results(proto, {"x": np.random.default_rng(5).standard_normal((4, 3, 5)).astype(np.float32)})
    assert ops == ["ReduceMean", "Reshape"]
    shape = {t.name: numpy_helper.to_array(t) for t in optimized.graph.initializer}[optimized.graph.node[1].input[1]]
    assert shape.tolist() == [0, 1, 1, 5]


def test_spatial_means_become_global_pools_and_zero_pads_fold_into_convs():
    w = np.random.default_rng(6).standard_normal((2, 3, 3, 3)).astype(np.float32)
    nodes = [helper.make_node("Pad", ["x", "pads"], ["p"]),
             helper.make_node("Conv", ["p", "w"], ["c"], pads=[0, 1, 0, 1]),
             helper.make_node("ReduceMean", ["c", "axes"], ["y"], keepdims=0),
             helper.make_node("ReduceMax", ["c", "axes"], ["z"], keepdims=1)]
    proto = model(nodes, [f("x", [1, 3, 6, 6])], [f("y", [1, 2]), f("z", [1, 2, 1, 1])],
                  [("pads", np.asarray([0, 0, 2, 1, 0, 0, 1, 0], np.int64)), ("w", w),
                   ("axes", np.asarray([2, 3], np.int64))])
    proto.graph.value_info.append(f("c", [1, 2, 7, 7]))
    optimized, ops = same_results(proto, {"x": np.random.default_rng(7).standard_normal((1, 3, 6, 6)).astype(np.float32)})
    assert sorted(ops) == ["Conv", "GlobalAveragePool", "GlobalMaxPool", "Squeeze"]
    conv = next(n for n in optimized.graph.node if n.op_type == "Conv")
    assert list(conv.attribute[0].ints) == [2, 2, 1, 1]


def test_a_pad_of_the_nhwc_input_moves_below_its_transpose_into_the_first_conv():
    w = np.random.default_rng(8).standard_normal((2, 3, 3, 3)).astype(np.float32)
    nodes = [helper.make_node("Pad", ["x", "pads"], ["p"]),
             helper.make_node("Transpose", ["p"], ["t"], perm=NHWC_TO_NCHW),
             helper.make_node("Conv", ["t", "w"], ["y"])]
    proto = model(nodes, [f("x", [1, 5, 6, 3])], [f("y", [1, 2, 6, 4])],
                  [("pads", np.asarray([0, 1, 0, 0, 0, 2, 0, 0], np.int64)), ("w", w)])
    optimized, ops = same_results(proto, {"x": np.random.default_rng(9).standard_normal((1, 5, 6, 3)).astype(np.float32)})
    assert ops == ["Transpose", "Conv"]


def test_a_pad_inside_the_graph_moves_below_its_transpose_into_the_next_conv():
    w = np.random.default_rng(10).standard_normal((2, 3, 3, 3)).astype(np.float32)
    nodes = [helper.make_node("Relu", ["x"], ["r"]),
             helper.make_node("Pad", ["r", "pads"], ["p"]),
             helper.make_node("Transpose", ["p"], ["t"], perm=NHWC_TO_NCHW),
             helper.make_node("Conv", ["t", "w"], ["y"], strides=[2, 2])]
    proto = model(nodes, [f("x", [1, 5, 6, 3])], [f("y", [1, 2, 2, 3])],
                  [("pads", np.asarray([0, 0, 1, 0, 0, 1, 0, 0], np.int64)), ("w", w)])
    optimized, ops = same_results(proto, {"x": np.random.default_rng(11).standard_normal((1, 5, 6, 3)).astype(np.float32)})
    assert ops == ["Relu", "Transpose", "Conv"]
    conv = optimized.graph.node[2]
    assert {a.name: list(a.ints) for a in conv.attribute}["pads"] == [0, 1, 1, 0]


def test_adding_zero_and_multiplying_by_one_go_unless_they_broadcast():
    nodes = [helper.make_node("Add", ["x", "zeros"], ["a"]),
             helper.make_node("Mul", ["ones", "a"], ["b"]),
             helper.make_node("Div", ["b", "one"], ["c"]),
             helper.make_node("Sub", ["c", "wide_zeros"], ["y"]),
             helper.make_node("Sub", ["zeros", "x"], ["z"])]
    proto = model(nodes, [f("x", [2, 3])], [f("y", [4, 2, 3]), f("z", [2, 3])],
                  [("zeros", np.zeros(3, np.float32)), ("ones", np.ones((1, 1), np.float32)),
                   ("one", np.asarray(1, np.float32)), ("wide_zeros", np.zeros((4, 1, 3), np.float32))])
    optimized, ops = same_results(proto, {"x": np.random.default_rng(12).standard_normal((2, 3)).astype(np.float32)})
    assert ops == ["Sub", "Sub"]  # x - 0 broadcast to [4, 2, 3] stays, and so does 0 - x
    assert optimized.graph.node[0].input[0] == "x"


def test_a_global_pool_squeezed_and_reshaped_back_feeds_the_conv_directly():
    w = np.random.default_rng(13).standard_normal((2, 4, 1, 1)).astype(np.float32)
    nodes = [helper.make_node("ReduceMean", ["x", "axes"], ["m"], keepdims=0),
             helper.make_node("Reshape", ["m", "shape"], ["r"]),
             helper.make_node("Conv", ["r", "w"], ["y"])]
    proto = model(nodes, [f("x", ["n", 4, 5, 5])], [f("y", ["n", 2, 1, 1])],
                  [("axes", np.asarray([2, 3], np.int64)), ("shape", np.asarray([0, 4, 1, 1], np.int64)), ("w", w)])
    optimized, ops = same_results(proto, {"x": np.random.default_rng(14).standard_normal((3, 4, 5, 5)).astype(np.float32)})
    assert ops == ["GlobalAveragePool", "Conv"]


def test_repeated_computations_merge_and_a_transpose_of_a_unit_dim_becomes_a_reshape():
    nodes = [helper.make_node("Greater", ["x", "half"], ["m"]),
             helper.make_node("NonZero", ["m"], ["i1"]),
             helper.make_node("Transpose", ["i1"], ["t1"], perm=[1, 0]),
             helper.make_node("Squeeze", ["t1", "one"], ["s1"]),
             helper.make_node("Gather", ["x", "s1"], ["y"]),
             helper.make_node("NonZero", ["m"], ["i2"]),
             helper.make_node("Transpose", ["i2"], ["t2"], perm=[1, 0]),
             helper.make_node("Squeeze", ["t2", "one"], ["s2"]),
             helper.make_node("Gather", ["w", "s2"], ["z"])]
    proto = model(nodes, [f("x", ["n"]), f("w", ["n"])], [f("y", ["k"]), f("z", ["k"])],
                  [("half", np.asarray(0.5, np.float32)), ("one", np.asarray([1], np.int64))])
    values = np.asarray([0.1, 0.9, 0.7, 0.2], np.float32)
    for x in (values, np.zeros(4, np.float32)):  # some picked, none picked
        optimized, ops = same_results(proto, {"x": x, "w": x * 2})
        assert ops == ["Greater", "NonZero", "Reshape", "Squeeze", "Gather", "Gather"]


def _conv_batch_norm(shift: np.ndarray, mean: np.ndarray) -> onnx.ModelProto:
    rng = np.random.default_rng(15)
    w = rng.standard_normal((3, 2, 3, 3)).astype(np.float32)
    scale = rng.uniform(0.5, 2.0, 3).astype(np.float32)
    variance = rng.uniform(0.5, 2.0, 3).astype(np.float32)
    nodes = [helper.make_node("Conv", ["x", "w", "b"], ["c"], pads=[1, 1, 1, 1]),
             helper.make_node("BatchNormalization", ["c", "scale", "shift", "mean", "variance"], ["n"], epsilon=1e-3),
             helper.make_node("Relu", ["n"], ["y"])]
    return model(nodes, [f("x", [1, 2, 5, 5])], [f("y", [1, 3, 5, 5])],
                 [("w", w), ("b", np.asarray([0.5, -1, 2], np.float32)), ("scale", scale), ("shift", shift),
                  ("mean", mean), ("variance", variance)])


def test_a_batch_norm_of_a_conv_without_shift_becomes_a_mul_by_its_scale():
    proto = _conv_batch_norm(np.zeros(3, np.float32), np.zeros(3, np.float32))
    feeds = {"x": np.random.default_rng(16).standard_normal((1, 2, 5, 5)).astype(np.float32)}
    optimized, ops = same_results(proto, feeds)
    assert ops == ["Conv", "Mul", "Relu"]
    factor = {t.name: numpy_helper.to_array(t) for t in optimized.graph.initializer}[optimized.graph.node[1].input[1]]
    assert factor.shape == (3, 1, 1) and factor.dtype == np.float32


def test_a_batch_norm_with_a_shift_stays():
    proto = _conv_batch_norm(np.asarray([0, 0.25, 0], np.float32), np.zeros(3, np.float32))
    feeds = {"x": np.random.default_rng(17).standard_normal((1, 2, 5, 5)).astype(np.float32)}
    assert same_results(proto, feeds)[1] == ["Conv", "BatchNormalization", "Relu"]


def test_a_zero_pad_of_a_relu_folds_into_the_max_pool_when_every_window_keeps_an_input_value():
    def pooled(producer: str, pads: list[int], kernel: int) -> list[str]:
        nodes = [helper.make_node(producer, ["x"], ["r"]),
                 helper.make_node("Pad", ["r", "pads"], ["p"]),
                 helper.make_node("MaxPool", ["p"], ["y"], kernel_shape=[kernel, kernel], strides=[2, 2])]
        size = (6 + pads[2] + pads[6] - kernel) // 2 + 1
        proto = model(nodes, [f("x", [1, 2, 6, 6])], [f("y", [1, 2, size, (6 + pads[3] + pads[7] - kernel) // 2 + 1])],
                      [("pads", np.asarray(pads, np.int64))])
        feeds = {"x": np.random.default_rng(18).standard_normal((1, 2, 6, 6)).astype(np.float32)}
        optimized, ops = same_results(proto, feeds)
        return ops

    assert pooled("Relu", [0, 0, 1, 1, 0, 0, 1, 1], 3) == ["Relu", "MaxPool"]
    assert pooled("Relu", [0, 0, 0, 2, 0, 0, 2, 0], 3) == ["Relu", "MaxPool"]
    assert pooled("Relu", [0, 0, 0, 3, 0, 0, 0, 0], 3) == ["Relu", "Pad", "MaxPool"]  # a window of padding only
    assert pooled("Neg", [0, 0, 1, 1, 0, 0, 1, 1], 3) == ["Neg", "Pad", "MaxPool"]  # a padded 0 could win


@pytest.mark.parametrize("scale_op, factor", [("Mul", 1 / 6), ("Div", 6.0)])
def test_tensorflows_hard_sigmoid_becomes_one_hard_sigmoid(scale_op, factor):
    nodes = [helper.make_node("Add", ["three", "x"], ["a"]),
             helper.make_node("Clip", ["a", "zero", "six"], ["c"]),
             helper.make_node(scale_op, ["c", "factor"], ["g"]),
             helper.make_node("Mul", ["x", "g"], ["y"]),
             helper.make_node("Clip", ["x", "zero", "six"], ["z"])]  # a Clip alone stays
    proto = model(nodes, [f("x", [2, 3, 4])], [f("y", [2, 3, 4]), f("z", [2, 3, 4])],
                  [("three", np.asarray(3, np.float32)), ("zero", np.asarray(0, np.float32)),
                   ("six", np.asarray(6, np.float32)), ("factor", np.asarray(factor, np.float32))])
    feeds = {"x": np.random.default_rng(19).uniform(-5, 5, (2, 3, 4)).astype(np.float32)}
    optimized, ops = same_results(proto, feeds)
    assert sorted(ops) == ["Clip", "HardSigmoid", "Mul"]


def test_a_hard_sigmoid_whose_steps_have_other_readers_stays():
    nodes = [helper.make_node("Add", ["x", "three"], ["a"]),
             helper.make_node("Clip", ["a", "zero", "six"], ["c"]),
             helper.make_node("Mul", ["c", "factor"], ["y"])]
    proto = model(nodes, [f("x", [2, 3])], [f("y", [2, 3]), f("c", [2, 3])],
                  [("three", np.asarray(3, np.float32)), ("zero", np.asarray(0, np.float32)),
                   ("six", np.asarray(6, np.float32)), ("factor", np.asarray(1 / 6, np.float32))])
    feeds = {"x": np.random.default_rng(20).uniform(-5, 5, (2, 3)).astype(np.float32)}
    assert same_results(proto, feeds)[1] == ["Add", "Clip", "Mul"]


def test_a_float64_hard_sigmoid_stays_for_onnxruntime_runs_hard_sigmoid_on_float_only():
    nodes = [helper.make_node("Add", ["x", "three"], ["a"]),
             helper.make_node("Clip", ["a", "zero", "six"], ["c"]),
             helper.make_node("Div", ["c", "factor"], ["y"])]
    double = [helper.make_tensor_value_info(n, TensorProto.DOUBLE, [2, 3]) for n in ("x", "y")]
    proto = model(nodes, double[:1], double[1:],
                  [("three", np.asarray(3, np.float64)), ("zero", np.asarray(0, np.float64)),
                   ("six", np.asarray(6, np.float64)), ("factor", np.asarray(6, np.float64))])
    feeds = {"x": np.random.default_rng(21).uniform(-5, 5, (2, 3))}
    optimized, ops = same_results(proto, feeds)
    assert ops == ["Add", "Clip", "Div"]
    ort.InferenceSession(optimized.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, feeds)


def _written_and_cleaned(model, leave_out_unread: bool) -> tuple[bytes, list[str]]:
    """The main graph written and cleaned up as the export does it, serialized; the constants left out."""
    writer = GraphWriter(23, fused_exporters_for(model.graph.registry), lowerings=default_lowerings())
    graph, nodes, value_infos, initializers = writer.write_nodes(model.graph, into=GraphProto(),
                                                                 leave_out_unread=leave_out_unread)
    optimize_nodes(graph, nodes, 23, value_infos, initializers, left_out=writer.left_out)
    return graph.SerializeToString(deterministic=True), writer.left_out


@pytest.mark.parametrize("fixture", ["tf_convnet_pb", "tf_mobilenet_pb"])
def test_weights_left_out_before_the_clean_up_give_the_graph_it_makes_from_all_of_them(fixture, request):
    model = convert(request.getfixturevalue(fixture))
    everything, none_left_out = _written_and_cleaned(model, leave_out_unread=False)
    fewer, left_out = _written_and_cleaned(model, leave_out_unread=True)
    assert none_left_out == [] and left_out  # the weights the frozen graph reads through Identity nodes
    assert fewer == everything
    cleaned = GraphProto.FromString(fewer)
    assert not {t.name for t in cleaned.initializer} & set(left_out)


def test_the_round_the_clean_up_skips_after_a_sweep_of_unread_initializers_would_change_nothing(
        tf_convnet_pb, monkeypatch):
    model = convert(tf_convnet_pb)
    with_skips = _written_and_cleaned(model, leave_out_unread=True)[0]
    skipped = []
    real = onnx_optimize._remove_dead

    def every_round_run(index):  # a sweep that says it removed more than unread initializers
        found = real(index)
        skipped.append(index.only_unread_removed)
        index.only_unread_removed = False
        return found

    monkeypatch.setattr(onnx_optimize, "_remove_dead", every_round_run)
    every_round = _written_and_cleaned(model, leave_out_unread=True)[0]
    assert True in skipped  # the model has such a round (its batch norm's parameters left unread)
    assert with_skips == every_round


@pytest.mark.parametrize("fixture", ["tf_mobilenet_pb", "tf_bert_pb"])
def test_the_sweeps_of_dead_nodes_the_clean_up_skips_after_identities_alone_would_find_nothing(
        fixture, request, monkeypatch):
    model = convert(request.getfixturevalue(fixture))
    # Rewritten at the end, MobileNetV2's pads and mean make rounds after the identities go, which have such sweeps.
    monkeypatch.setattr(onnx_optimize, "early_pads_into_convs", lambda index: False)
    monkeypatch.setattr(onnx_optimize, "early_global_pools", lambda index: False)
    real = onnx_optimize._remove_dead
    found: list[bool] = []
    monkeypatch.setattr(onnx_optimize, "_remove_dead", lambda index: found.append(real(index)) or found[-1])
    with_skips, swept = _written_and_cleaned(model, leave_out_unread=True)[0], list(found)
    found.clear()
    monkeypatch.setattr(onnx_optimize, "_dead_free", lambda dead_free, state: False)
    every_sweep = _written_and_cleaned(model, leave_out_unread=True)[0]
    assert len(found) > len(swept)  # the model has such a sweep (after identities the clean-up removes)
    assert found.count(True) == swept.count(True)  # each one skipped finds nothing
    assert with_skips == every_sweep


@pytest.mark.parametrize("fixture", ["tf_convnet_pb", "tf_bert_pb"])
def test_the_input_and_output_shapes_the_writer_hands_the_clean_up_are_those_its_messages_say(fixture, request):
    model = convert(request.getfixturevalue(fixture))
    writer = GraphWriter(23, fused_exporters_for(model.graph.registry), lowerings=default_lowerings())
    graph, nodes, value_infos, initializers = writer.write_nodes(model.graph, into=GraphProto(), leave_out_unread=True)
    infos = list(graph.input) + list(graph.output)
    assert {info.name for info in infos} <= set(writer.io_shapes)
    assert any(None in (writer.io_shapes[info.name] or ()) for info in infos)  # a dynamic batch dim among them
    read_back = onnx_optimize.GraphIndex(graph, list(nodes), value_infos, initializers, writer.left_out)
    handed = onnx_optimize.GraphIndex(graph, list(nodes), value_infos, initializers, writer.left_out, writer.io_shapes)
    assert handed.shapes == read_back.shapes


_ZOO = ["tf_convnet_pb", "tf_mobilenet_pb", "tf_bert_pb", "tf_rnn_pb"]


@pytest.mark.parametrize("fixture", _ZOO)
def test_sweeps_skipped_for_want_of_their_op_types_would_find_nothing(fixture, request, monkeypatch):
    model = convert(request.getfixturevalue(fixture))
    with_skips = _written_and_cleaned(model, leave_out_unread=True)[0]
    monkeypatch.setattr(onnx_optimize, "_skips_absent_types", lambda: False)
    every_sweep = _written_and_cleaned(model, leave_out_unread=True)[0]
    assert with_skips == every_sweep


def _indexed(index) -> tuple[dict, dict]:
    """The producers and readers of ``index`` by identity, readers as sets (what the passes ask of them)."""
    return ({name: id(node) for name, node in index.producer.items()},
            {name: {id(n) for n in found} for name, found in index.readers.items() if found})


# The fixtures whose lowered graph the sweeps still change (the dynamic_rnn LSTM's is already clean).
_CHANGED_BY_SWEEPS = ["tf_convnet_pb", "tf_mobilenet_pb", "tf_bert_pb"]


@pytest.mark.parametrize("fixture", _CHANGED_BY_SWEEPS)
def test_the_index_the_sweeps_keep_is_the_one_a_rebuild_makes(fixture, request, monkeypatch):
    model = convert(request.getfixturevalue(fixture))
    kept_up = _written_and_cleaned(model, leave_out_unread=True)[0]
    checked = []
    for name in ("_remove_identities", "_merge_duplicates", "constant_reshapes", "_remove_neutral_ops",
                 "_fold_initializer_ops", "_remove_dead", "fuse_for_runtime", "push_transposes"):
        def checking(index, *args, real=getattr(onnx_optimize, name), name=name, **kwargs):
            found = real(index, *args, **kwargs)
            kept = _indexed(index)
            index.rebuild()
            assert kept == _indexed(index), name
            checked.append(found)
            return found
        monkeypatch.setattr(onnx_optimize, name, checking)
    rebuilt = _written_and_cleaned(model, leave_out_unread=True)[0]
    assert True in checked  # some sweep changed the graph
    assert kept_up == rebuilt


@pytest.mark.parametrize("fixture", ["tf_convnet_pb", "tf_mobilenet_pb"])
def test_global_pools_made_before_the_other_passes_give_what_the_final_sweep_makes(fixture, request, monkeypatch):
    model = convert(request.getfixturevalue(fixture))
    real = onnx_optimize.early_global_pools
    found: list[bool] = []
    monkeypatch.setattr(onnx_optimize, "early_global_pools", lambda index: found.append(real(index)) or found[-1])
    early = _written_and_cleaned(model, leave_out_unread=True)[0]
    assert found == [True]  # the model's spatial mean became a global pool before the other passes
    monkeypatch.setattr(onnx_optimize, "early_global_pools", lambda index: False)
    at_the_end = _written_and_cleaned(model, leave_out_unread=True)[0]
    assert early == at_the_end
    assert "GlobalAveragePool" in {n.op_type for n in GraphProto.FromString(early).node}


def test_zero_pads_folded_into_their_convs_before_the_other_passes_give_what_the_final_sweep_makes(
        tf_mobilenet_pb, monkeypatch):
    model = convert(tf_mobilenet_pb)
    real = onnx_optimize.early_pads_into_convs
    found: list[bool] = []
    monkeypatch.setattr(onnx_optimize, "early_pads_into_convs", lambda index: found.append(real(index)) or found[-1])
    early = _written_and_cleaned(model, leave_out_unread=True)[0]
    assert found == [True]  # MobileNetV2's zero paddings before its strided depthwise convolutions
    monkeypatch.setattr(onnx_optimize, "early_pads_into_convs", lambda index: False)
    at_the_end = _written_and_cleaned(model, leave_out_unread=True)[0]
    assert early == at_the_end
    assert "Pad" not in {n.op_type for n in GraphProto.FromString(early).node}
