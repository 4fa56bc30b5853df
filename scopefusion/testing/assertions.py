"""Assertions and counts for tests that compare fused IR graphs."""

from __future__ import annotations

from collections import Counter
from typing import Any, Iterable

from ..ir.graph import Graph
from .diff import GraphDiff
from .matching import graph_diff as _graph_diff

__all__ = ["as_graph", "assert_graphs_equal", "fusion_counts", "graph_diff", "op_counts"]

FUSION_RULE_ATTR = "_fusion_rule"


def as_graph(x: Any, what: str = "graph") -> Graph:
    """``x`` when it is an IR graph, a model's main graph when it is a converted model; else TypeError."""
    if isinstance(x, Graph):
        return x
    graph = getattr(x, "graph", None)
    if isinstance(graph, Graph):
        return graph
    raise TypeError(f"{what} must be an IR Graph or a converted Model, found {type(x).__name__}")


def graph_diff(
    a: Any,
    b: Any,
    *,
    check_names: bool = False,
    check_attrs: bool = True,
    rtol: float = 0.0,
    atol: float = 0.0,
    ignore_attrs: Iterable[str] = (),
) -> GraphDiff:
    """How ``a`` differs from ``b`` (IR graphs, or converted models' main graphs) as a :class:`GraphDiff`.

    See :mod:`scopefusion.testing.matching` for what equal means and how nodes are paired.
    """
    return _graph_diff(
        as_graph(a, "a"), as_graph(b, "b"),
        check_names=check_names, check_attrs=check_attrs, rtol=rtol, atol=atol, ignore_attrs=ignore_attrs,
    )  # fmt: skip


def assert_graphs_equal(
    a: Any,
    b: Any,
    *,
    check_names: bool = False,
    check_attrs: bool = True,
    rtol: float = 0.0,
    atol: float = 0.0,
    ignore_attrs: Iterable[str] = (),
) -> None:
    """Raises AssertionError showing the smallest difference first unless ``a`` and ``b`` are structurally equal.

    Names are ignored unless ``check_names``; constants and float attributes compare within ``rtol`` /
    ``atol``; see :func:`graph_diff` for the keywords.
    """
    __tracebackhide__ = True
    diff = graph_diff(a, b, check_names=check_names, check_attrs=check_attrs, rtol=rtol, atol=atol, ignore_attrs=ignore_attrs)
    if not diff.equal:
        raise AssertionError(diff.format())


def op_counts(graph: Any, *, bodies: bool = False) -> dict[str, int]:
    """Nodes per qualified op (``fused.LayerNorm``, ``onnx.MatMul``, ``ge.Const``...), sorted by op; with
    ``bodies`` the nodes of control-flow bodies count too."""
    counts: Counter = Counter()
    _count_ops(as_graph(graph), counts, bodies)
    return dict(sorted(counts.items()))


def _count_ops(graph: Graph, counts: Counter, bodies: bool) -> None:
    for node in graph.nodes:
        counts[node.op] += 1
        if bodies:
            for body in node.subgraphs.values():
                _count_ops(body, counts, bodies)


def fusion_counts(model: Any) -> dict[str, int]:
    """Fusions per rule, sorted by rule: from a converted model's fusion run (as ``Model.fusion_counts``),
    or, for an IR graph (one read back from a file, say), the nodes per rule that the ``_fusion_rule``
    attribute marks in it and its bodies (a many-to-many fusion marks each node it made)."""
    run = getattr(model, "fusion_run", None)
    if run is not None and not isinstance(model, Graph):
        return dict(sorted(Counter(a.pass_name for a in run.accepted).items()))
    counts: Counter = Counter()
    stack = [as_graph(model, "model")]
    while stack:
        graph = stack.pop()
        for node in graph.nodes:
            rule = node.attrs.get(FUSION_RULE_ATTR)
            if rule:
                counts[rule] += 1
            stack.extend(node.subgraphs.values())
    return dict(sorted(counts.items()))
