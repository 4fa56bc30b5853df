"""Folding takes the values shape inference computed instead of running the kernels again: the same export."""

from __future__ import annotations

import numpy as np
import pytest

from scopefusion.convert import convert
from scopefusion.serde import onnx_fold
from scopefusion.serde.onnx_export import model_to_onnx_bytes


@pytest.mark.parametrize("fixture", ["tf_convnet_pb", "tf_bert_pb"])  # both fold reshapes of weights
def test_folding_with_the_values_inference_knows_gives_what_running_the_kernels_gives(fixture, request,
                                                                                      monkeypatch):
    model = convert(request.getfixturevalue(fixture))
    graph = model.graph
    run = onnx_fold._run
    ran: list[str] = []
    monkeypatch.setattr(onnx_fold, "_run", lambda node, arrays: ran.append(node.op_type) or run(node, arrays))
    with_known = onnx_fold.fold_constants(graph, model.inference.known_values)
    taken = len(ran)
    computed = onnx_fold.fold_constants(graph)
    assert len(ran) - taken > taken  # some kernels were not run again
    assert list(with_known) == list(computed)
    for value, array in computed.items():
        found = with_known[value]
        assert found.dtype == array.dtype and found.shape == array.shape and np.array_equal(found, array)
    exported = model_to_onnx_bytes(model)
    monkeypatch.setattr(onnx_fold, "_known", lambda values, known: None)
    assert exported == model_to_onnx_bytes(model)


def test_a_known_value_of_another_type_than_its_value_is_not_taken(tf_convnet_pb):
    model = convert(tf_convnet_pb)
    graph = model.graph
    computed = onnx_fold.fold_constants(graph)
    # Every known value replaced by one of another dtype: folding runs the kernels and gives the same values.
    known = {key: np.asarray(array).astype(np.float16) for key, array in model.inference.known_values.items()}
    with_wrong = onnx_fold.fold_constants(graph, known)
    assert list(with_wrong) == list(computed)
    assert all(with_wrong[v].dtype == a.dtype and np.array_equal(with_wrong[v], a) for v, a in computed.items())


@pytest.mark.parametrize("fixture", ["tf_convnet_pb", "tf_bert_pb"])
def test_the_nodes_folding_lists_are_those_whose_every_output_it_folds(fixture, request):
    model = convert(request.getfixturevalue(fixture))
    graph = model.graph
    nodes: list = []
    folded = onnx_fold.fold_constants(graph, model.inference.known_values, nodes)
    assert nodes  # the weights read through identities and reshapes
    assert nodes == [n for n in graph.nodes if n.outputs and all(v in folded for v in n.outputs)]
    # Every node skipped for a computed first input folds nothing either (the check only spares the constants' reads).
    assert not any(v in folded for n in graph.nodes if n.inputs and n.inputs[0] is not None
                   and not onnx_fold._may_be_constant(n.inputs[0], folded) for v in n.outputs)
