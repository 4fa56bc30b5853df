"""The scope layer's shortcuts give what the general code gives, on real graphs: the scope tree's direct nodes
kept without a list when they are consecutive, ``ScopePattern.matches`` without a call per feature, and the
validator's test that a result keeps no node (no walk of ``_kept_nodes``)."""

from __future__ import annotations

import pytest

from scopefusion.convert import convert, fusion_setup
from scopefusion.parser import load
from scopefusion.scope import (
    NodeAttrFeature,
    NodeOpTypeFeature,
    ScopeFeature,
    ScopeGraph,
    ScopePattern,
    ScopeTree,
    _validate,
)
from scopefusion.scope.features import RETVAL_OP

MODELS = ["tf_convnet_pb", "tf_mobilenet_pb", "tf_bert_pb"]


@pytest.fixture(scope="module", params=MODELS)
def source(request):
    return load(request.getfixturevalue(request.param))


def _nodes_by_scope(tree: ScopeTree, nodes) -> dict[str, list]:
    """Each scope's direct nodes, found the plain way: every node put in the scope holding it, in graph order."""
    found: dict[str, list] = {scope.name: [] for scope in tree}
    for node in nodes:
        found[tree.scope_of(node.name).name].append(node)
    return found


def test_each_scope_has_its_direct_nodes_whether_kept_in_a_list_or_not(source):
    tree = ScopeTree.from_nodes(source.nodes, positions=source.positions)
    expected = _nodes_by_scope(tree, source.nodes)
    listed = 0
    for scope in tree:
        assert list(scope.nodes) == expected[scope.name], scope.name
        listed += scope._nodes is not None
        subtree = [n for s in [scope, *scope.descendants()] for n in expected[s.name]]
        in_order = sorted(subtree, key=lambda n: source.positions[n.name])
        assert list(scope.all_nodes) == in_order, scope.name
        start = scope.all_nodes_start
        if start >= 0:
            assert list(source.nodes[start : start + len(in_order)]) == in_order
    assert listed < len(tree) / 2, "most scopes keep no list of their own"


def test_subtree_counts_are_summed_in_order(source):
    """Each scope counts its own nodes' op types, then adds its children's sums, the last child made first."""
    tree = ScopeTree.from_nodes(source.nodes, positions=source.positions)
    expected = _nodes_by_scope(tree, source.nodes)
    sums: dict[str, dict[str, int]] = {}
    for scope in reversed(list(tree)):
        counts: dict[str, int] = {}
        for node in expected[scope.name]:
            counts[node.op_type] = counts.get(node.op_type, 0) + 1
        for child in reversed(scope.children):
            for op, n in sums[child.name].items():
                counts[op] = counts.get(op, 0) + n
        sums[scope.name] = counts
        assert list(scope.op_counts.items()) == list(counts.items()), scope.name


def test_a_scope_whose_nodes_come_apart_lists_them(mk):
    graph = mk.graph(*mk.ops(("a/x", "Const"), ("b/y", "Const"), ("a/z", "Const"), ("a//w", "Const")), sort=False)
    tree = ScopeTree.from_nodes(graph.nodes, positions=graph.positions)
    a = tree["a/"]
    assert [n.name for n in a.nodes] == ["a/x", "a/z", "a//w"]
    assert a._nodes is not None and a.all_nodes_start == -1
    assert [n.name for n in tree["b/"].nodes] == ["b/y"] and tree["b/"]._nodes is None


def _builtin_scope_patterns() -> list[ScopePattern]:
    found = []
    registry, _ = fusion_setup(entry_points=False)
    for entry in registry.enabled_passes():
        for batches in entry.rule.pattern_sets():
            for batch in batches:
                found.extend(batch)
    return found


def test_pattern_matches_agrees_with_each_feature_checked(source):
    graph = ScopeGraph.build(source)
    patterns = _builtin_scope_patterns() + [
        ScopePattern("attr", NodeOpTypeFeature("Conv2D", 1, step=2), NodeAttrFeature("Conv2D", "padding", "SAME")),
        ScopePattern("tagged", ScopeFeature("layer", 1, suffix="encoder"), ScopeFeature("", 0, sub_scope_mask="attention")),
        ScopePattern("absent", NodeOpTypeFeature("Rsqrt", -1), ScopeFeature("", 0, suffix="batchnorm")),
        ScopePattern("retval", NodeOpTypeFeature(RETVAL_OP, -1)),
    ]
    assert len(patterns) > 6
    matched = 0
    for pattern in patterns:
        for scope in graph.tree:
            by_feature = pattern.check(scope) is None
            assert pattern.matches(scope) == by_feature, (pattern, scope)
            matched += by_feature
    assert matched > 0


@pytest.mark.parametrize("fixture", MODELS)
def test_a_result_said_to_keep_nothing_keeps_nothing(fixture, request, monkeypatch):
    """Wherever the validator skips the walk for kept nodes, the walk finds none; every fusion is checked."""
    checked = []
    real_may_keep = _validate._may_keep

    def may_keep(candidates, anchored, port_of_input):
        answer = real_may_keep(candidates, anchored, port_of_input)
        if not answer:
            # _kept_nodes needs each candidate's consumers: read them as the validator does
            uses = {name: graph_source.out_edges[name] for name in candidates}
            assert _validate._kept_nodes(candidates, uses, anchored, port_of_input) == set()
        checked.append(answer)
        return answer

    path = request.getfixturevalue(fixture)
    graph_source = load(path)
    monkeypatch.setattr(_validate, "_may_keep", may_keep)
    model = convert(path)
    assert model.fusion_run.accepted
    assert False in checked, "some results skip the walk"


@pytest.mark.parametrize("fixture", ["tf_bert_pb", "tf_convnet_pb"])
def test_a_match_answers_for_the_first_region_holding_one_of_its_nodes(fixture, request):
    """``_home`` (which looks up each scope-name prefix of a match's nodes once) gives the region a plain
    search gives: the first candidate region, in the order given, whose subtree holds one of the nodes."""
    from scopefusion.fusion_rules.base.scoped_dataflow import _home
    from scopefusion.fusion_rules.layer_norm import PASS as LAYER_NORM

    graph = ScopeGraph.build(load(request.getfixturevalue(fixture)))
    matches = LAYER_NORM._matches_in_graph(graph)
    assert matches
    listed = list(graph.tree)[1:][::-1]  # every scope but the root, inner ones before the scopes holding them
    rank = {s.name: i for i, s in enumerate(listed)}
    shared: dict = {}
    for match in matches:
        plain = next((s for s in listed if any(s.contains(graph.tree.scope_of(n.name)) for n in match.nodes)), None)
        assert _home(graph, match, rank, listed, shared) is plain
        assert _home(graph, match, rank, listed, {}) is plain


def _builtin_dataflow_patterns() -> list:
    from scopefusion.fusion_rules import BUILTIN_RULES
    from scopefusion.scope import DataflowPattern

    found: dict[int, DataflowPattern] = {}
    for rule in BUILTIN_RULES:
        for item in getattr(rule, "patterns", ()):
            for pattern in item if isinstance(item, tuple) else (item,):
                if isinstance(pattern, DataflowPattern):
                    found.setdefault(id(pattern), pattern)
    return list(found.values())


@pytest.mark.parametrize("fixture", MODELS)
def test_a_part_refuted_without_a_search_has_no_match_there(fixture, request):
    """Wherever ``part_holds`` answers no without a search (``_part_refuted``), a search of the part finds no
    match there either: every part of every builtin pattern, at every node of the part's op types."""
    from scopefusion.scope._search import SearchRun, accept_state
    from scopefusion.scope.dataflow import _part_refuted
    from scopefusion.scope.pattern_values import OpOutput

    graph = ScopeGraph.build(load(request.getfixturevalue(fixture)))
    refuted = searched = 0
    for pattern in _builtin_dataflow_patterns():
        for op_type in sorted(pattern._all_op_types):
            nodes = graph.nodes_by_type(op_type)
            for op, _ in pattern.parts_of_type(op_type) if nodes else ():
                for node in nodes:
                    found = SearchRun(pattern, graph, None).match_op(OpOutput(op, 0), (node.name, 0), {}, accept_state)
                    if _part_refuted(graph, op, node):
                        assert found is None, (pattern.name, op, node.name)
                        refuted += 1
                    else:
                        searched += 1
    assert refuted > 0 and searched > 0


@pytest.mark.parametrize("fixture", MODELS)
def test_anchors_allowed_are_those_may_anchor_allows(fixture, request):
    """``_anchors_allowed`` (which tests each anchor's producers' types directly) keeps the anchors that
    ``may_anchor`` (which reads the graph's table of input op types) allows, in order, for every builtin pattern."""
    graph = ScopeGraph.build(load(request.getfixturevalue(fixture)))
    compared = 0
    for pattern in _builtin_dataflow_patterns():
        anchors = [n for t in pattern.anchor_types for n in graph.nodes_by_type(t)]
        allowed = pattern._anchors_allowed(graph, anchors)
        assert allowed == [n for n in anchors if pattern.may_anchor(graph, n)], pattern.name
        compared += len(anchors)
    assert compared > 0


@pytest.mark.parametrize("fixture", MODELS)
def test_no_match_is_anchored_before_the_earliest_anchor(fixture, request):
    """``earliest_anchor`` is a bound on where a match can be anchored: no anchor before it matches, on every
    builtin pattern; so a search without near misses, which skips those anchors, finds the matches a search
    of every anchor finds."""
    from scopefusion.scope import Match

    graph = ScopeGraph.build(load(request.getfixturevalue(fixture)))
    position = graph.positions
    skipped = 0
    for pattern in _builtin_dataflow_patterns():
        earliest = pattern.earliest_anchor(graph)
        for node in [n for t in pattern.anchor_types for n in graph.nodes_by_type(t)]:
            if position[node.name] < earliest:
                assert not isinstance(pattern.match_at(graph, node), Match), (pattern.name, node.name)
                skipped += 1
        quick = pattern.find(graph, near_miss=False)
        assert [m.node_names for m in quick] == [m.node_names for m in pattern.find(graph)], pattern.name
    assert skipped > 0


def test_op_counts_views_are_the_mappings_views(source):
    """A scope's ``op_counts`` gives the counts dict's own keys, values, items and look-ups: what the
    ``Mapping`` methods (a call per key) give, on every scope of real graphs."""
    from collections.abc import Mapping

    tree = ScopeTree.from_nodes(source.nodes, positions=source.positions)
    for scope in tree:
        counts = scope.op_counts
        assert list(counts.keys()) == list(Mapping.keys(counts))
        assert list(counts.values()) == list(Mapping.values(counts))
        assert list(counts.items()) == list(Mapping.items(counts))
        for op_type in ("Const", "MatMul", "NoSuchOp"):
            assert counts.get(op_type) == Mapping.get(counts, op_type)
            assert (op_type in counts) == Mapping.__contains__(counts, op_type)


def _walked(tree: ScopeTree, pattern: ScopePattern) -> list:
    """The scopes a walk finds for ``pattern``, the plain way: each scope tested, none below a match or a pruned scope."""
    found = []
    stack = list(reversed(tree.root.children))
    while stack:
        scope = stack.pop()
        if pattern.matches(scope):
            found.append(scope)
        elif not pattern.prunes(scope):
            stack.extend(reversed(scope.children))
    return found


def test_patterns_reading_the_same_counts_and_names_share_one_walk(source):
    """``match_one_batch`` walks the tree once per ``walk_key`` (what a pattern reads of a scope) and tags
    the scopes found for each pattern: every builtin scope pattern, and a copy of each under another
    sub_type, finds what a walk of its own finds and tags it with its own sub_type."""
    from scopefusion.scope.matching import match_one_batch

    tree = ScopeGraph.build(source).tree
    shared = 0
    for pattern in _builtin_scope_patterns():
        copy = ScopePattern("copy_of_" + pattern.sub_type, *pattern.features)
        assert copy.walk_key == pattern.walk_key
        shared += pattern.walk_key is not None
        for each in (pattern, copy):
            tree.reset_sub_types()
            expected = [s for s in _walked(tree, each) if not s.is_root]
            assert match_one_batch(tree, [each]) == expected, each
            assert all(s.sub_type == each.sub_type for s in expected)
    assert shared > 0 and tree.walks


def test_a_pattern_reading_sub_types_or_a_subclass_walks_on_its_own():
    class Custom(ScopePattern):
        pass

    assert ScopePattern("tagged", ScopeFeature("layer", 1)).walk_key is None
    assert ScopePattern("attr", NodeAttrFeature("Conv2D", "padding", "SAME")).walk_key is None
    assert Custom("custom", NodeOpTypeFeature("Conv2D", 1)).walk_key is None
    assert ScopePattern("plain", NodeOpTypeFeature("Conv2D", 1)).walk_key is not None


def test_first_positions_are_those_of_each_types_first_node(source):
    """The index of each op type's first node, as the pass that lists the nodes by type records it, is the
    position of the first node of that type in the index (also for a graph built without a tree)."""
    for with_tree in (True, False):
        graph = ScopeGraph.build(source, tree=with_tree)
        expected = {t: graph.positions[graph.nodes_by_type(t)[0].name] for t in graph.op_types()}
        assert dict(graph.first_positions()) == expected
        assert list(graph.first_positions()) == graph.op_types()


@pytest.mark.parametrize("fixture", MODELS)
def test_a_search_whose_anchors_are_all_taken_finds_what_searching_them_finds(fixture, request):
    """``find`` without near misses, told that some op nodes are taken, skips an anchor list whose every
    anchor is taken; what it answers is what deferring each of those anchors gives: no match."""
    graph = ScopeGraph.build(load(request.getfixturevalue(fixture)))
    compared = 0
    for pattern in _builtin_dataflow_patterns():
        anchors = [n for t in pattern.anchor_types for n in graph.nodes_by_type(t)]
        if not anchors:
            continue
        taken = frozenset(n.name for n in anchors)
        assert list(pattern.find(graph, near_miss=False, taken=taken)) == []
        everything = pattern.find(graph, near_miss=False)
        some = frozenset(m.node_names[-1] for m in everything[:1])
        assert [m.node_names for m in pattern.find(graph, near_miss=False, taken=some)] == [
            m.node_names for m in everything if not some & set(m.node_names)]
        compared += 1
    assert compared > 0


@pytest.mark.parametrize("fixture", MODELS)
def test_neighbour_numbers_read_by_position_are_the_vertices_numbers(fixture, request, monkeypatch):
    """Where ``_number_range`` reads the neighbours' positions (none in a fusion, no node renumbered), they are
    the numbers of their vertices (``_number_of_node``), for every result validated in a conversion."""
    import math

    from scopefusion.scope._order import ContractedOrder

    real = ContractedOrder._number_range
    shortcuts = []

    def checked(self, producers, consumers):
        number = self._number_of_node
        expected = (max(map(number, producers), default=-math.inf), min(map(number, consumers), default=math.inf))
        assert real(self, producers, consumers) == expected
        shortcuts.append(not self._members)
        return expected

    monkeypatch.setattr(ContractedOrder, "_number_range", checked)
    assert convert(request.getfixturevalue(fixture)).fusion_run.accepted
    assert True in shortcuts and False in shortcuts
