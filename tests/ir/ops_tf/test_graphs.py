"""Ops that only run inside a graph — TF1 frames, functional control flow, calls, tensor lists and arrays,
assertions — inferred by the driver over small graphs that use each of them, and compared with TF."""

from __future__ import annotations

from typing import Any

import pytest
import tf_driver
from test_kernels import GRAPH_ONLY
from tf_op_models import FrozenModel

from scopefusion.dialects.tf import definitions
from scopefusion.ir.opdef import OpRegistry

REGISTRY = OpRegistry(definitions())


def _tf1_frames() -> FrozenModel:
    """TF1 control flow: a while loop over TensorArrays, a cond, Assert and Print."""
    import tensorflow as tf

    tf.compat.v1.disable_control_flow_v2()
    try:
        graph = tf.Graph()
        with graph.as_default():
            x = tf.compat.v1.placeholder(tf.float32, [None, 4], name="x")
            n = tf.shape(x)[0]
            source = tf.TensorArray(tf.float32, size=n, element_shape=[4]).unstack(x)
            out = tf.TensorArray(tf.float32, size=n, dynamic_size=True, element_shape=[4])

            def body(i: Any, acc: Any) -> tuple[Any, Any]:
                return i + 1, acc.write(i, source.read(i) * 2.0)

            _, out = tf.while_loop(lambda i, acc: i < n, body, [0, out])
            stacked = out.stack()
            joined = out.concat()
            size = out.size()
            parts = tf.TensorArray(tf.float32, size=2, infer_shape=False).split(tf.reshape(x, [-1]), [4, tf.size(x) - 4])
            first = parts.read(0)
            with tf.control_dependencies([out.close()]):
                checked = tf.compat.v1.Print(stacked, [size], message="size")
            picked = tf.cond(size > 2, lambda: joined * 2.0, lambda: joined - 1.0)
            guard = tf.debugging.Assert(tf.reduce_all(picked > -100.0), [picked])
            with tf.control_dependencies([guard]):
                tf.identity(checked, name="y")
                tf.identity(first, name="z")
    finally:
        tf.compat.v1.enable_control_flow_v2()
    return FrozenModel("tf1_frames", graph.as_graph_def(), {"x": (3, 4)})


def _tf2_functional() -> FrozenModel:
    """TF2 functional control flow and tensor lists, traced (not frozen): While, If, Case, calls."""
    import tensorflow as tf

    @tf.function
    def helper(a: Any) -> Any:
        return tf.nn.relu(a) + 1.0

    @tf.function
    def noisy(a: Any) -> Any:  # stateful: called by StatefulPartitionedCall
        return a + tf.random.uniform([4])

    def fn(x: Any, k: Any) -> Any:
        ta = tf.TensorArray(tf.float32, size=3, element_shape=[4])

        def body(i: Any, acc: Any) -> tuple[Any, Any]:
            return i + 1, acc.write(i, x[i] * tf.cast(i, tf.float32))

        def noisy_body(i: Any, acc: Any) -> tuple[Any, Any]:  # stateful: a While, not a StatelessWhile
            return i + 1, acc + tf.random.uniform([4])

        _, ta = tf.while_loop(lambda i, acc: i < 3, body, [0, ta])
        _, noise = tf.while_loop(lambda i, acc: i < k, noisy_body, [0, x[0]])
        stacked = ta.stack()
        gathered = ta.gather([0, 2])
        unstacked = tf.TensorArray(tf.float32, size=3).unstack(stacked).read(1)
        branch = tf.cond(k > 0, lambda: stacked * 2.0, lambda: stacked + 1.0)
        drawn = tf.cond(k > 1, lambda: tf.random.uniform([2]), lambda: tf.zeros([2]))
        case = tf.switch_case(k, [lambda: gathered, lambda: gathered * 3.0])
        def checked() -> Any:  # stateful: a Case, not a StatelessCase
            with tf.control_dependencies([tf.debugging.Assert(k >= 0, [k])]):
                return tf.ones([3])

        noisy_case = tf.switch_case(k, [checked, lambda: tf.zeros([3])])
        called = helper(unstacked) + noisy(noise)
        empty = tf.raw_ops.EmptyTensorList(element_shape=tf.constant([4]), max_num_elements=5, element_dtype=tf.float32)
        pushed = tf.raw_ops.TensorListPushBack(input_handle=empty, tensor=called)
        length = tf.raw_ops.TensorListLength(input_handle=pushed)
        shape = tf.raw_ops.TensorListElementShape(input_handle=pushed, shape_type=tf.int32)
        _, popped = tf.raw_ops.TensorListPopBack(input_handle=pushed, element_shape=tf.constant([4]), element_dtype=tf.float32)
        tf.raw_ops.ControlTrigger()
        debug = tf.raw_ops.DebugIdentity(input=popped)
        return branch, case, debug, length, shape, drawn, noisy_case

    spec = [tf.TensorSpec([3, 4], tf.float32, name="x"), tf.TensorSpec([], tf.int32, name="k")]
    graph = tf.function(fn).get_concrete_function(*spec).graph
    return FrozenModel("tf2_functional", graph.as_graph_def(), {"x": (3, 4), "k": ()})


@pytest.fixture(scope="module")
def reports() -> dict[str, tf_driver.ModelReport]:
    return {m.name: tf_driver.run_model(m, REGISTRY) for m in (_tf1_frames(), _tf2_functional())}


def test_graph_only_ops_are_all_exercised(reports):
    seen = {r.op_type for rep in reports.values() for r in rep.records()}
    assert GRAPH_ONLY - seen == set()


def test_graph_only_ops_are_as_precise_as_tensorflow(reports):
    """Where TF knows more, it is for a fact the IR does not carry (handle data, a traced call's shapes)."""
    records = [(rep.name, r) for rep in reports.values() for r in rep.records()]
    bad = [(m, r.op_type, r.status, r.detail) for m, r in records if r.status not in ("equal", "more") and not r.cause]
    assert bad == []
    explained = {(r.op_type, r.cause) for _, r in records if r.status == "less"}
    assert explained == {
        ("TensorArrayReadV3", tf_driver.HANDLE_DATA), ("Mul", tf_driver.HANDLE_DATA),
        ("TensorListElementShape", tf_driver.HANDLE_DATA), ("Identity", tf_driver.HANDLE_DATA),
        ("PartitionedCall", tf_driver.CALL), ("StatefulPartitionedCall", tf_driver.CALL),
        ("AddV2", tf_driver.CALL),
    }  # fmt: skip


def test_frame_ops_pass_shapes_through_and_merge_joins_them(reports):
    facts = reports["tf1_frames"].top.facts
    graph = reports["tf1_frames"].graph
    enters = [op for op in graph.get_operations() if op.type == "Enter"]
    assert enters and all(facts[op.outputs[0].name].shape == facts[op.inputs[0].name].shape for op in enters)
    merges = [op for op in graph.get_operations() if op.type == "Merge"]
    for op in merges:  # loop merges see their back edge as unknown; cond merges join two known branches
        loop = any(i.op.type == "NextIteration" for i in op.inputs)
        assert (facts[op.outputs[0].name].shape is None) == loop or not loop
        assert facts[op.outputs[1].name].shape == ()


def test_tensor_array_and_list_handles_are_typed(reports):
    from scopefusion import dtypes as D

    facts = reports["tf1_frames"].top.facts
    array = next(op for op in reports["tf1_frames"].graph.get_operations() if op.type == "TensorArrayV3")
    assert facts[array.outputs[0].name].dtype is D.RESOURCE and facts[array.outputs[0].name].shape == (2,)
    assert facts[array.outputs[1].name].dtype is D.FLOAT32 and facts[array.outputs[1].name].shape == ()
    top = reports["tf2_functional"].top
    reserve = next(op for op in reports["tf2_functional"].graph.get_operations() if op.type == "TensorListReserve")
    assert top.facts[reserve.outputs[0].name] == tf_driver.Fact((), D.VARIANT)


def test_function_bodies_are_inferred(reports):
    bodies = reports["tf2_functional"].functions
    body_types = {r.op_type for run in bodies.values() for r in run.records}
    assert {"TensorListSetItem", "StridedSlice", "Relu"} <= body_types
    assert len(bodies) >= 5  # while cond and body, two if branches, two case branches, the called helper
