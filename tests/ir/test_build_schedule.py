"""The build schedule's order (``lexicographic_order``, and ``_schedule`` on graphs contracted by fusions) and
cycle finder against networkx on random graphs, and the error a cycle made by fusions gives."""

from __future__ import annotations

from types import SimpleNamespace

import networkx as nx
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from scopefusion.errors import FusionError
from scopefusion.ir_builder.build import _schedule, find_cycle, lexicographic_order
from scopefusion.parser.source_graph import SourceGraph, SourceNode


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


def _contracted_order(nodes, groups):
    """The build schedule spelled out with networkx: the graph contracted by the fusions, ordered by each
    unit's first source position (units are node names, or the fusion's name)."""
    unit = {n.name: n.name for n in nodes}
    for name, members in groups.items():
        for m in members:
            unit[m] = name
    first = {}
    for position, n in enumerate(nodes):
        first.setdefault(unit[n.name], position)
    dag = nx.DiGraph()
    dag.add_nodes_from(first)
    for n in nodes:
        for producer in [p for p, _ in n.inputs] + n.control_inputs:
            if unit[producer] != unit[n.name]:
                dag.add_edge(unit[producer], unit[n.name])
    if not nx.is_directed_acyclic_graph(dag):
        return None
    return list(nx.lexicographical_topological_sort(dag, key=first.__getitem__))


@settings(max_examples=200, deadline=None)
@given(st.integers(2, 25).flatmap(lambda n: st.tuples(
    st.just(n),
    st.lists(st.tuples(st.integers(0, n - 1), st.integers(0, n - 1), st.booleans()), max_size=3 * n),
    st.lists(st.integers(-1, 3), min_size=n, max_size=n),
    st.permutations(range(n)),
)), st.booleans())
def test_schedule_is_the_contracted_graphs_least_rank_order(case, kept_as_given):
    """Also on a source kept in a given order (``sort=False``) whose edges may run backward, where a node that
    is not claimed waits for its producers too (with a fusion: without one, the source's order is the build's)."""
    size, edges, group_of, listed = case
    assume(not kept_as_given or max(group_of) >= 0)
    data: dict[int, list] = {i: [] for i in range(size)}
    control: dict[int, list] = {i: [] for i in range(size)}
    for a, b, is_control in edges:
        a, b = min(a, b), max(a, b)
        if a != b:
            (control if is_control else data)[b].append(f"n{a}")
    nodes = [SourceNode(f"n{i}", "Op", inputs=[(p, 0) for p in data[i]], control_inputs=control[i]) for i in range(size)]
    source = SourceGraph([nodes[i] for i in listed], name="g", sort=False) if kept_as_given else SourceGraph(nodes, name="g")
    groups: dict[str, list[str]] = {}
    for i, g in enumerate(group_of):
        if g >= 0:
            groups.setdefault(f"fusion{g}", []).append(f"n{i}")
    fusions = [SimpleNamespace(name=name, claimed=members) for name, members in groups.items()]
    claimed_by = {m: f for f in fusions for m in f.claimed}
    want = _contracted_order(source.nodes, groups)
    if want is None:
        with pytest.raises(FusionError, match="applying the fusions creates a cycle"):
            _schedule(source, fusions, claimed_by)
        return
    got = _schedule(source, fusions, claimed_by)
    assert [u.name for u in got] == want


@pytest.mark.parametrize("fixture", ["tf_convnet_pb", "tf_mobilenet_pb", "tf_bert_pb"])
def test_forward_source_schedule_equals_the_checked_one(request, fixture):
    """On a source whose edges run forward, unclaimed nodes go out without their inputs being looked at while
    no fusion waits: the order is the one the full check of every unit's producers gives."""
    from scopefusion.convert import convert

    model = convert(request.getfixturevalue(fixture))
    source = model.source
    fusions = model.fusion_run.accepted
    assert source.edges_run_forward and fusions
    claimed_by = {name: f for f in fusions for name in f.claimed}
    fast = _schedule(source, fusions, claimed_by)
    source.edges_run_forward = False  # every unit's producers checked
    try:
        checked = _schedule(source, fusions, claimed_by)
    finally:
        source.edges_run_forward = True
    assert [id(u) for u in fast] == [id(u) for u in checked]
