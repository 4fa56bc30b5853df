"""The ``tf`` definitions over whole models: every op type of each model's frozen graph (and of its function
bodies) has a definition, inference over the graph at static input shapes is at least as precise as
TensorFlow's own, and every value we fold equals TensorFlow's evaluation of that tensor.

Models are built once for this module (this file is one xdist unit). Figures per model are printed by
``test_report`` (run with ``-s`` to see them).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
import tf_driver
import tf_op_models

from scopefusion.dialects.tf import definitions
from scopefusion.ir.opdef import OpRegistry

MODELS = list(tf_op_models.BUILDERS)

# Where TF's shape inference knows more than ours, and why (see tf_driver's causes):
# a While's relaxed batch dim makes Keras' Tensordot reshape target partly unknown, which TF still reads
# element-wise; a TF1 TensorArray read takes its element shape from the array's handle.
EXPECTED_CAUSES: dict[str, set[tuple[str, str]]] = {
    "keras_lstm": {("Reshape", tf_driver.PARTIAL_VALUE)},
    "keras_gru": {("Reshape", tf_driver.PARTIAL_VALUE)},
    "tf1_dynamic_rnn": {("TensorArrayReadV3", tf_driver.HANDLE_DATA), ("ConcatV2", tf_driver.HANDLE_DATA)},
}


@pytest.fixture(scope="module")
def registry() -> OpRegistry:
    return OpRegistry(definitions())


@pytest.fixture(scope="module")
def reports(registry: OpRegistry) -> dict[str, tf_driver.ModelReport]:
    return {name: tf_driver.run_model(build(), registry) for name, build in tf_op_models.BUILDERS.items()}


@pytest.mark.parametrize("model", MODELS)
def test_every_op_type_has_a_definition(model: str, reports, registry):
    report = reports[model]
    missing = {t for t in report.op_types() if f"tf.{t}" not in registry}
    assert missing == set()
    assert not [r for r in report.records() if r.status == "uncovered"]


@pytest.mark.parametrize("model", MODELS)
def test_inference_never_fails_nor_contradicts_tensorflow(model: str, reports):
    bad = [(r.name, r.op_type, r.status, r.detail) for r in reports[model].records() if r.status in ("error", "conflict")]
    assert bad == []


@pytest.mark.parametrize("model", MODELS)
def test_inference_is_as_precise_as_tensorflow(model: str, reports):
    less = [r for r in reports[model].records() if r.status == "less"]
    unexplained = [(r.name, r.op_type, r.detail) for r in less if not r.cause]
    assert unexplained == []
    assert {(r.op_type, r.cause) for r in less} == EXPECTED_CAUSES.get(model, set())


def _frame_depths(graph: Any) -> dict[str, int]:
    """How deep in TF1 loop frames each op runs (Enter goes in, Exit comes out)."""
    depth: dict[str, int] = {}
    for op in tf_driver.topological_ops(graph):
        producers = [t.op for t in op.inputs] + list(op.control_inputs)
        d = max((depth.get(p.name, 0) for p in producers), default=0)
        depth[op.name] = d + (op.type == "Enter") - (op.type == "Exit")
    return depth


@pytest.mark.parametrize("model", MODELS)
def test_folded_values_equal_tensorflow_evaluation(model: str, reports):
    import tensorflow as tf

    report = reports[model]
    graph = report.graph
    depths = _frame_depths(graph)
    fetches = [n for n in report.top.folded if depths[graph.get_tensor_by_name(n).op.name] == 0]
    assert fetches, "every model folds some shape computation"
    feeds = {}
    for op in graph.get_operations():
        if op.type == "Placeholder":
            t = op.outputs[0]
            feeds[t] = np.zeros(t.shape.as_list(), t.dtype.as_numpy_dtype)
    with tf.compat.v1.Session(graph=graph) as session:
        values = session.run(fetches, feeds)
    for name, want in zip(fetches, values):
        got = report.top.facts[name].value
        assert got.dtype == want.dtype and got.shape == np.shape(want), name
        if got.dtype.kind == "f":
            np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5, err_msg=name)
        else:
            np.testing.assert_array_equal(got, want, err_msg=name)


def test_shape_chains_fold_to_static_reshapes(reports):
    """BERT's Shape → StridedSlice → Pack → Reshape chains become constants at a fixed input shape."""
    report = reports["tf1_bert"]
    reshapes = [op for op in report.graph.get_operations() if op.type == "Reshape"]
    assert len(reshapes) > 10
    for op in reshapes:
        assert report.top.facts[op.inputs[1].name].value is not None, op.name
        assert -1 not in report.top.facts[op.outputs[0].name].shape, op.name
    packs = [op for op in report.graph.get_operations() if op.type == "Pack"]
    assert packs and all(report.top.facts[op.outputs[0].name].value is not None for op in packs)


def test_data_dependent_outputs_are_dynamic(reports):
    report = reports["tf2_data_dependent"]
    facts = report.top.facts
    by_type = {}
    for op in report.graph.get_operations():
        by_type.setdefault(op.type, []).append(op)
    (nms,) = by_type["NonMaxSuppressionV3"]
    assert facts[nms.outputs[0].name].shape == (-1,)
    where = by_type["Where"]
    assert where and all(facts[op.outputs[0].name].shape[0] == -1 for op in where)
    picked = [op for op in by_type["GatherV2"] if op.inputs[1].op is nms]
    assert [facts[op.outputs[0].name].shape for op in picked] == [(-1, 4)]
    (top_k,) = by_type["TopKV2"]
    assert facts[top_k.outputs[0].name].shape == (3,)


def test_while_bodies_are_covered(reports):
    for model in ("keras_lstm", "keras_gru"):
        body_types = {r.op_type for run in reports[model].functions.values() for r in run.records}
        assert {"TensorListGetItem", "TensorListSetItem", "MatMul", "Sigmoid"} <= body_types


def test_report(reports, capsys):
    rows = []
    for name in MODELS:
        s = reports[name].summary()
        precise = s["equal"] + s["more"]
        rows.append(
            f"{name:20} types {s['types']:3} ({s['types']} defined)  ops {s['ops']:5}  "
            f"as precise as TF {precise:5} ({100 * precise / s['ops']:5.1f}%)  more {s['more']:3}  "
            f"less {s['less']:2}  folded {s['folded']:4}  bodies {len(reports[name].functions)}"
        )
        assert s["uncovered"] == 0
    with capsys.disabled():
        print("\n" + "\n".join(rows))
