"""Hostile models: tiny files asking for huge expansions, impossible dims, odd names and malformed nodes
end in exit 0 or 2 with one sentence, never a traceback, with peak memory under 1.5 GB in a 4 GB
address space."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Callable

import pytest

from scopefusion.budgets import Budgets, current_budgets, use_budgets
from scopefusion.convert import convert
from scopefusion.errors import InferenceError, ModelLoadError, ParseError
from tests.models import hostile_models as hostile

REPO = Path(__file__).resolve().parent.parent
PEAK_LIMIT_KB = 1536 * 1024

# Runs the CLI in this process under a 4 GB address-space limit, then reports its exit code and peak RSS.
_LIMITED = textwrap.dedent("""
    import json, resource, sys
    resource.setrlimit(resource.RLIMIT_AS, (4 << 30, 4 << 30))
    from scopefusion.cli import main
    code = 0
    try:
        main(sys.argv[1:])
    except SystemExit as e:
        code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
    print(json.dumps({"rc": code, "peak_kb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss}), file=sys.stderr)
""")


def run_limited(*args: str, cwd: Path | None = None) -> tuple[int, int, str]:
    env = dict(os.environ, PYTHONPATH=str(REPO))
    proc = subprocess.run([sys.executable, "-c", _LIMITED, *args], capture_output=True, text=True, env=env, cwd=cwd,
                          timeout=300)
    *lines, last = proc.stderr.strip().splitlines()
    result = json.loads(last)
    stderr = "\n".join(lines)
    assert "Traceback" not in stderr and "Traceback" not in proc.stdout, stderr
    return result["rc"], result["peak_kb"], stderr


BOMBS: dict[str, tuple[str, Callable[[], bytes], int, str]] = {
    # name: (file name, builder, expected exit code, expected words)
    "inlining 2**30": ("f30.pb", lambda: hostile.doubling_functions(30), 2, "--max-inlined-nodes"),
    "splat 2 GB": ("splat.pb", lambda: hostile.splat_const((500_000_000,)), 0, ""),
    "splat 1e11": ("splat11.pb", lambda: hostile.splat_const((100_000, 1_000_000)), 0, ""),
    "ConstantOfShape": ("cos.onnx", lambda: hostile.onnx_folding_bomb("ConstantOfShape"), 0, ""),
    "Expand": ("expand.onnx", lambda: hostile.onnx_folding_bomb("Expand"), 0, ""),
    "Tile": ("tile.onnx", lambda: hostile.onnx_folding_bomb("Tile"), 0, ""),
    "Range": ("range.onnx", lambda: hostile.onnx_folding_bomb("Range"), 0, ""),
    "Fill": ("fill.pb", lambda: hostile.tf_fill_bomb(), 0, ""),
}


@pytest.mark.parametrize("bomb", sorted(BOMBS))
def test_tiny_bombs_stay_under_the_memory_budget(bomb, tmp_path):
    name, build, code, words = BOMBS[bomb]
    model = tmp_path / name
    model.write_bytes(build())
    assert model.stat().st_size < 6000
    out = tmp_path / "out.ge"
    rc, peak_kb, stderr = run_limited("convert", str(model), "-o", str(out), "-q")
    assert rc == code, stderr
    assert words in " ".join(stderr.split())
    assert peak_kb <= PEAK_LIMIT_KB, f"{bomb}: peak {peak_kb / 1024:.0f} MB"
    if code == 0:
        assert out.stat().st_size < (1 << 20)
    else:
        assert not out.exists()


@pytest.mark.slow
def test_a_65536_node_inlining_converts_under_the_memory_budget(tmp_path):
    model = tmp_path / "f16.pb"
    model.write_bytes(hostile.doubling_functions(16))
    rc, peak_kb, stderr = run_limited("convert", str(model), "-o", str(tmp_path / "out.ge"), "-q")
    assert rc == 0, stderr
    assert peak_kb <= PEAK_LIMIT_KB


def test_the_inlining_refusal_names_node_size_and_option_and_can_be_raised(tmp_path):
    model = tmp_path / "f10.pb"
    model.write_bytes(hostile.doubling_functions(10))
    with pytest.raises(ParseError, match=r"call node 'call' \(function 'f10', 1,024 nodes.*--max-inlined-nodes"):
        convert(model, max_inlined_nodes=1000)
    # Each function body is built once and copied into its callers: bodies and copies count alike.
    assert convert(model, max_inlined_nodes=4096).op_counts()["tf.Identity"] == 1025


def test_deep_function_nesting_is_refused(tmp_path):
    from tests.parser import tf_graph_util as tg

    functions = [tg.function("g0", ["a"], {"out": "id:output:0"}, [tg.node("id", "Identity", ["a"], T=tg.type_attr())])]
    for level in range(1, 400):
        functions.append(tg.function(f"g{level}", ["a"], {"out": "c:out:0"}, [tg.node("c", f"g{level - 1}", ["a"])]))
    model = tg.write(tmp_path / "deep.pb", [tg.node("x", "Placeholder", dtype=tg.type_attr()),
                                            tg.node("call", "g399", ["x"])], functions)
    with pytest.raises(ParseError, match="nest more than"):
        convert(model)


def test_folding_leaves_large_values_unfolded_with_known_shapes(tmp_path):
    model = tmp_path / "cos.onnx"
    model.write_bytes(hostile.onnx_folding_bomb("ConstantOfShape", elements=1000))
    small = convert(model)
    assert small.inference.folded >= 1 and small.inference.unfolded == []
    limited = convert(model, max_folded_bytes=100)
    assert limited.inference.unfolded and "4,000 bytes" in limited.inference.unfolded[0]
    big = next(n for n in limited.graph.nodes if n.op == "onnx.ConstantOfShape")
    assert big.outputs[0].type.shape == (1000,)


def test_a_large_splat_stays_a_fill_and_runs(tmp_path):
    import numpy as np

    from scopefusion.verify import verify

    model = tmp_path / "splat.pb"
    model.write_bytes(hostile.splat_const((64, 64), value=2.5))
    fused = convert(model, max_folded_bytes=1024)
    assert fused.op_counts().get("tf.Fill") == 1
    report = verify(model, inputs={"x": np.ones((64, 64), np.float32)}, max_folded_bytes=1024)
    assert report.ok
    assert convert(model).op_counts().get("tf.Fill") is None


def test_budgets_are_per_conversion():
    assert current_budgets() == Budgets()
    with use_budgets(Budgets(max_inlined_nodes=5)):
        assert current_budgets().max_inlined_nodes == 5
    assert current_budgets() == Budgets()
    with pytest.raises(ValueError, match="max_folded_bytes"):
        Budgets(max_folded_bytes=-1)


CASES: dict[str, tuple[str, Callable[[], bytes], tuple[str, ...], int, str]] = {
    # name: (file, builder, extra options, exit code, expected words)
    "dim 2**62": ("huge.pb", hostile.huge_dim_graph, (), 2, "more than a tensor size can hold"),
    "--input-shape 2**62": ("m.pb", lambda: hostile.huge_dim_graph(-1), ("--input-shape", f"x:{1 << 62},4"), 2,
                            "more than a tensor size can hold"),
    "onnx without graph inputs": ("noin.onnx", hostile.onnx_no_inputs, (), 0, ""),
    "onnx without graph inputs, ge-text": ("noin.onnx", hostile.onnx_no_inputs, ("--format", "ge-text"), 0, ""),
    "onnx opset 0": ("o0.onnx", lambda: hostile.onnx_relu(0), (), 2, "opsets start at 1"),
    "onnx opset 99": ("o99.onnx", lambda: hostile.onnx_relu(99), (), 2, "newer than the installed onnx knows"),
    "1000 scope levels": ("deep.pb", lambda: hostile.deep_scope_graph(1000), (), 0, ""),
    "markup in a node name": ("m.pb", lambda: hostile.named_graph("a[/x]b"), ("--input-shape", "nope:1"), 2,
                              "'nope'"),
    "onnx Reshape 4 to [3]": ("r.onnx", hostile.onnx_reshape_contradiction, (), 2, "reshapes 4 elements [4] to [3]"),
    "tf Reshape 4 to [3]": ("r.pb", hostile.tf_reshape_contradiction, (), 2, "cannot reshape a tensor of 4 elements"),
    "Range delta 0": ("r0.onnx", lambda: hostile.onnx_range(0.0), (), 2, "delta is 0"),
    "Range delta 1e-30": ("r1.onnx", lambda: hostile.onnx_range(1e-30), (), 2, "more than a tensor can hold"),
    "Const without value": ("c.pb", hostile.const_without_value, (), 2, "constant node 'c' (Const) has no 'value'"),
}


@pytest.mark.parametrize("case", sorted(CASES))
@pytest.mark.parametrize("strict", [False, True])
def test_hostile_cases_exit_0_or_2_with_one_sentence(case, strict, tmp_path):
    name, build, extra, code, words = CASES[case]
    model = tmp_path / name
    model.write_bytes(build())
    out = tmp_path / ("out.ge.txt" if "ge-text" in extra else "out.ge")
    rc, _, stderr = run_limited("convert", str(model), "-o", str(out), "-q", *extra, *(["--strict"] if strict else []))
    assert rc == code, stderr
    assert words in " ".join(stderr.split())
    assert out.exists() == (code == 0)


def test_markup_in_names_and_paths_is_printed_as_written(tmp_path):
    directory = tmp_path / "[x]"
    directory.mkdir()
    model = directory / "[bold]m.pb"
    model.write_bytes(hostile.named_graph("a[/x]b"))
    rc, _, stderr = run_limited("convert", str(model), "-o", str(directory / "out.ge"), "--input-shape", "[red]x:1")
    assert rc == 2
    assert "'[red]x'" in stderr
    env = dict(os.environ, PYTHONPATH=str(REPO))
    proc = subprocess.run([sys.executable, "-m", "scopefusion", "convert", str(model), "-o", str(directory / "out.ge")],
                          capture_output=True, text=True, env=env)
    assert proc.returncode == 0 and "Traceback" not in proc.stderr, proc.stderr


def test_output_bytes_do_not_depend_on_the_input_path_spelling(tmp_path):
    model = tmp_path / "m.pb"
    model.write_bytes(hostile.splat_const((2, 3)))
    digests = set()
    for spelled, fmt in ((str(model), "ge"), ("./m.pb", "ge"), (str(tmp_path / ".." / tmp_path.name / "m.pb"), "ge")):
        for fmt in ("ge", "ge-text", "onnx"):
            out = tmp_path / f"out.{fmt}"
            rc, _, stderr = run_limited("convert", spelled, "-o", str(out), "--format", fmt, "-q", cwd=tmp_path)
            assert rc == 0, stderr
            digests.add((fmt, hashlib.sha256(out.read_bytes()).hexdigest()))
            assert str(tmp_path).encode() not in out.read_bytes()
    assert len(digests) == 3


def test_python_api_errors_are_ours(tmp_path):
    cases = [
        (hostile.huge_dim_graph(), "a.pb", InferenceError),
        (hostile.onnx_relu(0), "b.onnx", ModelLoadError),
        (hostile.const_without_value(), "c.pb", ParseError),
    ]
    for data, name, error in cases:
        (tmp_path / name).write_bytes(data)
        with pytest.raises(error):
            convert(tmp_path / name)


_WRONG_PORTS_RULE = '''
from scopefusion.scope import NodeOpTypeFeature, ScopeBasePass, ScopeFeature, ScopePattern


class WrongPorts(ScopeBasePass):
    name = "WrongPortsFusion"
    general = True

    def define_patterns(self):
        return ScopePattern("act", NodeOpTypeFeature("Relu", 1), ScopeFeature("", 0, suffix="act"))

    def generate_fusion_result(self, scopes, result, graph):
        result.name = scopes[0].name.rstrip("/")
        result.type = "LayerNorm"  # takes x, gamma and beta: one input port is too few
        result.insert_inputs("Relu", [0])
        result.insert_outputs("Relu", [0])


FUSION_RULES = [WrongPorts]
'''


def test_a_rule_result_with_the_wrong_ports_names_the_rule_and_the_node(tmp_path):
    rules = tmp_path / "rules.py"
    rules.write_text(_WRONG_PORTS_RULE)
    model = tmp_path / "m.pb"
    model.write_bytes(hostile.named_graph("act/Relu"))
    rc, _, stderr = run_limited("convert", str(model), "-o", str(tmp_path / "o.ge"), "--rules", str(rules), "-q")
    assert rc == 2
    message = " ".join(stderr.split())
    assert "rule WrongPortsFusion" in message and "node 'act' (fused.LayerNorm) with 1 input" in message, message


@pytest.mark.parametrize("code", ["import sys\nsys.exit(0)\n", "import sys\nsys.exit()\n", "import sys\nsys.exit(1)\n",
                                  "import sys\n\ndef register(registry):\n    sys.exit(0)\n"])
def test_sys_exit_in_a_rules_file_is_an_error_naming_the_file(code, tmp_path):
    rules = tmp_path / "exiting_rules.py"
    rules.write_text(code)
    model = tmp_path / "m.pb"
    model.write_bytes(hostile.named_graph("y"))
    out = tmp_path / "o.ge"
    rc, _, stderr = run_limited("convert", str(model), "-o", str(out), "--rules", str(rules), "-q")
    assert rc == 2 and "exiting_rules.py" in stderr and "sys.exit" in stderr, stderr
    assert not out.exists()


@pytest.mark.parametrize("case, words", [
    ("wrong_type", "node 'pool' (tf.MaxPool): attribute 'ksize' must be list_int, found str 'oops'"),
    ("N", "node 'sum' (tf.AddN): attribute 'N' is 5 but the node gives 2 'inputs' input(s)"),
])
def test_malformed_attributes_name_node_attribute_expected_and_found(case, words, tmp_path):
    model = tmp_path / "m.pb"
    model.write_bytes(hostile.malformed_attr_graph(case))
    with pytest.raises(ParseError) as info:
        convert(model)
    assert words in str(info.value)


def test_verify_on_a_folding_bomb_reports_memory_in_one_sentence(tmp_path):
    model = tmp_path / "fill.pb"
    model.write_bytes(hostile.tf_fill_bomb())
    rc, _, stderr = run_limited("verify", str(model))
    assert rc in (0, 1, 2), stderr
    if rc == 2:
        assert "ran out of memory" in stderr


def test_an_npy_whose_header_claims_a_huge_shape_is_refused(tmp_path):
    import numpy as np

    npy = tmp_path / "x.npy"
    np.save(npy, np.zeros(4, np.float32))
    data = npy.read_bytes()
    header_len = int.from_bytes(data[8:10], "little")
    header = data[10:10 + header_len].replace(b"(4,)", b"(100000000000,)")
    npy.write_bytes(data[:8] + len(header).to_bytes(2, "little") + header + data[10 + header_len:])
    model = tmp_path / "m.onnx"
    model.write_bytes(hostile.onnx_relu())
    rc, peak_kb, stderr = run_limited("verify", str(model), "--input", f"x={npy}")
    assert rc == 2 and "its header claims shape (100000000000,)" in " ".join(stderr.split()), stderr
    assert peak_kb <= PEAK_LIMIT_KB


def test_markup_in_op_types_is_printed_as_written_in_the_summary(tmp_path):
    model = tmp_path / "m.pb"
    model.write_bytes(hostile.tf_graph([hostile.placeholder("x", (2,)), hostile._tf_node("[/x]y", "[/x]Op", ["x"])]))
    env = dict(os.environ, PYTHONPATH=str(REPO), COLUMNS="200")
    proc = subprocess.run([sys.executable, "-m", "scopefusion", "convert", str(model), "-o", str(tmp_path / "o.ge")],
                          capture_output=True, text=True, env=env)
    assert proc.returncode == 0 and "Traceback" not in proc.stderr, proc.stderr
    assert "tf.[/x]Op" in proc.stdout


def test_an_impossible_inferred_shape_is_an_inference_error(tmp_path):
    from scopefusion.parser.proto import tf_framework_pb2 as tfpb
    from tests.models import hostile_strategies as hs

    nodes = [hostile.placeholder("x", (0, 1 << 20, 0)), hs._const("m", [1, -1, 1], tfpb.DT_INT64, (3,)),
             hostile._tf_node("t", "Tile", ["x", "m"], T=hs._attr_type(), Tmultiples=hs._attr_type(tfpb.DT_INT64))]
    model = tmp_path / "tile.pb"
    model.write_bytes(hostile.tf_graph(nodes))
    with pytest.raises(InferenceError, match=r"node 't' \(tf.Tile\): output 0 would get shape \[0, -1048576, 0\]"):
        convert(model)


def test_markup_in_op_types_is_printed_as_written_in_a_terminal(tmp_path, monkeypatch, capsys):
    import rich.console

    from scopefusion.summary import print_summary

    class Terminal(rich.console.Console):
        def __init__(self, **options):
            super().__init__(force_terminal=True, width=150, **options)

    model = tmp_path / "m.pb"
    model.write_bytes(hostile.tf_graph([hostile.placeholder("x", (2,)), hostile._tf_node("[/x]y", "[/x]Op", ["x"])]))
    result = convert(model)
    monkeypatch.setattr(rich.console, "Console", Terminal)
    print_summary(result.report(), "o.ge", "ge")
    assert "[/x]Op" in capsys.readouterr().out


def test_a_dim_past_int64_even_beside_an_unknown_one_is_an_inference_error(tmp_path):
    from scopefusion.parser.proto import tf_framework_pb2 as tfpb
    from tests.models import hostile_strategies as hs

    most = (1 << 63) - 1
    nodes = [hostile.placeholder("x", (most, -1)), hs._const("m", [most, 1], tfpb.DT_INT64, (2,)),
             hostile._tf_node("t", "Tile", ["x", "m"], T=hs._attr_type(), Tmultiples=hs._attr_type(tfpb.DT_INT64))]
    model = tmp_path / "tile.pb"
    model.write_bytes(hostile.tf_graph(nodes))
    with pytest.raises(InferenceError, match="a dim larger than a size can hold"):
        convert(model)
