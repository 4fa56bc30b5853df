"""tf op lowerings against TensorFlow itself: small tf.functions, frozen, converted, exported at opsets 17 and
23, run in onnxruntime and compared with TensorFlow on the same inputs (integer division and modulo signs,
StridedSlice masks, Gather batch dims, SAME padding, dilations, depthwise filters, matmul transposes,
resize modes, casts, data-dependent ops...). Plus the registry and the failure for an op without lowering."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable

import numpy as np
import onnx
import onnxruntime as ort
import pytest

from scopefusion import SerdeError
from scopefusion.convert import convert
from scopefusion.runtime.source_runner import source_runner
from scopefusion.serde.onnx_export import model_to_onnx
from scopefusion.serde.onnx_lowering import default_lowerings

RNG = np.random.default_rng(7)


def f32(*shape: int) -> np.ndarray:
    return RNG.standard_normal(shape).astype(np.float32)


def ints(*shape: int, low: int = -9, high: int = 10, dtype=np.int32) -> np.ndarray:
    values = RNG.integers(low, high, shape).astype(dtype)
    return values


def nonzero_ints(*shape: int) -> np.ndarray:
    values = ints(*shape)
    values[values == 0] = 3
    return values


def _case(name: str, fn: Callable[..., Any], *feeds: np.ndarray, dynamic: tuple[int, ...] = ()):
    """``fn`` over inputs like ``feeds`` (dims listed in ``dynamic`` left unknown for input 0)."""
    return pytest.param(name, fn, feeds, dynamic, id=name)


def _cases():
    import tensorflow as tf

    raw = tf.raw_ops
    yield _case("floordiv_floormod_int", lambda a, b: (a // b, a % b, raw.TruncateDiv(x=a, y=b),
                                                      raw.TruncateMod(x=a, y=b)), ints(5, 6), nonzero_ints(5, 6))
    yield _case("floordiv_floormod_float", lambda a, b: (tf.math.floordiv(a, b), tf.math.floormod(a, b)),
                f32(4, 5), f32(4, 5) + 3.0)
    yield _case("strided_slice_masks", lambda x: (x[1:, ::2, -1], x[..., 1], x[:, tf.newaxis, 2:0:-1],
                                                  x[-1, :, :, tf.newaxis], x[::-1, 1:3]), f32(3, 4, 5))
    yield _case("strided_slice_dynamic", lambda x, n: (x[n:, : n + 2], x[n - 1]), f32(6, 5),
                np.asarray(1, np.int32))
    yield _case("slice_split_unpack", lambda x: (tf.slice(x, [1, 0], [-1, 3]), *tf.split(x, 2, axis=1),
                                                 *tf.split(x, [1, -1], axis=0), *tf.unstack(x, axis=1)), f32(4, 6))
    yield _case("gather_batch_dims", lambda p, i: (tf.gather(p, i, axis=1, batch_dims=1), tf.gather(p, i[0], axis=2),
                                                   tf.gather_nd(p, tf.stack([i, i], -1) % 2)),
                f32(2, 3, 4), ints(2, 5, low=0, high=3))
    yield _case("conv_same_strided_dilated", lambda x: (
        tf.nn.conv2d(x, tf.constant(f32(3, 3, 3, 4)), 2, "SAME"),
        tf.nn.conv2d(x, tf.constant(f32(2, 2, 3, 5)), 1, "SAME", dilations=2),
        tf.nn.conv2d(x, tf.constant(f32(3, 1, 3, 2)), [1, 2, 1, 1], "VALID"),
        tf.nn.depthwise_conv2d(x, tf.constant(f32(3, 3, 3, 2)), [1, 2, 2, 1], "SAME"),
        tf.nn.max_pool2d(x, 3, 2, "SAME"), tf.nn.avg_pool2d(x, 2, 2, "SAME"),
        tf.nn.bias_add(x, tf.constant(f32(3)))), f32(2, 7, 8, 3), dynamic=(0, 1, 2))
    yield _case("pad_conv_global_pools", lambda x: (
        tf.reduce_mean(tf.nn.relu(tf.nn.conv2d(tf.pad(x, [[0, 0], [1, 2], [0, 1], [0, 0]]), tf.constant(f32(3, 3, 3, 4)),
                                               1, "VALID")), [1, 2]),
        tf.reduce_max(tf.nn.conv2d(tf.pad(x, [[0, 0], [1, 1], [1, 1], [0, 0]]), tf.constant(f32(3, 3, 3, 2)), 2,
                                   [[0, 0], [1, 0], [0, 1], [0, 0]]), [1, 2], keepdims=True),
        tf.nn.max_pool2d(tf.pad(x, [[0, 0], [1, 1], [1, 1], [0, 0]]), 3, 2, "VALID")), f32(2, 7, 8, 3), dynamic=(0,))
    yield _case("matmul_transposes", lambda a, b: (tf.matmul(a, b, transpose_b=True), tf.matmul(a, b, transpose_a=True,
                                                                                                  transpose_b=False)
                                                   if False else tf.linalg.matmul(tf.transpose(a), a),
                                                   tf.matmul(tf.stack([a, a]), tf.stack([b, b]), adjoint_b=True)),
                f32(3, 4), f32(5, 4))
    yield _case("fused_batch_norm", lambda x: raw.FusedBatchNormV3(
        x=x, scale=f32(3), offset=f32(3), mean=f32(3), variance=np.abs(f32(3)) + 0.5, epsilon=1e-3,
        is_training=False)[0], f32(2, 4, 4, 3))
    yield _case("resize_modes", lambda x: (
        tf.compat.v1.image.resize_bilinear(x, [7, 9], align_corners=True),
        tf.compat.v1.image.resize_bilinear(x, [7, 9], half_pixel_centers=True),
        tf.compat.v1.image.resize_bilinear(x, [3, 9]),
        tf.compat.v1.image.resize_nearest_neighbor(x, [7, 9]),
        tf.compat.v1.image.resize_nearest_neighbor(x, [7, 9], half_pixel_centers=True),
        tf.compat.v1.image.resize_nearest_neighbor(x, [7, 9], align_corners=True)), f32(1, 4, 5, 2))
    yield _case("casts_and_math", lambda x: (tf.cast(x * 3, tf.int32), tf.cast(x, tf.bool), tf.math.rsqrt(tf.abs(x) + 1),
                                             tf.nn.relu6(x * 4), tf.nn.leaky_relu(x, 0.1), tf.nn.selu(x), tf.nn.elu(x),
                                             tf.math.log1p(tf.abs(x)), tf.math.expm1(x), tf.math.erfc(x),
                                             tf.math.squared_difference(x, 1.0), tf.math.divide_no_nan(x, x - x),
                                             tf.round(x * 2), tf.clip_by_value(x, -0.5, 0.5), tf.math.is_finite(x),
                                             tf.math.xlogy(x, tf.abs(x)), tf.add_n([x, x, x])), f32(3, 4))
    yield _case("reductions", lambda x: (tf.reduce_sum(x, [0, 2]), tf.reduce_mean(x, 1, keepdims=True),
                                         tf.reduce_max(x, -1), tf.reduce_prod(x, []), tf.math.argmax(x, 1),
                                         tf.math.argmin(x, 2, output_type=tf.int32), tf.reduce_all(x > 0, 1),
                                         tf.reduce_any(x > 1, [0, 1]), tf.math.cumsum(x, 1, exclusive=True, reverse=True),
                                         tf.norm(x, axis=2)), f32(2, 3, 4))
    yield _case("reshape_pad_tile", lambda x: (tf.reshape(x, [-1, 2]), tf.pad(x, [[1, 0], [0, 2]]),
                                               tf.pad(x, [[1, 1], [2, 1]], "REFLECT"), tf.tile(x, [2, 1]),
                                               tf.expand_dims(x, -1), tf.squeeze(x[:1], 0), tf.reverse(x, [1]),
                                               tf.fill(tf.shape(x), 2.0), tf.zeros_like(x), tf.broadcast_to(x[:1], [3, 4]),
                                               tf.transpose(x), tf.concat([x, x], 1), tf.stack([x, x], 1),
                                               tf.range(0, tf.shape(x)[1] * 2, 3), tf.size(x), tf.rank(x)),
                f32(3, 4), dynamic=(0,))
    yield _case("selection", lambda x, c: (tf.where(c, x, -x), tf.where(c), tf.math.top_k(x[0], 3).values,
                                           tf.math.top_k(x[0], 3).indices, tf.one_hot(tf.cast(tf.abs(x[0]) * 2, tf.int32), 4),
                                           tf.boolean_mask(x, c), tf.unique(tf.cast(x[0] * 2, tf.int32)).y,
                                           tf.unique(tf.cast(x[0] * 2, tf.int32)).idx, tf.math.invert_permutation([2, 0, 1]),
                                           tf.scatter_nd([[1], [3], [1]], [1.0, 2.0, 3.0], [5])),
                f32(3, 6), RNG.random((3, 6)) < 0.5)
    yield _case("tensor_lists", _tensor_lists, f32(5, 3), dynamic=(0,))
    yield _case("nms", lambda b, s: tf.image.non_max_suppression(b, s, 4, 0.5, 0.1),
                np.sort(RNG.random((8, 4)).astype(np.float32).reshape(8, 2, 2), axis=1).reshape(8, 4),
                RNG.random(8).astype(np.float32))


def _tensor_lists(x):
    """Every TensorList op outside a loop: from a tensor, set, push, pop, reserve, empty, read, gather, stack."""
    import tensorflow as tf

    raw, f = tf.raw_ops, tf.float32
    shape = tf.constant([3], tf.int32)
    lst = raw.TensorListFromTensor(tensor=x, element_shape=shape)
    lst = raw.TensorListSetItem(input_handle=lst, index=1, item=x[0] * 2.0)
    lst = raw.TensorListPushBack(input_handle=lst, tensor=x[2] + 1.0)
    popped, last = raw.TensorListPopBack(input_handle=lst, element_shape=shape, element_dtype=f)
    empty = raw.EmptyTensorList(element_shape=tf.constant([-1], tf.int32), max_num_elements=-1, element_dtype=f)
    empty = raw.TensorListPushBack(input_handle=raw.TensorListPushBack(input_handle=empty, tensor=x[1]), tensor=x[3])
    reserved = raw.TensorListReserve(element_shape=tf.constant(-1, tf.int32), num_elements=4, element_dtype=f)
    for k in range(4):
        reserved = raw.TensorListSetItem(input_handle=reserved, index=k, item=x[k] - float(k))
    return (raw.TensorListStack(input_handle=popped, element_shape=shape, element_dtype=f), last,
            raw.TensorListLength(input_handle=lst), raw.TensorListElementShape(input_handle=lst, shape_type=tf.int32),
            raw.TensorListGetItem(input_handle=lst, index=4, element_shape=shape, element_dtype=f),
            raw.TensorListGather(input_handle=lst, indices=[0, 5, 2], element_shape=shape, element_dtype=f),
            raw.TensorListStack(input_handle=empty, element_shape=shape, element_dtype=f),
            raw.TensorListStack(input_handle=reserved, element_shape=tf.constant([-1], tf.int32), element_dtype=f))


def _freeze(fn, feeds, dynamic) -> bytes:
    import tensorflow as tf

    from tests.models.more_models import _freeze as freeze

    specs = []
    for k, value in enumerate(feeds):
        shape = [None if (k == 0 and d in dynamic) else s for d, s in enumerate(value.shape)]
        specs.append(tf.TensorSpec(shape, tf.as_dtype(value.dtype), name=f"in{k}"))
    return freeze(fn, specs)


@pytest.fixture(scope="session")
def tf1_bare_switch_pb(model_store) -> Path:
    from tests.models.loop_models import tf1_bare_switch

    return model_store.file("tf1_bare_switch.pb", tf1_bare_switch)


@pytest.fixture(scope="module")
def frozen(model_store):
    def get(name, fn, feeds, dynamic) -> Path:
        return model_store.file(f"lowering_{name}.pb", lambda: _freeze(fn, feeds, dynamic))

    return get


def _compare(ours: np.ndarray, theirs: np.ndarray, where: str) -> None:
    ours, theirs = np.asarray(ours), np.asarray(theirs)
    assert ours.shape == theirs.shape, where
    if theirs.dtype.kind in "biu":
        assert ours.dtype == theirs.dtype and np.array_equal(ours, theirs), where
    else:
        np.testing.assert_allclose(ours, theirs, rtol=1e-5, atol=1e-5, err_msg=where)


@pytest.mark.parametrize("opset", [17, 23])
@pytest.mark.parametrize("name,fn,feeds,dynamic", list(_cases()))
def test_lowered_ops_compute_what_tensorflow_computes(name, fn, feeds, dynamic, opset, frozen):
    model = convert(frozen(name, fn, feeds, dynamic))
    proto = model_to_onnx(model, opset=opset)
    onnx.checker.check_model(proto, full_check=True)
    assert {n.domain for n in proto.graph.node} <= {""}
    inputs = {f"in{k}": v for k, v in enumerate(feeds)}
    session = ort.InferenceSession(proto.SerializeToString(), providers=["CPUExecutionProvider"])
    names = [i.name for i in session.get_inputs()]
    ours = dict(zip([o.name for o in session.get_outputs()], session.run(None, {n: inputs[n] for n in names})))
    theirs = source_runner(model.source).run(inputs)
    assert sorted(ours) == sorted(theirs)
    for key, expected in theirs.items():
        _compare(ours[key], expected, f"{name} output {key} at opset {opset}")


@pytest.mark.parametrize("opset", [17, 23])
def test_while_if_and_case_become_loop_and_if(tf2_control_flow_pb, opset):
    model = convert(tf2_control_flow_pb)
    proto = model_to_onnx(model, opset=opset)
    onnx.checker.check_model(proto, full_check=True)
    assert {n.op_type for n in proto.graph.node} >= {"Loop", "If"}
    session = ort.InferenceSession(proto.SerializeToString(), providers=["CPUExecutionProvider"])
    runner = source_runner(model.source)
    x = f32(2, 3)
    for n in range(7):  # no iteration, several, the cond's two branches inside the loop, each case branch
        feeds = {"x": x, "n": np.asarray(n, np.int32)}
        ours = session.run(None, feeds)
        (theirs,) = runner.run(feeds).values()
        np.testing.assert_allclose(ours[0], theirs, rtol=1e-5, atol=1e-5, err_msg=f"n={n}")


def test_the_registry_is_a_fresh_object_and_refuses_duplicates():
    registry = default_lowerings()
    assert "Conv2D" in registry and "StridedSlice" in registry and len(registry) > 150
    registry.register("MyOp", lambda e: None)
    assert "MyOp" not in default_lowerings()
    with pytest.raises(SerdeError, match="has an ONNX lowering already"):
        registry.register("MyOp", lambda e: None)
    with pytest.raises(SerdeError, match="without the dialect"):
        registry.register("tf.MyOp", lambda e: None)


def test_an_op_without_lowering_is_named_with_its_count(tf_bert_pb):
    model = convert(tf_bert_pb)
    registry = default_lowerings()
    registry.register("MatMul", lambda e: e.decline("testing a refusal"), replace=True)
    with pytest.raises(SerdeError) as info:
        model_to_onnx(model, lowerings=registry)
    message = str(info.value)
    count = sum(1 for n in model.graph.nodes if n.op == "tf.MatMul")
    assert f"tf.MatMul x{count}" in message and "testing a refusal" in message and "\n" not in message
    kept = model_to_onnx(model, lowerings=registry, keep_tf_ops=True)
    assert sum(n.domain == "tf" for n in kept.graph.node) == count


@pytest.mark.parametrize("opset", [17, 23])
def test_a_tf1_while_loop_and_cond_become_loop_and_if(tf1_cond_pb, opset):
    model = convert(tf1_cond_pb)
    proto = model_to_onnx(model, opset=opset)
    onnx.checker.check_model(proto, full_check=True)
    assert {n.op_type for n in proto.graph.node} >= {"Loop", "If"} and {n.domain for n in proto.graph.node} == {""}
    assert any(n.op_type == "Enter" for n in model.graph.nodes)  # the model's own graph keeps its frames
    session = ort.InferenceSession(proto.SerializeToString(), providers=["CPUExecutionProvider"])
    runner = source_runner(model.source)
    x = f32(3)
    for n in range(5):  # no iteration, several; the cond's two branches
        feeds = {"x": x, "n": np.asarray(n, np.int32)}
        ours = dict(zip([o.name for o in session.get_outputs()], session.run(None, feeds)))
        for key, theirs in runner.run(feeds).items():
            np.testing.assert_allclose(ours[key], theirs, rtol=1e-5, atol=1e-5, err_msg=f"{key} at n={n}")


def test_tf1_tensor_array_ops_outside_a_loop_compute_what_tensorflow_computes(model_store):
    from tests.models.loop_models import tf1_tensor_array_ops

    model = convert(model_store.file("tf1_tensor_array_ops.pb", tf1_tensor_array_ops))
    proto = model_to_onnx(model)
    onnx.checker.check_model(proto, full_check=True)
    assert {n.domain for n in proto.graph.node} == {""}
    session = ort.InferenceSession(proto.SerializeToString(), providers=["CPUExecutionProvider"])
    feeds = {"x": f32(4, 3)}
    ours = dict(zip([o.name for o in session.get_outputs()], session.run(None, feeds)))
    theirs = source_runner(model.source).run(feeds)
    assert sorted(ours) == sorted(theirs)
    for key, expected in theirs.items():
        _compare(ours[key], expected, key)


def test_a_tf1_frame_that_forms_no_loop_or_cond_fails_saying_what_to_do(tf1_bare_switch_pb):
    model = convert(tf1_bare_switch_pb)
    with pytest.raises(SerdeError) as info:
        model_to_onnx(model)
    message = str(info.value)
    assert "tf.Switch x1" in message and "form no while loop or cond" in message and "TF2 control flow" in message
    assert "\n" not in message


def test_unknown_input_dims_of_a_tensorflow_model_stay_symbolic(tf_bert_pb):
    import onnx

    from scopefusion.convert import convert

    model = onnx.load_from_string(convert(tf_bert_pb).to_bytes("onnx"))
    for info in model.graph.input:
        dims = info.type.tensor_type.shape.dim
        assert dims[0].dim_param == f"{info.name.split(':')[0]}_dim0" and not dims[0].HasField("dim_value")
        assert all(d.HasField("dim_value") for d in dims[1:])
