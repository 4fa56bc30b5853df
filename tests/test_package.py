"""Package-level guarantees: import cost, public API, error hierarchy."""

from __future__ import annotations

import subprocess
import sys

import scopefusion
import scopefusion.errors as errors
import scopefusion.ir_builder as ir


def _modules_after(code: str) -> set[str]:
    out = subprocess.run(
        [sys.executable, "-c", code + "\nimport sys\nprint('\\n'.join(sorted(sys.modules)))"],
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    return set(out.stdout.split())


def test_importing_scopefusion_does_not_import_tensorflow():
    mods = _modules_after("import scopefusion, scopefusion.ir_builder, scopefusion.parser, scopefusion.dtypes")
    assert "scopefusion.ir_builder" in mods
    assert not {m for m in mods if m == "tensorflow" or m.startswith("tensorflow.")}
    assert "keras" not in mods and "torch" not in mods


def test_ir_core_imports_no_protobuf_modules():
    mods = _modules_after("import scopefusion.ir_builder")
    assert not {m for m in mods if m.startswith(("google.protobuf", "onnx"))}


def test_error_hierarchy():
    stages = [
        errors.ModelLoadError, errors.ParseError, errors.FusionError,
        errors.InferenceError, errors.SerdeError, errors.VerifyError,
    ]  # fmt: skip
    for cls in stages:
        assert issubclass(cls, errors.ScopeFusionError) and cls is not errors.ScopeFusionError
        assert getattr(scopefusion, cls.__name__) is cls
    assert issubclass(ir.GraphError, errors.ScopeFusionError)
    assert len(set(stages)) == 6


# The public API is locked: a removal or rename here breaks users' scripts.
PUBLIC = {
    "scopefusion": {
        "FusionError", "InferenceError", "ModelLoadError", "ParseError", "ScopeFusionError", "SerdeError",
        "VerifyError", "__version__",
    },
    "scopefusion.ir_builder": {
        "AttrType", "AttrValue", "Attributes", "CONST_OP", "DATA_OP", "ElementType", "FollowType", "Graph",
        "GraphError", "IRContext", "InferContext", "InputInfo", "ListType", "NamedAttrs", "Node", "OpDef",
        "OpRegistry", "ParamType", "TensorType", "TupleType", "Type", "UNKNOWN_DIM", "UNKNOWN_RANK", "Value",
        "builtin_ops", "first_difference", "format_graph", "graphs_equal", "infer_node",
    },
}  # fmt: skip


def test_public_api_is_locked():
    import importlib

    for module, names in PUBLIC.items():
        mod = importlib.import_module(module)
        assert names <= set(mod.__all__), f"{module} lost {names - set(mod.__all__)}"
        for name in mod.__all__:
            assert hasattr(mod, name), f"{module}.__all__ names {name}, which is missing"


def test_readme_examples_run(capsys, monkeypatch, tmp_path):
    import pathlib
    import re

    root = pathlib.Path(__file__).parent.parent
    # The examples use paths relative to the repository and write files there: run them in a scratch
    # directory that sees the repository's testdata.
    (tmp_path / "testdata").symlink_to(root / "testdata")
    monkeypatch.chdir(tmp_path)
    readme = (root / "README.md").read_text()
    blocks = re.findall(r"```python\n(.*?)```", readme, re.S)
    assert blocks
    for block in blocks:
        exec(compile(block, "README.md", "exec"), {})
    assert "demo.Add(%x, %w) : f32[2,3]" in capsys.readouterr().out
