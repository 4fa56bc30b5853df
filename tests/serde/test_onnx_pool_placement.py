"""The Squeezes the early global-pool rewrite adds go where sorting the nodes would put them, without the sort."""

from __future__ import annotations

import onnx
import pytest
from onnx import TensorProto, helper

from scopefusion.convert import convert
from scopefusion.serde import onnx_fuse_ops
from scopefusion.serde.onnx_export import model_to_onnx_bytes
from scopefusion.serde.onnx_optimize import optimize_graph
from scopefusion.serde.onnx_order import toposort


def _sorting(monkeypatch) -> list[int]:
    """Makes the rewrite sort the nodes instead of placing its own; returns the counts it was called with."""
    calls: list[int] = []

    def sort(index, count):
        calls.append(count)
        toposort(index)

    monkeypatch.setattr(onnx_fuse_ops, "_put_before_readers", sort)
    return calls


@pytest.mark.parametrize("fixture", ["tf_convnet_pb", "tf_mobilenet_pb"])
def test_placed_squeezes_export_as_sorted_ones(fixture, request, monkeypatch):
    model = convert(request.getfixturevalue(fixture))
    placed = model_to_onnx_bytes(model)
    calls = _sorting(monkeypatch)
    assert placed == model_to_onnx_bytes(model)
    assert calls  # the model has a spatial mean without keepdims


def _means_graph(readers: list[tuple[str, list[str]]]) -> onnx.GraphProto:
    """Two spatial means without keepdims of ``x`` [1, 4, 5, 5], then an unrelated Relu, then ``readers``
    (op type, inputs) of their outputs ``m0`` / ``m1``; every reader's output is a graph output, and ``m1``."""
    axes = helper.make_tensor("axes", TensorProto.INT64, [2], [2, 3])
    nodes = [helper.make_node("ReduceMean", ["x", "axes"], [f"m{k}"], name=f"mean{k}", keepdims=0) for k in (0, 1)]
    nodes.append(helper.make_node("Relu", ["x"], ["r"], name="relu"))
    outputs = [helper.make_tensor_value_info(name, TensorProto.FLOAT, None) for name in ("r", "m1")]
    for k, (op, inputs) in enumerate(readers):
        nodes.append(helper.make_node(op, inputs, [f"y{k}"], name=f"reader{k}"))
        outputs.append(helper.make_tensor_value_info(f"y{k}", TensorProto.FLOAT, None))
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4, 5, 5])
    return helper.make_graph(nodes, "g", [x], outputs, initializer=[axes])


@pytest.mark.parametrize("readers", [
    [("Neg", ["m1"]), ("Neg", ["m0"])],  # each its own first reader, in the other order
    [("Add", ["m1", "m0"])],  # one first reader of both: sorted, in its inputs' order
    [("Neg", ["m0"])],  # m1 read by no node (a graph output): last
])
def test_each_squeeze_goes_where_sorting_puts_it(readers, monkeypatch):
    placed = _means_graph(readers)
    optimize_graph(placed)
    _sorting(monkeypatch)
    sorted_ = _means_graph(readers)
    optimize_graph(sorted_)
    assert [n.op_type for n in placed.node].count("Squeeze") == 2
    assert placed.SerializeToString() == sorted_.SerializeToString()
