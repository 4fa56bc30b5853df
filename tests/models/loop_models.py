"""Loop model builders for the ONNX loop tests: frozen GraphDef bytes, built from code.

* :func:`tf_function_tensor_array`: a ``tf.function`` whose ``tf.while_loop`` writes a ``tf.TensorArray`` of
  unknown element shape (TF2 control flow: ``While`` with TensorList ops), the loop count read from the input;
* :func:`tf_function_list_carried`: a ``tf.while_loop`` that reads its ``tf.TensorArray`` back and writes it
  backwards (the list is carried through the loop, not stacked as it is written);
* :func:`keras_custom_cell_rnn`: a Keras ``RNN`` layer over a cell of its own that no fusion rule knows;
* :func:`tf1_while_loop`: a ``tf.compat.v1.while_loop`` in TF1 control flow that is no RNN (a running
  product and sum, the count read from the input);
* :func:`tf1_nested_loops`: TF1 loops one inside the other, with a v1 ``tf.cond`` in the outer body;
* :func:`tf1_tensor_array_ops`: TF1 TensorArray ops outside any loop (scatter, write, read, gather, size, close);
* :func:`tf1_bare_switch`: a TF1 ``Switch`` whose output is read directly, no Merge joining it (no loop, no cond).
"""

from __future__ import annotations

from typing import Any

from tests.models.more_models import _freeze, _freeze_keras, _tf

__all__ = ["keras_custom_cell_rnn", "tf_function_list_carried", "tf1_bare_switch", "tf1_nested_loops", "tf1_tensor_array_ops", "tf1_while_loop", "tf_function_tensor_array"]


def tf_function_tensor_array(features: int = 4) -> bytes:
    """Input ``x`` [?, features]: ``batch + 2`` steps, each writes ``2 * acc`` to a TensorArray; outputs the
    stacked array [batch + 2, ?, 1] and the last ``acc``."""
    tf = _tf()

    def fn(x: Any) -> Any:
        n = tf.shape(x)[0] + 2
        array = tf.TensorArray(tf.float32, size=n)

        def body(i: Any, acc: Any, array: Any) -> Any:
            acc = tf.tanh(acc * 0.5 + tf.gather(x, [i % features], axis=1))
            return i + 1, acc, array.write(i, acc * 2.0)

        _, acc, array = tf.while_loop(lambda i, a, t: i < n, body, (0, tf.zeros_like(x[:, :1]), array))
        return array.stack(), acc

    return _freeze(fn, [tf.TensorSpec([None, features], tf.float32, name="x")])


def tf_function_list_carried(features: int = 4) -> bytes:
    """Input ``x`` [?, features], ``n = batch + 2``: element ``n - 1`` is ``x[:, 0]``, then element ``j`` from
    ``n - 2`` down to 0 is ``tanh(0.9 * element[j + 1] + x[:, j % features])``; outputs the stacked array."""
    tf = _tf()

    def fn(x: Any) -> Any:
        n = tf.shape(x)[0] + 2
        array = tf.TensorArray(tf.float32, size=n, clear_after_read=False).write(n - 1, x[:, 0])

        def body(i: Any, array: Any) -> Any:
            j = n - 2 - i
            value = tf.tanh(array.read(j + 1) * 0.9 + tf.gather(x, j % features, axis=1))
            return i + 1, array.write(j, value)

        _, array = tf.while_loop(lambda i, t: i < n - 1, body, (0, array))
        return array.stack()

    return _freeze(fn, [tf.TensorSpec([None, features], tf.float32, name="x")])


def keras_custom_cell_rnn(steps: int = 5, features: int = 3, units: int = 4) -> bytes:
    """``RNN(cell)`` over ``sequence`` [?, steps, features] where the cell is a Keras layer of its own
    (``h' = tanh(x W + h U) * sigmoid(x V)``), returning sequences."""
    import keras

    class GatedCell(keras.layers.Layer):
        def __init__(self, units: int, **kwargs: Any) -> None:
            super().__init__(**kwargs)
            self.units = units
            self.state_size = units

        def build(self, input_shape: Any) -> None:
            self.w = self.add_weight(shape=(input_shape[-1], self.units), initializer="glorot_uniform", name="w")
            self.u = self.add_weight(shape=(self.units, self.units), initializer="orthogonal", name="u")
            self.v = self.add_weight(shape=(input_shape[-1], self.units), initializer="glorot_uniform", name="v")

        def call(self, inputs: Any, states: Any) -> Any:
            from keras import ops

            h = ops.tanh(ops.matmul(inputs, self.w) + ops.matmul(states[0], self.u)) * ops.sigmoid(ops.matmul(inputs, self.v))
            return h, [h]

    keras.utils.set_random_seed(0)
    sequence = keras.Input((steps, features), name="sequence")
    y = keras.layers.RNN(GatedCell(units, name="gated_cell"), return_sequences=True, name="custom_rnn")(sequence)
    return _freeze_keras(keras.Model(sequence, y, name="custom_rnn_model"), "sequence", (None, steps, features))


def tf1_while_loop(features: int = 3) -> bytes:
    """A ``tf.compat.v1.while_loop`` in TF1 control flow over ``x`` [?, features]: ``sum(x) mod 4 + 1`` times
    ``p = p * 0.9 + x``, ``s = s + tanh(p)``; outputs ``p``, ``s`` and the count."""
    tf = _tf()
    tf.compat.v1.disable_control_flow_v2()
    try:
        graph = tf.Graph()
        with graph.as_default():
            x = tf.compat.v1.placeholder(tf.float32, [None, features], name="x")
            n = tf.cast(tf.math.floormod(tf.reduce_sum(tf.abs(x)), 4.0), tf.int32) + 1
            with tf.name_scope("loop"):
                count, p, s = tf.compat.v1.while_loop(
                    lambda i, p, s: i < n, lambda i, p, s: (i + 1, p * 0.9 + x, s + tf.tanh(p)),
                    [tf.constant(0), tf.zeros_like(x), tf.zeros_like(x)])
            tf.identity(p, name="p"), tf.identity(s, name="s"), tf.identity(count, name="count")
        return graph.as_graph_def().SerializeToString()
    finally:
        tf.compat.v1.enable_control_flow_v2()


def tf1_nested_loops(features: int = 3) -> bytes:
    """TF1 control flow over ``x`` [?, features]: an outer ``while_loop`` of 3 steps whose body runs an inner
    ``while_loop`` (``i + 1`` steps of ``h = tanh(h * 0.8 + x)``) and a v1 ``tf.cond`` on the step's parity.
    Every value is read (a TF1 graph's dangling tensors would be taken for outputs, and TF fetches none from
    inside a loop)."""
    tf = _tf()
    tf.compat.v1.disable_control_flow_v2()
    try:
        graph = tf.Graph()
        with graph.as_default():
            x = tf.compat.v1.placeholder(tf.float32, [None, features], name="x")

            def outer(i, h):
                j, h = tf.compat.v1.while_loop(lambda j, h: j <= i, lambda j, h: (j + 1, tf.tanh(h * 0.8 + x)), [0, h])
                h = tf.cond(tf.equal(i % 2, 0), lambda: h * 2.0, lambda: h - 0.5 * x)
                return i + 1, h + tf.cast(j, tf.float32) * 0.01

            _, h = tf.compat.v1.while_loop(lambda i, h: i < 3, outer, [tf.constant(0), tf.zeros_like(x)])
            tf.identity(h, name="h")
        return graph.as_graph_def().SerializeToString()
    finally:
        tf.compat.v1.enable_control_flow_v2()


def tf1_bare_switch() -> bytes:
    """``x`` [3] and ``p`` (bool): ``y = Identity(Switch(x, p):1)``, a TF1 frame op no Merge joins."""
    tf = _tf()
    graph = tf.Graph()
    with graph.as_default():
        x = tf.compat.v1.placeholder(tf.float32, [3], name="x")
        p = tf.compat.v1.placeholder(tf.bool, [], name="p")
        _, taken = tf.raw_ops.Switch(data=x, pred=p)
        tf.identity(taken, name="y")
    return graph.as_graph_def().SerializeToString()


def tf1_tensor_array_ops(features: int = 3) -> bytes:
    """A TF1 graph over ``x`` [4, features]: a TensorArray of 5 filled by a scatter of ``x`` and one write, then
    read, gathered and sized (outputs ``read``, ``gathered``, ``size``); the array is closed."""
    tf = _tf()
    tf.compat.v1.disable_control_flow_v2()
    try:
        graph = tf.Graph()
        with graph.as_default():
            x = tf.compat.v1.placeholder(tf.float32, [4, features], name="x")
            array = tf.TensorArray(tf.float32, size=5, clear_after_read=False)
            array = array.scatter([0, 1, 2, 3], x).write(4, x[1] * 3.0)
            tf.identity(array.read(4) + array.read(2), name="read")
            tf.identity(array.gather([4, 0, 3]), name="gathered")
            with tf.control_dependencies([tf.identity(array.size(), name="size")]):
                array.close()
        return graph.as_graph_def().SerializeToString()
    finally:
        tf.compat.v1.enable_control_flow_v2()
