"""The writer writes a :class:`PlainOp` lowering's one op itself, without an emitter: the same export as running
the lowering on an emitter, on real models (layouts tracked, loop bodies) and on the dtypes it composes for."""

from __future__ import annotations

from pathlib import Path

import pytest

from scopefusion.convert import convert
from scopefusion.dtypes import FLOAT16, FLOAT32, FLOAT64
from scopefusion.serde.onnx_export import model_to_onnx_bytes
from scopefusion.serde.onnx_fused import fused_exporters_for
from scopefusion.serde.onnx_lowering import default_lowerings
from scopefusion.serde.onnx_lowering.missing_kernels import composed
from scopefusion.serde.onnx_lowering.registry import PlainOp

from ._emitter_paths import through_emitters


def test_the_element_wise_lowerings_are_plain_ops():
    lowerings = default_lowerings()
    for op_type, onnx_op in (("Relu", "Relu"), ("AddV2", "Add"), ("RealDiv", "Div"), ("BitwiseAnd", "BitwiseAnd")):
        fn = lowerings.get(op_type)
        assert isinstance(fn, PlainOp) and fn.onnx_op == onnx_op


@pytest.mark.parametrize("fixture", ["tf_convnet_pb", "tf_mobilenet_pb", "tf_bert_pb", "tf_rnn_pb",
                                     "tf2_control_flow_pb"])
def test_plain_ops_export_as_through_an_emitter(fixture, request):
    model = convert(request.getfixturevalue(fixture))
    assert model_to_onnx_bytes(model) == model_to_onnx_bytes(model, lowerings=through_emitters())


def _elementwise(x, y, h):
    import tensorflow as tf

    # float64 Tan and Elu are compositions, float16 IsInf too; Relu, Sigmoid, Add and the float16 Abs are plain.
    return (tf.math.tan(x), tf.nn.elu(x), tf.nn.relu(tf.math.sigmoid(x) + y), tf.math.is_inf(h), tf.math.abs(h),
            tf.bitwise.bitwise_and(tf.cast(x, tf.int32), 3))


@pytest.fixture(scope="module")
def elementwise_pb(model_store) -> Path:
    def build() -> bytes:
        import tensorflow as tf

        from tests.models.more_models import _freeze

        specs = [tf.TensorSpec([None], tf.float64, name="x"), tf.TensorSpec([None], tf.float64, name="y"),
                 tf.TensorSpec([None], tf.float16, name="h")]
        return _freeze(_elementwise, specs)

    return model_store.file("plain_elementwise.pb", build)


@pytest.mark.parametrize("opset", [17, 23])  # BitwiseAnd needs opset 18: declined at 17
def test_compositions_and_declines_take_the_emitter(elementwise_pb, opset):
    model = convert(elementwise_pb)
    options = {"opset": opset, "keep_tf_ops": True}
    assert model_to_onnx_bytes(model, **options) == model_to_onnx_bytes(model, lowerings=through_emitters(), **options)


def test_composed_answers_as_the_composition_table():
    assert composed("Tan", FLOAT64) and not composed("Tan", FLOAT32)
    assert composed("IsInf", FLOAT16) and not composed("IsInf", FLOAT64)
    assert not composed("Relu", FLOAT64) and not composed("Relu", FLOAT16)


@pytest.fixture(scope="module")
def keras_activation_cnn_pb(model_store) -> Path:
    """The zoo's Keras CNN with fused BatchNorm, Swish and HardSwish (tests/e2e/zoo.py)."""
    from tests.e2e.zoo import model_file

    return model_file(model_store, "keras_activation_cnn")


def test_the_hard_swish_exporter_writes_its_op_as_through_an_emitter(keras_activation_cnn_pb):
    model = convert(keras_activation_cnn_pb)
    builtin = fused_exporters_for(model.graph.registry)
    exporter = builtin.get("HardSwish")
    assert isinstance(exporter, PlainOp)
    plain = fused_exporters_for(model.graph.registry)
    plain.register("HardSwish", exporter.lower, replace=True)
    assert model_to_onnx_bytes(model) == model_to_onnx_bytes(model, exporters=plain)
    node = next(n for n in model.graph.nodes if n.op_type == "HardSwish")
    assert exporter.inputs_of(node, ["x"], 14) == ["x"]
    assert exporter.inputs_of(node, ["x"], 13) is None  # no HardSwish op yet: the exporter composes it
    assert exporter.inputs_of(node, ["x", "y"], 14) is None  # not the one input it takes
