"""Comparing what the native and the TensorFlow SavedModel loaders give.

TensorFlow's freezing inlines calls through ``Identity`` nodes (``Func/<call>/input/_0``,
``Func/<call>/output/_3``) and ``NoOp`` control nodes (``Func/<call>/output_control_node/_5``); the
native loader wires the callee's nodes to the caller's tensors directly. :func:`normalised` removes
``Identity`` and ``NoOp`` nodes (each consumer of an ``Identity`` reads its input instead), control
edges and then nodes no graph output depends on, from a copy of an IR graph, bodies included, so
the two graphs compare equal when they compute the same thing with the same ops.
"""

from __future__ import annotations

from scopefusion.ir.graph import Graph

__all__ = ["normalised"]

_DROPPED = frozenset({"Identity", "NoOp"})


def normalised(graph: Graph) -> Graph:
    """A copy of ``graph`` without Identity / NoOp nodes, control edges or dead nodes."""
    copy = graph.clone()
    _normalise(copy)
    return copy


def _normalise(graph: Graph) -> None:
    for node in list(graph.nodes):
        node.control_inputs = []
        for body in node.subgraphs.values():
            _normalise(body)
    for node in list(graph.nodes):
        if node.op_type not in _DROPPED:
            continue
        if node.op_type == "Identity" and node.inputs and node.inputs[0] is not None and node.outputs:
            graph.replace_all_uses_with(node.outputs[0], node.inputs[0])
    live = set()
    stack = [v.producer for v in graph.outputs]
    while stack:
        node = stack.pop()
        if node in live:
            continue
        live.add(node)
        stack.extend(v.producer for v in node.inputs if v is not None)
    for node in reversed(list(graph.nodes)):
        if node not in live and not any(v is not None and v.producer is node for v in graph.inputs):
            graph.remove_node(node)
