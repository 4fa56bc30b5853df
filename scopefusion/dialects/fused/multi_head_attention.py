"""``fused.MultiHeadAttention``: scaled dot-product attention over several heads, with its projections.

Inputs ``query``, ``key``, ``value`` and an optional ``mask`` broadcast to ``[batch, heads, query length,
key length]``, in the form of ONNX ``Attention``'s ``attn_mask``: with ``mask_kind="additive"`` (the default)
a float mask added to the scaled scores (BERT's ``(1 - mask) * -10000``, PyTorch's ``-inf`` padding), with
``mask_kind="boolean"`` an "attend" mask (True, or non-zero, where a query may attend to a key; elsewhere
the score becomes ``mask_fill``, Keras' ``dtype.min`` form). ``causal=1`` masks keys after the query
(``key index > query index``, top-left aligned; those scores become ``mask_fill``, ``-inf`` if unset) without
a mask input, as Keras' ``use_causal_mask`` and ONNX's ``is_causal``. Two layouts (``input_layout``, CANN's
names):

* ``"BSH"``: ``query`` is ``[batch, length, in]`` (or ``[batch * length, in]`` with the length in
  ``query_length``; ``key`` / ``value`` likewise with ``key_length``). Each is projected by its
  ``*_weight`` ``[in, num_heads * head_size]`` and ``*_bias`` (when set; else taken as is), split into
  ``num_heads`` heads of ``head_size``; the per-head context is merged back to
  ``[..., num_heads * head_size]`` and projected by ``out_weight`` ``[num_heads * head_size, out]`` and
  ``out_bias`` when set. The output has the query's rank.
* ``"BNSD"``: ``query`` / ``key`` / ``value`` are already per head, ``[batch, heads, length, head_size]``
  (or with the heads folded into the batch); no projections; the output is the per-head context in
  the same layout.

Per head: ``softmax(masked(scale * q @ k^T)) @ v``, the softmax over the key axis.

NOTE: weights and biases are attributes in one canonical layout, not inputs (see the
``MultiHeadAttentionFusion`` rule): the fusion absorbs the framework's constants, whatever their layout.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ... import dtypes as D
from ...ir.attrs import FLOAT, INT, STR, TENSOR
from ...ir.opdef import FollowType, InferContext, OpDef, ParamType

__all__ = ["LAYOUTS", "MASK_KINDS", "WEIGHTS", "attention", "definition"]

LAYOUTS = ("BSH", "BNSD")
MASK_KINDS = ("additive", "boolean")
WEIGHTS = (
    "query_weight", "query_bias", "key_weight", "key_bias", "value_weight", "value_bias", "out_weight", "out_bias"
)
_FLOATS = (D.FLOAT16, D.BFLOAT16, D.FLOAT32, D.FLOAT64)


def _sdpa(q: np.ndarray, k: np.ndarray, v: np.ndarray, mask: np.ndarray | None, scale: float,
          attrs: dict[str, Any]) -> np.ndarray:
    logits = scale * (q @ np.swapaxes(k, -1, -2))
    fill = attrs.get("mask_fill")
    fill = -np.inf if fill is None else float(fill)
    if mask is not None and (attrs.get("mask_kind") == "boolean" or mask.dtype == np.bool_):
        logits = np.where(mask.astype(bool), logits, fill)
    elif mask is not None:
        logits = logits + mask.astype(np.float64)
    if attrs.get("causal"):
        rows, cols = logits.shape[-2:]
        logits = np.where(np.tril(np.ones((rows, cols), bool)), logits, fill)
    logits = logits - logits.max(axis=-1, keepdims=True)
    weights = np.exp(logits)
    weights /= weights.sum(axis=-1, keepdims=True)
    return weights @ v


def _project(x: np.ndarray, weight: Any, bias: Any) -> np.ndarray:
    if weight is not None:
        x = x @ np.asarray(weight, np.float64)
    if bias is not None:
        x = x + np.asarray(bias, np.float64)
    return x


def attention(inputs: list[np.ndarray | None], attrs: dict[str, Any]) -> np.ndarray:
    """The op's output for ``inputs`` (query, key, value[, mask]) and attribute payloads, in float64."""
    q, k, v = (np.asarray(t, np.float64) for t in inputs[:3])
    mask = np.asarray(inputs[3]) if len(inputs) > 3 and inputs[3] is not None else None
    heads, size, scale = int(attrs["num_heads"]), int(attrs["head_size"]), float(attrs["scale"])
    layout = attrs.get("input_layout", "BSH")
    if layout == "BNSD":
        return _sdpa(q, k, v, mask, scale, attrs)
    if layout != "BSH":
        raise ValueError(f"input_layout {layout!r}, expected one of {LAYOUTS}")
    flat = q.ndim == 2
    if flat:
        q = q.reshape(-1, int(attrs["query_length"]), q.shape[-1])
        k = k.reshape(-1, int(attrs["key_length"]), k.shape[-1])
        v = v.reshape(-1, int(attrs["key_length"]), v.shape[-1])

    def heads_of(x: np.ndarray, role: str) -> np.ndarray:
        y = _project(x, attrs.get(f"{role}_weight"), attrs.get(f"{role}_bias"))
        return y.reshape(y.shape[0], y.shape[1], heads, size).transpose(0, 2, 1, 3)

    context = _sdpa(heads_of(q, "query"), heads_of(k, "key"), heads_of(v, "value"), mask, scale, attrs)
    batch, length = context.shape[0], context.shape[2]
    merged = context.transpose(0, 2, 1, 3).reshape(batch, length, heads * size)
    out = _project(merged, attrs.get("out_weight"), attrs.get("out_bias"))
    return out.reshape(batch * length, -1) if flat else out


def _reference(inputs: list[np.ndarray | None], attrs: dict[str, Any]) -> list[np.ndarray]:
    return [attention(inputs, attrs).astype(np.asarray(inputs[0]).dtype)]


def _infer_shape(ctx: InferContext) -> None:
    layout = ctx.attr("input_layout")
    if ctx.attr("mask_kind") not in MASK_KINDS:
        raise ValueError(f"mask_kind is {ctx.attr('mask_kind')!r}, expected one of {MASK_KINDS}")
    if layout not in LAYOUTS:
        raise ValueError(f"input_layout is {layout!r}, expected one of {LAYOUTS}")
    query = ctx.param("query").shape
    if query is None:
        ctx.set_output_shape(0, None)
        return
    if layout == "BNSD":
        value = ctx.param("value").shape
        last = value[-1] if value else -1
    else:
        weight = ctx.attr("out_weight")
        width = ctx.attr("num_heads") * ctx.attr("head_size")
        last = int(np.asarray(weight).shape[-1]) if weight is not None else width
        if len(query) == 2 and ctx.attr("query_length") is None:
            raise ValueError("a rank-2 query needs query_length")
    ctx.set_output_shape(0, tuple(query[:-1]) + (last,))


def definition() -> OpDef:
    op = (
        OpDef("MultiHeadAttention", "fused", doc=__doc__ or "")
        .input("query", dtypes=_FLOATS)
        .input("key", dtypes=_FLOATS)
        .input("value", dtypes=_FLOATS)
        .input("mask", ParamType.OPTIONAL)
        .output("y", follow=("query", FollowType.DTYPE))
        .attr("num_heads", INT)
        .attr("head_size", INT)
        .attr("scale", FLOAT)
        .attr("input_layout", STR, default="BSH")
        .attr("mask_kind", STR, default="additive")
        .attr("mask_fill", FLOAT, optional=True)
        .attr("causal", INT, default=0)
        .attr("query_length", INT, optional=True)
        .attr("key_length", INT, optional=True)
    )
    for name in WEIGHTS:
        op.attr(name, TENSOR, optional=True)
    return op.set_infer_shape(_infer_shape).set_reference(_reference)
