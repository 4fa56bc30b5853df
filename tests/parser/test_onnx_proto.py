"""Our ONNX messages (scopefusion/parser/proto/onnx_model.proto): the same schema as the onnx package's, so
they read the same bytes, and a conversion of an ONNX model that needs nothing else never imports onnx."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import onnx
import pytest
from google.protobuf.descriptor import FieldDescriptor
from onnx import defs, helper

from scopefusion.parser.onnx_frontend import LATEST_DEFAULT_OPSET
from scopefusion.parser.onnx_tensors import NUMPY_TYPES, onnx_numpy_dtype
from scopefusion.parser.proto import onnx_model_pb2

REPO = Path(__file__).resolve().parents[2]
TORCH_ENCODERS = [REPO / "testdata" / f"torch_encoder_opset{opset}.onnx" for opset in (14, 17)]


def _messages(file_descriptor) -> dict[str, object]:
    """Every message of a file by its name without the package (nested ones as ``Outer.Inner``)."""
    found = {}
    pending = list(file_descriptor.message_types_by_name.values())
    while pending:
        message = pending.pop()
        found[_short(message)] = message
        pending.extend(message.nested_types)
    return found


def _short(descriptor) -> str:
    return descriptor.full_name.removeprefix(descriptor.file.package + ".")


def _field(field) -> tuple:
    kind = field.message_type or field.enum_type
    return (
        field.number, field.type, field.is_repeated, field.is_packed, _short(kind) if kind else None,
        field.containing_oneof.name if field.containing_oneof else None,
    )  # packed too: the exporter writes these messages, with the onnx package's bytes


def test_every_message_and_field_of_onnx_is_declared_alike():
    ours = _messages(onnx_model_pb2.DESCRIPTOR)
    theirs = _messages(onnx.ModelProto.DESCRIPTOR.file)
    assert set(ours) == set(theirs)
    for name, message in ours.items():
        expected = {f.name: _field(f) for f in theirs[name].fields}
        assert {f.name: _field(f) for f in message.fields} == expected, name
        for enum in message.enum_types:
            assert {v.name: v.number for v in enum.values} == {
                v.name: v.number for v in theirs[name].enum_types_by_name[enum.name].values
            }, f"{name}.{enum.name}"


def test_strings_are_checked_and_enums_closed_as_in_onnx():
    for message in _messages(onnx_model_pb2.DESCRIPTOR).values():
        for field in message.fields:
            if field.type == FieldDescriptor.TYPE_ENUM:
                assert field.enum_type.is_closed, field.full_name
    bad_name = helper.make_model(helper.make_graph([], "Zg", [], [])).SerializeToString().replace(b"Zg", b"\xff\xff")
    with pytest.raises(Exception, match="UTF-8"):
        onnx_model_pb2.ModelProto.FromString(bad_name)
    # an attribute type past the enum's values stays unknown, as with onnx's classes
    attr = helper.make_attribute("a", 1)
    raw = attr.SerializeToString().replace(bytes([0xA0, 0x01, attr.type]), bytes([0xA0, 0x01, 99]))
    assert onnx_model_pb2.AttributeProto.FromString(raw).type == onnx.AttributeProto.FromString(raw).type == 0


@pytest.mark.parametrize("path", TORCH_ENCODERS, ids=lambda p: p.stem)
def test_models_read_the_same_as_with_onnx(path):
    blob = path.read_bytes()
    ours = onnx_model_pb2.ModelProto.FromString(blob)
    theirs = onnx.ModelProto.FromString(blob)
    assert len(ours.graph.node) == len(theirs.graph.node) > 100
    assert ours.SerializeToString(deterministic=True) == theirs.SerializeToString(deterministic=True)


def test_element_types_map_to_onnx_numpy_types():
    for code in range(64):
        try:
            expected = np.dtype(helper.tensor_dtype_to_np_dtype(code))
        except (KeyError, ValueError, TypeError):
            expected = None
        assert onnx_numpy_dtype(code) == expected, code
    assert set(NUMPY_TYPES) == {code for code in range(64) if onnx_numpy_dtype(code) is not None}


def test_latest_default_opset_is_the_installed_onnx_one():
    assert LATEST_DEFAULT_OPSET == defs.onnx_opset_version()


def test_converting_pytorch_encoders_to_ge_never_imports_onnx(tmp_path):
    code = (
        "import sys\nfrom scopefusion.convert import convert\n"
        "for path in sys.argv[2:]:\n"
        "    model = convert(path, input_shapes={'input_ids': [2, 16]})\n"
        "    model.save(sys.argv[1] + '/' + path.rsplit('/', 1)[-1] + '.ge', 'ge')\n"
        "    assert len(model.graph.nodes) > 50\n"
        "print(sorted(m for m in sys.modules if m == 'onnx' or m.startswith('onnx.')))"
    )
    out = subprocess.run([sys.executable, "-c", code, str(tmp_path), *map(str, TORCH_ENCODERS)],
                         capture_output=True, text=True, check=True)
    assert out.stdout.strip().splitlines()[-1] == "[]"
    assert len(list(tmp_path.glob("*.ge"))) == 2
