"""Initializers no written node reads are left out before the clean-up, which would remove them: the graph it
makes is the one it makes from all of them (:meth:`.GraphWriter.write_nodes`, ``leave_out_unread``). A NoOp is
written as nothing without running its lowering on an emitter."""

from __future__ import annotations

import pytest

from scopefusion.convert import convert
from scopefusion.serde.onnx_export import model_to_onnx_bytes
from scopefusion.serde.onnx_fused import fused_exporters_for
from scopefusion.serde.onnx_graph import GraphWriter
from scopefusion.serde.onnx_lowering import default_lowerings
from scopefusion.serde.onnx_lowering.misc import write_nothing
from scopefusion.serde.onnx_optimize import optimize_nodes
from scopefusion.serde.onnx_proto import GraphProto


def _cleaned(model, leave_out_unread: bool) -> tuple[bytes, list[str], set[str]]:
    """The main graph written and cleaned up as the export does it, serialized; the names left out; the names of
    the initializers written before the clean-up."""
    writer = GraphWriter(23, fused_exporters_for(model.graph.registry), lowerings=default_lowerings())
    graph, nodes, value_infos, initializers = writer.write_nodes(model.graph, into=GraphProto(),
                                                                 leave_out_unread=leave_out_unread)
    written = {t.name for t in initializers}
    optimize_nodes(graph, nodes, 23, value_infos, initializers, left_out=writer.left_out)
    return graph.SerializeToString(deterministic=True), writer.left_out, written


@pytest.mark.parametrize("fixture", ["tf_convnet_pb", "tf_mobilenet_pb", "tf_bert_pb", "tf_rnn_pb", "tf1_cond_pb"])
def test_initializers_no_node_reads_are_left_out_and_the_clean_up_makes_the_same_graph(fixture, request):
    model = convert(request.getfixturevalue(fixture))
    everything, none_left_out, all_written = _cleaned(model, leave_out_unread=False)
    fewer, left_out, written = _cleaned(model, leave_out_unread=True)
    assert none_left_out == []
    assert fewer == everything
    assert written.isdisjoint(left_out) and written | set(left_out) == all_written
    kept = {t.name for t in GraphProto.FromString(fewer).initializer}
    assert kept.isdisjoint(left_out)


def test_a_weight_a_lowering_rearranges_and_a_constant_it_reads_as_a_value_are_left_out(tf_convnet_pb):
    model = convert(tf_convnet_pb)
    _, left_out, written = _cleaned(model, leave_out_unread=True)
    # The Conv's filter is written transposed under a name of its own; the Mean's axes are read as a value.
    assert any(name.startswith("small_convnet") and "conv" in name and "ReadVariableOp:0" in name for name in left_out)
    assert any("Mean/reduction_indices" in name for name in left_out)
    assert not any("Mean/reduction_indices" in name for name in written)


@pytest.mark.parametrize("fixture", ["tf_convnet_pb", "tf_mobilenet_pb"])
def test_a_no_op_is_written_as_nothing_as_its_lowering_writes_it(fixture, request):
    model = convert(request.getfixturevalue(fixture))
    assert any(node.op_type == "NoOp" for node in model.graph.nodes)
    lowerings = default_lowerings()
    lowerings.register("NoOp", lambda e: write_nothing(e), replace=True)  # the same lowering, run on an emitter
    assert model_to_onnx_bytes(model) == model_to_onnx_bytes(model, lowerings=lowerings)
