"""Format detection from the path and from the bytes."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from scopefusion.parser.detect import _field_kinds, format_from_path, sniff, sniff_against
from scopefusion.parser.proto import tf_framework_pb2 as tfpb
from scopefusion.parser.proto import tf_saved_model_pb2 as smpb
from scopefusion.parser.wire import WireError, encode_varint, iter_fields
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


def _kinds_by_walking(data: bytes, limit: int):
    """What the sniffer reads of the top-level fields, by the plain field walk: the wire type of each field
    number among the first ``limit + 1`` fields; None for a number with two types or a malformed field."""
    seen: dict[int, int] = {}
    try:
        for count, (number, wire_type, *_rest) in enumerate(iter_fields(data, 0, len(data))):
            if seen.setdefault(number, wire_type) != wire_type:
                return None
            if count >= limit:
                break
    except WireError:
        return None
    return seen


@settings(max_examples=400, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 9), st.sampled_from([0, 1, 2, 5, 3, 4, 6]), st.binary(max_size=6)),
                max_size=12), st.integers(0, 8))
def test_the_sniffer_reads_the_fields_the_plain_walk_reads(fields, limit):
    # Messages of random fields, some malformed (field 0, groups, bad wire types, lengths past the end).
    data = b"".join(encode_varint((number << 3) | wire_type) + payload for number, wire_type, payload in fields)
    try:
        found = _field_kinds(data, limit)
    except WireError:
        found = None
    assert found == _kinds_by_walking(data, limit)
    graph = tfpb.GraphDef(node=[tfpb.NodeDef(name=f"n{i}", op="Const") for i in range(limit + 3)])
    assert _field_kinds(graph.SerializeToString(), limit) == {1: 2}


@settings(max_examples=400, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 9), st.sampled_from([0, 1, 2, 5, 3, 4, 6]), st.binary(max_size=6)),
                max_size=12), st.sampled_from(["pb", "onnx", "pbtxt"]))
def test_checking_the_named_format_finds_what_sniffing_finds(fields, named):
    # Random messages, some malformed, some starting with a GraphDef's node field; and real models.
    data = b"".join(encode_varint((number << 3) | wire_type) + payload for number, wire_type, payload in fields)
    graph = tfpb.GraphDef(node=[tfpb.NodeDef(name="a", op="Const")]).SerializeToString()
    saved = smpb.SavedModel(saved_model_schema_version=1).SerializeToString()
    onnx_bytes = onnx_models.messy_names().SerializeToString()
    for buffer in (data, graph + data, graph, saved, onnx_bytes, b"node {\n}\n" + data, b"ir_version: 8\n"):
        found = sniff(buffer)
        assert sniff_against(buffer, named) == (None if found == named else found)
