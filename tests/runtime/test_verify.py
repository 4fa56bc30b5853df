"""``verify`` and ``scopefusion verify``: per-output errors, profiles, exit codes."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest

from scopefusion.verify import make_inputs, verify

BERT_INPUTS = ("input_ids", "input_mask", "token_type_ids")


def test_verify_reports_each_output_and_profile(tf_bert_pb):
    report = verify(tf_bert_pb, input_shapes=[{n: [1, 8] for n in BERT_INPUTS}, {n: [2, 8] for n in BERT_INPUTS}])
    assert report.ok and [c.profile for c in report.checks] == [0, 1]
    names = {o.name for c in report.checks for o in c.outputs}
    from scopefusion.parser import load

    assert names == {o.name for o in load(tf_bert_pb).outputs} and "bert/pooler/dense/Tanh" in names
    assert report.max_abs <= 1e-5
    assert json.loads(json.dumps(report.to_dict()))["ok"] is True


@pytest.mark.parametrize("fixture", ["onnx_attention", "onnx_control_flow", "saved_model_keras", "saved_model_module", "tf_mobilenet_pb"])
def test_verify_matches_on_real_models(fixture, request):
    report = verify(request.getfixturevalue(fixture))
    assert report.ok, report.to_dict()


def test_token_ids_are_drawn_below_the_vocabulary(tf_bert_pb):
    from scopefusion.convert import convert

    model = convert(tf_bert_pb, input_shapes={n: [4, 8] for n in BERT_INPUTS})
    feeds = make_inputs(model.profiles[0].graph, seed=0)
    vocab = 100  # tests/models/tf_models.bert_encoder_tf1's default vocabulary
    assert feeds["input_ids"].max() < vocab and feeds["input_ids"].max() > 2
    assert set(np.unique(feeds["input_mask"])) <= {0, 1}


def cli(*args):
    return subprocess.run([sys.executable, "-m", "scopefusion", "verify", *args], capture_output=True, text=True)


def test_cli_exit_codes(onnx_attention, tmp_path):
    ok = cli(str(onnx_attention), "--json", str(tmp_path / "v.json"))
    assert ok.returncode == 0, ok.stderr
    assert "max abs" in ok.stdout and json.loads((tmp_path / "v.json").read_text())["ok"]
    strict = cli(str(onnx_attention), "--rtol", "0", "--atol", "0")  # float reassociation: not bit-exact
    assert strict.returncode == 1 and "MISMATCH" in strict.stdout
    missing = cli(str(tmp_path / "none.onnx"))
    assert missing.returncode == 2 and "Traceback" not in missing.stderr
    x = np.ones((2, 4, 16), np.float32)
    np.save(tmp_path / "x.npy", x)
    given = cli(str(onnx_attention), "--input", f"x={tmp_path / 'x.npy'}")
    assert given.returncode == 0, given.stderr
    bad = cli(str(onnx_attention), "--input", "x")
    assert bad.returncode == 2 and "NAME=file.npy" in bad.stderr
