"""PassManager: order, failures, strict mode, reports and explain()."""

from __future__ import annotations

import json

import pytest

from scopefusion.errors import FusionError
from scopefusion.scope import (
    DataflowPattern,
    NodeOpTypeFeature,
    PassManager,
    PassRegistry,
    ScopeBasePass,
    ScopeGraph,
    ScopePattern,
    dataflow_rule,
    scope_rule,
)


@pytest.fixture
def graph(mk):
    nodes = [mk.node("x", "Placeholder")]
    prev = "x"
    for cell in ("net/cell_a/", "net/cell_b/", "net/odd/"):
        tanh_input = cell + "sig"
        nodes += mk.ops((cell + "sig", "Sigmoid", prev), (cell + "tanh", "Tanh", tanh_input))
        prev = cell + "tanh"
    nodes += mk.ops(("y", "Relu", prev), ("leak", "Neg", "net/cell_b/sig"))
    return ScopeGraph.build(mk.graph(*nodes))


@scope_rule(ScopePattern("cell", NodeOpTypeFeature("Sigmoid", 1), NodeOpTypeFeature("Tanh", 1)), name="Cell", type="Cell", general=True)
def cell_rule(scope, result, graph):
    if scope.last_name == "odd":
        return "odd cells stay unfused"
    result.insert_inputs("sig", [0])
    result.insert_outputs("tanh", [0])


def registry_of(*rules, enable=()):
    registry = PassRegistry()
    for rule in rules:
        registry.register(rule)
    registry.enable(*enable)
    return registry


class Boom(ScopeBasePass):
    name = "Boom"
    general = True

    def define_patterns(self):
        return ScopePattern("b", NodeOpTypeFeature("Sigmoid", 0, 1))

    def last_match_scopes_and_ops(self, graph, matches):
        raise ValueError("bad rule")


BOOM_LINE = Boom.last_match_scopes_and_ops.__code__.co_firstlineno + 1


class Order(ScopeBasePass):
    general = True
    log: list[str] = []

    def last_match_scopes_and_ops(self, graph, matches):
        Order.log.append(self.pass_name)
        return []


def test_enabled_passes_run_in_registry_order():
    Order.log = []
    registry = PassRegistry()
    registry.load_builtins([type("Builtin", (Order,), {"name": "Builtin"})])
    registry.register(type("Second", (Order,), {"name": "Second"}))
    registry.register(type("Off", (Order,), {"name": "Off", "general": False}))
    registry.register(type("Third", (Order,), {"name": "Third"}))
    graph = ScopeGraph.build(__import__("scopefusion.parser", fromlist=["SourceGraph"]).SourceGraph([]))
    report = PassManager(registry).run(graph)
    assert Order.log == ["Second", "Third", "Builtin"]
    assert [r.name for r in report.passes] == ["Second", "Third", "Builtin"]
    assert all(r.status == "not_changed" for r in report.passes)


def test_a_raising_pass_is_reported_and_skipped(graph):
    report = PassManager(registry_of(Boom, cell_rule)).run(graph)
    boom, cell = report.passes
    assert (boom.name, boom.status, boom.error) == ("Boom", "error", "ValueError: bad rule")
    assert boom.error_at == f"{__file__}:{BOOM_LINE}"
    assert cell.status == "changed" and cell.results_accepted == ["net/cell_a"]
    # Boom's tags were cleared before Cell ran.
    assert graph.scope("net/").sub_type == ""


def test_strict_mode_fails_the_run_naming_the_pass_and_those_before(graph):
    with pytest.raises(FusionError) as info:
        PassManager(registry_of(cell_rule, Boom), strict=True).run(graph)
    assert str(info.value) == (
        f"fusion pass 'Boom' (user) failed: ValueError: bad rule at {__file__}:{BOOM_LINE}; passes run before it: "
        "Cell; fix or disable the pass"
    )
    assert isinstance(info.value.__cause__, ValueError)


def test_report_contents_and_json(graph):
    report = PassManager(registry_of(cell_rule)).run(graph)
    cell = report["Cell"]
    assert cell.scopes_matched == ["net/cell_a/", "net/cell_b/", "net/odd/"]
    assert cell.results_accepted == ["net/cell_a"]
    assert [(r.name, r.reason) for r in cell.results_refused] == [
        ("net/cell_b", "intermediate value net/cell_b/sig:0 is consumed outside the fusion by leak (input 0); "
                       "map it to a fused output port or leave the node out"),
        ("net/odd", "odd cells stay unfused"),
    ]
    assert cell.seconds >= 0 and report.seconds >= cell.seconds
    data = json.loads(json.dumps(report.to_dict()))
    assert data["passes"][0]["results_refused"][1] == {
        "name": "net/odd", "pass": "Cell", "reason": "odd cells stay unfused", "scopes": ["net/odd/"], "nodes": []}
    assert data["accepted"][0]["claimed"] == ["net/cell_a/sig", "net/cell_a/tanh"]
    with pytest.raises(KeyError, match="no pass named 'Nope' ran"):
        report["Nope"]


def test_replaced_builtins_are_in_the_report(graph):
    registry = PassRegistry()
    registry.load_builtins([type("Cell", (ScopeBasePass,), {"name": "Cell", "general": True})])
    registry.register(cell_rule)
    report = PassManager(registry).run(graph)
    assert report.replacements == ["pass 'Cell' from user replaces the builtin pass of that name"]
    assert report.to_dict()["replacements"] == report.replacements
    assert report["Cell"].source == "user" and report["Cell"].results_accepted == ["net/cell_a"]


def test_a_second_run_starts_afresh(graph):
    manager = PassManager(registry_of(cell_rule))
    first = manager.run(graph)
    second = manager.run(graph)
    assert [a.name for a in second.accepted] == [a.name for a in first.accepted] == ["net/cell_a"]


def test_known_types_as_a_container(graph):
    report = PassManager(registry_of(cell_rule), known_types={"LayerNorm"}).run(graph)
    assert report.accepted == []
    assert report.refused[0].reason == "fused op type 'Cell' is not a known op type; register the op or fix the type"


# ---------------------------------------------------------------------- explain
def test_explain_says_why_for_each_pass(graph):
    never = scope_rule(ScopePattern("conv", NodeOpTypeFeature("Conv2D", 1)), name="Conv", general=True)(lambda s, r, g: None)
    manager = PassManager(registry_of(never, cell_rule))
    manager.run(graph)
    by_pass = {e.pass_name: e for e in manager.explain("net/cell_a/")}
    assert not by_pass["Conv"].matched
    assert by_pass["Conv"].reason == (
        "no match: set 0 batch 0 pattern 'conv': NodeOpTypeFeature('Conv2D', 1): Conv2D is absent in net/cell_a/, expected exactly 1"
    )
    assert by_pass["Cell"].matched and by_pass["Cell"].reason == "fused by 'net/cell_a'"
    assert str(by_pass["Cell"]) == "Cell: fused by 'net/cell_a'"
    assert manager.explain("net/odd/")[1].reason == "matched, but the result was refused: odd cells stay unfused"
    net = manager.explain(graph.scope("net/"))[1]
    # net/ itself does not match, but the pass fused inside it: both are said.
    assert net.reason.startswith(
        "fused by 'net/cell_a' (inside net/; the scope itself: no match: set 0 batch 0 pattern 'cell': "
        "NodeOpTypeFeature('Sigmoid', 1): Sigmoid is present 3 times"
    )
    json.dumps([e.to_dict() for e in manager.explain("net/")])


def test_explain_a_match_that_was_not_selected(graph):
    class Picky(ScopeBasePass):
        name = "Picky"
        general = True

        def define_patterns(self):
            return ScopePattern("cell", NodeOpTypeFeature("Sigmoid", 1), NodeOpTypeFeature("Tanh", 1))

        def last_match_scopes_and_ops(self, graph, matches):
            return []

    manager = PassManager(registry_of(Picky))
    manager.run(graph)
    (explanation,) = manager.explain("net/cell_a/")
    assert explanation.matched
    assert explanation.reason == "matched, but last_match_scopes_and_ops did not select it or another check declined it"


def test_explain_a_scope_inside_a_final_match(graph):
    class Outer(ScopeBasePass):
        name = "Outer"
        general = True

        def define_patterns(self):
            return ScopePattern("sig", NodeOpTypeFeature("Sigmoid", 0, 1))  # net/ matches, so the walk stops there

        def last_match_scopes_and_ops(self, graph, matches):
            return []

    manager = PassManager(registry_of(Outer))
    assert manager.run(graph)["Outer"].scopes_matched == ["net/"]
    (inner,) = manager.explain("net/cell_a/")
    assert inner.matched and inner.reason.startswith("features match now, but the scope was not a final match")
    (outer,) = manager.explain("net/")
    assert outer.reason == "matched, but last_match_scopes_and_ops did not select it or another check declined it"


def test_explain_a_dataflow_rule_gives_the_near_miss(mk):
    graph = ScopeGraph.build(
        mk.graph(*mk.ops(("x", "Placeholder"), ("act/sig", "Sigmoid", "x"), ("act/out", "Mul", "act/sig", "act/sig")))
    )
    swish = DataflowPattern(lambda op, x: op.Mul(x, op.Sigmoid(x)), name="swish")
    rule = dataflow_rule(swish, name="Swish", type="Swish", general=True)(lambda m, r, g: None)
    manager = PassManager(registry_of(rule))
    report = manager.run(graph)
    assert report["Swish"].notes == [
        "dataflow pattern 'swish' did not match; nearest miss at act/out (3 pattern node(s) matched): "
        "Var('x') is x:0 in one place and act/sig:0 in another"
    ]
    (explanation,) = manager.explain("act/")
    assert not explanation.matched
    assert explanation.reason == (
        "no match: dataflow pattern 'swish': no match in act/; nearest miss at act/out (3 pattern node(s) matched): "
        "Var('x') is x:0 in one place and act/sig:0 in another"
    )


def test_explain_needs_a_graph():
    with pytest.raises(FusionError, match="explain\\(\\) needs a graph"):
        PassManager(PassRegistry()).explain("a/")


@pytest.mark.parametrize("enabled_before", [True, False])
def test_building_and_running_pause_the_cyclic_collector_and_restore_its_state(mk, monkeypatch, enabled_before):
    import gc

    from scopefusion.scope import tree as tree_module

    seen = []
    from_nodes = tree_module.ScopeTree.from_nodes.__func__

    def watched(cls, *args, **kwargs):
        seen.append(("build", gc.isenabled()))
        return from_nodes(cls, *args, **kwargs)

    monkeypatch.setattr(tree_module.ScopeTree, "from_nodes", classmethod(watched))

    @scope_rule(ScopePattern("cell", NodeOpTypeFeature("Sigmoid", 1)), name="Watch", type="Watch", general=True)
    def watch(scope, result, graph):
        seen.append(("run", gc.isenabled()))
        return "only watching"

    registry = PassRegistry()
    registry.register(watch)
    nodes = mk.ops(("net/cell/sig", "Sigmoid", "x"))
    (gc.enable if enabled_before else gc.disable)()
    try:
        graph = ScopeGraph.build(mk.graph(mk.node("x", "Placeholder"), *nodes))
        after_build = gc.isenabled()
        PassManager(registry).run(graph)
        after_run = gc.isenabled()
    finally:
        gc.enable()
    assert seen == [("build", False), ("run", False)]
    assert (after_build, after_run) == (enabled_before, enabled_before)


@pytest.mark.parametrize("fixture", ["tf_mobilenet_pb", "tf_bert_pb"])
def test_a_conversion_keeps_no_search_state(fixture, request):
    """The plan keeps its graph as long as the converted model: the memo's matches and near misses are
    dropped when the run ends, and the builtin rules hand their matches to the rule without keeping them in
    the accepted fusions' captures, so neither stays alive with the model."""
    from scopefusion.convert import convert, fusion_setup
    from scopefusion.dialects import op_name_tuple
    from scopefusion.dialects.fused.declared import op_registry_for
    from scopefusion.scope import Match

    model = convert(request.getfixturevalue(fixture))
    run = model.fusion_run
    assert run.accepted, "the model has fusions"
    assert run.plan.graph.memo == {}
    kept = [(a.name, key) for a in run.accepted for key, value in a.captures.items()
            if isinstance(value, Match) or type(value).__name__ in ("_Judged", "Candidate")]
    assert kept == []
    registry, _ = fusion_setup()
    ops = op_name_tuple(op_registry_for(model.source, registry.fused_ops))
    again = PassManager(registry, ops=ops).run(run.plan.graph)  # a later run on the graph searches afresh
    assert [a.name for a in again.accepted] == [a.name for a in run.accepted]
