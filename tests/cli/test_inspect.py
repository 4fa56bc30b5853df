"""``scopefusion inspect`` and ``scopefusion passes``."""

from __future__ import annotations

import json
import subprocess
import sys

from typer.testing import CliRunner

from scopefusion.cli import app

WIDE = {"COLUMNS": "220"}


def invoke(*args: str):
    return CliRunner().invoke(app, list(args), env=WIDE)


def test_inspect_shows_the_scope_tree_with_op_counts_and_fusions(gelu_files):
    result = invoke("inspect", str(gelu_files["model"]), "--rules", str(gelu_files["rules"]))
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert lines[0].startswith("root  22 ops (Constant×6, Mul×4, Add×2, Div×2, …)")
    gelu = [line for line in lines if "block_0/gelu/" in line and "8 ops" in line]
    assert len(gelu) == 1 and "fused → Gelu by TestGelu" in gelu[0]
    assert "refused (TestGeluAgain): node /block_0/gelu/Constant is already claimed by fusion 'block_0/gelu'" in gelu[0]
    assert any("block_1/dense/  1 ops (MatMul×1)" in line for line in lines)
    table = {line.split("│")[1].strip(): line for line in lines if line.startswith("│ Test")}
    assert "changed" in table["TestGelu"] and "block_0/gelu/, block_1/gelu/" in table["TestGelu"]
    assert table["TestGeluAgain"].rstrip(" │").endswith("0 │       2")


def test_inspect_depth_limits_the_tree(gelu_files):
    result = invoke("inspect", str(gelu_files["model"]), "--depth", "1", "--rules", str(gelu_files["rules"]))
    assert result.exit_code == 0, result.output
    assert "block_0/  9 ops" in result.stdout and "block_0/gelu/" not in result.stdout.split("Fusion passes")[0]
    assert "2 sub-scope(s) below; show them with --depth 2" in result.stdout
    zero = invoke("inspect", str(gelu_files["model"]), "--depth", "0")
    assert "7 sub-scope(s) below; show them with --depth 1" in zero.stdout


def test_inspect_explain_gives_each_pass_its_reason(gelu_files):
    result = invoke("inspect", str(gelu_files["model"]), "--rules", str(gelu_files["rules"]), "--explain", "block_1/gelu/",
                    "--disable-pass", "GeluFusion")  # fmt: skip
    assert result.exit_code == 0, result.output
    why = result.stdout.split("Why block_1/gelu/ did or did not fuse")[1]
    rows = {line.split("│")[1].strip(): line.split("│")[3].strip() for line in why.splitlines() if line.startswith("│")}
    assert rows["TestGelu"] == "fused by 'block_1/gelu'"
    assert rows["TestGeluAgain"].startswith("matched, but the result was refused: node /block_1/gelu/Constant is already claimed")
    assert rows["GeluFusion"] == "disabled; turn it on with --enable-pass GeluFusion"
    other = invoke("inspect", str(gelu_files["model"]), "--rules", str(gelu_files["rules"]), "--explain", "block_1/dense/")
    rows = {line.split("│")[1].strip(): line.split("│")[3].strip() for line in other.stdout.split("Why")[1].splitlines() if line.startswith("│")}
    assert rows["TestGelu"] == "no match: set 0 batch 0 pattern 'gelu': NodeOpTypeFeature('Erf', 1): Erf is absent in block_1/dense/, expected exactly 1"


def test_inspect_bad_input_exits_2_with_one_sentence(gelu_files, tmp_path):
    unknown = invoke("inspect", str(gelu_files["model"]), "--explain", "no/such/scope/")
    assert unknown.exit_code == 2 and "no scope named 'no/such/scope/'" in unknown.stderr and unknown.stdout == ""
    proc = subprocess.run([sys.executable, "-m", "scopefusion", "inspect", str(tmp_path / "missing.onnx")], capture_output=True, text=True)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr and "missing.onnx" in proc.stderr
    assert len(proc.stderr.strip().splitlines()) <= 2


def test_passes_lists_user_rules_first_with_their_source(gelu_files):
    result = invoke("passes", "--rules", str(gelu_files["rules"]), "--json")
    assert result.exit_code == 0, result.output
    rows = json.loads(result.stdout)["passes"]
    assert [r["name"] for r in rows[:2]] == ["TestGelu", "TestGeluAgain"]
    assert rows[0] == {"order": 1, "name": "TestGelu", "general": True, "source": f"file:{gelu_files['rules']}", "enabled": True}
    assert all(r["source"] == "builtin" for r in rows[2:]) and [r["order"] for r in rows] == list(range(1, len(rows) + 1))
    table = invoke("passes", "--rules", str(gelu_files["rules"]), "--disable-pass", "TestGeluAgain")
    line = next(line for line in table.stdout.splitlines() if "TestGeluAgain" in line)
    assert [c.strip() for c in line.split("│")[1:6]] == ["2", "TestGeluAgain", f"file:{gelu_files['rules']}", "yes", "off"]
    assert f"{len(rows)} registered, {sum(r['enabled'] for r in rows) - 1} enabled" in table.stdout


def test_passes_reports_a_replaced_builtin_and_bad_rules(tmp_path):
    rules = tmp_path / "replace.py"
    rules.write_text("from scopefusion.scope import ScopeBasePass\n\nclass Mine(ScopeBasePass):\n    name = 'GeluFusion'\n    general = True\n\nFUSION_RULES = [Mine]\n")
    result = invoke("passes", "--rules", str(rules))
    assert result.exit_code == 0, result.output
    assert f"note: pass 'GeluFusion' from file:{rules} replaces the builtin pass of that name" in result.stdout
    broken = tmp_path / "broken.py"
    broken.write_text("raise RuntimeError('boom')\n")
    bad = invoke("passes", "--rules", str(broken))
    assert bad.exit_code == 2 and "broken.py" in bad.stderr and "boom" in bad.stderr
    unknown = invoke("passes", "--enable-pass", "NoSuchPass")
    assert unknown.exit_code == 2 and "NoSuchPass" in unknown.stderr
