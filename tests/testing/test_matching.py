"""Structural comparison on synthetic graphs: what counts as equal, what each difference looks like, speed."""

from __future__ import annotations

import re
import time

import numpy as np
import pytest

from scopefusion.ir.graph import Graph
from scopefusion.ir.types import IRContext
from scopefusion.testing import assert_graphs_equal, graph_diff, matching
from tests.testing.ir_graphs import F32, Op, Spec, build, index_of, renamed, replace, transformer


@pytest.fixture(scope="module")
def spec() -> Spec:
    return transformer(100)


@pytest.fixture(scope="module")
def base(spec) -> Graph:
    return build(spec)


def test_a_few_thousand_nodes_in_another_order_with_other_names_are_equal_and_fast(spec, base):
    other = build(spec, order_seed=7, names=renamed, context=IRContext())
    assert len(base.nodes) > 3000 and [n.name for n in other.nodes] != [n.name for n in base.nodes]
    start = time.perf_counter()
    diff = graph_diff(base, other)
    elapsed = time.perf_counter() - start
    assert diff.equal, diff.format()
    assert diff.matched == len(base.nodes)
    assert elapsed < 2.0, f"{elapsed:.2f} s for {len(base.nodes)} nodes"
    assert_graphs_equal(other, base)


def test_check_names_reports_the_renamed_node_nearest_an_output(spec, base):
    other = build(spec, names=lambda i, op: "renamed_output" if i == spec.outputs[0][0] else op.name or f"n{i}_{op.op.split('.')[-1]}")
    assert graph_diff(base, other).equal
    diff = graph_diff(base, other, check_names=True)
    assert [u.node.name for u in diff.unmatched_a] == [base.outputs[0].producer.name]
    assert diff.unmatched_b[0].node.name == "renamed_output" and "name" in diff.unmatched_b[0].reason
    assert diff.unmatched_a[0].node.path == "return[0]"


def test_a_changed_op_deep_inside_is_the_one_difference_with_its_path(spec, base):
    gelu = index_of(spec, "t.Gelu", 50)
    other = build(spec, order_seed=3, names=renamed, edit=replace([gelu], op="t.Relu", attrs={}))
    diff = graph_diff(base, other)
    assert (len(diff.unmatched_a), len(diff.unmatched_b), diff.attrs, diff.types) == (1, 1, (), ())
    first_a, first_b = diff.unmatched_a[0], diff.unmatched_b[0]
    assert (first_a.node.op, first_b.node.op) == ("t.Gelu", "t.Relu")
    assert first_a.reason == "op t.Gelu vs t.Relu" and first_a.counterpart == first_b.node
    assert first_a.node.path.startswith("return[0] <- %") and "steps" in first_a.node.path
    assert first_b.node.path.startswith("return[0] <- %other/")
    message = diff.format()
    assert message.splitlines()[0] == "graphs differ: 1 unmatched node in a, 1 in b (3600 nodes matched)"
    assert "first unmatched node in a: %n" in message and "first unmatched node in b: %other/" in message
    assert len(message) < 2000  # the difference, not two dumps


def test_constants_compare_by_value_within_tolerance(spec, base):
    weight = [i for i, op in enumerate(spec.ops) if op.op == "ge.Const" and op.shape == (8, 8)][40]
    value = spec.ops[weight].attrs["value"].copy()
    value.flat[3] += 1e-3
    other = build(spec, order_seed=1, edit=replace([weight], attrs={"value": value}))
    diff = graph_diff(base, other)
    assert len(diff.attrs) == 1 and not diff.unmatched_a and not diff.unmatched_b
    d = diff.attrs[0]
    assert (d.name, d.a.name, d.b.name) == ("value", f"n{weight}_Const", f"n{weight}_Const")
    assert d.a_value.startswith("tensor<f32[8,8]>:") and d.a_value != d.b_value
    assert "1 of 64 elements differ" in d.detail and "[0, 3]" in d.detail
    assert graph_diff(base, other, atol=2e-3).equal
    assert graph_diff(base, other, rtol=1e-6).equal is False
    assert graph_diff(base, other, check_attrs=False).equal
    message = diff.format()
    assert "attribute differences (1), a | b:" in message and "value" in message


def test_attributes_are_shown_side_by_side(spec, base):
    gelus = [index_of(spec, "t.Gelu", i) for i in (10, 20)]
    other = build(spec, edit=replace(gelus, attrs={"approximate": "none"}))
    diff = graph_diff(base, other)
    assert [(d.name, d.a_value, d.b_value) for d in diff.attrs] == [("approximate", '"tanh"', '"none"')] * 2
    rows = [line for line in diff.format().splitlines() if re.fullmatch(r'\s+%n\d+_Gelu\s+approximate\s+"tanh"\s+"none"', line)]
    assert len(rows) == 2
    missing = build(spec, edit=lambda i, op: Op(**{**op.__dict__, "attrs": {}}) if i == gelus[0] else op)
    (d,) = graph_diff(base, missing).attrs
    assert (d.a_value, d.b_value, d.detail) == ('"tanh"', None, "only a has it")
    assert graph_diff(base, missing, ignore_attrs=["approximate"]).equal


def test_port_order_matters(spec, base):
    concat = index_of(spec, "t.Concat", 0)
    split = spec.ops[concat].inputs[0][0]
    other = build(spec, edit=replace([concat], inputs=[(split, 0), (split, 1)]))
    diff = graph_diff(base, other)
    assert [u.node.op for u in diff.unmatched_a] == ["t.Concat"]
    assert diff.unmatched_a[0].reason == "input 0 reads output 1 of its producer in a, output 0 in b"
    matmul = index_of(spec, "t.MatMul", 0)
    swapped = build(spec, edit=replace([matmul], inputs=list(reversed(spec.ops[matmul].inputs))))
    assert not graph_diff(base, swapped).equal


def test_types_differ(spec, base):
    rsqrt = index_of(spec, "t.Rsqrt", 5)
    other = build(spec, edit=replace([rsqrt], shape=(2, 9)))
    diff = graph_diff(base, other)
    assert [(t.a.op, t.output, t.a_type, t.b_type) for t in diff.types] == [("t.Rsqrt", 0, "f32[2,8]", "f32[2,9]")]
    assert "type differences (1), a | b:" in diff.format()


def test_an_inserted_node_and_a_duplicated_producer_are_unmatched(spec, base):
    extra = Spec([*spec.ops], list(spec.outputs))
    last = spec.outputs[0][0]
    extra.outputs = [(extra.add("t.Identity", last), 0)]
    diff = graph_diff(base, build(extra))
    # The output pair disagrees and is left unpaired; everything is paired forward from the input, so
    # b's Identity is the one node left over.
    assert not diff.unmatched_a and [u.node.op for u in diff.unmatched_b] == ["t.Identity"]
    assert diff.unmatched_b[0].reason == "op t.Add vs t.Identity" and diff.unmatched_b[0].node.path == "return[0]"
    assert diff.unmatched_b[0].counterpart.name == base.outputs[0].producer.name and diff.matched == len(base.nodes)

    # b computes a mean twice where a shares one node.
    shared, twice = Spec([], []), Spec([], [])
    for g, means in ((shared, 1), (twice, 2)):
        x = g.add("ge.Data", attrs={"index": 0}, name="x")
        m = [g.add("t.ReduceMean", x, attrs={"axes": (-1,)}) for _ in range(means)]
        g.outputs = [(g.add("t.Add", g.add("t.Sub", x, m[0]), g.add("t.Mul", x, m[-1])), 0)]
    diff = graph_diff(build(shared), build(twice))
    assert not diff.unmatched_a and [u.node.op for u in diff.unmatched_b] == ["t.ReduceMean"]
    assert diff.unmatched_b[0].reason == "it is read where a reads %n1_ReduceMean, but %n1_ReduceMean already corresponds to b's %n1_ReduceMean"
    assert diff.unmatched_b[0].node.path == "return[0] <- %n5_Add.in[1] <- %n4_Mul.in[1]"


def test_control_inputs_compare_as_a_set_of_paired_nodes(spec, base):
    softmax = index_of(spec, "t.Softmax", 3)
    other_mean = index_of(spec, "t.ReduceMean", 7)  # the variance's mean: another node of the same op
    diff = graph_diff(base, build(spec, edit=replace([softmax], controls=[other_mean])))
    assert [u.node.op for u in diff.unmatched_a] == ["t.Softmax"]
    assert diff.unmatched_a[0].reason == "control inputs do not correspond"
    none = graph_diff(base, build(spec, edit=replace([softmax], controls=[])))
    assert none.unmatched_a[0].reason == "1 control inputs vs 0"


def test_unreached_and_symmetric_parts_are_paired_through_vf2(monkeypatch):
    ctx = IRContext()

    def graph(order: list[int], names: str) -> Graph:
        g = Graph("g", ctx)
        x = g.add_input(f"{names}x", ctx.tensor(F32, (2,)))
        made = {}
        for i in order:  # three identical dead chains x -> A -> B, and one dead chain with other attrs
            a = g.add_node("t.A", [x], name=f"{names}a{i}", allow_unknown=True, output_types=[ctx.tensor(F32, (2,))])
            made[i] = g.add_node("t.B", [a.outputs[0], a.outputs[0]], name=f"{names}b{i}", attrs={"k": 1 if i < 3 else 2},
                                 allow_unknown=True, output_types=[ctx.tensor(F32, (2,))])  # fmt: skip
        for i in order:  # identical unused constants
            g.add_const(np.ones(3, np.float32), f"{names}c{i}", unique=False)
        g.set_outputs([x])
        return g

    calls = []
    real = matching._BoundedMatcher.is_isomorphic

    def counting(self):
        calls.append(len(self.G1))
        return real(self)

    monkeypatch.setattr(matching._BoundedMatcher, "is_isomorphic", counting)
    a, b = graph([0, 1, 2, 3], ""), graph([3, 2, 0, 1], "q_")
    diff = graph_diff(a, b)
    assert diff.equal, diff.format()
    assert calls, "the symmetric leftovers are matched by VF2"
    monkeypatch.setattr(matching, "_VF2_BUDGET", 2)  # a search that would run too long is cut short, saying so
    cut = graph_diff(a, b)
    assert not cut.equal and "too many interchangeable nodes are left to pair them within 2 VF2 steps" in cut.format()
    monkeypatch.undo()
    c = graph([0, 1, 2, 3], "")
    c.node("b3").attrs.set_attr("k", 1)
    diff = graph_diff(a, c)
    # The one differing node is paired with its counterpart and reported as an attribute difference.
    assert not diff.unmatched_a and not diff.unmatched_b
    assert [(d.a.name, d.b.name, d.name, d.a_value, d.b_value) for d in diff.attrs] == [("b3", "b3", "k", "2", "1")]
    assert diff.attrs[0].a.path == ""  # no graph output reads it
    assert "(no graph output reads it)" in str(diff.attrs[0].a)
    c.add_node("t.A", [c.inputs[0]], name="extra", allow_unknown=True)
    diff = graph_diff(a, c)
    assert [u.node.name for u in diff.unmatched_b] == ["extra"] and "(no graph output reads it)" in diff.format()


def test_interface_differences(spec, base):
    two = Spec(spec.ops, [*spec.outputs, spec.outputs[0]])
    diff = graph_diff(base, build(two))
    assert diff.interface == ("a has 1 graph outputs, b has 2",)
    assert diff.summary().startswith("graphs differ: 1 interface difference")
    other = build(spec)
    other.attrs.set_attr("note", "x")
    assert graph_diff(base, other).interface == ("graph attribute 'note' is only in b",)
    assert graph_diff(base, other, check_attrs=False).equal
    other.name = "renamed"
    assert graph_diff(base, other, check_names=True, ignore_attrs=["note"]).interface == ("graph names differ: 'main' vs 'renamed'",)


def test_bodies_and_graph_attributes_compare_structurally():
    def with_body(body_attr: float, names: str) -> Graph:
        ctx = IRContext()
        body = Graph(f"{names}body", ctx)
        x = body.add_input(f"{names}bx", ctx.tensor(F32, (2,)))
        body.set_outputs([body.add_node("t.Scale", [x], name=f"{names}s", attrs={"f": body_attr}, allow_unknown=True,
                                        output_types=[ctx.tensor(F32, (2,))]).outputs[0]])  # fmt: skip
        g = Graph("main", ctx)
        x = g.add_input(f"{names}x", ctx.tensor(F32, (2,)))
        loop = g.add_node("t.Loop", [x], name=f"{names}loop", subgraphs={"body": body}, allow_unknown=True,
                          output_types=[ctx.tensor(F32, (2,))], attrs={"then": body.clone()})  # fmt: skip
        g.set_outputs(loop.outputs)
        return g

    assert graph_diff(with_body(0.5, ""), with_body(0.5, "z_")).equal
    diff = graph_diff(with_body(0.5, ""), with_body(0.25, "z_"))
    bodies = [d for d in diff.attrs if d.name == "f"]
    assert len(bodies) == 1 and bodies[0].a.path.startswith("return[0] %loop{body}: return[0]")
    then = [d for d in diff.attrs if d.name == "then"]
    assert len(then) == 1 and "differ" in then[0].detail
    assert graph_diff(with_body(0.5, ""), with_body(0.5 + 1e-9, "z_"), rtol=1e-6).equal


def test_assert_graphs_equal_raises_with_the_difference(spec, base):
    other = build(spec, edit=replace([index_of(spec, "t.Gelu", 0)], op="t.Relu", attrs={}))
    with pytest.raises(AssertionError, match=r"(?s)first unmatched node in a: .*t\.Gelu.*why: op t\.Gelu vs t\.Relu"):
        assert_graphs_equal(base, other)
    with pytest.raises(TypeError, match="a must be an IR Graph or a converted Model"):
        graph_diff("not a graph", base)

