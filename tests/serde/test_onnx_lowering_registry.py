"""The builtin lowering registry's family table (op type -> module, imported on first lookup) matches what the
family modules register, and a lookup imports only the family it needs."""

from __future__ import annotations

import importlib
import json
import pkgutil
import subprocess
import sys

import pytest

from scopefusion.errors import SerdeError
from scopefusion.serde import onnx_lowering
from scopefusion.serde.onnx_lowering import LoweringRegistry, default_lowerings
from scopefusion.serde.onnx_lowering.registry import FAMILIES, family_types


def _module(family: str):
    return importlib.import_module(f"{onnx_lowering.__name__}.{family}")


def test_the_family_table_lists_exactly_what_each_module_registers():
    for family in FAMILIES:
        registered = [op_type for op_type, _ in _module(family).LOWERINGS]
        assert len(registered) == len(set(registered)), f"{family} registers a type twice"
        assert sorted(family_types(family)) == sorted(registered), f"FAMILIES[{family!r}] differs from its LOWERINGS"


def test_every_module_with_lowerings_is_in_the_family_table():
    with_lowerings = sorted(info.name for info in pkgutil.iter_modules(onnx_lowering.__path__)
                            if hasattr(_module(info.name), "LOWERINGS"))
    assert with_lowerings == sorted(FAMILIES)


def test_no_type_is_in_two_families():
    all_types = [op_type for family in FAMILIES for op_type in family_types(family)]
    assert len(all_types) == len(set(all_types))


def test_the_default_registry_gives_each_module_function():
    registry = default_lowerings()
    expected = {op_type: fn for family in FAMILIES for op_type, fn in _module(family).LOWERINGS}
    assert registry.types() == sorted(expected)
    assert len(registry) == len(expected)
    for op_type, fn in expected.items():
        assert op_type in registry
        assert registry.get(op_type) is fn
    assert registry.get("NotAnOp") is None


def test_a_registered_lowering_replaces_a_builtin_not_yet_loaded():
    def lower_relu(e) -> None:
        raise AssertionError("not called")

    registry = default_lowerings()
    with pytest.raises(SerdeError, match="has an ONNX lowering already"):
        registry.register("Relu", lower_relu)
    registry.register("Relu", lower_relu, replace=True)
    assert registry.get("Relu") is lower_relu
    assert registry.get("Relu6") is dict(_module("elementwise").LOWERINGS)["Relu6"]  # its family loads
    assert registry.get("Relu") is lower_relu
    assert default_lowerings().get("Relu") is not lower_relu  # each registry is fresh
    assert "Relu" not in LoweringRegistry()


def test_a_lookup_imports_only_its_family():
    code = (
        "import json, sys\n"
        "from scopefusion.serde.onnx_lowering import default_lowerings\n"
        "registry = default_lowerings()\n"
        "assert registry.get('Conv2D') is not None\n"
        "prefix = 'scopefusion.serde.onnx_lowering.'\n"
        "print(json.dumps(sorted(m[len(prefix):] for m in sys.modules if m.startswith(prefix))))\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    loaded = set(json.loads(result.stdout))
    assert "nn" in loaded
    assert not loaded & {"control", "tensor_lists", "tf1_frames", "slicing", "random_ops"}, loaded
