"""Lowerings written as compositions of ONNX ops (Atan2, Cumprod, InTopKV2, BroadcastGradientArgs) against
TensorFlow on the same inputs, at every opset from 17 to 23; and the random ops against their
distributions (TF's random streams have no ONNX form, so the samples themselves differ)."""

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

OPSETS = list(range(17, 24))
RNG = np.random.default_rng(5)


def f32(*shape: int) -> np.ndarray:
    return RNG.standard_normal(shape).astype(np.float32)


def _atan2(y, x):
    import tensorflow as tf

    return tf.math.atan2(y, x), tf.math.atan2(x, y)


def _signed_zeros() -> tuple[np.ndarray, np.ndarray]:
    values = np.asarray([0.0, -0.0, 1.5, -1.5, 1e-30, -1e-30], np.float32)
    y, x = np.meshgrid(values, values)
    return y.astype(np.float32), x.astype(np.float32)


def _cumprod(x):
    import tensorflow as tf

    return tuple(tf.math.cumprod(x, axis, exclusive=ex, reverse=rev)
                 for axis in (0, 1, -1) for ex in (False, True) for rev in (False, True))


def _cumprod_int(x):
    import tensorflow as tf

    ints = tf.cast(tf.round(x * 2), tf.int32)
    return tf.math.cumprod(ints, 1), tf.math.cumprod(ints, 0, exclusive=True, reverse=True)


def _in_top_k(predictions, targets):
    import tensorflow as tf

    return tuple(tf.math.in_top_k(targets, predictions, k) for k in (0, 1, 2, 5, 9))


def _ties_and_bad_rows() -> tuple[np.ndarray, np.ndarray]:
    predictions = np.round(f32(6, 5) * 2) / 2  # ties
    predictions[3, 2] = np.nan
    predictions[4, 0] = np.inf
    targets = np.asarray([0, 4, 2, 1, 3, 7], np.int32)  # the last one out of range
    return predictions, targets


def _gradient_args(a, b):
    import tensorflow as tf

    s0, s1 = tf.shape(a), tf.shape(b)
    return (*tf.raw_ops.BroadcastGradientArgs(s0=s0, s1=s1), *tf.raw_ops.BroadcastGradientArgs(s0=s1[1:], s1=s0))


def _case(name: str, fn: Callable[..., Any], feeds: list[tuple[np.ndarray, ...]], dynamic: tuple[int, ...] = ()):
    """``fn`` over inputs ``in0, in1…`` typed like ``feeds[0]``, with the dims in ``dynamic`` unknown in every
    input; each tuple of ``feeds`` is run."""
    return pytest.param(name, fn, feeds, dynamic, id=name)


CASES = [
    _case("atan2", _atan2, [(f32(4, 6), f32(4, 6)), _signed_zeros()], dynamic=(0,)),
    _case("cumprod", _cumprod, [(f32(3, 4, 5),), (f32(2, 7, 5),)], dynamic=(0, 1)),
    _case("cumprod_static", _cumprod, [(f32(3, 4, 5),)]),
    _case("cumprod_int", _cumprod_int, [(f32(4, 6),)]),
    _case("in_top_k", _in_top_k, [_ties_and_bad_rows(), (f32(3, 5), np.asarray([4, 0, 2], np.int32))],
          dynamic=(0,)),
    _case("broadcast_gradient_args", _gradient_args,
          [(f32(2, 1, 4), f32(3, 1)), (f32(1, 3, 1), f32(3, 5)), (f32(1, 1, 1), f32(1, 1))], dynamic=(0, 1, 2)),
]


@pytest.fixture(scope="module")
def frozen(model_store):
    def get(name: str, fn: Callable[..., Any], example: tuple[np.ndarray, ...], dynamic: tuple[int, ...]) -> Path:
        def build() -> bytes:
            import tensorflow as tf

            from tests.models.more_models import _freeze

            specs = [tf.TensorSpec([None if d in dynamic else s for d, s in enumerate(v.shape)],
                                   tf.as_dtype(v.dtype), name=f"in{k}") for k, v in enumerate(example)]
            return _freeze(fn, specs)

        return model_store.file(f"lowering_compositions_{name}.pb", build)

    return get


@pytest.mark.parametrize("opset", OPSETS)
@pytest.mark.parametrize("name,fn,feeds,dynamic", CASES)
def test_compositions_compute_what_tensorflow_computes(name, fn, feeds, dynamic, opset, frozen):
    model = convert(frozen(name, fn, feeds[0], dynamic))
    proto = model_to_onnx(model, opset=opset)
    onnx.checker.check_model(proto, full_check=True)
    assert {n.domain for n in proto.graph.node} <= {""}
    session = ort.InferenceSession(proto.SerializeToString(), providers=["CPUExecutionProvider"])
    runner = source_runner(model.source)
    outputs = [o.name for o in session.get_outputs()]
    for values in feeds:
        feed = {f"in{k}": v for k, v in enumerate(values)}
        ours = dict(zip(outputs, session.run(None, feed)))
        theirs = runner.run(feed)
        assert sorted(ours) == sorted(theirs)
        for key, expected in theirs.items():
            where = f"{name} output {key} at opset {opset}, inputs {[v.shape for v in values]}"
            assert ours[key].dtype == expected.dtype and ours[key].shape == expected.shape, where
            if expected.dtype.kind == "f":
                np.testing.assert_allclose(ours[key], expected, rtol=1e-5, atol=1e-6, err_msg=where)
                nonzero = expected != 0  # ±0 results may differ in sign; ±π may not
                assert np.array_equal(np.signbit(ours[key][nonzero]), np.signbit(expected[nonzero])), where
            else:
                np.testing.assert_array_equal(ours[key], expected, err_msg=where)


def _random_ops(shape):
    import tensorflow as tf

    raw = tf.raw_ops
    return (raw.RandomUniform(shape=shape, dtype=tf.float32), raw.RandomStandardNormal(shape=shape, dtype=tf.float32),
            raw.TruncatedNormal(shape=shape, dtype=tf.float32, seed=3, seed2=4),
            raw.RandomUniformInt(shape=shape, minval=tf.constant(-3), maxval=tf.constant(4)),
            raw.RandomUniform(shape=shape, dtype=tf.float64, seed=1))


@pytest.fixture(scope="module")
def random_ops_pb(model_store) -> Path:
    def build() -> bytes:
        import tensorflow as tf

        from tests.models.more_models import _freeze

        return _freeze(_random_ops, [tf.TensorSpec([2], tf.int32, name="in0")])

    return model_store.file("lowering_random_ops.pb", build)


@pytest.mark.parametrize("opset", [17, 21])
def test_random_ops_draw_from_tensorflows_distributions(opset, random_ops_pb):
    model = convert(random_ops_pb)
    proto = model_to_onnx(model, opset=opset)
    onnx.checker.check_model(proto, full_check=True)
    session = ort.InferenceSession(proto.SerializeToString(), providers=["CPUExecutionProvider"])
    shape = np.asarray([300, 200], np.int32)
    ours = session.run(None, {"in0": shape})
    theirs = list(source_runner(model.source).run({"in0": shape}).values())
    for mine, tfs in zip(ours, theirs):
        assert mine.shape == tfs.shape == (300, 200) and mine.dtype == tfs.dtype
        # 60 000 independent draws each: the two sample means (and deviations) differ by a normal error of
        # deviation sigma * sqrt(2 / n); six of those is a bound a correct lowering misses about once in 10^9 runs
        bound = 6 * float(tfs.std()) * np.sqrt(2 / tfs.size)
        assert abs(float(mine.mean()) - float(tfs.mean())) < bound
        assert abs(float(mine.std()) - float(tfs.std())) < bound
    uniform, normal, truncated, ints, uniform64 = ours
    assert 0 <= uniform.min() and uniform.max() < 1 and 0 <= uniform64.min() and uniform64.max() < 1
    assert len(np.unique(uniform)) > 50_000 and abs(float(normal.std()) - 1) < 0.02
    assert -2 <= truncated.min() and truncated.max() <= 2 and abs(float(truncated.std()) - 0.8796) < 0.02
    assert sorted(np.unique(ints)) == list(range(-3, 4))
    fresh = ort.InferenceSession(proto.SerializeToString(), providers=["CPUExecutionProvider"])
    again = fresh.run(None, {"in0": shape})  # a seeded op repeats its sequence in a new session, as in TF
    assert np.array_equal(again[2], truncated)


def test_random_ops_past_opset_21_fail_saying_which_opset_works(random_ops_pb):
    with pytest.raises(SerdeError) as info:
        model_to_onnx(convert(random_ops_pb), opset=22)
    message = str(info.value)
    for op_type in ("RandomUniform", "RandomStandardNormal", "TruncatedNormal", "RandomUniformInt"):
        assert f"tf.{op_type} x" in message
    assert "have no onnxruntime kernel; export at --opset 21 or lower" in message


def _special_values(dtype: type) -> tuple[np.ndarray, np.ndarray]:
    """Every pair of ±inf, ±0, ±1.5, ±1e-30, ±1e30 (±1e-3, ±1e3 in float16), NaN and a few others (no quotient is
    subnormal: TensorFlow flushes those to zero on CPU, onnxruntime does not)."""
    tiny, huge = (1e-3, 1e3) if dtype == np.float16 else (1e-30, 1e30)
    values = np.asarray([np.inf, -np.inf, 0.0, -0.0, 1.5, -1.5, tiny, -tiny, huge, -huge, np.nan,
                         0.3, -0.7, 2.5, -123.0, 0.999, 1.001], dtype)
    y, x = np.meshgrid(values, values, indexing="ij")
    return y.astype(dtype), x.astype(dtype)


@pytest.mark.parametrize("opset", [17, 23])
@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64])
def test_atan2_at_infinities_zeros_and_nan_is_tensorflows_atan2(dtype, opset, frozen):
    import tensorflow as tf

    y, x = _special_values(dtype)
    path = frozen(f"atan2_special_{np.dtype(dtype).name}", lambda a, b: tf.math.atan2(a, b), (y, x), (0, 1))
    proto = model_to_onnx(convert(path), opset=opset)
    onnx.checker.check_model(proto, full_check=True)
    session = ort.InferenceSession(proto.SerializeToString(), providers=["CPUExecutionProvider"])
    (ours,) = session.run(None, {"in0": y, "in1": x})
    theirs = tf.math.atan2(y, x).numpy()
    assert ours.dtype == theirs.dtype and ours.shape == theirs.shape
    rtol = {np.float16: 1e-3, np.float32: 1e-6, np.float64: 1e-14}[dtype]
    for i, j in zip(*np.nonzero(~(np.isclose(ours, theirs, rtol=rtol, atol=0, equal_nan=True)
                                    & (np.signbit(ours) == np.signbit(theirs)) | np.isnan(theirs) & np.isnan(ours)))):
        pytest.fail(f"atan2({y[i, j]}, {x[i, j]}) at opset {opset}: ours {ours[i, j]}, TensorFlow {theirs[i, j]}")
    assert np.array_equal(np.isnan(ours), np.isnan(theirs))
    assert np.isclose(theirs[0, 0], np.pi / 4) and np.isclose(theirs[1, 1], -3 * np.pi / 4)  # the cases once wrong


def test_float64_atan2_is_exact_to_a_few_ulps_over_many_magnitudes(frozen):
    import tensorflow as tf

    rng = np.random.default_rng(11)
    y, x = (rng.standard_normal(20_000) * 10 ** rng.uniform(-6, 6, 20_000) for _ in range(2))
    path = frozen("atan2_float64_wide", lambda a, b: tf.math.atan2(a, b), (y, x), (0,))
    session = ort.InferenceSession(model_to_onnx(convert(path)).SerializeToString(), providers=["CPUExecutionProvider"])
    (ours,) = session.run(None, {"in0": y, "in1": x})
    theirs = tf.math.atan2(y, x).numpy()
    assert np.max(np.abs(ours - theirs) / np.spacing(np.abs(theirs))) <= 8
