"""The Python GraphDef decoder reads what protobuf reads, or leaves the bytes to protobuf."""

from __future__ import annotations

import struct
import subprocess
import sys

import numpy as np
import pytest
from google.protobuf.descriptor import FieldDescriptor
from hypothesis import HealthCheck, given, settings

from scopefusion.parser import graph_def_decoder as gd
from scopefusion.parser import message_decoder as md
from scopefusion.parser.proto import tf_framework_pb2 as tfpb
from scopefusion.parser.tf_graphdef import GRAPH_DEF_SPEC
from scopefusion.parser.wire import encode_varint, strip

from . import tf_graph_util as tg
from .test_fuzz import mutate, mutation


def tree(message, cls=gd.GraphDef) -> dict:
    """Every field of ``message`` (ours or protobuf's) as plain values, floats by their bits."""
    out: dict = {}
    if cls._oneof is not None:
        out["oneof"] = message.WhichOneof(cls._oneof[0])
    for name, kind, repeated, sub in cls._fields.values():
        value = getattr(message, name)
        if kind == md.MAP:
            out[name] = {k: tree(v, sub[1]) if isinstance(sub[1], type) else v for k, v in value.items()}
        elif kind == md.MESSAGE:
            out[name] = [tree(v, sub) for v in value] if repeated else (message.HasField(name), tree(value, sub))
        elif kind in (md.FLOAT, md.DOUBLE):
            out[name] = [struct.pack("<d", v) for v in value] if repeated else struct.pack("<d", value)
        else:
            out[name] = list(value) if repeated else value
    return out


def stripped(data: bytes) -> bytes:
    small, _ = strip(data, 0, len(data), GRAPH_DEF_SPEC, 1024)
    return small


def protobuf_tree(data: bytes) -> dict | None:
    message = tfpb.GraphDef()
    try:
        message.ParseFromString(data)
    except Exception:  # noqa: BLE001 (any failure: the bytes are not a GraphDef for protobuf)
        return None
    return tree(message)


def check_same_as_protobuf(data: bytes) -> bool:
    """Asserts that the decoder agrees with protobuf on ``data``; returns whether it decoded the bytes."""
    ours = gd.decode_graph_def(data)
    if ours is None:
        return False
    assert protobuf_tree(data) == tree(ours)
    return True


def _seed_graph() -> bytes:
    weights = np.arange(24, dtype=np.float32).reshape(4, 6)
    big = tfpb.TensorProto(dtype=tfpb.DT_FLOAT, tensor_content=np.zeros(400, np.float32).tobytes())
    big.tensor_shape.dim.add().size = 400
    small = tfpb.TensorProto(dtype=tfpb.DT_FLOAT, float_val=weights.ravel().tolist())
    for size in weights.shape:
        small.tensor_shape.dim.add().size = size
    shapes = tfpb.AttrValue()
    shapes.list.shape.add(unknown_rank=True)
    shapes.list.shape.add().dim.add(size=-1)
    body = tg.function("Scale", ["a"], {"out": "mul:z:0"}, [
        tg.const("two", 2.0), tg.node("mul", "Mul", ["a", "two:output:0"], T=tg.type_attr())],
        _noinline=tfpb.AttrValue(b=True))
    body.arg_attr[0].attr["_output_shapes"].CopyFrom(shapes)
    body.control_ret["side"] = "mul"
    body.resource_arg_unique_id[3] = 7
    body.signature.attr.add(name="T", type="type", default_value=tg.type_attr())
    graph = tfpb.GraphDef(node=[
        tg.node("x", "Placeholder", dtype=tg.type_attr(), shape=tfpb.AttrValue(shape=tfpb.TensorShapeProto())),
        tg.node("w", "Const", dtype=tg.type_attr(), value=tfpb.AttrValue(tensor=small)),
        tg.node("big", "Const", dtype=tg.type_attr(), value=tfpb.AttrValue(tensor=big)),
        tg.node("mm", "MatMul", ["x", "w"], T=tg.type_attr(), transpose_a=tfpb.AttrValue(b=False),
                alpha=tfpb.AttrValue(f=-0.5), axis=tfpb.AttrValue(i=-3)),
        tg.node("strided", "StridedSlice", ["mm", "w", "w", "w"], strides=tfpb.AttrValue(
            list=tfpb.AttrValue.ListValue(i=[1, -2, 1 << 40], f=[1.5], b=[True, False], type=[1, 3], s=[b"\xff", b"a"]))),
        tg.node("call", "PartitionedCall", ["mm"], f=tg.func_attr("Scale", T=tg.type_attr())),
        tg.node("loop", "Enter", ["call"], frame_name=tfpb.AttrValue(s=b"frame"),
                ph=tg.placeholder_attr("T"), empty=tfpb.AttrValue()),
        tg.node("y", "Identity", ["loop", "^w"], T=tg.type_attr(tfpb.DT_HALF),
                values=tfpb.AttrValue(tensor=tfpb.TensorProto(dtype=tfpb.DT_INT32, int_val=[-1, 2**31 - 1, -2**31]))),
    ])
    graph.node[5].device = "/cpu:0"
    graph.node[0].experimental_debug_info.original_node_names.append("orig")
    graph.library.function.append(body)
    graph.library.gradient.add(function_name="Scale", gradient_func="ScaleGrad")
    graph.versions.producer = 1205
    graph.versions.bad_consumers.extend([3, 4])
    return graph.SerializeToString()


SEED = _seed_graph()


def test_a_graph_def_with_every_kind_of_field_decodes_as_protobuf_decodes_it():
    assert check_same_as_protobuf(stripped(SEED))
    assert check_same_as_protobuf(SEED)  # tensor_content kept in the bytes


@pytest.mark.parametrize("fixture", ["tf_bert_pb", "tf_mobilenet_pb", "tf_rnn_pb", "tf1_cond_pb", "tf2_control_flow_pb",
                                     "tf2_calls_pb"])
def test_real_models_decode_here_as_protobuf_decodes_them(fixture, request):
    assert check_same_as_protobuf(stripped(request.getfixturevalue(fixture).read_bytes()))


@settings(max_examples=1500, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(change=mutation)
def test_mutated_bytes_decode_as_protobuf_decodes_them_or_go_to_protobuf(change):
    data = mutate(stripped(SEED), *change)
    check_same_as_protobuf(data)


def _field(number: int, wire_type: int, payload: bytes) -> bytes:
    return encode_varint(number << 3 | wire_type) + (encode_varint(len(payload)) if wire_type == 2 else b"") + payload


def _node(*fields: bytes) -> bytes:
    return _field(1, 2, b"".join(fields))


def _attr(key: str, value: bytes) -> bytes:
    return _field(5, 2, _field(1, 2, key.encode()) + _field(2, 2, value))


NAME = _field(1, 2, b"n") + _field(2, 2, b"Op")


@pytest.mark.parametrize("data", [
    _node(NAME, _field(99, 0, b"\x05"), _field(98, 5, b"abcd"), _field(97, 1, b"12345678"), _field(96, 2, b"xyz")),
    _node(NAME, _attr("l", _field(1, 2, _field(3, 0, b"\x01") + _field(3, 2, b"\x02\x03")))),  # unpacked and packed
    _node(NAME, _attr("t", _field(6, 0, encode_varint((1 << 64) - 1)))),  # a negative enum
    _node(NAME, _field(1, 2, b"second name")),  # a scalar given twice: the last one counts
    _node(NAME, _attr("s", _field(2, 2, b"\xff\xfe"))),  # bytes need not be UTF-8
])
def test_unusual_but_valid_bytes_decode_here(data):
    assert check_same_as_protobuf(data)


@pytest.mark.parametrize("data", [
    _node(NAME, _field(1, 2, b"\xff")),  # a name that is not UTF-8: protobuf refuses it
    _node(NAME, _attr("a", _field(3, 0, b"\x01") + _field(5, 0, b"\x01"))),  # two members of a oneof
    _node(NAME, _attr("a", _field(7, 2, b"") + _field(7, 2, _field(3, 0, b"\x01")))),  # a message given twice
    _node(NAME, _attr("a", _field(3, 0, b"\x01")), _attr("a", _field(3, 0, b"\x02"))),  # a key given twice
    _node(NAME, _field(5, 2, _field(2, 2, b"") + _field(1, 2, b"k"))),  # an entry's value before its key
    _node(NAME, _attr("a", _field(5, 0, b"\x02"))),  # a bool of 2
    _node(NAME, _field(2, 0, b"\x01")),  # a string field with a varint
    _node(NAME, _field(50, 3, b"") + _field(50, 4, b"")),  # a group
    _node(NAME, _field(0, 0, b"\x01")),  # field number 0
    _node(NAME, _attr("t", _field(8, 2, _field(14, 2, b"")))),  # a resource handle tensor
    _node(NAME, _field(3, 2, b"abc")[:-1]),  # truncated
])
def test_bytes_the_decoder_leaves_to_protobuf(data):
    assert gd.decode_graph_def(data) is None
    protobuf_tree(data)  # protobuf decides: it parses them or refuses them


def test_decoded_messages_answer_as_protobuf_messages_do():
    ours = gd.decode_graph_def(stripped(SEED))
    theirs = tfpb.GraphDef.FromString(stripped(SEED))
    assert ours is not None
    assert ours.HasField("versions") and not gd.decode_graph_def(b"").HasField("versions")
    for mine, pb in zip(ours.node, theirs.node):
        for key in pb.attr:
            assert mine.attr[key].WhichOneof("value") == pb.attr[key].WhichOneof("value")
            assert tfpb.AttrValue.FromString(mine.attr[key].SerializeToString()) == pb.attr[key]
    with pytest.raises(ValueError):
        ours.HasField("node")


def test_converting_a_frozen_graph_does_not_import_protobuf(tf_bert_pb):
    code = (
        "import sys\nfrom scopefusion.convert import convert\n"
        f"model = convert({str(tf_bert_pb)!r})\nmodel.profiles[0].memory_plan\n"
        "print(sorted(m for m in sys.modules if m.startswith('google')))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


_KINDS = {
    FieldDescriptor.TYPE_INT32: md.INT32, FieldDescriptor.TYPE_INT64: md.INT64, FieldDescriptor.TYPE_UINT32: md.UINT32,
    FieldDescriptor.TYPE_UINT64: md.UINT64, FieldDescriptor.TYPE_BOOL: md.BOOL, FieldDescriptor.TYPE_FLOAT: md.FLOAT,
    FieldDescriptor.TYPE_DOUBLE: md.DOUBLE, FieldDescriptor.TYPE_STRING: md.STRING, FieldDescriptor.TYPE_BYTES: md.BYTES,
    FieldDescriptor.TYPE_MESSAGE: md.MESSAGE, FieldDescriptor.TYPE_ENUM: md.INT32,  # proto3 enums are open
}
_OURS = {
    "TensorShapeProto.Dim": gd.Dim, "NodeDef.ExperimentalDebugInfo": gd.DebugInfo, "AttrValue.ListValue": gd.ListValue,
    "ResourceHandleProto.DtypeAndShape": gd.DtypeAndShape, "OpDef.ArgDef": gd.ArgDef, "OpDef.AttrDef": gd.AttrDef,
    "FunctionDef.ArgAttrs": gd.ArgAttrs,
}


def _our_class(descriptor):
    name = descriptor.full_name.removeprefix("scopefusion.tf.")
    return _OURS.get(name) or getattr(gd, name)


@pytest.mark.parametrize("name", ["GraphDef", "NodeDef", "AttrValue", "TensorProto", "FunctionDef", "OpDef", "VersionDef",
                                  "FunctionDefLibrary", "NameAttrList", "GradientDef", "TensorShapeProto"])
def test_the_declarations_are_the_schema_of_the_generated_messages(name):
    pending = [tfpb.DESCRIPTOR.message_types_by_name[name]]
    seen = set()
    while pending:
        descriptor = pending.pop()
        if descriptor.full_name in seen:
            continue
        seen.add(descriptor.full_name)
        ours = _our_class(descriptor)
        declared = {}
        for f in descriptor.fields:
            if f.number in ours._refused:
                continue
            sub = None
            kind = _KINDS[f.type]
            if f.type == FieldDescriptor.TYPE_MESSAGE and f.message_type.GetOptions().map_entry:
                key, value = f.message_type.fields
                value_kind = _KINDS[value.type]
                sub = (_KINDS[key.type], _our_class(value.message_type) if value_kind == md.MESSAGE else value_kind)
                declared[f.number] = (f.name, md.MAP, False, sub)
                if value_kind == md.MESSAGE:
                    pending.append(value.message_type)
                continue
            if kind == md.MESSAGE:
                sub = _our_class(f.message_type)
                pending.append(f.message_type)
            declared[f.number] = (f.name, kind, f.is_repeated, sub)
        assert ours._fields == declared, descriptor.full_name
        oneofs = [(o.name, frozenset(f.name for f in o.fields)) for o in descriptor.oneofs]
        assert [ours._oneof] == oneofs if oneofs else ours._oneof is None


def test_functions_share_their_repeated_argument_definitions_and_attributes():
    """A loop's body and condition take the same arguments: their argument definitions and attributes are
    decoded once and shared (nothing writes a decoded message), and the graph still decodes as protobuf's."""
    shapes = tfpb.AttrValue()
    shapes.list.shape.add().dim.add(size=4)
    functions = []
    for name, output in (("body", "n:y:0"), ("cond", "m:y:0")):
        fdef = tg.function(name, ["a", "b"], {"out": output}, [tg.node(output[0], "Identity", ["a"], T=tg.type_attr())])
        fdef.arg_attr[0].attr["_output_shapes"].CopyFrom(shapes)
        fdef.arg_attr[1].attr["_output_shapes"].CopyFrom(shapes)
        functions.append(fdef)
    graph = tfpb.GraphDef(node=[tg.node("x", "Placeholder", dtype=tg.type_attr())])
    graph.library.function.extend(functions)
    data = graph.SerializeToString()
    assert check_same_as_protobuf(data)
    body, cond = gd.decode_graph_def(data).library.function
    assert [a.name for a in body.signature.input_arg] == ["a", "b"]
    assert all(x is y for x, y in zip(body.signature.input_arg, cond.signature.input_arg))
    assert body.arg_attr[0] is cond.arg_attr[0] and body.arg_attr[1] is cond.arg_attr[1]
    assert body.arg_attr[0] is not body.arg_attr[1]  # another key: another entry
