"""The plain-Python ONNX node of the export pipeline writes what ``onnx.helper`` writes, byte for byte (into
scopefusion's own messages, :mod:`scopefusion.serde.onnx_proto`; values may be the onnx package's messages)."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import helper, numpy_helper

from scopefusion.serde.onnx_node import Initializer, Node, append_initializers, append_nodes
from scopefusion.serde.onnx_proto import GraphProto, from_onnx

BODY = helper.make_graph([helper.make_node("Identity", ["a"], ["b"])], "body", [], [])

ATTRIBUTES = [
    {},
    {"perm": [0, 3, 1, 2]},
    {"axis": 1, "keepdims": 0},
    {"to": np.int64(7), "flag": True},
    {"epsilon": 1e-5, "alpha": np.float32(0.2)},
    {"mode": "constant", "name_bytes": b"raw"},
    {"scales": [1.0, 2, 0.5], "pads": (1, 1, np.int64(2), 2), "axes": np.asarray([0, 1])},
    {"strings": ["a", b"b"], "value": numpy_helper.from_array(np.arange(3, dtype=np.float32))},
    {"then_branch": BODY, "branches": [BODY, BODY], "unset": None},
]


@pytest.mark.parametrize("attrs", ATTRIBUTES)
def test_node_bytes_match_make_node(attrs):
    expected = helper.make_node("Op", ["x", "", "y"], ["z"], name="n", domain="custom", **attrs)
    node = Node.make("Op", ["x", "", "y"], ["z"], "n", "custom", **attrs)
    assert node.to_proto().SerializeToString() == expected.SerializeToString()
    assert node.body_reads == (["a"] * 3 if "branches" in attrs else None)
    for name, value in attrs.items():
        if value is not None and not isinstance(value, onnx.GraphProto) and name != "branches":
            found = [a for a in expected.attribute if a.name == name][0]
            want = helper.get_attribute_value(found)
            got = node.attr(name)
            if isinstance(want, onnx.TensorProto):
                assert got.SerializeToString() == want.SerializeToString()
            else:
                assert got == want


@pytest.mark.parametrize("value", [[], np.zeros((2, 2)), object()])
def test_bad_attribute_fails_as_make_node(value):
    with pytest.raises((ValueError, TypeError)) as expected:
        helper.make_node("Op", [], ["y"], bad=value)
    with pytest.raises(expected.type):
        Node.make("Op", [], ["y"], "n", bad=value)


def test_rewritten_attribute_moves_last_as_in_the_message():
    node = Node.make("Transpose", ["x"], ["y"], "t", perm=[1, 0], extra=1)
    node.set_attr("perm", [0, 1])
    expected = helper.make_node("Transpose", ["x"], ["y"], name="t", extra=1)
    expected.attribute.append(helper.make_attribute("perm", [0, 1]))
    assert node.to_proto().SerializeToString() == expected.SerializeToString()


@pytest.mark.parametrize("attrs", ATTRIBUTES)
def test_ints_view_reads_as_attr_does(attrs):
    node = Node.make("Op", ["x"], ["y"], **attrs)
    for name in [*attrs, "absent"]:
        assert node.ints_view(name) == node.attr(name)


def test_ints_view_is_the_node_own_list_and_read_from_a_proto_as_attr_reads_it():
    node = Node.make("Transpose", ["x"], ["y"], perm=[0, 2, 1])
    assert node.ints_view("perm") is node.ints_view("perm") and node.attr("perm") is not node.attr("perm")
    read = Node.of(node.to_proto())
    assert read.ints_view("perm") == [0, 2, 1]


def test_node_read_from_proto_keeps_its_fields():
    proto = helper.make_node("Relu", ["x"], ["y"], name="r", doc_string="kept", domain="")
    node = Node.of(from_onnx(proto))
    node.input[0] = "x2"
    graph = GraphProto()
    append_nodes(graph, [node])
    proto.input[0] = "x2"
    assert graph.node[0].SerializeToString() == proto.SerializeToString()


@pytest.mark.parametrize("array", [np.arange(6, dtype=np.float32).reshape(2, 3), np.asarray(3, np.int64),
                                   np.asarray([True, False]), np.asarray(["a", "b"]),
                                   np.arange(4, dtype=np.float16)])
def test_initializer_bytes_and_value(array):
    init = Initializer.of_array("w", array)
    graph = GraphProto()
    append_initializers(graph, [init])
    expected = numpy_helper.from_array(array.astype(object) if array.dtype.kind == "U" else array, "w")
    assert graph.initializer[0].SerializeToString() == expected.SerializeToString()
    if init.array is not None:  # its value is the array itself only where reading it back gives the same
        read = numpy_helper.to_array(graph.initializer[0])
        assert read.dtype == init.array.dtype and np.array_equal(read, init.array)
