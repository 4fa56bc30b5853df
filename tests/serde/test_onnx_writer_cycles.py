"""An export leaves no reference cycle behind: exports run with the cyclic collector paused, and what a cycle
holds (a graph's names, folded arrays and nodes) would wait for a later collection."""

from __future__ import annotations

import gc

import pytest

from scopefusion.convert import convert
from scopefusion.serde.onnx_export import model_to_onnx_bytes


@pytest.mark.parametrize("fixture", ["tf_convnet_pb", "tf_bert_pb", "tf_rnn_pb"])
def test_an_export_leaves_nothing_for_the_collector(fixture, request):
    model = convert(request.getfixturevalue(fixture))
    model_to_onnx_bytes(model)  # the lowering families it needs imported
    enabled = gc.isenabled()
    gc.collect()
    gc.disable()
    try:
        model_to_onnx_bytes(model)
        assert gc.collect() == 0
    finally:
        if enabled:
            gc.enable()
