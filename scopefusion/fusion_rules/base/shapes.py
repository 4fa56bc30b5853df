"""Reshape targets (attention head splits and merges, moments of normalizations), read in every spelling that computes the same shape.

A target is read entry by entry: a constant; a ``Concat`` / ``ConcatV2`` / ``Pack`` of parts (constants, or
scalars computed at run time such as ``tf.shape(x)[0]`` or ONNX's ``Unsqueeze(Gather(Shape(x)))``), through
``Cast`` and ``Identity``. A computed entry is unknown (``None``).

NOTE: a target with exactly one unknown entry, every other entry a positive constant, computes the same as
that target with ``-1`` in its place: a Reshape keeps the element count, so the one free entry can only be
the quotient ``-1`` stands for (any other value fails at run time). That is a fact of the Reshape, not of
names, so dynamic-batch spellings (google-research BERT's ``get_shape_list``, tf2onnx's shape chains) are
read as the constant shapes they equal. Two or more unknown entries are not read.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from scopefusion.scope import ScopeGraph

from .constants import const_value

__all__ = ["reshape_target", "shape_parts"]

Tensor = tuple[str, int]
_THROUGH = ("Identity", "Cast")


def _producer(graph: ScopeGraph, tensor: Tensor) -> Any:
    node = graph.node(tensor[0])
    for _ in range(8):
        if node.op_type not in _THROUGH or not node.inputs or node.value is not None:
            return node
        node = graph.node(node.inputs[0][0])
    return node


def shape_parts(graph: ScopeGraph, tensor: Tensor) -> list[int | None] | None:
    """The entries of a reshape target: ints where constant, None where computed; None when the target is
    no constant and no concatenation of parts."""
    value = const_value(graph, tensor)
    if value is not None:
        return [int(v) for v in value.reshape(-1)]
    node = _producer(graph, tensor)
    if node.op_type == "Pack":
        if int(node.attrs.get("axis", 0)) != 0:
            return None
        pieces = list(node.inputs)
    elif node.op_type == "ConcatV2":
        pieces = list(node.inputs[:-1])
    elif node.op_type == "Concat" and int(node.attrs.get("axis", 0)) == 0:
        pieces = list(node.inputs)
    else:
        return None
    parts: list[int | None] = []
    for piece in pieces:
        known = const_value(graph, piece)
        if known is not None:
            parts.extend(int(v) for v in known.reshape(-1))
            continue
        count = 1 if node.op_type == "Pack" else _entries(graph, piece)
        if count is None:
            return None
        parts.extend([None] * count)
    return parts


def _entries(graph: ScopeGraph, piece: Tensor) -> int | None:
    """How many entries a computed part of a concatenated shape has: one for a scalar made a vector
    (``Unsqueeze`` / ``ExpandDims``), the index count of a ``Gather`` with constant indices, one for an
    ONNX ``Slice`` of one entry (constant bounds, step 1); else unknown."""
    node = _producer(graph, piece)
    if node.op_type in ("Unsqueeze", "ExpandDims"):
        return 1
    if node.op_type == "Slice" and 3 <= len(node.inputs) and graph.source.framework == "onnx":
        bounds = [const_value(graph, t) for t in node.inputs[1:3]]
        step = const_value(graph, node.inputs[4]) if len(node.inputs) > 4 else np.ones(1)
        if any(b is None or b.size != 1 for b in bounds) or step is None or step.size != 1 or int(step.reshape(())) != 1:
            return None
        start, end = (int(b.reshape(())) for b in bounds)  # type: ignore[union-attr]
        return 1 if 0 <= start and end == start + 1 else None  # a longer slice may be cut short by its input
    if node.op_type in ("Gather", "GatherV2") and len(node.inputs) > 1:
        indices = const_value(graph, node.inputs[1])
        return None if indices is None or indices.ndim != 1 else int(indices.size)
    return None


def reshape_target(graph: ScopeGraph, reshape: Any) -> tuple[list[int], bool] | None:
    """``(shape, computed)`` of a Reshape node's target: the shape with ``-1`` for its one computed entry
    (see the module docstring), and whether the target tensor is computed at run time; None when the
    target cannot be read as a shape."""
    if len(reshape.inputs) < 2:
        shape = reshape.attrs.get("shape")
        return ([int(v) for v in shape], False) if shape is not None else None
    parts = shape_parts(graph, reshape.inputs[1])
    if parts is None:
        return None
    computed = const_value(graph, reshape.inputs[1]) is None
    unknown = [i for i, p in enumerate(parts) if p is None]
    if not unknown:
        return [int(p) for p in parts if p is not None], computed
    if len(unknown) > 1 or any(p is not None and p <= 0 for p in parts):
        return None
    return [-1 if p is None else int(p) for p in parts], computed
