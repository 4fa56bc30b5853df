"""Structural comparison on converted models: serde round trips, determinism, fused vs unfused, profiles."""

from __future__ import annotations

import pytest

from scopefusion.convert import convert, fusion_setup
from scopefusion.serde.ge import from_bytes, from_text, to_bytes, to_text
from scopefusion.testing import assert_graphs_equal, fusion_counts, graph_diff, op_counts

BERT_SHAPES = [{"input_ids": (2, 8), "input_mask": (2, 8), "token_type_ids": (2, 8)},
               {"input_ids": (4, 8), "input_mask": (4, 8), "token_type_ids": (4, 8)}]  # fmt: skip


@pytest.fixture(scope="module")
def bert(tf_bert_pb):
    return convert(tf_bert_pb, input_shapes=BERT_SHAPES)


def test_a_graph_equals_itself_read_back_from_ge_bytes_and_text(bert, onnx_attention):
    for graph in (bert.graph, convert(onnx_attention).graph):
        assert_graphs_equal(graph, from_bytes(to_bytes(graph)), check_names=True)
        assert_graphs_equal(from_text(to_text(graph)), graph, check_names=True)


def test_converting_twice_gives_equal_graphs(bert, tf_bert_pb):
    assert graph_diff(bert, convert(tf_bert_pb, input_shapes=BERT_SHAPES), check_names=True).equal


def test_fused_and_unfused_graphs_differ_at_the_fused_ops(bert, tf_bert_pb):
    every_pass = [entry.name for entry in fusion_setup()[0].passes()]
    plain = convert(tf_bert_pb, disable=every_pass)
    assert fusion_counts(plain) == {} and fusion_counts(bert) == bert.fusion_counts()
    diff = graph_diff(bert, plain)
    assert not diff.equal
    fused_ops = {u.node.op for u in diff.unmatched_a if u.counterpart is not None}
    assert fused_ops and all(op.startswith("fused.") for op in fused_ops)
    assert diff.unmatched_a[0].node.path.startswith("return[")
    # the same counts from the graph alone, as a file read back has them
    assert fusion_counts(from_bytes(to_bytes(bert.graph))) == bert.fusion_counts()


def test_op_counts_match_the_model_report(bert):
    assert op_counts(bert) == bert.op_counts() == op_counts(bert.graph)
    assert sum(op_counts(bert.graph, bodies=True).values()) >= len(bert.graph.nodes)


def test_two_profiles_differ_in_types_only(bert):
    p0, p1 = (p.graph for p in bert.profiles)
    diff = graph_diff(p0, p1)
    assert not diff.unmatched_a and not diff.unmatched_b and not diff.attrs
    assert not diff.interface
    assert [(d.a.name, d.a_type, d.b_type) for d in diff.types[:3]] == [
        (name, "i32[2,8]", "i32[4,8]") for name in ("input_ids", "input_mask", "token_type_ids")
    ]
    assert diff.types and all(d.a_type.split("[")[0] == d.b_type.split("[")[0] != d.a_type for d in diff.types)
    assert {d.a.name for d in diff.types} >= {v.producer.name for v in p0.outputs}
    assert graph_diff(p0, p1, check_attrs=False).types == diff.types
