"""``scopefusion diff A B``: models converted the same way, or saved GE models, compared structurally."""

from __future__ import annotations

import json
import subprocess
import sys

from typer.testing import CliRunner

from scopefusion.cli import app
from scopefusion.cli_inspect import load_graph
from scopefusion.testing import write_golden


def invoke(*args: str):
    return CliRunner().invoke(app, [str(a) for a in args], env={"COLUMNS": "200"})


def test_a_model_equals_its_saved_ge_and_ge_text_forms(gelu_files, tmp_path):
    rules = ("--rules", gelu_files["rules"])
    for fmt, name in (("ge", "m.ge"), ("ge-text", "m.ge-text")):
        saved = invoke("convert", gelu_files["model"], "-o", tmp_path / name, "--format", fmt, "-q", *rules)
        assert saved.exit_code == 0, saved.output
    result = invoke("diff", gelu_files["model"], tmp_path / "m.ge", *rules)
    assert result.exit_code == 0, result.output
    assert result.stdout.splitlines()[-1] == "graphs are equal (8 nodes matched)"
    both = invoke("diff", tmp_path / "m.ge-text", tmp_path / "m.ge", "--check-names")
    assert both.exit_code == 0, both.output
    golden = tmp_path / "m.golden.txt"
    write_golden(golden, load_graph(tmp_path / "m.ge", {}))
    assert invoke("diff", golden, tmp_path / "m.ge-text", "--check-names").exit_code == 0
    # saved without the user rules, the builtins fuse differently (or not at all): a difference
    assert invoke("diff", gelu_files["model"], tmp_path / "m.ge", "--disable-pass", "GeluFusion").exit_code == 1


def test_a_changed_weight_is_an_attribute_difference_within_tolerance(gelu_files, tmp_path):
    out = tmp_path / "diff.json"
    result = invoke("diff", gelu_files["model"], gelu_files["shifted"], "--json", out)
    assert result.exit_code == 1, result.output
    assert "graphs differ: 1 attribute difference" in result.stdout
    assert "%block_1.dense.weight  value" in result.stdout and "elements differ" in result.stdout
    data = json.loads(out.read_text())
    assert data["equal"] is False and [d["name"] for d in data["attrs"]] == ["value"]
    assert data["attrs"][0]["a"]["name"] == "block_1.dense.weight"
    assert invoke("diff", gelu_files["model"], gelu_files["shifted"], "--atol", "0.0011").exit_code == 0
    assert invoke("diff", gelu_files["model"], gelu_files["shifted"], "--no-attrs").exit_code == 0


def test_an_extra_op_is_the_first_unmatched_node(gelu_files):
    result = invoke("diff", gelu_files["model"], gelu_files["relu"], "--limit", "3", "--rules", gelu_files["rules"])
    assert result.exit_code == 1, result.output
    assert result.stdout.splitlines()[2:] == [
        "graphs differ: 0 unmatched nodes in a, 1 in b (8 nodes matched)",
        "first unmatched node in b: %/head/Relu = onnx.Relu  at return[0] <- %/output/Identity.in[0]",
        "    why: op fused.Gelu vs onnx.Relu",
        "    compared with a's %block_1/gelu = fused.Gelu",
    ]


def test_names_matter_only_with_check_names(gelu_files):
    assert invoke("diff", gelu_files["model"], gelu_files["renamed"]).exit_code == 0
    result = invoke("diff", gelu_files["model"], gelu_files["renamed"], "--check-names")
    assert result.exit_code == 1
    assert "why: name '/output/Identity' vs '/other_output/Identity'" in result.stdout


def test_bad_input_exits_2_without_a_traceback(gelu_files, tmp_path):
    garbage = tmp_path / "broken.ge"
    garbage.write_bytes(b"\xff\xfe\x00garbage" * 20)
    missing = invoke("diff", gelu_files["model"], tmp_path / "missing.ge")
    assert missing.exit_code == 2 and "cannot read" in missing.stderr and "missing.ge" in missing.stderr
    assert invoke("diff", gelu_files["model"], gelu_files["model"], "--rtol", "-1").exit_code == 2
    proc = subprocess.run([sys.executable, "-m", "scopefusion", "diff", str(garbage), str(gelu_files["model"])],
                          capture_output=True, text=True)  # fmt: skip
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert "broken.ge" in proc.stderr and proc.stdout == ""
