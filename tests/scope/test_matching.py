"""MatchOneBatch / MatchAllBatches: walk order, tagging, multi-batch sets and rollback."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from scopefusion.errors import FusionError
from scopefusion.parser.source_graph import SourceGraph, SourceNode
from scopefusion.scope import (
    NodeOpTypeFeature,
    ScopeFeature,
    ScopeGraph,
    ScopePattern,
    match_all_batches,
    match_one_batch,
)
from scopefusion.scope.matching import normalize_patterns


@pytest.fixture
def rnn(mk):
    """Two RNNs: rnn/ holds two cells inside while/, other/ holds one cell and no while/."""
    nodes = []
    for cell in ("rnn/while/cell_0/", "rnn/while/cell_1/", "other/cell_0/"):
        nodes += mk.ops((cell + "sig", "Sigmoid"), (cell + "tanh", "Tanh"))
    nodes += mk.ops(("rnn/while/Exit", "Exit"), ("rnn/TensorArray", "TensorArrayV3"), ("loose", "Sigmoid"))
    return ScopeGraph.build(mk.graph(*nodes)).tree


CELL = ScopePattern("cell", NodeOpTypeFeature("Sigmoid", 1), NodeOpTypeFeature("Tanh", 1))


def test_one_batch_tags_and_does_not_descend_into_a_match(rnn):
    top = ScopePattern("has_sigmoid", NodeOpTypeFeature("Sigmoid", 0, 1))
    found = match_one_batch(rnn, [top])
    # rnn/ and other/ match; their sub-scopes are not visited, the root never matches.
    assert [s.name for s in found] == ["rnn/", "other/"]
    assert rnn["rnn/"].sub_type == "has_sigmoid" and rnn["rnn/while/cell_0/"].sub_type == ""


def test_one_batch_descends_into_scopes_that_do_not_match(rnn):
    found = match_one_batch(rnn, [CELL])
    # rnn/ holds two cells (counts over the subtree are 2): descended into. other/ holds one: it matches
    # itself, so other/cell_0/ is not visited.
    assert [s.name for s in found] == ["rnn/while/cell_0/", "rnn/while/cell_1/", "other/"]
    assert all(s.sub_type == "cell" for s in found) and rnn["other/cell_0/"].sub_type == ""


def test_alternatives_in_a_batch_record_a_scope_once_last_pattern_tags(rnn):
    a = ScopePattern("a", NodeOpTypeFeature("Tanh", 1))
    # The suffix compares the trimmed last name: cell_1 -> 'cell', but cell_0 stays 'cell_0'.
    b = ScopePattern("b", NodeOpTypeFeature("Sigmoid", 1), ScopeFeature("", 0, suffix="cell"))
    found = match_one_batch(rnn, [a, b])
    assert [s.name for s in found] == ["rnn/while/cell_0/", "rnn/while/cell_1/", "other/"]
    assert [s.sub_type for s in found] == ["a", "b", "a"]


def test_two_batches_count_the_first_batchs_tags(rnn):
    loop = ScopePattern("loop", ScopeFeature("cell", 2, suffix="while"))
    final = match_all_batches(rnn, [[[CELL], [loop]]])
    assert [s.name for s in final] == ["rnn/while/"]
    assert rnn["rnn/while/"].sub_type == "loop"
    # Cells inside the final match keep their tag; the cell outside it is reset.
    assert rnn["rnn/while/cell_0/"].sub_type == "cell" and rnn["rnn/while/cell_1/"].sub_type == "cell"
    assert rnn["other/"].sub_type == ""


def test_a_batch_with_no_match_ends_the_set_and_resets_its_tags(rnn):
    never = ScopePattern("never", NodeOpTypeFeature("Conv2D", 1))
    assert match_all_batches(rnn, [[[CELL], [never]]]) == []
    assert all(s.sub_type == "" for s in rnn)


def test_pattern_sets_are_independent_and_results_concatenate(rnn):
    never = ScopePattern("never", NodeOpTypeFeature("Conv2D", 1))
    arrays = ScopePattern("arrays", NodeOpTypeFeature("TensorArrayV3", 1), ScopeFeature("", 0, suffix="rnn"))
    final = match_all_batches(rnn, [[[CELL], [never]], [[arrays]], [[CELL]]])
    assert [s.name for s in final] == ["rnn/", "rnn/while/cell_0/", "rnn/while/cell_1/", "other/"]


def test_three_batches(rnn):
    loop = ScopePattern("loop", ScopeFeature("cell", 2, suffix="while"))
    net = ScopePattern("net", ScopeFeature("loop", 1), NodeOpTypeFeature("TensorArrayV3", 1))
    final = match_all_batches(rnn, [[CELL, loop, net]])
    assert [s.name for s in final] == ["rnn/"]
    assert rnn["rnn/while/"].sub_type == "loop" and rnn["rnn/while/cell_1/"].sub_type == "cell"


def test_normalize_patterns_shapes():
    p, q = ScopePattern("p"), ScopePattern("q")
    assert normalize_patterns(p, "x") == [[[p]]]
    assert normalize_patterns([p, q], "x") == [[[p]], [[q]]]
    assert normalize_patterns([[p, q]], "x") == [[[p], [q]]]
    assert normalize_patterns([[[p, q]]], "x") == [[[p, q]]]
    assert normalize_patterns([], "x") == []


@pytest.mark.parametrize(
    ("value", "message"),
    [("Relu", "where a list of pattern sets was expected"), ([[[]]], "empty batch"), ([[]], "empty pattern set"),
     ([[[1]]], "expected a ScopePattern")],
)
def test_normalize_patterns_errors(value, message):
    with pytest.raises(FusionError, match=message):
        normalize_patterns(value, "MyPass")


def _naive_walk(tree, pattern):
    """CANN's walk without pruning: the oracle for the pruned walk."""
    out = []

    def visit(scope):
        if pattern.matches(scope):
            out.append(scope)
            return
        for child in scope.children:
            visit(child)

    for child in tree.root.children:
        visit(child)
    return out


names = st.lists(
    st.lists(st.sampled_from(["a", "b", "c", "d_1"]), min_size=1, max_size=4).map("/".join),
    min_size=1,
    max_size=25,
)


@settings(max_examples=120, deadline=None)
@given(
    paths=names,
    types=st.lists(st.sampled_from(["Relu", "Mul", "Add"]), min_size=25, max_size=25),
    op=st.sampled_from(["Relu", "Mul", "Add"]),
    num=st.integers(1, 3),
    use_step=st.booleans(),
)
def test_pruned_walk_equals_the_naive_walk(paths, types, op, num, use_step):
    nodes = [SourceNode(f"{p}/n{i}", types[i]) for i, p in enumerate(paths)]
    tree = ScopeGraph.build(SourceGraph(nodes)).tree
    feature = NodeOpTypeFeature(op, 0, num) if use_step else NodeOpTypeFeature(op, num)
    pattern = ScopePattern("t", feature, ScopeFeature("", 0, suffix="b") if num == 2 else NodeOpTypeFeature("Sub", -1))
    expected = [s.name for s in _naive_walk(tree, pattern)]
    tree.reset_sub_types()
    assert [s.name for s in match_one_batch(tree, [pattern])] == expected
