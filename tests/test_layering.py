"""The layers import only downwards (docs/architecture.md), and modules stay small."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "scopefusion"

# What each layer may import of the package besides itself; None: no limit below the CLI.
ALLOWED = {
    "ir": {"errors", "dtypes", "records"},
    "parser": {"errors", "dtypes", "records", "budgets"},
    "scope": {"errors", "dtypes", "records", "parser", "collector"},
    "fusion_rules": {"errors", "dtypes", "records", "parser", "scope"},
    "dialects": {"errors", "dtypes", "records", "ir", "parser"},
    "ir_builder": {"errors", "dtypes", "records", "budgets", "ir", "dialects", "parser", "scope"},
    "serde": {"errors", "dtypes", "records", "ir", "dialects", "parser", "files", "collector"},
    "runtime": {"errors", "dtypes", "records", "ir", "dialects", "parser", "ir_builder"},
}
# Third-party modules a layer never imports.
FORBIDDEN = {
    "ir": ("onnx", "google.protobuf", "tensorflow", "keras", "torch"),
    "scope": ("onnx", "google.protobuf", "tensorflow"),
    "fusion_rules": ("onnx", "google.protobuf", "tensorflow"),
}


def _modules() -> list[Path]:
    return sorted(p for p in PACKAGE.rglob("*.py") if not p.name.endswith("_pb2.py"))


def _imports(path: Path, root: Path = PACKAGE) -> set[str]:
    """Absolute names of everything ``path`` (a module under package ``root``) imports at run time,
    relative imports resolved; imports under ``if TYPE_CHECKING:`` are left out."""
    tree = ast.parse(path.read_text())
    package = path.relative_to(root.parent).with_suffix("").parts[:-1]  # where relative imports start
    type_only = {
        id(inner)
        for block in ast.walk(tree)
        if isinstance(block, ast.If) and "TYPE_CHECKING" in ast.unparse(block.test)
        for inner in ast.walk(block)
    }
    found: set[str] = set()
    for node in ast.walk(tree):
        if id(node) in type_only:
            continue
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            if not node.level:
                found.add(node.module or "")
                continue
            base = ".".join(package[: len(package) - node.level + 1])
            if node.module:
                found.add(f"{base}.{node.module}")
            else:
                found |= {f"{base}.{alias.name}" for alias in node.names}
    return found


def _layer(name: str) -> str | None:
    parts = name.split(".")
    if len(parts) < 2 or parts[0] != "scopefusion" or parts[1] == "__version__":
        return None
    return parts[1]


def violations(path: Path, root: Path = PACKAGE) -> list[str]:
    """Each import of ``path`` that goes up the layers or into a forbidden third-party module."""
    layer = path.relative_to(root).parts[0]
    if layer not in ALLOWED:
        return []
    found = []
    for module in sorted(_imports(path, root)):
        theirs = _layer(module)
        if theirs is not None and theirs != layer and theirs not in ALLOWED[layer]:
            found.append(f"{path.relative_to(root)} imports {module}: {layer} may not import {theirs}")
        if any(module == bad or module.startswith(bad + ".") for bad in FORBIDDEN.get(layer, ())):
            found.append(f"{path.relative_to(root)} imports {module}")
    return found


@pytest.mark.parametrize("path", _modules(), ids=lambda p: str(p.relative_to(PACKAGE)))
def test_imports_go_down_the_layers(path):
    assert violations(path) == []


def test_the_ir_core_imports_no_onnx_protobuf_or_tensorflow_when_loaded():
    import subprocess
    import sys

    code = "import scopefusion.ir, sys; print('\\n'.join(sorted(sys.modules)))"
    mods = set(subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split())
    assert "scopefusion.ir.graph" in mods
    assert not {m for m in mods if m.startswith(("google.protobuf", "onnx", "tensorflow"))}
    assert not {m for m in mods if m.startswith(("scopefusion.parser", "scopefusion.scope", "scopefusion.serde"))}


def test_the_check_finds_upward_and_forbidden_imports(tmp_path):
    root = tmp_path / "scopefusion"
    probe = root / "ir" / "probe.py"
    probe.parent.mkdir(parents=True)
    probe.write_text(
        "from typing import TYPE_CHECKING\nfrom ..serde import ge\nfrom . import types\nimport onnx\n"
        "if TYPE_CHECKING:\n    from ..model import Model\n"
    )
    dialect = root / "dialects" / "tf" / "probe.py"
    dialect.parent.mkdir(parents=True)
    dialect.write_text("from ...ir_builder.build import build_graph\nfrom ...ir.graph import Graph\n")
    assert violations(probe, root) == [
        "ir/probe.py imports onnx",
        "ir/probe.py imports scopefusion.serde: ir may not import serde",
    ]
    assert violations(dialect, root) == [
        "dialects/tf/probe.py imports scopefusion.ir_builder.build: dialects may not import ir_builder"
    ]


@pytest.mark.parametrize("path", _modules(), ids=lambda p: str(p.relative_to(PACKAGE)))
def test_no_module_passes_700_lines(path):
    assert len(path.read_text().splitlines()) <= 700, path.relative_to(PACKAGE)
