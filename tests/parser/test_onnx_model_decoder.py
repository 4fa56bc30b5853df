"""The Python ModelProto decoder reads what protobuf reads, or leaves the bytes to protobuf."""

from __future__ import annotations

import struct
import subprocess
import sys

import pytest
from google.protobuf import message_factory
from google.protobuf.descriptor import FieldDescriptor
from hypothesis import HealthCheck, given, settings

from scopefusion.parser import message_decoder as md
from scopefusion.parser import onnx_model_decoder as od
from scopefusion.parser.onnx_frontend import MODEL_SPEC
from scopefusion.parser.proto import onnx_model_pb2 as pb
from scopefusion.parser.wire import strip
from tests.models import onnx_models

from .test_fuzz import mutate, mutation

KINDS = {
    FieldDescriptor.TYPE_INT32: md.INT32, FieldDescriptor.TYPE_INT64: md.INT64, FieldDescriptor.TYPE_UINT64: md.UINT64,
    FieldDescriptor.TYPE_FLOAT: md.FLOAT, FieldDescriptor.TYPE_DOUBLE: md.DOUBLE, FieldDescriptor.TYPE_STRING: md.STRING,
    FieldDescriptor.TYPE_BYTES: md.BYTES, FieldDescriptor.TYPE_MESSAGE: md.MESSAGE, FieldDescriptor.TYPE_ENUM: md.ENUM,
}


def _ours(descriptor) -> type:
    name = descriptor.full_name.removeprefix(pb.DESCRIPTOR.package + ".").replace(".", "_")
    return getattr(od, name)


def _all_messages(descriptors) -> list:
    found = []
    for descriptor in descriptors:
        found += _all_messages(descriptor.nested_types) + [descriptor]
    return found


MESSAGES = _all_messages(pb.DESCRIPTOR.message_types_by_name.values())


@pytest.mark.parametrize("descriptor", MESSAGES, ids=lambda d: d.full_name)
def test_the_declarations_are_the_schema_of_the_generated_messages(descriptor):
    ours = _ours(descriptor)
    assert ours._explicit_presence
    declared = {}
    for f in descriptor.fields:
        sub = None
        if f.type == FieldDescriptor.TYPE_MESSAGE:
            sub = _ours(f.message_type)
        elif f.type == FieldDescriptor.TYPE_ENUM:
            sub = frozenset(v.number for v in f.enum_type.values)
        declared[f.number] = (f.name, KINDS[f.type], f.is_repeated, sub)
    assert ours._fields == declared
    oneofs = [(o.name, frozenset(f.name for f in o.fields)) for o in descriptor.oneofs]
    assert [ours._oneof] == oneofs if oneofs else ours._oneof is None
    empty, theirs = ours.__new__(ours), message_factory.GetMessageClass(descriptor)()
    for name, kind, repeated, _ in declared.values():
        if not repeated and kind != md.MESSAGE:
            assert getattr(empty, name) == getattr(theirs, name), name
    for enum in descriptor.enum_types:
        for value in enum.values:
            assert getattr(ours, value.name) == value.number
    assert od.TensorProto.EXTERNAL == pb.TensorProto.EXTERNAL and od.AttributeProto.GRAPHS == pb.AttributeProto.GRAPHS


def tree(message, cls) -> dict:
    """Every field of ``message`` (ours or protobuf's) as plain values, floats by their bits."""
    out: dict = {"oneof": message.WhichOneof(cls._oneof[0]) if cls._oneof else None}
    for name, kind, repeated, sub in cls._fields.values():
        value = getattr(message, name)
        if not repeated and not message.HasField(name):
            out[name] = None
        elif kind == md.MESSAGE:
            out[name] = [tree(v, sub) for v in value] if repeated else tree(value, sub)
        elif kind in (md.FLOAT, md.DOUBLE):
            out[name] = [struct.pack("<d", v) for v in value] if repeated else struct.pack("<d", value)
        else:
            out[name] = list(value) if repeated else value
    return out


def stripped(data: bytes) -> bytes:
    small, _ = strip(data, 0, len(data), MODEL_SPEC, 1024)
    return small


def check_same_as_protobuf(data: bytes) -> bool:
    """Asserts that the decoder agrees with protobuf on ``data``; returns whether it decoded the bytes."""
    ours = od.decode_model(data)
    if ours is None:
        return False
    theirs = pb.ModelProto.FromString(data)  # raises when protobuf refuses what the decoder read
    assert tree(theirs, od.ModelProto) == tree(ours, od.ModelProto)
    return True


SEED = onnx_models.control_flow().SerializeToString()


@pytest.mark.parametrize("fixture", ["onnx_attention", "onnx_control_flow", "onnx_function", "onnx_messy"])
def test_real_models_decode_here_as_protobuf_decodes_them(fixture, request):
    assert check_same_as_protobuf(stripped(request.getfixturevalue(fixture).read_bytes()))


def test_exported_encoders_decode_here_as_protobuf_decodes_them():
    from pathlib import Path

    for path in sorted((Path(__file__).resolve().parents[2] / "testdata").glob("*.onnx")):
        assert check_same_as_protobuf(stripped(path.read_bytes())), path.name


@settings(max_examples=1500, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(change=mutation)
def test_mutated_bytes_decode_as_protobuf_decodes_them_or_go_to_protobuf(change):
    check_same_as_protobuf(mutate(stripped(SEED), *change))


@pytest.mark.parametrize("data", [
    b"\x08\x07" + b"\x3a\x00" + b"\x3a\x00",  # the graph given twice: protobuf merges the two
    b"\x08\x07" + b"\x3a\x05\x12\x03\xff\xfe\xfd",  # a graph name that is not UTF-8
    b"\x08\x07" + b"\x3a\x0a\x0a\x08\x2a\x06\xa0\x01\x0f\x0a\x01a",  # an attribute type no schema value names
])
def test_bytes_the_decoder_leaves_to_protobuf(data):
    assert od.decode_model(data) is None


def test_converting_an_onnx_model_does_not_import_protobuf(onnx_attention):
    code = (
        "import sys\nfrom scopefusion.convert import convert\n"
        f"model = convert({str(onnx_attention)!r})\nmodel.profiles[0].memory_plan\n"
        "print(sorted(m for m in sys.modules if m.startswith('google')))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
