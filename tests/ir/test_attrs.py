from __future__ import annotations

import numpy as np
import pytest

from scopefusion import dtypes
from scopefusion.ir import attrs as A
from scopefusion.ir.attrs import Attributes, AttrType, AttrValue, NamedAttrs
from scopefusion.ir.graph import Graph
from scopefusion.ir.types import IRContext


def test_seed_example_copy_semantics_setting_after_the_copy():
    # SetInt(op, "i", 10); attrs = GetAllAttrs(op); SetInt(op, "i", 20): the copy still says 10.
    op = Attributes("op")
    op.set_attr("i", 10)
    attrs = op.get_all_attrs()
    assert attrs["i"].value == 10
    op.set_attr("i", 20)
    assert attrs["i"].value == 10
    assert op.get("i") == 20


def test_copy_semantics_editing_the_copy_does_not_reach_the_owner():
    op = Attributes("op")
    op.set_attr("i", 10)
    op.set_attr("shape", [1, 2])
    attrs = op.get_all_attrs()
    attrs["i"] = AttrValue.of(99)
    attrs["new"] = AttrValue.of("x")
    del attrs["shape"]
    assert op.get("i") == 10 and "new" not in op and op.get("shape") == (1, 2)
    with pytest.raises(AttributeError):
        attrs["i"].value = 5  # values themselves are immutable


def test_read_only_arrays_are_shared_writable_ones_copied():
    ro = np.arange(6, dtype=np.float32).reshape(2, 3)
    ro.flags.writeable = False
    op = Attributes("op")
    op.set_attr("w", ro)
    assert op.get("w") is ro
    assert op.get_all_attrs()["w"].value is ro  # shared, not copied

    rw = np.zeros(3, np.int32)
    op.set_attr("z", rw)
    stored = op.get("z")
    assert stored is not rw and not stored.flags.writeable
    rw[0] = 7
    assert stored[0] == 0
    with pytest.raises(ValueError):
        stored[0] = 1


def test_graph_attributes_are_cloned_by_the_copy():
    ctx = IRContext()
    body = Graph("body", ctx)
    body.add_input("x", ctx.tensor(dtypes.FLOAT32, (1,)))
    op = Attributes("op")
    op.set_attr("body", body)
    copy = op.get_all_attrs()["body"].value
    assert copy is not body and len(copy.nodes) == 1
    copy.add_input("y", None)
    assert len(body.nodes) == 1


@pytest.mark.parametrize(
    "payload, type_id",
    [
        (3, A.INT), (2.5, A.FLOAT), (True, A.BOOL), ("s", A.STR), (b"\x00b", A.BYTES), (dtypes.BFLOAT16, A.DTYPE),
        ([1, 2], A.LIST_INT), ([1.0, 2], A.LIST_FLOAT), ([True], A.LIST_BOOL), (["a"], A.LIST_STR),
        ([b"a"], A.LIST_BYTES), ([dtypes.INT8], A.LIST_DTYPE), ([[1, 2], [3]], A.LIST_LIST_INT),
        ([[1.5], [2]], A.LIST_LIST_FLOAT), (np.ones(2, np.float16), A.TENSOR),
        ([np.ones(1), np.zeros(2, np.int8)], A.LIST_TENSOR), (NamedAttrs("f", {"k": 1}), A.NAMED_ATTRS),
        ([NamedAttrs("g")], A.LIST_NAMED_ATTRS),
    ],
)  # fmt: skip
def test_every_attr_def_case_is_representable(payload, type_id):
    value = AttrValue.of(payload)
    assert value.type_id is type_id
    assert value == AttrValue(type_id, payload)


def test_tensor_desc_graph_and_their_lists():
    ctx = IRContext()
    t = ctx.tensor(dtypes.FLOAT32, (-1, 3))
    assert AttrValue.of(t).type_id is A.TENSOR_DESC
    assert AttrValue.of([t, t]).type_id is A.LIST_TENSOR_DESC
    g = Graph("g", ctx)
    assert AttrValue.of(g).type_id is A.GRAPH and AttrValue.of([g]).type_id is A.LIST_GRAPH


def test_coercion_errors_name_the_attribute_and_what_was_found():
    op = Attributes("node 'n' (tf.X)")
    with pytest.raises(TypeError, match=r"node 'n' \(tf.X\): attribute 'k': expected an int, found str"):
        op.set_attr("k", "3", A.INT)
    with pytest.raises(TypeError, match="item 1: expected an int, found float"):
        op.set_attr("k", [1, 2.5], A.LIST_INT)
    with pytest.raises(ValueError, match="does not fit in int64"):
        AttrValue(A.INT, 2**64)
    with pytest.raises(TypeError, match="empty list"):
        AttrValue.of([])
    with pytest.raises(TypeError, match="mixes attribute kinds"):
        AttrValue.of([1, "a"])
    assert AttrValue(A.LIST_INT, []).value == ()


def test_typed_accessors_name_the_real_kind():
    op = Attributes("op")
    op.set_attr("eps", 1e-5)
    assert op.as_float("eps") == 1e-5
    with pytest.raises(TypeError, match="attribute 'eps' is float, not int"):
        op.as_int("eps")
    with pytest.raises(KeyError, match="has no attribute 'missing'"):
        op.get_attr("missing")


def test_value_equality_is_by_type_id_and_payload():
    assert AttrValue.of(1) != AttrValue.of(1.0)
    assert AttrValue.of(float("nan")) == AttrValue.of(float("nan"))
    assert AttrValue.of(np.array([1, 2], np.int32)) != AttrValue.of(np.array([1, 2], np.int64))
    assert AttrValue.of(np.array([b"a"], object)) == AttrValue.of(np.array([b"a"], object))
    assert NamedAttrs("f", {"a": 1, "b": [1.0]}) == NamedAttrs("f", {"b": [1.0], "a": 1})


def test_a_new_attribute_type_needs_only_its_type_id():
    # A new kind of payload: a complex number, kept as an immutable (re, im) pair.
    def coerce(x):
        if not isinstance(x, complex):
            raise TypeError(f"expected a complex, found {type(x).__name__}")
        return x

    COMPLEX = AttrType("complex", coerce)
    op = Attributes("op")
    op.set_attr("c", 1 + 2j, COMPLEX)
    assert op.get_attr("c").type_id is COMPLEX
    assert op.get_all_attrs()["c"] == AttrValue(COMPLEX, 1 + 2j)
    with pytest.raises(TypeError, match="expected a complex"):
        op.set_attr("d", 3, COMPLEX)


def test_a_nodes_attributes_name_the_node_as_it_is_now_and_a_clone_names_its_own():
    from scopefusion.ir.core_ops import core_ops
    from scopefusion.ir.opdef import OpDef, OpRegistry

    op = OpDef("Scale", "t", open_attrs=True).input("x").output("y")
    graph = Graph("g", IRContext(), OpRegistry([*core_ops(), op]))
    x = graph.add_input("x", None)
    node = graph.add_node("t.Scale", [x], name="scale")
    assert node.attrs.owner == "node 'scale' (t.Scale)"
    node.name = "renamed"
    with pytest.raises(KeyError, match=r"node 'renamed' \(t.Scale\) has no attribute 'k'"):
        node.attrs.get_attr("k")
    clone = graph.clone()
    assert clone.node("renamed").attrs._owner is clone.node("renamed")
    assert graph.nodes[0].attrs.owner == "node 'x' (ge.Data)"
