"""Shape and dtype answers of the common ``onnx`` ops computed in Python, as ONNX's own inference gives them.

Shape arithmetic (Shape, Gather, Unsqueeze, Concat, Slice, Reshape...) and the elementwise and matrix ops
of a model make most of its nodes; asking ``onnx.shape_inference`` for each costs protobuf messages per
node. :func:`native_answer` computes the answer of such a node directly, and only when it is certain to
be ONNX's: default domain, opset 13 or later, every present input of a known dtype that the schema allows
(inputs sharing a type parameter of one dtype) and a static shape, the value-dependent inputs it needs
known, and nothing ONNX would reject (mismatched dims, a bad axis, a second -1 in a Reshape...). Anything
else gives None, and the caller asks ONNX, which answers or names the problem.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable, Sequence

import numpy as np

from ...dtypes import DType, by_name, from_onnx
from ...ir.opdef import InferContext, InputInfo

if TYPE_CHECKING:  # pragma: no cover
    from .schemas import OnnxOp

__all__ = ["NATIVE_OPS", "native_answer"]

Shape = tuple[int, ...]
Answer = list[tuple[Shape | None, Any]]

MIN_OPSET = 13

# (op type, domain, opset) -> its shape function and, per formal input, its type string and the dtypes the
# schema allows for it; None for an op answered by ONNX only
_PREPARED: dict[tuple[str, str, int], tuple[Callable[..., Answer], tuple[tuple[str, frozenset], ...]] | None] = {}


_UNPREPARED = object()


def _prepared(op: "OnnxOp") -> tuple[Callable[..., Answer], tuple[tuple[str, frozenset], ...]] | None:
    key = (op.op_type, op.domain, op.opset)
    found = _PREPARED.get(key, _UNPREPARED)
    if found is not _UNPREPARED:
        return found  # type: ignore[return-value]
    fn = NATIVE_OPS.get(op.op_type)
    found = None
    if fn is not None and op.domain == "" and op.opset >= MIN_OPSET and op.input_types:
        from .protos import dtype_of_type_str

        types = tuple(
            (t, frozenset(d for d in (dtype_of_type_str(s) for s in op.allowed(t)) if d is not None))
            for t in op.input_types
        )
        found = (fn, types)
    _PREPARED[key] = found
    return found


def native_answer(ctx: InferContext, op: "OnnxOp") -> Answer | None:
    """ONNX's answer for the node, computed here, or None when it is not certain (see the module docstring)."""
    prepared = _prepared(op)
    if prepared is None:
        return None
    fn, types = prepared
    inputs = ctx.inputs
    bound: dict[str, DType] = {}
    last = len(types) - 1
    for i, info in enumerate(inputs):
        if info is None:
            continue
        dtype = info.dtype
        if dtype is None or info.shape is None:
            return None
        type_str, allowed = types[i if i < last else last]
        if dtype not in allowed or bound.setdefault(type_str, dtype) != dtype:
            return None
    kinds = op.attr_kinds
    try:
        return fn(inputs, lambda name: ctx.attr(name) if name in kinds else None, ctx.num_outputs, bound)
    except _NotCertain:
        return None


class _NotCertain(Exception):
    """Raised inside a shape function: the answer is left to ONNX."""


def _need(condition: bool) -> None:
    if not condition:
        raise _NotCertain


Attr = Callable[[str], Any]
_INT64 = by_name("int64")
_BOOL = by_name("bool")


def _shape(info: InputInfo | None) -> Shape:
    _need(info is not None)
    assert info is not None
    return tuple(info.shape)  # type: ignore[arg-type]


def _ints(info: InputInfo | None) -> list[int]:
    """A present 1-D integer input's known value."""
    _need(info is not None and info.data is not None)
    assert info is not None
    data = np.asarray(info.data)
    _need(data.ndim == 1 and data.dtype.kind in "iu")
    return data.tolist()  # Python ints


def _axis(axis: int, rank: int) -> int:
    _need(-rank <= axis < rank)
    return axis + rank if axis < 0 else axis


def _broadcast(shapes: Sequence[Shape]) -> Shape:
    """ONNX's multidirectional broadcast: a known dim other than 1 wins (two different ones are an error);
    else 1 when every dim is known, else unknown (-1)."""
    rank = max(len(s) for s in shapes)
    out = []
    for i in range(rank):
        dim = 1
        unknown = False
        for s in shapes:
            d = s[i - rank + len(s)] if i - rank + len(s) >= 0 else 1
            if d < 0:
                unknown = True
            elif d != 1:
                _need(dim == 1 or dim == d)
                dim = d
        out.append(-1 if dim == 1 and unknown else dim)
    return tuple(out)


def _elementwise(inputs: list[InputInfo | None], attr: Attr, n_out: int, bound: dict[str, DType]) -> Answer:
    _need(n_out == 1 and all(i is not None for i in inputs))
    return [(_broadcast([_shape(i) for i in inputs]), inputs[0].dtype)]  # type: ignore[union-attr]


def _compare(inputs: list[InputInfo | None], attr: Attr, n_out: int, bound: dict[str, DType]) -> Answer:
    ((shape, _),) = _elementwise(inputs, attr, n_out, bound)
    return [(shape, _BOOL)]


def _where(inputs: list[InputInfo | None], attr: Attr, n_out: int, bound: dict[str, DType]) -> Answer:
    _need(n_out == 1 and len(inputs) == 3 and all(i is not None for i in inputs))
    return [(_broadcast([_shape(i) for i in inputs]), inputs[1].dtype)]  # type: ignore[union-attr]


def _same(inputs: list[InputInfo | None], attr: Attr, n_out: int, bound: dict[str, DType]) -> Answer:
    _need(n_out == 1 and len(inputs) == 1)
    return [(_shape(inputs[0]), inputs[0].dtype)]  # type: ignore[union-attr]


def _cast(inputs: list[InputInfo | None], attr: Attr, n_out: int, bound: dict[str, DType]) -> Answer:
    _need(n_out == 1 and len(inputs) == 1)
    to = attr("to")
    _need(isinstance(to, int))
    dtype = from_onnx(to)
    _need(dtype is not None and dtype.name in _CAST_TARGETS)
    return [(_shape(inputs[0]), dtype)]


_CAST_TARGETS = frozenset({"float16", "float32", "float64", "int8", "int16", "int32", "int64", "uint8", "bool"})


def _shape_op(inputs: list[InputInfo | None], attr: Attr, n_out: int, bound: dict[str, DType]) -> Answer:
    _need(n_out == 1 and len(inputs) == 1)
    rank = len(_shape(inputs[0]))
    start, end = attr("start"), attr("end")
    start = 0 if start is None else start
    end = rank if end is None else end
    start = min(max(start + rank if start < 0 else start, 0), rank)
    end = min(max(end + rank if end < 0 else end, 0), rank)
    return [((max(end - start, 0),), _INT64)]


def _unsqueeze(inputs: list[InputInfo | None], attr: Attr, n_out: int, bound: dict[str, DType]) -> Answer:
    _need(n_out == 1 and len(inputs) == 2)
    shape = _shape(inputs[0])
    axes = _ints(inputs[1])
    rank = len(shape) + len(axes)
    normalized = sorted(_axis(a, rank) for a in axes)
    _need(len(set(normalized)) == len(normalized))
    out: list[int] = []
    dims = iter(shape)
    for i in range(rank):
        out.append(1 if i in normalized else next(dims))
    return [(tuple(out), inputs[0].dtype)]  # type: ignore[union-attr]


def _squeeze(inputs: list[InputInfo | None], attr: Attr, n_out: int, bound: dict[str, DType]) -> Answer:
    _need(n_out == 1 and 1 <= len(inputs) <= 2)
    shape = _shape(inputs[0])
    if len(inputs) == 2 and inputs[1] is not None:
        axes = {_axis(a, len(shape)) for a in _ints(inputs[1])}
        _need(all(shape[a] == 1 for a in axes))
    else:
        _need(all(d >= 0 for d in shape))
        axes = {i for i, d in enumerate(shape) if d == 1}
    return [(tuple(d for i, d in enumerate(shape) if i not in axes), inputs[0].dtype)]  # type: ignore[union-attr]


def _reshape(inputs: list[InputInfo | None], attr: Attr, n_out: int, bound: dict[str, DType]) -> Answer:
    _need(n_out == 1 and len(inputs) == 2)
    shape = _shape(inputs[0])
    if inputs[1] is not None and inputs[1].data is None:
        # an unknown target of a known length: that many unknown dims
        length = _shape(inputs[1])
        _need(len(length) == 1 and length[0] >= 0)
        return [((-1,) * length[0], inputs[0].dtype)]  # type: ignore[union-attr]
    target = _ints(inputs[1])
    allow_zero = attr("allowzero") or 0
    _need(all(d >= -1 for d in target) and target.count(-1) <= 1)
    _need(not (allow_zero and -1 in target and 0 in target))
    out = []
    for i, d in enumerate(target):
        if d == 0 and not allow_zero:
            _need(i < len(shape))
            d = shape[i]
        out.append(d)
    if any(d < 0 for d in shape):
        _need(-1 not in target)
        return [(tuple(out), inputs[0].dtype)]  # type: ignore[union-attr]
    total = int(np.prod(shape, dtype=np.int64))
    if -1 in target:
        wild = target.index(-1)
        known = int(np.prod([d for i, d in enumerate(out) if i != wild], dtype=np.int64))
        _need(known > 0 and total % known == 0)
        out[wild] = total // known
    else:
        _need(int(np.prod(out, dtype=np.int64)) == total)
    return [(tuple(out), inputs[0].dtype)]  # type: ignore[union-attr]


def _transpose(inputs: list[InputInfo | None], attr: Attr, n_out: int, bound: dict[str, DType]) -> Answer:
    _need(n_out == 1 and len(inputs) == 1)
    shape = _shape(inputs[0])
    perm = attr("perm")
    perm = tuple(reversed(range(len(shape)))) if perm is None else tuple(perm)
    _need(sorted(perm) == list(range(len(shape))))
    return [(tuple(shape[p] for p in perm), inputs[0].dtype)]  # type: ignore[union-attr]


def _gather(inputs: list[InputInfo | None], attr: Attr, n_out: int, bound: dict[str, DType]) -> Answer:
    _need(n_out == 1 and len(inputs) == 2)
    data, indices = _shape(inputs[0]), _shape(inputs[1])
    _need(len(data) >= 1)
    axis = _axis(attr("axis") or 0, len(data))
    return [(data[:axis] + indices + data[axis + 1 :], inputs[0].dtype)]  # type: ignore[union-attr]


def _concat(inputs: list[InputInfo | None], attr: Attr, n_out: int, bound: dict[str, DType]) -> Answer:
    _need(n_out == 1 and len(inputs) >= 1 and all(i is not None for i in inputs))
    shapes = [_shape(i) for i in inputs]
    rank = len(shapes[0])
    _need(rank >= 1 and all(len(s) == rank for s in shapes))
    axis = attr("axis")
    _need(isinstance(axis, int))
    axis = _axis(axis, rank)
    out = list(shapes[0])
    for s in shapes[1:]:
        for i, d in enumerate(s):
            if i == axis:
                out[i] = -1 if out[i] < 0 or d < 0 else out[i] + d
            elif d >= 0:
                _need(out[i] < 0 or out[i] == d)
                out[i] = d
    return [(tuple(out), inputs[0].dtype)]  # type: ignore[union-attr]


def _slice(inputs: list[InputInfo | None], attr: Attr, n_out: int, bound: dict[str, DType]) -> Answer:
    _need(n_out == 1 and 3 <= len(inputs) <= 5)
    shape = _shape(inputs[0])
    starts, ends = _ints(inputs[1]), _ints(inputs[2])
    axes = _ints(inputs[3]) if len(inputs) > 3 and inputs[3] is not None else list(range(len(starts)))
    steps = _ints(inputs[4]) if len(inputs) > 4 and inputs[4] is not None else [1] * len(starts)
    _need(len(starts) == len(ends) == len(axes) == len(steps))
    axes = [_axis(a, len(shape)) for a in axes]
    _need(len(set(axes)) == len(axes))
    out = list(shape)
    for axis, start, end, step in zip(axes, starts, ends, steps):
        dim = shape[axis]
        _need(step != 0 and dim > 0)
        start = start + dim if start < 0 else start
        end = end + dim if end < 0 else end
        if step > 0:
            start, end = min(max(start, 0), dim), min(max(end, 0), dim)
            out[axis] = max(0, -(-(end - start) // step))
        else:
            start, end = min(max(start, 0), dim - 1), min(max(end, -1), dim - 1)
            out[axis] = max(0, -(-(start - end) // -step))
    return [(tuple(out), inputs[0].dtype)]  # type: ignore[union-attr]


def _mat_mul(inputs: list[InputInfo | None], attr: Attr, n_out: int, bound: dict[str, DType]) -> Answer:
    _need(n_out == 1 and len(inputs) == 2)
    a, b = _shape(inputs[0]), _shape(inputs[1])
    _need(len(a) >= 1 and len(b) >= 1)
    a2 = (1,) + a if len(a) == 1 else a
    b2 = b + (1,) if len(b) == 1 else b
    _need(a2[-1] < 0 or b2[-2] < 0 or a2[-1] == b2[-2])
    out = _broadcast([a2[:-2], b2[:-2]]) + (a2[-2], b2[-1])
    if len(a) == 1:
        out = out[:-2] + out[-1:]
    if len(b) == 1:
        out = out[:-1]
    return [(out, inputs[0].dtype)]  # type: ignore[union-attr]


def _gemm(inputs: list[InputInfo | None], attr: Attr, n_out: int, bound: dict[str, DType]) -> Answer:
    _need(n_out == 1 and 2 <= len(inputs) <= 3)
    a, b = _shape(inputs[0]), _shape(inputs[1])
    _need(len(a) == 2 and len(b) == 2)
    m, k = (a[1], a[0]) if attr("transA") else a
    k2, n = (b[1], b[0]) if attr("transB") else b
    _need(k < 0 or k2 < 0 or k == k2)
    if len(inputs) == 3 and inputs[2] is not None:
        c = _shape(inputs[2])
        _need(len(c) <= 2 and _broadcast([c, (m, n)]) == (m, n))
    return [((m, n), inputs[0].dtype)]  # type: ignore[union-attr]


NATIVE_OPS: dict[str, Callable[..., Answer]] = {
    **{op: _elementwise for op in ("Add", "Sub", "Mul", "Div", "Mod", "Pow", "And", "Or")},
    **{op: _compare for op in ("Equal", "Less", "Greater")},
    **{op: _same for op in ("Identity", "Relu", "Neg", "Sqrt", "Erf", "Tanh", "Sigmoid", "Exp")},
    "Where": _where,
    "Cast": _cast,
    "Shape": _shape_op,
    "Unsqueeze": _unsqueeze,
    "Squeeze": _squeeze,
    "Reshape": _reshape,
    "Transpose": _transpose,
    "Gather": _gather,
    "Concat": _concat,
    "Slice": _slice,
    "MatMul": _mat_mul,
    "Gemm": _gemm,
}
