"""Validation of fusion results: what is accepted, what is refused and why, and what the IR builder gets."""

from __future__ import annotations

import json

import pytest

from scopefusion.scope import (
    FUSION_DISABLE_INDEX as OFF,
)
from scopefusion.scope import (
    INPUT_FROM_FUSION_SCOPE,
    OUTPUT_TO_FUSION_SCOPE,
    SCOPE_TO_MULTI_NODES,
    AcceptedFusion,
    FusionPlan,
    FusionScopesResult,
    Refusal,
    ScopeGraph,
)


@pytest.fixture
def g(mk):
    """x -> f/mul(x, w) -> f/add(f/mul, x) -> f/out(f/add, f/c) -> y; f/ also reads gamma through an Identity."""
    return ScopeGraph.build(
        mk.graph(
            mk.node("x", "Placeholder"),
            mk.node("w", "Const", _value=[2.0]),
            mk.node("f/gamma", "Const", _value=[1.0]),
            mk.node("f/gamma/read", "Identity", "f/gamma"),
            mk.node("f/mul", "Mul", "x", "w"),
            mk.node("f/add", "Add", "f/mul", "x"),
            mk.node("f/c", "Const", _value=[3.0]),
            mk.node("f/out", "Mul", "f/add", "f/gamma/read"),
            mk.node("y", "Relu", "f/out"),
            outputs=("y",),
        )
    )


def fused(g, **kw) -> FusionScopesResult:
    result = FusionScopesResult(kw.pop("name", "f"), kw.pop("type", "Fused"), scopes=[g.scope("f/")])
    result.pass_name = "TestPass"
    result.insert_inputs("f/mul", kw.pop("mul", [0, OFF]))
    result.insert_inputs("out", kw.pop("out", [OFF, 1]))
    result.insert_outputs("f/out", [0])
    return result


def test_accepted_fusion_exposes_claims_ports_and_kept_nodes(g):
    plan = FusionPlan(g)
    accepted = plan.submit(fused(g))
    assert isinstance(accepted, AcceptedFusion), accepted
    assert accepted.claimed == ("f/mul", "f/add", "f/c", "f/out")
    # gamma and its read only feed fused input 1: they stay in the graph.
    assert accepted.kept == ("f/gamma", "f/gamma/read")
    assert [(i.port, i.producer, i.index) for i in accepted.inputs] == [(0, "x", 0), (1, "f/gamma/read", 0)]
    assert accepted.inputs[1].inner_node == "f/out" and accepted.inputs[1].inner_slot == 1
    out = accepted.outputs[0]
    assert (out.port, out.inner_node, out.index, out.consumers) == (0, "f/out", 0, (("y", 0),))
    # w is a constant read by f/mul without a port: absorbed (the fused op carries its value).
    assert accepted.absorbed == ("w",)
    assert plan.owner("f/add") == "f" and plan.owner("x") is None and plan.owner("f/gamma") is None
    assert plan.resolve_tensor("f/out", 0) == ("f", 0) and plan.resolve_tensor("x", 0) == ("x", 0)
    assert plan.get("f") is accepted and list(plan) == [accepted] and len(plan) == 1
    json.dumps(plan.to_dict())


def test_other_readers_of_a_mapped_input_see_the_same_tensor(g):
    # f/add reads x without its own port; x is fused input 0, so that is the same tensor.
    accepted = FusionPlan(g).submit(fused(g))
    assert isinstance(accepted, AcceptedFusion)


def refuse(plan, result) -> str:
    recorded = plan.submit(result)
    assert isinstance(recorded, Refusal), recorded
    assert recorded in plan.refused and recorded.pass_name == "TestPass"
    return recorded.reason


def test_port_mapped_twice_is_refused(g):
    reason = refuse(FusionPlan(g), fused(g, mul=[0, OFF], out=[OFF, 0]))
    assert reason == "fused input port 0 is mapped twice (f/mul:0 and f/out:1); map each port once"


def test_ports_with_a_gap_are_refused(g):
    reason = refuse(FusionPlan(g), fused(g, mul=[0, OFF], out=[OFF, 2]))
    assert reason == "insert_inputs maps ports [0, 2]; fused ports must be numbered 0..n-1 without gaps"


def test_a_node_claimed_by_an_earlier_fusion_is_refused(g):
    plan = FusionPlan(g)
    assert isinstance(plan.submit(fused(g)), AcceptedFusion)
    again = fused(g, name="f2")
    assert refuse(plan, again) == "node f/mul is already claimed by fusion 'f'"


def test_same_fusion_name_twice_is_refused(g, mk):
    graph = ScopeGraph.build(mk.graph(*mk.ops(("x", "Placeholder"), ("a/n", "Neg", "x"), ("b/n", "Neg", "x"))))
    plan = FusionPlan(graph)
    for scope, expect_ok in (("a/", True), ("b/", False)):
        result = FusionScopesResult("same", "Neg", scopes=[graph.scope(scope)])
        result.pass_name = "TestPass"
        result.insert_inputs("n", [0])
        recorded = plan.submit(result)
        assert isinstance(recorded, AcceptedFusion) is expect_ok
    assert plan.refused[0].reason == "fusion name 'same' is already used by fusion 'same'; choose another name"


def test_name_collision_with_a_node_outside_the_fusion_is_refused(g):
    assert refuse(FusionPlan(g), fused(g, name="y")) == "fusion name 'y' collides with a graph node the fusion does not replace"
    assert refuse(FusionPlan(g), fused(g, name="f/gamma")).startswith("fusion name 'f/gamma' collides")
    # Taking the name of a node the fusion replaces is fine.
    assert isinstance(FusionPlan(g).submit(fused(g, name="f/out")), AcceptedFusion)


def test_intermediate_consumed_outside_is_refused(mk):
    graph = ScopeGraph.build(
        mk.graph(*mk.ops(("x", "Placeholder"), ("f/a", "Neg", "x"), ("f/b", "Neg", "f/a"), ("z", "Relu", "f/a"), ("y", "Relu", "f/b")))
    )
    result = FusionScopesResult("f", "NegNeg", scopes=[graph.scope("f/")])
    result.pass_name = "TestPass"
    result.insert_inputs("f/a", [0])
    result.insert_outputs("f/b", [0])
    assert refuse(FusionPlan(graph), result) == (
        "intermediate value f/a:0 is consumed outside the fusion by z (input 0); map it to a fused output "
        "port or leave the node out"
    )
    result2 = FusionScopesResult("f", "NegNeg", scopes=[graph.scope("f/")])
    result2.insert_inputs("f/a", [0])
    result2.insert_outputs("f/b", [0])
    result2.insert_outputs("f/a", [1])
    accepted = FusionPlan(graph).submit(result2)
    assert isinstance(accepted, AcceptedFusion)
    assert [o.consumers for o in accepted.outputs] == [(("y", 0),), (("z", 0),)]


def test_graph_output_inside_the_fusion_needs_a_port(mk):
    graph = ScopeGraph.build(mk.graph(*mk.ops(("x", "Placeholder"), ("f/a", "Neg", "x"), ("f/b", "Neg", "f/a")), outputs=("f/a", "f/b")))
    result = FusionScopesResult("f", "T", scopes=[graph.scope("f/")])
    result.pass_name = "TestPass"
    result.insert_inputs("f/a", [0])
    result.insert_outputs("f/b", [0])
    assert refuse(FusionPlan(graph), result) == (
        "graph output 'f/a' (f/a:0) is inside the fusion but no fused output port maps it"
    )
    result.insert_outputs("f/a", [1])
    accepted = FusionPlan(graph).submit(result)
    assert [o.graph_outputs for o in accepted.outputs] == [("f/b",), ("f/a",)]


def test_unmapped_non_constant_input_is_refused(mk):
    graph = ScopeGraph.build(mk.graph(*mk.ops(("x", "Placeholder"), ("z", "Placeholder"), ("f/a", "Add", "x", "z"))))
    result = FusionScopesResult("f", "T", scopes=[graph.scope("f/")])
    result.pass_name = "TestPass"
    result.insert_inputs("f/a", [0, OFF])
    assert refuse(FusionPlan(graph), result) == (
        "input 1 of f/a (Add) comes from z:0 outside the fusion but no fused input port maps it; map it with insert_inputs"
    )


def test_input_port_fed_from_inside_is_refused(g):
    result = fused(g, out=[1, OFF])  # f/out input 0 is f/add, which the fusion claims
    assert refuse(FusionPlan(g), result) == (
        "fused input port 1 is fed by f/add:0, which the fusion claims; map ports only on edges that enter the fusion"
    )


@pytest.mark.parametrize(
    ("key", "message"),
    [("nothere", "insert_inputs('nothere') names no node the fusion claims"),
     ("mul", None)],
)
def test_index_map_keys_resolve_by_full_name_or_tail(g, key, message):
    result = FusionScopesResult("f", "T", scopes=[g.scope("f/")])
    result.pass_name = "TestPass"
    result.insert_inputs(key, [0, OFF])
    result.insert_inputs("f/out", [OFF, 1])
    result.insert_outputs("f/out", [0])
    recorded = FusionPlan(g).submit(result)
    if message is None:
        assert isinstance(recorded, AcceptedFusion)
    else:
        assert recorded.reason.startswith(message)


def test_ambiguous_tail_is_refused(mk):
    graph = ScopeGraph.build(mk.graph(*mk.ops(("x", "Placeholder"), ("f/a/mul", "Neg", "x"), ("f/b/mul", "Neg", "f/a/mul"))))
    result = FusionScopesResult("f", "T", scopes=[graph.scope("f/")])
    result.pass_name = "TestPass"
    result.insert_inputs("mul", [0])
    assert refuse(FusionPlan(graph), result) == (
        "insert_inputs('mul') is ambiguous: it ends 2 claimed nodes (f/a/mul, f/b/mul); use a longer tail"
    )


def test_input_index_beyond_the_nodes_inputs(g):
    assert refuse(FusionPlan(g), fused(g, mul=[OFF, OFF, 0])).startswith(
        "insert_inputs maps input 2 of f/mul (Mul), which has only 2 data input(s)"
    )


def test_output_index_beyond_known_outputs(mk):
    node = mk.node("f/a", "Neg", "x")
    node.output_names = ["f/a:0"]
    graph = ScopeGraph.build(mk.graph(mk.node("x", "Placeholder"), node))
    result = FusionScopesResult("f", "T", scopes=[graph.scope("f/")])
    result.pass_name = "TestPass"
    result.insert_inputs("f/a", [0])
    result.insert_outputs("f/a", [OFF, 0])
    assert refuse(FusionPlan(graph), result) == "insert_outputs maps output 1 of f/a (Neg), which has only 1 output(s)"


@pytest.mark.parametrize("kind", ["", "ScopeInvalidType", None])
def test_invalid_type_is_refused(g, kind):
    result = fused(g, type=kind)
    assert refuse(FusionPlan(g), result).startswith(f"the result has an invalid type {kind!r}")


def test_invalidate_reason_is_reported(g):
    result = fused(g)
    result.invalidate("epsilon is not a scalar")
    assert refuse(FusionPlan(g), result) == "epsilon is not a scalar"


def test_unknown_type_is_refused_when_types_are_known(g):
    plan = FusionPlan(g, known_types={"LayerNorm"}.__contains__)
    assert refuse(plan, fused(g, type="Fused")) == "fused op type 'Fused' is not a known op type; register the op or fix the type"
    assert isinstance(plan.submit(fused(g, type="LayerNorm")), AcceptedFusion)


def test_recorded_problems_refuse_the_result(g):
    result = fused(g)
    result.insert_inputs("f/mul", [0, OFF])
    assert refuse(FusionPlan(g), result) == "insert_inputs('f/mul') was called twice; map each inner node once"
    bad = FusionScopesResult("f", "T", scopes=[g.scope("f/")])
    bad.pass_name = "TestPass"
    bad.insert_outputs("f/out", [-3])
    assert refuse(FusionPlan(g), bad).startswith("insert_outputs('f/out', [-3]): an index map is a list of ports")


def test_empty_and_unknown_claims(g):
    empty = FusionScopesResult("e", "T")
    empty.pass_name = "TestPass"
    assert refuse(FusionPlan(g), empty) == "the result claims no nodes (its scopes are empty and it names no nodes)"
    ghost = FusionScopesResult("e", "T", nodes=["ghost"])
    ghost.pass_name = "TestPass"
    assert refuse(FusionPlan(g), ghost) == "the result claims node 'ghost', which is not in the graph"
    unnamed = fused(g, name="")
    assert refuse(FusionPlan(g), unnamed) == "the result has no name; set result.name"


def test_control_edges_across_the_boundary_are_recorded(mk):
    graph = ScopeGraph.build(
        mk.graph(*mk.ops(("x", "Placeholder"), ("init", "NoOp"), ("f/a", "Neg", "x", "^init"), ("after", "NoOp", "^f/a"), ("y", "Relu", "f/a")))
    )
    result = FusionScopesResult("f", "T", scopes=[graph.scope("f/")])
    result.insert_inputs("f/a", [0])
    result.insert_outputs("f/a", [0])
    accepted = FusionPlan(graph).submit(result)
    assert accepted.control_inputs == ("init",) and accepted.control_outputs == ("after",)


# ---------------------------------------------------------------------- cycles
def test_fusion_closing_a_cycle_through_an_outside_node_is_refused(mk):
    graph = ScopeGraph.build(
        mk.graph(*mk.ops(("x", "Placeholder"), ("f/a", "Neg", "x"), ("o", "Neg", "f/a"), ("f/b", "Add", "o", "f/a")))
    )
    result = FusionScopesResult("f", "T", scopes=[graph.scope("f/")])
    result.pass_name = "TestPass"
    result.insert_inputs("f/a", [0])
    result.insert_inputs("f/b", [1, OFF])
    result.insert_outputs("f/a", [0])
    result.insert_outputs("f/b", [1])
    assert refuse(FusionPlan(graph), result) == "fusing would create a cycle (<fusion f> -> o -> <fusion f>)"


def test_cycle_through_an_earlier_fusion_is_refused(mk):
    # A = {a1, a2}, B = {b1, b2}; a1 -> b1 and b2 -> a2. Each alone is fine; both together close a cycle.
    graph = ScopeGraph.build(
        mk.graph(
            *mk.ops(
                ("x", "Placeholder"),
                ("A/a1", "Neg", "x"),
                ("B/b1", "Neg", "A/a1"),
                ("B/b2", "Neg", "x"),
                ("A/a2", "Add", "A/a1", "B/b2"),
                ("y", "Add", "B/b1", "A/a2"),
            )
        )
    )

    def result(scope, name, ins, outs):
        r = FusionScopesResult(name, "T", scopes=[graph.scope(scope)])
        r.pass_name = "TestPass"
        for key, index_map in ins.items():
            r.insert_inputs(key, index_map)
        for key, index_map in outs.items():
            r.insert_outputs(key, index_map)
        return r

    a = result("A/", "A", {"a1": [0], "a2": [OFF, 1]}, {"a1": [0], "a2": [1]})
    b = result("B/", "B", {"b1": [0], "b2": [1]}, {"b1": [0], "b2": [1]})
    alone = FusionPlan(graph)
    assert isinstance(alone.submit(b), AcceptedFusion)
    plan = FusionPlan(graph)
    assert isinstance(plan.submit(a), AcceptedFusion)
    assert refuse(plan, b) == "fusing would create a cycle (<fusion B> -> <fusion A> -> <fusion B>)"
    # Downstream of both, an accepted chain still resolves through the plan.
    assert plan.resolve_tensor("A/a2", 0) == ("A", 1)


# ---------------------------------------------------------------------- many-to-many
@pytest.fixture
def two(mk):
    return ScopeGraph.build(
        mk.graph(*mk.ops(("x", "Placeholder"), ("s/a", "Neg", "x"), ("s/b", "Exp", "s/a"), ("y", "Relu", "s/b")))
    )


def multi(two) -> FusionScopesResult:
    result = FusionScopesResult("s/fused", SCOPE_TO_MULTI_NODES, scopes=[two.scope("s/")])
    result.pass_name = "TestPass"
    result.insert_inputs("s/a", [0])
    result.insert_outputs("s/b", [0])
    first = result.add_inner_node("first", "Neg").insert_input(INPUT_FROM_FUSION_SCOPE, 0).insert_output("second", 0)
    first.set_attr("note", 1)
    result.add_inner_node("second", "Exp").insert_input("first", 0).insert_output(OUTPUT_TO_FUSION_SCOPE, 0)
    return result


def test_many_to_many_inner_nodes_are_resolved(two):
    plan = FusionPlan(two)
    accepted = plan.submit(multi(two))
    assert isinstance(accepted, AcceptedFusion) and accepted.is_many_to_many
    first, second = accepted.inner_nodes
    assert (first.name, first.type, first.inputs) == ("s/fused/first", "Neg", (("x", 0),))
    assert first.outputs == (("s/fused/second", 0),) and first.attrs == {"note": 1}
    assert (second.name, second.inputs, second.outputs) == ("s/fused/second", (("s/fused/first", 0),), ((OUTPUT_TO_FUSION_SCOPE, 0),))
    assert plan.resolve_tensor("s/b", 0) == ("s/fused/second", 0)
    json.dumps(accepted.to_dict())


def test_many_to_many_cann_checks(two):
    dup = multi(two)
    dup.add_inner_node("first", "Neg")
    assert refuse(FusionPlan(two), dup) == "two inner nodes are named 'first'"
    extra = multi(two)
    extra.add_inner_node("third", "Neg").insert_input(INPUT_FROM_FUSION_SCOPE, 0)
    assert refuse(FusionPlan(two), extra) == "inner nodes read 2 input(s) from the fused scope but insert_inputs maps 1 port(s)"
    none = FusionScopesResult("s/fused", SCOPE_TO_MULTI_NODES, scopes=[two.scope("s/")])
    none.pass_name = "TestPass"
    none.insert_inputs("s/a", [0])
    none.insert_outputs("s/b", [0])
    assert refuse(FusionPlan(two), none) == "type 'ScopeToMultiNodes' needs inner nodes; add them with add_inner_node"


def test_many_to_many_stricter_checks(two):
    unknown_src = multi(two)
    unknown_src.inner_node(1).inputs[0] = ("nobody", 0)
    assert refuse(FusionPlan(two), unknown_src) == "inner node 'second' reads 'nobody', which is no inner node of the fusion"
    wrong_port = multi(two)
    wrong_port.inner_node(0).inputs[0] = (INPUT_FROM_FUSION_SCOPE, 3)
    assert refuse(FusionPlan(two), wrong_port) == "inner node 'first' reads fused input port 3, which insert_inputs does not map"
    loop = multi(two)
    loop.inner_node(0).insert_input("second", 0)
    assert refuse(FusionPlan(two), loop) == "the inner nodes form a cycle (first -> second)"
    typed = FusionPlan(two, known_types={"Neg"}.__contains__)
    assert refuse(typed, multi(two)) == "inner node 'second' has type 'Exp', which is not a known op type"
    collide = multi(two)
    collide.name = "s"
    collide.inner_node(0).name = "b/x"
    collide.inner_node(1).inputs[0] = ("b/x", 0)
    assert isinstance(FusionPlan(two).submit(collide), AcceptedFusion)  # 's/b/x' is no graph node


def test_inner_nodes_need_the_many_to_many_type(two):
    result = multi(two)
    result.type = "Fused"
    assert refuse(FusionPlan(two), result) == (
        "the result has 2 inner node(s) but type 'Fused'; inner nodes need type 'ScopeToMultiNodes'"
    )


def test_inner_node_calls_are_checked(two):
    result = multi(two)
    result.add_inner_node("", "")
    assert refuse(FusionPlan(two), result) == "add_inner_node('', '') needs a non-empty name and type"
    other = multi(two)
    other.inner_node(0).insert_input(INPUT_FROM_FUSION_SCOPE, -2)
    assert refuse(FusionPlan(two), other).startswith("inner node 'first': insert_input('InputFromFusionScope', -2)")


def test_result_accessors(two):
    result = multi(two)
    assert result.inputs == {"s/a": [0]} and result.outputs == {"s/b": [0]}
    result.inputs["s/a"].append(9)  # a copy
    assert result.inputs == {"s/a": [0]}
    assert result.recent_inner_node().name == "second" and result.inner_node(5) is None
    assert result.check_inner_nodes_info() is None
    assert repr(result) == "FusionScopesResult('s/fused', 'ScopeToMultiNodes')"


def test_omitted_optional_inputs(mk):
    resize = mk.node("f/r", "Resize", "x", "sizes")
    resize.inputs = [("x", 0), ("", -1), ("", -1), ("sizes", 0)]  # ONNX Resize(X, "", "", sizes)
    graph = ScopeGraph.build(mk.graph(mk.node("x", "Input"), mk.node("sizes", "Initializer", _value=[1, 2]), resize))
    result = FusionScopesResult("f", "Up", scopes=[graph.scope("f/")])
    result.pass_name = "TestPass"
    result.insert_inputs("f/r", [0, 1])
    assert refuse(FusionPlan(graph), result) == "insert_inputs maps input 1 of f/r (Resize), which is an omitted optional input"
    ok = FusionScopesResult("f", "Up", scopes=[graph.scope("f/")])
    ok.insert_inputs("f/r", [0])
    accepted = FusionPlan(graph).submit(ok)
    assert accepted.absorbed == ("sizes",)
    from scopefusion.scope import DataflowPattern

    miss = DataflowPattern(lambda op, x, a, b, c: op.Resize(x, a, b, c), name="resize").match_at(graph, "f/r")
    assert miss.reason == "an omitted optional input stands where Var('a') is expected"


def test_problems_of_several_kinds_refuse_for_the_earliest_kind(mk):
    """The boundary checks walk the claimed nodes once, yet a result is refused as if each check walked
    them in turn: an unmapped input of a later node before a value leaving an earlier one."""
    graph = ScopeGraph.build(
        mk.graph(
            *mk.ops(
                ("x", "Placeholder"), ("z", "Placeholder"), ("f/a", "Neg", "x"), ("f/b", "Add", "f/a", "z"),
                ("w", "Relu", "f/a"), ("y", "Relu", "f/b"),
            ),
            outputs=("y", "f/a"),
        )
    )
    result = FusionScopesResult("f", "T", scopes=[graph.scope("f/")])
    result.pass_name = "TestPass"
    result.insert_inputs("f/a", [0])
    result.insert_outputs("f/b", [0])
    assert refuse(FusionPlan(graph), result) == (
        "input 1 of f/b (Add) comes from z:0 outside the fusion but no fused input port maps it; map it with insert_inputs"
    )
    result.insert_inputs("f/b", [OFF, 1])
    assert refuse(FusionPlan(graph), result) == (
        "intermediate value f/a:0 is consumed outside the fusion by w (input 0); map it to a fused output port "
        "or leave the node out"
    )
