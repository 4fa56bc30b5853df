"""SourceGraph's edges and topological order against networkx, on random graphs (cycles, self-loops,
control edges, TF1 loop back edges, absent inputs)."""

from __future__ import annotations

import networkx as nx
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from scopefusion.errors import ParseError
from scopefusion.parser.source_graph import ABSENT_INPUT, CONTROL_SLOT, SourceGraph, SourceNode

OPS = ("Op", "Op", "Op", "Merge", "NextIteration")


@st.composite
def node_lists(draw):
    n = draw(st.integers(1, 10))
    names = [f"n{i}" for i in range(n)]
    nodes = []
    for name in names:
        inputs = draw(st.lists(st.one_of(st.tuples(st.sampled_from(names), st.integers(0, 2)), st.just(ABSENT_INPUT)), max_size=3))
        control = draw(st.lists(st.sampled_from(names), max_size=2))
        nodes.append(SourceNode(name, draw(st.sampled_from(OPS)), inputs=inputs, control_inputs=control))
    return nodes


def _oracle(nodes: list[SourceNode]) -> tuple[nx.MultiDiGraph, list[str] | None]:
    """The edges and the order as networkx gives them: lexicographic topological sort by file position,
    NextIteration -> Merge edges exempt; None for a cycle."""
    g = nx.MultiDiGraph()
    g.add_nodes_from(n.name for n in nodes)
    for node in nodes:
        for slot, (producer, index) in enumerate(node.inputs):
            if (producer, index) != ABSENT_INPUT:
                g.add_edge(producer, node.name, key=slot, index=index)
        for producer in node.control_inputs:
            g.add_edge(producer, node.name, key=CONTROL_SLOT, index=CONTROL_SLOT)
    op = {n.name: n.op_type for n in nodes}
    dag = nx.DiGraph()
    dag.add_nodes_from(g)
    dag.add_edges_from((u, v) for u, v in g.edges() if not (op[u] == "NextIteration" and op[v] == "Merge"))
    position = {n.name: i for i, n in enumerate(nodes)}
    try:
        return g, list(nx.lexicographical_topological_sort(dag, key=position.__getitem__))
    except nx.NetworkXUnfeasible:
        return g, None


@settings(max_examples=400, deadline=None)
@given(node_lists())
def test_edges_and_order_agree_with_networkx(nodes):
    g, order = _oracle(nodes)
    if order is None:
        with pytest.raises(ParseError, match="data cycle"):
            SourceGraph(nodes)
        return
    graph = SourceGraph(nodes)
    assert [n.name for n in graph.nodes] == order
    assert graph.edges_run_forward == all(n.op_type != "NextIteration" for n in nodes)
    if graph.edges_run_forward:
        assert all(order.index(u) < order.index(v) for u, v in g.edges())
    assert list(graph.nx.edges(keys=True, data=True)) == list(g.edges(keys=True, data=True))
    assert {v: list(p) for v, p in graph.in_edges.items()} == {v: list(g.predecessors(v)) for v in g}
    assert {u: list(c) for u, c in graph.out_edges.items()} == {u: list(g.successors(u)) for u in g}
    for name in order:
        expected = sorted(((v, k, d["index"]) for _, v, k, d in g.out_edges(name, keys=True, data=True)),
                          key=lambda e: (order.index(e[0]), e[1]))
        assert graph.consumers(name) == expected
    assert dict(graph.positions) == {name: i for i, name in enumerate(order)}
    assert all(a is graph.out_edges[n.name] for a, n in zip(graph.out_edges_by_position, graph.nodes, strict=True))


@settings(max_examples=300, deadline=None)
@given(node_lists())
def test_unsorted_graph_keeps_the_given_order_and_says_whether_edges_run_forward(nodes):
    graph = SourceGraph(nodes, sort=False)
    assert graph.nodes == nodes
    assert dict(graph.positions) == {n.name: i for i, n in enumerate(nodes)}
    g, _ = _oracle(nodes)
    forward = all(graph.positions[u] < graph.positions[v] for u, v in g.edges())
    assert graph.edges_run_forward == (forward and all(n.op_type != "NextIteration" for n in nodes))
    assert all(a is graph.out_edges[n.name] for a, n in zip(graph.out_edges_by_position, nodes, strict=True))


def test_a_cycle_is_named():
    nodes = [SourceNode("a", "Op", inputs=[("c", 0)]), SourceNode("b", "Op", inputs=[("a", 0)]),
             SourceNode("c", "Op", inputs=[("b", 0)])]
    with pytest.raises(ParseError, match=r"data cycle \(a -> b -> c -> a\)"):
        SourceGraph(nodes, path="m.pb")


def test_single_edges_share_their_dict_and_a_second_edge_gets_its_own():
    one = SourceGraph([SourceNode("a", "Op"), SourceNode("b", "Op", inputs=[("a", 0)]), SourceNode("c", "Op", inputs=[("a", 0)])])
    two = SourceGraph([SourceNode("a", "Op"), SourceNode("d", "Op", inputs=[("a", 0), ("a", 0)], control_inputs=["a"])])
    assert one.out_edges["a"]["b"] is one.out_edges["a"]["c"] is one.in_edges["c"]["a"]
    assert two.out_edges["a"]["d"] == {0: 0, 1: 0, CONTROL_SLOT: CONTROL_SLOT} and two.in_edges["d"]["a"] is two.out_edges["a"]["d"]
    assert one.out_edges["a"]["b"] == {0: 0}  # the shared dict is left as it was


def _grouped(nodes: list[SourceNode]) -> tuple[dict[str, list[str]], dict[str, int]]:
    by_type: dict[str, list[str]] = {}
    firsts: dict[str, int] = {}
    for i, node in enumerate(nodes):
        firsts.setdefault(node.op_type, i)
        by_type.setdefault(node.op_type, []).append(node.name)
    return by_type, firsts


@settings(max_examples=300, deadline=None)
@given(node_lists())
def test_op_type_index_agrees_with_the_nodes_in_either_order(nodes):
    """The index listed while the edges are (in file order) is the index of ``nodes`` when sorting keeps that
    order, else one listed from the sorted nodes; the file-order index stays the given order's."""
    if _oracle(nodes)[1] is None:
        return
    graph = SourceGraph(nodes)
    by_type, firsts = _grouped(graph.nodes)
    assert {t: [n.name for n in listed] for t, listed in graph.nodes_by_type.items()} == by_type
    assert list(graph.nodes_by_type) == list(by_type)
    assert dict(graph.first_of_type) == firsts
    file_by_type, _ = _grouped(nodes)
    assert {t: [n.name for n in listed] for t, listed in graph.file_nodes_by_type.items()} == file_by_type
    assert list(graph.file_nodes_by_type) == list(file_by_type)
    assert set(graph.op_types_present) == {n.op_type for n in nodes}
