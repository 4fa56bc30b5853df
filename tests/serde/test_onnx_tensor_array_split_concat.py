"""TF1 ``TensorArray.split`` / ``.concat`` (``TensorArraySplitV3`` / ``TensorArrayConcatV3``) exported to ONNX
against TensorFlow at opsets 17 and 23: outside loops, an array split before a ``while_loop`` that reads it,
and an array a loop writes then concatenated. The one tensor an array becomes holds equal-sized elements, so
a split into unequal or unknown lengths, or a concatenation of elements of different sizes, fails naming the
op and what to do."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable

import numpy as np
import pytest

from scopefusion import SerdeError
from scopefusion.convert import convert
from scopefusion.serde.onnx_export import model_to_onnx

from ._onnx_runs import assert_runs_like_source, checked_export


def _v1_graph(build: Callable[[Any, Any], None], shape: list[int | None]) -> bytes:
    """A TF1 graph (v1 control flow) over ``x`` of ``shape``; ``build(tf, x)`` adds the rest."""
    import tensorflow as tf

    tf.compat.v1.disable_control_flow_v2()
    try:
        graph = tf.Graph()
        with graph.as_default():
            build(tf, tf.compat.v1.placeholder(tf.float32, shape, name="x"))
        return graph.as_graph_def().SerializeToString()
    finally:
        tf.compat.v1.enable_control_flow_v2()


def _outside_loops(tf: Any, x: Any) -> None:
    """``x`` [6, 3] split in three, read, gathered, sized and concatenated; two pieces of it written to a
    second array, concatenated."""
    array = tf.TensorArray(tf.float32, size=3, clear_after_read=False).split(x, [2, 2, 2])
    tf.identity(array.read(1), name="read")
    tf.identity(array.gather([2, 0]), name="gathered")
    tf.identity(array.size(), name="size")
    tf.identity(array.concat(), name="joined")
    written = tf.TensorArray(tf.float32, size=2).write(0, x[:2]).write(1, x[3:5] * 3.0)
    value, lengths = tf.raw_ops.TensorArrayConcatV3(handle=written.handle, flow_in=written.flow, dtype=tf.float32)
    tf.identity(value, name="written_joined")
    tf.identity(lengths, name="lengths")


def _split_then_loop(tf: Any, x: Any) -> None:
    """``x`` [?, 3] twice over split in halves (lengths ``Fill([2], batch)``), each read in a loop:
    ``h = tanh(h * 0.5 + piece)``."""
    both = tf.concat([x, x * -2.0], 0)
    halves = tf.TensorArray(tf.float32, size=2, element_shape=tf.TensorShape([None, 3])).split(both, tf.fill([2], tf.shape(x)[0]))
    _, h = tf.compat.v1.while_loop(lambda i, h: i < 2, lambda i, h: (i + 1, tf.tanh(h * 0.5 + halves.read(i))),
                                   [tf.constant(0), tf.zeros_like(x)])
    tf.identity(h, name="h")


def _loop_then_concat(tf: Any, x: Any) -> None:
    """A loop of 3 steps writes ``tanh(x * i)`` ([?, 3]) then the array is concatenated ([3 · batch, 3])."""
    array = tf.TensorArray(tf.float32, size=3)
    _, array = tf.compat.v1.while_loop(lambda i, a: i < 3,
                                       lambda i, a: (i + 1, a.write(i, tf.tanh(x * tf.cast(i + 1, tf.float32)))),
                                       [tf.constant(0), array])
    value, lengths = tf.raw_ops.TensorArrayConcatV3(handle=array.handle, flow_in=array.flow, dtype=tf.float32,
                                                    element_shape_except0=[3])
    tf.identity(value, name="joined")
    tf.identity(lengths, name="lengths")


def _unequal_split(tf: Any, x: Any) -> None:
    tf.identity(tf.TensorArray(tf.float32, size=3).split(x, [1, 2, 3]).concat(), name="joined")


def _unknown_split(tf: Any, x: Any) -> None:
    lengths = tf.stack([tf.shape(x)[0] - 2, tf.constant(2)])  # [batch - 2, 2]: not known before running
    tf.identity(tf.TensorArray(tf.float32, size=2).split(x, lengths).read(1), name="last")


def _ragged_concat(tf: Any, x: Any) -> None:
    written = tf.TensorArray(tf.float32, size=2, infer_shape=False).write(0, x[:1]).write(1, x[1:3])
    tf.identity(written.concat(), name="joined")


# name -> (builder, x's shape, batches to run)
MODELS = {"outside_loops": (_outside_loops, [6, 3], (6,)), "split_then_loop": (_split_then_loop, [None, 3], (1, 4)),
          "loop_then_concat": (_loop_then_concat, [None, 3], (1, 4)), "unequal_split": (_unequal_split, [6, 3], ()),
          "unknown_split": (_unknown_split, [None, 3], ()), "ragged_concat": (_ragged_concat, [6, 3], ())}


@pytest.fixture(scope="module")
def frozen(model_store) -> Callable[[str], Path]:
    def get(name: str) -> Path:
        build, shape, _ = MODELS[name]
        return model_store.file(f"tensor_array_split_concat_{name}.pb", lambda: _v1_graph(build, shape))

    return get


@pytest.mark.parametrize("opset", [17, 23])
@pytest.mark.parametrize("name", ["outside_loops", "split_then_loop", "loop_then_concat"])
def test_split_and_concat_compute_what_tensorflow_computes(name, opset, frozen):
    model = convert(frozen(name))
    assert {"TensorArraySplitV3", "TensorArrayConcatV3"} & {n.op_type for n in model.graph.nodes}
    proto = checked_export(model, opset)
    feed_sets = [{"x": np.random.default_rng(batch).standard_normal((batch, 3)).astype(np.float32)}
                 for batch in MODELS[name][2]]
    assert_runs_like_source(model, proto, feed_sets, f"{name} at opset {opset}", rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("name,reason", [
    ("unequal_split", "its lengths [1, 2, 3] differ, and the lowering holds an array as one tensor of equal-sized "
                      "elements; split into equal lengths, or concatenate the pieces yourself"),
    ("unknown_split", "its lengths are not known at export time (nor made by a Fill), and the lowering holds an "
                      "array as one tensor of equal-sized elements; split with constant, equal lengths"),
])
def test_a_split_into_unequal_or_unknown_lengths_fails_saying_what_to_do(name, reason, frozen):
    with pytest.raises(SerdeError) as info:
        model_to_onnx(convert(frozen(name)))
    message = str(info.value)
    assert "tf.TensorArraySplitV3 x1" in message and reason in message


def test_a_concatenation_of_elements_of_different_sizes_fails_saying_what_to_do(frozen):
    with pytest.raises(SerdeError) as info:
        model_to_onnx(convert(frozen("ragged_concat")))
    message = str(info.value)
    assert "tf.TensorArrayConcatV3 x1" in message
    assert ("its elements differ in their leading dim (1, 2), and the lowering holds an array as one tensor of "
            "equal-sized elements; write elements of one size, or concatenate them yourself") in message
