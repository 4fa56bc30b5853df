"""``inspect --explain`` for every builtin pass on the zoo's TF1 BERT and Keras transformer: where the
pass fused, or its nearest miss with the reason; never "the pass defines no pattern"."""

from __future__ import annotations

import fnmatch

import pytest
from typer.testing import CliRunner

from scopefusion.cli import app
from scopefusion.convert import fusion_setup
from scopefusion.fusion_rules import BUILTIN_RULES
from scopefusion.parser import load
from scopefusion.scope import PassManager, ScopeGraph

BUILTINS = [rule.pass_name for rule in BUILTIN_RULES]

# model fixture, its top scope, and (scope, pass, how the explanation starts; * for any count) on that model.
CASES = {
    "tf_bert_pb": ("bert/", [
        ("bert/encoder/layer_0/intermediate/", "GeluFusion", "fused by 'bert/encoder/layer_0/intermediate/dense/mul_3'"),
        ("bert/encoder/layer_0/intermediate/", "MultiHeadAttentionFusion",
         "no match: dataflow pattern attention core (Softmax between two matrix products): no Softmax node in "
         "bert/encoder/layer_0/intermediate/"),
        ("bert/encoder/layer_0/attention/", "MultiHeadAttentionFusion", "fused by 'bert/encoder/layer_0/attention/self'"),
        ("bert/encoder/layer_0/attention/", "GeluFusion",
         "no match: dataflow pattern GELU (in * forms): no Erf|Erfc|Tanh node in bert/encoder/layer_0/attention/"),
        ("bert/embeddings/LayerNorm/", "LayerNormFusion", "fused by 'bert/embeddings/LayerNorm'"),
        ("bert/embeddings/LayerNorm/", "InstanceNormFusion",
         "no match: dataflow pattern an instance norm (in * forms): 1 match(es) in bert/embeddings/LayerNorm/, none an "
         "instance norm: the dataflow at bert/embeddings/LayerNorm/batchnorm/add_1 is not an instance norm"),
    ]),
    "keras_transformer_pb": ("encoder_1/", [
        ("encoder_1/layer_0_1/", "GeluFusion", "fused by 'encoder_1/layer_0_1/intermediate_1/Gelu'"),
        ("encoder_1/layer_0_1/", "MultiHeadAttentionFusion", "fused by 'encoder_1/layer_0_1/attention_1'"),
        ("encoder_1/layer_0_1/", "SwishFusion", "no match: dataflow pattern Swish (in * forms): no Sigmoid node in encoder_1/layer_0_1/"),
    ]),
}


def explain(path, scope_name):
    graph = ScopeGraph.build(load(path))
    registry, _ = fusion_setup(entry_points=False)
    manager = PassManager(registry)
    run = manager.run(graph)
    return run, {e.pass_name: e for e in manager.explain(scope_name, graph)}


@pytest.mark.parametrize("fixture", sorted(CASES))
def test_explain_gives_every_builtin_its_fusion_or_nearest_miss(fixture, request):
    path = request.getfixturevalue(fixture)
    top, cases = CASES[fixture]
    run, by_pass = explain(path, top)
    assert list(by_pass) == BUILTINS
    fused_somewhere = {r.name for r in run.passes if r.results_accepted}
    assert {"LayerNormFusion", "MultiHeadAttentionFusion", "GeluFusion"} <= fused_somewhere
    for name, explanation in by_pass.items():
        assert "defines no pattern" not in explanation.reason, explanation
        if name in fused_somewhere:
            accepted = run[name].results_accepted
            assert explanation.matched and explanation.reason.startswith(f"fused by {accepted[0]!r}"), explanation
        else:
            assert not explanation.matched and explanation.reason.startswith("no match: "), explanation
            # The reason names what is missing in this scope: a feature, a seed op, or the dataflow's miss.
            assert top in explanation.reason, explanation
    for scope_name, pass_name, expected in cases:
        _, here = explain(path, scope_name)
        assert fnmatch.fnmatchcase(here[pass_name].reason, expected.replace("[", "[[]") + "*"), here[pass_name]


def test_inspect_explain_prints_a_row_per_builtin(tf_bert_pb):
    result = CliRunner().invoke(app, ["inspect", str(tf_bert_pb), "--depth", "0", "--explain",
                                      "bert/encoder/layer_0/intermediate/"], env={"COLUMNS": "400"})  # fmt: skip
    assert result.exit_code == 0, result.output
    rows = {line.split("│")[1].strip(): line for line in result.stdout.splitlines() if line.startswith("│") and "│" in line[1:]}
    table_rows = {name: rows[name] for name in BUILTINS if name in rows}
    assert list(table_rows) == BUILTINS
    assert "fused by 'bert/encoder/layer_0/intermediate/dense/mul_3'" in table_rows["GeluFusion"]
    assert "no Softmax node in bert/encoder/layer_0/intermediate/" in table_rows["MultiHeadAttentionFusion"]
