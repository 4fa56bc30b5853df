"""Each sample case run three ways: TensorFlow eagerly, our reference kernel, and our inference over a
TF graph holding the op — with every input known, with non-value inputs of unknown dims or rank, and with
value-dependent inputs of unknown value. Inference must match the real output shapes when everything is
known, never know less than TF's own shape functions, never contradict them, and never fail for merely
unknown shapes; kernels must compute TF's values."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
import tf_driver
from tf_cases import CASES, Case

from scopefusion import dtypes as D
from scopefusion.dialects.tf import definitions
from scopefusion.ir.opdef import OpRegistry

REGISTRY = OpRegistry(definitions())
MODES = ("known", "unknown_dims", "unknown_rank", "unknown_values")


def _tf():
    import tensorflow as tf

    return tf


def _tf_attrs(case: Case) -> dict[str, Any]:
    """The case's attributes for TF, with TF's defaults for the others (the op-def library wants them all)."""
    from tensorflow.python.framework import op_def_registry

    tf = _tf()
    out = {}
    op_def = op_def_registry.get(case.op)
    inferred = {a for arg in op_def.input_arg for a in (arg.type_attr, arg.number_attr, arg.type_list_attr)}
    for attr in op_def.attr:
        if attr.HasField("default_value") and attr.name not in case.attrs and attr.name not in inferred:
            out[attr.name] = _default(attr.default_value)
    kinds = {a.name: a.type for a in op_def.attr}
    for name, value in case.attrs.items():
        if kinds[name] == "shape":
            value = tf.TensorShape([None if d < 0 else d for d in value])
        elif isinstance(value, D.DType):
            value = tf.as_dtype(value.numpy)
        elif isinstance(value, tuple):
            value = list(value)
        out[name] = value
    return out


def _default(value: Any) -> Any:
    tf = _tf()
    kind = value.WhichOneof("value")
    if kind == "list":
        lst = value.list
        for field in ("i", "f", "s", "b"):
            if getattr(lst, field):
                return list(getattr(lst, field))
        return [tf.as_dtype(t) for t in lst.type] if lst.type else []
    if kind == "type":
        return tf.as_dtype(value.type)
    if kind == "shape":
        return tf.TensorShape(value.shape)
    return getattr(value, kind)


def _inputs(case: Case, mode: str) -> dict[str, Any]:
    """The op's keyword inputs as graph tensors: constants, or placeholders hiding what ``mode`` hides."""
    tf = _tf()
    opdef = REGISTRY.get(f"tf.{case.op}")

    def make(value: Any, value_depend: bool) -> Any:
        value = np.asarray(value)
        if mode == "known" or (value_depend and mode != "unknown_values"):
            return tf.constant(value)
        if mode == "unknown_values":
            shape = value.shape if value_depend else value.shape
            return tf.compat.v1.placeholder(value.dtype, shape)
        shape = [None] * value.ndim if mode == "unknown_dims" else None
        return tf.compat.v1.placeholder(value.dtype, shape)

    kwargs = {}
    for spec, value in zip(opdef.inputs, case.inputs):
        if isinstance(value, list):
            kwargs[spec.name] = [make(v, spec.value_depend) for v in value]
        else:
            kwargs[spec.name] = make(value, spec.value_depend)
    return kwargs


def _graph_run(case: Case, mode: str) -> tuple[Any, tf_driver.GraphRun]:
    """A graph holding the op (built by TF's op-def library: TF's own argument and attribute names)."""
    from tensorflow.python.framework import op_def_library

    tf = _tf()
    graph = tf.Graph()
    with graph.as_default():
        _, _, op, _ = op_def_library._apply_op_helper(case.op, name=case.op, **_inputs(case, mode), **_tf_attrs(case))
    out = list(op.outputs)
    args = {}
    for op in graph.get_operations():
        if op.type == "Placeholder":
            t = op.outputs[0]
            args[t.name] = tf_driver.Fact(tf_driver._tf_shape(t), tf_driver.dtype_of(t.dtype))
    run = tf_driver.run_graph(graph, REGISTRY, args)
    return out, run


def _tf_values(case: Case, outputs: list[Any]) -> list[np.ndarray]:
    tf = _tf()
    config = tf.compat.v1.ConfigProto()
    config.graph_options.rewrite_options.disable_meta_optimizer = True  # run the op itself, not a folded copy
    with tf.compat.v1.Session(graph=outputs[0].graph, config=config) as session:
        return [np.asarray(v) for v in session.run(outputs)]


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_inference_is_as_precise_as_tensorflow(case: Case, mode: str):
    _, run = _graph_run(case, mode)
    (record,) = [r for r in run.records if r.op_type == case.op]
    assert record.status in ("equal", "more"), f"{record.status}: {record.detail}"


# Output shapes the input shapes do not fix: data-dependent counts, or a value that may be fed instead.
_DATA_DEPENDENT = {"Where", "Unique", "NonMaxSuppressionV2", "NonMaxSuppressionV3", "NonMaxSuppressionV5", "PlaceholderWithDefault"}
_OPAQUE = {("FusedBatchNormV3", 5)}  # a kernel workspace whose size is the kernel's business


@pytest.mark.parametrize("case", [c for c in CASES if c.run], ids=lambda c: c.id)
def test_shapes_and_kernels_match_tensorflow(case: Case):
    tensors, run = _graph_run(case, "known")
    expected = _tf_values(case, tensors)
    opdef = REGISTRY.get(f"tf.{case.op}")
    for i, (t, value) in enumerate(zip(tensors, expected)):
        fact = run.facts[t.name]
        assert fact.dtype is D.from_numpy(value.dtype), (i, fact.dtype, value.dtype)
        if (case.op, i) in _OPAQUE:
            assert fact.shape is None
        elif case.op in _DATA_DEPENDENT and fact.value is None:
            assert tf_driver.compare_shape(value.shape, fact.shape)[0] in ("equal", "more"), (i, fact.shape)
        else:
            assert fact.shape == value.shape, (i, fact.shape, value.shape)
    if opdef.reference is None:
        return
    flat = [np.asarray(x) for v in case.inputs for x in (v if isinstance(v, list) else [v])]
    attrs = opdef.check_attrs({k: _attr(opdef, k, v) for k, v in case.attrs.items() if k in opdef.attrs}, case.id)
    ours = opdef.reference(flat, {k: v.value for k, v in attrs.items()})
    assert len(ours) == len(expected)
    for got, want in zip(ours, expected):
        got = np.asarray(got)
        assert got.dtype == want.dtype and got.shape == want.shape, (got.dtype, got.shape, want.dtype, want.shape)
        if want.dtype.kind == "f":
            np.testing.assert_allclose(got, want, rtol=2e-5, atol=2e-6)
        else:
            np.testing.assert_array_equal(got, want)


def _attr(opdef, name: str, value: Any):
    from scopefusion.ir.attrs import AttrValue

    return AttrValue(opdef.attrs[name].type_id, value)


def test_cases_cover_every_definition_that_tensorflow_runs_alone():
    """Ops that need a frame, a function, a handle or a side effect are covered by test_graphs instead."""
    covered = {c.op for c in CASES}
    graph_only = {d.name for d in definitions()} - covered
    assert graph_only == GRAPH_ONLY, sorted(graph_only ^ GRAPH_ONLY)


GRAPH_ONLY = {
    "Enter", "Exit", "Switch", "Merge", "NextIteration", "LoopCond", "While", "StatelessWhile", "If", "StatelessIf",
    "Case", "StatelessCase", "PartitionedCall", "StatefulPartitionedCall", "Assert", "ControlTrigger", "NoOp", "Print",
    "DebugIdentity", "TensorListReserve", "TensorListFromTensor", "EmptyTensorList", "TensorListSetItem",
    "TensorListPushBack", "TensorListGetItem", "TensorListPopBack", "TensorListStack", "TensorListGather",
    "TensorListLength", "TensorListElementShape", "TensorArrayV3", "TensorArrayReadV3", "TensorArrayGatherV3",
    "TensorArrayConcatV3", "TensorArraySizeV3", "TensorArrayScatterV3", "TensorArrayWriteV3", "TensorArraySplitV3",
    "TensorArrayCloseV3",
}  # fmt: skip
