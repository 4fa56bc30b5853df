"""The scope tree built in one pass over the nodes agrees with what each node's name says on its own."""

from __future__ import annotations

import pytest

from scopefusion.parser import load
from scopefusion.scope import ScopeGraph
from scopefusion.scope.tree import scope_key


def check_tree_against_names(graph: ScopeGraph) -> None:
    """Every node sits directly in the scope its name gives (``scope_key`` of the text before its own part),
    each scope counts its subtree's op types, and the op-type index lists the nodes by type in graph order."""
    tree = graph.tree
    nodes = graph.source.nodes
    expected: dict[str, list[str]] = {}
    for node in nodes:
        name = node.name
        text = name.rstrip("/") if name.endswith("/") else name
        key = scope_key(text[: text.rfind("/") + 1])
        expected.setdefault(key, []).append(name)
        assert tree.scope_of(name) is (tree[key] if key else tree.root)
    for scope in tree:
        key = "" if scope.is_root else scope.name
        assert [n.name for n in scope.nodes] == expected.get(key, [])
        counts: dict[str, int] = {}
        for node in scope.all_nodes:
            counts[node.op_type] = counts.get(node.op_type, 0) + 1
        assert dict(scope.op_counts) == counts
    by_type: dict[str, list[str]] = {}
    for node in nodes:
        by_type.setdefault(node.op_type, []).append(node.name)
    assert {t: [n.name for n in graph.nodes_by_type(t)] for t in graph.op_types()} == by_type
    assert list(by_type) == graph.op_types()


@pytest.mark.parametrize("fixture", ["tf_bert_pb", "tf_mobilenet_pb", "tf_rnn_pb"])
def test_real_graphs_build_the_tree_their_names_give(fixture, request):
    check_tree_against_names(ScopeGraph.build(load(request.getfixturevalue(fixture))))


def test_odd_names_build_the_tree_their_names_give(mk):
    names = ["x", "a/b/c", "a/b/d", "/a/b/e", "a//b/f", "a/b/", "p/", "", "a/b/g", "q//", "/", "a/x", "a/b/h"]
    graph = mk.graph(*mk.ops(*[(n, "Neg" if i % 2 else "Relu") for i, n in enumerate(names)]))
    check_tree_against_names(ScopeGraph.build(graph))


def test_scopes_made_by_the_tree_equal_those_of_the_constructor(tf_bert_pb):
    """ScopeTree._make spells out Scope(...) to save a call per scope: every slot must be set as the
    constructor sets it (a slot added to Scope and left out there fails here)."""
    from scopefusion.scope.tree import Scope

    tree = ScopeGraph.build(load(tf_bert_pb)).tree
    made = [scope for scope in tree if not scope.is_root]
    assert made
    for scope in made:
        built = Scope(scope.name, scope.parent, tree, scope.index)
        for slot in Scope.__slots__:
            if slot in ("_children", "_nodes", "_counts", "_all_nodes", "_first", "_last", "_start", "_last_name"):
                assert hasattr(scope, slot), slot  # set by the build afterwards, or on first use
            else:
                assert getattr(scope, slot) == getattr(built, slot), slot
