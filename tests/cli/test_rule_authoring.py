"""Rule authors' own fused ops (``define_fused_op``, rules files and rules packages) and the reports of
what user rules did: errors with their location, replaced builtins that fuse less, every pass listed."""

from __future__ import annotations

import html
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper
from typer.testing import CliRunner

from scopefusion import FusionError, define_fused_op
from scopefusion.cli import app
from scopefusion.convert import convert, fusion_setup
from scopefusion.fusion_rules import BUILTIN_RULES

WIDE = {"COLUMNS": "220"}

# A rules module fusing ONNX's Relu(Add(MatMul(x, w), b)) into the declared op AffineRelu(x, w, b).
AFFINE_RELU_RULES = '''
import numpy as np

from scopefusion import define_fused_op
from scopefusion.ir.opdef import FollowType
from scopefusion.scope import DataflowPattern, dataflow_rule


def shape(ctx):
    x, w = ctx.param("x").shape, ctx.param("w").shape
    ctx.set_output_shape(0, None if x is None or w is None else (*x[:-1], w[-1]))


def export(e):
    (product,) = e.op("MatMul", [e.input(0), e.input(1)])
    (biased,) = e.op("Add", [product, e.input(2)])
    e.op("Relu", [biased], outputs=[e.outputs[0]])


AFFINE_RELU = (
    define_fused_op("AffineRelu")
    .input("x").input("w").input("b")
    .output("y", follow=("x", FollowType.DTYPE))
    .set_infer_shape(shape)
    .set_reference(lambda inputs, attrs: [np.maximum(inputs[0] @ inputs[1] + inputs[2], 0).astype(inputs[0].dtype)])
    .set_onnx_export(export)
    .set_ge_type("FullyConnectionRelu")
)


def affine_relu(op, x, w, b):
    return op.Relu(op.op(("Add", "AddV2"), op.MatMul(x, w), b), _name="out")


@dataflow_rule(DataflowPattern(affine_relu), name="AffineReluFusion", type="AffineRelu", general=True)
def affine_relu_rule(match, result, graph):
    return None
'''


def invoke(*args: str):
    return CliRunner().invoke(app, list(args), env=WIDE)


def run_cli(*args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, **WIDE}
    return subprocess.run([sys.executable, "-m", "scopefusion", *args], capture_output=True, text=True, env=env)


@pytest.fixture(scope="session")
def affine_relu_onnx(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """x [2, 8] -> two blocks of Relu(Add(MatMul(x, W), b)) -> y [2, 4] (ONNX, opset 17)."""
    rng = np.random.default_rng(0)
    nodes, inits, current = [], [], "x"
    for i, (k, n) in enumerate([(8, 16), (16, 4)]):
        inits += [numpy_helper.from_array(rng.standard_normal((k, n)).astype(np.float32), f"w{i}"),
                  numpy_helper.from_array(rng.standard_normal(n).astype(np.float32), f"b{i}")]  # fmt: skip
        out = "y" if i == 1 else f"h{i}"
        nodes += [
            helper.make_node("MatMul", [current, f"w{i}"], [f"mm{i}"], name=f"block_{i}/MatMul"),
            helper.make_node("Add", [f"mm{i}", f"b{i}"], [f"add{i}"], name=f"block_{i}/Add"),
            helper.make_node("Relu", [f"add{i}"], [out], name=f"block_{i}/Relu"),
        ]
        current = out
    graph = helper.make_graph(nodes, "affine_relu", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 8])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 4])], inits)  # fmt: skip
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    path = tmp_path_factory.mktemp("affine") / "affine_relu.onnx"
    onnx.save(model, str(path))
    return path


def rules_file(path: Path, extra: str = "") -> Path:
    path.write_text(AFFINE_RELU_RULES + "\nFUSED_OPS = [AFFINE_RELU]\nFUSION_RULES = [affine_relu_rule]\n" + extra)
    return path


def install_rules_package(root: Path) -> Path:
    """A rules package ``acme_fusion`` with its dist-info and entry point, importable from ``root``."""
    package = root / "acme_fusion"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text(AFFINE_RELU_RULES + "\nFUSION_RULES = [AFFINE_RELU, affine_relu_rule]\n")
    info = root / "acme_fusion-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: acme-fusion\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text("[scopefusion.fusion_rules]\nacme = acme_fusion:FUSION_RULES\n")
    return root


# ============================================================================= declared fused ops
def test_a_rules_package_declares_its_op_and_a_conversion_without_it_knows_nothing(affine_relu_onnx, tmp_path, monkeypatch):
    from scopefusion.verify import verify

    root = install_rules_package(tmp_path / "site")
    with monkeypatch.context() as installed:
        installed.syspath_prepend(str(root))
        listed = invoke("passes", "--json")
        assert listed.exit_code == 0, listed.output
        data = json.loads(listed.stdout)
        assert data["passes"][0] == {"order": 1, "name": "AffineReluFusion", "general": True,
                                     "source": "package:acme-fusion", "enabled": True}  # fmt: skip
        assert data["fused_ops"] == [{"op": "fused.AffineRelu", "source": "package:acme-fusion", "replaces_builtin": False}]
        table = invoke("passes")
        assert "fused op fused.AffineRelu declared by package:acme-fusion" in table.stdout

        model = convert(affine_relu_onnx)
        assert model.fusion_counts() == {"AffineReluFusion": 2} and model.uninferred_ops() == []
        assert model.op_counts()["fused.AffineRelu"] == 2
        assert verify(affine_relu_onnx).ok
    sys.modules.pop("acme_fusion", None)

    plain = convert(affine_relu_onnx)
    assert "fused.AffineRelu" not in plain.graph.registry
    assert "AffineReluFusion" not in plain.fusion_counts()
    assert [p["name"] for p in plain.report()["passes"]] == [rule.pass_name for rule in BUILTIN_RULES]


def test_two_conversions_with_different_rules_files_keep_their_own_ops(affine_relu_onnx, tmp_path):
    first = rules_file(tmp_path / "first.py")
    second = rules_file(tmp_path / "second.py")
    model_a = convert(affine_relu_onnx, rules=[first])
    model_b = convert(affine_relu_onnx, rules=[second])
    op_a, op_b = model_a.graph.registry.get("fused.AffineRelu"), model_b.graph.registry.get("fused.AffineRelu")
    assert op_a is not op_b
    assert [d for d in model_a.graph.registry if d.name == "AffineRelu"] == [op_a]
    assert "fused.AffineRelu" not in convert(affine_relu_onnx).graph.registry


def test_a_declared_op_runs_in_onnxruntime_and_keeps_its_ge_type(affine_relu_onnx, tmp_path):
    import onnxruntime as ort

    from scopefusion.dialects.fused.declared import op_registry_for
    from scopefusion.serde.ge import model_from_bytes

    rules = rules_file(tmp_path / "rules.py")
    model = convert(affine_relu_onnx, rules=[rules])
    exported = onnx.load_from_string(model.to_bytes("onnx"))
    assert sorted({n.op_type for n in exported.graph.node}) == ["Add", "MatMul", "Relu"]
    x = np.random.default_rng(1).standard_normal((2, 8)).astype(np.float32)
    ours = ort.InferenceSession(exported.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    theirs = ort.InferenceSession(str(affine_relu_onnx), providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    np.testing.assert_allclose(ours, theirs, rtol=1e-5, atol=1e-6)

    assert 'type: "FullyConnectionRelu"' in model.to_bytes("ge-text").decode()
    registry, _ = fusion_setup(rules=[rules], entry_points=False)
    ops = op_registry_for(model.source, registry.fused_ops)
    back = model_from_bytes(model.to_bytes("ge"), ops=ops).main
    assert sorted(n.op for n in back.nodes if n.dialect == "fused") == ["fused.AffineRelu", "fused.AffineRelu"]


def test_a_declared_op_named_like_a_builtin_is_an_error_unless_it_replaces_it(affine_relu_onnx, tmp_path):
    clash = tmp_path / "clash.py"
    clash.write_text("from scopefusion import define_fused_op\n\nFUSED_OPS = [define_fused_op('Gelu').input('x').output('y', follow='x')]\n")
    with pytest.raises(FusionError) as info:
        convert(affine_relu_onnx, rules=[clash])
    assert f"fused op fused.Gelu from file:{clash} clashes with the builtin op fused.Gelu" in str(info.value)
    result = invoke("passes", "--rules", str(clash))
    assert result.exit_code == 2 and "clashes with the builtin op fused.Gelu" in " ".join(result.stderr.split())

    replacing = tmp_path / "replacing.py"
    replacing.write_text(
        "from scopefusion import define_fused_op\n\n"
        "FUSED_OPS = [define_fused_op('Gelu', replaces=True).input('x').output('y', follow='x')]\n"
    )
    model = convert(affine_relu_onnx, rules=[replacing])
    assert model.graph.registry.get("fused.Gelu").replaces is True
    assert "replaces_builtin" in json.loads(invoke("passes", "--rules", str(replacing), "--json").stdout)["fused_ops"][0]

    twice = tmp_path / "twice.py"
    rules_file(twice)
    with pytest.raises(FusionError, match="fused op 'AffineRelu' is declared twice"):
        convert(affine_relu_onnx, rules=[twice, rules_file(tmp_path / "again.py")])


def test_define_fused_op_wants_a_plain_name():
    for bad in ("fused.Dense", "", "two words"):
        with pytest.raises(ValueError, match="plain identifier"):
            define_fused_op(bad)


# ============================================================================= truthful reports
RAISING_RULES = '''
from scopefusion.scope import NodeOpTypeFeature, ScopeBasePass, ScopePattern


class ExplodingRule(ScopeBasePass):
    name = "ExplodingRule"
    general = True

    def define_patterns(self):
        return ScopePattern("any", NodeOpTypeFeature("MatMul", 0, 1))

    def generate_fusion_result(self, scopes, result, graph):
        values = {}
        return values["missing"]


FUSION_RULES = [ExplodingRule]
'''


def test_a_raising_user_rule_is_named_with_its_exception_and_line(affine_relu_onnx, tmp_path):
    rules = tmp_path / "exploding.py"
    rules.write_text(RAISING_RULES)
    line = RAISING_RULES.splitlines().index("        return values[\"missing\"]") + 1
    out, report = tmp_path / "m.ge", tmp_path / "r.json"
    page = tmp_path / "r.html"
    proc = run_cli("convert", str(affine_relu_onnx), "-o", str(out), "--rules", str(rules), "--report", str(report),
                   "--html", str(page))  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert html.escape(f"KeyError: 'missing' at {rules}:{line}") in page.read_text()
    stderr = " ".join(proc.stderr.split())
    assert f"fusion pass 'ExplodingRule' (file:{rules}) raised KeyError: 'missing' at {rules}:{line}" in stderr
    assert "Traceback" not in proc.stderr and out.exists()
    data = json.loads(report.read_text())
    (exploding,) = [p for p in data["passes"] if p["name"] == "ExplodingRule"]
    assert (exploding["status"], exploding["error"], exploding["error_at"]) == ("error", "KeyError: 'missing'", f"{rules}:{line}")
    assert exploding["source"] == f"file:{rules}"
    assert any("ExplodingRule" in w for w in data["fusion_warnings"])

    strict_out = tmp_path / "strict.ge"
    strict = run_cli("convert", str(affine_relu_onnx), "-o", str(strict_out), "--rules", str(rules), "--strict")
    assert strict.returncode == 2 and not strict_out.exists()
    assert "ExplodingRule" in strict.stderr and f"{rules.name}:{line}" in " ".join(strict.stderr.split()).replace(" ", "")


def test_a_replacement_that_fuses_fewer_than_the_builtin_warns_with_both_counts(gelu_files, tmp_path):
    rules = tmp_path / "lazy_gelu.py"
    rules.write_text(textwrap.dedent('''
        from scopefusion.scope import ScopeBasePass


        class LazyGelu(ScopeBasePass):
            name = "GeluFusion"  # replaces the builtin
            general = True


        FUSION_RULES = [LazyGelu]
    '''))
    builtin = convert(gelu_files["model"]).fusion_counts()["GeluFusion"]
    assert builtin == 2
    report = tmp_path / "r.json"
    proc = run_cli("convert", str(gelu_files["model"]), "-o", str(tmp_path / "m.ge"), "--rules", str(rules),
                   "--report", str(report))  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert (
        f"fusion pass 'GeluFusion' (file:{rules}) replaces the builtin pass of that name and fused 0 instance(s) "
        f"where the builtin would have fused {builtin}"
    ) in " ".join(proc.stderr.split())
    assert "(replaces the builtin GeluFusion, which would fuse 2)" in " ".join(proc.stdout.split())
    (gelu,) = [p for p in json.loads(report.read_text())["passes"] if p["name"] == "GeluFusion"]
    assert (gelu["source"], gelu["replaces"], gelu["builtin_would_fuse"], gelu["fusions_accepted"]) == (
        f"file:{rules}", "builtin GeluFusion", 2, 0
    )
    # A replacement that fuses as much as the builtin says so next to its count, without a warning.
    same = tmp_path / "same_gelu.py"
    same.write_text("from scopefusion.fusion_rules.gelu import GeluFusion\n\nclass MyGelu(GeluFusion):\n    pass\n\nFUSION_RULES = [MyGelu()]\n")
    quiet = run_cli("convert", str(gelu_files["model"]), "-o", str(tmp_path / "n.ge"), "--rules", str(same))
    assert quiet.returncode == 0 and "warning" not in quiet.stderr
    assert "(replaces the builtin GeluFusion, which would fuse 2)" in " ".join(quiet.stdout.split())


def test_every_report_lists_every_pass_that_ran(affine_relu_onnx, gelu_files, tmp_path):
    rules = rules_file(tmp_path / "rules.py")
    for path, options in ((affine_relu_onnx, {}), (affine_relu_onnx, {"rules": [rules]}), (gelu_files["model"], {})):
        report = convert(path, **options).report()
        registry, _ = fusion_setup(**options)
        assert [p["name"] for p in report["passes"]] == [e.name for e in registry.enabled_passes()]
        for entry in report["passes"]:
            assert {"source", "replaces", "scopes_matched", "fusions_accepted", "fusions_refused", "error", "seconds"} <= set(entry)
            assert entry["seconds"] >= 0
        fused = {p["name"]: p["fusions_accepted"] for p in report["passes"] if p["fusions_accepted"]}
        assert fused == report["fusions"]


def test_inspect_knows_the_declared_op_and_refuses_an_undeclared_one(affine_relu_onnx, tmp_path):
    declared = rules_file(tmp_path / "declared.py")
    result = invoke("inspect", str(affine_relu_onnx), "--rules", str(declared), "--explain", "block_0/")
    assert result.exit_code == 0, result.output
    assert "fused → AffineRelu by AffineReluFusion" in result.stdout
    (row,) = [line for line in result.stdout.splitlines() if line.startswith("│ AffineReluFusion") and "│ yes" in line]
    assert "fused by 'block_0" in row, result.stdout

    undeclared = tmp_path / "undeclared.py"
    undeclared.write_text(AFFINE_RELU_RULES + "\nFUSION_RULES = [affine_relu_rule]\n")  # the op is not in FUSED_OPS
    model = convert(affine_relu_onnx, rules=[undeclared])
    assert model.fusion_counts() == {}
    (reason, *_) = model.refused()["AffineReluFusion"]
    assert "unknown fused op type 'AffineRelu'" in reason


def test_verify_says_a_user_rule_raised(affine_relu_onnx, tmp_path):
    rules = tmp_path / "exploding.py"
    rules.write_text(RAISING_RULES)
    proc = run_cli("verify", str(affine_relu_onnx), "--rules", str(rules), "--json", str(tmp_path / "v.json"))
    assert proc.returncode == 0, proc.stderr
    assert "warning: fusion pass 'ExplodingRule'" in proc.stderr and "KeyError: 'missing'" in proc.stderr
    assert any("ExplodingRule" in w for w in json.loads((tmp_path / "v.json").read_text())["fusion_warnings"])
