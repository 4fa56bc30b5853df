"""Pruning of the graphs in an ONNX graph's bodies, and the walks the clean-up shares (see :mod:`.onnx_optimize`).

The clean-up rewrites only the main graph; a body (``Loop`` / ``If`` subgraph) loses only the nodes whose
outputs nothing reads and its unread initializers (:func:`prune_body`). Value infos of tensors no node makes
any more are dropped (:func:`drop_stale_value_info`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Iterable, Iterator

from .onnx_node import Node
from .onnx_proto import AttributeProto, GraphProto, NodeProto

if TYPE_CHECKING:  # pragma: no cover
    from .onnx_optimize import GraphIndex

__all__ = ["all_nodes", "drop_stale_value_info", "every_node_read", "live_nodes", "prune_body"]


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


def live_nodes(index: "GraphIndex") -> tuple[set[str], set[Node]]:
    """The nodes some graph output (or body) depends on, by a walk up from the outputs, and the names they read
    with the graph outputs."""
    producer = index.producer
    get = producer.get
    # The live nodes themselves: a node hashes by identity (Node defines no __eq__), so no id() call per test.
    live: set[Node] = set()
    read = set(index.outputs)  # and what the live nodes read, gathered on the walk: what the kept nodes read
    update = read.update
    pending = [producer[name] for name in index.outputs | index.pinned if name in producer]
    while pending:
        node = pending.pop()
        if node in live:
            continue
        live.add(node)
        names = node.input if node.body_reads is None else node.input + node.body_reads
        update(names)
        for name in names:
            found = get(name) if name else None
            if found is not None and found not in live:
                pending.append(found)
    return read, live


def every_node_read(index: "GraphIndex") -> bool:
    """True when each node writes a tensor that a node reads, that is a graph output or that a body reads. In an
    acyclic graph whose tensors have one producer each (:attr:`.GraphIndex.acyclic`) every node is then live: from
    any node, following a reader of one of its tensors, then one of that reader's..., ends (no cycle) at a node
    writing a graph output or a tensor a body reads, and the walk of :func:`live_nodes` goes back the same way."""
    readers, outputs, pinned = index.readers, index.outputs, index.pinned
    for node in index.nodes:
        for name in node.output:
            if name and (readers.get(name) or name in outputs or name in pinned):
                break
        else:
            return False
    return True
