"""The ONNX schema table the ``onnx`` dialect is built from: in sync with the installed onnx package."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import onnx
import pytest
from onnx import defs

from scopefusion.dialects.onnx import definitions
from scopefusion.dialects.onnx.schema_table import (
    data_type_code,
    latest_opset,
    schema_view,
    table_onnx_version,
)
from scopefusion.dialects.onnx.schemas import default_domain_schemas, opdef_from_schema

REPO = Path(__file__).resolve().parents[3]


def _generator():
    spec = importlib.util.spec_from_file_location("gen_onnx_schemas", REPO / "tools" / "gen_onnx_schemas.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_committed_table_is_the_installed_onnx_ones():
    gen = _generator()
    assert gen.OUTPUT.read_bytes() == gen.render(gen.build_table()).encode("ascii"), "run tools/gen_onnx_schemas.py"
    assert table_onnx_version() == onnx.__version__
    assert latest_opset() == defs.onnx_opset_version()
    assert {name: data_type_code(name) for name in onnx.TensorProto.DataType.keys()} == dict(onnx.TensorProto.DataType.items())
    assert data_type_code("T") is None


def _onnx_schemas(opset: int) -> dict:
    """The schema of each op of the default domain existing and not deprecated at ``opset``, from onnx."""
    out = {}
    for name in sorted({s.name for s in defs.get_all_schemas_with_history() if s.domain == ""}):
        if not defs.has(name, opset, ""):
            continue
        schema = defs.get_schema(name, opset, "")
        if not schema.deprecated:
            out[name] = schema
    return out


@pytest.mark.parametrize("opset", range(1, defs.onnx_opset_version() + 1))
def test_each_opset_has_the_schemas_onnx_gives(opset):
    expected = _onnx_schemas(opset)
    found = default_domain_schemas(opset)
    assert list(found) == list(expected)
    for name, schema in expected.items():
        assert found[name] == schema_view(schema), (name, opset)


@pytest.mark.parametrize("opset", [7, 13, 17, defs.onnx_opset_version()])
def test_definitions_from_the_table_equal_those_from_onnx(opset):
    expected = {name: opdef_from_schema(schema, opset) for name, schema in _onnx_schemas(opset).items()}
    found = {d.name: d for d in definitions(opset, onnxruntime=False)}
    assert list(found) == list(expected)
    for name, opdef in expected.items():
        mine = found[name]
        assert (mine.doc, mine.inputs, mine.outputs, mine.attrs) == (opdef.doc, opdef.inputs, opdef.outputs, opdef.attrs), name


@pytest.mark.parametrize("opset", [0, defs.onnx_opset_version() + 1])
def test_an_opset_outside_the_table_is_refused(opset):
    with pytest.raises(ValueError, match=f"ONNX opset {opset} is not known to the installed onnx"):
        default_domain_schemas(opset)
