"""The scope layer on real graphs: a frozen tf.compat.v1 BERT layer, a Keras model and an ONNX model,
each read with ``scopefusion.parser.load``."""

from __future__ import annotations

import dataclasses

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from scopefusion.parser import SourceGraph, load
from scopefusion.scope import (
    FUSION_DISABLE_INDEX as OFF,
)
from scopefusion.scope import (
    DataflowPattern,
    NodeOpTypeFeature,
    PassManager,
    PassRegistry,
    ScopeBasePass,
    ScopeFeature,
    ScopeGraph,
    ScopePattern,
    ScopesResult,
    dataflow_rule,
)


def tf_batchnorm_layer_norm(op, x, gamma, beta):
    """tf.nn.moments + tf.nn.batch_normalization, as BERT's layer norm builds it."""
    mean = op.Mean(x, op.const("axes", value=-1), _attrs={"keep_dims": True}, _name="mean")
    variance = op.Mean(op.SquaredDifference(x, op.StopGradient(mean)), op.const("axes2", value=-1))
    rsqrt = op.Rsqrt(op.AddV2(variance, op.const("epsilon", shape=())), _name="rsqrt")
    scale = op.Mul(rsqrt, gamma)
    return op.AddV2(op.Mul(x, scale), op.Sub(beta, op.Mul(mean, scale)), _name="out")


TF_LAYER_NORM = DataflowPattern(tf_batchnorm_layer_norm)


class LayerNormPass(ScopeBasePass):
    """CANN's ScopeLayerNormPass, confirmed by dataflow: -> LayerNorm(x, gamma, beta)."""

    name = "ScopeLayerNormPass"
    general = True

    def define_patterns(self):
        batchnorm = ScopePattern(
            "batchnorm",
            NodeOpTypeFeature("Sub", 1),
            NodeOpTypeFeature("AddV2", 2),
            NodeOpTypeFeature("Rsqrt", 1),
            NodeOpTypeFeature("Mul", 3),
            ScopeFeature("", 0, suffix="batchnorm"),
        )
        moments = ScopePattern(
            "moments",
            NodeOpTypeFeature("Mean", 2),
            NodeOpTypeFeature("SquaredDifference", 1),
            NodeOpTypeFeature("Squeeze", -1),
            ScopeFeature("", 0, suffix="moments"),
        )
        return [batchnorm, moments]

    def last_match_scopes_and_ops(self, graph, matches):
        pairs: dict[str, dict] = {}
        for scope in matches:
            pairs.setdefault(scope.parent.name, {})[scope.sub_type] = scope
        return [ScopesResult(scopes=[p["batchnorm"], p["moments"]]) for p in pairs.values() if len(p) == 2]

    def generate_fusion_result(self, scopes, result, graph):
        norm = scopes[0].parent
        result.name = norm.name.rstrip("/")
        found = TF_LAYER_NORM.find(graph, within=norm)
        if len(found) != 1:
            result.invalidate(f"{norm.name} does not compute a layer norm: {found.near_miss}")
            return
        result.type = "LayerNorm"
        result.attrs["epsilon"] = float(found[0].value("epsilon"))
        result.insert_inputs("batchnorm/mul_1", [0, OFF])
        result.insert_inputs("batchnorm/mul", [OFF, 1])
        result.insert_inputs("batchnorm/sub", [2, OFF])
        result.insert_outputs("batchnorm/add_1", [0])
        result.insert_outputs("moments/mean", [1])
        result.insert_outputs("batchnorm/Rsqrt", [2])


def run(graph, *rules):
    registry = PassRegistry()
    for rule in rules:
        registry.register(rule, general=True)
    manager = PassManager(registry)
    return manager, manager.run(graph)


def test_bert_scope_tree(bert_source):
    graph = ScopeGraph.build(bert_source)
    tree = graph.tree
    norm = tree["bert/encoder/layer_0/attention/output/LayerNorm/"]
    assert [c.last_name for c in norm.children] == ["moments", "batchnorm"]
    batchnorm = tree["bert/encoder/layer_0/attention/output/LayerNorm/batchnorm/"]
    assert (batchnorm.op_counts["Mul"], batchnorm.op_counts["Rsqrt"], batchnorm.op_counts["Sub"]) == (3, 1, 1)
    assert sum(tree.root.op_counts.values()) == len(bert_source.nodes) == len(tree.root.all_nodes)
    assert all(len(s.all_nodes) == sum(s.op_counts.values()) for s in tree)
    assert tree["bert/encoder/layer_0/"].last_name == "layer_0"


def test_bert_layer_norms_fuse_with_ports_and_parameters(bert_source):
    graph = ScopeGraph.build(bert_source)
    manager, report = run(graph, LayerNormPass)
    prefix = "bert/encoder/layer_0/"
    assert report["ScopeLayerNormPass"].results_accepted == [prefix + "attention/output/LayerNorm", prefix + "output/LayerNorm"]
    first = report.plan.get(prefix + "attention/output/LayerNorm")
    ln = prefix + "attention/output/LayerNorm/"
    assert first.attrs == {"epsilon": pytest.approx(1e-12)}
    assert [(i.port, i.producer) for i in first.inputs] == [
        (0, prefix + "attention/output/add"),
        (1, ln + "batchnorm/mul/ReadVariableOp"),
        (2, ln + "batchnorm/ReadVariableOp"),
    ]
    # The weight reads sit inside batchnorm/ but only feed fused inputs: they stay.
    assert first.kept == (ln + "batchnorm/mul/ReadVariableOp", ln + "batchnorm/ReadVariableOp")
    assert len(first.claimed) == 14 and all(n.startswith(ln) for n in first.claimed)
    assert first.outputs[0].consumers == ((prefix + "intermediate/dense/Reshape", 0), (prefix + "output/add", 1))
    second = report.plan.get(prefix + "output/LayerNorm")
    assert second.outputs[0].consumers == (("sequence_output", 0),)
    assert manager.explain(ln + "batchnorm/")[0].reason == f"fused by '{prefix}attention/output/LayerNorm'"


def test_a_scope_named_layer_norm_that_is_not_one_is_refused(bert_source):
    ln = "bert/encoder/layer_0/attention/output/LayerNorm/"
    # Same names and op counts, but mul_1 scales the mean instead of x: CANN would fuse it by name.
    nodes = [
        dataclasses.replace(n, inputs=[(ln + "moments/mean", 0), n.inputs[1]]) if n.name == ln + "batchnorm/mul_1" else n
        for n in bert_source.nodes
    ]
    graph = ScopeGraph.build(SourceGraph(nodes, outputs=bert_source.outputs))
    manager, report = run(graph, LayerNormPass)
    (refusal,) = report.refused
    assert refusal.name == ln.rstrip("/")
    assert refusal.reason.startswith(f"{ln} does not compute a layer norm: at {ln}batchnorm/add_1")
    assert "is bert/encoder/layer_0/attention/output/add:0 in one place and" in refusal.reason
    assert manager.explain(ln + "batchnorm/")[0].reason.startswith("matched, but the result was refused:")


def keras_layer_norm(op, x, gamma, beta):
    """Keras 3 LayerNormalization as traced by tf.function."""
    mean = op.Mean(x, op.const("axes"), _name="mean")
    variance = op.Mean(op.SquaredDifference(x, op.StopGradient(mean)), op.const("axes2"))
    inv = op.Mul(op.Rsqrt(op.AddV2(variance, op.const("epsilon"))), gamma)
    return op.AddV2(op.Mul(x, inv), op.AddV2(op.Mul(op.Neg(mean), inv), beta), _name="out")


def layer_norm_rule():
    @dataflow_rule(DataflowPattern(keras_layer_norm), name="KerasLayerNorm", type="LayerNorm", general=True)
    def rule(match, result, graph):
        result.attrs["epsilon"] = float(match.value("epsilon"))

    return rule


def test_keras_layer_norm_by_dataflow(keras_source):
    graph = ScopeGraph.build(keras_source)
    assert [c.last_name for c in graph.scope("classifier_1/").children] == ["hidden", "norm", "head"]  # CANN trims '_1'
    _, report = run(graph, layer_norm_rule())
    (accepted,) = report.accepted
    assert accepted.name == "classifier_1/norm_1/add_2" and accepted.attrs["epsilon"] == pytest.approx(1e-3)
    assert [i.producer for i in accepted.inputs] == [
        "classifier_1/hidden_1/Relu", "classifier_1/norm_1/Reshape", "classifier_1/norm_1/Reshape_1"]
    assert accepted.outputs[0].consumers == (("classifier_1/head_1/MatMul", 0),)
    assert len(accepted.claimed) == 15 and all(n.startswith("classifier_1/norm_1/") for n in accepted.claimed)


def test_dataflow_rule_on_a_graph_whose_names_carry_no_scopes(keras_source):
    rename = {n.name: f"node_{i}" for i, n in enumerate(keras_source.nodes)}
    nodes = [
        dataclasses.replace(
            n,
            name=rename[n.name],
            inputs=[(rename[p], i) for p, i in n.inputs],
            control_inputs=[rename[p] for p in n.control_inputs],
        )
        for n in keras_source.nodes
    ]
    graph = ScopeGraph.build(SourceGraph(nodes))
    assert len(graph.tree) == 1  # the root only
    _, report = run(graph, layer_norm_rule())
    (accepted,) = report.accepted
    assert len(accepted.claimed) == 15 and accepted.type == "LayerNorm"  # 12 ops and 3 constants


# ---------------------------------------------------------------------- ONNX
def _onnx_encoder() -> onnx.ModelProto:
    """Two decomposed layer norms under torch-style names (/encoder/layers.N/norm/...)."""
    nodes, inits = [], []
    x = "input"
    for layer in range(2):
        p = f"/encoder/layers.{layer}/norm/"
        inits += [
            numpy_helper.from_array(np.array(2.0, np.float32), p + "Constant_output_0"),
            numpy_helper.from_array(np.array(1e-5, np.float32), p + "Constant_1_output_0"),
            numpy_helper.from_array(np.ones(8, np.float32), f"encoder.layers.{layer}.norm.weight"),
            numpy_helper.from_array(np.zeros(8, np.float32), f"encoder.layers.{layer}.norm.bias"),
        ]
        nodes += [
            helper.make_node("ReduceMean", [x], [p + "mean"], name=p + "ReduceMean", axes=[-1]),
            helper.make_node("Sub", [x, p + "mean"], [p + "sub"], name=p + "Sub"),
            helper.make_node("Pow", [p + "sub", p + "Constant_output_0"], [p + "pow"], name=p + "Pow"),
            helper.make_node("ReduceMean", [p + "pow"], [p + "var"], name=p + "ReduceMean_1", axes=[-1]),
            helper.make_node("Add", [p + "var", p + "Constant_1_output_0"], [p + "add"], name=p + "Add"),
            helper.make_node("Sqrt", [p + "add"], [p + "sqrt"], name=p + "Sqrt"),
            helper.make_node("Div", [p + "sub", p + "sqrt"], [p + "div"], name=p + "Div"),
            helper.make_node("Mul", [p + "div", f"encoder.layers.{layer}.norm.weight"], [p + "mul"], name=p + "Mul"),
            helper.make_node("Add", [p + "mul", f"encoder.layers.{layer}.norm.bias"], [p + "out"], name=p + "Add_1"),
        ]
        x = p + "out"
    graph = helper.make_graph(
        nodes, "encoder",
        [helper.make_tensor_value_info("input", TensorProto.FLOAT, [2, 8])],
        [helper.make_tensor_value_info(x, TensorProto.FLOAT, [2, 8])],
        initializer=inits,
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def onnx_layer_norm(op, x, weight, bias):
    centered = op.Sub(x, op.ReduceMean(x, _attrs={"axes": (-1,)}, _name="mean"))
    variance = op.ReduceMean(op.Pow(centered, 2.0), _attrs={"axes": (-1,)})
    normed = op.Div(centered, op.Sqrt(op.Add(variance, op.const("epsilon"))))
    return op.Add(op.Mul(normed, weight), bias, _name="out")


@pytest.fixture(scope="module")
def onnx_source(tmp_path_factory) -> SourceGraph:
    path = tmp_path_factory.mktemp("onnx") / "encoder.onnx"
    onnx.save(_onnx_encoder(), path)
    return load(path)


def test_onnx_names_build_the_same_kind_of_tree(onnx_source):
    graph = ScopeGraph.build(onnx_source)
    names = [s.name for s in graph.tree.all_scopes()]
    assert names[:4] == ["root", "encoder/", "encoder/layers.0/", "encoder/layers.0/norm/"]
    norm = graph.scope("/encoder/layers.1/norm/")
    assert norm.last_name == "norm" and norm.op_counts["ReduceMean"] == 2
    assert graph.scope("encoder/").op_counts["Sqrt"] == 2


def test_onnx_layer_norm_by_scope_features_and_dataflow(onnx_source):
    graph = ScopeGraph.build(onnx_source)
    within = ScopePattern("norm", NodeOpTypeFeature("ReduceMean", 2), NodeOpTypeFeature("Sqrt", 1), ScopeFeature("", 0, suffix="norm"))

    @dataflow_rule(DataflowPattern(onnx_layer_norm), name="OnnxLayerNorm", type="LayerNormalization", within=within)
    def rule(match, result, graph):
        result.name = match["out"].name.rsplit("/", 1)[0]
        result.attrs["epsilon"] = float(match.value("epsilon"))

    manager, report = run(graph, rule)
    assert report["OnnxLayerNorm"].scopes_matched == ["encoder/layers.0/norm/", "encoder/layers.1/norm/"]
    first, second = report.accepted
    assert first.name == "/encoder/layers.0/norm" and first.attrs["epsilon"] == pytest.approx(1e-5)
    assert [i.producer for i in first.inputs] == ["input", "encoder.layers.0.norm.weight", "encoder.layers.0.norm.bias"]
    assert second.inputs[0].producer == "/encoder/layers.0/norm/Add_1"
    assert report.plan.resolve_tensor("/encoder/layers.0/norm/Add_1", 0) == ("/encoder/layers.0/norm", 0)
    assert manager.explain("encoder/layers.0/")[0].reason.startswith(
        "fused by '/encoder/layers.0/norm' (inside encoder/layers.0/; the scope itself: no match: set 0 batch 0 "
        "pattern 'norm': ScopeFeature('', 0, suffix='norm'): last name is 'layers.0'"
    )
