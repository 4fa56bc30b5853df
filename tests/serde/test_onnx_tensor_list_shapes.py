"""``TensorListElementShape`` exported to ONNX answers what TensorFlow answers: the element shape the list
was made with (-1 for a dim it leaves free), not the elements' real dims; outside loops and inside a ``While``
body, against TensorFlow at opsets 17 and 23. A list of unknown element rank (TF answers a scalar -1, the op's
output has rank 1) fails naming the op."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable

import numpy as np
import pytest

from scopefusion import SerdeError
from scopefusion.convert import convert
from scopefusion.serde.onnx_export import model_to_onnx

from ._onnx_runs import assert_runs_like_source, checked_export


def _outside_loops(x: Any) -> tuple[Any, ...]:
    import tensorflow as tf

    raw, f = tf.raw_ops, tf.float32

    def shape(lst: Any, dtype: Any = tf.int32) -> Any:
        return raw.TensorListElementShape(input_handle=lst, shape_type=dtype)

    reserved = raw.TensorListReserve(element_shape=[-1, 3], num_elements=2, element_dtype=f)
    reserved = raw.TensorListSetItem(input_handle=reserved, index=0, item=x[:2])
    empty = raw.EmptyTensorList(element_shape=[-1, -1], max_num_elements=-1, element_dtype=f)
    empty = raw.TensorListPushBack(input_handle=empty, tensor=x)
    listed = raw.TensorListFromTensor(tensor=x, element_shape=[-1])
    popped, _ = raw.TensorListPopBack(input_handle=listed, element_shape=[3], element_dtype=f)
    full = raw.TensorListFromTensor(tensor=x, element_shape=[3])
    measured = raw.TensorListFromTensor(tensor=x, element_shape=tf.shape(x)[1:])
    return (shape(reserved), shape(empty, tf.int64), shape(popped), shape(full, tf.int64),
            shape(measured), raw.TensorListStack(input_handle=popped, element_shape=[3], element_dtype=f))


def _in_a_loop(x: Any) -> tuple[Any, ...]:
    import tensorflow as tf

    raw = tf.raw_ops
    lst = raw.TensorListReserve(element_shape=[-1, 3], num_elements=tf.shape(x)[0], element_dtype=tf.float32)

    def body(i: Any, lst: Any, total: Any) -> tuple[Any, Any, Any]:
        dims = raw.TensorListElementShape(input_handle=lst, shape_type=tf.int32)
        lst = raw.TensorListSetItem(input_handle=lst, index=i, item=x[i:i + 1] * tf.cast(i, tf.float32))
        return i + 1, lst, total + dims

    _, lst, total = tf.while_loop(lambda i, lst, t: i < tf.shape(x)[0], body, (0, lst, tf.zeros([2], tf.int32)))
    return total, raw.TensorListElementShape(input_handle=lst, shape_type=tf.int64)


CASES = {"outside_loops": _outside_loops, "in_a_loop": _in_a_loop}


@pytest.fixture(scope="module")
def frozen(model_store) -> Callable[[str], Path]:
    def get(name: str) -> Path:
        def build() -> bytes:
            import tensorflow as tf

            from tests.models.more_models import _freeze

            return _freeze(CASES[name], [tf.TensorSpec([None, 3], tf.float32, name="x")])

        return model_store.file(f"tensor_list_shapes_{name}.pb", build)

    return get


@pytest.mark.parametrize("opset", [17, 23])
@pytest.mark.parametrize("name", sorted(CASES))
def test_element_shape_is_the_shape_the_list_was_made_with(name, opset, frozen):
    model = convert(frozen(name))
    proto = checked_export(model, opset)
    feed_sets = [{"x": np.random.default_rng(batch).standard_normal((batch, 3)).astype(np.float32)} for batch in (2, 5)]
    theirs = assert_runs_like_source(model, proto, feed_sets, f"{name} at opset {opset}", rtol=1e-6)
    if name == "outside_loops":  # the free dims are -1, as TF says, though every element has them
        assert any(np.array_equal(v, [-1, 3]) for v in theirs.values())


def _unknown_rank(x: Any) -> Any:
    import tensorflow as tf

    raw = tf.raw_ops
    lst = raw.TensorListReserve(element_shape=-1, num_elements=2, element_dtype=tf.float32)
    lst = raw.TensorListSetItem(input_handle=lst, index=1, item=x)
    return raw.TensorListElementShape(input_handle=lst, shape_type=tf.int32)


def test_a_list_of_unknown_element_rank_fails_naming_the_op(model_store):
    import tensorflow as tf

    from tests.models.more_models import _freeze

    path = model_store.file("tensor_list_shapes_unknown_rank.pb",
                            lambda: _freeze(_unknown_rank, [tf.TensorSpec([None, 3], tf.float32, name="x")]))
    with pytest.raises(SerdeError) as info:
        model_to_onnx(convert(path))
    assert "tf.TensorListElementShape x1" in str(info.value)
    assert "its list was made with an unknown element rank, for which TensorFlow answers a scalar -1" in str(info.value)
