"""MultiHeadAttentionFusion: Keras 3, TF1 BERT, PyTorch exports, onnx.helper graphs; refusals with reasons."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

from scopefusion.convert import convert
from tests.fusion_rules.harness import check_fusions
from tests.models import onnx_models

REPO = Path(__file__).resolve().parents[2]
TOL = 1e-5


def _keras_encoder(model_store, layers: int = 4) -> Path:
    from tests.models import more_models

    build = lambda: more_models.keras_transformer_encoder(num_layers=layers)  # noqa: E731
    return model_store.file(f"keras_transformer_{layers}.pb", build)


def _attention(model) -> list:
    return [f for f in model.fusion_run.accepted if f.type == "MultiHeadAttention"]


def _refusals(model) -> list[str]:
    return [r.reason for r in model.fusion_run.refused if r.pass_name == "MultiHeadAttentionFusion"]


# ------------------------------------------------------------------------------------------ real models
def test_keras_encoder_every_attention_fused(model_store):
    layers, heads, d_model = 4, 4, 32  # keras_transformer_encoder's defaults: one MultiHeadAttention per layer
    report = check_fusions(_keras_encoder(model_store, layers), "MultiHeadAttention", int_high=100)
    assert sorted(report.errors) == [f"encoder_1/layer_{i}_1/attention_1" for i in range(layers)]
    for fusion in _attention(report.model):
        attrs = fusion.attrs
        assert (attrs["input_layout"], attrs["num_heads"], attrs["head_size"]) == ("BSH", heads, d_model // heads)
        assert attrs["scale"] == pytest.approx((d_model // heads) ** -0.5)
        assert attrs["query_weight"].shape == (d_model, d_model) and attrs["out_weight"].shape == (d_model, d_model)
        assert len(fusion.inputs) == 3  # query, key, value: the same tensor in self-attention
    assert report.max_error <= TOL
    assert _refusals(report.model) == []
    # GELU and LayerNorm still fuse around it: no claim collides.
    assert len([f for f in report.model.fusion_run.accepted if f.type == "Gelu"]) == layers


def test_tf1_bert_self_attention_fused_with_mask(tf_bert_pb):
    report = check_fusions(tf_bert_pb, "MultiHeadAttention")  # input_mask drawn from {0, 1}
    assert sorted(report.errors) == [f"bert/encoder/layer_{i}/attention/self" for i in range(2)]
    for fusion in _attention(report.model):
        assert fusion.attrs["num_heads"] == 2 and fusion.attrs["head_size"] == 16
        assert fusion.attrs["query_length"] == 8 and fusion.attrs["scale"] == pytest.approx(0.25)
        assert [i.producer for i in fusion.inputs][3] == "bert/encoder/mul"  # the additive mask
        assert fusion.outputs[0].inner_node.endswith("attention/output/dense/BiasAdd")
    assert report.max_error <= TOL


@pytest.mark.parametrize("opset", [14, 17])
def test_torch_encoder_core_fused(opset):
    report = check_fusions(REPO / f"testdata/torch_encoder_opset{opset}.onnx", "MultiHeadAttention", int_high=100)
    assert sorted(report.errors) == [f"encoder/layers.{i}/self_attn" for i in range(2)]
    for fusion in _attention(report.model):
        attrs = fusion.attrs
        assert (attrs["input_layout"], attrs["num_heads"], attrs["head_size"]) == ("BNSD", 4, 8)
        assert attrs["scale"] == pytest.approx(8**-0.5)  # computed at run time from the head size
    assert report.max_error <= TOL


def test_mobilenet_classifier_softmax_is_no_attention(tf_mobilenet_pb):
    model = convert(tf_mobilenet_pb)
    assert _attention(model) == [] and _refusals(model) == []


# ------------------------------------------------------------------------------------------ onnx.helper graphs
def _mha_onnx(
    tmp_path: Path, name: str, *, heads=2, prefix="", leak_probs=False, softmax=True, names=True, mask="none",
    merge_perm=(0, 2, 1, 3),
) -> Path:
    """Self-attention over x [n, 4, 8]: q/k/v projections with biases, split, MatMul(q, Transpose(k)),
    Mul(scale), Softmax, MatMul, merge, output projection.

    ``mask``: ``"additive"`` adds input ``mask`` (float [n, 1, 1, 4]) to the scores, ``"where"`` keeps the
    scores where input ``mask`` (bool [n, 1, 1, 4]) is true (else -1e9), ``"after"`` adds the float mask to the
    probabilities after the Softmax (a look-alike). ``merge_perm`` is the merge's Transpose."""
    rng = np.random.default_rng(1)
    e, seq, d = 8, 4, 8 // heads
    inits = [numpy_helper.from_array((rng.standard_normal(s) * 0.3).astype(np.float32), n) for n, s in (
        ("wq", (e, e)), ("wk", (e, e)), ("wv", (e, e)), ("wo", (e, e)),
        ("bq", (e,)), ("bk", (e,)), ("bv", (e,)), ("bo", (e,)))]
    inits += [
        numpy_helper.from_array(np.array([0, seq, heads, d], np.int64), "split"),
        numpy_helper.from_array(np.array([0, seq, e], np.int64), "merge"),
        numpy_helper.from_array(np.array(d**-0.5, np.float32), "scale"),
    ]
    nodes = []

    def node(op, ins, out, **kw):
        nodes.append(helper.make_node(op, ins, [out], name=(prefix + out) if names else "", **kw))
        return out

    heads_of = {}
    for r in "qkv":
        y = node("Add", [node("MatMul", ["x", f"w{r}"], f"{r}_mm"), f"b{r}"], f"{r}_add")
        heads_of[r] = node("Transpose", [node("Reshape", [y, "split"], f"{r}_split")], f"{r}_heads", perm=[0, 2, 1, 3])
    k_t = node("Transpose", [heads_of["k"]], "k_t", perm=[0, 1, 3, 2])
    logits = node("Mul", [node("MatMul", [heads_of["q"], k_t], "qk"), "scale"], "logits")
    inputs = [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", seq, e])]
    if mask != "none":
        kind = TensorProto.BOOL if mask == "where" else TensorProto.FLOAT
        inputs.append(helper.make_tensor_value_info("mask", kind, ["n", 1, 1, seq]))
    if mask == "additive":
        logits = node("Add", [logits, "mask"], "masked")
    elif mask == "where":
        inits.append(numpy_helper.from_array(np.array(-1e9, np.float32), "fill"))
        logits = node("Where", ["mask", logits, "fill"], "masked")
    probs = node("Softmax", [logits], "probs", axis=-1) if softmax else node("Relu", [logits], "probs")
    if mask == "after":
        probs = node("Add", [probs, "mask"], "masked_probs")
    ctx = node("MatMul", [probs, heads_of["v"]], "ctx")
    merged = node("Reshape", [node("Transpose", [ctx], "ctx_t", perm=list(merge_perm)), "merge"], "merged")
    node("Add", [node("MatMul", [merged, "wo"], "o_mm"), "bo"], "y")
    nodes[-1].output[0] = "y"
    outputs = [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["n", seq, e])]
    if leak_probs:
        outputs.append(helper.make_tensor_value_info(probs, TensorProto.FLOAT, ["n", heads, seq, seq]))
    graph = helper.make_graph(nodes, name, inputs, outputs, inits)
    return onnx_models.save(onnx_models._model(graph), tmp_path / f"{name}.onnx")


def test_onnx_without_scope_names(tmp_path):
    report = check_fusions(_mha_onnx(tmp_path, "plain", names=False), "MultiHeadAttention")
    (fusion,) = _attention(report.model)
    assert fusion.attrs["num_heads"] == 2 and fusion.attrs["input_layout"] == "BSH"
    assert [i.producer for i in fusion.inputs] == ["x", "x", "x"]
    assert report.max_error <= TOL


def test_onnx_fixture_single_head(onnx_attention):
    rng = np.random.default_rng(0)
    feeds = {"x": (rng.standard_normal((2, 4, 16)) * 0.1).astype(np.float32)}  # its weights are N(0, 1)
    report = check_fusions(onnx_attention, "MultiHeadAttention", feeds=feeds)
    (fusion,) = _attention(report.model)
    assert (fusion.name, fusion.attrs["num_heads"], fusion.attrs["head_size"]) == ("encoder/layers.0/self_attn", 1, 16)
    assert report.max_error <= TOL


# ------------------------------------------------------------------------------------------ negatives
def test_probabilities_fetched_outside_refused(tmp_path):
    model = convert(_mha_onnx(tmp_path, "leak", prefix="/enc/self_attn/", leak_probs=True))
    assert _attention(model) == []
    (reason,) = _refusals(model)
    assert "graph output 'probs'" in reason


def test_attention_named_scope_without_softmax_refused(tmp_path):
    model = convert(_mha_onnx(tmp_path, "relu", prefix="/enc/self_attn/", softmax=False))
    assert _attention(model) == []
    (reason,) = _refusals(model)
    assert reason.startswith("scope enc/self_attn/ is named like attention") and "no Softmax" in reason


def test_softmax_over_another_axis_refused(tmp_path):
    path = _mha_onnx(tmp_path, "axis", prefix="/enc/self_attn/")
    import onnx

    model_proto = onnx.load(str(path))
    (softmax,) = [n for n in model_proto.graph.node if n.op_type == "Softmax"]
    softmax.attribute[0].i = 2
    onnx.save(model_proto, str(path))
    model = convert(path)
    assert _attention(model) == []
    (reason,) = _refusals(model)
    assert "normalizes over axis 2, not the last axis" in reason


def test_mask_added_after_the_softmax_refused(tmp_path):
    model = convert(_mha_onnx(tmp_path, "after", prefix="/enc/self_attn/", mask="after"))
    assert _attention(model) == []
    (reason,) = _refusals(model)
    assert "masks the probabilities after the Softmax" in reason


def test_heads_merged_in_another_order_refused(tmp_path):
    model = convert(_mha_onnx(tmp_path, "merge_order", prefix="/enc/self_attn/", merge_perm=(0, 2, 3, 1)))
    assert _attention(model) == []
    (reason,) = _refusals(model)
    assert "the heads are merged with perm [0, 2, 3, 1], expected [0, 2, 1, 3]" in reason


def _padding(batch: int, dtype) -> np.ndarray:
    """[batch, 1, 1, 4]: each row keeps its first 1..3 keys."""
    keep = np.arange(4)[None, :] < np.array([1, 3, 2][:batch])[:, None]
    values = keep if dtype is bool else np.where(keep, 0.0, -1e4)
    return values[:, None, None, :].astype(dtype)


@pytest.mark.parametrize("mask", ["additive", "where"])
def test_onnx_masked_attention_fused_proven_and_exported(tmp_path, mask):
    import onnxruntime as ort

    path = _mha_onnx(tmp_path, f"masked_{mask}", prefix="/enc/self_attn/", mask=mask)
    feeds = {"x": np.random.default_rng(2).standard_normal((3, 4, 8)).astype(np.float32),
             "mask": _padding(3, bool if mask == "where" else np.float32)}
    report = check_fusions(path, "MultiHeadAttention", feeds=feeds)
    (fusion,) = _attention(report.model)
    assert fusion.attrs["mask_kind"] == ("boolean" if mask == "where" else "additive")
    assert [i.producer for i in fusion.inputs] == ["x", "x", "x", "mask"]
    assert report.max_error <= TOL
    exported = tmp_path / "exported.onnx"
    report.model.save(exported, format="onnx")
    have = ort.InferenceSession(str(exported), providers=["CPUExecutionProvider"]).run(None, feeds)[0]
    want = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"]).run(None, feeds)[0]
    np.testing.assert_allclose(have, want, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("fixture", ["tf_convnet_pb", "tf_mobilenet_pb", "tf_bert_pb"])
def test_attention_named_scopes_without_softmax_are_those_a_plain_count_finds(fixture, request):
    """The attention-named scopes reported for holding matrix products but no candidate Softmax are the
    innermost ones a plain count over each scope's nodes finds (none at all in a graph with fewer than two
    products, which the rule tells without counting)."""
    from scopefusion.fusion_rules.attention_patterns import PRODUCTS
    from scopefusion.fusion_rules.multi_head_attention import PASS
    from scopefusion.parser import load
    from scopefusion.scope import ScopeGraph

    graph = ScopeGraph.build(load(request.getfixturevalue(fixture)))
    flagged = [s for s in list(graph.tree)[1:]
               if PASS._attention_named(s.name) and sum(n.op_type in PRODUCTS for n in s.all_nodes) >= 2]
    innermost = [s for s in sorted(flagged, key=lambda s: s.index)
                 if not any(o is not s and s.contains(o) for o in flagged)]
    found = PASS._named_without_attention(graph, [])
    assert [r.nodes[0] for r in found] == [s.all_nodes[-1].name for s in innermost]
