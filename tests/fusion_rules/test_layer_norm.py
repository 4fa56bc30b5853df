"""LayerNormFusion: which layer norms fuse (TF1 BERT, Keras, PyTorch ONNX, plain ONNX), which are refused and
why, and that every fused LayerNorm computes what it replaces (tests/fusion_rules/harness.py)."""

from __future__ import annotations

import re

import numpy as np
import pytest

from scopefusion.dialects.fused.layer_norm import definition
from scopefusion.fusion_rules import BUILTIN_RULES
from scopefusion.fusion_rules.layer_norm import PASS
from scopefusion.parser import SourceGraph, SourceNode
from scopefusion.scope import PassManager, PassRegistry, ScopeGraph
from tests.fusion_rules.harness import check_fusions, fusion_errors

TOL = 1e-5


def _fused(report, rule="LayerNormFusion"):
    return [a for a in report.model.fusion_run.accepted if a.pass_name == rule]


def _refused(report, rule="LayerNormFusion"):
    return {r.name: r.reason for r in report.model.fusion_run.refused if r.pass_name == rule}


def test_registered_general():
    assert PASS in BUILTIN_RULES and PASS.general and PASS.name == "LayerNormFusion"


# ------------------------------------------------------------------------------------------ positives
@pytest.fixture(scope="module")
def bert(tf_bert_pb):
    return check_fusions(tf_bert_pb, "LayerNorm")


def test_bert_tf1_every_layer_norm(bert):
    # bert_encoder_tf1(num_layers=2): one embeddings LayerNorm, then two per layer.
    expected = ["bert/embeddings/LayerNorm"] + [
        f"bert/encoder/layer_{i}/{part}/LayerNorm" for i in range(2) for part in ("attention/output", "output")
    ]
    fused = _fused(bert)
    assert [f.name for f in fused] == expected
    assert _refused(bert) == {}
    for fusion in fused:
        assert fusion.attrs == {"begin_norm_axis": -1, "epsilon": pytest.approx(1e-12)}
        producers = [i.producer for i in fusion.inputs]
        assert producers[1].endswith("LayerNorm/batchnorm/mul/ReadVariableOp")  # gamma, read outside the fusion
        assert producers[2].endswith("LayerNorm/batchnorm/ReadVariableOp")  # beta
    assert len(bert.errors) == 5 and bert.max_error <= TOL
    ops = bert.model.op_counts()
    assert ops["fused.LayerNorm"] == 5
    assert "tf.Rsqrt" not in ops and "tf.SquaredDifference" not in ops


def test_bert_ir_node_typed_and_inferred(bert):
    node = bert.model.graph.node("bert/encoder/layer_0/output/LayerNorm")
    assert node.op == "fused.LayerNorm"
    attrs = node.get_all_attrs()
    assert attrs["begin_norm_axis"].type_id.name == "int" and attrs["epsilon"].type_id.name == "float"
    assert attrs["_fusion_rule"].value == "LayerNormFusion"
    assert node.outputs[0].type is node.inputs[0].type and node.outputs[0].type.shape == (-1, 32)


def test_harness_sees_a_wrong_parameter(tf_convnet_pb):
    # The harness must fail a fused op whose attributes do not reproduce the source: break one epsilon.
    from scopefusion.convert import convert

    model = convert(tf_convnet_pb)
    node = model.graph.node("small_convnet_1/ln_1")
    assert fusion_errors(tf_convnet_pb, "LayerNorm", model=model)["small_convnet_1/ln_1"] <= TOL
    node.set_attr("epsilon", 10.0)
    assert fusion_errors(tf_convnet_pb, "LayerNorm", model=model)["small_convnet_1/ln_1"] > 0.1


def test_keras_layer_normalization(tf_convnet_pb):
    report = check_fusions(tf_convnet_pb, "LayerNorm")
    (fusion,) = _fused(report)
    assert fusion.name == "small_convnet_1/ln_1"
    assert fusion.attrs == {"begin_norm_axis": -1, "epsilon": pytest.approx(1e-3)}  # Keras's default epsilon
    assert [i.producer for i in fusion.inputs][1:] == ["small_convnet_1/ln_1/Reshape", "small_convnet_1/ln_1/Reshape_1"]
    assert report.max_error <= TOL


def test_keras_transformer_encoder_4_layers(keras_encoder4_pb):
    report = check_fusions(keras_encoder4_pb, "LayerNorm")
    fused = _fused(report)
    # keras_transformer_encoder(num_layers=4): attention_norm and output_norm in every layer.
    per_layer = {i: sorted(re.search(r"(attention|output)_norm", f.name).group(0) for f in fused if f"/layer_{i}_" in f.name) for i in range(4)}
    assert per_layer == {i: ["attention_norm", "output_norm"] for i in range(4)}
    assert len(fused) == 8 and _refused(report) == {}
    assert all(f.attrs == {"begin_norm_axis": -1, "epsilon": pytest.approx(1e-6)} for f in fused)
    assert len(report.errors) == 8 and report.max_error <= TOL


@pytest.mark.parametrize("opset", [14, 17])
def test_torch_encoder_exports(opset, torch_encoder14, torch_encoder17):
    report = check_fusions(torch_encoder14 if opset == 14 else torch_encoder17, "LayerNorm", int_high=100)
    fused = _fused(report)
    # make_torch_onnx.TinyEncoder: 2 post-norm layers with norm1 and norm2 each, then a final norm.
    modules = sorted(re.search(r"(layers\.\d/norm\d|^/?norm)", f.name).group(0).lstrip("/") for f in fused)
    assert modules == ["layers.0/norm1", "layers.0/norm2", "layers.1/norm1", "layers.1/norm2", "norm"]
    assert _refused(report) == {}
    assert all(f.attrs == {"begin_norm_axis": -1, "epsilon": pytest.approx(1e-5)} for f in fused)
    assert len(report.errors) == 5 and report.max_error <= TOL
    ops = report.model.op_counts()
    assert ops["fused.LayerNorm"] == 5 and "onnx.LayerNormalization" not in ops and "onnx.Sqrt" not in ops


@pytest.mark.parametrize("opset", [14, 18])
def test_onnx_without_scope_names(opset, ln_onnx14, ln_onnx18):
    report = check_fusions(ln_onnx14 if opset == 14 else ln_onnx18, "LayerNorm")
    fused = _fused(report)
    assert [f.name for f in fused] == ["ln0_out", "ln1_out"]
    assert [f.attrs["epsilon"] for f in fused] == [pytest.approx(1e-5), pytest.approx(1e-6)]
    assert [[i.producer for i in f.inputs] for f in fused] == [["x", "ln0_gamma", "ln0_beta"], ["relu", "ln1_gamma", "ln1_beta"]]
    assert report.max_error <= TOL


# ------------------------------------------------------------------------------------------ TF1 cases
@pytest.fixture(scope="module")
def cases(ln_tf1_pb):
    return check_fusions(ln_tf1_pb, "LayerNorm")


def test_positive_axis_with_known_rank(cases):
    fused = {f.name: f for f in _fused(cases)}
    assert sorted(fused) == ["good/LayerNorm", "pos/LayerNorm"]
    # pos/ reduces over axis 2 of the rank-3 placeholder: the last axis.
    assert fused["pos/LayerNorm"].attrs == {"begin_norm_axis": -1, "epsilon": pytest.approx(1e-5)}
    assert cases.max_error <= TOL


def test_look_alikes_refused_with_reason(cases, ln_tf1_pb, run_passes):
    refused = _refused(cases)
    assert refused["bad_sub/LayerNorm"].startswith("bad_sub/LayerNorm/ does not compute a layer norm: nearest miss")
    assert refused["bad_eps/LayerNorm"].startswith("bad_eps/LayerNorm/ does not compute a layer norm: nearest miss")
    assert "bad_eps/LayerNorm/batchnorm/add is AddV2, expected Rsqrt" in refused["bad_eps/LayerNorm"]
    claimed = {n for f in cases.model.fusion_run.accepted for n in f.claimed}
    assert not any(n.startswith(("bad_sub/", "bad_eps/")) for n in claimed)
    manager, _ = run_passes(ln_tf1_pb)
    for scope in ("bad_sub/LayerNorm/", "bad_sub/LayerNorm/moments/"):
        why = {e.pass_name: e.reason for e in manager.explain(scope)}["LayerNormFusion"]
        assert why.startswith("matched, but the result was refused: bad_sub/LayerNorm/ does not compute a layer norm")
    assert {e.pass_name: e.reason for e in manager.explain("good/LayerNorm/")}["LayerNormFusion"] == "fused by 'good/LayerNorm'"


def test_mean_read_outside_refused(cases):
    assert _refused(cases)["escape/LayerNorm"] == (
        "intermediate value escape/LayerNorm/moments/mean:0 is consumed outside the fusion by mul (input 0); "
        "map it to a fused output port or leave the node out"
    )
    assert cases.model.graph.get_node("escape/LayerNorm") is None
    assert cases.model.op_counts()["fused.LayerNorm"] == 2


# ------------------------------------------------------------------------------------------ axes without shapes
def _hand_graph(axes, shape):
    """x → tf.nn.moments(x, axes) + batch_normalization, written as SourceNodes under ``ln/``."""

    def n(name, op, *inputs, value=None, **attrs):
        return SourceNode(name, op, inputs=[(i, 0) for i in inputs], attrs=attrs,
                          value=None if value is None else np.asarray(value))

    p = "ln/"
    nodes = [
        n("x", "Placeholder", dtype=None, **({"shape": shape} if shape is not None else {})),
        n(p + "gamma", "Const", value=np.ones(4, np.float32)),
        n(p + "beta", "Const", value=np.zeros(4, np.float32)),
        n(p + "moments/axes", "Const", value=np.array(axes, np.int32)),
        n(p + "moments/mean", "Mean", "x", p + "moments/axes", keep_dims=True),
        n(p + "moments/StopGradient", "StopGradient", p + "moments/mean"),
        n(p + "moments/SquaredDifference", "SquaredDifference", "x", p + "moments/StopGradient"),
        n(p + "moments/variance", "Mean", p + "moments/SquaredDifference", p + "moments/axes", keep_dims=True),
        n(p + "eps", "Const", value=np.float32(1e-5)),
        n(p + "add", "AddV2", p + "moments/variance", p + "eps"),
        n(p + "Rsqrt", "Rsqrt", p + "add"),
        n(p + "mul", "Mul", p + "Rsqrt", p + "gamma"),
        n(p + "mul_1", "Mul", "x", p + "mul"),
        n(p + "mul_2", "Mul", p + "moments/mean", p + "mul"),
        n(p + "sub", "Sub", p + "beta", p + "mul_2"),
        n(p + "add_1", "AddV2", p + "mul_1", p + "sub"),
        n("y", "Relu", p + "add_1"),
    ]
    registry = PassRegistry()
    registry.register(PASS)
    return PassManager(registry).run(ScopeGraph.build(SourceGraph(nodes)))


@pytest.mark.parametrize(
    "axes, shape, expected",
    [
        ([-2, -1], None, {"begin_norm_axis": -2}),
        ([2, 3], (-1, 5, 6, 4), {"begin_norm_axis": -2}),
        ([1], None, "it normalizes over axes [1] and the rank of its input is unknown"),
        ([1], (-1, 6, 4), "it normalizes over axes [1] of a rank-3 input, which are not its trailing axes"),
        ([-2], None, "it normalizes over axes [-2], which are not the trailing axes"),
    ],
)
def test_axes_read_from_constants(axes, shape, expected):
    report = _hand_graph(axes, shape)
    if isinstance(expected, dict):
        (fusion,) = report.accepted
        assert fusion.name == "ln" and fusion.attrs["begin_norm_axis"] == expected["begin_norm_axis"]
        assert fusion.attrs["epsilon"] == pytest.approx(1e-5)
    else:
        assert not report.accepted
        (refusal,) = report.refused
        assert refusal.reason.startswith(f"ln/add_1 is not a layer norm: {expected}")


def test_nhwc_spatial_moments_left_to_instance_norm():
    report = _hand_graph([1, 2], (-1, 5, 6, 4))
    assert not report.accepted and not report.refused


# ------------------------------------------------------------------------------------------ the fused op
def test_fused_op_reference_and_inference_errors():
    from scopefusion import dtypes as D
    from scopefusion.ir.attrs import FLOAT, INT, AttrValue
    from scopefusion.ir.opdef import InferContext, InputInfo

    op = definition()
    rng = np.random.default_rng(0)
    x = rng.standard_normal((2, 3, 4)).astype(np.float32)
    gamma, beta = rng.standard_normal(12).reshape(3, 4).astype(np.float32), np.float32(0.5)
    (y,) = op.reference([x, gamma, beta], {"begin_norm_axis": 1, "epsilon": 1e-6})
    flat = x.reshape(2, -1)
    want = ((flat - flat.mean(1, keepdims=True)) / np.sqrt(flat.var(1, keepdims=True) + 1e-6)).reshape(x.shape) * gamma + beta
    assert y.dtype == np.float32 and np.max(np.abs(y - want)) < 1e-5

    def infer(x_shape, gamma_shape, axis):
        info = lambda s: InputInfo(s, D.FLOAT32)  # noqa: E731
        attrs = {"begin_norm_axis": AttrValue(INT, axis), "epsilon": AttrValue(FLOAT, 1e-5)}
        ctx = InferContext(op, "ln", [info(x_shape), info(gamma_shape), info((4,))], attrs, 1)
        op.infer(ctx)
        return ctx.output_shape(0)

    assert infer((2, -1, 4), (4,), -1) == (2, -1, 4)
    with pytest.raises(Exception, match="begin_norm_axis 3 is out of range for an input of rank 3"):
        infer((2, 3, 4), (4,), 3)
    with pytest.raises(Exception, match=r"gamma of shape \[5\] does not broadcast to x of shape \[2, 3, 4\]"):
        infer((2, 3, 4), (5,), -1)
