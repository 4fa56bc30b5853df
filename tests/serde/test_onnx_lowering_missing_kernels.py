"""Element-wise ops on the dtypes onnxruntime has no kernel for (float64 Tan, Asin… Erf, Elu, Softplus; float16
IsInf): the export writes compositions that onnxruntime runs, and they compute what TensorFlow computes, at
opsets 17 and 23."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import pytest

from scopefusion.convert import convert
from scopefusion.runtime.source_runner import source_runner

from ._onnx_runs import checked_export, ort_outputs

ANY = np.asarray([0.0, -0.0, 1e-10, -1e-10, 0.3, -0.7, 1.0, -2.5, 7.0, -20.0, 40.0, -40.0, 1e20, -1e20, np.inf,
                  -np.inf, np.nan])  # fmt: skip
UNIT = np.asarray([0.0, -0.0, 1e-12, -1e-9, 0.25, -0.5, 0.9, -0.999, 1 - 1e-15, 1.0, -1.0, 1.5, -3.0, np.nan])
FROM_ONE = np.asarray([1.0, 1 + 1e-12, 1.5, 3.0, 1e5, 1e20, 1e300, np.inf, 0.5, np.nan])


NAMES = ("tan", "atan", "sinh", "cosh", "asinh", "erf", "erfc", "elu", "selu", "softplus", "softsign", "asin", "acos",
         "atanh", "acosh")  # fmt: skip


def _float64_math(x, unit, from_one):
    import tensorflow as tf

    return (tf.math.tan(x), tf.math.atan(x), tf.math.sinh(x), tf.math.cosh(x), tf.math.asinh(x), tf.math.erf(x),
            tf.math.erfc(x), tf.nn.elu(x), tf.nn.selu(x), tf.math.softplus(x), tf.math.softsign(x),
            tf.math.asin(unit), tf.math.acos(unit), tf.math.atanh(unit), tf.math.acosh(from_one))


def _float16_checks(x):
    import tensorflow as tf

    return {"is_inf": tf.math.is_inf(x), "is_finite": tf.math.is_finite(x)}


@pytest.fixture(scope="module")
def float64_math_pb(model_store) -> Path:
    def build() -> bytes:
        import tensorflow as tf

        from tests.models.more_models import _freeze

        return _freeze(_float64_math, [tf.TensorSpec([None], tf.float64, name=n) for n in ("x", "unit", "from_one")])

    return model_store.file("lowering_float64_math.pb", build)


@pytest.fixture(scope="module")
def float16_checks_pb(model_store) -> Path:
    def build() -> bytes:
        import tensorflow as tf

        from tests.models.more_models import _freeze

        return _freeze(_float16_checks, [tf.TensorSpec([None], tf.float16, name="x")])

    return model_store.file("lowering_float16_checks.pb", build)


def _run_both(path: Path, feeds: dict[str, np.ndarray], opset: int) -> tuple[dict, dict, onnx.ModelProto]:
    model = convert(path)
    proto = checked_export(model, opset)
    ours = ort_outputs(proto, feeds)
    return ours, source_runner(model.source).run(feeds), proto


@pytest.mark.parametrize("opset", [17, 23])
def test_float64_math_runs_in_onnxruntime_as_tensorflow_computes_it(opset, float64_math_pb):
    feeds = {"x": ANY, "unit": UNIT, "from_one": FROM_ONE}
    ours, theirs, proto = _run_both(float64_math_pb, feeds, opset)
    assert list(ours) == list(theirs) and len(ours) == len(NAMES)
    no_kernel = {"Tan", "Asin", "Acos", "Atan", "Sinh", "Cosh", "Asinh", "Acosh", "Atanh", "Elu", "Selu", "Softplus",
                 "Softsign"}  # fmt: skip
    assert not {n.op_type for n in proto.graph.node} & no_kernel
    for name, got, expected in zip(NAMES, ours.values(), theirs.values()):
        where = f"{name} at opset {opset}"
        assert got.dtype == expected.dtype == np.float64, where
        if name.startswith("erf"):
            # erf runs in float32 (relative error 1.2e-7); TensorFlow's float64 erf gives NaN at ±inf
            finite = np.isfinite(ANY)
            np.testing.assert_allclose(got[finite], expected[finite], rtol=3e-7, atol=1e-7, err_msg=where)
            continue
        # a few float64 ulps, or within 1e-15 of zero where a difference of exponentials cancels
        np.testing.assert_allclose(got, expected, rtol=1e-12, atol=1e-15, err_msg=where)
        nonzero = (expected != 0) & ~np.isnan(expected)  # NaN signs are not specified
        assert np.array_equal(np.signbit(got[nonzero]), np.signbit(expected[nonzero])), where


@pytest.mark.parametrize("opset", [17, 23])
def test_float16_is_inf_runs_in_onnxruntime(opset, float16_checks_pb):
    x = np.asarray([0, -1.5, 65504, -65504, np.inf, -np.inf, np.nan], np.float16)
    ours, theirs, _ = _run_both(float16_checks_pb, {"x": x}, opset)
    for key, expected in theirs.items():
        np.testing.assert_array_equal(ours[key], expected, err_msg=key)
