"""``best_match`` tries the patterns that can bind a node largest first and skips a pattern no larger than the
match it has: it answers what trying every pattern in order at every anchor answers, on real graphs."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from scopefusion.fusion_rules import BUILTIN_RULES
from scopefusion.fusion_rules.attention_patterns import CORE_PATTERNS
from scopefusion.fusion_rules.base import anchored
from scopefusion.fusion_rules.base.anchored import AnchoredDataflowPass, best_match
from scopefusion.parser import load
from scopefusion.scope import Match, ScopeGraph


def _every_pattern_in_order(graph, anchors, patterns, must_hold, near_miss) -> tuple[Any, Any, Any]:
    """``best_match`` as the plain rule reads: every pattern in order at every anchor (with the cheap tests
    without near misses), the largest match that binds ``must_hold`` kept, else the deepest miss."""
    best = miss = None
    if not near_miss and must_hold is not None and anchors:
        patterns = [(t, p) for t, p in patterns if p.has_op_type(graph.node(must_hold).op_type)]
    for anchor in anchors:
        node = graph.node(anchor)
        for tag, pattern in patterns:
            if node.op_type not in pattern.anchor_types:
                continue
            if not near_miss and not (pattern.may_anchor(graph, node) and pattern.may_match_at(graph, anchor)):
                continue
            found = pattern.match_at(graph, anchor)
            if isinstance(found, Match):
                if must_hold in found.node_names and (best is None or len(found.nodes) > len(best[1].nodes)):
                    best = (tag, found)
            elif miss is None or found.depth > miss.depth:
                miss = found
    if best is None:
        return None, None, miss if near_miss else None
    return best[0], best[1], None


def _silu_beta_pb(tmp_path: Path) -> Path:
    import tensorflow as tf

    from tests.models.tf_models import freeze_concrete_function

    spec = [tf.TensorSpec((None, 6), tf.float32, name="x")]
    fn = tf.function(lambda x: tf.nn.silu(x, beta=1.5) + tf.nn.silu(x * 2.0), input_signature=spec)
    path = tmp_path / "silu_beta.pb"
    path.write_bytes(freeze_concrete_function(fn.get_concrete_function()))
    return path


def _seeds(rule: AnchoredDataflowPass, graph: ScopeGraph):
    for op_type in rule.seed_types:
        for node in graph.nodes_by_type(op_type):
            yield node.name, rule.anchors(graph, node.name), rule.patterns


@pytest.mark.parametrize("fixture", ["tf_convnet_pb", "tf_mobilenet_pb", "tf_bert_pb", "silu_beta"])
def test_largest_first_gives_the_match_every_pattern_in_order_gives(fixture, request, tmp_path):
    path = _silu_beta_pb(tmp_path) if fixture == "silu_beta" else request.getfixturevalue(fixture)
    graph = ScopeGraph.build(load(path))
    tags = []
    cases = [case for rule in BUILTIN_RULES if isinstance(rule, AnchoredDataflowPass) for case in _seeds(rule, graph)]
    for softmax in graph.nodes_by_type("Softmax"):
        anchors = [c for c, slot, _ in graph.shared_consumers(softmax.name) if slot == 0]
        cases.append((softmax.name, anchors, CORE_PATTERNS))
    assert cases
    for seed, anchors, patterns in cases:
        for near_miss in (False, True):
            got = best_match(graph, anchors, patterns, seed, near_miss=near_miss)
            expected = _every_pattern_in_order(graph, anchors, patterns, seed, near_miss)
            assert got[0] == expected[0] and got[2] == expected[2], (seed, near_miss)
            assert (got[1] and got[1].node_names) == (expected[1] and expected[1].node_names), (seed, near_miss)
            tags.append(got[0])
    if fixture == "silu_beta":  # x * sigmoid(beta * x) matches there, and x * sigmoid(x) (tried first in order) does not
        assert "beta" in tags


def test_patterns_that_can_bind_a_node_are_largest_first_in_order_among_equals():
    from scopefusion.fusion_rules.hard_swish import PATTERNS as HARD_SWISH
    from scopefusion.fusion_rules.swish import PATTERNS as SWISH

    for patterns, op_type in ((SWISH, "Sigmoid"), (HARD_SWISH, "Relu6"), (CORE_PATTERNS, "Softmax")):
        holding = anchored._holding_patterns(patterns, op_type)
        plain = [(t, p) for t, p in patterns if p.has_op_type(op_type)]
        assert holding == sorted(plain, key=lambda pair: -len(pair[1]._ops))
    assert [t for t, _ in anchored._holding_patterns(SWISH, "Sigmoid")] == ["beta", "silu"]
