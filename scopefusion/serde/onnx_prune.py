"""Pruning of the graphs in an ONNX graph's bodies, and the walks the clean-up shares (see :mod:`.onnx_optimize`).

The clean-up rewrites only the main graph; a body (``Loop`` / ``If`` subgraph) loses only the nodes whose
outputs nothing reads and its unread initializers (:func:`prune_body`). Value infos of tensors no node makes
any more are dropped (:func:`drop_stale_value_info`).
"""

from __future__ import annotations

from typing import Iterable, Iterator

from .onnx_node import Node
from .onnx_proto import AttributeProto, GraphProto, NodeProto

__all__ = ["all_nodes", "drop_stale_value_info", "prune_body"]


def prune_body(body: GraphProto) -> None:
    """Removes a body's nodes whose outputs nothing reads and its unread initializers (bodies inside first)."""
    for node in body.node:
        for attr in node.attribute:
            for inner in ([attr.g] if attr.type == AttributeProto.GRAPH else list(attr.graphs)):
                prune_body(inner)
    outputs = {o.name for o in body.output}
    while True:
        read = {name for node in all_nodes(body.node) for name in node.input} | outputs
        keep = [n for n in body.node if any(name and name in read for name in n.output)]
        if len(keep) == len(body.node):
            break
        _set_nodes_of(body, keep)
    unread = [k for k, t in enumerate(body.initializer) if t.name not in read]
    for k in reversed(unread):
        del body.initializer[k]
    drop_stale_value_info(body)


def _set_nodes_of(graph: GraphProto, nodes: list[NodeProto]) -> None:
    copies = [NodeProto() for _ in nodes]
    for copy, node in zip(copies, nodes):
        copy.CopyFrom(node)
    del graph.node[:]
    graph.node.extend(copies)


def drop_stale_value_info(graph: GraphProto, present: set[str] | None = None) -> None:
    """Drops the value infos of tensors no node of ``graph`` makes (``present``: the names they make)."""
    if not len(graph.value_info):
        return
    if present is None:
        present = {name for node in graph.node for name in node.output}
    kept = [v for v in graph.value_info if v.name in present]
    if len(kept) != len(graph.value_info):
        del graph.value_info[:]
        graph.value_info.extend(kept)


def all_nodes(nodes: "Iterable[Node | NodeProto]") -> "Iterator[Node | NodeProto]":
    """``nodes`` (:class:`Node` or ``NodeProto``) and the nodes of their bodies, recursively."""
    for node in nodes:
        yield node
        if isinstance(node, Node):
            if node.body_reads is not None:
                for body in node.bodies():
                    yield from all_nodes(body.node)
            continue
        for attr in node.attribute:
            if attr.type == AttributeProto.GRAPH:
                yield from all_nodes(attr.g.node)
            elif attr.type == AttributeProto.GRAPHS:
                for body in attr.graphs:
                    yield from all_nodes(body.node)
