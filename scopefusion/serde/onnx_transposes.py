"""Transposes of a lowered ONNX graph pushed down, composed and cancelled (see :mod:`.onnx_optimize`).

Where the lowering does not track layouts (:mod:`.onnx_lowering.layout`: a graph with bodies), TensorFlow's
channels-last convolutions are lowered as ``Transpose → Conv → Transpose`` (to channels first and back); where
it does, what is left is a transpose where channels-last data meets channels-first. Between two convolutions
the back-and-forth pair meets once the transpose after the first has moved below every layout-agnostic op in
between:

* ``Transpose_q(Transpose_p(x))`` → ``Transpose_{p∘q}(x)``, nothing when that is the identity.
* ``Reshape`` of a ``Reshape`` / ``Squeeze`` / ``Unsqueeze`` reads the inner input when it can; a ``Reshape``
  to its input's own shape goes (a squeezed global pool reshaped back to ``[N, C, 1, 1]``).
* ``Transpose(Pad(x))`` → ``Pad(Transpose(x))`` when nothing else reads the pad and ``x`` is a graph input
  or the transpose feeds only a ``Conv`` (so the pad can fold into it); such a pad stays there.
* A transpose that moves only dims of size 1 (its input's shape known) → ``Reshape`` (0 keeps the one
  unknown dim where it stays in place, else -1 takes it).
* ``op(Transpose_p(a), Transpose_p(b), c)`` → ``Transpose_p(op(a, b, c'))`` for an element-wise ``op``,
  where the constant ``c`` is broadcast to the rank and permuted by the inverse of ``p`` (``c'``); the same
  for ``Reduce*`` (axes mapped through ``p``; without ``keepdims`` the remaining dims get their own
  permutation), ``Pad`` (pads permuted), ``Concat`` and ``Softmax`` / ``LogSoftmax`` (axis mapped).
  A move is made when it removes at least as many transposes as it adds.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from .onnx_node import Node

if TYPE_CHECKING:  # pragma: no cover
    from .onnx_optimize import GraphIndex

__all__ = ["push_transposes"]

_UNARY = {"Relu", "Sigmoid", "Tanh", "LeakyRelu", "Elu", "Selu", "Exp", "Log", "Sqrt", "Neg", "Abs", "Cast", "Erf",
          "Softplus", "Softsign", "HardSigmoid", "HardSwish", "Not", "Reciprocal", "Floor", "Ceil", "Round", "Sign",
          "Sin", "Cos", "IsNaN", "IsInf", "Clip", "Identity", "Gelu", "Celu", "ThresholdedRelu", "Mish"}
_BROADCAST = {"Add", "Sub", "Mul", "Div", "Max", "Min", "Pow", "Equal", "Less", "Greater", "LessOrEqual",
              "GreaterOrEqual", "And", "Or", "Xor", "Where", "Sum", "Mean", "PRelu", "Mod", "BitwiseAnd",
              "BitwiseOr", "BitwiseXor"}
_REDUCE = {"ReduceMean", "ReduceSum", "ReduceMax", "ReduceMin", "ReduceProd", "ReduceL1", "ReduceL2",
           "ReduceSumSquare", "ReduceLogSumExp"}
_AXIS = {"Concat", "Softmax", "LogSoftmax"}
_MOVABLE = _UNARY | _BROADCAST | _REDUCE | _AXIS | {"Pad"}


def push_transposes(index: "GraphIndex", to_reshapes: bool = False) -> bool:
    """One sweep over the graph in order; True when something changed. ``to_reshapes`` also turns transposes
    that move only dims of size 1 into reshapes (once the others have settled, so pairs cancel first)."""
    changed = False
    producer_of = index.producer
    for node in list(index.nodes):
        if node.domain not in ("", "ai.onnx"):
            continue
        op = node.op_type
        if op == "Transpose":
            changed |= _compose(index, node) or _above_pad(index, node) or (to_reshapes and _as_reshape(index, node))
        elif op == "Reshape":
            changed |= _merge_reshapes(index, node)
        elif op in _MOVABLE:
            for name in node.input:  # the common case, a node below no transpose, answered here
                producer = producer_of.get(name)
                if producer is not None and producer.op_type == "Transpose":
                    changed |= _push_through(index, node)
                    break
    return changed


def _perm(node: "Node") -> list[int] | None:
    """The node's permutation, for reading only (see :meth:`.Node.ints_view`)."""
    return node.ints_view("perm")


def _set_attr(node: "Node", name: str, value) -> None:
    node.set_attr(name, value)


def _attr(node: "Node", name: str, default=None):
    return node.attr(name, default)


def _compose(index: "GraphIndex", node: "Node") -> bool:
    inner = index.producer.get(node.input[0])
    if inner is None or inner.op_type != "Transpose" or inner.domain not in ("", "ai.onnx"):
        return False
    p, q = _perm(inner), _perm(node)
    if p is None or q is None or len(p) != len(q):
        return False
    combined = [p[i] for i in q]
    index.set_input(node, 0, inner.input[0])
    if combined == list(range(len(combined))):
        node.op_type = "Identity"  # removed by the identity sweep
        node.clear_attrs()
    else:
        _set_attr(node, "perm", combined)
    return True


def _above_pad(index: "GraphIndex", node: "Node") -> bool:
    """``Transpose_p(Pad(x, pads))`` → ``Pad(Transpose_p(x), pads permuted)`` when the pad has no other reader
    (a graph's NHWC input padded before its first convolution: the pad can then fold into the Conv)."""
    pad = index.producer.get(node.input[0])
    if pad is None or pad.op_type != "Pad" or pad.domain not in ("", "ai.onnx"):
        return False
    perm = _perm(node)
    if perm is None:
        return False
    if len(index.readers.get(pad.output[0], [])) != 1 or not index.free(pad.output[0]):
        return False
    if pad.input[0] in index.producer and not _conv_reads_only(index, node.output[0]):
        return False  # a graph input's pad or a convolution's: elsewhere, transposes move down through pads
    if _attr(pad, "axes") is not None or (len(pad.input) > 3 and pad.input[3]):
        return False
    pads = index.constant(pad.input[1]) if len(pad.input) > 1 else None
    rank = len(perm)
    if pads is None or pads.size != 2 * rank:
        return False
    begins, ends = pads[:rank], pads[rank:]
    moved = np.concatenate([[begins[perm[i]] for i in range(rank)], [ends[perm[i]] for i in range(rank)]])
    source, out = pad.input[0], node.output[0]
    moved_input = index.fresh(source + "_transposed")  # a new name: the old ones have value infos of other shapes
    shape = index.shapes.get(source)
    if shape is not None and len(shape) == rank:
        index.derive_shape(moved_input, [shape[d] for d in perm], source)
    index.set_input(node, 0, source)
    index.set_output(node, 0, moved_input)
    index.set_input(pad, 0, moved_input)
    index.set_input(pad, 1, index.add_initializer(moved.astype(np.int64), index.fresh(pad.input[1] + "_moved")))
    index.set_output(pad, 0, out)
    return True


def _conv_reads_only(index: "GraphIndex", name: str) -> bool:
    """True when ``name``'s only reader is a ``Conv`` reading it as its data input (a pad there folds into it)."""
    readers = index.readers.get(name, [])
    return (len(readers) == 1 and readers[0].op_type == "Conv" and readers[0].domain in ("", "ai.onnx")
            and readers[0].input[0] == name and index.free(name))


def _as_reshape(index: "GraphIndex", node: "Node") -> bool:
    shape = index.shapes.get(node.input[0])
    perm = _perm(node)
    if shape is None or perm is None or len(perm) != len(shape):
        return False
    moved = [d for d in perm if shape[d] != 1]
    if moved != sorted(moved):
        return False
    target = [shape[d] for d in perm]
    unknown = [i for i, d in enumerate(target) if d is None]
    if len(unknown) > 1 or (unknown and perm[unknown[0]] != unknown[0] and 0 in target):
        return False  # an unknown dim that moves is -1, which a zero-size dim would leave undefined
    dims = [(0 if perm[i] == i else -1) if d is None else d for i, d in enumerate(target)]
    name = index.add_initializer(np.asarray(dims, np.int64), index.fresh(node.output[0] + "_shape"))
    node.op_type = "Reshape"
    node.clear_attrs()
    node.input.append(name)
    index.readers[name].append(node)
    index.shapes[node.output[0]] = target
    return True


def _merge_reshapes(index: "GraphIndex", node: "Node") -> bool:
    """``Reshape(Reshape(x, s1), s2)`` → ``Reshape(x, s2)`` when each 0 of ``s2`` copies a dim ``s1`` copied
    from ``x`` at the same place (constant shapes, no ``allowzero``); the same through a ``Squeeze`` /
    ``Unsqueeze`` (constant axes) when each 0 of ``s2`` is before the first axis it removes or adds. A
    ``Reshape`` to the shape its input has becomes an ``Identity``."""
    if len(node.input) < 2 or _attr(node, "allowzero", 0):
        return False
    c2 = index.constant(node.input[1])
    if c2 is None:
        return False
    s2 = [int(d) for d in c2.reshape(-1)]
    if _same_shape(index.shapes.get(node.input[0]), s2):
        node.op_type = "Identity"  # removed by the identity sweep
        index.set_inputs(node, node.input[:1])
        node.clear_attrs()
        return True
    inner = index.producer.get(node.input[0])
    if inner is None or inner.domain not in ("", "ai.onnx") or len(inner.input) < 2:
        return False
    if inner.op_type == "Reshape":
        c1 = index.constant(inner.input[1])
        if c1 is None or _attr(inner, "allowzero", 0):
            return False
        s1 = [int(d) for d in c1.reshape(-1)]
        if any(d == 0 and (i >= len(s1) or s1[i] != 0) for i, d in enumerate(s2)):
            return False
    elif inner.op_type in ("Squeeze", "Unsqueeze"):
        axes = index.constant(inner.input[1])
        if axes is None or axes.size == 0:
            return False
        rank = len(index.shapes.get(inner.input[0] if inner.op_type == "Squeeze" else inner.output[0], []))
        if rank == 0:
            return False
        first = min(int(a) % rank for a in axes.reshape(-1))
        if any(d == 0 and i >= first for i, d in enumerate(s2)):
            return False
    else:
        return False
    index.set_input(node, 0, inner.input[0])
    return True


def _same_shape(shape: "list[int | None] | None", target: list[int]) -> bool:
    """True when reshaping a tensor of ``shape`` to ``target`` (0 copies, one -1 takes the rest) changes nothing."""
    if shape is None or len(shape) != len(target) or target.count(-1) > 1:
        return False
    return all(t == 0 or t == -1 or (d is not None and t == d) for d, t in zip(shape, target))


def _inverse(p: list[int]) -> list[int]:
    inv = [0] * len(p)
    for i, d in enumerate(p):
        inv[d] = i
    return inv


def _push_through(index: "GraphIndex", node: "Node") -> bool:
    """Moves the transposes feeding ``node`` below it (see the module docstring). :func:`push_transposes` calls
    it only for a node reading a transpose's output (it answers the common case, a node below none, itself)."""
    perm: list[int] | None = None
    data_slots = _data_slots(node)
    sources: dict[int, str] = {}
    constants: dict[int, np.ndarray] = {}
    removable = 0
    for slot in data_slots:
        name = node.input[slot] if slot < len(node.input) else ""
        if not name:
            continue
        producer = index.producer.get(name)
        if producer is not None and producer.op_type == "Transpose" and producer.domain in ("", "ai.onnx"):
            p = _perm(producer)
            if p is None or (perm is not None and p != perm):
                return False
            if node.op_type == "Pad" and (producer.input[0] not in index.producer or _conv_reads_only(index, node.output[0])):
                return False  # a graph input's pad, or a convolution's, stays below its transpose (see _above_pad)
            perm = p
            sources[slot] = producer.input[0]
            readers = index.readers.get(name, [])
            # The transpose dies once this node moves, or once all its readers (each layout-agnostic) move.
            if index.free(name) and all(r is node or _movable(r) for r in readers):
                removable += 1
            continue
        value = index.constant(name)
        if value is None:
            return False
        constants[slot] = value
    if perm is None or removable < len([o for o in node.output if o]):
        return False
    rank = len(perm)
    inv = _inverse(perm)
    if any(c.ndim > rank for c in constants.values()):
        return False
    extra_transform = _rewrite_attributes(index, node, perm, rank)
    if extra_transform is False:
        return False
    for slot, source in sources.items():
        index.set_input(node, slot, source)
    for slot, value in constants.items():
        if value.ndim == 0 or value.size == 1 and value.ndim <= 1:
            continue
        full = value.reshape((1,) * (rank - value.ndim) + value.shape)
        name = index.add_initializer(np.transpose(full, inv), index.fresh(node.input[slot] + "_nchw"))
        index.set_input(node, slot, name)
    out_perm = extra_transform if isinstance(extra_transform, list) else perm
    for k, out in enumerate(list(node.output)):
        if not out:
            continue
        inner = index.fresh(out + "_pre")
        index.set_output(node, k, inner)
        shape = index.shapes.get(out)
        if shape is not None and len(shape) == len(out_perm):
            before: list[int | None] = [None] * len(shape)
            for i, d in enumerate(out_perm):
                before[d] = shape[i]
            index.derive_shape(inner, before, out)
        if out_perm == list(range(len(out_perm))):
            after = Node.make("Identity", [inner], [out], index.fresh(node.name + "_out"))
        else:
            after = Node.make("Transpose", [inner], [out], index.fresh(node.name + "_T"), perm=out_perm)
        index.add_node(after)
    return True


def _movable(node: "Node") -> bool:
    op = node.op_type
    return node.domain in ("", "ai.onnx") and (op in _UNARY or op in _BROADCAST or op in _REDUCE or op in _AXIS
                                               or op == "Pad")


def _data_slots(node: "Node") -> list[int]:
    op = node.op_type
    if op in _BROADCAST or op == "Concat":
        return list(range(len(node.input)))
    return [0]


def _rewrite_attributes(index: "GraphIndex", node: "Node", perm: list[int], rank: int):
    """Adjusts axes / pads for data now in the source layout; returns the output permutation when it differs
    from ``perm`` (a reduction without keepdims), True when unchanged, False when the node cannot move."""
    op = node.op_type
    if op in _REDUCE:
        axes = _attr(node, "axes")
        from_input = axes is None and len(node.input) > 1 and node.input[1]
        if from_input:
            value = index.constant(node.input[1])
            if value is None:
                return False
            axes = [int(a) for a in value.reshape(-1)]
        if axes is None or len(axes) == 0:
            if _attr(node, "noop_with_empty_axes", 0):
                return True
            axes = list(range(rank))
        axes = sorted(a % rank for a in axes)
        mapped = sorted(perm[a] for a in axes)
        if from_input:
            name = index.add_initializer(np.asarray(mapped, np.int64), index.fresh(node.input[1] + "_nchw"))
            index.set_input(node, 1, name)
        else:
            _set_attr(node, "axes", mapped)
        if _attr(node, "keepdims", 1):
            return True
        kept = [perm[i] for i in range(rank) if i not in axes]
        order = sorted(kept)
        return [order.index(d) for d in kept]
    if op in _AXIS:
        axis = _attr(node, "axis", -1 if op != "Concat" else None)
        if axis is None:
            return False
        _set_attr(node, "axis", perm[axis % rank])
        return True
    if op == "Pad":
        if _attr(node, "axes") is not None or (len(node.input) > 3 and node.input[3]):
            return False
        pads = index.constant(node.input[1]) if len(node.input) > 1 else None
        if pads is None or pads.size != 2 * rank:
            return False
        inv = _inverse(perm)
        begins, ends = pads[:rank], pads[rank:]
        new = np.concatenate([[begins[inv[d]] for d in range(rank)], [ends[inv[d]] for d in range(rank)]])
        index.set_input(node, 1, index.add_initializer(new.astype(np.int64), index.fresh(node.input[1] + "_nchw")))
        return True
    return True
