"""``selects_nothing``: a builtin rule that says it selects nothing in a graph is right, and says so for graphs
without the op types it looks for, so its run skips the selection there."""

from __future__ import annotations

import pytest

from scopefusion.fusion_rules import BUILTIN_RULES
from scopefusion.parser import load
from scopefusion.parser.source_graph import SourceGraph, SourceNode
from scopefusion.scope import PassManager, PassRegistry, ScopeGraph


def _graph(*specs: tuple[str, str, tuple[str, ...]]) -> ScopeGraph:
    nodes = [SourceNode(name, op, inputs=[(i, 0) for i in inputs]) for name, op, inputs in specs]
    return ScopeGraph.build(SourceGraph(nodes))


def _hand_made() -> dict[str, ScopeGraph]:
    x = ("x", "Placeholder", ())
    w = ("w", "Placeholder", ())
    return {
        "relu": _graph(x, ("net/relu", "Relu", ("x",))),
        "one product": _graph(x, w, ("net/mm", "MatMul", ("x", "w")), ("net/relu", "Relu", ("net/mm",))),
        "two products named attention": _graph(
            x, w, ("attention/mm", "MatMul", ("x", "w")), ("attention/mm_1", "MatMul", ("attention/mm", "w"))),
        "softmax": _graph(x, ("attention/softmax", "Softmax", ("x",))),
        "l2_normalize": _graph(
            x, ("axes", "Const", ()), ("eps", "Const", ()), ("l2_normalize/Square", "Square", ("x",)),
            ("l2_normalize/Sum", "Sum", ("l2_normalize/Square", "axes")),
            ("l2_normalize/Maximum", "Maximum", ("l2_normalize/Sum", "eps")),
            ("l2_normalize/Rsqrt", "Rsqrt", ("l2_normalize/Maximum",)), ("l2_normalize", "Mul", ("x", "l2_normalize/Rsqrt"))),
        "seeds": _graph(x, ("gelu/erf", "Erf", ("x",)), ("swish/sig", "Sigmoid", ("gelu/erf",)),
                        ("clip/min", "Minimum", ("swish/sig", "x")), ("hard_swish/relu6", "Relu6", ("clip/min",))),
    }


@pytest.fixture(scope="module")
def graphs(tf_convnet_pb, tf_bert_pb, tf_rnn_pb, onnx_attention) -> dict[str, ScopeGraph]:
    found = _hand_made()
    for path in (tf_convnet_pb, tf_bert_pb, tf_rnn_pb, onnx_attention):
        found[path.name] = ScopeGraph.build(load(path))
    return found


def _selection(rule, graph: ScopeGraph) -> tuple[list, list[str]]:
    """What ``last_match_scopes_and_ops(graph, [])`` selects and notes."""
    notes: list[str] = []
    rule._notes = notes
    try:
        return list(rule.last_match_scopes_and_ops(graph, []) or []), notes
    finally:
        rule._notes = None


@pytest.mark.parametrize("rule", BUILTIN_RULES, ids=lambda r: r.pass_name)
def test_a_rule_that_says_it_selects_nothing_selects_nothing(rule, graphs):
    said = {name: rule.selects_nothing(graph) for name, graph in graphs.items()}
    assert said["relu"]  # the op types every builtin looks for are absent there
    for name, graph in graphs.items():
        if said[name]:
            assert _selection(rule, graph) == ([], []), name
    assert not all(said.values())  # some graph of the set has what the rule looks for


def test_what_each_rule_looks_for(graphs):
    says = {rule.pass_name: {n for n, g in graphs.items() if not rule.selects_nothing(g)} for rule in BUILTIN_RULES}
    assert "two products named attention" in says["MultiHeadAttentionFusion"]
    assert "softmax" in says["MultiHeadAttentionFusion"]
    assert "one product" not in says["MultiHeadAttentionFusion"]  # one matrix product: no candidate
    for name in ("GeluFusion", "SwishFusion", "ClipFusion", "HardSwishFusion"):
        assert "seeds" in says[name], name
    assert "dynamic_rnn.pb" in says["DynamicRNNFusion"]
    assert "bert.pb" in says["LayerNormFusion"]
    assert "l2_normalize" in says["L2NormalizeFusion"]


def test_the_refusal_of_two_products_named_attention_is_still_reported(graphs):
    graph = graphs["two products named attention"]
    (mha,) = [r for r in BUILTIN_RULES if r.pass_name == "MultiHeadAttentionFusion"]
    registry = PassRegistry()
    registry.register(mha)
    (refusal,) = PassManager(registry).run(graph).refused
    assert "named like attention" in refusal.reason
