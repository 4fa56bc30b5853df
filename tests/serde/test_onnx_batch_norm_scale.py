"""A batch norm the clean-up would rewrite as ``Mul`` by its scale is written so at once: the same graph."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import numpy_helper

from scopefusion.convert import convert
from scopefusion.serde import onnx_fused_ops
from scopefusion.serde.onnx_export import model_to_onnx_bytes


def _nodes_with_constants(data: bytes) -> list[tuple[str, list[np.ndarray | str]]]:
    """Each node's op type and inputs, an initializer input as its value and another as its producer's op type
    (the names the two exports give differ)."""
    graph = onnx.load_from_string(data).graph
    constants = {t.name: numpy_helper.to_array(t) for t in graph.initializer}
    producer = {name: node.op_type for node in graph.node for name in node.output}
    return [(node.op_type, [constants[n] if n in constants else producer.get(n, "input") for n in node.input])
            for node in graph.node]


def _same(a: list, b: list) -> bool:
    if len(a) != len(b):
        return False
    for (op_a, in_a), (op_b, in_b) in zip(a, b):
        if op_a != op_b or len(in_a) != len(in_b):
            return False
        for x, y in zip(in_a, in_b):
            if isinstance(x, np.ndarray) != isinstance(y, np.ndarray):
                return False
            if isinstance(x, np.ndarray) and (x.dtype != y.dtype or x.shape != y.shape or x.tobytes() != y.tobytes()):
                return False
            if not isinstance(x, np.ndarray) and x != y:
                return False
    return True


@pytest.mark.parametrize("fixture", ["tf_convnet_pb", "tf_mobilenet_pb"])
def test_a_batch_norm_written_as_its_scale_gives_what_the_clean_up_makes_of_it(fixture, request, monkeypatch):
    model = convert(request.getfixturevalue(fixture))
    taken = []
    direct = onnx_fused_ops.batch_norm_as_scale

    def counting(*args):
        found = direct(*args)
        taken.append(found)
        return found

    monkeypatch.setattr(onnx_fused_ops, "batch_norm_as_scale", counting)
    written = model_to_onnx_bytes(model)
    assert True in taken  # written as Mul at once
    monkeypatch.setattr(onnx_fused_ops, "batch_norm_as_scale", lambda *args: False)
    rewritten = model_to_onnx_bytes(model)  # BatchNormalization, rewritten by the clean-up
    assert written != rewritten  # the names differ
    assert _same(_nodes_with_constants(written), _nodes_with_constants(rewritten))
    assert "BatchNormalization" not in [n.op_type for n in onnx.load_from_string(written).graph.node]
