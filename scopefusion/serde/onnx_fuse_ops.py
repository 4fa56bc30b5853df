"""Last rewrites of a lowered ONNX graph into the ops onnxruntime runs best (see :mod:`.onnx_optimize`).

* ``ReduceMean`` / ``ReduceMax`` over every spatial axis (2…) of a tensor of known rank ≥ 3 →
  ``GlobalAveragePool`` / ``GlobalMaxPool`` (and ``Squeeze`` of those axes without ``keepdims``):
  onnxruntime keeps the blocked channels-first layout through them.
* ``Pad`` (constant zero, non-negative pads on spatial axes only) read only by a ``Conv`` with explicit pads →
  the pads added to the ``Conv``'s (a zero-padded input is what ``Conv`` pads with); read only by a ``MaxPool``
  of a ``Relu`` (or a ``Clip`` at 0 or above), with pads smaller than the window → the pads added to the
  ``MaxPool``'s (every window keeps an input value, all of them >= 0, so a padded zero never wins).
* ``BatchNormalization`` (inference, constant float32 parameters) of a ``Conv``'s output that nothing else
  reads, whose shift comes out zero (``offset = mean · scale``, as in a layer with fresh statistics) → ``Mul``
  by its per-channel scale, computed as onnxruntime computes it. onnxruntime folds either into the ``Conv``'s
  weights at load time, to the same values; but folding a ``BatchNormalization`` it gives the ``Conv`` a bias,
  zero or not, and a ``Conv`` without one runs faster. The weights themselves are not read here (see
  :mod:`.weight_stream` on why the export does not copy them). A fused BatchNorm the writer sees so is written as
  this ``Mul`` at once (:func:`.onnx_fused_ops.batch_norm_as_scale`).
* ``Clip(x + 3, 0, 6) · (1/6)`` (or ``/ 6``; TensorFlow's hard sigmoid, as in MobileNetV3's squeeze-and-excitation
  gates), each step read only by the next → ``HardSigmoid(x, alpha=1/6, beta=0.5)``: one node, which
  onnxruntime fuses into the ``Conv`` that makes ``x`` as its activation.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from .onnx_node import Node
from .onnx_order import toposort

if TYPE_CHECKING:  # pragma: no cover
    from .onnx_optimize import GraphIndex

__all__ = ["FUSED_OP_TYPES", "fuse_for_runtime"]

_GLOBAL = {"ReduceMean": "GlobalAveragePool", "ReduceMax": "GlobalMaxPool"}
# The op types :func:`fuse_for_runtime` starts a rewrite at: a graph without any of them gives it nothing to do.
FUSED_OP_TYPES = frozenset(_GLOBAL) | {"Pad", "BatchNormalization", "Clip"}
_FLOAT32 = np.dtype(np.float32)


def _attr(node, name: str, default=None):
    return node.attr(name, default)


def _set(node, name: str, value) -> None:
    node.set_attr(name, value)


def fuse_for_runtime(index: "GraphIndex") -> bool:
    """One sweep of the rewrites above; True when something changed. The index's producers and readers follow
    each rewrite (a node that stops reading a tensor leaves its readers); new nodes are appended."""
    changed = False
    for node in list(index.nodes):
        if node.domain not in ("", "ai.onnx"):
            continue
        if node.op_type in _GLOBAL:
            changed |= _global_pool(index, node)
        elif node.op_type == "Pad":
            changed |= _pad_into_conv(index, node) or _pad_into_max_pool(index, node)
        elif node.op_type == "BatchNormalization":
            changed |= _batch_norm_to_mul(index, node)
        elif node.op_type == "Clip":
            changed |= _hard_sigmoid(index, node)
    return changed


def early_global_pools(index: "GraphIndex") -> bool:
    """The global-pool rewrite of :func:`fuse_for_runtime`, before the other passes: for each spatial mean or max
    whose input is not a Transpose's output (the passes would move that transpose below it), whose input's rank
    the index already knows. No other pass rewrites such a node or its input, so the rewrite the final sweep
    would make of it is the same; the clean-up then ends without the round of every pass that follows a change
    of the final sweep. True when something changed. The nodes stay in order (:func:`_put_before_readers`)."""
    changed = False
    producer = index.producer
    count = len(index.nodes)
    for node in list(index.nodes):
        if node.op_type in _GLOBAL and node.domain in ("", "ai.onnx"):
            source = producer.get(node.input[0])
            if source is None or source.op_type != "Transpose":
                changed |= _global_pool(index, node)
    if len(index.nodes) != count:
        _put_before_readers(index, count)
    return changed


def _put_before_readers(index: "GraphIndex", count: int) -> None:
    """Moves the nodes appended after the first ``count`` (the ``Squeeze`` of each global pool without keepdims,
    which reads only its pool's output and a new initializer) where :func:`~.onnx_order.toposort` puts them in a
    graph whose other nodes are in order: each just before the first node that reads its output, else last; without
    that sort's walk over every node. Sorts when a body reads one's output or two have one first reader (then
    their order is that reader's)."""
    nodes = index.nodes
    added = nodes[count:]
    places: list[int | None] = []
    for node in added:
        readers = index.readers.get(node.output[0])
        if node.output[0] in index.pinned:
            toposort(index)
            return
        places.append(min(map(nodes.index, readers)) if readers else None)
    placed = [p for p in places if p is not None]
    if len(set(placed)) != len(placed):
        toposort(index)
        return
    del nodes[count:]
    for place, node in sorted(((p, n) for p, n in zip(places, added) if p is not None), key=lambda pn: -pn[0]):
        nodes.insert(place, node)  # from the last place back, so the earlier places stay where they were
    nodes.extend(n for p, n in zip(places, added) if p is None)


def early_pads_into_convs(index: "GraphIndex") -> bool:
    """The folding of zero pads into the ``Conv`` reading them of :func:`fuse_for_runtime`, before the other passes,
    for each pad of a node's output that nothing else reads (so no pass merges it with another) and that is not
    a Transpose's (the passes would move that transpose): no other pass rewrites such a pad, so the final sweep
    would fold it the same. The pads folded are dropped at once, as the next sweep of dead nodes would drop
    them (their names stay taken for fresh ones, as there). True when something changed."""
    producer, readers = index.producer, index.readers
    folded = []
    for node in index.nodes:
        if node.op_type != "Pad" or node.domain not in ("", "ai.onnx"):
            continue
        source = producer.get(node.input[0])
        if (source is None or source.op_type == "Transpose" or len(readers.get(node.input[0], ())) != 1
                or not index.free(node.input[0])):
            continue
        if _pad_into_conv(index, node):
            folded.append(node)
    if not folded:
        return False
    index.fresh_names()  # taken with the pads' names, as fresh names made before the pads go are
    dropped = set(folded)
    index.drop_nodes([n for n in index.nodes if n not in dropped], folded)
    return True


def _global_pool(index: "GraphIndex", node) -> bool:
    shape = index.shapes.get(node.input[0])
    if shape is None or len(shape) < 3:
        return False
    rank = len(shape)
    axes = _attr(node, "axes")
    if axes is None and len(node.input) > 1 and node.input[1]:
        value = index.constant(node.input[1])
        axes = None if value is None else [int(a) for a in value.reshape(-1).tolist()]  # Python numbers: int() is quick
    if axes is None or sorted(a % rank for a in axes) != list(range(2, rank)):
        return False
    keep = _attr(node, "keepdims", 1)
    op = _GLOBAL[node.op_type]
    out = node.output[0]
    if keep:
        node.clear_attrs()
        index.set_inputs(node, node.input[:1])
        node.op_type = op
        return True
    pooled = index.fresh(out + "_pooled")
    index.derive_shape(pooled, list(shape[:2]) + [1] * (rank - 2), node.input[0])
    node.clear_attrs()
    index.set_inputs(node, node.input[:1])
    node.op_type = op
    index.set_output(node, 0, pooled)
    axes_name = index.add_initializer(np.arange(2, rank, dtype=np.int64), index.fresh(out + "_axes"))
    index.add_node(Node.make("Squeeze", [pooled, axes_name], [out], index.fresh(node.name + "_squeeze")))
    return True


def _zero_pads(index: "GraphIndex", node) -> tuple[list[int], list[int]] | None:
    """The (begins, ends) of a ``Pad`` that adds zeros on spatial axes (2…) only and has one reader, else None."""
    mode = _attr(node, "mode", b"constant")
    if mode not in (b"constant", "constant") or _attr(node, "axes") is not None:
        return None
    if len(node.input) > 2 and node.input[2]:
        value = index.constant(node.input[2])
        if value is None or float(np.asarray(value).reshape(-1)[0]) != 0.0:
            return None
    if len(node.input) > 3 and node.input[3]:
        return None
    pads = index.constant(node.input[1]) if len(node.input) > 1 else None
    readers = index.readers.get(node.output[0], [])
    if pads is None or len(readers) != 1 or not index.free(node.output[0]):
        return None
    pad_list = [int(p) for p in pads.reshape(-1)]
    rank = len(pad_list) // 2
    begins, ends = pad_list[:rank], pad_list[rank:]
    if any(p < 0 for p in pad_list) or any(begins[d] or ends[d] for d in (0, 1)):
        return None
    return begins[2:], ends[2:]


def _add_pads(index: "GraphIndex", node, target, begins: list[int], ends: list[int]) -> None:
    spatial = len(begins)
    current = list(_attr(target, "pads", [0] * (2 * spatial)))
    _set(target, "pads", [current[k] + begins[k] for k in range(spatial)] + [current[spatial + k] + ends[k]
                                                                             for k in range(spatial)])
    index.set_input(target, 0, node.input[0])


def _reader(index: "GraphIndex", node, op_type: str):
    """The one reader of ``node``'s output when it is a default-domain ``op_type`` reading it as input 0."""
    target = index.readers[node.output[0]][0]
    if target.op_type != op_type or target.domain not in ("", "ai.onnx") or target.input[0] != node.output[0]:
        return None
    if _attr(target, "auto_pad", b"NOTSET") not in (b"NOTSET", "NOTSET"):
        return None
    return target


def _pad_into_conv(index: "GraphIndex", node) -> bool:
    pads = _zero_pads(index, node)
    conv = None if pads is None else _reader(index, node, "Conv")
    if pads is None or conv is None:
        return False
    _add_pads(index, node, conv, *pads)
    return True


def _pad_into_max_pool(index: "GraphIndex", node) -> bool:
    pads = _zero_pads(index, node)
    pool = None if pads is None else _reader(index, node, "MaxPool")
    if pads is None or pool is None or len([o for o in pool.output if o]) != 1 or _attr(pool, "ceil_mode", 0):
        return False
    kernel = list(_attr(pool, "kernel_shape", []))
    begins, ends = pads
    current = list(_attr(pool, "pads", [0] * (2 * len(kernel))))
    if (any(d != 1 for d in _attr(pool, "dilations", [1] * len(kernel))) or len(kernel) != len(begins)
            or any(current[k] + begins[k] >= kernel[k] or current[len(kernel) + k] + ends[k] >= kernel[k]
                   for k in range(len(kernel)))
            or not _non_negative(index, node.input[0])):
        return False
    _add_pads(index, node, pool, begins, ends)
    return True


def _non_negative(index: "GraphIndex", name: str) -> bool:
    """True when ``name`` is a ``Relu``'s output or a ``Clip``'s with a constant lower bound >= 0."""
    producer = index.producer.get(name)
    if producer is None or producer.domain not in ("", "ai.onnx"):
        return False
    if producer.op_type == "Relu":
        return True
    if producer.op_type != "Clip" or len(producer.input) < 2 or not producer.input[1]:
        return False
    low = index.constant(producer.input[1])
    return low is not None and low.size == 1 and float(low.reshape(-1)[0]) >= 0.0


def _batch_norm_to_mul(index: "GraphIndex", node) -> bool:
    if len(node.input) != 5 or any(node.output[1:]) or _attr(node, "training_mode", 0):
        return False
    x = node.input[0]
    conv = index.producer.get(x)
    if (conv is None or conv.op_type != "Conv" or conv.domain not in ("", "ai.onnx")
            or len(index.readers.get(x, [])) != 1):
        return False
    params = batch_norm_scale([index.constant(name) for name in node.input[1:]], _attr(node, "epsilon", 1e-5))
    if params is None or np.count_nonzero(params[1]):  # any() of the shift, counted faster
        return False
    scale = params[0]
    channels = scale.shape[0]
    rank = len(index.shapes.get(conv.input[1]) or ())  # the filter's rank is the output's
    if rank < 3:
        return False
    factor = index.add_initializer(scale.reshape((channels,) + (1,) * (rank - 2)), index.fresh(node.name + "_scale"))
    node.op_type = "Mul"
    index.set_inputs(node, [x, factor])
    del node.output[1:]
    node.clear_attrs()
    return True


def batch_norm_scale(params: "list[np.ndarray | None]", epsilon: float) -> "tuple[np.ndarray, np.ndarray] | None":
    """The per-channel (scale, shift) of an inference batch norm of parameters (scale, offset, mean, variance), in
    float32 as onnxruntime computes them when it folds a ``BatchNormalization`` into a ``Conv`` (the same values);
    None unless the four are constant float32 vectors of one length."""
    first = params[0]
    if first is None or first.ndim != 1:
        return None
    shape = first.shape
    for p in params:
        if p is None or p.dtype != _FLOAT32 or p.shape != shape:
            return None
    gamma, beta, mean, variance = params
    scale = gamma / np.sqrt(variance + np.float32(epsilon))  # type: ignore[operator]
    return scale, beta - mean * scale  # type: ignore[operator]


def _scalar(index: "GraphIndex", name: str) -> float | None:
    value = index.constant(name) if name else None
    if value is None or value.size != 1 or value.dtype.kind != "f":
        return None
    return float(value.reshape(-1)[0])


def _other_input(index: "GraphIndex", node, op_type: str, value: float, commutes: bool) -> str | None:
    """The input of default-domain ``op_type`` node ``node`` that is not the constant ``value`` (float32)."""
    if node is None or node.op_type != op_type or node.domain not in ("", "ai.onnx") or len(node.input) != 2:
        return None
    for data, const in ((0, 1), (1, 0)) if commutes else ((0, 1),):
        if _scalar(index, node.input[const]) == float(np.float32(value)):
            return node.input[data]
    return None


def _only_reader(index: "GraphIndex", name: str):
    readers = index.readers.get(name, [])
    return readers[0] if len(readers) == 1 and index.free(name) else None


def _hard_sigmoid(index: "GraphIndex", clip) -> bool:
    if len(clip.input) != 3:
        return False
    add = index.producer.get(clip.input[0])
    if add is None or add.op_type != "Add":  # most clips (ReLU6) read no Add: answered before any constant is read
        return False
    if _scalar(index, clip.input[1]) != 0.0 or _scalar(index, clip.input[2]) != 6.0:
        return False
    six = index.constant(clip.input[2])
    if six is None or six.dtype != np.float32:  # onnxruntime's HardSigmoid runs on float only
        return False
    x = _other_input(index, add, "Add", 3.0, True)
    if x is None or _only_reader(index, clip.input[0]) is not clip:
        return False
    scale = _only_reader(index, clip.output[0])
    if scale is None or clip.output[0] not in scale.input or (
            _other_input(index, scale, "Mul", 1 / 6, True) != clip.output[0]
            and _other_input(index, scale, "Div", 6.0, False) != clip.output[0]):
        return False
    scale.op_type = "HardSigmoid"  # the Add and the Clip, read no more, go as dead nodes
    index.set_inputs(scale, [x])
    scale.clear_attrs()
    scale.set_attr("alpha", float(np.float32(1 / 6)))
    scale.set_attr("beta", 0.5)
    return True
