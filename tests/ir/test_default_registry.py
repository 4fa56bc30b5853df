"""default_op_registry: definitions are made once per process, yet every registry is its own."""

from __future__ import annotations

from scopefusion.dialects import default_op_registry
from scopefusion.ir import attrs as A
from scopefusion.parser import SourceGraph, SourceNode


def _onnx_source(*nodes: SourceNode) -> SourceGraph:
    return SourceGraph([SourceNode("x", "Input"), *nodes], framework="onnx", opset_imports={"": 17})


def test_changing_one_registry_changes_no_other():
    first, second = default_op_registry(), default_op_registry()
    relu = first.get("tf.Relu")
    assert relu is not second.get("tf.Relu")
    relu.set_reference(lambda inputs, attrs: inputs)
    relu.attr("extra_flag", A.BOOL, default=False)
    relu.input("extra_input")
    fresh = default_op_registry().get("tf.Relu")
    for other in (second.get("tf.Relu"), fresh):
        assert other.reference is not relu.reference
        assert "extra_flag" not in other.attrs
        assert [s.name for s in other.inputs] == [s.name for s in relu.inputs][:-1]
    first.define("MyOp", "fused")
    assert "fused.MyOp" not in second and "fused.MyOp" not in default_op_registry()


def test_onnxruntime_definitions_only_for_models_that_may_use_them():
    plain = default_op_registry(_onnx_source(SourceNode("y", "Relu", inputs=[("x", 0)])))
    assert "onnx.Relu" in plain
    assert "onnx:com.microsoft" not in plain.dialects()
    assert "onnx.SimplifiedLayerNormalization" not in plain
    contrib = _onnx_source(SourceNode("y", "BiasGelu", inputs=[("x", 0), ("x", 0)], domain="com.microsoft"))
    with_contrib = default_op_registry(contrib)
    assert "onnx:com.microsoft.BiasGelu" in with_contrib
    assert "onnx.SimplifiedLayerNormalization" in with_contrib
    assert "onnx:com.microsoft" in default_op_registry().dialects()
