"""AttrValue to plain Python values."""

from __future__ import annotations

import numpy as np

from scopefusion import dtypes
from scopefusion.parser import AttrPlaceholder, FunctionRef
from scopefusion.parser.proto import tf_framework_pb2 as tfpb
from scopefusion.parser.tf_attrs import decode_attr, decode_attrs
from scopefusion.parser.values import ForeignDType


def _shape(*dims):
    shape = tfpb.TensorShapeProto()
    for d in dims:
        shape.dim.add().size = d
    return shape


def test_scalar_kinds():
    assert decode_attr(tfpb.AttrValue(s=b"SAME")) == "SAME"
    assert decode_attr(tfpb.AttrValue(s=b"\xff\x00")) == b"\xff\x00"
    assert decode_attr(tfpb.AttrValue(i=-3)) == -3
    assert decode_attr(tfpb.AttrValue(f=0.25)) == 0.25
    assert decode_attr(tfpb.AttrValue(b=True)) is True
    assert decode_attr(tfpb.AttrValue(type=tfpb.DT_HALF)) is dtypes.FLOAT16
    assert decode_attr(tfpb.AttrValue(type=tfpb.DT_RESOURCE)) == ForeignDType("tensorflow", 20, "DT_RESOURCE")
    assert decode_attr(tfpb.AttrValue(shape=_shape(-1, 7))) == (-1, 7)
    assert decode_attr(tfpb.AttrValue(shape=tfpb.TensorShapeProto(unknown_rank=True))) is None
    assert decode_attr(tfpb.AttrValue(placeholder="T")) == AttrPlaceholder("T")
    assert decode_attr(tfpb.AttrValue()) is None


def test_lists_of_every_kind():
    lv = tfpb.AttrValue.ListValue
    assert decode_attr(tfpb.AttrValue(list=lv(i=[1, 2, 3]))) == (1, 2, 3)
    assert decode_attr(tfpb.AttrValue(list=lv(s=[b"loc:@a", b"b"]))) == ("loc:@a", "b")
    assert decode_attr(tfpb.AttrValue(list=lv(f=[0.5]))) == (0.5,)
    assert decode_attr(tfpb.AttrValue(list=lv(b=[True, False]))) == (True, False)
    assert decode_attr(tfpb.AttrValue(list=lv(type=[tfpb.DT_INT32, tfpb.DT_FLOAT]))) == (dtypes.INT32, dtypes.FLOAT32)
    assert decode_attr(tfpb.AttrValue(list=lv(shape=[_shape(2), _shape()]))) == ((2,), ())
    (array,) = decode_attr(tfpb.AttrValue(list=lv(tensor=[tfpb.TensorProto(dtype=tfpb.DT_INT64, int64_val=[4])])))
    assert array.dtype == np.int64 and array.tolist() == 4
    assert decode_attr(tfpb.AttrValue(list=lv())) == ()


def test_functions_carry_their_own_decoded_attributes():
    value = tfpb.AttrValue()
    value.func.name = "body_7"
    value.func.attr["T"].type = tfpb.DT_FLOAT
    value.func.attr["n"].i = 2
    assert decode_attr(value) == FunctionRef("body_7", (("T", dtypes.FLOAT32), ("n", 2)))
    listed = tfpb.AttrValue()
    listed.list.func.add(name="b0")
    listed.list.func.add(name="b1")
    assert decode_attr(listed) == (FunctionRef("b0"), FunctionRef("b1"))


def test_attribute_maps_decode_sorted_with_cut_tensor_views():
    node = tfpb.NodeDef(name="c", op="Const")
    node.attr["value"].tensor.dtype = tfpb.DT_FLOAT
    node.attr["value"].tensor.tensor_shape.dim.add().size = 2
    node.attr["dtype"].type = tfpb.DT_FLOAT
    buffer = np.array([7.0, 8.0], np.float32).tobytes()
    attrs = decode_attrs(node.attr, {"value": (buffer, 0, 8)})
    assert list(attrs) == ["dtype", "value"]
    assert attrs["value"].tolist() == [7.0, 8.0]


def test_attributes_of_decoded_messages_decode_as_protobuf_messages_do_each_time():
    from scopefusion.parser.graph_def_decoder import decode_graph_def

    lv = tfpb.AttrValue.ListValue
    graph = tfpb.GraphDef()
    for name in ("a", "b"):  # two nodes with the same attributes: the second reads them from the table
        node = graph.node.add(name=name, op="Conv2D")
        node.attr["T"].type = tfpb.DT_FLOAT
        node.attr["padding"].s = b"SAME"
        node.attr["strides"].list.i.extend([1, 2, 2, 1])
        node.attr["use_cudnn_on_gpu"].b = True
        node.attr["alpha"].f = 0.5
        node.attr["shape"].shape.CopyFrom(_shape(-1, 3))
        node.attr["count"].i = 7
        node.attr["value"].tensor.CopyFrom(tfpb.TensorProto(dtype=tfpb.DT_INT32, int_val=[4]))
        node.attr["fs"].list.CopyFrom(lv(func=[tfpb.NameAttrList(name="f")]))
    decoded = decode_graph_def(graph.SerializeToString())
    assert decoded is not None
    expected = decode_attrs(graph.node[0].attr)
    first, second = (decode_attrs(node.attr) for node in decoded.node)
    for attrs in (first, second, decode_attrs(decoded.node[0].attr)):
        assert list(attrs) == list(expected)
        for key, value in expected.items():
            if isinstance(value, np.ndarray):
                assert attrs[key].dtype == value.dtype and np.array_equal(attrs[key], value)
                assert attrs[key] is not value
            else:
                assert attrs[key] == value and type(attrs[key]) is type(value)
    assert first["value"] is not second["value"]  # every constant node has its own array
