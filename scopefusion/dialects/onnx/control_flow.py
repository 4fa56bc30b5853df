"""Inference of ONNX control flow (If, Loop, Scan, SequenceMap) from the types of their bodies' outputs.

The bodies are IR graphs in ``node.subgraphs`` under the attribute's name (``then_branch``,
``else_branch``, ``body``), or GRAPH attributes of that name; the builder infers a body before the node
that owns it. The rules are conservative: where two types must agree (the two branches of an If, a
loop-carried value before and after an iteration) a dim that differs becomes -1 and a rank that differs
an unknown rank; a body output with no type gives an unknown shape.

* If: output i merges the branches' output i; with a constant ``cond`` only the taken branch counts.
* Loop: carried value i merges ``v_initial[i]`` with body output ``1 + i``; scan output j is body output
  ``1 + N + j`` stacked along a new leading axis whose length is the trip count when it is fixed (a
  constant ``M``, no or a constant true ``cond``, and a body that passes its condition through, maybe
  by Identity, or returns constant true), else -1.
* Scan (opset 9+): final state i merges ``initial[i]`` with body output i; scan output j is body output
  ``N + j`` with the sequence length inserted at ``scan_output_axes[j]``.
* SequenceMap: sequences, so the body's output dtypes with unknown shapes.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Sequence

import numpy as np

from ...errors import InferenceError
from ...ir.opdef import InferContext, OpDef

if TYPE_CHECKING:  # pragma: no cover
    from .schemas import OnnxOp

__all__ = ["BODY_OPS", "attach", "merge_shapes"]

BODY_OPS = frozenset({"If", "Loop", "Scan", "SequenceMap"})

Shape = tuple[int, ...] | None


def merge_shapes(a: Shape, b: Shape) -> Shape:
    """The most precise shape both ``a`` and ``b`` satisfy: equal dims kept, others -1."""
    if a is None or b is None or len(a) != len(b):
        return None
    return tuple(x if x == y else -1 for x, y in zip(a, b))


def attach(opdef: OpDef, op: "OnnxOp") -> None:
    rule = {"If": _infer_if, "Loop": _infer_loop, "Scan": _infer_scan, "SequenceMap": _infer_sequence_map}[op.op_type]

    def infer_dtype(ctx: InferContext) -> None:
        results = rule(ctx, op)
        for i, (shape, dtype) in enumerate(results):
            if dtype is None:
                raise InferenceError(
                    ctx.describe(f"output {i} has no dtype: the body's output {i} has no type; infer the body first")
                )
            ctx.set_output_dtype(i, dtype)
            ctx.set_output_shape(i, shape)

    def infer_shape(ctx: InferContext) -> None:
        if any(ctx.output_dtype(i) is None for i in range(ctx.num_outputs)):
            infer_dtype(ctx)  # the shapes are set together with the dtypes

    opdef.set_infer_dtype(infer_dtype).set_infer_shape(infer_shape)


def _body(ctx: InferContext, name: str) -> Any:
    body = ctx.subgraphs.get(name)
    if body is None and name in ctx.opdef.attrs:
        body = ctx.attr(name)
    if body is None:
        raise InferenceError(ctx.describe(f"has no body {name!r} (neither in node.subgraphs nor as an attribute)"))
    return body


def _out_types(body: Any) -> list[tuple[Shape, Any]]:
    out = []
    for value in body.outputs:
        t = value.type
        if t is not None and hasattr(t, "dtype"):
            out.append((None if t.rank is None else tuple(t.shape), t.dtype))
        else:
            out.append((None, None))
    return out


def _pick(body_types: Sequence[tuple[Shape, Any]], i: int) -> tuple[Shape, Any]:
    return body_types[i] if i < len(body_types) else (None, None)


def _infer_if(ctx: InferContext, op: "OnnxOp") -> list[tuple[Shape, Any]]:
    then_types = _out_types(_body(ctx, "then_branch"))
    else_types = _out_types(_body(ctx, "else_branch"))
    cond = ctx.input(0).data if ctx.has_input(0) else None
    if cond is not None and np.asarray(cond).size == 1:
        taken = then_types if bool(np.asarray(cond).reshape(-1)[0]) else else_types
        return [_pick(taken, i) for i in range(ctx.num_outputs)]
    out = []
    for i in range(ctx.num_outputs):
        (s1, d1), (s2, d2) = _pick(then_types, i), _pick(else_types, i)
        out.append((merge_shapes(s1, s2) if s1 != s2 else s1, d1 or d2))
    return out


def _scalar(ctx: InferContext, i: int) -> Any:
    if not ctx.has_input(i):
        return None
    data = ctx.input(i).data
    return None if data is None or np.asarray(data).size != 1 else np.asarray(data).reshape(-1)[0].item()


def _infer_loop(ctx: InferContext, op: "OnnxOp") -> list[tuple[Shape, Any]]:
    body = _body(ctx, "body")
    body_types = _out_types(body)
    carried = ctx.num_inputs - 2
    out: list[tuple[Shape, Any]] = []
    for i in range(min(carried, ctx.num_outputs)):
        init = ctx.input(2 + i)
        shape, dtype = _pick(body_types, 1 + i)
        out.append((merge_shapes(init.shape, shape) if init.shape != shape else shape, init.dtype or dtype))
    trips = _fixed_trip_count(ctx, body)
    for j in range(ctx.num_outputs - len(out)):
        shape, dtype = _pick(body_types, 1 + carried + j)
        out.append((None if shape is None else (trips, *shape), dtype))
    return out


def _fixed_trip_count(ctx: InferContext, body: Any) -> int:
    m = _scalar(ctx, 0)
    if m is None:
        return -1
    if int(m) <= 0:
        return 0
    cond = _scalar(ctx, 1)
    if ctx.has_input(1) and not cond:
        return -1 if cond is None else 0
    if len(body.inputs) < 2 or not body.outputs:
        return -1
    body_cond = body.outputs[0]
    while body_cond.producer.op_type == "Identity" and body_cond.producer.inputs and body_cond.producer.inputs[0] is not None:
        body_cond = body_cond.producer.inputs[0]
    const = body_cond.const_value
    if body_cond is body.inputs[1] or (const is not None and np.asarray(const).size == 1 and bool(np.asarray(const).reshape(-1)[0])):
        return int(m)
    return -1


def _infer_scan(ctx: InferContext, op: "OnnxOp") -> list[tuple[Shape, Any]]:
    body_types = _out_types(_body(ctx, "body"))
    if op.opset < 9:  # Scan-8 has a batch axis and sequence_lens; give body dtypes only
        return [(None, _pick(body_types, i)[1]) for i in range(ctx.num_outputs)]
    num_scan = int(ctx.attr("num_scan_inputs"))
    states = ctx.num_inputs - num_scan
    in_axes = ctx.attr("scan_input_axes") or (0,) * num_scan
    out_axes = ctx.attr("scan_output_axes") or (0,) * (ctx.num_outputs - states)
    seq_len = -1
    if num_scan > 0:
        first = ctx.input(states).shape
        if first is not None and len(first) > 0:
            axis = in_axes[0] + len(first) if in_axes[0] < 0 else in_axes[0]
            seq_len = first[axis] if 0 <= axis < len(first) else -1
    out: list[tuple[Shape, Any]] = []
    for i in range(min(states, ctx.num_outputs)):
        init = ctx.input(i)
        shape, dtype = _pick(body_types, i)
        out.append((merge_shapes(init.shape, shape) if init.shape != shape else shape, init.dtype or dtype))
    for j in range(ctx.num_outputs - len(out)):
        shape, dtype = _pick(body_types, states + j)
        if shape is not None:
            axis = out_axes[j] if j < len(out_axes) else 0
            axis = axis + len(shape) + 1 if axis < 0 else axis
            shape = (*shape[:axis], seq_len, *shape[axis:])
        out.append((shape, dtype))
    return out


def _infer_sequence_map(ctx: InferContext, op: "OnnxOp") -> list[tuple[Shape, Any]]:
    body_types = _out_types(_body(ctx, "body"))
    return [(None, _pick(body_types, i)[1]) for i in range(ctx.num_outputs)]
