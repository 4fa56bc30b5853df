"""What ``convert`` shows: the summary in a pipe and in a terminal, ``--report -``, progress, ``--version``,
and the option checks that run before the model is read."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from rich.console import Console
from typer.testing import CliRunner

import scopefusion
from scopefusion.cli import app
from scopefusion.cli_checks import nearest_names, output_format
from scopefusion.cli_progress import progress_display
from scopefusion.convert import convert
from scopefusion.model import SAVE_FORMATS
from scopefusion.summary import summary_sections, summary_tables

BERT_SHAPES = [f"input_ids:{b},{s};input_mask:{b},{s};token_type_ids:{b},{s}" for b, s in ((1, 8), (4, 8), (16, 8))]


def run(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "scopefusion", *args], capture_output=True, text=True,
                          env={**os.environ, **(env or {})})  # fmt: skip


def _shape_text(inputs: dict) -> str:
    return "; ".join(f"{k}:{','.join(map(str, v))}" for k, v in inputs.items())


@pytest.fixture(scope="module")
def piped_conversion(tf_bert_pb, tmp_path_factory):
    """BERT converted with three profiles, the summary captured through a pipe at 80 columns."""
    root = tmp_path_factory.mktemp("piped")
    args = ["convert", str(tf_bert_pb), "-o", str(root / "bert.ge"), "--report", str(root / "r.json")]
    for shape in BERT_SHAPES:
        args += ["--input-shape", shape]
    proc = run(*args, env={"COLUMNS": "80", "TERM": "xterm-256color"})
    assert proc.returncode == 0, proc.stderr
    return proc, json.loads((root / "r.json").read_text())


def test_the_piped_summary_holds_every_number_and_shape_in_full(piped_conversion):
    proc, report = piped_conversion
    out = proc.stdout
    assert proc.stderr == ""  # no progress display in a pipe
    assert "…" not in out and "┃" not in out  # plain text: no rich tables, nothing abbreviated
    lines = out.splitlines()
    for p in report["profiles"]:
        row = next(line for line in lines if line.split()[:1] == [str(p["index"])] and "input_ids:" in line)
        assert _shape_text(p["inputs"]) in row
        plan = next(line for line in lines if line.split()[:1] == [str(p["index"])] and f"{p['arena_bytes']:,}" in line)
        for key in ("arena_bytes", "naive_bytes", "lower_bound_bytes"):
            assert f"{p[key]:,}" in plan.split()
        assert plan.split()[-1] == str(p["dynamic_tensors"])
    assert len({_shape_text(p["inputs"]) for p in report["profiles"]}) == 3
    for rule, count in report["fusions"].items():
        assert any(line.split()[:2] == [rule, str(count)] for line in lines), rule
    for op, count in report["ops"].items():
        assert f"{op.rpartition('.')[2]}×{count}" in out, op
    assert f"Ops by dialect ({sum(report['ops'].values())} nodes)" in out
    assert "Un-inferred ops (0)" in out  # a title is one line, never wrapped
    for stage, seconds in report["timings_s"].items():
        assert any(line.split() == [stage, f"{seconds:.3f}"] for line in lines), stage


def test_terminal_tables_fit_80_columns_and_cut_nothing(piped_conversion):
    _, report = piped_conversion
    report = dict(report, profiles=[dict(p, arena_bytes=13_479_936_123) for p in report["profiles"]])
    console = Console(force_terminal=True, width=80, color_system=None, record=True)
    for renderable in summary_tables(summary_sections(report, "out/bert.ge", "ge"), 80):
        console.print(renderable)
    text = console.export_text()
    assert max(len(line) for line in text.splitlines()) <= 80
    assert "…" not in text
    flat = " ".join(text.split())
    for p in report["profiles"]:
        assert "13,479,936,123" in text and f"{p['naive_bytes']:,}" in text
        for name, dims in p["inputs"].items():
            assert f"{name}:{','.join(map(str, dims))}" in flat


def test_report_dash_writes_json_to_stdout_and_the_summary_to_stderr(tf_bert_pb, tmp_path):
    proc = run("convert", str(tf_bert_pb), "-o", str(tmp_path / "m.ge"), "--report", "-")
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    assert report["profiles"] and report["fusions"]
    assert "Memory plans" in proc.stderr and f"Wrote {tmp_path / 'm.ge'} (ge)" in proc.stderr
    assert not (tmp_path / "-").exists()


def test_version_prints_the_version_and_exits_0():
    proc = run("--version")
    assert proc.returncode == 0 and proc.stdout.strip() == f"scopefusion {scopefusion.__version__}"


@pytest.fixture
def load_spy(monkeypatch):
    """Records every model load (``scopefusion.parser.load``) and makes it fail loudly."""
    import scopefusion.parser

    calls = []

    def spy(*args, **kwargs):
        calls.append(args)
        raise AssertionError("the model was loaded")

    monkeypatch.setattr(scopefusion.parser, "load", spy)
    return calls


@pytest.mark.parametrize(
    "extra, message",
    [
        (
            ["--disable-pass", "LayerNormFusio"],
            "--disable-pass 'LayerNormFusio' is not a registered fusion pass; did you mean 'LayerNormFusion'",
        ),
        (["--enable-pass", "gelufusion"], "did you mean 'GeluFusion'"),
        (["--rules", "no_such_rules.py"], "no_such_rules.py does not exist"),
        (["--input-shape", "input_ids:1,x"], "must be integers"),
        (["--format", "ge"], "--format ge contradicts the output name"),
    ],
)
def test_option_errors_exit_2_before_the_model_is_loaded(load_spy, tf_bert_pb, tmp_path, extra, message):
    result = CliRunner().invoke(app, ["convert", str(tf_bert_pb), "-o", str(tmp_path / "m.onnx"), *extra])
    assert result.exit_code == 2, result.output
    assert message in " ".join(result.output.split())
    assert load_spy == [] and list(tmp_path.iterdir()) == []


def test_the_spy_sees_a_load_when_the_options_are_good(load_spy, tf_bert_pb, tmp_path):
    args = ["convert", str(tf_bert_pb), "-o", str(tmp_path / "m.ge"), "--disable-pass", "GeluFusion"]
    result = CliRunner().invoke(app, args)
    assert len(load_spy) == 1 and result.exit_code != 0


def test_nearest_names_and_output_format():
    known = ["LayerNormFusion", "GeluFusion", "SwishFusion", "HardSwishFusion"]
    assert nearest_names("layernormfusion", known)[0] == "LayerNormFusion"
    assert nearest_names("Swish", known)[:1] == ["SwishFusion"]
    assert output_format(Path("a/m.onnx"), None, SAVE_FORMATS) == "onnx"
    assert output_format(Path("m.ge.txt"), None, SAVE_FORMATS) == "ge-text"
    assert output_format(Path("m.bin"), None, SAVE_FORMATS) == "ge"
    assert output_format(Path("m.bin"), "onnx", SAVE_FORMATS) == "onnx"


def test_convert_reports_progress_through_a_callable(tf_bert_pb):
    seen: list[tuple[str, int, int, str]] = []
    convert(tf_bert_pb, input_shapes=[{"input_ids": [2, 8]}], progress=lambda *a: seen.append(a))
    stages = list(dict.fromkeys(s for s, *_ in seen))
    assert stages == ["load", "fusion", "build", "infer", "profile 0", "memory plan"]
    size = tf_bert_pb.stat().st_size
    assert ("load", size, size, str(tf_bert_pb)) in seen
    passes = [detail for stage, _, _, detail in seen if stage == "fusion" and detail]
    assert "LayerNormFusion" in passes and "GeluFusion" in passes
    for stage in stages:  # every stage ends complete
        last = [s for s in seen if s[0] == stage][-1]
        assert last[1] == last[2], last


def test_the_progress_display_draws_only_in_a_terminal():
    with progress_display(Console(file=open(os.devnull, "w"), force_terminal=False)) as progress:
        assert progress is None
    with progress_display(Console(force_terminal=True), enabled=False) as progress:
        assert progress is None
    console = Console(force_terminal=True, width=100, record=True, color_system=None)
    with progress_display(console) as progress:
        assert progress is not None
        progress("load", 3 << 20, 10 << 20, "model.pb")
        progress("fusion", 2, 11, "GeluFusion")
        progress("load", 0, 0, "SavedModel")


def test_verify_checks_pass_names_before_loading(load_spy, tf_bert_pb):
    result = CliRunner().invoke(app, ["verify", str(tf_bert_pb), "--enable-pass", "LayerNorm"])
    assert result.exit_code == 2 and load_spy == []
    assert "did you mean 'LayerNormFusion'" in " ".join(result.output.split())


def test_inspect_checks_pass_names_before_loading(load_spy, tf_bert_pb):
    result = CliRunner().invoke(app, ["inspect", str(tf_bert_pb), "--disable-pass", "GeluFusionn"])
    assert result.exit_code == 2 and load_spy == []
    assert "did you mean 'GeluFusion'" in " ".join(result.output.split())


def test_quiet_prints_nothing(tf_bert_pb, tmp_path):
    proc = run("convert", str(tf_bert_pb), "-o", str(tmp_path / "m.ge"), "--quiet")
    assert proc.returncode == 0 and proc.stdout == "" and proc.stderr == ""
    assert (tmp_path / "m.ge").stat().st_size > 0


def test_the_file_reader_reports_the_bytes_read(tmp_path):
    from scopefusion.parser.wire import FileReader

    path = tmp_path / "big.bin"
    path.write_bytes(bytes(range(256)) * (12 << 12))  # 12 MiB
    seen: list[tuple[int, int]] = []
    with open(path, "rb") as f:
        reader = FileReader(f.fileno(), path.stat().st_size, progress=lambda done, total: seen.append((done, total)))
        for start in range(0, len(reader), 1 << 18):
            reader[start:start + 100]
            reader[start + 100]
        reader[len(reader) - 1]
    size = path.stat().st_size
    assert seen[-1] == (size, size)
    assert len(seen) >= 10 and all(a[0] < b[0] for a, b in zip(seen, seen[1:]))


def test_a_savedmodel_load_reports_its_steps(saved_model_keras):
    seen: list[tuple[str, int, int, str]] = []
    convert(saved_model_keras, progress=lambda *a: seen.append(a))
    steps = [detail for stage, _, _, detail in seen if stage == "load"]
    assert steps[:2] == ["SavedModel: reading saved_model.pb", "SavedModel: reading the checkpoint and freezing the variables"]
    assert [s for s, *_ in seen][-1] == "memory plan"


def test_a_tf1_frame_that_forms_no_loop_exits_2_naming_it_and_writes_nothing(tmp_path):
    from tests.models.loop_models import tf1_bare_switch

    model = tmp_path / "switch.pb"
    model.write_bytes(tf1_bare_switch())
    out = tmp_path / "out"
    out.mkdir()
    result = CliRunner().invoke(app, ["convert", str(model), "-o", str(out / "m.onnx")])
    assert result.exit_code == 2, result.output
    message = " ".join(result.stderr.split())
    assert "tf.Switch x1" in message and "form no while loop or cond" in message and "Traceback" not in result.output
    assert list(out.iterdir()) == []
