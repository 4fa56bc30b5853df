"""Shape vectors computed at run time, resolved at export time where they can be (see :mod:`.onnx_optimize`).

TensorFlow graphs with an unknown batch compute reshape targets from ``Shape``: Keras's
``Reshape(x, Pack(StridedSlice(Shape(x), 0), 1, 1, C))`` lowers to ``Shape → Slice → Squeeze → Unsqueeze →
Concat → Cast → Reshape``. Each shape vector is followed symbolically — an entry is a known int, or "dim k of
tensor y" — through ``Shape``, ``Cast``, ``Slice`` (constant, step 1, axis 0), ``Squeeze`` / ``Unsqueeze`` /
``Reshape`` of a vector or scalar, ``Concat``, ``Gather`` (constant indices), ``ReduceProd`` / ``Mul`` of
known ints and int initializers. A
``Reshape(x, s)`` whose every entry of ``s`` is a known int or dim k of ``x`` itself at position k (0: copy),
with at most one other entry (−1: the rest), gets the constant shape; the computation then dies.

Also the shapes the clean-up starts from (:func:`shapes_from_types`) and the test of when it asks ONNX's shape
inference for more (:func:`shapes_for_transposes`).
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Union, cast

import numpy as np

if TYPE_CHECKING:  # pragma: no cover
    from .onnx_optimize import GraphIndex

__all__ = ["constant_reshapes", "shapes_for_transposes", "shapes_from_types"]

Entry = Union[int, tuple[str, int], None]  # an int, (tensor, dim), or None: unknown
_DEPTH = 12
_INT64_END = 1 << 63


def constant_reshapes(index: "GraphIndex") -> bool:
    """Gives every ``Reshape`` whose target resolves a constant shape; True when one changed."""
    changed = False
    cache: dict[str, list[Entry] | None] = {}
    for node in list(index.nodes):
        if node.op_type != "Reshape" or node.domain not in ("", "ai.onnx") or len(node.input) < 2:
            continue
        if index.constant(node.input[1]) is not None or _attr(node, "allowzero", 0):
            continue
        entries = _vector(index, node.input[1], cache, 0)
        if entries is None:
            continue
        x = node.input[0]
        shape, unknown = [], 0
        for position, entry in enumerate(entries):
            if isinstance(entry, int) and entry > 0:
                shape.append(entry)
            elif isinstance(entry, tuple) and entry == (x, position):
                shape.append(0)
            else:
                if isinstance(entry, int) and entry == -1:
                    pass
                elif isinstance(entry, int):
                    shape = []
                    break
                unknown += 1
                shape.append(-1)
        if not shape or unknown > 1:
            continue
        name = index.add_initializer(np.asarray(shape, np.int64), index.fresh(node.output[0] + "_shape"))
        index.set_input(node, 1, name)
        source = index.shapes.get(x)
        if source is not None and not (node.output[0] in index.shapes and node.output[0] in index.settled):
            out = [(source[k] if k < len(source) else None) if d == 0 else (None if d == -1 else d)
                   for k, d in enumerate(shape)]
            index.derive_shape(node.output[0], out, x)
        changed = True
    return changed


def _int64_product(values: list[int]) -> int:
    """The product of ``values`` as ``np.prod(values, dtype=np.int64)`` gives it, in Python ints: an int64
    product wraps modulo 2**64 in any order, so the exact product wrapped once is the same number (a value
    past int64, from a uint64 vector, goes to numpy, which refuses it)."""
    if any(v >= _INT64_END for v in values):
        return int(np.prod(values, dtype=np.int64))
    product = math.prod(values)
    return (product + (1 << 63)) % (1 << 64) - (1 << 63)


def _attr(node, name: str, default=None):
    return node.attr(name, default)


def _vector(index: "GraphIndex", name: str, cache: dict, depth: int) -> list[Entry] | None:
    if name in cache:
        return cache[name]
    cache[name] = None
    found = _compute(index, name, cache, depth) if depth < _DEPTH else None
    cache[name] = found
    return found


def _compute(index: "GraphIndex", name: str, cache: dict, depth: int) -> list[Entry] | None:
    value = index.constant(name)
    if value is not None:
        if value.dtype.kind not in "iu" or value.ndim > 1 or value.size > 16:
            return None
        return [int(v) for v in value.reshape(-1)]
    node = index.producer.get(name)
    if node is None or node.domain not in ("", "ai.onnx"):
        return None
    op = node.op_type
    if op == "Shape":
        if _attr(node, "start") is not None or _attr(node, "end") is not None:
            return None
        source = node.input[0]
        shape = index.shapes.get(source)
        if shape is None:
            return None
        return [d if d is not None else (source, k) for k, d in enumerate(shape)]
    if op in ("Cast", "Identity", "Squeeze", "Unsqueeze", "Reshape"):
        inner = _vector(index, node.input[0], cache, depth + 1)
        if inner is None:
            return None
        if op == "Cast":
            to = _attr(node, "to")
            if to not in (6, 7):  # int32, int64
                return None
        if op in ("Squeeze", "Unsqueeze", "Reshape") and len(inner) != 1:
            return None
        return inner
    if op == "Slice":
        inner = _vector(index, node.input[0], cache, depth + 1)
        parts = [index.constant(n) if n else None for n in list(node.input[1:]) + [""] * (4 - len(node.input[1:]))]
        starts, ends, axes, steps = parts[:4]
        if inner is None or starts is None or ends is None:
            return None
        if axes is not None and [int(a) for a in axes.reshape(-1)] != [0]:
            return None
        if steps is not None and [int(s) for s in steps.reshape(-1)] != [1]:
            return None
        start, end = int(starts.reshape(-1)[0]), int(ends.reshape(-1)[0])
        return inner[slice(start, end)]
    if op == "Concat":
        out: list[Entry] = []
        for piece in node.input:
            inner = _vector(index, piece, cache, depth + 1)
            if inner is None:
                return None
            out.extend(inner)
        return out
    if op in ("ReduceProd", "Mul"):
        if op == "ReduceProd":
            inner = _vector(index, node.input[0], cache, depth + 1)
            axes = index.constant(node.input[1]) if len(node.input) > 1 and node.input[1] else None
            if axes is not None and axes.size == 0 and _attr(node, "noop_with_empty_axes", 0):
                return inner
            if inner is None or (len(node.input) > 1 and node.input[1] and axes is None):
                return None
            if _attr(node, "keepdims", 1) and len(inner) != 1:
                return None
            entries = inner
        else:
            a, b = (_vector(index, n, cache, depth + 1) for n in node.input[:2])
            if a is None or b is None or len(a) != 1 or len(b) != 1:
                return None
            entries = a + b
        if all(isinstance(v, int) and v >= 0 for v in entries):
            return [_int64_product([int(cast(int, v)) for v in entries])]
        return [None]
    if op == "Gather":
        inner = _vector(index, node.input[0], cache, depth + 1)
        picks = index.constant(node.input[1])
        if inner is None or picks is None or int(_attr(node, "axis", 0)) != 0:
            return None
        return [inner[int(i)] for i in picks.reshape(-1)]
    if index.shapes.get(name) in ([], [1]):
        return [None]  # one computed entry: unknown, usable as -1 once
    return None


def shapes_from_types(index: "GraphIndex") -> None:
    """Takes the written tensor types as settled (they come from the model's own shape inference) and gives a
    transpose's input the shape its output has, permuted back (the lowering's channels-first intermediates)."""
    shapes = index.shapes
    index.settled.update([name for name, dims in shapes.items() if None not in dims or dims.count(None) == 1])
    for node in index.nodes:
        if node.op_type != "Transpose" or node.domain not in ("", "ai.onnx") or node.input[0] in shapes:
            continue
        shape = shapes.get(node.output[0])
        perm = node.ints_view("perm")
        if shape is None or perm is None or len(perm) != len(shape):
            continue
        before: list[int | None] = [None] * len(shape)
        for i, d in enumerate(perm):
            before[d] = shape[i]
        index.derive_shape(node.input[0], before, node.output[0])


def shapes_for_transposes(index: "GraphIndex", opset: int) -> bool:
    """Runs shape inference when a transpose's input has no fully known shape, or a mean's or max's input no
    known rank, and inference has not seen it (see :meth:`.GraphIndex.infer_shapes`); True when it ran."""
    shapes, settled = index.shapes, index.settled
    if any(n.input[0] not in settled and (None in shapes.get(n.input[0], [None]) if n.op_type == "Transpose"
                                          else n.input[0] not in shapes)
           for n in index.nodes if n.op_type in ("Transpose", "ReduceMean", "ReduceMax")):
        index.infer_shapes(opset)
        return True
    return False
