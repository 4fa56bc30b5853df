"""The build schedule's order (``lexicographic_order``) and cycle finder against networkx on random graphs,
and the error a cycle made by fusions gives."""

from __future__ import annotations

import networkx as nx
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from scopefusion.ir_builder.build import find_cycle, lexicographic_order


def random_graph(draw_edges: list[tuple[int, int]], size: int, ranks: list[int]) -> tuple[dict, nx.DiGraph]:
    successors: dict[int, dict[int, None]] = {v: {} for v in range(size)}
    dag = nx.DiGraph()
    dag.add_nodes_from(range(size))
    for a, b in draw_edges:
        a, b = a % size, b % size
        if a != b:
            successors[a][b] = None
            dag.add_edge(a, b)
    return successors, dag


graphs = st.integers(1, 30).flatmap(
    lambda n: st.tuples(
        st.just(n),
        st.lists(st.tuples(st.integers(0, n - 1), st.integers(0, n - 1)), max_size=3 * n),
        st.permutations(range(n)),
    )
)


@settings(max_examples=200, deadline=None)
@given(graphs, st.booleans())
def test_order_is_networkx_lexicographical_topological_sort(case, acyclic):
    size, edges, ranks = case
    if acyclic:
        edges = [(min(a, b), max(a, b)) for a, b in edges]
    successors, dag = random_graph(edges, size, ranks)
    order = lexicographic_order(successors, ranks.__getitem__)
    if nx.is_directed_acyclic_graph(dag):
        assert order == list(nx.lexicographical_topological_sort(dag, key=ranks.__getitem__))
        assert find_cycle(successors, set()) == []
        return
    left = set(successors).difference(order)
    assert left, "a graph with a cycle cannot be ordered completely"
    cycle = find_cycle(successors, left)
    assert cycle, "a cycle is found among the vertices left out"
    for a, b in zip(cycle, cycle[1:] + cycle[:1]):
        assert dag.has_edge(a, b), f"{a} -> {b} is not an edge of the graph"
    assert len(set(cycle)) == len(cycle)


def test_ties_go_to_the_least_rank_and_a_cycle_is_spelled_in_edge_order():
    successors = {"c": {"a": None}, "b": {}, "a": {}}
    assert lexicographic_order(successors, {"a": 0, "b": 1, "c": 2}.__getitem__) == ["b", "c", "a"]
    ring = {"x": {"y": None}, "y": {"z": None}, "z": {"y": None}, "w": {"x": None}}
    assert lexicographic_order(ring, {"x": 0, "y": 1, "z": 2, "w": 3}.__getitem__) == ["w", "x"]
    assert find_cycle(ring, {"y", "z"}) == ["y", "z"]


@pytest.mark.parametrize("size", [1, 5000])
def test_long_chain_is_ordered_without_recursion(size):
    chain = {i: ({i + 1: None} if i + 1 < size else {}) for i in range(size)}
    assert lexicographic_order(chain, lambda v: -v) == list(range(size))
    chain[size - 1] = {0: None}
    assert lexicographic_order(chain, lambda v: v) == []
    assert find_cycle(chain, set(chain)) == list(range(size))
