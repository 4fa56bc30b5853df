"""The ``onnx`` dialect's op definitions: made from ONNX's schemas, one per op, declared faithfully."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest
from onnx import defs

from scopefusion.dialects.onnx import DIALECT, definitions
from scopefusion.dialects.onnx.schemas import MEMORY_FORWARD, VALUE_DEPEND
from scopefusion.ir import attrs as A
from scopefusion.ir.graph import GraphError
from scopefusion.ir.opdef import ParamType
from scopefusion.ir_builder import Graph, IRContext, OpRegistry, builtin_ops


def _by_name(opset: int) -> dict:
    return {d.name: d for d in definitions(opset, onnxruntime=False)}


def _schema_names(opset: int) -> set[str]:
    names = set()
    for s in defs.get_all_schemas_with_history():
        if s.domain == "":
            try:
                latest = defs.get_schema(s.name, opset, "")
            except defs.SchemaError:
                continue
            if not latest.deprecated:
                names.add(s.name)
    return names


@pytest.mark.parametrize("opset", [13, 17, defs.onnx_opset_version()])
def test_one_definition_per_schema_of_the_default_domain(opset):
    found = _by_name(opset)
    assert set(found) == _schema_names(opset)
    assert all(d.dialect == DIALECT and d.open_attrs for d in found.values())
    assert len(found) > 150


def test_every_opset_builds_a_registry():
    for opset in range(7, defs.onnx_opset_version() + 1):
        registry = OpRegistry(builtin_ops() + definitions(opset, onnxruntime=opset in (7, 17)))
        assert "onnx.Add" in registry and "onnx.Conv" in registry


def test_unknown_opset_is_refused():
    with pytest.raises(ValueError, match="opset 999 is not known"):
        definitions(999)


def test_the_dialect_imports_onnx_only_when_definitions_are_built():
    code = (
        "import sys\n"
        "import scopefusion.ir_builder, scopefusion.dialects.onnx as d\n"
        "assert 'onnx' not in sys.modules, 'imported at import time'\n"
        "d.definitions(17)\n"
        "assert 'onnx' in sys.modules\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_param_types_follow_the_schema():
    ops = _by_name(17)
    conv = ops["Conv"]
    assert [(s.name, s.param) for s in conv.inputs] == [("X", ParamType.REQUIRED), ("W", ParamType.REQUIRED), ("B", ParamType.OPTIONAL)]
    assert ops["Concat"].inputs[0].param is ParamType.DYNAMIC
    loop = ops["Loop"]
    assert [s.param for s in loop.inputs] == [ParamType.OPTIONAL, ParamType.OPTIONAL, ParamType.DYNAMIC]
    assert loop.outputs[0].param is ParamType.DYNAMIC
    assert [s.param for s in ops["Dropout"].outputs] == [ParamType.REQUIRED, ParamType.OPTIONAL]
    assert ops["Shape"].outputs[0].dtypes == frozenset({onnx_dtype("int64")})
    assert onnx_dtype("float32") in conv.inputs[0].dtypes and onnx_dtype("int64") not in conv.inputs[0].dtypes


def onnx_dtype(name: str):
    from scopefusion import dtypes

    return dtypes.by_name(name)


def test_attributes_have_mapped_kinds_and_schema_defaults():
    ops = _by_name(17)
    conv = ops["Conv"].attrs
    assert conv["group"].type_id is A.INT and conv["group"].default.value == 1
    assert conv["auto_pad"].type_id is A.STR and conv["auto_pad"].default.value == "NOTSET"
    assert conv["strides"].type_id is A.LIST_INT and not conv["strides"].required and conv["strides"].default is None
    assert ops["Cast"].attrs["to"].type_id is A.INT and ops["Cast"].attrs["to"].required
    assert ops["Resize"].attrs["cubic_coeff_a"].default.value == pytest.approx(-0.75)
    assert ops["ConstantOfShape"].attrs["value"].type_id is A.TENSOR
    assert ops["If"].attrs["then_branch"].type_id is A.GRAPH and not ops["If"].attrs["then_branch"].required
    assert ops["Constant"].attrs["value_strings"].type_id is A.LIST_STR
    assert ops["Constant"].attrs["value_floats"].type_id is A.LIST_FLOAT


def test_name_clashes_keep_attribute_names():
    bn9 = _by_name(9)["BatchNormalization"]
    assert [s.name for s in bn9.outputs][:3] == ["Y", "mean_output", "var_output"]
    split1 = _by_name(1)["Split"]
    assert [s.name for s in split1.inputs] == ["input", "split_input"] and "split" in split1.attrs


def test_value_dependent_inputs_are_declared():
    ops = _by_name(18)
    depend = {(name, s.name) for name, d in ops.items() for s in d.inputs if s.value_depend}
    for op, inputs in [("Reshape", {"shape"}), ("Slice", {"starts", "ends", "axes", "steps"}), ("ReduceMean", {"axes"}),
                       ("Unsqueeze", {"axes"}), ("ConstantOfShape", {"input"}), ("Resize", {"scales", "sizes"})]:
        assert {(op, i) for i in inputs} <= depend
    assert ("Gather", "indices") not in depend and ("Add", "A") not in depend
    # every declared name exists in some version of the op's schema, ONNX's or onnxruntime's (no typos)
    from onnxruntime.capi import onnxruntime_pybind11_state as ort_c

    ort_schemas = ort_c.get_all_operator_schema()
    for op, inputs in VALUE_DEPEND.items():
        known = {p.name for s in defs.get_all_schemas_with_history() if s.name == op and s.domain == "" for p in s.inputs}
        known |= {p.name for s in ort_schemas if s.name == op for p in s.inputs}
        assert inputs <= known, (op, inputs - known)


def test_reshape_like_ops_forward_their_input_buffer():
    ops = _by_name(17)
    assert {name for name, d in ops.items() if d.memory_forward is not None} == MEMORY_FORWARD
    assert all(ops[name].memory_forward == 0 for name in MEMORY_FORWARD)


def test_nodes_accept_schema_attributes_and_check_their_kinds():
    registry = OpRegistry(builtin_ops() + definitions(17))
    g = Graph("g", IRContext(), registry)
    x = g.add_input("x", None)
    w = g.add_const(np.ones((4, 3, 3, 3), np.float32), "w")
    conv = g.add_node("onnx.Conv", [x, w], attrs={"pads": [1, 1, 1, 1]})
    assert "strides" not in conv.attrs  # optional without a default: left unset
    assert conv.attrs.as_int("group") == 1 and conv.attrs.as_str("auto_pad") == "NOTSET"
    with pytest.raises(GraphError, match="attribute 'group'"):
        g.add_node("onnx.Conv", [x, w], name="bad", attrs={"group": "two"})
    with pytest.raises(GraphError, match="needs attribute 'to'"):
        g.add_node("onnx.Cast", [x])


def test_onnxruntime_contrib_ops_are_declared_from_its_schemas():
    found = {d.qualified_name: d for d in definitions(17)}
    transformer_ops = ["Attention", "MultiHeadAttention", "GroupQueryAttention", "SkipLayerNormalization", "EmbedLayerNormalization",
                       "SkipSimplifiedLayerNormalization", "FastGelu", "BiasGelu", "Gelu", "QuickGelu", "FusedMatMul", "RotaryEmbedding"]
    for name in transformer_ops:
        assert f"onnx:com.microsoft.{name}" in found, name
    assert "onnx.SimplifiedLayerNormalization" in found  # onnxruntime's own default-domain op
    skip = found["onnx:com.microsoft.SkipLayerNormalization"]
    assert skip.dialect == "onnx:com.microsoft" and skip.open_attrs
    assert [(s.name, s.param) for s in skip.inputs][3:] == [("beta", ParamType.OPTIONAL), ("bias", ParamType.OPTIONAL)]
    assert skip.attrs["epsilon"].type_id is A.FLOAT and not skip.attrs["epsilon"].required
    attention = found["onnx:com.microsoft.Attention"]
    assert attention.attrs["num_heads"].required and attention.attrs["qkv_hidden_sizes"].type_id is A.LIST_INT
    assert [s.name for s in found["onnx:com.microsoft.Range"].inputs if s.value_depend] == ["start", "limit", "delta"]
    # graph-attribute ops (BeamSearch) and ops without a CPU kernel (BiasAdd) are left out
    assert "onnx:com.microsoft.BeamSearch" not in found and "onnx:com.microsoft.BiasAdd" not in found
    registry = OpRegistry(builtin_ops() + definitions(17))
    assert len(registry) == len(found) + 2
