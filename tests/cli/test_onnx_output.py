"""``convert -o``: the format from the file name, ONNX options (--opset, --keep-tf-ops), the report's ``onnx``
field, and a TF op without an ONNX lowering failing with exit 2 and no file."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import onnx
import pytest

from scopefusion.serde import ge_ir_pb2


def run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "scopefusion", *map(str, args)], capture_output=True, text=True)


def one_line(text: str) -> str:
    return " ".join(text.split())


@pytest.mark.parametrize("opset", [17, 23])
def test_an_onnx_name_writes_onnx_and_the_report_says_what(tf_bert_pb, tmp_path, opset):
    out, report = tmp_path / "bert.onnx", tmp_path / "r.json"
    proc = run("convert", tf_bert_pb, "-o", out, "--opset", opset, "--report", report)
    assert proc.returncode == 0, proc.stderr
    proto = onnx.load(str(out))
    onnx.checker.check_model(proto, full_check=True)
    field = json.loads(report.read_text())["onnx"]
    assert field["opset"] == opset and field["domains"] == {"ai.onnx": len(proto.graph.node)}
    assert field["nodes"] == len(proto.graph.node)
    assert field["transposes"] == sum(n.op_type == "Transpose" for n in proto.graph.node)
    assert "runs in onnxruntime" in one_line(proc.stdout)


@pytest.mark.parametrize("name, kind", [("m.ge", "ge"), ("m.ge.txt", "text"), ("m.pbtxt", "text")])
def test_ge_names_write_ge(tf_bert_pb, tmp_path, name, kind):
    out = tmp_path / name
    proc = run("convert", tf_bert_pb, "-o", out, "-q")
    assert proc.returncode == 0, proc.stderr
    data = out.read_bytes()
    if kind == "ge":
        assert ge_ir_pb2.ModelDef.FromString(data).graph
    else:
        assert data.decode("utf-8").lstrip().startswith(("name", "graph", "version", "attr"))


def test_a_contradicting_format_exits_2_without_output(tf_bert_pb, tmp_path):
    out = tmp_path / "m.onnx"
    proc = run("convert", tf_bert_pb, "-o", out, "--format", "ge")
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert "--format ge contradicts the output name" in one_line(proc.stderr) and not out.exists()


def test_an_unknown_ending_writes_ge_and_says_so(tf_bert_pb, tmp_path):
    out = tmp_path / "m.bin"
    proc = run("convert", tf_bert_pb, "-o", out, "-q")
    assert proc.returncode == 0, proc.stderr
    assert "written as GE bytes" in one_line(proc.stderr)
    assert ge_ir_pb2.ModelDef.FromString(out.read_bytes()).graph


@pytest.fixture(scope="module")
def random_pb(model_store) -> Path:
    """``y + uniform noise`` twice: tf.RandomUniform has no ONNX form onnxruntime runs at the default opset 23
    (only up to 21), frozen (inputs y, x float32 [3])."""

    def build() -> bytes:
        import tensorflow as tf

        from tests.models.more_models import _freeze

        specs = [tf.TensorSpec([3], tf.float32, name="y"), tf.TensorSpec([3], tf.float32, name="x")]
        return _freeze(lambda y, x: (tf.random.uniform([3]) + y, tf.random.uniform([3]) * x), specs)

    return model_store.file("random_uniform.pb", build)


def test_an_op_without_lowering_exits_2_naming_it_unless_kept(random_pb, tmp_path):
    out = tmp_path / "m.onnx"
    proc = run("convert", random_pb, "-o", out, "-q")
    assert proc.returncode == 2 and "Traceback" not in proc.stderr and not out.exists()
    message = one_line(proc.stderr)
    assert "have no ONNX lowering" in message and "tf.RandomUniform x2" in message and "--keep-tf-ops" in message
    assert "--opset 21 or lower" in message
    report = tmp_path / "r.json"
    kept = run("convert", random_pb, "-o", out, "--keep-tf-ops", "--report", report)
    assert kept.returncode == 0, kept.stderr
    assert "will not run" in one_line(kept.stderr) and "will NOT run in onnxruntime" in one_line(kept.stdout)
    field = json.loads(report.read_text())["onnx"]
    assert field["domains"]["tf"] >= 1 and "onnxruntime" in field["warning"]
    assert any(n.domain == "tf" for n in onnx.load(str(out)).graph.node)


def test_save_picks_the_format_from_the_name(tf_bert_pb, tmp_path):
    from scopefusion.convert import convert

    model = convert(Path(tf_bert_pb))
    model.save(tmp_path / "m.onnx", opset=18)
    assert onnx.load(str(tmp_path / "m.onnx")).opset_import[0].version == 18
    assert model.report()["onnx"]["opset"] == 18


def test_verify_runs_the_onnx_export_in_onnxruntime_per_profile(tf_bert_pb, tmp_path):
    from scopefusion import VerifyError
    from scopefusion.verify import verify

    shapes = [{n: (b, 8) for n in ("input_ids", "input_mask", "token_type_ids")} for b in (1, 4)]
    report = verify(tf_bert_pb, runtime="onnxruntime", input_shapes=shapes)
    assert report.ok and [c.profile for c in report.checks] == [0, 1]
    assert [c.inputs["input_ids"] for c in report.checks] == [(1, 8), (4, 8)]
    with pytest.raises(VerifyError, match="runtime 'tvm' is not one of reference, onnxruntime"):
        verify(tf_bert_pb, runtime="tvm")
    out = tmp_path / "v.json"
    proc = run("verify", tf_bert_pb, "--runtime", "onnxruntime", "--json", out)
    assert proc.returncode == 0, proc.stderr
    assert "in onnxruntime" in one_line(proc.stdout) and json.loads(out.read_text())["ok"] is True
