"""Scope layer cost on synthetic BERT-like graphs of 10k, 100k and 1M nodes.

Run: ``.venv/bin/python bench/bench_scope.py`` (``--sizes 10000,100000`` to choose, ``--json``;
``--repeat N`` builds and times each size N times and reports the run with the smallest build + run
time, for every size alike, so that a busy machine's noise weighs less on the ratio).

Each graph repeats a 75-node transformer layer whose node names nest 5 to 8 scopes deep
(``model/encoder/layer_7/attention/output/LayerNorm/moments/mean/reduction_indices``). For each size
the bench times, separately: the SourceGraph constructor (built with ``sort=False`` from nodes already
in topological order, so it only builds the edge maps), ``ScopeGraph.build`` (tree, op counts,
op-type index), and a PassManager run of ten passes: scope-feature passes (two-set LayerNorm, a
multi-batch attention detector, an attribute feature, a sub-scope mask, and two that match nothing),
a function-form GELU rule, and three dataflow rules (one finds nothing). Every accepted fusion goes
through full validation (ports, escapes, claims, cycles). The figure compared across sizes is
build + run; the 1M figure should be at most 12x the 100k one.
"""

from __future__ import annotations

import argparse
import json
import time

import numpy as np

from scopefusion.parser.source_graph import GraphOutput, SourceGraph, SourceNode
from scopefusion.scope import (
    FUSION_DISABLE_INDEX,
    DataflowPattern,
    NodeAttrFeature,
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

LAYER_NODES = 75
_W = np.zeros((1,), np.float32)


def _layer(i: int, x: str, out: list[SourceNode]) -> str:
    p = f"model/encoder/layer_{i}/"

    def n(name: str, op: str, *inputs: str, value: np.ndarray | None = None, **attrs: object) -> str:
        full = p + name
        out.append(SourceNode(full, op, inputs=[(t, 0) for t in inputs], attrs=dict(attrs), value=value))
        return full

    def dense(scope: str, t: str) -> str:
        k = n(f"{scope}/kernel", "Const", value=_W)
        mm = n(f"{scope}/MatMul", "MatMul", t, k, transpose_a=False, transpose_b=False)
        b = n(f"{scope}/bias", "Const", value=_W)
        return n(f"{scope}/BiasAdd", "BiasAdd", mm, b)

    def layer_norm(scope: str, t: str) -> str:
        g = n(f"{scope}/gamma", "Const", value=_W)
        be = n(f"{scope}/beta", "Const", value=_W)
        r1 = n(f"{scope}/moments/mean/reduction_indices", "Const", value=_W)
        mean = n(f"{scope}/moments/mean", "Mean", t, r1, keep_dims=True)
        sg = n(f"{scope}/moments/StopGradient", "StopGradient", mean)
        sq = n(f"{scope}/moments/SquaredDifference", "SquaredDifference", t, sg)
        r2 = n(f"{scope}/moments/variance/reduction_indices", "Const", value=_W)
        var = n(f"{scope}/moments/variance", "Mean", sq, r2, keep_dims=True)
        eps = n(f"{scope}/batchnorm/add/y", "Const", value=_W)
        add = n(f"{scope}/batchnorm/add", "AddV2", var, eps)
        rs = n(f"{scope}/batchnorm/Rsqrt", "Rsqrt", add)
        gr = n(f"{scope}/batchnorm/mul/ReadVariableOp", "Identity", g)
        mul = n(f"{scope}/batchnorm/mul", "Mul", rs, gr)
        mul1 = n(f"{scope}/batchnorm/mul_1", "Mul", t, mul)
        mul2 = n(f"{scope}/batchnorm/mul_2", "Mul", mean, mul)
        br = n(f"{scope}/batchnorm/ReadVariableOp", "Identity", be)
        sub = n(f"{scope}/batchnorm/sub", "Sub", br, mul2)
        return n(f"{scope}/batchnorm/add_1", "AddV2", mul1, sub)

    q = dense("attention/self/query", x)
    k = dense("attention/self/key", x)
    v = dense("attention/self/value", x)
    scores = n("attention/self/scores", "MatMul", q, k, transpose_a=False, transpose_b=True)
    scale = n("attention/self/mul/y", "Const", value=_W)
    scaled = n("attention/self/mul", "Mul", scores, scale)
    probs = n("attention/self/Softmax", "Softmax", scaled)
    ctx = n("attention/self/context", "MatMul", probs, v, transpose_a=False, transpose_b=False)
    attn = dense("attention/output/dense", ctx)
    attn = n("attention/output/add", "AddV2", attn, x)
    attn = layer_norm("attention/output/LayerNorm", attn)
    inter = dense("intermediate/dense", attn)
    y1 = n("intermediate/gelu/truediv/y", "Const", value=_W)
    div = n("intermediate/gelu/truediv", "RealDiv", inter, y1)
    erf = n("intermediate/gelu/Erf", "Erf", div)
    one = n("intermediate/gelu/add/y", "Const", value=_W)
    add = n("intermediate/gelu/add", "AddV2", erf, one)
    mul = n("intermediate/gelu/mul", "Mul", inter, add)
    half = n("intermediate/gelu/mul/y", "Const", value=_W)
    gelu = n("intermediate/gelu/mul_1", "Mul", mul, half)
    o = dense("output/dense", gelu)
    o = n("output/add", "AddV2", o, attn)
    return layer_norm("output/LayerNorm", o)


def synthetic_nodes(size: int) -> list[SourceNode]:
    nodes = [SourceNode("input", "Placeholder")]
    x = "input"
    i = 0
    while len(nodes) + LAYER_NODES <= size:
        x = _layer(i, x, nodes)
        i += 1
    nodes.append(SourceNode("output", "Identity", inputs=[(x, 0)]))
    return nodes


# ---------------------------------------------------------------------- the ten passes
class LayerNormPass(ScopeBasePass):
    name = "LayerNorm"
    general = True

    def define_patterns(self):
        bn = ScopePattern(
            "batchnorm",
            NodeOpTypeFeature("Sub", 1),
            NodeOpTypeFeature("AddV2", 2),
            NodeOpTypeFeature("Rsqrt", 1),
            NodeOpTypeFeature("Mul", 3),
            ScopeFeature("", 0, suffix="batchnorm"),
        )
        mo = ScopePattern(
            "moments",
            NodeOpTypeFeature("Mean", 2),
            NodeOpTypeFeature("SquaredDifference", 1),
            NodeOpTypeFeature("Squeeze", -1),
            ScopeFeature("", 0, suffix="moments"),
        )
        return [bn, mo]

    def last_match_scopes_and_ops(self, graph, matches):
        pairs: dict[str, dict[str, object]] = {}
        for scope in matches:
            pairs.setdefault(scope.parent.name, {})[scope.sub_type] = scope
        return [ScopesResult(scopes=[d["batchnorm"], d["moments"]]) for d in pairs.values() if len(d) == 2]

    def generate_fusion_result(self, scopes, result, graph):
        result.name = scopes[0].parent.name.rstrip("/")
        result.type = "LayerNorm"
        result.insert_inputs("batchnorm/mul_1", [0, FUSION_DISABLE_INDEX])
        result.insert_inputs("batchnorm/mul", [FUSION_DISABLE_INDEX, 1])
        result.insert_inputs("batchnorm/sub", [2, FUSION_DISABLE_INDEX])
        result.insert_outputs("batchnorm/add_1", [0])


class AttentionDetector(ScopeBasePass):
    """Two batches: tag projection scopes, then find scopes holding three of them; fuses nothing."""

    name = "AttentionDetector"
    general = True

    def define_patterns(self):
        proj = ScopePattern("proj", NodeOpTypeFeature("MatMul", 1), NodeOpTypeFeature("BiasAdd", 1))
        attn = ScopePattern("self_attention", NodeOpTypeFeature("Softmax", 1), ScopeFeature("proj", 3))
        return [[[proj], [attn]]]

    def last_match_scopes_and_ops(self, graph, matches):
        return []


class TransposedScores(ScopeBasePass):
    name = "TransposedScores"
    general = True

    def define_patterns(self):
        return ScopePattern("scores", NodeAttrFeature("MatMul", "transpose_b", True))

    def last_match_scopes_and_ops(self, graph, matches):
        return []


class NormBlock(ScopeBasePass):
    name = "NormBlock"
    general = True

    def define_patterns(self):
        return ScopePattern("norm_block", NodeOpTypeFeature("Rsqrt", 1), ScopeFeature("", 0, sub_scope_mask="batchnorm"))

    def last_match_scopes_and_ops(self, graph, matches):
        return []


class LstmCell(ScopeBasePass):
    name = "BasicLSTMCell"
    general = True

    def define_patterns(self):
        return ScopePattern(
            "lstm",
            NodeOpTypeFeature("Sigmoid", 0, 3),
            NodeOpTypeFeature("Mul", 0, 3),
            NodeOpTypeFeature("Tanh", 0, 2),
            NodeAttrFeature("Split", "num_split", 4),
        )


class WhileLoop(ScopeBasePass):
    name = "DynamicRNN"
    general = True

    def define_patterns(self):
        return ScopePattern("rnn", NodeOpTypeFeature("TensorArrayV3", 0, 1), ScopeFeature("", 0, suffix="while"))


@scope_rule(
    ScopePattern("gelu", NodeOpTypeFeature("Erf", 1), NodeOpTypeFeature("Mul", 2), ScopeFeature("", 0, suffix="gelu")),
    name="Gelu",
    type="Gelu",
    general=True,
)
def gelu_rule(scope, result, graph):
    result.insert_inputs("truediv", [0, FUSION_DISABLE_INDEX])
    result.insert_outputs("mul_1", [0])


def _fc(op, x):
    return op.BiasAdd(op.MatMul(x, op.const("w"), _attrs={"transpose_b": False}), op.const("b"))


def _scaled_softmax(op, q, k):
    return op.Softmax(op.Mul(op.MatMul(q, k, _attrs={"transpose_b": True}), op.const("scale")))


def _conv(op, x):
    return op.Relu(op.Conv2D(x, op.const("w")))


@dataflow_rule(DataflowPattern(_fc), name="FullyConnected", type="FullyConnected", general=True)
def fc_rule(match, result, graph):
    return None


@dataflow_rule(DataflowPattern(_scaled_softmax), name="ScaledSoftmax", type="ScaledSoftmax", general=True)
def softmax_rule(match, result, graph):
    return None


@dataflow_rule(DataflowPattern(_conv), name="ConvRelu", type="ConvRelu", general=True)
def conv_rule(match, result, graph):
    return None


def make_registry() -> PassRegistry:
    registry = PassRegistry()
    for rule in (LayerNormPass, AttentionDetector, TransposedScores, NormBlock, LstmCell, WhileLoop,
                 gelu_rule, fc_rule, softmax_rule, conv_rule):
        registry.register(rule)
    return registry


def bench(size: int) -> dict[str, object]:
    nodes = synthetic_nodes(size)
    t0 = time.perf_counter()
    source = SourceGraph(nodes, outputs=[GraphOutput("output", "output")], sort=False, name=f"synthetic_{size}")
    t1 = time.perf_counter()
    c1 = time.process_time()
    graph = ScopeGraph.build(source)
    t2 = time.perf_counter()
    report = PassManager(make_registry(), strict=True).run(graph)
    t3 = time.perf_counter()
    c3 = time.process_time()
    layers = (len(nodes) - 2) // LAYER_NODES
    accepted = len(report.plan.accepted)
    expected = layers * (2 + 1 + 6 + 1)
    if accepted != expected or report.plan.refused:
        raise SystemExit(f"bench sanity check failed: {accepted} accepted (expected {expected}), {len(report.plan.refused)} refused")
    return {
        "nodes": len(nodes),
        "scopes": len(graph.tree),
        "accepted_fusions": accepted,
        "source_graph_constructor_s": round(t1 - t0, 3),
        "scope_graph_build_s": round(t2 - t1, 3),
        "passes_run_s": round(t3 - t2, 3),
        "build_and_run_s": round(t3 - t1, 3),
        "build_and_run_cpu_s": round(c3 - c1, 3),
        "per_pass_s": {r.name: round(r.seconds, 3) for r in report.passes},
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default="10000,100000,1000000")
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--repeat", type=int, default=1, help="runs per size; the fastest build + run is reported")
    args = parser.parse_args()
    results = [
        min((bench(int(s)) for _ in range(max(1, args.repeat))), key=lambda r: r["build_and_run_s"])
        for s in args.sizes.split(",")
    ]
    if args.json:
        print(json.dumps(results, indent=2))
        return
    for r in results:
        print(
            f"{r['nodes']:>9,} nodes {r['scopes']:>8,} scopes {r['accepted_fusions']:>7,} fusions: "
            f"SourceGraph() {r['source_graph_constructor_s']:7.2f} s | build {r['scope_graph_build_s']:6.2f} s + "
            f"10 passes {r['passes_run_s']:6.2f} s = {r['build_and_run_s']:6.2f} s (CPU {r['build_and_run_cpu_s']:.2f} s)"
        )
        print("    " + ", ".join(f"{k} {v:.2f}" for k, v in r["per_pass_s"].items()))
    for a, b in zip(results, results[1:]):
        print(
            f"ratio {b['nodes']:,} / {a['nodes']:,} nodes: {b['build_and_run_s'] / a['build_and_run_s']:.2f}x wall, "
            f"{b['build_and_run_cpu_s'] / a['build_and_run_cpu_s']:.2f}x CPU (build + run)"
        )


if __name__ == "__main__":
    main()
