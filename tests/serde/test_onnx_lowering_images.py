"""Lowerings of transposed convolution, space/batch reshuffles and the bicubic and area resizes, against
TensorFlow: models built from tf functions and Keras layers, frozen, converted, exported at every opset from
17 to 23, run in onnxruntime and compared with TensorFlow on the same inputs (within 1e-5 absolute and
relative; the issue's bar is 1e-4). Plus the dilated-convolution chain becoming one ``Conv``, and the
weights of the resizes against TF's kernels for many sizes."""

from __future__ import annotations

import collections
from pathlib import Path
from typing import Any, Callable

import numpy as np
import onnx
import onnxruntime as ort
import pytest

from scopefusion.convert import convert
from scopefusion.runtime.source_runner import source_runner
from scopefusion.serde.onnx_export import model_to_onnx

OPSETS = list(range(17, 24))
RNG = np.random.default_rng(11)


def f32(*shape: int) -> np.ndarray:
    return RNG.standard_normal(shape).astype(np.float32)


def _constant(*shape: int) -> Any:
    import tensorflow as tf

    return tf.constant(f32(*shape))


def _case(name: str, fn: Callable[[], Callable[..., Any]], feeds: list[np.ndarray], shape: list[int | None]):
    """``fn()`` builds the traced function; input ``in0`` is declared with ``shape`` (None: unknown) and fed
    each of ``feeds``."""
    return pytest.param(name, fn, feeds, shape, id=name)


def _keras_transposes() -> Callable[..., Any]:
    import keras

    keras.utils.set_random_seed(1)
    layers = [keras.layers.Conv2DTranspose(5, 3, strides=s, padding=p) for p in ("same", "valid") for s in (1, 2, 3)]
    layers.append(keras.layers.Conv2DTranspose(4, (4, 3), strides=(2, 3), padding="same", output_padding=(1, 0)))
    layers.append(keras.layers.Conv2DTranspose(3, 2, strides=2, padding="valid", output_padding=1))
    return lambda x: tuple(layer(x) for layer in layers)


def _raw_transposes() -> Callable[..., Any]:
    import tensorflow as tf

    w, w2 = _constant(3, 3, 6, 4), _constant(5, 4, 2, 4)
    return lambda x: (tf.nn.conv2d_transpose(x, w, [2, 31, 33, 6], 2, "VALID"),  # TF zero-fills the uncovered tail
                      tf.nn.conv2d_transpose(x, w2, [2, 29, 47, 2], [1, 2, 3, 1], "SAME"),
                      tf.nn.conv2d_transpose(x, w, [2, 14, 16, 6], 1, [[0, 0], [1, 2], [2, 0], [0, 0]]),
                      tf.nn.conv2d_transpose(x, w, [2, 15, 16, 6], 1, "SAME", dilations=2),
                      tf.nn.conv2d_transpose(x, w, [2, 19, 20, 6], 1, "VALID", dilations=2))


def _transposes_at_run_time() -> Callable[..., Any]:
    """Output sizes computed from the input's shape: the lowering cuts the full transposed convolution at run
    time (SAME, VALID with an uncovered tail, EXPLICIT, dilated)."""
    import tensorflow as tf

    w = _constant(3, 3, 6, 4)

    def fn(x):
        n, h, w_ = tf.shape(x)[0], tf.shape(x)[1], tf.shape(x)[2]
        return (tf.nn.conv2d_transpose(x, w, tf.stack([n, 2 * h, 2 * w_ - 1, 6]), 2, "SAME"),
                tf.nn.conv2d_transpose(x, w, tf.stack([n, 3 * h + 2, 3 * w_, 6]), 3, "VALID"),
                tf.nn.conv2d_transpose(x, w, tf.stack([n, h - 1, w_, 6]), 1, [[0, 0], [1, 2], [2, 0], [0, 0]]),
                tf.nn.conv2d_transpose(x, w, tf.stack([n, h, w_, 6]), 1, "SAME", dilations=2),
                tf.nn.conv2d_transpose(x, w, tf.stack([n, h + 4, w_ + 4, 6]), 1, "VALID", dilations=2))

    return fn


def _space_batch() -> Callable[..., Any]:
    import tensorflow as tf

    def fn(x):
        s2b = tf.space_to_batch_nd(x, [2, 3], [[1, 0], [2, 3]])
        one_dim = tf.space_to_batch_nd(x, [3], [[0, 3]])
        return (s2b, tf.batch_to_space(s2b, [2, 3], [[1, 0], [1, 2]]), one_dim,
                tf.batch_to_space(one_dim, [3], [[2, 1]]), tf.batch_to_space(tf.concat([x, x], 0), [2, 1], [[0, 1], [0, 0]]))

    return fn


def _space_batch_runtime_pads() -> Callable[..., Any]:
    """Paddings and crops computed from the input's shape, as ``required_space_to_batch_paddings`` does."""
    import tensorflow as tf

    def fn(x):
        size = tf.shape(x)[1:3]
        extra = (tf.constant([2, 3]) - (size + [1, 0]) % tf.constant([2, 3])) % tf.constant([2, 3])
        paddings = tf.stack([tf.stack([1, extra[0]]), tf.stack([0, extra[1]])])
        crops = tf.stack([tf.stack([0, extra[0]]), tf.stack([1, extra[1]])])
        s2b = tf.space_to_batch_nd(x, [2, 3], paddings)
        return s2b, tf.batch_to_space(s2b * 2.0, [2, 3], crops)

    return fn


def _dilated() -> Callable[..., Any]:
    import keras
    import tensorflow as tf

    keras.utils.set_random_seed(2)
    depthwise = keras.layers.DepthwiseConv2D(3, dilation_rate=(2, 3), padding="same", depth_multiplier=2)
    w, dw = _constant(3, 3, 4, 5), _constant(2, 3, 4, 1)
    return lambda x: (tf.nn.atrous_conv2d(x, w, 2, "SAME"), tf.nn.atrous_conv2d(x, w, 3, "VALID"), depthwise(x),
                      tf.nn.depthwise_conv2d(x, dw, [1, 1, 1, 1], "VALID", dilations=[4, 2]))


def _dilated_1d() -> Callable[..., Any]:
    """Keras Conv1D with dilation (causal and same) and tf.nn.convolution on [N, W, C]: each is
    SpaceToBatchND → ExpandDims → Conv2D → Squeeze → BatchToSpaceND in the graph."""
    import keras
    import tensorflow as tf

    keras.utils.set_random_seed(3)
    causal = keras.layers.Conv1D(5, 3, dilation_rate=2, padding="causal")
    same = keras.layers.Conv1D(3, 2, dilation_rate=4, padding="same")
    w = _constant(3, 4, 5)
    return lambda x: (causal(x), same(x), tf.nn.convolution(x, w, padding="VALID", dilations=3))


def _resizes(kind: str) -> Callable[..., Any]:
    import tensorflow as tf

    sizes = ([7, 9], [37, 41], [30, 32], [1, 1], [15, 3])
    return lambda x: tuple(tf.image.resize(x, size, kind) for size in sizes)


def _resizes_to_run_time_sizes() -> Callable[..., Any]:
    """Sizes computed from the images' shape (twice, a third, one row), every mode."""
    import tensorflow as tf

    image = tf.compat.v1.image

    def fn(x):
        size = tf.shape(x)[1:3]
        double, third, row = size * 2, size // 3 + 1, tf.stack([1, size[1]])
        return (tf.image.resize(x, double, "bicubic"), tf.image.resize(x, third, "area"),
                image.resize_bicubic(x, third, align_corners=True), image.resize_bicubic(x, double),
                image.resize_area(x, double, align_corners=True), image.resize_area(x, row, align_corners=True),
                tf.image.resize(x, row, "bicubic"))

    return fn


def _resizes_v1() -> Callable[..., Any]:
    import tensorflow as tf

    image = tf.compat.v1.image
    return lambda x: (image.resize_bicubic(x, [7, 9], align_corners=True), image.resize_bicubic(x, [37, 41]),
                      image.resize_bicubic(x, [31, 5], half_pixel_centers=True), image.resize_area(x, [37, 41]),
                      image.resize_area(x, [37, 41], align_corners=True), image.resize_area(x, [7, 5], align_corners=True),
                      tf.image.resize(tf.cast(tf.abs(x) * 50, tf.uint8), [7, 9], "area"),
                      tf.image.resize(tf.cast(x * 50, tf.int32), [17, 19], "bicubic"))


def _cases():
    image, tall = f32(2, 15, 16, 4), f32(1, 40, 7, 4)
    yield _case("conv2d_transpose_keras", _keras_transposes, [image, f32(3, 15, 16, 4)], [None, 15, 16, 4])
    yield _case("conv2d_transpose_raw", _raw_transposes, [image], [2, 15, 16, 4])
    yield _case("conv2d_transpose_run_time_sizes", _transposes_at_run_time, [image, f32(1, 7, 5, 4)],
                [None, None, None, 4])
    yield _case("conv2d_transpose_run_time_sizes_static_input", _transposes_at_run_time, [image], [None, 15, 16, 4])
    yield _case("space_to_batch_static", _space_batch, [image], [None, 15, 16, 4])
    yield _case("space_to_batch_dynamic", _space_batch, [image, f32(1, 9, 7, 4)], [None, None, None, 4])
    yield _case("space_to_batch_runtime_pads", _space_batch_runtime_pads, [image, tall, f32(1, 1, 1, 4)],
                [None, None, None, 4])
    yield _case("dilated_convolutions", _dilated, [image, f32(1, 15, 16, 4)], [None, 15, 16, 4])
    yield _case("dilated_convolutions_1d", _dilated_1d, [f32(2, 20, 4)], [None, 20, 4])
    yield _case("dilated_convolutions_1d_dynamic", _dilated_1d, [f32(2, 20, 4), f32(1, 9, 4)], [None, None, 4])
    yield _case("resize_bicubic", lambda: _resizes("bicubic"), [image], [None, 15, 16, 4])
    yield _case("resize_area", lambda: _resizes("area"), [image], [None, 15, 16, 4])
    yield _case("resize_bicubic_dynamic", lambda: _resizes("bicubic"), [image, tall, f32(1, 1, 1, 4)],
                [None, None, None, 4])
    yield _case("resize_area_dynamic", lambda: _resizes("area"), [image, tall, f32(1, 2, 1, 4)], [None, None, None, 4])
    yield _case("resize_to_run_time_sizes", _resizes_to_run_time_sizes, [image, tall, f32(1, 1, 2, 4)],
                [None, None, None, 4])
    yield _case("resize_to_run_time_sizes_static_input", _resizes_to_run_time_sizes, [image], [2, 15, 16, 4])
    yield _case("resize_v1_modes", _resizes_v1, [image], [None, 15, 16, 4])
    yield _case("resize_v1_modes_dynamic", _resizes_v1, [image, tall], [None, None, None, 4])


@pytest.fixture(scope="module")
def frozen(model_store):
    def get(name: str, fn: Callable[[], Callable[..., Any]], shape: list[int | None]) -> Path:
        def build() -> bytes:
            import tensorflow as tf

            from tests.models.more_models import _freeze

            return _freeze(fn(), [tf.TensorSpec(shape, tf.float32, name="in0")])

        return model_store.file(f"lowering_images_{name}.pb", build)

    return get


def _run(model: Any, opset: int, feeds: list[dict[str, np.ndarray]]) -> onnx.ModelProto:
    """Exports ``model`` at ``opset``, checks the file, and compares onnxruntime with TF on each feed."""
    proto = model_to_onnx(model, opset=opset)
    onnx.checker.check_model(proto, full_check=True)
    assert {n.domain for n in proto.graph.node} <= {""}
    session = ort.InferenceSession(proto.SerializeToString(), providers=["CPUExecutionProvider"])
    runner = source_runner(model.source)
    names = [o.name for o in session.get_outputs()]
    for feed in feeds:
        ours = dict(zip(names, session.run(None, feed)))
        theirs = runner.run(feed)
        assert sorted(ours) == sorted(theirs)
        for key, expected in theirs.items():
            where = f"output {key} at opset {opset} for input shape {feed['in0'].shape}"
            assert ours[key].shape == expected.shape, where
            np.testing.assert_allclose(ours[key], expected, rtol=1e-5, atol=1e-5, err_msg=where)
    return proto


@pytest.mark.parametrize("opset", OPSETS)
@pytest.mark.parametrize("name,fn,feeds,shape", list(_cases()))
def test_lowered_ops_compute_what_tensorflow_computes(name, fn, feeds, shape, opset, frozen):
    model = convert(frozen(name, fn, shape))
    _run(model, opset, [{"in0": x} for x in feeds])


def _data_path_ops(proto: onnx.ModelProto) -> collections.Counter:
    """The op types of the nodes the graph input's data flows through (not the shape arithmetic that
    starts at a ``Shape``)."""
    reached = {i.name for i in proto.graph.input}
    ops: collections.Counter = collections.Counter()
    for node in proto.graph.node:  # topologically sorted
        if node.op_type != "Shape" and any(name in reached for name in node.input):
            ops[node.op_type] += 1
            reached.update(node.output)
    return ops


@pytest.mark.parametrize("name,fn,shape,dilations", [
    ("dilated_convolutions", _dilated, [None, 15, 16, 4], [(2, 2), (2, 3), (3, 3), (4, 2)]),
    ("dilated_convolutions_1d", _dilated_1d, [None, 20, 4], [(2,), (3,), (4,)]),
    ("dilated_convolutions_1d_dynamic", _dilated_1d, [None, None, 4], [(2,), (3,), (4,)]),
])
def test_space_to_batch_around_a_convolution_becomes_one_dilated_conv(name, fn, shape, dilations, frozen):
    model = convert(frozen(name, fn, shape))
    assert collections.Counter(n.op for n in model.graph.nodes)["tf.SpaceToBatchND"] == len(dilations)
    proto = _run(model, 23, [{"in0": f32(2, *[9 if d is None else d for d in shape[1:]])}])
    ops = _data_path_ops(proto)
    assert ops["Conv"] == len(dilations) and not {"Reshape", "Slice", "Squeeze", "Unsqueeze"} & set(ops), ops
    found = sorted(tuple(a.ints) for n in proto.graph.node if n.op_type == "Conv" for a in n.attribute
                   if a.name == "dilations")
    assert found == dilations


def test_a_keras_upsampling_decoder_matches_tensorflow(model_store):
    """Conv2D, dilated DepthwiseConv2D, Conv2DTranspose, bicubic and area Resizing; the transposed
    convolutions' sizes are built at run time from the batch (a Pack), so the resizes see unknown sizes."""
    from tests.models.upsampling_models import keras_upsampling_decoder

    model = convert(model_store.file("keras_upsampling_decoder.pb", keras_upsampling_decoder))
    for opset in (17, 23):
        proto = model_to_onnx(model, opset=opset)
        onnx.checker.check_model(proto, full_check=True)
        ops = collections.Counter(n.op_type for n in proto.graph.node)
        assert ops["ConvTranspose"] == 2 and ops["Conv"] == 2 and ops["MatMul"] == 4 and "Reshape" not in ops, ops
        session = ort.InferenceSession(proto.SerializeToString(), providers=["CPUExecutionProvider"])
        for batch in (1, 4):
            image = f32(batch, 12, 12, 3)
            (ours,) = session.run(None, {"image": image})
            (theirs,) = source_runner(model.source).run({"image": image}).values()
            assert ours.shape == (batch, 20, 30, 4)
            np.testing.assert_allclose(ours, theirs, rtol=1e-5, atol=1e-5, err_msg=f"opset {opset} batch {batch}")


def test_a_keras_decoder_for_images_of_any_size_matches_tensorflow(model_store):
    """Dilation paddings and crops, and the transposed convolutions' sizes, are computed at run time."""
    from tests.models.upsampling_models import keras_fully_convolutional_decoder

    model = convert(model_store.file("keras_fully_convolutional_decoder.pb", keras_fully_convolutional_decoder))
    for opset in (17, 23):
        proto = model_to_onnx(model, opset=opset)
        onnx.checker.check_model(proto, full_check=True)
        ops = collections.Counter(n.op_type for n in proto.graph.node)
        assert ops["ConvTranspose"] == 2 and ops["Conv"] == 2, ops  # the dilated one is a single Conv
        session = ort.InferenceSession(proto.SerializeToString(), providers=["CPUExecutionProvider"])
        for shape in [(1, 12, 12, 3), (2, 15, 9, 3), (1, 1, 1, 3), (3, 31, 64, 3)]:
            image = f32(*shape)
            (ours,) = session.run(None, {"image": image})
            (theirs,) = source_runner(model.source).run({"image": image}).values()
            assert ours.shape == (shape[0], 37, 41, 6)
            np.testing.assert_allclose(ours, theirs, rtol=1e-5, atol=1e-5, err_msg=f"opset {opset} shape {shape}")


@pytest.mark.parametrize("kind", ["bicubic", "area"])
def test_resize_weights_are_tensorflows_for_many_sizes(kind):
    """Channel ``c`` of the image is the one-hot column ``c``: TF's output is its weight matrix."""
    import tensorflow as tf

    from scopefusion.serde.onnx_lowering.resize import area_weights, bicubic_weights

    for size_in in (1, 2, 3, 5, 8, 13, 64):
        eye = tf.reshape(tf.eye(size_in), [1, size_in, 1, size_in])
        for size_out in (1, 2, 3, 7, 16, 29, 100):
            modes = [(False, False), (True, False)] + ([(False, True)] if kind == "bicubic" else [])
            for align, half in modes:
                if kind == "bicubic":
                    image = tf.raw_ops.ResizeBicubic(images=eye, size=[size_out, 1], align_corners=align,
                                                     half_pixel_centers=half)
                    ours = bicubic_weights(size_in, size_out, align, half)
                else:
                    image = tf.raw_ops.ResizeArea(images=eye, size=[size_out, 1], align_corners=align)
                    ours = area_weights(size_in, size_out, align)
                theirs = image.numpy().reshape(size_out, size_in)
                np.testing.assert_allclose(ours, theirs, rtol=1e-6, atol=1e-6,
                                           err_msg=f"{kind} {size_in} -> {size_out} align={align} half={half}")
