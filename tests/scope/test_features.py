"""Features and patterns with CANN's semantics, one test per edge case."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from scopefusion.errors import FusionError
from scopefusion.scope import NodeAttrFeature, NodeOpTypeFeature, ScopeFeature, ScopeGraph, ScopePattern


@pytest.fixture
def tree(mk):
    nodes = mk.ops(
        ("s/sig_a", "Sigmoid"),
        ("s/sig_b", "Sigmoid"),
        ("s/sig_c", "Sigmoid"),
        ("s/inner/sig_d", "Sigmoid"),
        ("s/inner/mul", "Mul"),
    )
    nodes += [
        mk.node("s/split", "Split", num_split=4),
        mk.node("s/inner/split", "Split", num_split=2),
        mk.node("f/a", "Scale", eps=1e-5, name_attr=b"gelu", flag=True, axes=(1, 2)),
        mk.node("f/b", "Scale", eps=0.25, name_attr="tanh", flag=False, axes=(3,)),
        mk.node("m/c", "Scale"),
        mk.node("m/d", "Scale", eps=0.25),
        mk.node("ret/x", "_Retval"),
    ]
    return ScopeGraph.build(mk.graph(*nodes)).tree


# ---------------------------------------------------------------------- NodeOpTypeFeature
def test_op_type_exact_count_is_over_the_subtree(tree):
    assert NodeOpTypeFeature("Sigmoid", 4).matches(tree["s/"])
    assert not NodeOpTypeFeature("Sigmoid", 3).matches(tree["s/"])
    assert NodeOpTypeFeature("Sigmoid", 1).matches(tree["s/inner/"])


def test_op_type_minus_one_means_absent(tree):
    assert NodeOpTypeFeature("Conv2D", -1).matches(tree["s/"])
    assert not NodeOpTypeFeature("Sigmoid", -1).matches(tree["s/"])
    reason = NodeOpTypeFeature("Sigmoid", -1).check(tree["s/"])
    assert reason == "NodeOpTypeFeature('Sigmoid', -1): Sigmoid is present 4 times in s/, expected absent"


def test_op_type_step_is_a_modulo_on_a_present_type(tree):
    assert NodeOpTypeFeature("Sigmoid", 0, 2).matches(tree["s/"])  # 4 % 2 == 0
    assert NodeOpTypeFeature("Sigmoid", 1, 3).matches(tree["s/"])  # 4 % 3 == 1
    assert not NodeOpTypeFeature("Sigmoid", 0, 3).matches(tree["s/"])
    assert NodeOpTypeFeature("Mul", 0, 1).matches(tree["s/"])  # (X, 0, 1): present
    # An absent type never satisfies a step feature, even with remainder 0.
    assert not NodeOpTypeFeature("Tanh", 0, 1).matches(tree["s/"])
    assert "Tanh is absent in s/, expected present with count % 1 == 0" in NodeOpTypeFeature("Tanh", 0, 1).check(tree["s/"])


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("Relu", 0), "can never match because an absent op type counts as -1"),
        (("Relu", -2), "use a count >= 1, or -1"),
        (("Relu", 3, 3), "num must be a remainder in 0..2"),
        (("Relu", -1, 2), "num must be a remainder"),
        (("Relu", 1, -1), "step must be 0 or positive"),
        (("", 1), "non-empty op type"),
        (("Relu", 1.0), "integer num and step"),
        (("Relu", True), "integer num and step"),
    ],
)
def test_op_type_features_that_can_never_match_are_refused(args, message):
    with pytest.raises(FusionError, match=message):
        NodeOpTypeFeature(*args)


# ---------------------------------------------------------------------- NodeAttrFeature
def test_attr_feature_looks_at_direct_nodes_only(tree):
    assert NodeAttrFeature("Split", "num_split", 4).matches(tree["s/"])
    # num_split=2 lives in s/inner/, below s/: not seen from s/.
    assert not NodeAttrFeature("Split", "num_split", 2).matches(tree["s/"])
    assert NodeAttrFeature("Split", "num_split", 2).matches(tree["s/inner/"])
    assert "has no direct Split node" in NodeAttrFeature("Split", "num_split", 2).check(tree["f/"])


def test_attr_float_within_two_float32_epsilons():
    eps = float(np.finfo(np.float32).eps)
    from scopefusion.scope.features import values_match

    assert values_match(1.0 + eps, 1.0)
    assert values_match(1.0 + 1.9 * eps, 1.0)
    assert not values_match(1.0 + 3 * eps, 1.0)
    assert values_match(np.float32(1e-5), 1e-5)
    assert values_match(0.0, 0.0) and not values_match(1e-30, 0.0)


def test_attr_value_mismatch_goes_on_to_the_next_node(tree):
    # f/a has eps=1e-5, f/b has eps=0.25: the second one matches.
    assert NodeAttrFeature("Scale", "eps", 0.25).matches(tree["f/"])
    assert NodeAttrFeature("Scale", "eps", 1e-5).matches(tree["f/"])
    assert "none of its 2 direct Scale node(s) has eps=0.5" in NodeAttrFeature("Scale", "eps", 0.5).check(tree["f/"])


def test_attr_missing_on_a_node_fails_at_once(tree):
    # m/c lacks 'eps' and comes first: the feature fails even though m/d would match.
    feature = NodeAttrFeature("Scale", "eps", 0.25)
    assert not feature.matches(tree["m/"])
    assert feature.check(tree["m/"]) == "NodeAttrFeature('Scale', 'eps', 0.25): node m/c has no attribute 'eps'"


def test_attr_kinds_string_bytes_bool_int_list(tree):
    f = tree["f/"]
    assert NodeAttrFeature("Scale", "name_attr", "gelu").matches(f)  # bytes attribute, str expected
    assert NodeAttrFeature("Scale", "name_attr", "tanh").matches(f)
    assert NodeAttrFeature("Scale", "flag", False).matches(f)
    assert not NodeAttrFeature("Scale", "flag", 1).matches(f)  # an int does not match a bool
    assert NodeAttrFeature("Scale", "axes", (3,)).matches(f)
    assert NodeAttrFeature("Scale", "axes", [1, 2]).matches(f)
    assert not NodeAttrFeature("Scale", "axes", (1,)).matches(f)
    assert not NodeAttrFeature("Scale", "eps", "0.25").matches(f)


def test_attr_feature_arguments_are_checked():
    with pytest.raises(FusionError, match="needs a value"):
        NodeAttrFeature("Split", "num_split", None)
    with pytest.raises(FusionError, match="non-empty op type and attribute name"):
        NodeAttrFeature("Split", "", 4)


# ---------------------------------------------------------------------- ScopeFeature
@pytest.fixture
def nested(mk):
    return ScopeGraph.build(
        mk.graph(
            *mk.ops(
                ("top/cell_1/a", "Neg"),
                ("top/cell_2/a", "Neg"),
                ("top/cell_2/deep/a", "Neg"),
                ("top/other/a", "Neg"),
                ("top/batchnorm_1/a", "Neg"),
                ("ab/a", "Neg"),
            )
        )
    ).tree


def test_scope_suffix_must_equal_the_trimmed_last_name(nested):
    assert ScopeFeature("", 0, suffix="batchnorm").matches(nested["top/batchnorm_1/"])
    assert not ScopeFeature("", 0, suffix="batch").matches(nested["top/batchnorm_1/"])
    assert not ScopeFeature("", 0, suffix="norm").matches(nested["top/batchnorm_1/"])
    assert ScopeFeature("", 0, suffix="cell").check(nested["top/"]) == (
        "ScopeFeature('', 0, suffix='cell'): last name is 'top', expected 'cell'"
    )


def test_scope_sub_type_count_over_all_descendants(nested):
    nested["top/cell_1/"].sub_type = "cell"
    nested["top/cell_2/deep/"].sub_type = "cell"
    assert ScopeFeature("cell", 2).matches(nested["top/"])
    assert not ScopeFeature("cell", 1).matches(nested["top/"])
    assert ScopeFeature("cell", 0).matches(nested["ab/"])
    assert ScopeFeature("cell", 1).check(nested["top/"]).endswith("2 sub-scope(s) have sub_type 'cell', expected 1")
    # The scope's own sub_type does not count.
    nested["top/"].sub_type = "cell"
    assert ScopeFeature("cell", 2).matches(nested["top/"])


def test_scope_count_ignored_without_sub_type(nested):
    # CANN checks the count only for a non-empty sub_type.
    assert ScopeFeature("", 5).matches(nested["top/"])


def test_scope_step_applies_a_modulo(nested):
    for name in ("top/cell_1/", "top/cell_2/", "top/other/"):
        nested[name].sub_type = "cell"
    assert ScopeFeature("cell", 1, step=2).matches(nested["top/"])  # 3 % 2 == 1
    assert not ScopeFeature("cell", 0, step=3).matches(nested["ab/"])  # absent never matches a step


def test_scope_sub_scope_mask(nested):
    assert ScopeFeature("", 0, sub_scope_mask="cell").matches(nested["top/"])  # cell_1 -> 'cell'
    assert ScopeFeature("", 0, sub_scope_mask="ee").matches(nested["top/"])  # 'deep'
    assert not ScopeFeature("", 0, sub_scope_mask="xyz").matches(nested["top/"])
    assert not ScopeFeature("", 0, sub_scope_mask="cell").matches(nested["ab/"])
    # Only descendants count, not the scope itself.
    assert not ScopeFeature("", 0, sub_scope_mask="top").matches(nested["top/"])
    assert "no sub-scope's last name contains 'xyz'" in ScopeFeature("", 0, sub_scope_mask="xyz").check(nested["top/"])


def test_scope_mask_and_count_together(nested):
    nested["top/other/"].sub_type = "o"
    assert ScopeFeature("o", 1, sub_scope_mask="cell").matches(nested["top/"])
    assert not ScopeFeature("o", 2, sub_scope_mask="cell").matches(nested["top/"])


@pytest.mark.parametrize(
    ("args", "kwargs", "message"),
    [
        (("x", -1), {}, "can never match"),
        (("x", 2), {"step": 2}, "can never match"),
        (("x", 1), {"suffix": "a/b"}, "contains '/'"),
        ((3, 1), {}, "must be a string"),
    ],
)
def test_scope_feature_arguments_are_checked(args, kwargs, message):
    with pytest.raises(FusionError, match=message):
        ScopeFeature(*args, **kwargs)


# ---------------------------------------------------------------------- ScopePattern
def test_pattern_is_the_and_of_its_features(tree):
    pattern = ScopePattern("cell", NodeOpTypeFeature("Sigmoid", 0, 2), NodeAttrFeature("Split", "num_split", 4))
    assert pattern.matches(tree["s/"]) and pattern.check(tree["s/"]) is None
    pattern.add(NodeOpTypeFeature("Tanh", 1))
    assert not pattern.matches(tree["s/"])
    assert "Tanh is absent" in pattern.check(tree["s/"])


def test_pattern_checks_in_cann_order_whatever_the_insertion_order(tree):
    pattern = ScopePattern("p").add(ScopeFeature("", 0, suffix="zzz"), NodeAttrFeature("Split", "num_split", 9))
    pattern.add(NodeOpTypeFeature("Tanh", 1))
    assert [type(f).__name__ for f in pattern.features] == ["NodeOpTypeFeature", "NodeAttrFeature", "ScopeFeature"]
    assert pattern.check(tree["s/"]).startswith("NodeOpTypeFeature('Tanh', 1)")


def test_pattern_never_matches_the_root_or_a_scope_with_retval(tree):
    assert ScopePattern("any").check(tree.root) == "the root scope is never matched"
    assert not ScopePattern("any").matches(tree.root)
    assert not ScopePattern("any").matches(tree["ret/"])
    assert "_Retval is present 1 time in ret/" in ScopePattern("any").check(tree["ret/"])
    assert ScopePattern("any").matches(tree["f/"])


def test_pattern_refuses_what_is_not_a_feature():
    with pytest.raises(FusionError, match="expected a NodeOpTypeFeature"):
        ScopePattern("x", "Relu")  # type: ignore[arg-type]
    with pytest.raises(FusionError, match="sub_type must be a string"):
        ScopePattern(NodeOpTypeFeature("Relu", 1))  # type: ignore[arg-type]


def test_feature_reprs():
    assert repr(NodeOpTypeFeature("A", 1, 2)) == "NodeOpTypeFeature('A', 1, step=2)"
    assert repr(ScopeFeature("c", 1, suffix="s")) == "ScopeFeature('c', 1, suffix='s')"
    assert repr(ScopePattern("p", NodeOpTypeFeature("A", 1))) == "ScopePattern('p', NodeOpTypeFeature('A', 1))"


@settings(max_examples=150, deadline=None)
@given(
    counts=st.dictionaries(st.sampled_from(["A", "B", "C"]), st.integers(1, 7), max_size=3),
    op=st.sampled_from(["A", "B", "C"]),
    num=st.integers(-1, 6),
    step=st.integers(0, 4),
)
def test_check_agrees_with_matches_and_prunes_is_sound(counts, op, num, step):
    from scopefusion.parser.source_graph import SourceGraph, SourceNode

    if (step == 0 and num == 0) or (step > 0 and not 0 <= num < step):
        return
    nodes = [SourceNode(f"s/{t}{i}", t) for t, n in counts.items() for i in range(n)]
    nodes += [SourceNode(f"s/sub/{t}{i}", t) for t, n in counts.items() for i in range(n // 2)]
    tree = ScopeGraph.build(SourceGraph(nodes)).tree
    feature = NodeOpTypeFeature(op, num, step)
    for scope in tree.all_scopes()[1:]:
        assert feature.matches(scope) == (feature.check(scope) is None)
        if feature.prunes(scope):
            assert not any(feature.matches(s) for s in [scope, *scope.descendants()])
