"""The builtin fused-op exporters: one small function per fused op type (see :mod:`.onnx_fused`).

Each exporter writes the standard ONNX op where the export opset has it, else an exact decomposition
into older standard ops, and declines (→ domain ``scopefusion``) when neither fits. Each reads the fused
op's contract as its definition in :mod:`scopefusion.dialects.fused` states it (input order,
attribute names) and declines on anything it cannot prove equivalent rather than guess.

==================  =======================================  ===================================  ======================
fused type          ONNX op (opset)                          attributes read                      below that opset
==================  =======================================  ===================================  ======================
LayerNorm           LayerNormalization (17)                  begin_norm_axis, epsilon             ReduceMean/Sub/Div/Sqrt
Gelu                Gelu (20)                                approximate ("none" | "tanh")        Erf (or Tanh) form
MultiHeadAttention  Attention (23), MatMul projections        input_layout, num_heads, head_size,  MatMul/Softmax form
                                                             scale, query_length, key_length,
                                                             {query,key,value,out}_{weight,bias}
InstanceNorm        InstanceNormalization (6)                epsilon, data_format                 —
BatchNorm           BatchNormalization (9, inference)        epsilon, data_format, is_training    —
HardSwish           HardSwish (14)                           —                                    x·HardSigmoid(x)
Swish               Swish (24)                               scale                                x·Sigmoid(scale·x)
Clip                Clip (11, bounds as inputs)              min, max                             Clip-6 (attributes)
L2Normalize         x / Sqrt(Max(ReduceSumSquare, epsilon))  axis, epsilon                        (always this form)
DynamicRNN          LSTM (7), Transpose/Squeeze around       hidden_size, w, b, time_major,       —
                                                             return_sequences
DynamicGRU          GRU (7), Transpose/Squeeze around        hidden_size, w_input, w_hidden,      —
                                                             b_input, b_hidden, reset_after,
                                                             time_major, return_sequences
==================  =======================================  ===================================  ======================

* LayerNorm: ``gamma`` / ``beta`` broadcast numpy-style; when one is not exactly the normalized shape
  ([1, 1, D] for D) it is reshaped, or applied after a ``LayerNormalization`` with unit scale (Mul, Add).
* InstanceNorm / BatchNorm: ``data_format="NHWC"`` runs the ONNX op (channels first) on its input's
  channels-first form and leaves the result held so where the lowering tracks layouts
  (:meth:`~.onnx_fused.FusedEmitter.channels_first`), else puts it between two Transposes; each parameter becomes the ``[C]`` vector ONNX wants when its layout provably is one value
  per channel (or one value for all), else the node declines. A BatchNorm of a ``Conv``'s output whose shift
  comes out zero is written as the ``Mul`` by its scale the clean-up would make of it (:func:`batch_norm_as_scale`).
* MultiHeadAttention: ``"BSH"`` projects query, key and value with their weights (MatMul, Add), runs
  ``Attention`` on ``[batch, length, heads·size]`` and projects the output; a rank-2 (flattened) query is
  reshaped with ``query_length`` / ``key_length`` and back. ``"BNSD"`` runs ``Attention`` on the per-head
  tensors (heads folded into the batch: one head).
* L2Normalize is always the decomposition: ``LpNormalization`` has no epsilon and one axis only.
* DynamicRNN: the canonical kernel ``w`` ``[input + hidden, 4·hidden]`` (gates i, j, f, o) and ``b`` become
  ONNX's ``W`` / ``R`` / ``B`` (gates i, o, f, c); ``LSTM`` runs time-major, so batch-major ``x`` and ``y``
  are transposed; the final states lose ONNX's direction axis. DynamicGRU: its gates z, r, n are ONNX's
  order already; ``reset_after`` is ``linear_before_reset=1``.
"""

from __future__ import annotations

import math

import numpy as np

from ..ir.types import TensorType
from .onnx_fuse_ops import batch_norm_scale
from .onnx_fused import FusedEmitter, FusedExporter
from .onnx_lowering.registry import PlainOp
from .onnx_proto import TensorProto

__all__ = [
    "BUILTIN_EXPORTERS",
    "batch_norm",
    "clip",
    "dynamic_gru",
    "dynamic_rnn",
    "gelu",
    "hard_swish",
    "instance_norm",
    "l2_normalize",
    "layer_norm",
    "multi_head_attention",
    "swish",
]


# ----------------------------------------------------------------------------- normalizations
def layer_norm(e: FusedEmitter) -> None:
    """``LayerNorm(x, gamma, beta)`` → ``LayerNormalization`` (opset 17), else its decomposition."""
    e.expect_inputs(1, 3)
    e.only_outputs(1)
    epsilon = float(e.attr("epsilon"))
    axis = int(e.attr("begin_norm_axis", -1))
    x = e.input(0)
    gamma = e.inputs[1] if e.has_input(1) else ""
    beta = e.inputs[2] if e.has_input(2) else ""
    rank = e.rank(0)
    if not -rank <= axis < rank:
        e.decline(f"begin_norm_axis {axis} is out of range for rank {rank}")
    normalized = tuple(e.input_type(0).shape[axis % rank:])  # type: ignore[union-attr]
    if e.opset >= 17 and all(d >= 0 for d in normalized):
        scale = _as_normalized(e, 1, normalized) if gamma else None
        bias = _as_normalized(e, 2, normalized) if beta and scale is not None else None
        inner_scale = scale or e.const(np.ones(normalized, e.dtype(0).numpy), "unit_scale")
        last = scale is not None and (bias is not None or not beta)
        y = e.op("LayerNormalization", [x, inner_scale, bias or ""], outputs=[e.outputs[0]] if last else 1,
                 axis=axis, epsilon=epsilon)[0]
        if not last:
            _affine(e, y, "" if scale is not None else gamma, "" if bias is not None else beta)
        return
    axes = list(range(axis % rank, rank))
    mean = e.reduce("ReduceMean", x, axes)
    centered = e.op("Sub", [x, mean])[0]
    variance = e.reduce("ReduceMean", e.op("Mul", [centered, centered])[0], axes)
    std = e.op("Sqrt", [e.op("Add", [variance, e.scalar(epsilon, "epsilon")])[0]])[0]
    _affine(e, e.op("Div", [centered, std])[0], gamma, beta)


def _as_normalized(e: FusedEmitter, i: int, normalized: tuple[int, ...]) -> str | None:
    """Input ``i`` as a tensor of exactly the normalized shape (reshaped from [1, ..., 1, *normalized]),
    or None when its numpy-style broadcast is not that."""
    t = e.input_type(i)
    if t is None or t.rank is None:
        return None
    shape, n = tuple(t.shape), len(normalized)
    if len(shape) < n or shape[len(shape) - n:] != normalized or any(d != 1 for d in shape[: len(shape) - n]):
        return None
    if len(shape) == n:
        return e.inputs[i]
    value = e.const_input(i)
    if value is not None:  # the reshaped value itself, rather than a Reshape the clean-up would fold
        return e.const(value.reshape(normalized), f"shape{i}")
    return e.op("Reshape", [e.inputs[i], e.const(np.asarray(normalized, np.int64), f"shape{i}")])[0]


def _affine(e: FusedEmitter, y: str, scale: str, bias: str) -> None:
    """``y * scale + bias`` (numpy broadcasting) into output 0; either factor may be absent (``""``)."""
    steps = [(op, operand) for op, operand in (("Mul", scale), ("Add", bias)) if operand]
    if not steps:
        e.to_output(y)
        return
    for k, (op, operand) in enumerate(steps):
        y = e.op(op, [y, operand], outputs=[e.outputs[0]] if k == len(steps) - 1 else 1)[0]


def _layout(e: FusedEmitter) -> bool:
    """True for channels-last data (``data_format="NHWC"``, the fused ops' default)."""
    layout = str(e.attr("data_format", "NHWC"))
    if layout not in ("NHWC", "NCHW"):
        e.decline(f"data_format {layout!r} is neither 'NHWC' nor 'NCHW'")
    return layout == "NHWC"


def _per_channel(e: FusedEmitter, i: int, channel_axis: int, channels: int, vector_on_channel: bool) -> str:
    """Input ``i`` as the ``[C]`` vector ONNX wants, when its broadcast against x is one value per channel
    (or one value for all channels); declines otherwise. A 1-D parameter lies along the channel axis when
    ``vector_on_channel``, else it aligns with x's last axis (numpy)."""
    t = e.input_type(i)
    if vector_on_channel and _channel_vector(t, channels):
        return e.inputs[i]
    if t is None or not t.is_static:
        e.decline(f"input {i} has no static shape, so its channel layout cannot be checked")
    shape, rank = tuple(t.shape), e.rank(0)
    if len(shape) > rank:
        e.decline(f"input {i} of shape {list(shape)} has a higher rank than x")
    if len(shape) == 1 and vector_on_channel:
        per_channel = shape[0]
    else:
        offset = rank - len(shape)
        if any(d != 1 for axis, d in enumerate(shape, start=offset) if axis != channel_axis):
            e.decline(f"input {i} of shape {list(shape)} varies along an axis other than the channels")
        per_channel = shape[channel_axis - offset] if channel_axis >= offset else 1
    if per_channel not in (1, channels):
        e.decline(f"input {i} holds {per_channel} values for {channels} channels")
    value = e.const_input(i)
    if value is not None:  # the vector itself, rather than nodes the clean-up would fold into it
        return e.const(np.ascontiguousarray(np.broadcast_to(value.reshape(-1), (channels,))), "per_channel")
    name = e.inputs[i]
    if len(shape) != 1:
        name = e.op("Reshape", [name, e.const(np.asarray([-1], np.int64), "flat")])[0]
    if per_channel != channels:
        name = e.op("Expand", [name, e.const(np.asarray([channels], np.int64), "channels")])[0]
    return name


def _channel_vector(t: TensorType | None, channels: int) -> bool:
    """True when ``t`` is a ``[channels]`` vector: what :func:`_per_channel` takes as it is (rank 1 along the
    channel axis, static, one value per channel, so no reshape or expand), answered before its other checks."""
    return t is not None and t.rank == 1 and t.shape[0] == channels


def _channel_op(e: FusedEmitter, op_type: str, vector_on_channel: bool, **attrs) -> None:
    """``op_type(x, *params)`` on channels-first data; for channels-last data between two Transposes."""
    x, rank = e.input(0), e.rank(0)
    channels_last = _layout(e)
    channel_axis = rank - 1 if channels_last else 1
    last = channels_last and rank > 2
    channels = e.dim(0, channel_axis)
    params = [_per_channel(e, i, channel_axis, channels, vector_on_channel) for i in range(1, len(e.inputs))]
    if not last:
        e.op(op_type, [x, *params], outputs=[e.outputs[0]], **attrs)
        return
    y = e.op(op_type, [e.channels_first(0), *params], **attrs)[0]
    if not e.hold_channels_first(y):
        e.op("Transpose", [y], outputs=[e.outputs[0]], perm=[0, *range(2, rank), 1])


def instance_norm(e: FusedEmitter) -> None:
    """``InstanceNorm(x, gamma, beta)`` → ``InstanceNormalization``."""
    e.expect_inputs(3)
    e.only_outputs(1)
    if e.rank(0) < 3:
        e.decline(f"an instance norm needs rank 3 or more, found rank {e.rank(0)}")
    _channel_op(e, "InstanceNormalization", False, epsilon=float(e.attr("epsilon")))


def batch_norm(e: FusedEmitter) -> None:
    """``BatchNorm(x, scale, offset, mean, variance)`` (inference) → ``BatchNormalization``."""
    e.expect_inputs(5)
    e.only_outputs(1)
    if e.attr("is_training", False):
        e.decline("is_training is set; only the inference form maps to BatchNormalization")
    if e.opset < 9:
        e.decline(f"BatchNormalization's inference form needs opset 9, the export is at {e.opset}")
    if not batch_norm_as_scale(e, float(e.attr("epsilon")), _layout(e)):
        _channel_op(e, "BatchNormalization", True, epsilon=float(e.attr("epsilon")))


def batch_norm_as_scale(e: FusedEmitter, epsilon: float, channels_last: bool) -> bool:
    """Writes the inference batch norm of ``e`` (inputs x, scale, offset, mean, variance) as ``Mul`` by its
    per-channel scale and returns True, where the clean-up would rewrite its ``BatchNormalization`` so
    (:mod:`.onnx_fuse_ops`, whose conditions and arithmetic these are): x (channels first)
    written by a ``Conv`` that nothing else reads, the four parameters constant float32 ``[C]`` vectors, the shift
    zero. Else writes nothing and returns False. The ``Mul`` is what the rewrite makes, without first writing the
    ``BatchNormalization`` and its ``[C]`` parameters."""
    rank = e.rank(0)
    if rank < 3 or not e.only_reader(0):
        return False
    value = e.node.inputs[0]
    x: str | None = e.inputs[0]
    if channels_last:
        layout = e.layout
        x = layout.first.get(value) if layout is not None and value is not None else None  # its channels-first form
    if not x:
        return False
    conv = e.producer(x)
    if conv is None or conv.op_type != "Conv" or conv.domain not in ("", "ai.onnx"):
        return False
    channel_axis = rank - 1 if channels_last else 1
    channels = e.dim(0, channel_axis)
    params = batch_norm_scale([_channel_values(e, i, rank, channel_axis, channels) for i in range(1, 5)], epsilon)
    if params is None or np.count_nonzero(params[1]):
        return False
    factor = e.const(params[0].reshape((channels,) + (1,) * (rank - 2)), "scale")
    if not channels_last:
        e.op("Mul", [x, factor], outputs=[e.outputs[0]])
        return True
    y = e.op("Mul", [x, factor])[0]
    e.hold_channels_first(y)  # the layout is tracked: it holds x
    return True


def _channel_values(e: FusedEmitter, i: int, rank: int, channel_axis: int, channels: int) -> np.ndarray | None:
    """The ``[C]`` vector :func:`_per_channel` makes of constant input ``i`` (a 1-D parameter along the channel
    axis; ``rank`` is input 0's), or None where it would write nodes or decline."""
    t = e.input_type(i)
    if t is None or not t.is_static or len(t.shape) > rank:
        return None
    value = e.const_input(i)
    if value is None:
        return None
    if _channel_vector(t, channels):
        return value
    shape = tuple(t.shape)
    if len(shape) == 1:
        per_channel = shape[0]
    else:
        offset = rank - len(shape)
        if any(d != 1 for axis, d in enumerate(shape, start=offset) if axis != channel_axis):
            return None
        per_channel = shape[channel_axis - offset] if channel_axis >= offset else 1
    if per_channel not in (1, channels):
        return None
    return np.ascontiguousarray(np.broadcast_to(value.reshape(-1), (channels,)))


def l2_normalize(e: FusedEmitter) -> None:
    """``L2Normalize(x)`` → ``x / Sqrt(Max(ReduceSumSquare(x, axis), epsilon))`` (TF's ``l2_normalize``)."""
    e.expect_inputs(1)
    e.only_outputs(1)
    axes = e.attr("axis", (-1,))
    axes = [int(axes)] if isinstance(axes, int) else [int(a) for a in axes]
    if not axes:
        e.decline("axis is empty")
    x = e.input(0)
    squares = e.reduce("ReduceSumSquare", x, axes)
    norm = e.op("Sqrt", [e.op("Max", [squares, e.scalar(float(e.attr("epsilon")), "epsilon")])[0]])[0]
    e.op("Div", [x, norm], outputs=[e.outputs[0]])


# ----------------------------------------------------------------------------- activations
def gelu(e: FusedEmitter) -> None:
    """``Gelu(x)`` → ``Gelu`` (opset 20), else ``0.5·x·(1 + erf(x/√2))`` (or the tanh form)."""
    e.expect_inputs(1)
    e.only_outputs(1)
    approximate = str(e.attr("approximate", "none"))
    if approximate not in ("none", "tanh"):
        e.decline(f"approximate={approximate!r} is neither 'none' nor 'tanh'")
    x = e.input(0)
    if e.opset >= 20:
        e.op("Gelu", [x], outputs=[e.outputs[0]], approximate=approximate if approximate != "none" else None)
        return
    if approximate == "none":
        inner = e.op("Erf", [e.op("Mul", [x, e.scalar(1 / math.sqrt(2), "inv_sqrt2")])[0]])[0]
    else:
        cube = e.op("Mul", [e.op("Mul", [x, x])[0], x])[0]
        poly = e.op("Add", [x, e.op("Mul", [cube, e.scalar(0.044715, "c")])[0]])[0]
        inner = e.op("Tanh", [e.op("Mul", [poly, e.scalar(math.sqrt(2 / math.pi), "sqrt_2_pi")])[0]])[0]
    one_plus = e.op("Add", [inner, e.scalar(1.0, "one")])[0]
    half_x = e.op("Mul", [x, e.scalar(0.5, "half")])[0]
    e.op("Mul", [half_x, one_plus], outputs=[e.outputs[0]])


def hard_swish(e: FusedEmitter) -> None:
    """``HardSwish(x)`` → ``HardSwish`` (opset 14), else ``x · HardSigmoid(x, 1/6, 0.5)``."""
    e.expect_inputs(1)
    e.only_outputs(1)
    x = e.input(0)
    if e.opset >= 14:
        e.op("HardSwish", [x], outputs=[e.outputs[0]])
        return
    gate = e.op("HardSigmoid", [x], alpha=1.0 / 6.0, beta=0.5)[0]
    e.op("Mul", [x, gate], outputs=[e.outputs[0]])


def swish(e: FusedEmitter) -> None:
    """``Swish(x)`` → ``Swish`` (opset 24), else ``x · Sigmoid(scale·x)``."""
    e.expect_inputs(1)
    e.only_outputs(1)
    scale = float(e.attr("scale", 1.0))
    x = e.input(0)
    if e.opset >= 24:
        e.op("Swish", [x], outputs=[e.outputs[0]], alpha=scale if scale != 1.0 else None)
        return
    scaled = x if scale == 1.0 else e.op("Mul", [x, e.scalar(scale, "scale")])[0]
    e.op("Mul", [x, e.op("Sigmoid", [scaled])[0]], outputs=[e.outputs[0]])


def clip(e: FusedEmitter) -> None:
    """``Clip(x)`` with ``min`` / ``max`` → ``Clip`` (bounds as inputs from opset 11, attributes before)."""
    e.expect_inputs(1)
    e.only_outputs(1)
    lo, hi = float(e.attr("min")), float(e.attr("max"))
    x = e.input(0)
    if e.opset >= 11:
        e.op("Clip", [x, e.scalar(lo, "min"), e.scalar(hi, "max")], outputs=[e.outputs[0]])
    else:
        e.op("Clip", [x], outputs=[e.outputs[0]], min=lo, max=hi)


# ----------------------------------------------------------------------------- attention
def multi_head_attention(e: FusedEmitter) -> None:
    """``MultiHeadAttention(query, key, value[, mask])`` → projections and ``Attention`` (opset 23), else
    ``Softmax(scale·Q·Kᵀ + mask)·V`` per head (see the module docstring for the layouts)."""
    e.expect_inputs(3, 4)
    e.only_outputs(1)
    heads, size, scale = int(e.attr("num_heads")), int(e.attr("head_size")), float(e.attr("scale"))
    if heads <= 0 or size <= 0:
        e.decline(f"num_heads {heads} and head_size {size} must be positive")
    layout = str(e.attr("input_layout", "BSH"))
    q, k, v = (e.input(i) for i in range(3))
    mask, boolean = _canonical_mask(e)
    causal = int(e.attr("causal", 0) or 0)
    if causal and e.opset < 23:
        e.decline("a causal attention is written as ONNX Attention(is_causal=1), which needs opset 23")
    if layout == "BNSD":
        rank = e.rank(0)
        if rank not in (3, 4) or any(e.rank(i) != rank for i in (1, 2)):
            e.decline("BNSD query, key and value must all be [batch, heads, length, size] or [batch*heads, length, size]")
        if e.opset >= 23:
            if rank == 3 and mask and e.rank(3) >= 3:
                mask = _unsqueeze(e, mask, 1)  # scores gain a heads axis of 1: [batch*heads, 1, q, k]
            if mask:
                mask = _mask_rows(e, mask, q, rank - 2, rank == 3 and e.rank(3) >= 3)
            n = 1 if rank == 3 else None
            e.op("Attention", [q, k, v, mask], outputs=[e.outputs[0]], scale=scale, q_num_heads=n, kv_num_heads=n,
                 is_causal=causal or None)
        else:
            k_t = e.op("Transpose", [k], perm=[*range(rank - 2), rank - 1, rank - 2])[0]
            _sdpa(e, q, k_t, v, mask, boolean, scale, e.outputs[0], rank)
        return
    if layout != "BSH":
        e.decline(f"input_layout {layout!r} is neither 'BSH' nor 'BNSD'")
    flat = e.rank(0) == 2
    if any(e.rank(i) != (2 if flat else 3) for i in range(3)):
        e.decline("BSH query, key and value must all be [batch, length, in] or all [batch*length, in]")
    projected = []
    for i, (role, name, length) in enumerate((("query", q, "query_length"), ("key", k, "key_length"), ("value", v, "key_length"))):
        if flat:
            width = e.dim(i, -1)
            name = e.op("Reshape", [name, e.const(np.asarray([-1, int(e.attr(length)), width], np.int64), f"{role}_3d")])[0]
        projected.append(_dense(e, name, role, i))
    out_w = e.attr("out_weight", None)
    done = not flat and out_w is None and e.attr("out_bias", None) is None
    y = e.outputs[0] if done else ""
    if e.opset >= 23:
        if mask:
            mask = _mask_rows(e, mask, projected[0], 1, False)
        y = e.op("Attention", [*projected, mask], outputs=[y] if done else 1, q_num_heads=heads,
                 kv_num_heads=heads, scale=scale, is_causal=causal or None)[0]
    else:
        split = e.const(np.asarray([0, 0, heads, size], np.int64), "split_heads")
        qh, kt, vh = (e.op("Transpose", [e.op("Reshape", [t, split])[0]], perm=perm)[0]
                      for t, perm in zip(projected, ([0, 2, 1, 3], [0, 2, 3, 1], [0, 2, 1, 3])))
        context = e.op("Transpose", [_sdpa(e, qh, kt, vh, mask, boolean, scale, "")], perm=[0, 2, 1, 3])[0]
        merge = e.const(np.asarray([0, 0, heads * size], np.int64), "merge_heads")
        y = e.op("Reshape", [context, merge], outputs=[y] if done else 1)[0]
    if done:
        return
    y = _dense(e, y, "out", 0, last=not flat)
    if flat:
        width = int(np.asarray(out_w).shape[-1]) if out_w is not None else heads * size
        e.op("Reshape", [y, e.const(np.asarray([-1, width], np.int64), "flat")], outputs=[e.outputs[0]])


def _dense(e: FusedEmitter, x: str, role: str, like: int, last: bool = False) -> str:
    """``x @ {role}_weight + {role}_bias`` (either attribute may be unset)."""
    weight, bias = e.attr(f"{role}_weight", None), e.attr(f"{role}_bias", None)
    dtype = e.dtype(like).numpy
    steps = [("MatMul", weight, "weight"), ("Add", bias, "bias")]
    steps = [(op, value, hint) for op, value, hint in steps if value is not None]
    for k, (op, value, hint) in enumerate(steps):
        final = last and k == len(steps) - 1
        x = e.op(op, [x, e.const(np.asarray(value, dtype), f"{role}_{hint}")], outputs=[e.outputs[0]] if final else 1)[0]
    if last and not steps:
        e.to_output(x)
    return x


def _canonical_mask(e: FusedEmitter) -> tuple[str, bool]:
    """The mask input as ``attn_mask`` takes it, and whether it is boolean: a ``mask_kind="boolean"`` mask
    of numbers is cast to bool; with a ``mask_fill`` it becomes the additive ``Where(mask, 0, fill)`` so
    that masked scores take that value, as in the source (a row with every key masked stays finite)."""
    if not e.has_input(3):
        return "", False
    mask = e.inputs[3]
    mask_type = e.input_type(3)
    boolean = mask_type is not None and mask_type.dtype.name == "bool"
    if e.attr("mask_kind", "additive") != "boolean" and not boolean:
        return mask, False
    if not boolean:
        mask = e.op("Cast", [mask], to=TensorProto.BOOL)[0]
    fill = e.attr("mask_fill", None)
    if fill is None:
        return mask, True
    return e.op("Where", [mask, e.scalar(0.0, "attend"), e.scalar(float(fill), "mask_fill")])[0], False


def _sdpa(e: FusedEmitter, q: str, k_t: str, v: str, mask: str, boolean: bool, scale: float, out: str,
          rank: int = 4) -> str:
    """``Softmax(scale · q @ k_t + mask) @ v`` (the mask additive, or boolean: True keeps)."""
    scores = e.op("Mul", [e.op("MatMul", [q, k_t])[0], e.scalar(scale, "scale")])[0]
    if mask:
        if boolean:
            scores = e.op("Where", [mask, scores, e.scalar(-np.inf, "masked")])[0]
        else:
            scores = e.op("Add", [scores, mask])[0]
    # Before opset 13 Softmax flattens the axes from ``axis`` on; from the last axis that is the same thing.
    probs = e.op("Softmax", [scores], axis=-1 if e.opset >= 11 else rank - 1)[0]
    return e.op("MatMul", [probs, v], outputs=[out] if out else 1)[0]


def _mask_rows(e: FusedEmitter, mask: str, q: str, seq_axis: int, unsqueezed: bool) -> str:
    """The mask expanded to one row per query position when it broadcasts over them.

    NOTE: the ONNX spec lets ``attn_mask`` broadcast on every axis, but onnxruntime's ``Attention`` wants its
    second-to-last dim to be the query length; an ``Expand`` (same values) satisfies both.
    """
    t = e.input_type(3)
    if t is None or t.rank is None:
        e.decline("the rank of the mask is unknown")
    shape = tuple(t.shape) if not unsqueezed else (t.shape[0], 1, *t.shape[1:])
    if len(shape) < 2:
        e.decline(f"a mask of rank {len(shape)} has no query axis")
    q_len = e.input_type(0).shape[seq_axis] if e.input_type(0).rank == seq_axis + 2 else -1  # type: ignore[union-attr]
    if q_len < 0 and e.attr("query_length", None) is not None and e.rank(0) == 2:
        q_len = int(e.attr("query_length"))
    if shape[-2] >= 0 and shape[-2] == q_len:
        return mask
    lead = e.const(np.ones(len(shape) - 2, np.int64), "mask_lead")
    if q_len >= 0:
        rows = e.const(np.asarray([q_len], np.int64), "mask_rows")
    else:
        rows = e.op("Shape", [q], start=seq_axis, end=seq_axis + 1)[0]
    target = e.op("Concat", [lead, rows, e.const(np.ones(1, np.int64), "mask_one")], axis=0)[0]
    return e.op("Expand", [mask, target])[0]


def _unsqueeze(e: FusedEmitter, x: str, axis: int) -> str:
    if e.opset < 13:
        return e.op("Unsqueeze", [x], axes=[axis])[0]
    return e.op("Unsqueeze", [x, e.const(np.asarray([axis], np.int64), "axes")])[0]


def _squeeze(e: FusedEmitter, x: str, axis: int, out: str = "") -> str:
    outputs = [out] if out else 1
    if e.opset < 13:
        return e.op("Squeeze", [x], outputs=outputs, axes=[axis])[0]
    return e.op("Squeeze", [x, e.const(np.asarray([axis], np.int64), "axes")], outputs=outputs)[0]


# ----------------------------------------------------------------------------- recurrent
_LSTM_GATES = (0, 3, 2, 1)  # ONNX's i, o, f, c from the fused op's i, j, f, o blocks


def dynamic_rnn(e: FusedEmitter) -> None:
    """``DynamicRNN(x, init_h?, init_c?)`` (an LSTM, weights as attributes) → ``LSTM``."""
    e.expect_inputs(1, 3)
    hidden = int(e.attr("hidden_size"))
    w, b = np.asarray(e.attr("w")), np.asarray(e.attr("b"))
    if hidden <= 0 or w.ndim != 2 or w.shape[1] != 4 * hidden or w.shape[0] <= hidden or b.shape != (4 * hidden,):
        e.decline(f"w {list(w.shape)} and b {list(b.shape)} are not [input + {hidden}, {4 * hidden}] and [{4 * hidden}]")
    blocks = np.split(np.arange(4 * hidden), 4)
    order = np.concatenate([blocks[g] for g in _LSTM_GATES])
    rows = w.shape[0] - hidden
    weights = (w[:rows, order].T, w[rows:, order].T, np.concatenate([b[order], np.zeros(4 * hidden)]))
    _recurrent(e, "LSTM", hidden, weights, 2)


def dynamic_gru(e: FusedEmitter) -> None:
    """``DynamicGRU(x, init_h?)`` (weights as attributes, gates z, r, n as ONNX has them) → ``GRU``."""
    e.expect_inputs(1, 2)
    hidden = int(e.attr("hidden_size"))
    w_x, w_h = np.asarray(e.attr("w_input")), np.asarray(e.attr("w_hidden"))
    b_x, b_h = np.asarray(e.attr("b_input")), np.asarray(e.attr("b_hidden"))
    if hidden <= 0 or w_x.ndim != 2 or w_x.shape[1] != 3 * hidden or w_h.shape != (hidden, 3 * hidden) \
            or b_x.shape != (3 * hidden,) or b_h.shape != (3 * hidden,):
        e.decline(f"the weights {list(w_x.shape)}, {list(w_h.shape)} and biases do not fit hidden_size {hidden}")
    # reset_after (Keras' default) applies the reset gate after the recurrent product: ONNX linear_before_reset.
    linear_before_reset = 1 if e.attr("reset_after", True) else None
    _recurrent(e, "GRU", hidden, (w_x.T, w_h.T, np.concatenate([b_x, b_h])), 1, linear_before_reset=linear_before_reset)


def _recurrent(e: FusedEmitter, op_type: str, hidden: int, weights: tuple[np.ndarray, ...], states: int, **attrs) -> None:
    """The ONNX ``LSTM`` / ``GRU`` of a fused sequence op: ``weights`` are ONNX's W, R, B without the direction
    axis; the op runs time-major (batch-major ``x`` and ``y`` are transposed); outputs lose the direction axis."""
    if e.opset < 7:
        e.decline(f"{op_type}'s current form needs opset 7, the export is at {e.opset}")
    if e.rank(0) != 3:
        e.decline(f"x has rank {e.rank(0)}, expected 3")
    time_major, sequences = bool(e.attr("time_major", False)), bool(e.attr("return_sequences", True))
    want = [sequences and e.used(0), e.used(1) or (e.used(0) and not sequences)] + [e.used(k) for k in range(2, 1 + states)]
    if not any(want):
        return  # nothing reads the node
    dtype = e.dtype(0).numpy
    consts = [e.const(np.asarray(a)[None].astype(dtype), hint) for a, hint in zip(weights, "WRB")]
    x = e.input(0) if time_major else e.op("Transpose", [e.input(0)], perm=[1, 0, 2])[0]
    initial = [_unsqueeze(e, e.inputs[k], 0) if e.has_input(k) else "" for k in range(1, 1 + states)]
    y, *finals = e.op(op_type, [x, *consts, "", *initial], outputs=[None if w else "" for w in want],
                      hidden_size=hidden, **attrs)
    if want[0]:
        if time_major:
            _squeeze(e, y, 1, e.outputs[0])
        else:
            e.op("Transpose", [_squeeze(e, y, 1)], outputs=[e.outputs[0]], perm=[1, 0, 2])
    if e.used(0) and not sequences:
        _squeeze(e, finals[0], 0, e.outputs[0])
    for k, final in enumerate(finals, start=1):
        if e.used(k):
            _squeeze(e, final, 0, e.outputs[k])


BUILTIN_EXPORTERS: tuple[tuple[str, FusedExporter], ...] = (
    ("BatchNorm", batch_norm),
    ("Clip", clip),
    ("DynamicGRU", dynamic_gru),
    ("DynamicRNN", dynamic_rnn),
    ("Gelu", gelu),
    ("HardSwish", PlainOp("HardSwish", 1, hard_swish, 14, exact=True)),  # before opset 14 hard_swish composes it
    ("InstanceNorm", instance_norm),
    ("L2Normalize", l2_normalize),
    ("LayerNorm", layer_norm),
    ("MultiHeadAttention", multi_head_attention),
    ("Swish", swish),
)
