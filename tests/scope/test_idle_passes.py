"""A pass the manager skips as idle (``ScopeBasePass.idle_in``) is one whose run would have given an empty
outcome, on real graphs; the answer kept per op-type counts is the answer worked out again."""

from __future__ import annotations

import pytest

from scopefusion.convert import fusion_setup
from scopefusion.parser import load
from scopefusion.scope import PassManager, ScopeBasePass, ScopeGraph, reads_op_type_counts

MODELS = ["tf_convnet_pb", "tf_mobilenet_pb", "tf_bert_pb", "tf_rnn_pb"]


@pytest.mark.parametrize("fixture", MODELS)
def test_an_idle_pass_would_have_found_nothing(fixture, request):
    source = load(request.getfixturevalue(fixture))
    registry, _ = fusion_setup(entry_points=False)
    idle_seen = busy_seen = 0
    for _ in range(2):  # the second time from the answers kept per op-type counts
        graph = ScopeGraph.build(source)
        for entry in registry.enabled_passes():
            rule = entry.rule
            idle = rule.idle_in(graph)
            assert idle == rule._idle_given(rule.pattern_sets(), graph), entry.name
            outcome = rule.run(graph)
            if idle:
                idle_seen += 1
                assert not outcome.matched and not outcome.results and not outcome.notes, entry.name
            else:
                busy_seen += 1
            graph.tree.reset_sub_types()
    assert idle_seen and busy_seen


@pytest.mark.parametrize("fixture", ["tf_convnet_pb", "tf_bert_pb"])
def test_a_run_with_idle_passes_skipped_reports_what_every_pass_run_reports(fixture, request, monkeypatch):
    source = load(request.getfixturevalue(fixture))
    registry, _ = fusion_setup(entry_points=False)

    def reports(run):
        return [{k: v for k, v in r.to_dict().items() if k != "seconds"} for r in run.passes]

    skipping = PassManager(registry).run(ScopeGraph.build(source))
    monkeypatch.setattr(ScopeBasePass, "idle_in", lambda self, graph: False)
    running = PassManager(registry).run(ScopeGraph.build(source))
    assert reports(skipping) == reports(running)
    assert [a.to_dict() for a in skipping.accepted] == [a.to_dict() for a in running.accepted]


def test_the_kept_answer_follows_the_node_counts(mk):
    """One pass object, two graphs with the same op types but one MatMul more: each gets its own answer."""

    class NeedsTwoMatMuls(ScopeBasePass):
        name = "NeedsTwoMatMuls"

        @reads_op_type_counts
        def selects_nothing(self, graph):
            return len(graph.nodes_by_type("MatMul")) < 2

    rule = NeedsTwoMatMuls()
    one = mk.graph(mk.node("x", "Placeholder"), mk.node("w", "Placeholder"), mk.node("m1", "MatMul", "x", "w"))
    two = mk.graph(mk.node("x", "Placeholder"), mk.node("w", "Placeholder"), mk.node("m1", "MatMul", "x", "w"),
                   mk.node("m2", "MatMul", "m1", "w"))
    assert rule.idle_in(ScopeGraph.build(one)) is True
    assert rule.idle_in(ScopeGraph.build(two)) is False
    assert rule.idle_in(ScopeGraph.build(one)) is True


def test_an_unmarked_selects_nothing_is_asked_each_time(mk):
    """Without ``reads_op_type_counts`` the answer may depend on more than the counts: it is not kept."""
    asked = []

    class AsksEachTime(ScopeBasePass):
        name = "AsksEachTime"

        def selects_nothing(self, graph):
            asked.append(graph)
            return True

    rule = AsksEachTime()
    graph = ScopeGraph.build(mk.graph(mk.node("x", "Placeholder"), mk.node("y", "Relu", "x")))
    assert rule.idle_in(graph) and rule.idle_in(graph)
    assert len(asked) == 2
