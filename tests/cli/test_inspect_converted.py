"""``scopefusion inspect`` on converted models (.ge, GE text, an ONNX file scopefusion wrote): the IR one op
per line; and the GE text form writing each graph once."""

from __future__ import annotations

import onnx
import pytest
from typer.testing import CliRunner

from scopefusion.cli import app
from scopefusion.convert import convert
from scopefusion.serde.ge import model_from_bytes, model_from_text
from scopefusion.testing import graph_diff

BERT_PROFILES = [{name: [b, 8] for name in ("input_ids", "input_mask", "token_type_ids")} for b in (2, 4)]


def inspect(*args: str) -> list[str]:
    result = CliRunner().invoke(app, ["inspect", *map(str, args)])
    assert result.exit_code == 0, result.output
    return result.output.splitlines()


@pytest.fixture(scope="module")
def bert(tf_bert_pb, tmp_path_factory):
    """The zoo's TF1 BERT converted with two profiles, written as .ge, GE text and ONNX."""
    root = tmp_path_factory.mktemp("inspect_converted")
    model = convert(tf_bert_pb, input_shapes=BERT_PROFILES)
    files = {fmt: root / name for fmt, name in (("ge", "bert.ge"), ("ge-text", "bert.ge.txt"), ("onnx", "bert.onnx"))}
    for fmt, path in files.items():
        model.save(path, format=fmt)
    return model, files


@pytest.mark.parametrize("fmt", ["ge", "ge-text"])
def test_inspect_prints_a_ge_model_one_op_per_line(bert, fmt):
    model, files = bert
    lines = inspect(files[fmt])
    ops = [line for line in lines if line.startswith("%")]
    assert len(ops) == len(model.graph.nodes)
    assert lines[0].startswith(f"{files[fmt]}: {fmt} model, {len(model.graph.nodes)} nodes in the main graph")
    assert "profile p0: input_ids:2,8; input_mask:2,8; token_type_ids:2,8" in lines
    by_name = {line.split(" = ", 1)[0][1:]: line for line in ops}
    for node in model.graph.nodes:
        line = by_name[node.name]
        if node.op.startswith("fused."):
            rule = node.attrs.get("_fusion_rule")
            assert f" = {node.op}(" in line and f"fused by {rule} {{" in line, line
    attention = next(line for line in ops if "fused.MultiHeadAttention" in line)
    assert "query_weight=weight f32[32,32]" in attention and "num_heads=2" in attention
    assert ": f32[?,32]  p0 f32[16,32]  p1 f32[32,32]" in attention
    weights = [line for line in ops if " = weight " in line]
    assert "%bert/embeddings/word_embeddings = weight f32[100,32]" in weights
    assert not any("\\" in line for line in lines)  # no escaped bytes anywhere
    assert lines[-1] == f"{len(ops)} of {len(ops)} ops shown"


def test_inspect_prints_an_exported_onnx_model_with_its_fused_ops(bert):
    model, files = bert
    onnx_model = onnx.load(str(files["onnx"]))
    lines = inspect(files["onnx"])
    ops = [line for line in lines if line.startswith("%")]
    graph = onnx_model.graph
    initializers = {t.name for t in graph.initializer}
    expected = len(graph.node) + len(graph.initializer) + sum(1 for v in graph.input if v.name not in initializers)
    assert len(ops) == expected
    fusions = model.fusion_counts()
    for rule, count in fusions.items():
        assert sum(1 for line in ops if line.endswith(f"fused by {rule}") or f"fused by {rule} {{" in line) == count, rule
    assert any(" = onnx.LayerNormalization(" in line and "fused by LayerNormFusion" in line for line in ops)
    parts = [line for line in ops if "(part of bert/encoder/layer_0/attention/self)" in line]
    assert any(" = onnx.Attention(" in line for line in parts)
    assert f"({sum(fusions.values())} fused," in lines[0]


def test_inspect_filters_by_op_type_or_name(bert):
    model, files = bert
    layer_norms = [line for line in inspect(files["ge"], "--filter", "fused.LayerNorm") if line.startswith("%")]
    assert len(layer_norms) == model.fusion_counts()["LayerNormFusion"]
    assert all(" = fused.LayerNorm(" in line for line in layer_norms)
    gelu = [line for line in inspect(files["ge"], "--filter", "*gelu") if line.startswith("%")]
    assert gelu and all("fused.Gelu" in line for line in gelu)
    named = [line for line in inspect(files["ge-text"], "--filter", "layer_1/output/dense") if line.startswith("%")]
    assert named and all(line.startswith("%bert/encoder/layer_1/output/dense") for line in named)


def test_inspect_depth_limits_the_bodies_shown(onnx_control_flow, tmp_path):
    model = convert(onnx_control_flow)
    path = tmp_path / "cf.ge"
    model.save(path)
    deep = [line for line in inspect(path, "--depth", "5") if line.startswith(" ") and "%" in line]
    assert deep, "the control-flow model has ops in bodies"
    shallow = inspect(path, "--depth", "0")
    assert not [line for line in shallow if line.startswith(" ") and "%" in line]
    assert "ops in bodies deeper than --depth 0" in shallow[-1]


def test_ge_text_writes_each_graph_once(bert, tf_bert_pb):
    model, files = bert
    text = files["ge-text"].read_text()
    assert text.count("\ngraph {") + text.startswith("graph {") == 3  # main and two profiles that differ from it
    single = convert(tf_bert_pb)  # one profile: the model's own shapes, the main graph again
    text = single.to_bytes("ge-text").decode()
    assert text.count("graph {") == 1
    contents = model_from_text(text)
    assert [g.name for g in contents.graphs] == ["main"]
    assert contents.main.attrs.get("_profile_index") == 0 and contents.main.attrs.get("_profile_inputs")
    binary = model_from_bytes(single.to_bytes("ge"))
    assert len(binary.graphs) == 2  # the binary model keeps the profile's graph for a runtime
    assert graph_diff(contents.main, binary.main, ignore_attrs=["_arena_bytes", "_profile_index", "_profile_inputs"]).equal
    assert graph_diff(contents.main, binary.graphs[1], ignore_attrs=["_profile_index"]).equal
