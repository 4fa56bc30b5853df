"""default_op_registry: definitions are made once per process, yet every registry is its own."""

from __future__ import annotations

import pytest

from scopefusion.dialects import default_op_registry, op_name_tuple, op_names
from scopefusion.ir import attrs as A
from scopefusion.ir.opdef import OpDef
from scopefusion.parser import SourceGraph, SourceNode


def _onnx_source(*nodes: SourceNode) -> SourceGraph:
    return SourceGraph([SourceNode("x", "Input"), *nodes], framework="onnx", opset_imports={"": 17})


def test_changing_one_registry_changes_no_other():
    first, second = default_op_registry(), default_op_registry()
    relu = first.get("tf.Relu")
    assert relu is not second.get("tf.Relu")
    relu.set_reference(lambda inputs, attrs: inputs)
    relu.attr("extra_flag", A.BOOL, default=False)
    relu.input("extra_input")
    fresh = default_op_registry().get("tf.Relu")
    for other in (second.get("tf.Relu"), fresh):
        assert other.reference is not relu.reference
        assert "extra_flag" not in other.attrs
        assert [s.name for s in other.inputs] == [s.name for s in relu.inputs][:-1]
    first.define("MyOp", "fused")
    assert "fused.MyOp" not in second and "fused.MyOp" not in default_op_registry()


def test_onnxruntime_definitions_only_for_models_that_may_use_them():
    plain = default_op_registry(_onnx_source(SourceNode("y", "Relu", inputs=[("x", 0)])))
    assert "onnx.Relu" in plain
    assert "onnx:com.microsoft" not in plain.dialects()
    assert "onnx.SimplifiedLayerNormalization" not in plain
    contrib = _onnx_source(SourceNode("y", "BiasGelu", inputs=[("x", 0), ("x", 0)], domain="com.microsoft"))
    with_contrib = default_op_registry(contrib)
    assert "onnx:com.microsoft.BiasGelu" in with_contrib
    assert "onnx.SimplifiedLayerNormalization" in with_contrib
    assert "onnx:com.microsoft" in default_op_registry().dialects()


def test_definitions_are_copied_in_when_first_looked_up_in_registration_order():
    registry = default_op_registry(_onnx_source(SourceNode("y", "Relu", inputs=[("x", 0)])))
    names = op_names(registry)
    assert len(names) == len(registry) and ("Relu", "onnx") in names and ("LayerNorm", "fused") in names
    relu = registry.get("onnx.Relu")
    assert registry.get("onnx.Relu") is relu and registry.lookup("onnx.Relu") is relu
    assert relu.name == "Relu" and relu.dialect == "onnx" and [s.name for s in relu.inputs] == ["X"]
    assert registry.lookup("onnx.NoSuchOp") is None and "onnx.NoSuchOp" not in registry
    with pytest.raises(KeyError, match="no op named 'onnx.NoSuchOp'"):
        registry.get("onnx.NoSuchOp")
    assert [(d.name, d.dialect) for d in registry] == names  # iterating copies in the rest, order kept
    assert op_names(registry) == names


def test_a_builtin_not_looked_up_yet_is_still_registered():
    registry = default_op_registry()
    with pytest.raises(ValueError, match="op fused.LayerNorm is already registered"):
        registry.define("LayerNorm", "fused")
    mine = registry.register(OpDef("LayerNorm", "fused"), replace=True)
    assert registry.get("fused.LayerNorm") is mine
    names = [n for n in op_names(registry) if n.dialect == "fused"]
    assert [d for d in registry if d.dialect == "fused"][names.index(("LayerNorm", "fused"))] is mine


def test_definitions_looked_up_one_by_one_iterate_in_registration_order():
    registry = default_op_registry()
    names = op_names(registry)
    for name in reversed(names):
        registry.get(f"{name.dialect}.{name.name}")
    registry.define("Mine", "fused")
    assert [(d.name, d.dialect) for d in registry] == names + [("Mine", "fused")]


def test_fused_op_table_names_every_fused_definition_in_order():
    from scopefusion.dialects.fused import OP_MODULES, definition, definitions
    from scopefusion.dialects.fused.declared import builtin_fused_op_names

    made = definitions()
    assert [(d.name, d.dialect) for d in made] == [(name, "fused") for name in OP_MODULES]
    assert builtin_fused_op_names() == set(OP_MODULES)
    assert definition("Gelu") is not definition("Gelu")  # fresh objects
    with pytest.raises(KeyError):
        definition("NoSuchOp")
    registry = default_op_registry()
    assert [n.name for n in op_names(registry) if n.dialect == "fused"] == list(OP_MODULES)


def test_a_fused_op_module_is_imported_when_the_op_is_first_looked_up():
    import subprocess
    import sys

    code = (
        "import sys\n"
        "from scopefusion.dialects import default_op_registry, op_names\n"
        "registry = default_op_registry()\n"
        "assert ('Clip', 'fused') in op_names(registry)\n"
        "assert 'scopefusion.dialects.fused.clip' not in sys.modules\n"
        "assert registry.get('fused.Clip').name == 'Clip'\n"
        "assert 'scopefusion.dialects.fused.clip' in sys.modules\n"
        "assert 'scopefusion.dialects.fused.dynamic_gru' not in sys.modules\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_registries_of_one_kind_share_their_tuple_of_names_until_one_registers_more():
    from scopefusion.scope import KnownOpTypes

    a, b = default_op_registry(), default_op_registry()
    names = op_name_tuple(a)
    assert names is op_name_tuple(b) and list(names) == op_names(a)
    a.lookup("tf.Relu")  # copying a builtin in changes no name
    assert op_name_tuple(a) is names
    known = KnownOpTypes.from_op_registry(names, "tf")
    assert KnownOpTypes.from_op_registry(tuple(list(names)), "tf") is known  # an equal tuple, read
    assert KnownOpTypes.from_op_registry(names, "onnx") is not known
    b.define("Mine", "fused")
    assert op_name_tuple(b) is not names and op_name_tuple(b) == tuple(op_names(b))
    assert "Mine" in KnownOpTypes.from_op_registry(op_name_tuple(b), "tf").fused
    assert "Mine" not in KnownOpTypes.from_op_registry(names, "tf").fused
