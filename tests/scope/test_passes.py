"""ScopeBasePass's run flow and the function forms of a rule."""

from __future__ import annotations

import numpy as np
import pytest

from scopefusion.errors import FusionError
from scopefusion.scope import (
    FUSION_DISABLE_INDEX as OFF,
)
from scopefusion.scope import (
    AcceptedFusion,
    DataflowPattern,
    DataflowRulePass,
    FunctionScopePass,
    FusionScopesResult,
    NodeOpTypeFeature,
    PassManager,
    PassRegistry,
    ScopeBasePass,
    ScopeFeature,
    ScopeGraph,
    ScopePattern,
    ScopesResult,
    dataflow_rule,
    scope_rule,
)


@pytest.fixture
def cells(mk):
    nodes = [mk.node("x", "Placeholder")]
    prev = "x"
    for cell in ("net/cell_a/", "net/cell_b/"):
        nodes += mk.ops((cell + "sig", "Sigmoid", prev), (cell + "tanh", "Tanh", cell + "sig"), (cell + "inner/neg", "Neg", cell + "tanh"))
        prev = cell + "inner/neg"
    nodes.append(mk.node("y", "Relu", prev))
    return ScopeGraph.build(mk.graph(*nodes))


CELL = ScopePattern("cell", NodeOpTypeFeature("Sigmoid", 1), NodeOpTypeFeature("Tanh", 1))


class Recorder(ScopeBasePass):
    name = "Recorder"

    def __init__(self, select=None, fail=False):
        self.select = select
        self.fail = fail
        self.generated: list[list[str]] = []

    def define_patterns(self):
        return CELL

    def last_match_scopes_and_ops(self, graph, matches):
        if self.select is None:
            return super().last_match_scopes_and_ops(graph, matches)
        return self.select(graph, matches)

    def generate_fusion_result(self, scopes, result, graph):
        if self.fail:
            raise RuntimeError("boom")
        self.generated.append([s.name for s in scopes])
        result.type = "Cell"
        result.insert_inputs("sig", [0])
        result.insert_outputs("inner/neg", [0])


def test_default_flow_one_result_per_matched_scope(cells):
    rule = Recorder()
    outcome = rule.run(cells)
    assert [s.name for s in outcome.matched] == ["net/cell_a/", "net/cell_b/"]
    assert rule.generated == [["net/cell_a/"], ["net/cell_b/"]]
    assert [(r.name, r.type, r.pass_name) for r in outcome.results] == [
        ("net/cell_a", "Cell", "Recorder"), ("net/cell_b", "Cell", "Recorder")]
    assert cells.scope("net/cell_a/").sub_type == "cell"


def test_selecting_nothing_clears_the_sub_types(cells):
    cells.scope("net/cell_a/inner/").sub_type = "stale"
    outcome = Recorder(select=lambda g, m: []).run(cells)
    assert outcome.results == [] and outcome.notes == ["last_match_scopes_and_ops selected nothing"]
    assert all(s.sub_type == "" for s in cells.tree)


def test_a_raising_rule_leaves_no_tags(cells):
    with pytest.raises(RuntimeError, match="boom"):
        Recorder(fail=True).run(cells)
    assert all(s.sub_type == "" for s in cells.tree)


def test_no_match_skips_last_match(cells):
    class NoMatch(Recorder):
        def define_patterns(self):
            return ScopePattern("none", NodeOpTypeFeature("Conv2D", 1))

    called = []
    outcome = NoMatch(select=lambda g, m: called.append(m) or []).run(cells)
    assert outcome.matched == [] and called == []


def test_a_pass_without_patterns_still_selects(cells):
    class Loose(ScopeBasePass):
        def last_match_scopes_and_ops(self, graph, matches):
            assert matches == []
            return [ScopesResult(nodes=[graph.node("net/cell_a/sig"), "net/cell_a/tanh"])]

        def generate_fusion_result(self, scopes, result, graph):
            assert scopes == [] and result.nodes == ("net/cell_a/sig", "net/cell_a/tanh")
            result.type = "SigTanh"
            result.insert_inputs("net/cell_a/sig", [0])
            result.insert_outputs("net/cell_a/tanh", [0])

    outcome = Loose().run(cells)
    assert outcome.results[0].name == "net/cell_a/tanh"  # default name: the last loose node
    assert Loose().pass_name == "Loose"


def test_selection_must_be_scopes_results(cells):
    with pytest.raises(FusionError, match="return ScopesResult objects"):
        Recorder(select=lambda g, m: ["net/cell_a/"]).run(cells)
    with pytest.raises(FusionError, match="expected Scope objects"):
        ScopesResult(scopes=["net/"])


def test_a_candidate_of_node_names_equals_one_made_with_checks(cells):
    """``ScopesResult.of_node_names`` (the rule bases' candidates) skips the checks, not what they give."""
    names = ["net/cell_a/sig", "net/cell_a/tanh"]
    captures = {"match": object()}
    made = ScopesResult.of_node_names(list(names), captures)
    assert made == ScopesResult(nodes=list(names), captures=captures)
    assert (made.scopes, made.refusal, made.name, made.captures is captures) == ([], None, "", True)


def test_default_generate_declines(cells):
    class Lazy(ScopeBasePass):
        name = "Lazy"

        def define_patterns(self):
            return CELL

    result = Lazy().run(cells).results[0]
    assert result.problems == ["pass Lazy does not implement generate_fusion_result"]


def test_scope_rule_decorator(cells):
    @scope_rule(CELL, name="CellRule", type="Cell", general=True)
    def cell(scope, result, graph):
        if scope.name == "net/cell_b/":
            return "cell_b is kept on purpose"
        result.insert_inputs("sig", [0])
        result.insert_outputs("inner/neg", [0])

    assert isinstance(cell, FunctionScopePass) and cell.general and cell.pass_name == "CellRule"
    registry = PassRegistry()
    registry.register(cell)
    report = PassManager(registry).run(cells)
    assert report["CellRule"].results_accepted == ["net/cell_a"]
    assert [r.reason for r in report["CellRule"].results_refused] == ["cell_b is kept on purpose"]
    accepted = report.plan.get("net/cell_a")
    assert accepted.type == "Cell" and accepted.claimed == ("net/cell_a/sig", "net/cell_a/tanh", "net/cell_a/inner/neg")


def test_scope_rule_checks_patterns_at_definition():
    with pytest.raises(FusionError, match="pass bad: define_patterns"):
        scope_rule("not a pattern", name="bad")(lambda s, r, g: None)


# ---------------------------------------------------------------------- dataflow rules
def swish(op, x):
    return op.Mul(x, op.Sigmoid(op.Mul(x, op.const("beta"), _name="scale")), _name="out")


@pytest.fixture
def swishes(mk):
    return ScopeGraph.build(
        mk.graph(
            mk.node("x", "Placeholder"),
            mk.node("beta", "Const", _value=np.float32(1.5)),
            mk.node("a/scale", "Mul", "x", "beta"),
            mk.node("a/sig", "Sigmoid", "a/scale"),
            mk.node("a/out", "Mul", "a/sig", "x"),
            mk.node("b/beta", "Const", _value=np.float32(1.0)),
            mk.node("b/scale", "Mul", "a/out", "b/beta"),
            mk.node("b/sig", "Sigmoid", "b/scale"),
            mk.node("b/out", "Mul", "b/scale", "b/sig"),  # not a swish: multiplies the scaled value
            mk.node("y", "Relu", "b/out"),
            outputs=("y",),
        )
    )


def test_dataflow_rule_maps_ports_and_claims(swishes):
    seen = []

    @dataflow_rule(DataflowPattern(swish), name="Swish", type="Swish")
    def rule(match, result, graph):
        seen.append(match.outputs)
        result.attrs["beta"] = float(match.value("beta"))

    assert isinstance(rule, DataflowRulePass) and not rule.general
    registry = PassRegistry()
    registry.register(rule)
    registry.enable("Swish")
    report = PassManager(registry).run(swishes)
    (accepted,) = report.accepted
    assert accepted.name == "a/out" and accepted.type == "Swish" and accepted.attrs == {"beta": 1.5}
    # 'beta' is a constant only this match reads: claimed with it.
    assert accepted.claimed == ("beta", "a/scale", "a/sig", "a/out") and accepted.absorbed == ()
    assert [(i.port, i.producer) for i in accepted.inputs] == [(0, "x")]
    assert [(o.port, o.inner_node, o.consumers) for o in accepted.outputs] == [(0, "a/out", (("b/scale", 0),))]
    assert seen == [[("a/out", 0)]]


def test_dataflow_rule_claims_constants_only_it_reads(mk):
    graph = ScopeGraph.build(
        mk.graph(
            mk.node("x", "Placeholder"),
            mk.node("beta", "Const", _value=np.float32(1.5)),
            mk.node("beta/read", "Identity", "beta"),
            mk.node("shared", "Const", _value=np.float32(1.5)),
            mk.node("a/scale", "Mul", "x", "beta/read"),
            mk.node("a/sig", "Sigmoid", "a/scale"),
            mk.node("a/out", "Mul", "a/sig", "x"),
            mk.node("b/scale", "Mul", "a/out", "shared"),
            mk.node("b/sig", "Sigmoid", "b/scale"),
            mk.node("b/out", "Mul", "b/sig", "a/out"),
            mk.node("c", "Add", "b/out", "shared"),
        )
    )
    registry = _registry(dataflow_rule(DataflowPattern(swish), name="Swish", type="Swish")(lambda m, r, g: None))
    report = PassManager(registry).run(graph)
    first, second = report.accepted
    assert first.claimed == ("beta", "beta/read", "a/scale", "a/sig", "a/out")
    # 'shared' is also read by c: not claimed, absorbed by the fusion.
    assert second.claimed == ("b/scale", "b/sig", "b/out") and second.absorbed == ("shared",)
    assert second.inputs[0].producer == "a/out"
    assert report.plan.resolve_tensor(second.inputs[0].producer, 0) == ("a/out", 0)


def test_dataflow_rule_can_decline_and_search_within_scopes(swishes):
    @dataflow_rule(DataflowPattern(swish), name="Swish", type="Swish",
                   within=ScopePattern("a_scope", ScopeFeature("", 0, suffix="a")))
    def rule(match, result, graph):
        return "declined for the test" if match.value("beta") > 1 else None

    report = PassManager(_registry(rule)).run(swishes)
    assert report["Swish"].scopes_matched == ["a/"]
    assert [r.reason for r in report.refused] == ["declined for the test"]


def test_dataflow_rule_needs_a_pattern():
    with pytest.raises(FusionError, match="expected a DataflowPattern"):
        dataflow_rule(swish, name="x")(lambda m, r, g: None)  # type: ignore[arg-type]


def test_map_ports_with_one_tensor_in_two_variables(mk):
    graph = ScopeGraph.build(mk.graph(*mk.ops(("x", "Placeholder"), ("sq", "Mul", "x", "x"))))
    pattern = DataflowPattern(lambda op, a, b: op.Mul(a, b, _commute=False), name="mul")
    registry = PassRegistry()
    registry.register(DataflowRulePass(None, pattern, "Square", "Square", True))
    (accepted,) = PassManager(registry).run(graph).accepted
    assert [(i.port, i.producer, i.inner_slot) for i in accepted.inputs] == [(0, "x", 0), (1, "x", 1)]


def test_results_keep_their_rule_captures(cells):
    class Capturing(Recorder):
        def last_match_scopes_and_ops(self, graph, matches):
            return [ScopesResult(scopes=[m], captures={"depth": m.depth}) for m in matches]

    outcome = Capturing().run(cells)
    assert [r.captures for r in outcome.results] == [{"depth": 2}, {"depth": 2}]
    assert isinstance(outcome.results[0], FusionScopesResult)
    plan_result = PassManager(_registry(Capturing())).run(cells).accepted[0]
    assert isinstance(plan_result, AcceptedFusion) and plan_result.captures == {"depth": 2}


def _registry(*rules):
    registry = PassRegistry()
    for rule in rules:
        registry.register(rule, general=True)
    return registry


def test_insert_maps_use_fusion_disable_index(cells):
    class Partial(Recorder):
        def generate_fusion_result(self, scopes, result, graph):
            result.type = "Cell"
            result.insert_inputs("sig", [0, OFF])
            result.insert_outputs("inner/neg", [0])

    report = PassManager(_registry(Partial())).run(cells)
    assert len(report.accepted) == 2


def test_dataflow_rule_in_nested_scope_matches_fuses_once(mk):
    graph = ScopeGraph.build(
        mk.graph(
            mk.node("x", "Placeholder"),
            mk.node("blk/act/beta", "Const", _value=np.float32(1.0)),
            mk.node("blk/act/scale", "Mul", "x", "blk/act/beta"),
            mk.node("blk/act/sig", "Sigmoid", "blk/act/scale"),
            mk.node("blk/act/out", "Mul", "x", "blk/act/sig"),
        )
    )
    # Two independent pattern sets match blk/ and, inside it, blk/act/: one subgraph, found twice.
    within = [ScopePattern("outer", ScopeFeature("", 0, suffix="blk")), ScopePattern("inner", ScopeFeature("", 0, suffix="act"))]
    rule = dataflow_rule(DataflowPattern(swish), name="Swish", type="Swish", within=within)(lambda m, r, g: None)
    report = PassManager(_registry(rule)).run(graph)
    assert report["Swish"].scopes_matched == ["blk/", "blk/act/"]
    assert report["Swish"].results_accepted == ["blk/act/out"] and report.refused == []


def test_select_without_matches_lets_a_scope_rule_search_an_unscoped_graph():
    from scopefusion.parser.source_graph import SourceGraph, SourceNode
    from scopefusion.scope import NodeOpTypeFeature, ScopeBasePass, ScopeGraph, ScopePattern, ScopesResult

    graph = ScopeGraph.build(SourceGraph([SourceNode("x", "Placeholder"), SourceNode("r", "Relu", [("x", 0)])]))
    seen = []

    class Rule(ScopeBasePass):
        name = "R"

        def define_patterns(self):
            return [[[ScopePattern("t", NodeOpTypeFeature("Relu", 1))]]]

        def last_match_scopes_and_ops(self, graph, matched):
            seen.append(list(matched))
            return [ScopesResult(nodes=["r"])] if not matched else []

        def generate_fusion_result(self, scopes, result, graph):
            result.type = "MyRelu"
            result.insert_inputs("r", [0])
            result.insert_outputs("r", [0])

    assert Rule().run(graph).results == [] and seen == []  # CANN's behaviour: no matched scope, no selection

    class Unscoped(Rule):
        select_without_matches = True

    outcome = Unscoped().run(graph)
    assert seen == [[]] and [r.type for r in outcome.results] == ["MyRelu"]


def test_a_pass_that_selects_nothing_is_not_asked_to_select(cells):
    class Unscoped(Recorder):
        select_without_matches = True

        def __init__(self, nothing):
            super().__init__(select=lambda g, m: called.append(m) or [])
            self.nothing = nothing

        def define_patterns(self):
            return ScopePattern("none", NodeOpTypeFeature("Conv2D", 1))

        def selects_nothing(self, graph):
            return self.nothing

    called: list = []
    assert Unscoped(nothing=True).run(cells) == Unscoped(nothing=False).run(cells)
    assert called == [[]]  # asked once: by the pass that does not know it selects nothing


def test_a_set_whose_later_batch_cannot_match_still_undoes_its_tags(cells):
    # The first batch matches and tags, the second needs an absent op type: the tags are undone, a stale
    # sub_type included, as matching does (only a first batch that cannot match lets the matching be skipped).
    cells.scope("net/cell_a/").sub_type = "stale"
    absent = ScopePattern("none", NodeOpTypeFeature("Conv2D", 1))
    rule = Recorder()
    rule.define_patterns = lambda: [[CELL, absent]]
    assert rule.run(cells).matched == []
    assert cells.scope("net/cell_a/").sub_type == ""
    cells.scope("net/cell_a/").sub_type = "stale"
    rule.define_patterns = lambda: [[absent, CELL]]
    assert rule.run(cells).matched == []
    assert cells.scope("net/cell_a/").sub_type == "stale"


def test_a_dataflow_rule_without_its_anchor_type_selects_nothing(swishes, cells):
    rule = dataflow_rule(DataflowPattern(swish), name="Swish", type="Swish")(lambda m, r, g: None)
    assert not rule.selects_nothing(swishes)
    assert rule.selects_nothing(cells)  # no Mul, the op the pattern ends at
    assert rule.last_match_scopes_and_ops(cells, []) == []
    within = dataflow_rule(DataflowPattern(swish), name="Swish", type="Swish", within=CELL)(lambda m, r, g: None)
    assert within.selects_nothing(swishes)  # searched only inside matched scopes


def test_a_subclass_that_selects_its_own_way_is_always_asked(cells):
    class Own(DataflowRulePass):
        def last_match_scopes_and_ops(self, graph, matches):
            return super().last_match_scopes_and_ops(graph, matches)

    assert not Own(None, DataflowPattern(swish), "Own", "Swish", general=False).selects_nothing(cells)


@pytest.mark.parametrize("fixture", ["tf_mobilenet_pb", "tf_bert_pb"])
def test_input_maps_of_distinct_tensors_are_the_general_ones(fixture, request):
    """map_ports' one-pass maps for a match whose input tensors are distinct (the usual match) are the maps
    the general walk makes, in the same order, on every match of the builtin rules' patterns in real models."""
    from scopefusion.fusion_rules import BUILTIN_RULES
    from scopefusion.parser import load
    from scopefusion.scope import DataflowPattern, ScopeGraph
    from scopefusion.scope.passes import _input_maps, _input_maps_of_distinct

    graph = ScopeGraph.build(load(request.getfixturevalue(fixture)))
    patterns = [p for rule in BUILTIN_RULES for item in getattr(rule, "patterns", ())
                for p in (item if isinstance(item, tuple) else (item,)) if isinstance(p, DataflowPattern)]
    compared = 0
    for pattern in patterns:
        for match in pattern.find(graph, overlap=True):
            wanted = set(match.inputs)
            if len(wanted) == len(match.inputs):
                made = _input_maps_of_distinct(match, wanted)
                assert list(made.items()) == list(_input_maps(match, wanted).items())
                compared += 1
    assert compared >= 5
