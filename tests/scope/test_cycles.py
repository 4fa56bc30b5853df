"""The incremental cycle check against networkx on the fully contracted graph."""

from __future__ import annotations

import networkx as nx
from hypothesis import given, settings
from hypothesis import strategies as st

from scopefusion.parser.source_graph import SourceGraph, SourceNode
from scopefusion.scope import ScopeGraph
from scopefusion.scope._order import ContractedOrder, find_cycle


@st.composite
def dag_and_groups(draw):
    n = draw(st.integers(3, 14))
    edges = draw(st.sets(st.tuples(st.integers(0, n - 1), st.integers(0, n - 1)).filter(lambda e: e[0] < e[1]), max_size=30))
    labels = draw(st.lists(st.integers(-1, 4), min_size=n, max_size=n))  # -1: in no group
    order = draw(st.permutations(range(n)))
    shuffled = draw(st.booleans())
    return n, sorted(edges), labels, list(order) if shuffled else list(range(n))


def _source(n, edges, order):
    producers = {j: [f"n{i}" for i, jj in edges if jj == j] for j in range(n)}
    nodes = [SourceNode(f"n{j}", "Op", inputs=[(p, 0) for p in producers[j]]) for j in order]
    # sort=False keeps a possibly non-topological order: the checker must notice and renumber.
    return SourceGraph(nodes, sort=False)


def _quotient_is_dag(n, edges, owner):
    g = nx.DiGraph()
    g.add_nodes_from(owner.get(f"n{i}", f"n{i}") for i in range(n))
    for u, v in edges:
        a, b = owner.get(f"n{u}", f"n{u}"), owner.get(f"n{v}", f"n{v}")
        if a != b:
            g.add_edge(a, b)
    return nx.is_directed_acyclic_graph(g)


@settings(max_examples=300, deadline=None)
@given(dag_and_groups(), st.booleans())
def test_incremental_check_agrees_with_networkx(case, sort):
    n, edges, labels, order = case
    source = _source(n, edges, order)
    if sort:  # sorted by SourceGraph: the order is known to be topological and is not checked
        source = SourceGraph(source.nodes)
        assert source.edges_run_forward
    graph = ScopeGraph.build(source)
    checker = ContractedOrder(source, graph.tree._position, has_back_edges=False, known_valid=source.edges_run_forward)
    # The same checks given the members' nodes, consumers and positions (as the validator does, the members
    # being claimed by no earlier fusion): the same answers and the same numbering.
    given_nodes = ContractedOrder(source, graph.tree._position, has_back_edges=False, known_valid=source.edges_run_forward)
    # And given the neighbours outside the members instead (as the validator's boundary walk finds them).
    given_outside = ContractedOrder(source, graph.tree._position, has_back_edges=False, known_valid=source.edges_run_forward)
    owner: dict[str, str] = {}
    for group in sorted(set(labels) - {-1}):
        members = [f"n{i}" for i in range(n) if labels[i] == group]
        name = f"G{group}"
        trial = dict(owner, **{m: name for m in members})
        cycle, token = checker.find_cycle(name, members)
        assert (cycle is None) == _quotient_is_dag(n, edges, trial), (group, cycle)
        assert given_nodes.first_claimed(members, [graph.tree._position[m] for m in members]) is None
        same, given_token = given_nodes.find_cycle(
            name, members, {m: source.node(m) for m in members}, {m: source.out_edges[m] for m in members},
            {m: graph.tree._position[m] for m in members},
        )
        assert same == cycle
        inside = set(members)
        outside = (
            [p for m in members for p, _ in source.node(m).inputs if p not in inside],
            [c for m in members for c in source.out_edges[m] if c not in inside],
        )
        also, outside_token = given_outside.find_cycle(
            name, members, positions={m: graph.tree._position[m] for m in members}, outside=outside
        )
        assert also == cycle
        if cycle is None:
            checker.contract(name, token)
            given_nodes.contract(name, given_token)
            given_outside.contract(name, outside_token)
            owner = trial
            assert all(given_nodes.pos(given_nodes._vertex(m)) == checker.pos(checker._vertex(m)) for m in source.by_name)
            assert all(given_outside.pos(given_outside._vertex(m)) == checker.pos(checker._vertex(m)) for m in source.by_name)
            assert given_nodes.first_claimed(members) == (members[0], name) == checker.first_claimed(members)
            # The numbering stays topological for the contracted graph.
            for u, v in edges:
                a, b = checker._vertex(f"n{u}"), checker._vertex(f"n{v}")
                if a != b:
                    assert checker.pos(a) < checker.pos(b)
        else:
            assert cycle[0] == cycle[-1] == f"<fusion {name}>"


def test_loop_back_edges_do_not_count(mk):
    # A TF1 loop: Merge reads NextIteration (a back edge); fusing the loop body is not a cycle.
    graph = ScopeGraph.build(
        mk.graph(
            *mk.ops(
                ("x", "Placeholder"),
                ("w/Enter", "Enter", "x"),
                ("w/Merge", "Merge", "w/Enter", "w/NextIteration"),
                ("w/body", "Neg", "w/Merge"),
                ("w/NextIteration", "NextIteration", "w/body"),
                ("w/Exit", "Exit", "w/Merge"),
            )
        )
    )
    checker = ContractedOrder(graph.source, graph.tree._position, has_back_edges=True)
    cycle, token = checker.find_cycle("loop", ["w/Merge", "w/body"])
    assert cycle is None
    checker.contract("loop", token)
    assert checker.pos(checker._vertex("w/Merge")) < checker.pos("w/Exit")


@st.composite
def digraphs(draw):
    """A small directed graph, cycles and self-loops allowed: vertex count and edges in insertion order."""
    n = draw(st.integers(1, 9))
    edges = draw(st.lists(st.tuples(st.integers(0, n - 1), st.integers(0, n - 1)), max_size=24, unique=True))
    return n, edges


@settings(max_examples=400, deadline=None)
@given(digraphs(), st.data())
def test_find_cycle_walks_as_networkx(case, data):
    n, edges = case
    g = nx.DiGraph()
    g.add_nodes_from(range(n))
    g.add_edges_from(edges)
    succ = {v: dict.fromkeys(g.successors(v)) for v in g}
    source = data.draw(st.one_of(st.none(), st.integers(0, n - 1)))
    try:
        expected = [tuple(e) for e in nx.find_cycle(g, source=source)]
    except nx.NetworkXNoCycle:
        expected = []
    assert find_cycle(succ, source) == expected


@settings(max_examples=200, deadline=None)
@given(dag_and_groups())
def test_renumbering_is_networkx_topological_order(case):
    n, edges, _, order = case
    source = _source(n, edges, order)
    checker = ContractedOrder(source, {f"n{j}": i for i, j in enumerate(order)}, has_back_edges=False)
    checker._renumber()
    dag = nx.DiGraph()
    dag.add_nodes_from(n.name for n in source.nodes)
    for node in source.nodes:
        dag.add_edges_from((node.name, consumer) for consumer in source.out_edges[node.name])
    expected = list(nx.topological_sort(dag))
    assert sorted(checker._override, key=checker._override.__getitem__) == expected
