"""TF1 loops whose values are taken for graph outputs, exported to ONNX against TensorFlow at opsets 17 and 23.

A frozen TF1 graph's default outputs are the tensors nothing reads: a loop's Exit nobody reads is one (beside
the loop's other results), a value its body computes and drops is none (it runs once per iteration and
TensorFlow cannot fetch it), in nested loops too. A SavedModel signature may name any tensor: a loop variable's
Enter gives its initial value (TF runs it once); a body value fails the export naming it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable

import numpy as np
import pytest

from scopefusion import SerdeError
from scopefusion.convert import convert
from scopefusion.serde.onnx_export import model_to_onnx

from ._onnx_runs import assert_runs_like_source, checked_export


def _v1_graph(build: Callable[[Any, Any], Any]) -> Any:
    """A TF1 graph (v1 control flow) over ``x`` [?, 3]: ``build(tf, x)`` adds the rest; returns the graph."""
    import tensorflow as tf

    tf.compat.v1.disable_control_flow_v2()
    try:
        graph = tf.Graph()
        with graph.as_default():
            build(tf, tf.compat.v1.placeholder(tf.float32, [None, 3], name="x"))
        return graph
    finally:
        tf.compat.v1.enable_control_flow_v2()


def _count_and_product(tf: Any, x: Any, body_extra: Callable[[Any], Any] | None = None) -> tuple[Any, Any]:
    n = tf.cast(tf.math.floormod(tf.reduce_sum(tf.abs(x)), 3.0), tf.int32) + 1

    def body(i: Any, p: Any) -> tuple[Any, Any]:
        if body_extra is not None:
            body_extra(p)
        return i + 1, p * 0.9 + x

    return tf.compat.v1.while_loop(lambda i, p: i < n, body, [tf.constant(0), tf.zeros_like(x)], name="loop")


def _exit_read_by_nothing(tf: Any, x: Any) -> None:
    _, p = _count_and_product(tf, x)  # the count's Exit is read by nothing: an output of its own
    tf.identity(p, name="p")
    tf.identity(p * 2.0, name="twice")


def _value_dropped_in_body(tf: Any, x: Any) -> None:
    i, p = _count_and_product(tf, x, lambda p: tf.tanh(p, name="dropped"))
    tf.identity(p, name="p")
    tf.identity(i, name="count")


def _values_dropped_in_nested_bodies(tf: Any, x: Any) -> None:
    def outer(i: Any, h: Any) -> tuple[Any, Any]:
        def inner(j: Any, h: Any) -> tuple[Any, Any]:
            tf.identity(h * 3.0, name="inner_dropped")
            return j + 1, tf.tanh(h * 0.8 + x)

        _, h = tf.compat.v1.while_loop(lambda j, h: j <= i, inner, [0, h])
        tf.identity(h, name="outer_dropped")
        return i + 1, h

    _, h = tf.compat.v1.while_loop(lambda i, h: i < 3, outer, [tf.constant(0), tf.zeros_like(x)])
    tf.identity(h, name="h")


FROZEN = {"exit_read_by_nothing": _exit_read_by_nothing, "value_dropped_in_body": _value_dropped_in_body,
          "values_dropped_in_nested_bodies": _values_dropped_in_nested_bodies}
OUTPUTS = {"exit_read_by_nothing": ["loop/Exit", "p", "twice"], "value_dropped_in_body": ["count", "p"],
           "values_dropped_in_nested_bodies": ["h", "while/Exit"]}


@pytest.fixture(scope="module")
def frozen(model_store) -> Callable[[str], Path]:
    def get(name: str) -> Path:
        return model_store.file(f"tf1_loop_outputs_{name}.pb",
                                lambda: _v1_graph(FROZEN[name]).as_graph_def().SerializeToString())

    return get


def _saved_model(path: Path, fetch: str) -> Path:
    """A TF1 SavedModel of :func:`_count_and_product` with a dropped ``tanh`` in the body; the signature's
    outputs are ``p`` and ``fetched``, the tensor named ``fetch`` (``"enter"``: the product's Enter;
    ``"body"``: the dropped ``tanh``)."""
    import tensorflow as tf

    graph = _v1_graph(lambda tf, x: tf.identity(_count_and_product(tf, x, lambda p: tf.tanh(p, name="dropped"))[1],
                                                name="p"))
    enter = next(op for op in graph.get_operations() if op.type == "Enter" and op.name.startswith("loop/Enter_1"))
    fetched = enter.outputs[0] if fetch == "enter" else graph.get_tensor_by_name("loop/dropped:0")
    with tf.compat.v1.Session(graph=graph) as sess:
        tf.compat.v1.saved_model.simple_save(sess, str(path), inputs={"x": graph.get_tensor_by_name("x:0")},
                                             outputs={"p": graph.get_tensor_by_name("p:0"), "fetched": fetched})
    return path


def _runs_like_tensorflow(model: Any, opset: int, where: str) -> None:
    proto = checked_export(model, opset)
    assert any(n.op_type == "Loop" for n in proto.graph.node), where
    rng = np.random.default_rng(7)
    feed_sets = [{"x": rng.standard_normal((batch, 3)).astype(np.float32)} for batch in (1, 4)]
    assert_runs_like_source(model, proto, feed_sets, where, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("opset", [17, 23])
@pytest.mark.parametrize("name", sorted(FROZEN))
def test_a_tf1_loop_exports_with_the_outputs_tensorflow_fetches(name, opset, frozen):
    model = convert(frozen(name))
    assert sorted(o.name for o in model.source.outputs) == OUTPUTS[name]
    _runs_like_tensorflow(model, opset, f"{name} at opset {opset}")


@pytest.mark.parametrize("opset", [17, 23])
def test_a_loop_variables_enter_taken_for_an_output_gives_its_initial_value(opset, model_store):
    model = convert(model_store.written("tf1_loop_outputs_sm_enter", lambda p: _saved_model(p, "enter")))
    _runs_like_tensorflow(model, opset, f"the Enter fetched at opset {opset}")


def test_a_body_value_taken_for_an_output_fails_naming_it(model_store):
    model = convert(model_store.written("tf1_loop_outputs_sm_body", lambda p: _saved_model(p, "body")))
    with pytest.raises(SerdeError) as info:
        model_to_onnx(model)
    message = str(info.value)
    assert "is computed inside TF1 loop" in message and "'loop/dropped'" in message
    assert "take it off the model's outputs or return it from the loop as a loop variable" in message
