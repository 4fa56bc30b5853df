"""L2NormalizeFusion: tf.math.l2_normalize and PyTorch's F.normalize (ONNX) fuse with their axes and epsilon,
look-alikes and escaping sums are refused with the reason, and each fused L2Normalize computes what it
replaces, also where the epsilon bound is what decides the result."""

from __future__ import annotations

import numpy as np
import pytest

from scopefusion.dialects.fused.l2_normalize import definition
from scopefusion.fusion_rules import BUILTIN_RULES
from scopefusion.fusion_rules.l2_normalize import PASS
from tests.fusion_rules.harness import check_fusions, fusion_errors

TOL = 1e-5


def _fused(report, rule="L2NormalizeFusion"):
    return {a.name: a for a in report.model.fusion_run.accepted if a.pass_name == rule}


def _refused(report, rule="L2NormalizeFusion"):
    return {r.name: r.reason for r in report.model.fusion_run.refused if r.pass_name == rule}


def test_registered_general():
    assert PASS in BUILTIN_RULES and PASS.general and PASS.name == "L2NormalizeFusion"


@pytest.fixture(scope="module")
def tf_cases(l2_tf1_pb):
    return check_fusions(l2_tf1_pb, "L2Normalize")


def test_tf_l2_normalize(tf_cases):
    fused = _fused(tf_cases)
    # tf.math.l2_normalize names its last op "l2_normalize", beside its scope; embed_norm has no l2_normalize scope.
    assert list(fused) == ["l2_normalize", "embed_norm"]
    assert fused["l2_normalize"].attrs == {"axis": [-1], "epsilon": pytest.approx(1e-12)}
    assert fused["embed_norm"].attrs == {"axis": [1, 2], "epsilon": pytest.approx(1e-6)}
    assert tf_cases.max_error <= TOL


def test_tf_refusals(tf_cases, l2_tf1_pb, run_passes):
    refused = _refused(tf_cases)
    assert set(refused) == {"bad/l2_normalize", "escape/l2_normalize"}
    assert refused["bad/l2_normalize"].startswith("bad/l2_normalize/ does not compute an L2 normalization: nearest miss")
    assert "bad/l2_normalize/add is AddV2, expected Maximum" in refused["bad/l2_normalize"]
    assert refused["escape/l2_normalize"].startswith("intermediate value escape/l2_normalize/Sum:0 is consumed outside")
    manager, _ = run_passes(l2_tf1_pb)
    why = {e.pass_name: e.reason for e in manager.explain("bad/l2_normalize/")}["L2NormalizeFusion"]
    assert why.startswith("matched, but the result was refused: bad/l2_normalize/ does not compute")


def test_tf_epsilon_bound(l2_tf1_pb, tf_cases):
    # Inputs of 1e-5: embed_norm's squared sums (~1e-10) fall below its epsilon 1e-6, which then decides y.
    tiny = np.random.default_rng(7).standard_normal((3, 8)).astype(np.float32) * 1e-5
    errors = fusion_errors(l2_tf1_pb, "L2Normalize", model=tf_cases.model, feeds={"features": tiny})
    assert errors["embed_norm"] <= 1e-7 and errors["l2_normalize"] <= TOL


@pytest.fixture(scope="module")
def onnx_cases(l2_onnx):
    return check_fusions(l2_onnx, "L2Normalize")


def test_onnx_normalize(onnx_cases, l2_onnx):
    fused = _fused(onnx_cases)
    assert list(fused) == ["head", "y1"]
    # PyTorch bounds the norm: max(||x||, eps) = sqrt(max(||x||², eps²)).
    assert fused["head"].attrs == {"axis": [-1], "epsilon": pytest.approx(1e-24)}
    assert fused["y1"].attrs == {"axis": [1, 2], "epsilon": pytest.approx(1e-8)}
    assert sorted(fused["head"].claimed) == ["/head/Clip", "/head/Div", "/head/Expand", "/head/ReduceL2", "/head/Shape", "eps0"]
    assert onnx_cases.max_error <= TOL
    # Inputs of 1e-7: y1's norms (~5e-7) fall below its eps 1e-4; y1 = x / 1e-4 only with epsilon = eps².
    tiny = np.random.default_rng(8).standard_normal((2, 3, 8)).astype(np.float32) * 1e-7
    errors = fusion_errors(l2_onnx, "L2Normalize", model=onnx_cases.model, feeds={"x": tiny})
    assert max(errors.values()) <= 1e-7


def test_fused_op_reference():
    x = np.array([[3.0, 4.0], [0.0, 1e-8]], np.float32)
    (y,) = definition().reference([x], {"axis": (-1,), "epsilon": 1e-12})
    np.testing.assert_allclose(y, [[0.6, 0.8], [0.0, 1e-8 / 1e-6]], rtol=1e-6)
    (z,) = definition().reference([x], {"axis": (0, 1), "epsilon": 1e-12})
    np.testing.assert_allclose(z, x / np.sqrt(25.0), rtol=1e-6)
