"""The order of a lowered ONNX graph's nodes, restored after the clean-up (:mod:`.onnx_optimize`) appends some."""

from __future__ import annotations

from typing import TYPE_CHECKING

from .onnx_node import Node

if TYPE_CHECKING:  # pragma: no cover
    from .onnx_optimize import GraphIndex

__all__ = ["toposort"]


def toposort(index: "GraphIndex") -> None:
    """Reorders ``index``'s nodes so each comes after the producers of its inputs (stable otherwise)."""
    nodes = index.nodes
    producer_of: dict[str, int] = {}
    for k, node in enumerate(nodes):
        for name in node.output:
            if name:
                producer_of[name] = k
    get = producer_of.get
    done: list[bool] = [False] * len(nodes)
    order: list[int] = []
    for start in range(len(nodes)):
        if done[start]:
            continue
        node = nodes[start]
        for name in node.input if node.body_reads is None else node.input + node.body_reads:
            placed = get(name, start)
            if placed > start and not done[placed]:
                break
        else:
            done[start] = True  # every producer placed already: the walk below would place it at once
            order.append(start)
            continue
        stack = [(start, False)]
        while stack:
            k, expanded = stack.pop()
            if done[k]:
                continue
            if expanded:
                done[k] = True
                order.append(k)
                continue
            stack.append((k, True))
            for name in reversed(_inputs_with_bodies(nodes[k])):
                p = producer_of.get(name)
                if p is not None and not done[p] and p != k:
                    stack.append((p, False))
    if order != list(range(len(nodes))):
        index.nodes = [nodes[k] for k in order]


def _inputs_with_bodies(node: Node) -> list[str]:
    return node.input if node.body_reads is None else node.input + node.body_reads
