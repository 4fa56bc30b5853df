"""The ``tf`` definitions against TensorFlow's own op registry: same inputs and outputs in the same order,
declared attributes that TF has, with the kind the builder converts them to and TF's default values."""

from __future__ import annotations

import numpy as np
import pytest

from scopefusion import dtypes as D
from scopefusion.dialects.tf import definitions
from scopefusion.ir import attrs as A
from scopefusion.ir.opdef import OpRegistry, ParamType

# The builder's conversion of TF attribute kinds.
KIND = {
    "type": A.DTYPE, "list(type)": A.LIST_DTYPE, "int": A.INT, "float": A.FLOAT, "bool": A.BOOL, "string": A.STR,
    "list(int)": A.LIST_INT, "list(float)": A.LIST_FLOAT, "list(string)": A.LIST_STR, "shape": A.LIST_INT,
    "list(shape)": A.LIST_LIST_INT, "tensor": A.TENSOR, "func": A.NAMED_ATTRS, "list(func)": A.LIST_NAMED_ATTRS,
}  # fmt: skip

DEFS = definitions()


def _tf_op_def(name: str):
    from tensorflow.python.framework import op_def_registry

    found = op_def_registry.get(name)
    assert found is not None, f"{name} is not a TensorFlow op"
    return found


def _tf_default(attr) -> object:
    """TF's default as the builder would convert it (None for an unknown-rank shape: the attr is absent)."""
    v = attr.default_value
    kind = v.WhichOneof("value")
    if kind == "type":
        return D.from_tf(v.type)
    if kind == "shape":
        return None if v.shape.unknown_rank else tuple(d.size for d in v.shape.dim)
    if kind == "list":
        for field in ("i", "f", "s", "b", "type", "shape"):
            items = list(getattr(v.list, field))
            if items:
                return tuple(items)
        return ()
    if kind == "s":
        return v.s.decode()
    return getattr(v, kind)


def test_definitions_are_fresh_unique_and_registrable():
    again = definitions()
    assert [d.name for d in again] == [d.name for d in DEFS]
    assert all(a is not b for a, b in zip(again, DEFS))
    registry = OpRegistry(DEFS)
    assert len(registry) == len(DEFS) >= 200
    assert registry.dialects() == {"tf"}
    assert all(d.open_attrs for d in DEFS)
    assert "tf.Const" not in registry and "tf.Placeholder" not in registry


@pytest.mark.parametrize("opdef", DEFS, ids=lambda d: d.name)
def test_signature_matches_tensorflow(opdef):
    tf_def = _tf_op_def(opdef.name)
    ins = [(a.name, bool(a.number_attr or a.type_list_attr)) for a in tf_def.input_arg]
    ours = [(s.name, s.param is ParamType.DYNAMIC) for s in opdef.inputs]
    assert [d for _, d in ours] == [d for _, d in ins] and len(ours) == len(ins), (ours, ins)
    outs = [bool(a.number_attr or a.type_list_attr) for a in tf_def.output_arg]
    assert [s.param is ParamType.DYNAMIC for s in opdef.outputs] == outs
    # Names follow TF's, so printed graphs and errors read as TF users know them.
    assert [n for n, _ in ours] == [n for n, _ in ins]
    assert [s.name for s in opdef.outputs] == [a.name for a in tf_def.output_arg]


@pytest.mark.parametrize("opdef", DEFS, ids=lambda d: d.name)
def test_declared_attributes_exist_in_tensorflow_with_kind_and_default(opdef):
    tf_attrs = {a.name: a for a in _tf_op_def(opdef.name).attr}
    for name, spec in opdef.attrs.items():
        assert name in tf_attrs, f"{opdef.name} declares {name!r}, TF has {sorted(tf_attrs)}"
        tf_attr = tf_attrs[name]
        assert spec.type_id is KIND[tf_attr.type], (name, spec.type_id, tf_attr.type)
        if tf_attr.HasField("default_value"):
            expected = _tf_default(tf_attr)
            if expected is None:  # unknown-rank shape: absent, so declared optional without a default
                assert not spec.required and spec.default is None, name
            else:
                assert not spec.required and spec.default is not None, f"{opdef.name}.{name} needs TF's default {expected!r}"
                got = spec.default.value
                assert got == expected or (isinstance(got, float) and np.isclose(got, expected)), (name, got, expected)
        else:
            assert spec.required or (spec.default is None and tf_attr.type in ("shape", "list(type)")), (
                f"{opdef.name}.{name} has no TF default; declare it required"
            )
