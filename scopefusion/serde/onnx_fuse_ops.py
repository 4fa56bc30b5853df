"""Last rewrites of a lowered ONNX graph into the ops onnxruntime runs best (see :mod:`.onnx_optimize`).

* ``ReduceMean`` / ``ReduceMax`` over every spatial axis (2…) of a tensor of known rank ≥ 3 →
  ``GlobalAveragePool`` / ``GlobalMaxPool`` (and ``Squeeze`` of those axes without ``keepdims``):
  onnxruntime keeps the blocked channels-first layout through them.
* ``Pad`` (constant zero, non-negative pads on spatial axes only) read only by a ``Conv`` with explicit pads →
  the pads added to the ``Conv``'s (a zero-padded input is what ``Conv`` pads with).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from .onnx_node import Node

if TYPE_CHECKING:  # pragma: no cover
    from .onnx_optimize import GraphIndex

__all__ = ["fuse_for_runtime"]

_GLOBAL = {"ReduceMean": "GlobalAveragePool", "ReduceMax": "GlobalMaxPool"}


def _attr(node, name: str, default=None):
    return node.attr(name, default)


def _set(node, name: str, value) -> None:
    node.set_attr(name, value)


def fuse_for_runtime(index: "GraphIndex") -> bool:
    """One sweep of the rewrites above; True when something changed."""
    changed = False
    for node in list(index.nodes):
        if node.domain not in ("", "ai.onnx"):
            continue
        if node.op_type in _GLOBAL:
            changed |= _global_pool(index, node)
        elif node.op_type == "Pad":
            changed |= _pad_into_conv(index, node)
    return changed


def _global_pool(index: "GraphIndex", node) -> bool:
    shape = index.shapes.get(node.input[0])
    if shape is None or len(shape) < 3:
        return False
    rank = len(shape)
    axes = _attr(node, "axes")
    if axes is None and len(node.input) > 1 and node.input[1]:
        value = index.constant(node.input[1])
        axes = None if value is None else [int(a) for a in value.reshape(-1)]
    if axes is None or sorted(a % rank for a in axes) != list(range(2, rank)):
        return False
    keep = _attr(node, "keepdims", 1)
    op = _GLOBAL[node.op_type]
    out = node.output[0]
    if keep:
        node.clear_attrs()
        del node.input[1:]
        node.op_type = op
        return True
    pooled = index.fresh(out + "_pooled")
    index.derive_shape(pooled, list(shape[:2]) + [1] * (rank - 2), node.input[0])
    node.clear_attrs()
    del node.input[1:]
    node.op_type = op
    index.set_output(node, 0, pooled)
    axes_name = index.add_initializer(np.arange(2, rank, dtype=np.int64), index.fresh(out + "_axes"))
    index.add_node(Node.make("Squeeze", [pooled, axes_name], [out], index.fresh(node.name + "_squeeze")))
    return True


def _pad_into_conv(index: "GraphIndex", node) -> bool:
    mode = _attr(node, "mode", b"constant")
    if mode not in (b"constant", "constant") or _attr(node, "axes") is not None:
        return False
    if len(node.input) > 2 and node.input[2]:
        value = index.constant(node.input[2])
        if value is None or float(np.asarray(value).reshape(-1)[0]) != 0.0:
            return False
    if len(node.input) > 3 and node.input[3]:
        return False
    pads = index.constant(node.input[1]) if len(node.input) > 1 else None
    readers = index.readers.get(node.output[0], [])
    if pads is None or len(readers) != 1 or not index.free(node.output[0]):
        return False
    conv = readers[0]
    if conv.op_type != "Conv" or conv.domain not in ("", "ai.onnx") or conv.input[0] != node.output[0]:
        return False
    if _attr(conv, "auto_pad", b"NOTSET") not in (b"NOTSET", "NOTSET"):
        return False
    pad_list = [int(p) for p in pads.reshape(-1)]
    rank = len(pad_list) // 2
    begins, ends = pad_list[:rank], pad_list[rank:]
    if any(p < 0 for p in pad_list) or any(begins[d] or ends[d] for d in (0, 1)):
        return False
    spatial = rank - 2
    current = list(_attr(conv, "pads", [0] * (2 * spatial)))
    merged = [current[k] + begins[2 + k] for k in range(spatial)] + [current[spatial + k] + ends[2 + k] for k in range(spatial)]
    _set(conv, "pads", merged)
    index.set_input(conv, 0, node.input[0])
    return True
