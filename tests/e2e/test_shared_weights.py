"""Shape profiles share one copy of the weights: ResNet50 with 20 profiles stays one copy of its weights,
reads back whole, and round-trips through ``diff``; a model too large for one file is refused before writing."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from scopefusion.convert import convert
from scopefusion.errors import SerdeError
from scopefusion.serde import shared_weights
from scopefusion.serde.ge import model_from_bytes
from scopefusion.testing import graph_diff

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.slow
def test_resnet50_with_20_profiles_writes_its_weights_once_and_round_trips(tf_resnet50_pb, tmp_path):
    profiles = [{"input_0": [batch, 64, 64, 3]} for batch in range(1, 21)]
    model = convert(tf_resnet50_pb, input_shapes=profiles)
    weights = sum(n.attrs.as_tensor("value").nbytes for n in model.graph.nodes if n.op == "ge.Const")
    out = tmp_path / "resnet50.ge"
    model.save(out)
    assert weights < out.stat().st_size < weights * 1.2
    contents = model_from_bytes(out.read_bytes())
    assert len(contents.graphs) == 21
    for profile, read in zip(model.profiles, contents.graphs[1:]):
        diff = graph_diff(read, profile.graph, check_names=True)
        assert diff.equal, diff.format()
    env = dict(os.environ, PYTHONPATH=str(REPO))
    proc = subprocess.run([sys.executable, "-m", "scopefusion", "diff", str(out), str(tf_resnet50_pb)],
                          capture_output=True, text=True, env=env)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_profiles_share_equal_constants_only(tmp_path):
    from tests.models import hostile_models

    path = tmp_path / "m.pb"
    path.write_bytes(hostile_models.splat_const((1, 3), input_shape=(-1, 3)))
    model = convert(path, input_shapes=[{"x": [2, 3]}, {"x": [4, 3]}])
    proto_bytes = model.to_bytes("ge")
    from scopefusion.serde import ge_ir_pb2

    proto = ge_ir_pb2.ModelDef.FromString(proto_bytes)
    marked = [op.name for g in proto.graph[1:] for op in g.op if shared_weights.SHARED_WEIGHT_ATTR in op.attr]
    assert marked == ["big", "big"]
    assert all(not op.attr["value"].t.data for g in proto.graph[1:] for op in g.op if op.name == "big")
    contents = model_from_bytes(proto_bytes)
    for graph in contents.graphs:
        const = next(n for n in graph.nodes if n.name == "big")
        assert np.array_equal(const.attrs.as_tensor("value"), np.full((1, 3), 1.5, np.float32))


def test_a_model_too_large_for_one_file_is_refused_before_writing(tmp_path, monkeypatch):
    from tests.models import hostile_models

    path = tmp_path / "m.pb"
    path.write_bytes(hostile_models.splat_const((64, 64)))
    model = convert(path, input_shapes=[{"x": [64, 64]}] * 3)
    monkeypatch.setattr(shared_weights, "MAX_MODEL_BYTES", 3 * 64 * 64 * 4)
    model.save(tmp_path / "fits.ge")  # one shared copy fits
    monkeypatch.setattr(shared_weights, "MAX_MODEL_BYTES", 64 * 64 * 4 - 1)
    with pytest.raises(SerdeError, match="more than a GE protobuf file can hold"):
        model.save(tmp_path / "too_big.ge")
    assert not (tmp_path / "too_big.ge").exists()
