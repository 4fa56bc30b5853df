"""Attention as exporters write it: google-research-style TF1 BERT with a dynamic batch, Keras 3 masks,
tf2onnx exports; every attention, LayerNorm and GELU fused and proven by the harness with masks that pad."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from scopefusion.convert import convert
from scopefusion.verify import verify
from tests.fusion_rules.harness import check_fusions

REPO = Path(__file__).resolve().parents[2]
TESTDATA = REPO / "testdata"
TOL = 1e-5
SEQ = 8


# ------------------------------------------------------------------------------------------ models
def zoo_model(model_store, name: str) -> Path:
    """A model of the zoo (``tests/e2e/zoo.py``), built once per session and shared with the end-to-end tests."""
    from tests.e2e.zoo import model_file

    return model_file(model_store, name)


@pytest.fixture(scope="session")
def bert_dynamic_pb(model_store) -> Path:
    """google-research-style TF1 BERT, 4 layers, batch read at run time, ``input_mask``."""
    return zoo_model(model_store, "tf1_bert_dynamic_batch")


@pytest.fixture(scope="session")
def keras_padding_pb(model_store) -> Path:
    return zoo_model(model_store, "keras_padding_mask")


@pytest.fixture(scope="session")
def keras_causal_pb(model_store) -> Path:
    return zoo_model(model_store, "keras_causal_mask")


def padding_mask(batch: int, seed: int = 3) -> np.ndarray:
    """1 for real tokens, 0 for padding: every row pads (its length is 2..SEQ-1), rows differ."""
    lengths = np.random.default_rng(seed).integers(2, SEQ, batch)
    lengths[0] = 3
    return (np.arange(SEQ)[None, :] < lengths[:, None]).astype(np.int32)


def bert_feeds(batch: int = 3) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(5)
    return {"input_ids": rng.integers(0, 100, (batch, SEQ)).astype(np.int32), "input_mask": padding_mask(batch),
            "token_type_ids": rng.integers(0, 2, (batch, SEQ)).astype(np.int32)}


def keras_feeds(batch: int = 3, padding: bool = True) -> dict[str, np.ndarray]:
    feeds = {"tokens": np.random.default_rng(6).integers(0, 100, (batch, SEQ)).astype(np.int32)}
    if padding:
        feeds["padding_mask"] = padding_mask(batch)
    return feeds


def counts(model) -> dict[str, int]:
    found: dict[str, int] = {}
    for fusion in model.fusion_run.accepted:
        found[fusion.type] = found.get(fusion.type, 0) + 1
    return found


def attention(model) -> list:
    return [f for f in model.fusion_run.accepted if f.type == "MultiHeadAttention"]


def assert_proven(path: Path, model, feeds: dict[str, np.ndarray], expected: dict[str, int]) -> None:
    """Each fusion type's count, and each fusion numerically the subgraph it replaced (≤ TOL)."""
    assert {k: v for k, v in counts(model).items() if k in expected} == expected
    for fused_type, count in expected.items():
        report = check_fusions(path, fused_type, model=model, feeds=feeds)
        assert len(report) == count
        assert report.max_error <= TOL, (fused_type, report.errors)


def run_exported_onnx(model, tmp_path: Path, feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
    import onnxruntime as ort

    out = tmp_path / "exported.onnx"
    model.save(out, format="onnx")
    session = ort.InferenceSession(str(out), providers=["CPUExecutionProvider"])
    names = {i.name for i in session.get_inputs()}
    return session.run(None, {k: v for k, v in feeds.items() if k in names})


# ------------------------------------------------------------------------------------------ TF1 BERT
def test_bert_dynamic_batch_every_layer_fused(bert_dynamic_pb):
    model = convert(bert_dynamic_pb)
    assert_proven(bert_dynamic_pb, model, bert_feeds(), {"MultiHeadAttention": 4, "LayerNorm": 9, "Gelu": 4})
    for i, fusion in enumerate(attention(model)):
        assert fusion.name == f"bert/encoder/layer_{i}/attention/self"
        attrs = fusion.attrs
        assert (attrs["input_layout"], attrs["num_heads"], attrs["head_size"]) == ("BSH", 4, 8)
        assert attrs["query_length"] == SEQ and attrs["mask_kind"] == "additive"
        assert attrs["scale"] == pytest.approx(8**-0.5)
        # the additive mask (1 - mask) * -10000 built inside the layer, the split targets Pack(batch, 8, 4, 8)
        assert fusion.inputs[3].producer == f"bert/encoder/layer_{i}/attention/self/mul_1"
        assert f"bert/encoder/layer_{i}/attention/self/Reshape/shape" in fusion.absorbed
    assert [r.reason for r in model.fusion_run.refused if r.pass_name == "MultiHeadAttentionFusion"] == []


def test_bert_dynamic_batch_verifies_end_to_end(bert_dynamic_pb):
    report = verify(bert_dynamic_pb, inputs=bert_feeds(batch=2))
    assert report.ok and report.fusions["MultiHeadAttentionFusion"] == 4


# ------------------------------------------------------------------------------------------ Keras masks
def test_keras_padding_mask_fused_as_boolean(keras_padding_pb):
    model = convert(keras_padding_pb)
    assert_proven(keras_padding_pb, model, keras_feeds(), {"MultiHeadAttention": 2, "LayerNorm": 4, "Gelu": 2})
    for fusion in attention(model):
        attrs = fusion.attrs
        assert (attrs["input_layout"], attrs["num_heads"], attrs["mask_kind"]) == ("BSH", 4, "boolean")
        assert attrs["mask_fill"] < -1e38 and attrs.get("causal", 0) == 0
        assert len(fusion.inputs) == 4  # query, key, value, the [B, 1, 1, S] attend mask
    report = verify(keras_padding_pb, inputs=keras_feeds(batch=2))
    assert report.ok and report.fusions["MultiHeadAttentionFusion"] == 2


def test_keras_causal_mask_fused_as_causal(keras_causal_pb):
    model = convert(keras_causal_pb)
    expected = {"MultiHeadAttention": 2, "LayerNorm": 4, "Gelu": 2}
    assert_proven(keras_causal_pb, model, keras_feeds(padding=False), expected)
    for fusion in attention(model):
        assert fusion.attrs["causal"] == 1 and len(fusion.inputs) == 3
        assert any(name.endswith("attention_1/MatrixBandPart") for name in fusion.claimed)
    report = verify(keras_causal_pb, inputs=keras_feeds(batch=2, padding=False))
    assert report.ok and report.fusions["MultiHeadAttentionFusion"] == 2


# ------------------------------------------------------------------------------------------ tf2onnx exports
def test_tf2onnx_bert_fused_and_exported(tmp_path):
    path = TESTDATA / "tf2onnx_bert.onnx"
    model = convert(path)
    # tf2onnx's spellings: Reciprocal(Sqrt) for Rsqrt, the embeddings' mean as GlobalAveragePool, the key's
    # split and transpose merged into one Transpose, reshape targets from Shape/Slice/Squeeze/Unsqueeze/Concat
    assert_proven(path, model, bert_feeds(), {"MultiHeadAttention": 4, "LayerNorm": 9, "Gelu": 4})
    for fusion in attention(model):
        assert (fusion.attrs["input_layout"], fusion.attrs["num_heads"], fusion.attrs["head_size"]) == ("BSH", 4, 8)
    feeds = bert_feeds(batch=2)
    report = verify(path, inputs=feeds)
    assert report.ok
    import onnxruntime as ort

    want = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"]).run(None, feeds)
    for have, expected in zip(run_exported_onnx(model, tmp_path, feeds), want, strict=True):
        np.testing.assert_allclose(have, expected, rtol=1e-4, atol=1e-5)


def test_tf2onnx_keras_encoder_fused_and_exported(tmp_path):
    """tf2onnx's spellings of the Keras encoder: the einsums lowered to Unsqueeze / Transpose / Reshape / MatMul /
    Squeeze with computed targets, the padding mask's SelectV2 as Cast / Mul / Not / Add, the exact GELU's Erfc
    as ``1 - Erf``, LayerNormalization's moments as GlobalAveragePool."""
    path = TESTDATA / "tf2onnx_keras_encoder.onnx"
    model = convert(path)
    assert_proven(path, model, keras_feeds(), {"MultiHeadAttention": 2, "Gelu": 2, "LayerNorm": 4})
    assert all(f.attrs["approximate"] == "none" for f in model.fusion_run.accepted if f.type == "Gelu")
    for fusion in attention(model):
        attrs = fusion.attrs
        assert (attrs["input_layout"], attrs["num_heads"], attrs["head_size"], attrs["mask_kind"]) == ("BSH", 4, 8, "boolean")
        assert attrs["query_bias"].shape == (32,) and attrs["out_bias"].shape == (32,)
    feeds = keras_feeds(batch=2)
    assert verify(path, inputs=feeds).ok
    import onnxruntime as ort

    want = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"]).run(None, feeds)
    for have, expected in zip(run_exported_onnx(model, tmp_path, feeds), want, strict=True):
        np.testing.assert_allclose(have, expected, rtol=1e-4, atol=1e-5)


# ------------------------------------------------------------------------------------------ PyTorch
def test_torch_key_padding_mask_fused_proven_and_exported(tmp_path):
    """``nn.TransformerEncoder(src_key_padding_mask=...)`` exported at opset 17 (testdata/make_torch_onnx.py)."""
    path = TESTDATA / "torch_encoder_padding_opset17.onnx"
    pad = np.arange(16)[None, :] >= np.array([13, 5, 9])[:, None]  # True where a token is padding
    feeds = {"input_ids": np.random.default_rng(0).integers(0, 100, (3, 16)), "padding_mask": pad}
    model = convert(path)
    assert_proven(path, model, feeds, {"MultiHeadAttention": 2, "LayerNorm": 5, "Gelu": 2})
    for fusion in attention(model):
        assert (fusion.attrs["input_layout"], fusion.attrs["num_heads"], fusion.attrs["mask_kind"]) == ("BNSD", 4, "additive")
        assert len(fusion.inputs) == 4  # the padding mask as PyTorch's exporter makes it additive (-inf)
    assert verify(path, inputs=feeds).ok
    import onnxruntime as ort

    want = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"]).run(None, feeds)
    for have, expected in zip(run_exported_onnx(model, tmp_path, feeds), want, strict=True):
        np.testing.assert_allclose(have, expected, rtol=1e-4, atol=1e-5)


# ------------------------------------------------------------------------------------------ activations
@pytest.fixture(scope="session")
def keras_cnn_pb(model_store) -> Path:
    return zoo_model(model_store, "keras_activation_cnn")


def test_keras_cnn_batch_norm_swish_hard_swish(keras_cnn_pb):
    model = convert(keras_cnn_pb)
    feeds = {"image": np.random.default_rng(4).standard_normal((3, 8, 8, 3)).astype(np.float32)}
    assert_proven(keras_cnn_pb, model, feeds, {"BatchNorm": 2, "Swish": 2, "HardSwish": 1})


def test_tf2onnx_keras_cnn_swish_hard_swish(tmp_path):
    """tf2onnx folds both BatchNormalizations (into the Conv, and into a Mul/Add of constants after the Dense),
    and writes hard_swish's shift 3 as a [1, 1, 1, 1] constant."""
    path = TESTDATA / "tf2onnx_keras_cnn.onnx"
    model = convert(path)
    feeds = {"image": np.random.default_rng(4).standard_normal((3, 8, 8, 3)).astype(np.float32)}
    assert_proven(path, model, feeds, {"Swish": 2, "HardSwish": 1})
    assert "BatchNorm" not in counts(model)
    import onnxruntime as ort

    want = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"]).run(None, feeds)
    for have, expected in zip(run_exported_onnx(model, tmp_path, feeds), want, strict=True):
        np.testing.assert_allclose(have, expected, rtol=1e-4, atol=1e-5)


def test_tf2onnx_lowered_einsum_with_another_key_order_refused(tmp_path):
    """The key's heads transposed as [0, 1, 3, 2, 4] instead of [0, 3, 1, 2, 4]: a product over other axes."""
    import onnx

    model_proto = onnx.load(str(TESTDATA / "tf2onnx_keras_encoder.onnx"))
    scores = next(n for n in model_proto.graph.node if n.name == "layer_0_1/attention_1/Mul")
    producers = {o: n for n in model_proto.graph.node for o in n.output}

    def upstream(name: str, op_type: str, perm: list[int]):
        todo, seen = [name], set()
        while todo:
            node = producers.get(todo.pop())
            if node is None or node.name in seen:
                continue
            seen.add(node.name)
            if node.op_type == op_type and [list(a.ints) for a in node.attribute if a.name == "perm"] == [perm]:
                return node
            todo.extend(node.input)
        raise AssertionError(f"no {op_type} with perm {perm} above {name}")

    key_heads = upstream(scores.input[0], "Transpose", [0, 3, 1, 2, 4])
    key_heads.attribute[0].ints[:] = [0, 1, 3, 2, 4]
    path = tmp_path / "key_order.onnx"
    onnx.save(model_proto, str(path))
    model = convert(path)
    assert [f.name for f in attention(model)] == ["layer_1_1/attention_1"]
    (reason,) = [r.reason for r in model.fusion_run.refused if r.pass_name == "MultiHeadAttentionFusion"]
    assert reason.startswith("layer_0_1/attention_1/Softmax: not an attention") and "perm [0, 1, 3, 2, 4]" in reason
