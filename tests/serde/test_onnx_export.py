"""IR → ONNX export: models onnxruntime runs like their source, structural TF exports that pass the full checker,
fused ops as standard ONNX ops (native and decomposed) checked against numpy, the ``scopefusion`` fallback,
errors, and the CLI end to end."""

from __future__ import annotations

import importlib
import math
import subprocess
import sys

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import helper

from scopefusion import SerdeError
from scopefusion import dtypes as D
from scopefusion.convert import convert
from scopefusion.dialects.fused import definitions as fused_definitions
from scopefusion.ir.attrs import FLOAT, LIST_INT, AttrValue, NamedAttrs
from scopefusion.ir.core_ops import core_ops as builtin_ops
from scopefusion.ir.graph import Graph
from scopefusion.ir.opdef import FollowType, OpDef, OpRegistry
from scopefusion.ir.types import IRContext
from scopefusion.serde.onnx_export import graph_to_onnx, model_to_onnx
from scopefusion.serde.onnx_fused import FusedExporterRegistry, default_fused_exporters
from scopefusion.serde.onnx_lowering import LoweringRegistry

PROVIDERS = ["CPUExecutionProvider"]
ONNX_FIXTURES = ["onnx_attention", "onnx_control_flow", "onnx_messy", "onnx_function", "onnx_external"]
# onnxruntime refuses this source itself (two nodes named "dup"); the ONNX reference evaluator runs it.
# The export renames the second node, so onnxruntime runs the export.
REFERENCE_ONLY = {"onnx_messy"}


def run_ort(model: onnx.ModelProto | bytes | str, feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
    data = model.SerializeToString() if isinstance(model, onnx.ModelProto) else model
    return ort.InferenceSession(data, providers=PROVIDERS).run(None, feeds)


def seeded_feeds(model: onnx.ModelProto, seed: int = 0) -> dict[str, np.ndarray]:
    """Random inputs: floats N(0, 1), booleans, small positive ints (loop trip counts); symbolic dims 2."""
    rng = np.random.default_rng(seed)
    initializers = {t.name for t in model.graph.initializer}
    feeds = {}
    for vi in model.graph.input:
        if vi.name in initializers:
            continue
        tensor = vi.type.tensor_type
        shape = [d.dim_value if d.HasField("dim_value") else 2 for d in tensor.shape.dim]
        dtype = helper.tensor_dtype_to_np_dtype(tensor.elem_type)
        if dtype == np.bool_:
            feeds[vi.name] = np.asarray(rng.random(shape) < 0.5)
        elif np.issubdtype(dtype, np.integer):
            feeds[vi.name] = np.asarray(rng.integers(1, 4, shape)).astype(dtype)
        else:
            feeds[vi.name] = np.asarray(rng.standard_normal(shape)).astype(dtype)
    return feeds


def exported(model, **options) -> onnx.ModelProto:
    proto = model_to_onnx(model, **options)
    onnx.checker.check_model(proto, full_check=True)
    return proto


# ============================================================================= ONNX-born models
@pytest.mark.parametrize("fixture", ONNX_FIXTURES)
def test_onnx_born_models_run_like_their_source(fixture, request):
    path = request.getfixturevalue(fixture)
    source = onnx.load(str(path))
    model = convert(path)
    proto = onnx.load_from_string(model.to_bytes("onnx"))
    onnx.checker.check_model(proto, full_check=True)
    initializers = {t.name for t in source.graph.initializer}
    assert [i.name for i in proto.graph.input] == [i.name for i in source.graph.input if i.name not in initializers]
    assert [o.name for o in proto.graph.output] == [o.name for o in source.graph.output]
    assert {o.domain: o.version for o in proto.opset_import}[""] == {o.domain: o.version for o in source.opset_import}[""]
    feeds = seeded_feeds(source)
    if fixture in REFERENCE_ONLY:
        from onnx.reference import ReferenceEvaluator

        expected = ReferenceEvaluator(source).run(None, feeds)
    else:
        expected = run_ort(str(path), feeds)
    got = run_ort(proto, feeds)
    assert len(got) == len(expected)
    for g, e in zip(got, expected):
        np.testing.assert_allclose(g, e, rtol=1e-4, atol=1e-4)


def test_onnx_export_keeps_names_and_symbolic_dims_and_is_deterministic(onnx_attention, tmp_path):
    model = convert(onnx_attention)
    data = model.to_bytes("onnx")
    assert model.to_bytes("onnx") == data
    assert convert(onnx_attention).to_bytes("onnx") == data
    model.save(tmp_path / "m.onnx", format="onnx")
    assert (tmp_path / "m.onnx").read_bytes() == data
    proto = onnx.load_from_string(data)
    dims = proto.graph.input[0].type.tensor_type.shape.dim
    assert [d.dim_param or d.dim_value for d in dims] == ["batch", 4, 16]
    names = {o for n in proto.graph.node for o in n.output} | {t.name for t in proto.graph.initializer}
    assert "/encoder/layers.0/Add_output_0" in names  # a source tensor name, kept
    assert proto.producer_name == "scopefusion" and proto.graph.name == "attention_block"


def test_bodies_read_enclosing_tensors_by_name(onnx_control_flow):
    proto = exported(convert(onnx_control_flow))
    bodies = {n.op_type: {a.name: a.g for a in n.attribute if a.type == onnx.AttributeProto.GRAPH} for n in proto.graph.node}
    assert [list(g.input) for g in bodies["If"].values()] == [[], []]
    assert [i.name for i in bodies["Loop"]["body"].input] == ["iter", "cond_in", "acc_in"]
    assert list(bodies["If"]["then_branch"].node[0].input) == ["x", "shifted"]  # outer-scope reads
    assert list(bodies["Loop"]["body"].node[1].input) == ["acc_in", "shifted"]


def test_local_functions_are_written_back(onnx_function):
    proto = exported(convert(onnx_function))
    (function,) = proto.functions
    assert (function.domain, function.name, list(function.attribute)) == ("custom", "ScaledRelu", ["alpha"])
    ref = [a for n in function.node for a in n.attribute if a.ref_attr_name]
    assert [(a.name, a.ref_attr_name, a.type) for a in ref] == [("value_float", "alpha", onnx.AttributeProto.FLOAT)]
    assert {o.domain for o in proto.opset_import} == {"", "custom"}


def test_an_onnx_model_is_exported_at_its_own_opset_only(onnx_messy):
    model = convert(onnx_messy)
    assert {o.domain: o.version for o in model_to_onnx(model).opset_import} == {"": 17}
    with pytest.raises(SerdeError, match="exported at that opset"):
        model_to_onnx(model, opset=20)


def test_cli_converts_to_onnx(onnx_attention, tmp_path):
    out = tmp_path / "m.onnx"
    proc = subprocess.run([sys.executable, "-m", "scopefusion", "convert", str(onnx_attention), "-o", str(out),
                           "--format", "onnx", "-q"], capture_output=True, text=True)  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    proto = onnx.load(str(out))
    onnx.checker.check_model(proto, full_check=True)
    feeds = seeded_feeds(proto, seed=3)
    np.testing.assert_allclose(run_ort(proto, feeds)[0], run_ort(str(onnx_attention), feeds)[0], rtol=1e-4, atol=1e-4)


# ============================================================================= TF-born models
@pytest.mark.parametrize("fixture", ["tf_bert_pb", "tf_mobilenet_pb"])
def test_tf_born_models_lower_to_the_default_domain_and_pass_the_full_checker(fixture, request):
    model = convert(request.getfixturevalue(fixture))
    proto = exported(model)
    assert {o.domain: o.version for o in proto.opset_import} == {"": 23}
    assert {n.domain for n in proto.graph.node} == {""}
    assert [i.name for i in proto.graph.input] == [v.producer.attrs.get("_input_name") for v in model.graph.inputs]
    assert [o.name for o in proto.graph.output] == list(model.graph.attrs.get("_output_names"))
    assert all(i.type.tensor_type.elem_type for i in list(proto.graph.input) + list(proto.graph.output))


@pytest.mark.parametrize("fixture", ["tf_bert_pb", "tf_mobilenet_pb"])
def test_tf_born_models_keep_their_tf_ops_structurally_on_request(fixture, request):
    model = convert(request.getfixturevalue(fixture))
    proto = exported(model, lowerings=LoweringRegistry(), keep_tf_ops=True, optimize=False)
    assert {o.domain: o.version for o in proto.opset_import} == {"": 23, "tf": 1}
    tf_ops = sorted(n.op_type for n in model.graph.nodes if n.dialect == "tf")
    assert sorted(n.op_type for n in proto.graph.node if n.domain == "tf") == tf_ops


# ============================================================================= fused ops, by hand
def graph_of(op_type: str, inputs: list, attrs: dict, out: np.ndarray | list[np.ndarray], registry: OpRegistry | None = None) -> Graph:
    """``main(x...) = fused.<op_type>(inputs)``: an input is ("feed", array) for a graph input, else a constant;
    ``out`` the output (or outputs), for their types."""
    ctx = IRContext()
    g = Graph("main", ctx, registry)
    values = []
    for k, item in enumerate(inputs):
        if item is None:
            values.append(None)
        elif isinstance(item, tuple):
            array = item[1]
            values.append(g.add_input(f"in{k}", ctx.tensor(D.from_numpy(array.dtype), array.shape)))
        else:
            values.append(g.add_const(np.asarray(item), f"c{k}"))
    outs = out if isinstance(out, list) else [out]
    node = g.add_node(f"fused.{op_type}", values, name="f", attrs=attrs, allow_unknown=registry is None,
                      output_types=[ctx.tensor(D.from_numpy(o.dtype), o.shape) for o in outs])  # fmt: skip
    g.set_outputs(node.outputs)
    return g


def run_graph(g: Graph, feeds: dict[str, np.ndarray], opset: int, **options) -> tuple[np.ndarray, onnx.ModelProto]:
    proto = graph_to_onnx(g, opset=opset, **options)
    onnx.checker.check_model(proto, full_check=True)
    return run_ort(proto, feeds)[0], proto


def _layer_norm(x, axis, eps, gamma, beta):
    axes = tuple(range(axis % x.ndim, x.ndim))
    centered = x - x.mean(axis=axes, keepdims=True)
    return centered / np.sqrt((centered**2).mean(axis=axes, keepdims=True) + eps) * gamma + beta


def _sdpa(q, k, v, mask, scale):
    logits = scale * q @ np.swapaxes(k, -1, -2) + (0 if mask is None else mask)
    w = np.exp(logits - logits.max(-1, keepdims=True))
    return (w / w.sum(-1, keepdims=True)) @ v


def _bsh(q, k, v, mask, heads, size, scale, w):
    def split(x, role):
        y = x @ w[f"{role}_weight"] + w[f"{role}_bias"]
        return y.reshape(y.shape[0], y.shape[1], heads, size).transpose(0, 2, 1, 3)

    ctx = _sdpa(split(q, "query"), split(k, "key"), split(v, "value"), mask, scale)
    return ctx.transpose(0, 2, 1, 3).reshape(q.shape[0], q.shape[1], -1) @ w["out_weight"] + w["out_bias"]


_ERF = np.vectorize(math.erf)
_RNG = np.random.default_rng(7)


def _r(*shape):
    return _RNG.standard_normal(shape).astype(np.float32)


def fused_cases():
    """(id, fused type, inputs, attrs, reference output, {opset: ONNX op that must appear, or None})."""
    x = _r(2, 3, 8)
    g8, b8, g38 = _r(8), _r(8), _r(3, 8)
    yield "layer_norm", "LayerNorm", [("feed", x), g8, b8], {"begin_norm_axis": -1, "epsilon": 1e-5}, \
        _layer_norm(x, -1, 1e-5, g8, b8), {17: "LayerNormalization", 14: "ReduceMean"}
    yield "layer_norm_keras_params", "LayerNorm", [("feed", x), g8.reshape(1, 1, 8), b8.reshape(1, 1, 8)], \
        {"begin_norm_axis": -1, "epsilon": 1e-3}, _layer_norm(x, -1, 1e-3, g8, b8), {17: "LayerNormalization"}
    yield "layer_norm_broadcast_params", "LayerNorm", [("feed", x), g38, b8], {"begin_norm_axis": 2, "epsilon": 1e-5}, \
        _layer_norm(x, -1, 1e-5, g38, b8), {17: "LayerNormalization"}
    yield "layer_norm_two_axes", "LayerNorm", [("feed", x), g38, g38], {"begin_norm_axis": 1, "epsilon": 1e-5}, \
        _layer_norm(x, 1, 1e-5, g38, g38), {17: "LayerNormalization", 18: "LayerNormalization"}
    for approx in ("none", "tanh"):
        ref = 0.5 * x * (1 + (_ERF(x / math.sqrt(2)) if approx == "none" else np.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x**3))))
        yield f"gelu_{approx}", "Gelu", [("feed", x)], {"approximate": approx}, ref, {20: "Gelu", 17: "Erf" if approx == "none" else "Tanh"}
    yield "hard_swish", "HardSwish", [("feed", x * 4)], {}, x * 4 * np.clip(x * 4 + 3, 0, 6) / 6, {14: "HardSwish", 13: "HardSigmoid"}
    yield "swish", "Swish", [("feed", x)], {"scale": 1.5}, x / (1 + np.exp(-1.5 * x)), {24: "Swish", 17: "Sigmoid"}
    yield "clip", "Clip", [("feed", x)], {"min": -0.5, "max": 0.25}, np.clip(x, -0.5, 0.25), {13: "Clip", 10: "Clip"}
    ss = (x**2).sum(axis=(1, 2), keepdims=True)
    yield "l2_normalize", "L2Normalize", [("feed", x)], {"axis": (1, 2), "epsilon": 1e-12}, x / np.sqrt(np.maximum(ss, 1e-12)), \
        {18: "ReduceSumSquare", 17: "ReduceSumSquare"}
    nhwc, c3 = _r(2, 4, 5, 3), _r(3)
    inorm = _layer_norm_axes(nhwc, (1, 2), 1e-6) * c3 + c3[::-1]
    yield "instance_norm_nhwc", "InstanceNorm", [("feed", nhwc), c3, c3[::-1].copy()], {"data_format": "NHWC", "epsilon": 1e-6}, \
        inorm, {17: "InstanceNormalization"}
    nchw = np.ascontiguousarray(nhwc.transpose(0, 3, 1, 2))
    yield "instance_norm_nchw", "InstanceNorm", [("feed", nchw), c3.reshape(3, 1, 1), c3[::-1].reshape(3, 1, 1)], \
        {"data_format": "NCHW", "epsilon": 1e-6}, inorm.transpose(0, 3, 1, 2), {17: "InstanceNormalization"}
    mean, var = _r(3), np.abs(_r(3)) + 0.5
    bnorm = (nhwc - mean) / np.sqrt(var + 1e-3) * c3 + 0.5
    yield "batch_norm_nhwc", "BatchNorm", [("feed", nhwc), c3, np.full(1, 0.5, np.float32), mean, var], \
        {"data_format": "NHWC", "epsilon": 1e-3}, bnorm, {17: "BatchNormalization", 9: "BatchNormalization"}
    yield "batch_norm_nchw", "BatchNorm", [("feed", nchw), c3, np.full(3, 0.5, np.float32), mean, var], \
        {"data_format": "NCHW", "epsilon": 1e-3}, bnorm.transpose(0, 3, 1, 2), {17: "BatchNormalization"}
    b, s, heads, size = 2, 5, 2, 3
    q, k, v = _r(b, s, 4), _r(b, s, 4), _r(b, s, 4)
    mask = np.where(_RNG.random((b, 1, 1, s)) < 0.3, -1e4, 0).astype(np.float32)
    weights = {f"{r}_weight": _r(4, heads * size) for r in ("query", "key", "value")}
    weights.update({f"{r}_bias": _r(heads * size) for r in ("query", "key", "value")})
    weights.update(out_weight=_r(heads * size, 7), out_bias=_r(7))
    attrs = {"input_layout": "BSH", "num_heads": heads, "head_size": size, "scale": 0.4, **weights}
    ref = _bsh(q, k, v, mask, heads, size, 0.4, weights)
    yield "mha_bsh", "MultiHeadAttention", [("feed", q), ("feed", k), ("feed", v), mask], attrs, ref, \
        {23: "Attention", 17: "Softmax"}
    flat = dict(attrs, query_length=s, key_length=s)
    yield "mha_bsh_flat", "MultiHeadAttention", [("feed", q.reshape(b * s, 4)), ("feed", k.reshape(b * s, 4)), ("feed", v.reshape(b * s, 4)), mask], \
        flat, ref.reshape(b * s, 7), {23: "Attention", 17: "Softmax"}
    qh, kh, vh = _r(b, heads, s, size), _r(b, heads, s, size), _r(b, heads, s, size)
    bnsd = {"input_layout": "BNSD", "num_heads": heads, "head_size": size, "scale": 0.5}
    yield "mha_bnsd", "MultiHeadAttention", [("feed", qh), ("feed", kh), ("feed", vh), mask], bnsd, \
        _sdpa(qh, kh, vh, mask, 0.5), {23: "Attention", 17: "Softmax"}
    fold = [t.reshape(b * heads, s, size) for t in (qh, kh, vh)]
    mask3 = np.repeat(mask[:, 0], heads, axis=0)  # [b*heads, 1, s]
    yield "mha_bnsd_folded_heads", "MultiHeadAttention", [("feed", fold[0]), ("feed", fold[1]), ("feed", fold[2]), mask3], bnsd, \
        _sdpa(*fold, mask3, 0.5), {23: "Attention", 17: "Softmax"}
    keep = _RNG.random((b, 1, 1, s)) > 0.4
    keep[..., 0] = True  # every query attends to at least one key
    boolean = dict(attrs, mask_kind="boolean", mask_fill=-1e30)
    yield "mha_bsh_boolean_mask", "MultiHeadAttention", [("feed", q), ("feed", k), ("feed", v), ("feed", keep)], boolean, \
        _bsh(q, k, v, np.where(keep, 0, -1e30), heads, size, 0.4, weights), {23: "Attention", 17: "Where"}
    causal = np.triu(np.full((s, s), -1e30), 1)
    yield "mha_bsh_causal", "MultiHeadAttention", [("feed", q), ("feed", k), ("feed", v)], dict(attrs, causal=1), \
        _bsh(q, k, v, causal, heads, size, 0.4, weights), {23: "Attention"}


def _layer_norm_axes(x, axes, eps):
    centered = x - x.mean(axis=axes, keepdims=True)
    return centered / np.sqrt((centered**2).mean(axis=axes, keepdims=True) + eps)


FUSED_CASES = [pytest.param(case, id=case[0]) for case in fused_cases()]
FUSED_DEFS = {d.name: d for d in fused_definitions()}


def check_against_definition(op_type: str, inputs: list, attrs: dict, expected: list[np.ndarray]) -> None:
    """Where the fused op is defined, its own reference kernel agrees with the formula the test checks against."""
    opdef = FUSED_DEFS.get(op_type)
    if opdef is None or opdef.reference is None:
        return
    arrays = [item[1] if isinstance(item, tuple) else item for item in inputs]
    for got, want in zip(opdef.reference(arrays, dict(attrs)), expected):
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5, err_msg=f"fused.{op_type}'s reference")
NATIVE_SINCE = {"LayerNormalization": 17, "Gelu": 20, "Attention": 23, "Swish": 24, "HardSwish": 14}


@pytest.mark.parametrize("case", FUSED_CASES)
def test_fused_ops_map_to_standard_onnx_at_each_opset(case):
    _, op_type, inputs, attrs, reference, expect = case
    check_against_definition(op_type, inputs, attrs, [reference])
    g = graph_of(op_type, inputs, attrs, reference.astype(np.float32))
    feeds = {f"in{k}": item[1] for k, item in enumerate(inputs) if isinstance(item, tuple)}
    for opset, onnx_op in expect.items():
        got, proto = run_graph(g, feeds, opset)
        ops = {n.op_type for n in proto.graph.node}
        assert onnx_op in ops and "scopefusion" not in {n.domain for n in proto.graph.node}, (opset, ops)
        assert all(NATIVE_SINCE[op] <= opset for op in ops & set(NATIVE_SINCE)), (opset, ops)
        np.testing.assert_allclose(got, reference, rtol=1e-4, atol=1e-4, err_msg=f"opset {opset}")


@pytest.mark.parametrize("fixture", ["tf_convnet_pb", "tf_mobilenet_pb"])
def test_batch_norm_parameters_taken_as_they_are_export_what_the_full_checks_export(fixture, request, monkeypatch):
    from scopefusion.serde import onnx_fused_ops

    model = convert(request.getfixturevalue(fixture))
    taken = []
    real = onnx_fused_ops._channel_vector
    monkeypatch.setattr(onnx_fused_ops, "_channel_vector", lambda t, c: taken.append(real(t, c)) or taken[-1])
    fast = model_to_onnx(model).SerializeToString()
    assert any(taken)  # the model has [C] parameters, taken without the checks
    monkeypatch.setattr(onnx_fused_ops, "_channel_vector", lambda t, c: False)
    assert model_to_onnx(model).SerializeToString() == fast


def _lstm(x, h, c, w, b, time_major, sequences):
    """The fused DynamicRNN: gates i, j, f, o from [x_t, h] @ w + b."""
    sig = lambda t: 1 / (1 + np.exp(-t))  # noqa: E731
    seq = x if time_major else x.swapaxes(0, 1)
    ys = []
    for x_t in seq:
        i, j, f, o = np.split(np.concatenate([x_t, h], axis=1) @ w + b, 4, axis=1)
        c = sig(f) * c + sig(i) * np.tanh(j)
        h = sig(o) * np.tanh(c)
        ys.append(h)
    y = np.stack(ys) if time_major else np.stack(ys).swapaxes(0, 1)
    return [y if sequences else h, h, c]


@pytest.mark.parametrize("time_major, sequences, opset", [(False, True, 17), (True, True, 12), (False, False, 17)])
def test_dynamic_rnn_maps_to_lstm(time_major, sequences, opset):
    batch, steps, features, hidden = 2, 5, 3, 4
    x = _r(steps, batch, features) if time_major else _r(batch, steps, features)
    h0, c0, w, b = _r(batch, hidden), _r(batch, hidden), _r(features + hidden, 4 * hidden) * 0.5, _r(4 * hidden)
    attrs = {"hidden_size": hidden, "w": w, "b": b, "time_major": time_major, "return_sequences": sequences}
    expected = [t.astype(np.float32) for t in _lstm(x, h0, c0, w, b, time_major, sequences)]
    check_against_definition("DynamicRNN", [("feed", x), h0, c0], attrs, expected)
    g = graph_of("DynamicRNN", [("feed", x), ("feed", h0), ("feed", c0)], attrs, expected)
    proto = graph_to_onnx(g, opset=opset)
    onnx.checker.check_model(proto, full_check=True)
    assert [n.op_type for n in proto.graph.node].count("LSTM") == 1
    got = run_ort(proto, {"in0": x, "in1": h0, "in2": c0})
    for gv, ev in zip(got, expected):
        np.testing.assert_allclose(gv, ev, rtol=1e-4, atol=1e-5)
    g.set_outputs(g.outputs[2:])  # only the final cell state is read: LSTM gives Y_c alone
    (lstm,) = [n for n in graph_to_onnx(g, opset=opset).graph.node if n.op_type == "LSTM"]
    assert [bool(name) for name in lstm.output] == [False, False, True]


def _gru(x, h, w_x, w_h, b_x, b_h, reset_after, time_major, sequences):
    """The fused DynamicGRU: blocks z, r, n; the reset gate after (reset_after) or before the recurrent product."""
    sig = lambda t: 1 / (1 + np.exp(-t))  # noqa: E731
    n_h = h.shape[1]
    ys = []
    for x_t in x if time_major else x.swapaxes(0, 1):
        gx, gh = x_t @ w_x + b_x, h @ w_h + b_h
        z, r = sig(gx[:, :n_h] + gh[:, :n_h]), sig(gx[:, n_h : 2 * n_h] + gh[:, n_h : 2 * n_h])
        recurrent = r * gh[:, 2 * n_h :] if reset_after else (r * h) @ w_h[:, 2 * n_h :] + b_h[2 * n_h :]
        h = z * h + (1 - z) * np.tanh(gx[:, 2 * n_h :] + recurrent)
        ys.append(h)
    y = np.stack(ys) if time_major else np.stack(ys).swapaxes(0, 1)
    return [y if sequences else h, h]


@pytest.mark.parametrize("reset_after, time_major, sequences", [(True, False, True), (False, True, False)])
def test_dynamic_gru_maps_to_gru(reset_after, time_major, sequences):
    batch, steps, features, hidden = 2, 4, 3, 5
    x = _r(steps, batch, features) if time_major else _r(batch, steps, features)
    h0, w_x, w_h, b_x, b_h = _r(batch, hidden), _r(features, 3 * hidden), _r(hidden, 3 * hidden) * 0.5, _r(3 * hidden), _r(3 * hidden)
    attrs = {"hidden_size": hidden, "w_input": w_x, "w_hidden": w_h, "b_input": b_x, "b_hidden": b_h,
             "reset_after": reset_after, "time_major": time_major, "return_sequences": sequences}  # fmt: skip
    expected = [t.astype(np.float32) for t in _gru(x, h0, w_x, w_h, b_x, b_h, reset_after, time_major, sequences)]
    check_against_definition("DynamicGRU", [("feed", x), h0], attrs, expected)
    g = graph_of("DynamicGRU", [("feed", x), ("feed", h0)], attrs, expected)
    proto = graph_to_onnx(g, opset=14)
    onnx.checker.check_model(proto, full_check=True)
    (node,) = [n for n in proto.graph.node if n.op_type == "GRU"]
    assert {a.name: a.i for a in node.attribute}.get("linear_before_reset", 0) == int(reset_after)
    for gv, ev in zip(run_ort(proto, {"in0": x, "in1": h0}), expected):
        np.testing.assert_allclose(gv, ev, rtol=1e-4, atol=1e-5)


def test_standard_ops_appear_only_from_their_opset():
    x = _r(2, 8)
    g = graph_of("Gelu", [("feed", x)], {"approximate": "none"}, x)
    ops = {opset: {n.op_type for n in graph_to_onnx(g, opset=opset).graph.node} for opset in (19, 20)}
    assert "Gelu" not in ops[19] and ops[20] == {"Gelu"}


# ============================================================================= fallback and registration
def frobnicate_registry() -> OpRegistry:
    op = OpDef("Frobnicate", "fused").input("x").output("y", follow=("x", FollowType.ALL))
    op.attr("alpha", FLOAT).attr("taps", LIST_INT, default=())
    return OpRegistry(builtin_ops() + [op])


def test_a_fused_op_without_exporter_goes_to_the_scopefusion_domain():
    x = _r(2, 3)
    g = graph_of("Frobnicate", [("feed", x)], {"alpha": 0.5, "taps": (1, 2), "_fusion_rule": "FrobRule"}, x, frobnicate_registry())
    proto = graph_to_onnx(g, opset=17)
    onnx.checker.check_model(proto, full_check=True)
    (node,) = proto.graph.node
    assert (node.domain, node.op_type) == ("scopefusion", "Frobnicate")
    attrs = {a.name: helper.get_attribute_value(a) for a in node.attribute}
    assert attrs == {"alpha": 0.5, "taps": [1, 2]}
    assert "no exporter is registered" in node.doc_string and "fused by FrobRule" in node.doc_string
    assert {o.domain: o.version for o in proto.opset_import} == {"": 17, "scopefusion": 1}


def test_a_declined_fused_op_keeps_nothing_and_records_why():
    x = _r(2, 4, 5, 3)
    # gamma [1, 1, 1, 3] is per channel (reshaped first), beta [4, 1, 1] varies along H: declined after that.
    g = graph_of("InstanceNorm", [("feed", x), _r(1, 1, 1, 3), _r(4, 1, 1)], {"data_format": "NHWC", "epsilon": 1e-6}, x)
    proto = graph_to_onnx(g, opset=17)
    onnx.checker.check_model(proto, full_check=True)
    assert [(n.domain, n.op_type) for n in proto.graph.node] == [("scopefusion", "InstanceNorm")]
    assert "input 2 of shape [4, 1, 1] varies along an axis other than the channels" in proto.graph.node[0].doc_string
    assert [t.name for t in proto.graph.initializer] == ["c1", "c2"]
    g = graph_of("LayerNorm", [("feed", x), _r(3), _r(3)], {"begin_norm_axis": -1}, x)
    assert "attribute 'epsilon' is not set" in graph_to_onnx(g, opset=17).graph.node[0].doc_string


def test_a_mapping_is_one_registration():
    def frobnicate(e):
        scaled = e.op("Mul", [e.input(0), e.scalar(e.attr("alpha"), "alpha")])[0]
        e.op("Relu", [scaled], outputs=[e.outputs[0]])

    exporters = default_fused_exporters()
    exporters.register("Frobnicate", frobnicate)
    with pytest.raises(SerdeError, match="has an ONNX exporter already"):
        exporters.register("Frobnicate", frobnicate)
    x = _r(2, 3)
    g = graph_of("Frobnicate", [("feed", x)], {"alpha": 2.0, "taps": ()}, x, frobnicate_registry())
    got, proto = run_graph(g, {"in0": x}, 17, exporters=exporters)
    np.testing.assert_allclose(got, np.maximum(2 * x, 0), rtol=1e-6)
    assert {o.domain for o in proto.opset_import} == {""}
    assert "Frobnicate" not in default_fused_exporters()


def test_a_change_to_one_exporter_registry_reaches_no_other():
    first, second = default_fused_exporters(), default_fused_exporters()
    builtin = first.get("LayerNorm")
    assert builtin is not None and second.get("LayerNorm") is builtin
    first.remove("LayerNorm")
    second.register("Gelu", lambda e: None, replace=True)
    assert "LayerNorm" not in first and second.get("LayerNorm") is builtin
    fresh = default_fused_exporters()
    assert fresh.get("LayerNorm") is builtin and fresh.get("Gelu") is first.get("Gelu") is not second.get("Gelu")
    assert fresh.types() == sorted(set(first.types()) | {"LayerNorm"})


def test_exporter_bugs_are_serde_errors_naming_the_node():
    x = _r(2, 3)
    g = graph_of("Frobnicate", [("feed", x)], {"alpha": 2.0}, x, frobnicate_registry())
    broken = FusedExporterRegistry([("Frobnicate", lambda e: 1 / 0)])
    with pytest.raises(SerdeError, match=r"node 'f' \(fused.Frobnicate\) in graph 'main'.*ZeroDivisionError"):
        graph_to_onnx(g, exporters=broken)
    lazy = FusedExporterRegistry([("Frobnicate", lambda e: e.op("Relu", [e.input(0)]))])
    with pytest.raises(SerdeError, match="did not write output 'f'"):
        graph_to_onnx(g, exporters=lazy)


# ============================================================================= TF structure and errors
def tf_graph() -> tuple[Graph, IRContext]:
    ctx = IRContext()
    g = Graph("main", ctx)
    f32 = ctx.tensor(D.FLOAT32, (3,))
    x = g.add_input("x", f32)
    enter = g.add_node("tf.Enter", [x], name="Enter", attrs={"frame_name": "loop"}, output_types=[f32], allow_unknown=True)
    merge = g.add_node("tf.Merge", [enter.outputs[0], None], name="Merge", output_types=[f32], allow_unknown=True)
    noop = g.add_node("tf.NoOp", [], name="NoOp", num_outputs=0, control_inputs=[merge], allow_unknown=True)
    step = g.add_node("tf.NextIteration", [merge.outputs[0]], name="NextIteration", output_types=[f32],
                      control_inputs=[noop], allow_unknown=True)  # fmt: skip
    step.outputs[0].meta["back_edge"] = True
    merge.replace_input_with(1, step.outputs[0])
    out = g.add_node("tf.Exit", [merge.outputs[0]], name="Exit", output_types=[f32], allow_unknown=True)
    g.set_outputs(out.outputs)
    return g, ctx


def test_tf_back_edges_control_inputs_and_attribute_kinds_have_an_onnx_form():
    g, ctx = tf_graph()
    enter = g.node("Enter")
    enter.set_attr("T", D.FLOAT32)
    enter.set_attr("Tq", D.by_name("qint8"))
    enter.set_attr("flag", True)
    enter.set_attr("output_shapes", ((2, 3), (4,)))
    enter.set_attr("empty", AttrValue(LIST_INT, ()))
    proto = graph_to_onnx(g, keep_tf_ops=True, lowerings=LoweringRegistry())
    onnx.checker.check_model(proto, full_check=True)
    nodes = {n.name: n for n in proto.graph.node}
    assert list(nodes["Merge"].input) == ["Enter"]
    attrs = {n: {a.name: helper.get_attribute_value(a) for a in node.attribute} for n, node in nodes.items()}
    assert attrs["Merge"]["_back_edges"] == [b"1:NextIteration"]
    assert attrs["NextIteration"]["_control_inputs"] == [b"NoOp"] and list(nodes["NoOp"].output) == ["NoOp:control"]
    e = attrs["Enter"]
    assert (e["T"], e["Tq"], e["flag"], e["empty"], e["frame_name"]) == (onnx.TensorProto.FLOAT, b"qint8", 1, [], b"loop")
    assert [onnx.numpy_helper.to_array(t).tolist() for t in e["output_shapes"]] == [[2, 3], [4]]


def test_an_attribute_kind_without_onnx_form_is_a_serde_error():
    g, _ = tf_graph()
    g.node("Enter").set_attr("f", NamedAttrs("body_fn", {"T": D.FLOAT32}))
    with pytest.raises(SerdeError) as info:
        graph_to_onnx(g, keep_tf_ops=True)
    message = str(info.value)
    assert "node 'Enter' (tf.Enter)" in message and "attribute 'f' is named_attrs" in message and "\n" not in message


def test_unknown_output_rank_and_unresolved_outer_reads_are_serde_errors():
    g, ctx = tf_graph()
    g.outputs[0].type = ctx.tensor(D.FLOAT32, None)
    with pytest.raises(SerdeError, match="graph output 'Exit' has an unknown dtype or rank"):
        graph_to_onnx(g, keep_tf_ops=True)
    body = Graph("body", ctx)
    ghost = body.add_input("ghost", ctx.tensor(D.FLOAT32, (3,)))
    ghost.producer.set_attr("_outer_name", "nowhere")
    body.set_outputs([ghost])
    g2, _ = tf_graph()
    g2.node("Exit").subgraphs["body"] = body
    with pytest.raises(SerdeError, match="reads tensor 'nowhere' of an enclosing graph"):
        graph_to_onnx(g2, keep_tf_ops=True)
    with pytest.raises(SerdeError, match="opset 99"):
        graph_to_onnx(g2, opset=99)


def test_public_api_is_locked():
    expected = {
        "scopefusion.serde.onnx_export": {"DEFAULT_EXPORT_OPSET", "FALLBACK_DOMAIN", "graph_to_onnx", "model_to_onnx", "model_to_onnx_bytes",
                                           "model_to_onnx_model_bytes", "ONNX_TARGETS", "onnx_summary", "unlowered_message"},
        "scopefusion.serde.onnx_fused": {"FusedEmitter", "FusedExporter", "FusedExporterRegistry", "Unmapped", "default_fused_exporters",
                                        "fused_exporters_for"},
    }
    for name, symbols in expected.items():
        module = importlib.import_module(name)
        assert set(module.__all__) == symbols
        assert all(hasattr(module, s) for s in symbols)
