"""The command line: exit codes, outputs, and errors without tracebacks."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from scopefusion.cli import BadInput, parse_input_shape

REPO = Path(__file__).resolve().parent.parent


def run(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "scopefusion", *args], capture_output=True, text=True, cwd=cwd)


def test_parse_input_shape_follows_atc_syntax():
    assert parse_input_shape("input_ids:1,128;mask:1,128") == {"input_ids": (1, 128), "mask": (1, 128)}
    assert parse_input_shape("input:0:2,-1") == {"input:0": (2, -1)}
    assert parse_input_shape("scalar:") == {"scalar": ()}
    for bad in ("nocolon", "x:1,a", "x:1;x:2", ";", "x:-3"):
        with pytest.raises(BadInput):
            parse_input_shape(bad)


def test_convert_writes_model_and_report(tf_bert_pb, tmp_path):
    out, report = tmp_path / "m.ge", tmp_path / "r.json"
    shape = "input_ids:2,8;input_mask:2,8;token_type_ids:2,8"
    proc = run("convert", str(tf_bert_pb), "-o", str(out), "--input-shape", shape, "--input-shape", shape.replace("2,", "3,"),
               "--report", str(report))  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert out.stat().st_size > 0
    data = json.loads(report.read_text())
    assert [p["inputs"]["input_ids"] for p in data["profiles"]] == [[2, 8], [3, 8]]
    assert data["uninferred_ops"] == [] and data["ops"]["ge.Data"] == 3
    assert "Shape profiles" in proc.stdout and "Memory plans" in proc.stdout and "Fusions" in proc.stdout


@pytest.mark.parametrize(
    "extra, message",
    [
        (["--input-shape", "nope:1,8"], "'nope', which is not a graph input"),
        (["--input-shape", "input_ids:1,8,3"], "has rank 2"),
        (["--input-shape", "input_ids:x"], "must be integers"),
        (["--format", "tflite"], "--format 'tflite' is not one of ge, ge-text, onnx"),
        (["--enable-pass", "NoSuchPass"], "NoSuchPass"),
    ],
)
def test_bad_input_exits_2_without_traceback_or_output(tf_bert_pb, tmp_path, extra, message):
    out = tmp_path / "m.ge"
    proc = run("convert", str(tf_bert_pb), "-o", str(out), *extra)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert message in " ".join(proc.stderr.split())
    assert "Traceback" not in proc.stderr
    assert not out.exists() and list(tmp_path.iterdir()) == []


def test_a_rules_file_that_fails_to_import_exits_2(tf_bert_pb, tmp_path):
    rules = tmp_path / "rules.py"
    rules.write_text("import no_such_module_here\n")
    out = tmp_path / "m.ge"
    proc = run("convert", str(tf_bert_pb), "-o", str(out), "--rules", str(rules))
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert "rules.py" in proc.stderr and not out.exists()


def test_a_corrupt_model_exits_2(tmp_path):
    bad = tmp_path / "bad.pb"
    bad.write_bytes(b"\xff\x00garbage" * 10)
    proc = run("convert", str(bad), "-o", str(tmp_path / "o.ge"))
    assert proc.returncode == 2 and "Traceback" not in proc.stderr and "bad.pb" in proc.stderr
    assert not (tmp_path / "o.ge").exists()


def test_help_is_quick_and_does_not_import_tensorflow():
    code = "import sys\nfrom scopefusion.cli import main\ntry:\n    main(['--help'])\nexcept SystemExit:\n    pass\nprint('tensorflow' in sys.modules)"
    start = time.perf_counter()
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    elapsed = time.perf_counter() - start
    assert proc.stdout.strip().endswith("False") and "convert" in proc.stdout
    assert elapsed < 5  # generous: the 0.5 s goal is measured by bench/bench_cli_startup.py, not here


def test_a_rule_with_an_unknown_fused_type_is_refused_with_a_reason(tmp_path):
    rules = tmp_path / "typo_rules.py"
    rules.write_text(
        "from scopefusion.scope import NodeOpTypeFeature, ScopePattern, scope_rule\n"
        "@scope_rule(ScopePattern('norm', NodeOpTypeFeature('Rsqrt', 1)), name='TypoNorm', type='Reluu', general=True)\n"
        "def typo(scope, result, graph):\n"
        "    return None\n"
        "FUSION_RULES = [typo]\n"
    )
    out, report = tmp_path / "m.ge", tmp_path / "r.json"
    model = REPO / "testdata" / "bert_tiny.pb"
    proc = run("convert", str(model), "-o", str(out), "--rules", str(rules), "--report", str(report))
    assert proc.returncode == 0, proc.stderr
    refused = json.loads(report.read_text())["refused"]["TypoNorm"]
    assert refused and all(": unknown fused op type 'Reluu'; did you mean" in r for r in refused)
    assert "TypoNorm" not in json.loads(report.read_text())["fusions"]
