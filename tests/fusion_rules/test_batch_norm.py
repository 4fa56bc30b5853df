"""BatchNormFusion: written-out inference batch norms with constant statistics fuse (Keras, tf.nn, NCHW by
hand), layer norms are left alone, look-alikes / computed statistics / escaping values are refused with
the reason, and each fused BatchNorm computes what it replaces."""

from __future__ import annotations

import numpy as np
import pytest

from scopefusion.dialects.fused.batch_norm import definition
from scopefusion.fusion_rules import BUILTIN_RULES
from scopefusion.fusion_rules.batch_norm import PASS
from tests.fusion_rules.harness import check_fusions

TOL = 1e-5


def _fused(report, rule="BatchNormFusion"):
    return {a.name: a for a in report.model.fusion_run.accepted if a.pass_name == rule}


def _refused(report, rule="BatchNormFusion"):
    return {r.name: r.reason for r in report.model.fusion_run.refused if r.pass_name == rule}


def test_registered_general():
    assert PASS in BUILTIN_RULES and PASS.general and PASS.name == "BatchNormFusion"


@pytest.fixture(scope="module")
def cases(bn_tf1_pb):
    return check_fusions(bn_tf1_pb, "BatchNorm")


def test_batch_norms_fused(cases):
    fused = _fused(cases)
    assert list(fused) == ["bn1/batchnorm", "bn2_out"]
    assert fused["bn1/batchnorm"].attrs == {"epsilon": pytest.approx(1e-3), "data_format": "NHWC", "is_training": False}
    # bn2 has no scope: found at the root; its [4, 1, 1] statistics broadcast along axis 1.
    assert fused["bn2_out"].attrs == {"epsilon": pytest.approx(1e-5), "data_format": "NCHW", "is_training": False}
    assert [i.producer for i in fused["bn2_out"].inputs] == ["planes", "bn2_scale", "bn2_offset", "bn2_mean", "bn2_var"]
    assert len(cases.errors) == 2 and cases.max_error <= TOL


def test_refusals(cases, bn_tf1_pb, run_passes):
    refused = _refused(cases)
    assert set(refused) == {"bn3/batchnorm", "bn4/batchnorm", "bn5/batchnorm"}
    assert refused["bn3/batchnorm"].startswith("bn3/batchnorm/ does not compute a batch norm: nearest miss")
    assert refused["bn4/batchnorm"] == "bn4/batchnorm/add_1 is not a batch norm: the variance is computed (Max), not a constant"
    assert refused["bn5/batchnorm"].startswith("intermediate value bn5/batchnorm/mul:0 is consumed outside the fusion")
    manager, _ = run_passes(bn_tf1_pb)
    why = {e.pass_name: e.reason for e in manager.explain("bn3/batchnorm/")}["BatchNormFusion"]
    assert why.startswith("matched, but the result was refused: bn3/batchnorm/ does not compute a batch norm")


def test_keras_batch_normalization(tf_convnet_pb):
    report = check_fusions(tf_convnet_pb, "BatchNorm")
    (fusion,) = _fused(report).values()
    assert fusion.name == "small_convnet_1/bn_1/batchnorm"
    assert fusion.attrs == {"epsilon": pytest.approx(1e-3), "data_format": "NHWC", "is_training": False}
    assert fusion.inputs[0].producer == "small_convnet_1/conv_1/BiasAdd"
    assert report.max_error <= TOL
    assert report.model.op_counts()["fused.BatchNorm"] == 1


def test_layer_norm_halves_left_alone(tf_bert_pb, run_passes):
    _, report = run_passes(tf_bert_pb)
    bn = report["BatchNormFusion"]
    assert len(bn.scopes_matched) == 5  # every LayerNorm/batchnorm/ scope is a candidate...
    assert not bn.results_accepted and not bn.results_refused  # ...whose mean is computed: a layer norm


def test_fused_op_reference():
    rng = np.random.default_rng(0)
    x = rng.standard_normal((2, 4, 3, 3)).astype(np.float32)
    scale, offset, mean = (rng.standard_normal(4).astype(np.float32) for _ in range(3))
    variance = np.abs(rng.standard_normal(4)).astype(np.float32)
    (y,) = definition().reference([x, scale, offset, mean, variance], {"epsilon": 1e-3, "data_format": "NCHW", "is_training": False})
    c = (slice(None), None, None)
    want = (x - mean[c]) / np.sqrt(variance[c] + 1e-3) * scale[c] + offset[c]
    assert np.max(np.abs(y - want)) < 1e-5
    nhwc = np.ascontiguousarray(x.transpose(0, 2, 3, 1))
    (z,) = definition().reference([nhwc, scale, offset, mean, variance], {"epsilon": 1e-3, "data_format": "NHWC", "is_training": False})
    assert np.max(np.abs(z.transpose(0, 3, 1, 2) - want)) < 1e-5
