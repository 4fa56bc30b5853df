"""Small ONNX models in the forms real exporters produce, built with ``onnx.helper``.

* :func:`transformer_block`: one BERT-style encoder layer as PyTorch's exporter decomposes it at opsets
  14/17/18 — Shape→Gather→Unsqueeze→Concat→Reshape head splits, MatMul/Add projections, Transpose,
  scaled scores with a padding mask (Unsqueeze/Cast/Sub/Mul) and a causal mask (Range/Unsqueeze/
  LessOrEqual/Where/Expand), Softmax, the ReduceMean/Sub/Pow/Sqrt/Div LayerNorm (LayerNormalization at
  opset 17+ for the second one) and the Erf GELU.
* :func:`cnn`: Conv/BatchNormalization/Relu/MaxPool blocks, a residual Add, a Resize+Concat skip, Pad,
  GlobalAveragePool, a ``view(n, -1)`` Reshape chain, Flatten and Gemm.
* :func:`control_flow`: If (constant-shaped and shape-changing branches), Loop with a scan output, Scan.
* :func:`data_dependent`: NonZero, TopK, Compress, Unique, ConstantOfShape from a data value.

Weights are seeded; every model is checked by ``onnx.checker``.
"""

from __future__ import annotations

from typing import Callable

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

__all__ = ["MODELS", "cnn", "control_flow", "data_dependent", "feeds_for", "transformer_block"]

F, I64, B = TensorProto.FLOAT, TensorProto.INT64, TensorProto.BOOL


class _Builder:
    def __init__(self, seed: int = 0) -> None:
        self.nodes: list[onnx.NodeProto] = []
        self.inits: list[onnx.TensorProto] = []
        self.rng = np.random.default_rng(seed)
        self.count = 0

    def const(self, array, name: str | None = None) -> str:
        self.count += 1
        name = name or f"c{self.count}"
        self.inits.append(numpy_helper.from_array(np.asarray(array), name))
        return name

    def weight(self, *shape: int, name: str | None = None) -> str:
        return self.const((self.rng.standard_normal(shape) * 0.1).astype(np.float32), name)

    def op(self, op_type: str, inputs: list[str], n_out: int = 1, name: str | None = None, **attrs) -> str | list[str]:
        self.count += 1
        base = name or f"{op_type.lower()}_{self.count}"
        outs = [base] if n_out == 1 else [f"{base}_{i}" for i in range(n_out)]
        self.nodes.append(helper.make_node(op_type, inputs, outs, name=base, **attrs))
        return outs[0] if n_out == 1 else outs

    def model(self, name: str, inputs, outputs, opset: int, microsoft: bool = False) -> onnx.ModelProto:
        graph = helper.make_graph(self.nodes, name, inputs, outputs, self.inits)
        opsets = [helper.make_opsetid("", opset)] + ([helper.make_opsetid("com.microsoft", 1)] if microsoft else [])
        m = helper.make_model(graph, opset_imports=opsets, producer_name="pytorch-like")
        m.ir_version = 8
        # Exporters declare output types: take them from ONNX's (strict) inference, which checks the model
        # (onnx knows no com.microsoft op: those models are checked by onnxruntime loading them).
        inferred = onnx.shape_inference.infer_shapes(m, strict_mode=not microsoft, data_prop=True)
        for out, done in zip(m.graph.output, inferred.graph.output):
            out.type.CopyFrom(done.type)
        return m


def _unsqueeze(b: _Builder, x: str, axes: list[int], opset: int) -> str:
    if opset >= 13:
        return b.op("Unsqueeze", [x, b.const(np.array(axes, np.int64))])
    return b.op("Unsqueeze", [x], axes=axes)


def _reduce_mean(b: _Builder, x: str, opset: int) -> str:
    if opset >= 18:
        return b.op("ReduceMean", [x, b.const(np.array([-1], np.int64))], keepdims=1)
    return b.op("ReduceMean", [x], axes=[-1], keepdims=1)


def _layer_norm(b: _Builder, x: str, hidden: int, opset: int, fused: bool = False) -> str:
    gamma, beta = b.weight(hidden), b.weight(hidden)
    if fused:
        return b.op("LayerNormalization", [x, gamma, beta], axis=-1, epsilon=1e-5)
    mean = _reduce_mean(b, x, opset)
    d = b.op("Sub", [x, mean])
    var = _reduce_mean(b, b.op("Pow", [d, b.const(np.array(2.0, np.float32))]), opset)
    sd = b.op("Sqrt", [b.op("Add", [var, b.const(np.array(1e-5, np.float32))])])
    return b.op("Add", [b.op("Mul", [b.op("Div", [d, sd]), gamma]), beta])


def _gelu(b: _Builder, x: str) -> str:
    erf = b.op("Erf", [b.op("Div", [x, b.const(np.array(1.4142135, np.float32))])])
    return b.op("Mul", [b.op("Mul", [x, b.op("Add", [erf, b.const(np.array(1.0, np.float32))])]), b.const(np.array(0.5, np.float32))])


def _dims(b: _Builder, x: str, opset: int) -> tuple[str, str]:
    """PyTorch's ``x.size(0), x.size(1)`` as unsqueezed 1-element tensors."""
    shape = b.op("Shape", [x])
    batch = b.op("Gather", [shape, b.const(np.array(0, np.int64))], axis=0)
    seq = b.op("Gather", [shape, b.const(np.array(1, np.int64))], axis=0)
    return _unsqueeze(b, batch, [0], opset), _unsqueeze(b, seq, [0], opset)


def transformer_block(opset: int = 14, batch: int | str = 2, seq: int | str = 8, hidden: int = 32, heads: int = 4) -> onnx.ModelProto:
    b = _Builder(seed=opset)
    head = hidden // heads
    x, mask = "hidden_states", "attention_mask"
    bu, su = _dims(b, x, opset)

    def project(src: str) -> str:
        return b.op("Add", [b.op("MatMul", [src, b.weight(hidden, hidden)]), b.weight(hidden)])

    def split_heads(t: str, perm: list[int]) -> str:
        shape = b.op("Concat", [bu, su, b.const(np.array([heads], np.int64)), b.const(np.array([head], np.int64))], axis=0)
        return b.op("Transpose", [b.op("Reshape", [t, shape])], perm=perm)

    q = split_heads(project(x), [0, 2, 1, 3])
    k = split_heads(project(x), [0, 2, 3, 1])
    v = split_heads(project(x), [0, 2, 1, 3])
    scores = b.op("Div", [b.op("MatMul", [q, k]), b.const(np.array(np.sqrt(head), np.float32))])
    # padding mask: (1 - mask[:, None, None, :]) * -10000
    ext = b.op("Cast", [_unsqueeze(b, mask, [1, 2], opset)], to=F)
    pad = b.op("Mul", [b.op("Sub", [b.const(np.array(1.0, np.float32)), ext]), b.const(np.array(-10000.0, np.float32))])
    # causal mask: where(arange[None, :] <= arange[:, None], 0, -inf) expanded to (batch, 1, seq, seq)
    seq_scalar = b.op("Gather", [b.op("Shape", [x]), b.const(np.array(1, np.int64))], axis=0)
    r = b.op("Range", [b.const(np.array(0, np.int64)), seq_scalar, b.const(np.array(1, np.int64))])
    causal = b.op("LessOrEqual", [_unsqueeze(b, r, [0], opset), _unsqueeze(b, r, [1], opset)])
    neg = b.op("Where", [causal, b.const(np.array(0.0, np.float32)), b.const(np.array(-1e9, np.float32))])
    full = b.op("Concat", [bu, b.const(np.array([1], np.int64)), su, su], axis=0)
    scores = b.op("Add", [b.op("Add", [scores, pad]), b.op("Expand", [neg, full])])
    probs = b.op("Softmax", [scores], axis=-1, name="probs")
    context = b.op("Transpose", [b.op("MatMul", [probs, v])], perm=[0, 2, 1, 3])
    merged = b.op("Reshape", [context, b.op("Concat", [bu, su, b.const(np.array([hidden], np.int64))], axis=0)])
    attn = b.op("Add", [project(merged), x])
    h = _layer_norm(b, attn, hidden, opset)
    ffn = b.op("Add", [b.op("MatMul", [h, b.weight(hidden, 2 * hidden)]), b.weight(2 * hidden)])
    ffn = b.op("Add", [b.op("MatMul", [_gelu(b, ffn), b.weight(2 * hidden, hidden)]), b.weight(hidden)])
    out = _layer_norm(b, b.op("Add", [ffn, h]), hidden, opset, fused=opset >= 17)
    b.nodes.append(helper.make_node("Identity", [out], ["last_hidden_state"], name="output"))
    inputs = [helper.make_tensor_value_info(x, F, [batch, seq, hidden]), helper.make_tensor_value_info(mask, I64, [batch, seq])]
    outputs = [helper.make_tensor_value_info("last_hidden_state", F, None), helper.make_tensor_value_info(probs, F, None)]
    return b.model(f"bert_layer_opset{opset}", inputs, outputs, opset)


def cnn(opset: int = 13, batch: int | str = 1) -> onnx.ModelProto:
    b = _Builder(seed=1)
    x = "image"

    def conv_bn_relu(src: str, cin: int, cout: int, stride: int) -> str:
        y = b.op("Conv", [src, b.weight(cout, cin, 3, 3), b.weight(cout)], kernel_shape=[3, 3], pads=[1, 1, 1, 1], strides=[stride, stride])
        scale = b.const(np.abs(b.rng.standard_normal(cout)).astype(np.float32) + 0.5)
        var = b.const(np.abs(b.rng.standard_normal(cout)).astype(np.float32) + 0.5)
        y = b.op("BatchNormalization", [y, scale, b.weight(cout), b.weight(cout), var], epsilon=1e-5)
        return b.op("Relu", [y])

    y = conv_bn_relu(x, 3, 8, 1)
    y = b.op("MaxPool", [y], kernel_shape=[2, 2], strides=[2, 2])  # 16x16
    skip = y
    y = conv_bn_relu(y, 8, 8, 1)
    y = b.op("Add", [y, skip])
    down = conv_bn_relu(y, 8, 16, 2)  # 8x8
    roi = "" if opset >= 13 else b.const(np.zeros(0, np.float32))
    up = b.op("Resize", [down, roi, b.const(np.array([1, 1, 2, 2], np.float32))], mode="nearest")  # 16x16
    y = b.op("Concat", [y, up], axis=1)  # 24 channels
    y = b.op("Pad", [y, b.const(np.array([0, 0, 1, 1, 0, 0, 1, 1], np.int64))], mode="constant")  # 18x18
    y = b.op("AveragePool", [y], kernel_shape=[3, 3], strides=[3, 3])  # 6x6
    pooled = b.op("GlobalAveragePool", [y])
    shape = b.op("Shape", [pooled])
    n = _unsqueeze(b, b.op("Gather", [shape, b.const(np.array(0, np.int64))], axis=0), [0], opset)
    flat = b.op("Reshape", [pooled, b.op("Concat", [n, b.const(np.array([-1], np.int64))], axis=0)])
    logits = b.op("Gemm", [flat, b.weight(10, 24), b.weight(10)], transB=1, name="logits")
    flat2 = b.op("Flatten", [y], axis=1)
    aux = b.op("Gemm", [flat2, b.weight(24 * 36, 5), b.weight(5)], name="aux")
    probs = b.op("Softmax", [logits], axis=-1, name="probs")
    inputs = [helper.make_tensor_value_info(x, F, [batch, 3, 32, 32])]
    outputs = [helper.make_tensor_value_info(probs, F, None), helper.make_tensor_value_info(aux, F, None)]
    return b.model("cnn", inputs, outputs, opset)


def control_flow(opset: int = 16) -> onnx.ModelProto:
    b = _Builder(seed=2)
    x = "x"
    cond = b.op("Greater", [b.op("ReduceSum", [x], keepdims=0), b.const(np.array(0.0, np.float32))])
    then_g = helper.make_graph(
        [helper.make_node("Add", [x, "one"], ["then_out"])], "then", [], [helper.make_tensor_value_info("then_out", F, [2, 3])],
        [numpy_helper.from_array(np.array(1.0, np.float32), "one")],
    )
    else_g = helper.make_graph(
        [helper.make_node("Mul", [x, "two"], ["else_out"])], "else", [], [helper.make_tensor_value_info("else_out", F, [2, 3])],
        [numpy_helper.from_array(np.array(2.0, np.float32), "two")],
    )
    same = b.op("If", [cond], then_branch=then_g, else_branch=else_g, name="if_same")
    # branches of different shapes: (2, 3) vs (2, 6)
    wide = helper.make_graph(
        [helper.make_node("Concat", [x, x], ["wide_out"], axis=1)], "wide", [], [helper.make_tensor_value_info("wide_out", F, None)]
    )
    narrow = helper.make_graph([helper.make_node("Neg", [x], ["narrow_out"])], "narrow", [], [helper.make_tensor_value_info("narrow_out", F, None)])
    mixed = b.op("If", [cond], then_branch=wide, else_branch=narrow, name="if_mixed")
    # Loop: 3 trips, acc += x each trip, acc stacked as a scan output
    body = helper.make_graph(
        [
            helper.make_node("Add", ["acc_in", x], ["acc_out"]),
            helper.make_node("Identity", ["cond_in"], ["cond_out"]),
            helper.make_node("Identity", ["acc_out"], ["scan_out"]),
        ],
        "body",
        [
            helper.make_tensor_value_info("i", I64, []),
            helper.make_tensor_value_info("cond_in", B, []),
            helper.make_tensor_value_info("acc_in", F, [2, 3]),
        ],
        [
            helper.make_tensor_value_info("cond_out", B, []),
            helper.make_tensor_value_info("acc_out", F, [2, 3]),
            helper.make_tensor_value_info("scan_out", F, [2, 3]),
        ],
    )
    acc, stacked = b.op(
        "Loop", [b.const(np.array(3, np.int64)), b.const(np.array(True)), b.const(np.zeros((2, 3), np.float32))], n_out=2, body=body, name="loop"
    )
    # Scan: running sum over the rows of x
    scan_body = helper.make_graph(
        [helper.make_node("Add", ["s_in", "row"], ["s_out"]), helper.make_node("Identity", ["s_out"], ["row_out"])],
        "scan_body",
        [helper.make_tensor_value_info("s_in", F, [3]), helper.make_tensor_value_info("row", F, [3])],
        [helper.make_tensor_value_info("s_out", F, [3]), helper.make_tensor_value_info("row_out", F, [3])],
    )
    total, running = b.op("Scan", [b.const(np.zeros(3, np.float32)), x], n_out=2, body=scan_body, num_scan_inputs=1, name="scan")
    inputs = [helper.make_tensor_value_info(x, F, [2, 3])]
    outputs = [helper.make_tensor_value_info(n, F, None) for n in (same, mixed, acc, stacked, total, running)]
    return b.model("control_flow", inputs, outputs, opset)


def data_dependent(opset: int = 17) -> onnx.ModelProto:
    b = _Builder(seed=3)
    x = "x"
    nz = b.op("NonZero", [b.op("Greater", [x, b.const(np.array(0.0, np.float32))])], name="nonzero")
    values, indices = b.op("TopK", [x, b.const(np.array([2], np.int64))], n_out=2, axis=1, name="topk")
    picked = b.op("Compress", [x, b.op("Greater", [b.op("ReduceMax", [x], axes=[1], keepdims=0), b.const(np.array(0.0, np.float32))])], axis=0, name="compress")
    uniq = b.op("Unique", [b.op("Cast", [b.op("Floor", [x])], to=I64)], name="unique", sorted=1)
    filled = b.op("ConstantOfShape", [b.op("Shape", [x])], value=numpy_helper.from_array(np.array([1.5], np.float32)), name="filled")
    inputs = [helper.make_tensor_value_info(x, F, [4, 5])]
    outputs = [helper.make_tensor_value_info(n, t, None) for n, t in ((nz, I64), (values, F), (indices, I64), (picked, F), (uniq, I64), (filled, F))]
    return b.model("data_dependent", inputs, outputs, opset)


def ort_optimized_bert(batch: int | str = 2, seq: int | str = 8, hidden: int = 32, heads: int = 4, vocab: int = 50) -> onnx.ModelProto:
    """A BERT layer as onnxruntime's transformer optimizer leaves it: EmbedLayerNormalization, Attention,
    SkipLayerNormalization, BiasGelu / FastGelu / QuickGelu, FusedMatMul, MultiHeadAttention,
    SimplifiedLayerNormalization and SkipSimplifiedLayerNormalization (com.microsoft and onnxruntime's
    own default-domain ops)."""
    b = _Builder(seed=4)
    ms = {"domain": "com.microsoft"}
    I32 = TensorProto.INT32
    emb, mask_index = b.op(
        "EmbedLayerNormalization",
        ["input_ids", "segment_ids", b.weight(vocab, hidden), b.weight(16, hidden), b.weight(2, hidden), b.weight(hidden), b.weight(hidden), "mask"],
        n_out=2, name="embed", epsilon=1e-5, **ms,
    )
    att = b.op("Attention", [emb, b.weight(hidden, 3 * hidden), b.weight(3 * hidden), mask_index], name="attention", num_heads=heads, **ms)
    ln1 = b.op("SkipLayerNormalization", [b.op("MatMul", [att, b.weight(hidden, hidden)]), emb, b.weight(hidden), b.weight(hidden), b.weight(hidden)], name="skip_ln1", **ms)
    up = b.op("BiasGelu", [b.op("MatMul", [ln1, b.weight(hidden, 2 * hidden)]), b.weight(2 * hidden)], name="bias_gelu", **ms)
    up = b.op("FastGelu", [up, b.weight(2 * hidden)], name="fast_gelu", **ms)
    down = b.op("FusedMatMul", [b.op("QuickGelu", [up], name="quick_gelu", **ms), b.weight(hidden, 2 * hidden)], name="fused_matmul", transB=1, alpha=0.5, **ms)
    ln2 = b.op("SkipLayerNormalization", [down, ln1, b.weight(hidden), b.weight(hidden)], name="skip_ln2", epsilon=1e-5, **ms)
    q, k, v = (b.op("MatMul", [ln2, b.weight(hidden, hidden)]) for _ in range(3))
    mha = b.op("MultiHeadAttention", [q, k, v], name="mha", num_heads=heads, **ms)
    rms = b.op("SimplifiedLayerNormalization", [mha, b.weight(hidden)], name="rms", axis=-1, epsilon=1e-6)
    out = b.op("SkipSimplifiedLayerNormalization", [rms, ln2, b.weight(hidden)], name="skip_rms", **ms)
    inputs = [helper.make_tensor_value_info(n, I32, [batch, seq]) for n in ("input_ids", "segment_ids", "mask")]
    outputs = [helper.make_tensor_value_info(out, F, None), helper.make_tensor_value_info(mask_index, I32, None)]
    return b.model("bert_onnxruntime_optimized", inputs, outputs, 17, microsoft=True)


MODELS: dict[str, Callable[[], onnx.ModelProto]] = {
    "bert_opset14": lambda: transformer_block(14),
    "bert_opset17": lambda: transformer_block(17),
    "bert_opset18": lambda: transformer_block(18),
    "cnn_opset13": lambda: cnn(13),
    "cnn_opset11": lambda: cnn(11),
    "cnn_opset15": lambda: cnn(15),
    "control_flow": control_flow,
    "data_dependent": data_dependent,
    "bert_onnxruntime_optimized": ort_optimized_bert,
}


def feeds_for(model: onnx.ModelProto, input_shapes: dict[str, tuple[int, ...]] | None = None, seed: int = 0) -> dict[str, np.ndarray]:
    """Seeded inputs for every graph input (an attention mask of ones and zeros for int64 inputs)."""
    rng = np.random.default_rng(seed)
    inits = {t.name for t in model.graph.initializer}
    feeds = {}
    for vi in model.graph.input:
        if vi.name in inits:
            continue
        shape = (input_shapes or {}).get(vi.name) or tuple(d.dim_value for d in vi.type.tensor_type.shape.dim)
        elem = vi.type.tensor_type.elem_type
        if vi.name in ("input_ids", "segment_ids"):
            feeds[vi.name] = rng.integers(0, 2, shape).astype(helper.tensor_dtype_to_np_dtype(elem))
        elif elem in (I64, TensorProto.INT32):
            feeds[vi.name] = (rng.random(shape) > 0.2).astype(helper.tensor_dtype_to_np_dtype(elem))
        else:
            feeds[vi.name] = rng.standard_normal(shape).astype(helper.tensor_dtype_to_np_dtype(elem))
    return feeds
