"""Format detection from the path and from the bytes."""

from __future__ import annotations

import pytest

from scopefusion.parser.detect import format_from_path, sniff
from scopefusion.parser.proto import tf_framework_pb2 as tfpb
from scopefusion.parser.proto import tf_saved_model_pb2 as smpb
from tests.models import onnx_models


@pytest.mark.parametrize("name, expected", [
    ("a/model.onnx", "onnx"), ("m.PB", "pb"), ("m.pbtxt", "pbtxt"), ("x/saved_model.pb", "savedmodel"),
    ("m.graphdef", "pb"), ("m.bin", None), ("model", None),
])
def test_format_from_path(name, expected):
    assert format_from_path(name) == expected


def test_format_from_a_directory(tmp_path):
    assert format_from_path(str(tmp_path)) == "savedmodel"


def test_sniff_tells_the_binary_formats_apart():
    graph = tfpb.GraphDef(node=[tfpb.NodeDef(name="a", op="Const")])
    graph.versions.producer = 1
    assert sniff(graph.SerializeToString()) == "pb"
    assert sniff(onnx_models.messy_names().SerializeToString()) == "onnx"
    saved = smpb.SavedModel(saved_model_schema_version=1)
    saved.meta_graphs.add().meta_info_def.tags.append("serve")
    assert sniff(saved.SerializeToString()) == "savedmodel"
    assert sniff(b'# comment\nnode {\n  name: "a"\n}\n') == "pbtxt"
    assert sniff(b"ir_version: 8\n") == "onnx-text"
    assert sniff(b"\xff\xff\xff") is None
    assert sniff(b"\x0a\x05ab") is None
