"""Dataflow patterns: DAGs, commutative operands, constants, captures, near misses, the op-type index."""

from __future__ import annotations

import re

import numpy as np
import pytest

from scopefusion.dtypes import by_name
from scopefusion.errors import FusionError
from scopefusion.scope import DataflowPattern, Match, NearMiss, ScopeGraph, _search
from scopefusion.scope import dataflow as df


def gelu_erf(op, x):
    return op.Mul(op.Mul(x, 0.5), op.op(("Add", "AddV2"), op.Erf(op.RealDiv(x, op.const("sqrt2", value=1.4142135))), 1.0), _name="out")


@pytest.fixture
def gelu_graph(mk):
    """Two GELUs: g1 with operands in pattern order, g2 with every commutative operand swapped and its
    constants read through Identity nodes; plus a RealDiv that is no GELU."""
    nodes = [mk.node("x", "Placeholder")]
    for p, swap in (("g1/", False), ("g2/", True)):
        nodes += [
            mk.node(p + "half", "Const", _value=np.float32(0.5)),
            mk.node(p + "one", "Const", _value=np.float32(1.0)),
            mk.node(p + "sqrt2", "Const", _value=np.float32(1.4142135)),
        ]
        sqrt2 = p + "sqrt2"
        if swap:
            nodes.append(mk.node(p + "sqrt2/read", "Identity", p + "sqrt2"))
            sqrt2 = p + "sqrt2/read"
        nodes += [
            mk.node(p + "div", "RealDiv", "x", sqrt2),
            mk.node(p + "erf", "Erf", p + "div"),
            mk.node(p + "add", "AddV2", *((p + "one", p + "erf") if swap else (p + "erf", p + "one"))),
            mk.node(p + "half_x", "Mul", *((p + "half", "x") if swap else ("x", p + "half"))),
            mk.node(p + "mul", "Mul", *((p + "add", p + "half_x") if swap else (p + "half_x", p + "add"))),
        ]
    nodes += [mk.node("other/div", "RealDiv", "x", "x"), mk.node("other/erf", "Erf", "other/div"),
              mk.node("other/mul", "Mul", "other/erf", "x")]
    return ScopeGraph.build(mk.graph(*nodes))


def test_finds_both_orders_with_shared_input_and_captures(gelu_graph):
    pattern = DataflowPattern(gelu_erf)
    found = pattern.find(gelu_graph)
    assert [m["out"].name for m in found] == ["g1/mul", "g2/mul"]
    first: Match = found[0]
    assert first.node_names == ["g1/div", "g1/erf", "g1/add", "g1/half_x", "g1/mul"]
    assert first["x"] == ("x", 0) and first.inputs == [("x", 0)]
    assert first.outputs == [("g1/mul", 0)]
    assert first.value("sqrt2") == pytest.approx(1.4142135)
    # Through the Identity read, the capture is the constant itself.
    assert found[1]["sqrt2"].name == "g2/sqrt2"
    assert ["g2/sqrt2/read", "g2/sqrt2"] in [[n.name for n in chain] for chain in found[1].constants]


def test_a_match_gives_its_nodes_indexes_in_graph_order(gelu_graph):
    found = DataflowPattern(gelu_erf).find(gelu_graph)
    for match in found:  # from the search, and for a match made by hand, from the graph
        by_hand = Match(match.pattern, list(match.nodes), {}, match.inputs, match.outputs)
        expected = tuple(gelu_graph.positions[n.name] for n in match.nodes)
        assert match.node_positions(gelu_graph) == by_hand.node_positions(gelu_graph) == expected
        assert list(expected) == sorted(expected)


def test_anchors_come_from_the_op_type_index_not_a_graph_scan(gelu_graph):
    class NoScan(list):
        def __iter__(self):
            raise AssertionError("the pattern rescanned graph.source.nodes")

    saved = gelu_graph.source.nodes
    gelu_graph.source.nodes = NoScan(saved)
    try:
        found = DataflowPattern(gelu_erf).find(gelu_graph)
    finally:
        gelu_graph.source.nodes = saved
    assert len(found) == 2
    # Every Mul was tried as an anchor, nothing else.
    assert found.tried == len(gelu_graph.nodes_by_type("Mul"))


def test_near_miss_keeps_the_deepest_failure(gelu_graph):
    def tanh_gelu(op, x):
        return op.Mul(op.Mul(x, 0.5), op.Add(op.Tanh(op.RealDiv(x, 1.4142135)), 1.0))

    found = DataflowPattern(tanh_gelu).find(gelu_graph)
    assert not found and found.tried == 5
    miss = found.near_miss
    assert isinstance(miss, NearMiss) and miss.anchor == "g1/mul"
    assert miss.reason == "g1/add is AddV2, expected Add"
    assert str(miss) == "at g1/mul (4 pattern node(s) matched): g1/add is AddV2, expected Add"


def test_a_near_miss_written_late_is_the_one_written_at_once(gelu_graph):
    """A search keeps a near miss's reason unwritten until it is read: the miss then reads, compares, hashes
    and prints as one made with the reason written (as the frozen dataclass it stands for did)."""
    def tanh_gelu(op, x):
        return op.Mul(op.Mul(x, 0.5), op.Add(op.Tanh(op.RealDiv(x, 1.4142135)), 1.0))

    miss = DataflowPattern(tanh_gelu).match_at(gelu_graph, "g1/mul")
    assert isinstance(miss, NearMiss) and not isinstance(miss._reason, str)  # not written yet
    written = NearMiss("g1/mul", 4, "g1/add is AddV2, expected Add")
    assert miss == written and hash(miss) == hash(written) and miss != NearMiss("g1/mul", 3, written.reason)
    assert repr(miss) == "NearMiss(anchor='g1/mul', depth=4, reason='g1/add is AddV2, expected Add')"
    assert isinstance(miss._reason, str)


def test_a_value_used_twice_must_be_one_tensor(mk):
    graph = ScopeGraph.build(
        mk.graph(*mk.ops(("a", "Placeholder"), ("b", "Placeholder"), ("m1", "Neg", "a"), ("m2", "Neg", "a"), ("s", "Sub", "a", "m1"),
                         ("t", "Sub", "a", "b"), ("u", "Mul", "s", "m2")))
    )

    def shared(op, x):
        neg = op.Neg(x)
        return op.Mul(op.Sub(x, neg), neg)

    found = DataflowPattern(shared).find(graph)
    assert not found
    assert "is m1 in one place and m2 in another" in found.near_miss.reason

    def var_twice(op, x):
        return op.Sub(x, x)

    miss = DataflowPattern(var_twice).match_at(graph, "t")
    assert isinstance(miss, NearMiss) and miss.reason == "Var('x') is a:0 in one place and b:0 in another"


def test_commutative_chains_do_not_try_every_permutation(mk, monkeypatch):
    depth = 14
    nodes = [mk.node("x", "Placeholder"), mk.node("a0", "Neg", "x")]
    for i in range(1, depth + 1):
        nodes.append(mk.node(f"v{i}", "Placeholder"))
        nodes.append(mk.node(f"a{i}", "Add", f"v{i}", f"a{i - 1}"))  # graph: var first, op second
    graph = ScopeGraph.build(mk.graph(*nodes))

    def chain(op, x, *vs):
        value = op.Neg(x)
        for v in vs:
            value = op.Add(value, v)  # pattern: op first, var second
        return value

    def make(op, x, v1, v2, v3, v4, v5, v6, v7, v8, v9, v10, v11, v12, v13, v14):
        return chain(op, x, v1, v2, v3, v4, v5, v6, v7, v8, v9, v10, v11, v12, v13, v14)

    calls = 0
    original = _search.SearchRun.match_value

    def counting(self, value, tensor, state, then):
        nonlocal calls
        calls += 1
        return original(self, value, tensor, state, then)

    monkeypatch.setattr(_search.SearchRun, "match_value", counting)
    found = DataflowPattern(make).find(graph)
    assert [m.outputs[0][0] for m in found] == [f"a{depth}"]
    assert calls < 4 * depth * 3  # linear in the chain, not 2**depth


def test_constant_predicates(mk):
    graph = ScopeGraph.build(
        mk.graph(
            mk.node("x", "Placeholder"),
            mk.node("axes", "Const", _value=np.array([-1], np.int32)),
            mk.node("axes64", "Const", _value=np.array([-1], np.int64)),
            mk.node("mat", "Const", _value=np.ones((2, 3), np.float32)),
            mk.node("m1", "Mean", "x", "axes", keep_dims=True),
            mk.node("m2", "Mean", "x", "axes64", keep_dims=False),
            mk.node("m3", "Mean", "x", "mat", keep_dims=True),
        )
    )

    def mean(**kw):
        return DataflowPattern(lambda op, x: op.Mean(x, op.const("axes", **kw)), name="mean")

    assert [m.outputs[0][0] for m in mean(value=-1).find(graph)] == ["m1", "m2"]
    assert [m.outputs[0][0] for m in mean(dtype="int32").find(graph)] == ["m1"]
    assert [m.outputs[0][0] for m in mean(dtype=by_name("int64")).find(graph)] == ["m2"]
    assert [m.outputs[0][0] for m in mean(shape=(None, 3)).find(graph)] == ["m3"]
    assert [m.outputs[0][0] for m in mean(check=lambda a: None if a.size == 6 else "too small").find(graph)] == ["m3"]
    assert mean(value=-1).match_at(graph, "m3").reason == "constant mat has 6 elements, expected the scalar -1"
    assert mean(value=[1, 2]).match_at(graph, "m1").reason == "constant axes has value -1, expected [1, 2]"
    assert mean(dtype="int32").match_at(graph, "m2").reason == "constant axes64 has dtype int64, expected int32"
    assert mean(shape=(2,)).match_at(graph, "m1").reason == "constant axes has shape (1,), expected (2,)"
    assert mean(check=lambda a: "nope").match_at(graph, "m1").reason == "constant axes nope"
    reason = DataflowPattern(lambda op, x, y: op.Mean(x, op.const("c")), name="m").match_at(graph, "m1")
    assert isinstance(reason, Match)
    not_const = DataflowPattern(lambda op, x: op.Mean(op.const(), x), name="m").match_at(graph, "m1")
    assert not_const.reason == "x:0 is not a constant, expected ConstPattern()"


def test_attribute_and_node_checks(mk):
    graph = ScopeGraph.build(mk.graph(*mk.ops(("x", "Placeholder"), ("k", "Const")), mk.node("m", "Mean", "x", "k", keep_dims=True)))

    def pat(attrs=None, check=None):
        return DataflowPattern(lambda op, x, a: op.Mean(x, a, _attrs=attrs, _check=check), name="p")

    assert isinstance(pat({"keep_dims": True}).match_at(graph, "m"), Match)
    assert pat({"keep_dims": False}).match_at(graph, "m").reason == "m has keep_dims=True, expected False"
    assert pat({"axis": 1}).match_at(graph, "m").reason == "m has no attribute 'axis'"
    assert isinstance(pat({"keep_dims": lambda v: v is True}).match_at(graph, "m"), Match)
    assert pat({"keep_dims": lambda v: "must be false"}).match_at(graph, "m").reason == "m attribute keep_dims=True: must be false"
    assert pat(check=lambda n: "too many users").match_at(graph, "m").reason == "m: too many users"
    assert DataflowPattern(lambda op, x: op.Mean(x), name="p").match_at(graph, "m").reason == (
        "m (Mean) has 2 input(s), the pattern expects 1"
    )
    assert DataflowPattern(lambda op, x: op.Relu(x), name="p").match_at(graph, "m").reason == "m is Mean, expected Relu"


def test_multi_output_ops_and_several_pattern_outputs(mk):
    graph = ScopeGraph.build(
        mk.graph(*mk.ops(("x", "Placeholder"), ("s", "Split", "x"), ("a", "Neg", "s:1"), ("b", "Exp", "s:0"), ("c", "Add", "a", "b")))
    )

    def split(op, x):
        first, second = op.Split(x, _outputs=2, _name="split")
        return op.Add(op.Neg(second), op.Exp(first)), second

    found = DataflowPattern(split).find(graph)
    assert len(found) == 1 and found[0].outputs == [("c", 0), ("s", 1)]
    assert found[0]["split"].name == "s"

    def wrong_index(op, x):
        first, second = op.Split(x, _outputs=2)
        return op.Add(op.Neg(first), op.Exp(second), _commute=False)

    miss = DataflowPattern(wrong_index).match_at(graph, "c")
    assert miss.reason == "s:1 is output 1, expected output 0 of OpPattern(Split)"


def test_within_a_scope_every_op_must_be_inside(gelu_graph):
    pattern = DataflowPattern(gelu_erf)
    assert [m["out"].name for m in pattern.find(gelu_graph, within=gelu_graph.scope("g2/"))] == ["g2/mul"]
    assert not pattern.find(gelu_graph, within=gelu_graph.scope("other/"))
    assert len(pattern.find(gelu_graph, within=gelu_graph.tree.root)) == 2


def test_overlapping_matches_are_skipped_unless_asked(mk):
    graph = ScopeGraph.build(mk.graph(*mk.ops(("x", "Placeholder"), ("a", "Neg", "x"), ("b", "Neg", "a"), ("c", "Neg", "b"))))
    pattern = DataflowPattern(lambda op, x: op.Neg(op.Neg(x)), name="negneg")
    assert [m.outputs[0][0] for m in pattern.find(graph)] == ["b"]
    assert [m.outputs[0][0] for m in pattern.find(graph, overlap=True)] == ["b", "c"]


@pytest.mark.parametrize("taken", [set(), {"b"}, {"c"}, {"b", "d"}, {"a", "b", "c", "d", "e"}])
def test_taken_anchors_leave_out_their_matches_which_still_hide_later_ones(mk, taken):
    """``taken`` leaves out the matches anchored there, yet such a match still hides a later one it
    overlaps, exactly as when every anchor is searched."""
    graph = ScopeGraph.build(mk.graph(*mk.ops(("x", "Placeholder"), ("a", "Neg", "x"), ("b", "Neg", "a"),
                                                ("c", "Neg", "b"), ("d", "Neg", "c"), ("e", "Neg", "d"))))
    pattern = DataflowPattern(lambda op, x: op.Neg(op.Neg(x)), name="negneg")
    every = [m.node_names for m in pattern.find(graph, near_miss=False)]
    assert every == [["a", "b"], ["c", "d"]]
    expected = [names for names in every if names[-1] not in taken]
    assert [m.node_names for m in pattern.find(graph, near_miss=False, taken=taken)] == expected


@pytest.mark.parametrize(
    ("fn", "message"),
    [
        (lambda: 1, "must take the op builder"),
        (lambda op, x: x, "must return the output(s) of pattern ops"),
        (lambda op, x: op.Neg(op.Neg(x, _name="n"), _name="n"), "uses the capture name(s) ['n'] twice"),
        (lambda op, x: op.Neg("x"), "a pattern input must be a pattern value"),
        (lambda op, x: op.op((), x), "needs op type names"),
    ],
)
def test_pattern_definition_errors(fn, message):
    with pytest.raises(FusionError, match=re.escape(message)):
        DataflowPattern(fn, name="bad")


def test_a_deferred_pattern_is_built_on_first_use_and_matches_as_an_eager_one(gelu_graph):
    calls = []

    def counted(op, x):
        calls.append(x)
        return gelu_erf(op, x)

    deferred = DataflowPattern(counted, name="gelu", deferred=True)
    assert calls == [] and repr(deferred) == "DataflowPattern('gelu')"
    found = deferred.find(gelu_graph)
    assert len(calls) == 1 and [v.name for v in deferred.vars] == ["x"]
    deferred.find(gelu_graph)
    assert len(calls) == 1
    eager = DataflowPattern(gelu_erf).find(gelu_graph)
    assert [[n.name for n in m.nodes] for m in found] == [[n.name for n in m.nodes] for m in eager]
    assert len(found) == 2


@pytest.mark.parametrize("fn", [lambda: 1, lambda op, x: x, lambda op, x: op.Neg(op.Neg(x, _name="n"), _name="n")])
def test_a_deferred_pattern_raises_its_definition_error_at_first_use(fn, gelu_graph):
    pattern = DataflowPattern(fn, name="bad", deferred=True)
    for _ in range(2):
        with pytest.raises(FusionError, match="pattern (function )?bad"):
            pattern.find(gelu_graph)
    with pytest.raises(AttributeError):
        pattern.no_such_attribute  # noqa: B018


def test_pattern_variables_are_the_functions_parameters_also_through_wrappers_and_callables(gelu_graph):
    import functools

    def logged(fn):
        @functools.wraps(fn)
        def wrapper(*args):
            return fn(*args)
        return wrapper

    class Gelu:
        def __call__(self, op, x):
            return gelu_erf(op, x)

    def with_default(op, x, scale=0.5):
        return op.Mul(op.Mul(x, scale), op.op(("Add", "AddV2"), op.Erf(op.RealDiv(x, op.const("sqrt2"))), 1.0))

    for fn, names in ((gelu_erf, ["x"]), (logged(gelu_erf), ["x"]), (Gelu(), ["x"]), (with_default, ["x", "scale"])):
        pattern = DataflowPattern(fn, name="gelu")
        assert [v.name for v in pattern.vars] == names
    assert len(DataflowPattern(logged(gelu_erf), name="gelu").find(gelu_graph)) == 2


def test_match_capture_errors(gelu_graph):
    match = DataflowPattern(gelu_erf).find(gelu_graph)[0]
    with pytest.raises(FusionError, match="has no capture 'nope'"):
        match["nope"]
    with pytest.raises(FusionError, match="is not a constant"):
        match.value("out")


def test_may_match_is_false_only_when_an_op_has_none_of_its_types(gelu_graph):
    assert DataflowPattern(gelu_erf).may_match(gelu_graph)

    def gelu_tanh(op, x):
        return op.Mul(x, op.Tanh(x))

    def either(op, x):
        return op.Mul(x, op.op(("Tanh", "Erf"), x))

    assert not DataflowPattern(gelu_tanh).may_match(gelu_graph)
    assert not DataflowPattern(gelu_tanh).find(gelu_graph)
    assert DataflowPattern(either).may_match(gelu_graph)


@pytest.mark.parametrize("model", ["tf_bert_pb", "tf_mobilenet_pb", "onnx_attention"])
def test_may_match_at_never_rules_out_a_match(model, request):
    """``may_match_at``, ``may_anchor`` and ``may_hold`` are sound filters: on real graphs, every anchor where
    a builtin pattern matches passes them (and every node the match binds passes ``may_hold``), each rules
    out some anchors or nodes where a pattern cannot match, and a search that wants no near miss (and so
    skips those anchors) finds the same matches."""
    from scopefusion.fusion_rules import batch_norm, gelu, hard_swish, layer_norm, swish
    from scopefusion.fusion_rules.attention_patterns import CORE_PATTERNS
    from scopefusion.parser import load

    graph = ScopeGraph.build(load(request.getfixturevalue(model)))
    patterns = [p for _, p in gelu.PATTERNS + hard_swish.PATTERNS + swish.PATTERNS + CORE_PATTERNS]
    patterns += list(layer_norm.LayerNormFusion.patterns) + list(batch_norm.PATTERNS)
    matched = ruled_out = anchors_ruled_out = held_out = 0
    for pattern in patterns:
        for node in graph.source.nodes:
            if node.op_type not in pattern.anchor_types:
                continue
            possible = pattern.may_match_at(graph, node.name)
            anchor = pattern.may_anchor(graph, node)
            found = pattern.match_at(graph, node)
            if isinstance(found, Match):
                matched += 1
                assert possible and anchor, (pattern.name, node.name)
            ruled_out += not possible
            anchors_ruled_out += not anchor
            if isinstance(found, Match):
                for held in found.nodes:  # every node a match binds passes may_hold
                    assert pattern.may_hold(graph, held), (pattern.name, node.name, held.name)
        fresh = ScopeGraph.build(graph.source)
        assert [m.node_names for m in pattern.find(fresh, near_miss=False)] == [m.node_names for m in pattern.find(graph)]
        held_out += sum(not pattern.may_hold(graph, n) for t in pattern._all_op_types for n in graph.nodes_by_type(t))
    assert matched and ruled_out and anchors_ruled_out and held_out


def test_patterns_with_alike_parts_share_may_hold_answers(gelu_graph):
    """``may_hold`` asks once per graph, node and shape of the pattern part below the node's op: patterns
    built apart with the same part share the answer; a part with another constant, op type or variable
    sharing gets its own."""

    def erf_part(op, x):
        return op.Erf(op.RealDiv(x, op.const("sqrt2", value=1.4142135)))

    def erf_then_add(op, x):
        return op.AddV2(erf_part(op, x), 1.0)

    def erf_then_mul(op, x):
        return op.Mul(erf_part(op, x), 2.0)

    def other_constant(op, x):
        return op.Mul(op.Erf(op.RealDiv(x, op.const("sqrt2", value=2.0))), 2.0)

    def one_variable_twice(op, x):
        return op.Mul(op.Erf(op.RealDiv(x, x)), 2.0)

    erf = gelu_graph.node("g1/erf")
    first, second = DataflowPattern(erf_then_add), DataflowPattern(erf_then_mul)
    assert df.structure_key(first._ops_by_type["Erf"][0]) == df.structure_key(second._ops_by_type["Erf"][0])
    assert first.may_hold(gelu_graph, erf)
    asked = len(gelu_graph.memo)
    assert second.may_hold(gelu_graph, erf)
    assert len(gelu_graph.memo) == asked  # the answer of the first pattern's part
    assert not DataflowPattern(other_constant).may_hold(gelu_graph, erf)
    assert not DataflowPattern(one_variable_twice).may_hold(gelu_graph, erf)
    assert len(gelu_graph.memo) == asked + 2
