"""The scope tree built from node names: CANN's BuildScopeGraph / AddNodeToScope / LastName."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from scopefusion.errors import FusionError
from scopefusion.parser.source_graph import SourceNode
from scopefusion.scope import ROOT_NAME, ScopeGraph, ScopeTree, trim_scope_index
from scopefusion.scope.tree import scope_key


@pytest.fixture
def tf_graph(mk):
    return ScopeGraph.build(
        mk.graph(
            *mk.ops(
                ("x", "Placeholder"),
                ("a/b/c", "Mul", "x", "x"),
                ("a/b/d", "Add", "a/b/c", "x"),
                ("a/e", "Mul", "a/b/d", "x"),
                ("a/b/f/g", "Relu", "a/e"),
                ("h", "Identity", "a/b/f/g"),
            )
        )
    )


def test_scopes_from_tf_names_root_first_in_creation_order(tf_graph):
    tree = tf_graph.tree
    assert [s.name for s in tree.all_scopes()] == [ROOT_NAME, "a/", "a/b/", "a/b/f/"]
    assert tree.root.parent is None and tree.root.is_root
    assert tree["a/b"].parent is tree["a/"] and tree["a/"].parent is tree.root
    assert [c.name for c in tree["a/"].children] == ["a/b/"]
    assert [c.name for c in tree.root.children] == ["a/"]


def test_direct_nodes_all_nodes_and_subtree_op_counts(tf_graph):
    tree = tf_graph.tree
    a = tree["a/"]
    assert [n.name for n in a.nodes] == ["a/e"]
    assert [n.name for n in a.all_nodes] == ["a/b/c", "a/b/d", "a/e", "a/b/f/g"]
    assert dict(a.op_counts) == {"Mul": 2, "Add": 1, "Relu": 1}
    assert dict(tree["a/b/"].op_counts) == {"Mul": 1, "Add": 1, "Relu": 1}
    assert dict(tree.root.op_counts) == {"Placeholder": 1, "Mul": 2, "Add": 1, "Relu": 1, "Identity": 1}
    assert [n.name for n in tree.root.nodes] == ["x", "h"]
    assert a.op_count("Mul") == 2 and a.op_count("Conv2D") == -1


def test_op_counts_view_is_read_only(tf_graph):
    counts = tf_graph.tree["a/"].op_counts
    with pytest.raises(TypeError):
        counts["Mul"] = 7  # type: ignore[index]


def test_all_nodes_follows_graph_order_not_name_order(mk):
    # 'z/b' is produced first although its name sorts after 'z/a'.
    graph = ScopeGraph.build(mk.graph(*mk.ops(("z/b", "Const"), ("z/s/q", "Neg", "z/b"), ("z/a", "Neg", "z/s/q"))))
    assert [n.name for n in graph.tree["z/"].all_nodes] == ["z/b", "z/s/q", "z/a"]


def test_onnx_names_leading_slash_and_dots(mk):
    graph = ScopeGraph.build(
        mk.graph(
            *mk.ops(
                ("input", "Input"),
                ("/encoder/layers.0/self_attn/MatMul", "MatMul", "input", "input"),
                ("/encoder/layers.0/self_attn/Softmax", "Softmax", "/encoder/layers.0/self_attn/MatMul"),
                ("/encoder/layers.1/self_attn/MatMul", "MatMul", "/encoder/layers.0/self_attn/Softmax", "input"),
            )
        )
    )
    tree = graph.tree
    names = [s.name for s in tree.all_scopes()]
    assert names == [ROOT_NAME, "encoder/", "encoder/layers.0/", "encoder/layers.0/self_attn/",
                     "encoder/layers.1/", "encoder/layers.1/self_attn/"]
    assert tree["/encoder/layers.0/self_attn/"].last_name == "self_attn"
    assert tree["encoder/layers.0"].last_name == "layers.0"
    assert dict(tree["encoder/"].op_counts) == {"MatMul": 2, "Softmax": 1}
    assert tree.scope_of("/encoder/layers.1/self_attn/MatMul") is tree["encoder/layers.1/self_attn/"]


def test_empty_parts_are_dropped_and_trailing_slash_names(mk):
    graph = ScopeGraph.build(mk.graph(*mk.ops(("a//b/c", "Neg"), ("a/b/", "Neg"), ("/x", "Neg"), ("p/", "Neg"))))
    tree = graph.tree
    assert [s.name for s in tree.all_scopes()] == [ROOT_NAME, "a/", "a/b/"]
    assert [n.name for n in tree["a/b/"].nodes] == ["a//b/c"]
    # 'a/b/' is a node named 'b' in scope 'a/'; '/x' and 'p/' are nodes at the root.
    assert [n.name for n in tree["a/"].nodes] == ["a/b/"]
    assert [n.name for n in tree.root.nodes] == ["/x", "p/"]
    assert tree.scope_of("a/b/") is tree["a/"]
    for scope in tree:  # scope_of finds every node's scope from its name as building the tree did
        for node in scope.nodes:
            assert tree.scope_of(node.name) is scope


def test_node_called_root_does_not_collide_with_the_root(mk):
    graph = ScopeGraph.build(mk.graph(*mk.ops(("root/x", "Neg"), ("root", "Neg", "root/x"))))
    tree = graph.tree
    assert tree.get(ROOT_NAME) is tree.root
    assert tree["root/"].parent is tree.root
    assert [n.name for n in tree.root.nodes] == ["root"]


@pytest.mark.parametrize(
    ("text", "trimmed"),
    [("batchnorm_1", "batchnorm"), ("batchnorm_12", "batchnorm"), ("x_0", "x_0"), ("layer_00", "layer_00"),
     ("x_", "x_"), ("x_1a", "x_1a"), ("plain", "plain"), ("a_b_2", "a_b"), ("_3", ""), ("x_\u0663", "x_\u0663")],
)
def test_trim_scope_index(text, trimmed):
    assert trim_scope_index(text) == trimmed


def test_last_name_trims_the_index(mk):
    graph = ScopeGraph.build(mk.graph(*mk.ops(("LayerNorm_1/batchnorm_2/add", "Add"), ("layer_0/mul", "Mul"))))
    tree = graph.tree
    assert tree["LayerNorm_1/batchnorm_2/"].last_name == "batchnorm"
    assert tree["LayerNorm_1/"].last_name == "LayerNorm"
    assert tree["layer_0/"].last_name == "layer_0"
    assert tree.root.last_name == ""


def test_lookups_and_errors(tf_graph):
    tree = tf_graph.tree
    assert tree.get("a/b") is tree.get("a/b/") is tree.get("/a/b/")
    assert tree.get("nope") is None and "nope" not in tree and "a/b" in tree
    assert tree["a/"].sub_scope("a/b") is tree["a/b/"]
    assert tree["a/"].sub_scope("a/b/f") is None
    with pytest.raises(FusionError, match="no scope named 'nope'"):
        tree["nope"]
    with pytest.raises(FusionError, match="no node named 'ghost'"):
        tree.scope_of("ghost")
    assert tf_graph.scope("a/b") is tree["a/b/"]
    assert tree.position("a/e") == 3


def test_descendants_ancestors_contains(tf_graph):
    tree = tf_graph.tree
    a = tree["a/"]
    assert [s.name for s in a.descendants()] == ["a/b/", "a/b/f/"]
    assert [s.name for s in tree["a/b/f/"].ancestors()] == ["a/b/", "a/", ROOT_NAME]
    assert a.contains(tree["a/b/f/"]) and not tree["a/b/"].contains(a) and tree.root.contains(a)
    assert tree["a/b/f/"].depth == 3


def test_op_type_index_in_graph_order(tf_graph):
    assert [n.name for n in tf_graph.nodes_by_type("Mul")] == ["a/b/c", "a/e"]
    assert tf_graph.nodes_by_type("Conv2D") == ()
    assert tf_graph.op_types() == ["Placeholder", "Mul", "Add", "Relu", "Identity"]


def test_reset_sub_types(tf_graph):
    tree = tf_graph.tree
    tree["a/b/"].sub_type = "x"
    tree.reset_sub_types()
    assert all(s.sub_type == "" for s in tree)


def test_scope_key():
    assert scope_key("/encoder//layer/") == "encoder/layer/"
    assert scope_key("") == "" and scope_key("///") == ""


def test_empty_tree():
    tree = ScopeTree.from_nodes([])
    assert tree.all_scopes() == [tree.root] and tree.root.all_nodes == ()


def test_build_refuses_a_non_source_graph():
    with pytest.raises(FusionError, match="needs a SourceGraph"):
        ScopeGraph.build([])  # type: ignore[arg-type]


def test_a_graph_built_without_its_tree_builds_the_same_tree_on_first_use(mk):
    source = mk.graph(*mk.ops(("x", "Placeholder"), ("a/b", "Neg", "x"), ("a/c/d", "Relu", "a/b"), ("y", "Neg", "a/c/d")))
    eager, lazy = ScopeGraph.build(source), ScopeGraph.build(source, tree=False)
    assert dict(lazy.positions) == dict(eager.positions) == {"x": 0, "a/b": 1, "a/c/d": 2, "y": 3}
    assert lazy.position("a/c/d") == 2
    assert [s.name for s in lazy.scopes()] == [s.name for s in eager.scopes()]
    assert dict(lazy.positions) == dict(eager.tree.positions)


_PARTS = st.sampled_from(["a", "b", "c", "x_1", ""])


@st.composite
def _node_names(draw):
    """Distinct node names of up to five '/'-parts, empty parts (leading, doubled, trailing '/') included,
    often sharing prefixes with the name before them as graph order does."""
    names: list[str] = []
    for _ in range(draw(st.integers(1, 30))):
        parts = draw(st.lists(_PARTS, min_size=1, max_size=5))
        if names and draw(st.booleans()):  # start from the previous name's prefix
            prefix = names[-1].split("/")
            parts = prefix[: draw(st.integers(0, len(prefix)))] + parts
        name = "/".join(parts) or "n"
        while name in names:
            name += "_d"
        names.append(name)
    return names


@settings(max_examples=300, deadline=None)
@given(_node_names(), st.booleans())
def test_tree_matches_a_reference_built_from_scope_keys(names, shared_positions):
    nodes = [SourceNode(name, "Neg" if i % 2 else "Add") for i, name in enumerate(names)]
    positions = {name: i for i, name in enumerate(names)} if shared_positions else None
    tree = ScopeTree.from_nodes(nodes, positions=positions)
    holder = {name: scope_key(_raw(name)) for name in names}
    expected_scopes = {""}
    for key in holder.values():
        parts = key.split("/")[:-1]
        expected_scopes.update("/".join(parts[:k]) + "/" for k in range(1, len(parts) + 1))
    assert {s.name for s in tree} == {ROOT_NAME} | (expected_scopes - {""})
    for scope in tree:
        key = "" if scope.is_root else scope.name
        assert scope.parent is None or scope.parent is tree.get(key[:-1].rpartition("/")[0] or ROOT_NAME)
        assert [n.name for n in scope.nodes] == [n for n in names if holder[n] == key]
        inside = [n for n in names if holder[n].startswith(key)]
        assert [n.name for n in scope.all_nodes] == inside
        at = [names.index(n) for n in inside]
        consecutive = bool(at) and at == list(range(at[0], at[0] + len(at)))
        assert scope.all_nodes_start == (at[0] if consecutive else -1)
        assert dict(scope.op_counts) == {op: c for op in ("Add", "Neg") if (c := sum(
            1 for n in nodes if n.name in inside and n.op_type == op))}
    for name in names:
        assert tree.scope_of(name) is tree.get(holder[name] or ROOT_NAME)
    assert dict(tree.positions) == {name: i for i, name in enumerate(names)}


def _raw(name: str) -> str:
    stripped = name.rstrip("/")
    return stripped[: stripped.rfind("/") + 1]
