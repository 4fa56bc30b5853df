"""The attribute serializer registry: builtin cases, recognition, registration, errors, round trips."""

from __future__ import annotations

import json

import numpy as np
import pytest
from hypothesis import given, settings

from scopefusion import dtypes as D
from scopefusion.errors import SerdeError
from scopefusion.ir import attrs as A
from scopefusion.ir.attrs import AttrType, AttrValue
from scopefusion.ir_builder import Graph, IRContext, NamedAttrs, graphs_equal
from scopefusion.serde import SerdeContext, default_registry
from scopefusion.serde import ge_ir_pb2 as pb

from ._strategies import attr_values

VT = pb.AttrDef.ListValue


def _write(value: AttrValue, registry=None) -> pb.AttrDef:
    attr_def = pb.AttrDef()
    SerdeContext(registry=registry).write_attr(value, attr_def)
    return attr_def


def _read(attr_def: pb.AttrDef, registry=None, context=None) -> AttrValue:
    return SerdeContext(context, registry).read_attr(pb.AttrDef.FromString(attr_def.SerializeToString(deterministic=True)))


CASES = [
    (AttrValue(A.INT, -3), "i", None),
    (AttrValue(A.INT, 0), "i", None),
    (AttrValue(A.FLOAT, 0.0), "f", None),
    (AttrValue(A.BOOL, False), "b", None),
    (AttrValue(A.STR, ""), "s", None),
    (AttrValue(A.BYTES, b"\x00\xff"), "bt", None),
    (AttrValue(A.DTYPE, D.BFLOAT16), "dt", None),
    (AttrValue(A.TENSOR, np.zeros((0, 2), np.float16)), "t", None),
    (AttrValue(A.TENSOR_DESC, IRContext().tensor(D.INT8, None)), "td", None),
    (AttrValue(A.NAMED_ATTRS, NamedAttrs("")), "func", None),
    (AttrValue(A.LIST_INT, ()), "list", VT.VT_LIST_INT),
    (AttrValue(A.LIST_FLOAT, (1.5,)), "list", VT.VT_LIST_FLOAT),
    (AttrValue(A.LIST_BOOL, (True,)), "list", VT.VT_LIST_BOOL),
    (AttrValue(A.LIST_STR, ()), "list", VT.VT_LIST_STRING),
    (AttrValue(A.LIST_BYTES, (b"",)), "list", VT.VT_LIST_BYTES),
    (AttrValue(A.LIST_DTYPE, (D.INT4 if hasattr(D, "INT4") else D.by_name("int4"),)), "list", VT.VT_LIST_DATA_TYPE),
    (AttrValue(A.LIST_TENSOR, (np.ones(2, np.int32),)), "list", VT.VT_LIST_TENSOR),
    (AttrValue(A.LIST_TENSOR_DESC, ()), "list", VT.VT_LIST_TENSOR_DESC),
    (AttrValue(A.LIST_NAMED_ATTRS, (NamedAttrs("n", {"k": 1}),)), "list", VT.VT_LIST_NAMED_ATTRS),
    (AttrValue(A.LIST_GRAPH, ()), "list", VT.VT_LIST_GRAPH),
    (AttrValue(A.LIST_LIST_INT, ((), (1, 2))), "list_list_int", None),
    (AttrValue(A.LIST_LIST_FLOAT, ()), "list_list_float", None),
]


@pytest.mark.parametrize("value,case,val_type", CASES, ids=[c[0].type_id.name + str(i) for i, c in enumerate(CASES)])
def test_builtin_type_writes_its_case_and_reads_back(value, case, val_type):
    attr_def = _write(value)
    assert attr_def.WhichOneof("value") == case
    if val_type is not None:
        assert attr_def.list.val_type == val_type
    assert _read(attr_def) == value


def test_default_registry_covers_every_builtin_type_and_is_fresh_each_time():
    registry = default_registry()
    assert set(registry) == set(A.BUILTIN_ATTR_TYPES) and len(registry) == len(A.BUILTIN_ATTR_TYPES)
    registry.register(AttrType("extra", lambda x: x), _Json())
    assert len(default_registry()) == len(A.BUILTIN_ATTR_TYPES)


def test_str_is_utf8_in_s_and_any_bytes_in_s_survive():
    assert _write(AttrValue(A.STR, "héllo")).s == "héllo".encode()
    raw = pb.AttrDef(s=b"\xff\xfe ok")
    value = _read(raw)
    assert value.type_id is A.STR
    assert _write(value).s == b"\xff\xfe ok"


def test_floats_round_to_float32_and_then_stay_stable():
    first = _read(_write(AttrValue(A.FLOAT, 0.1)))
    assert first.value == float(np.float32(0.1)) and first.value != 0.1
    assert _write(first).SerializeToString() == _write(AttrValue(A.FLOAT, 0.1)).SerializeToString()


def test_nested_named_attrs_and_list_of_lists():
    inner = NamedAttrs("inner", {"shape": ((1, 2), (3,)), "w": np.arange(3, dtype=np.int8), "t": D.FLOAT32})
    value = AttrValue(A.NAMED_ATTRS, NamedAttrs("outer", {"inner": inner, "names": ["a", "b"], "eps": 1e-5}))
    attr_def = _write(value)
    assert attr_def.func.attr["inner"].func.attr["shape"].list_list_int.list_list_i[1].list_i == [3]
    back = _read(attr_def)
    assert back.value.attrs["inner"] == AttrValue(A.NAMED_ATTRS, inner)
    assert back.value.attrs["eps"].value == float(np.float32(1e-5))


def test_graph_attribute_round_trips_with_its_bodies():
    ctx = IRContext()
    body = Graph("body", ctx)
    body.set_outputs([body.add_input("b", ctx.tensor(D.FLOAT32, (2,)))])
    g = Graph("fn", ctx)
    x = g.add_input("x", ctx.tensor(D.FLOAT32, (2,)))
    node = g.add_node("tf.Call", [x], subgraphs={"f": body}, output_types=[x.type], allow_unknown=True)
    g.set_outputs(node.outputs)
    attr_def = _write(AttrValue(A.GRAPH, g))
    assert [b.name for b in attr_def.g.attr["_subgraphs"].list.g] == ["body"]
    back = _read(attr_def)
    assert back.type_id is A.GRAPH and graphs_equal(back.value, g)


def test_tensor_desc_reads_into_the_given_context():
    ctx = IRContext()
    t = ctx.tensor(D.INT64, (3, -1), "NHWC")
    back = _read(_write(AttrValue(A.TENSOR_DESC, t)), context=ctx)
    assert back.value is t


# ----------------------------------------------------------------------------- errors
def test_attr_def_without_a_case_is_a_serde_error():
    with pytest.raises(SerdeError, match="the AttrDef has no value set"):
        _read(pb.AttrDef())


def test_unknown_data_type_is_a_serde_error():
    with pytest.raises(SerdeError, match="GE data type unknown value 999 has no IR element type"):
        _read(pb.AttrDef(dt=999))
    bad = pb.AttrDef()
    bad.td.dtype = 999
    with pytest.raises(SerdeError, match="unknown value 999"):
        _read(bad)


def test_unknown_value_type_on_serialize_is_a_serde_error():
    odd = AttrType("odd", lambda x: x)
    with pytest.raises(SerdeError, match="attribute type 'odd' has no serializer; register one"):
        _write(AttrValue(odd, 1))
    with pytest.raises(SerdeError, match="expected an AttrValue"):
        _write(3)  # type: ignore[arg-type]


def test_case_without_a_reader_is_a_serde_error():
    with pytest.raises(SerdeError, match="no attribute serializer reads an AttrDef of case 'expression'"):
        _read(pb.AttrDef(expression=b"s0 + 1"))
    attr_def = pb.AttrDef()
    attr_def.list.val_type = 77
    with pytest.raises(SerdeError, match="val_type 77"):
        _read(attr_def)


def test_untyped_list_is_typed_by_its_one_filled_field():
    attr_def = pb.AttrDef()
    attr_def.list.f.extend([1.0, 2.0])
    assert _read(attr_def) == AttrValue(A.LIST_FLOAT, (1.0, 2.0))
    attr_def = pb.AttrDef()
    attr_def.list.SetInParent()
    assert _read(attr_def) == AttrValue(A.LIST_INT, ())
    attr_def.list.i.append(1)
    attr_def.list.s.append(b"x")
    with pytest.raises(SerdeError, match="fills 2 kinds of items"):
        _read(attr_def)


def test_bad_payload_inside_a_known_case_names_the_attribute():
    ctx = SerdeContext(where="op 'n' (tf.X) attribute 'k'")
    attr_def = pb.AttrDef()
    attr_def.t.desc.dtype = pb.DT_FLOAT
    attr_def.t.desc.shape.dim.append(4)
    with pytest.raises(SerdeError, match=r"^op 'n' \(tf.X\) attribute 'k': tensor data has 0 bytes, expected 16"):
        ctx.read_attr(attr_def)


# ----------------------------------------------------------------------------- registration
MARK = b"\x00json:"
JSON = AttrType("json", lambda x: json.dumps(x, sort_keys=True) if not isinstance(x, str) else json.dumps(json.loads(x), sort_keys=True))


class _Json:
    """A new attribute type: JSON text in ``bt`` behind a marker, sharing ``bt`` with BYTES."""

    case = "bt"
    list_type = None

    def serialize(self, value, attr_def, ctx):
        attr_def.bt = MARK + value.value.encode()

    def deserialize(self, attr_def, ctx):
        return AttrValue(JSON, attr_def.bt[len(MARK) :].decode())

    def claims(self, attr_def):
        return attr_def.bt.startswith(MARK)


def test_a_new_attribute_type_is_one_registration():
    registry = default_registry()
    registry.register(JSON, _Json())
    value = AttrValue(JSON, {"b": [1, 2], "a": None})
    attr_def = _write(value, registry)
    assert attr_def.bt == MARK + b'{"a": null, "b": [1, 2]}'
    assert _read(attr_def, registry) == value
    # BYTES still owns every other bt payload.
    assert _read(_write(AttrValue(A.BYTES, b"plain"), registry), registry) == AttrValue(A.BYTES, b"plain")
    # Without the registration the same bytes read as plain BYTES.
    assert _read(attr_def).type_id is A.BYTES


def test_registration_refuses_duplicates_and_bad_serializers():
    registry = default_registry()
    with pytest.raises(ValueError, match="already has a serializer; pass replace=True"):
        registry.register(A.INT, registry.serializer(A.INT))

    class _PlainBt:
        case = "bt"
        list_type = None
        serialize = _Json.serialize
        deserialize = _Json.deserialize

    with pytest.raises(ValueError, match="case 'bt' is already read by bytes; give the serializer for raw2 a claims"):
        registry.register(AttrType("raw2", lambda x: x), _PlainBt())
    with pytest.raises(TypeError, match="needs case, list_type, serialize and deserialize"):
        registry.register(AttrType("x", lambda x: x), object())
    with pytest.raises(TypeError, match="needs an AttrType"):
        registry.register("int", _Json())  # type: ignore[arg-type]

    class _BadCase(_Json):
        case = "nope"

    with pytest.raises(ValueError, match="case 'nope' is not an AttrDef case"):
        registry.register(AttrType("y", lambda x: x), _BadCase())


def test_replace_swaps_the_reader_too_and_a_refused_registration_changes_nothing():
    class _IntAsText:
        case = "expression"
        list_type = None

        def serialize(self, value, attr_def, ctx):
            attr_def.expression = str(value.value).encode()

        def deserialize(self, attr_def, ctx):
            return AttrValue(A.INT, int(attr_def.expression))

    class _IntAsFloat(_IntAsText):
        case = "f"

    registry = default_registry()
    with pytest.raises(ValueError, match="case 'f' is already read by float"):
        registry.register(A.INT, _IntAsFloat(), replace=True)
    assert _read(pb.AttrDef(i=1), registry) == AttrValue(A.INT, 1)

    registry.register(A.INT, _IntAsText(), replace=True)
    assert _write(AttrValue(A.INT, 42), registry).expression == b"42"
    assert _read(pb.AttrDef(expression=b"-7"), registry) == AttrValue(A.INT, -7)
    with pytest.raises(SerdeError, match="no attribute serializer reads an AttrDef of case 'i'"):
        _read(pb.AttrDef(i=1), registry)
    copy = registry.copy()
    copy.register(A.INT, default_registry().serializer(A.INT), replace=True)
    assert _read(pb.AttrDef(i=1), copy) == AttrValue(A.INT, 1)
    assert _read(pb.AttrDef(expression=b"3"), registry) == AttrValue(A.INT, 3)


def test_serializer_that_writes_another_case_is_caught():
    registry = default_registry()

    class _Liar(_Json):
        def serialize(self, value, attr_def, ctx):
            attr_def.i = 1

    registry.register(JSON, _Liar())
    with pytest.raises(SerdeError, match="wrote AttrDef case 'i', but declares case 'bt'"):
        _write(AttrValue(JSON, "{}"), registry)


# ----------------------------------------------------------------------------- properties
@settings(max_examples=200, deadline=None)
@given(attr_values())
def test_every_attribute_type_round_trips_through_bytes(value):
    first = _write(value)
    data = first.SerializeToString(deterministic=True)
    back = SerdeContext(IRContext()).read_attr(pb.AttrDef.FromString(data))
    assert back == value
    assert _write(back).SerializeToString(deterministic=True) == data


def test_tensor_desc_read_into_a_fresh_context_equals_the_original():
    t = IRContext().tensor(D.FLOAT32, (2, -1), "NHWC")
    back = _read(_write(AttrValue(A.TENSOR_DESC, t)), context=IRContext())
    assert back.value is not t and back == AttrValue(A.TENSOR_DESC, t)
    assert back != AttrValue(A.TENSOR_DESC, IRContext().tensor(D.FLOAT32, (2, -1)))
