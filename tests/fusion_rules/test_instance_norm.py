"""InstanceNormFusion: instance norms after convolutions fuse (scoped and at the root), look-alikes and
escaping statistics are refused with the reason, and each fused InstanceNorm computes what it replaces."""

from __future__ import annotations

import numpy as np
import pytest

from scopefusion.dialects.fused.instance_norm import definition, spatial_axes
from scopefusion.fusion_rules import BUILTIN_RULES
from scopefusion.fusion_rules.instance_norm import PASS
from tests.fusion_rules.harness import check_fusions

TOL = 1e-5


def _fused(report, rule="InstanceNormFusion"):
    return {a.name: a for a in report.model.fusion_run.accepted if a.pass_name == rule}


def _refused(report, rule="InstanceNormFusion"):
    return {r.name: r.reason for r in report.model.fusion_run.refused if r.pass_name == rule}


def test_registered_general():
    assert PASS in BUILTIN_RULES and PASS.general and PASS.name == "InstanceNormFusion"


@pytest.fixture(scope="module")
def cases(in_tf1_pb):
    return check_fusions(in_tf1_pb, "InstanceNorm")


def test_instance_norms_fused(cases):
    fused = _fused(cases)
    # block1: moments + batch_normalization; block2: (h - mean) / sqrt(var + eps); in3_*: ops at the root.
    assert list(fused) == ["block1/instance_norm", "block2/InstanceNorm", "in3_out"]
    assert [f.attrs for f in fused.values()] == [
        {"data_format": "NHWC", "epsilon": pytest.approx(eps)} for eps in (1e-5, 1e-3, 1e-6)
    ]
    assert [[i.producer for i in f.inputs] for f in fused.values()] == [
        ["conv0", "block1/instance_norm/g1", "block1/instance_norm/b1"],
        ["conv1", "block2/InstanceNorm/g2", "block2/InstanceNorm/b2"],
        ["conv2", "g3", "b3"],
    ]
    assert len(cases.errors) == 3 and cases.max_error <= TOL
    assert cases.model.op_counts()["fused.InstanceNorm"] == 3


def test_look_alike_and_escape_refused(cases, in_tf1_pb, run_passes):
    refused = _refused(cases)
    assert set(refused) == {"block4/instance_norm", "block5/instance_norm"}
    assert refused["block4/instance_norm"].startswith("block4/instance_norm/ does not compute an instance norm: nearest miss")
    assert refused["block5/instance_norm"].startswith(
        "intermediate value block5/instance_norm/moments/variance:0 is consumed outside the fusion by out_escape_var"
    )
    # The layer norm rule leaves the spatial moments alone: it neither fuses nor refuses them.
    assert not [a for a in cases.model.fusion_run.accepted if a.pass_name == "LayerNormFusion"]
    assert _refused(cases, "LayerNormFusion") == {}
    manager, _ = run_passes(in_tf1_pb)
    why = {e.pass_name: e.reason for e in manager.explain("block4/instance_norm/moments/")}
    assert why["InstanceNormFusion"].startswith("matched, but the result was refused: block4/instance_norm/ does not compute")
    assert "variance is Mean, expected Add|AddV2" in why["InstanceNormFusion"]


def test_layer_norms_are_not_instance_norms(tf_bert_pb, tf_convnet_pb, run_passes):
    for path in (tf_bert_pb, tf_convnet_pb):
        _, report = run_passes(path)
        assert report["InstanceNormFusion"].scopes_matched  # the moments scopes are candidates...
        assert not report["InstanceNormFusion"].results_accepted  # ...but reduce over the last axis only
        assert not report["InstanceNormFusion"].results_refused


def test_fused_op_reference_and_axes():
    assert spatial_axes(4, "NHWC") == (1, 2) and spatial_axes(4, "NCHW") == (2, 3) and spatial_axes(5, "NHWC") == (1, 2, 3)
    with pytest.raises(ValueError, match="rank 3 or more"):
        spatial_axes(2, "NHWC")
    with pytest.raises(ValueError, match="data_format is 'HWC'"):
        spatial_axes(4, "HWC")
    rng = np.random.default_rng(0)
    x = rng.standard_normal((2, 3, 3, 4)).astype(np.float32)
    gamma, beta = rng.standard_normal(4).astype(np.float32), rng.standard_normal(4).astype(np.float32)
    (y,) = definition().reference([x, gamma, beta], {"data_format": "NHWC", "epsilon": 1e-5})
    mean, var = x.mean((1, 2), keepdims=True), x.var((1, 2), keepdims=True)
    assert np.max(np.abs(y - ((x - mean) / np.sqrt(var + 1e-5) * gamma + beta))) < 1e-5
    planes = np.ascontiguousarray(x.transpose(0, 3, 1, 2))
    (z,) = definition().reference([planes, gamma.reshape(4, 1, 1), beta.reshape(4, 1, 1)], {"data_format": "NCHW", "epsilon": 1e-5})
    assert np.max(np.abs(z.transpose(0, 2, 3, 1) - y)) < 1e-5
