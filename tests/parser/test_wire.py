"""The wire walker: varints, field iteration, and cutting large fields out with their exact location."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from scopefusion.parser.proto import tf_framework_pb2 as tfpb
from scopefusion.parser.tf_graphdef import GRAPH_DEF_SPEC
from scopefusion.parser.wire import CUT, Spec, WireError, iter_fields, read_varint, strip


@pytest.mark.parametrize("value", [0, 1, 127, 128, 300, 2**32, 2**63 - 1, 2**64 - 1])
def test_read_varint_round_trips(value):
    from scopefusion.parser.wire import encode_varint

    data = encode_varint(value) + b"\xff"
    assert read_varint(data, 0, len(data)) == (value, len(data) - 1)


@pytest.mark.parametrize("data", [b"\x80", b"\xff" * 11, b"\x0a\x05abc", b"\x0b", b"\x0d\x00\x00", b"\x00\x01"])
def test_malformed_bytes_raise_wire_error(data):
    with pytest.raises(WireError):
        list(iter_fields(data, 0, len(data)))


def test_iter_fields_reports_numbers_wire_types_and_payloads():
    node = tfpb.NodeDef(name="a", op="Const", input=["x:1", "^y"])
    data = node.SerializeToString()
    fields = [(n, wt, bytes(data[p:e])) for n, wt, _, p, e in iter_fields(data, 0, len(data))]
    assert fields == [(1, 2, b"a"), (2, 2, b"Const"), (3, 2, b"x:1"), (3, 2, b"^y")]


def _const(name: str, array: np.ndarray) -> tfpb.NodeDef:
    node = tfpb.NodeDef(name=name, op="Const")
    node.attr["dtype"].type = tfpb.DT_FLOAT
    tensor = node.attr["value"].tensor
    tensor.dtype = tfpb.DT_FLOAT
    tensor.tensor_shape.dim.add().size = array.size
    tensor.tensor_content = array.astype(np.float32).tobytes()
    return node


def test_strip_cuts_large_tensor_contents_and_says_where_they_are():
    big = np.arange(1000, dtype=np.float32)
    small = np.arange(3, dtype=np.float32)
    graph = tfpb.GraphDef()
    graph.node.append(_const("small", small))
    graph.node.append(tfpb.NodeDef(name="relu", op="Relu", input=["small"]))
    graph.node.append(_const("big", big))
    data = graph.SerializeToString()
    rest, cuts = strip(data, 0, len(data), GRAPH_DEF_SPEC, threshold=256)
    assert len(rest) < 300
    (cut,) = cuts
    assert cut.path == ((1, 2), (5, "value"), (2, 0), (8, 0), (4, 0))
    assert data[cut.offset:cut.offset + cut.length] == big.tobytes()
    parsed = tfpb.GraphDef.FromString(rest)
    assert [n.name for n in parsed.node] == ["small", "relu", "big"]
    assert parsed.node[0].attr["value"].tensor.tensor_content == small.tobytes()
    assert parsed.node[2].attr["value"].tensor.tensor_content == b""
    assert parsed.node[2].attr["value"].tensor.tensor_shape.dim[0].size == 1000
    assert parsed.node[2].attr["dtype"].type == tfpb.DT_FLOAT


def test_strip_of_a_message_without_large_fields_is_a_plain_copy():
    data = tfpb.NodeDef(name="n", op="Identity").SerializeToString()
    assert strip(data, 0, len(data), Spec({5: CUT}), threshold=1) == (data, [])


@settings(max_examples=60, deadline=None)
@given(
    sizes=st.lists(st.integers(0, 600), min_size=1, max_size=6),
    threshold=st.integers(1, 700),
    extra=st.lists(st.sampled_from(["Identity", "Add", "MatMul"]), max_size=3),
)
def test_strip_then_parse_keeps_everything_but_the_cut_bytes(sizes, threshold, extra):
    graph = tfpb.GraphDef()
    arrays = []
    for i, size in enumerate(sizes):
        array = np.arange(size, dtype=np.float32) + i
        arrays.append(array)
        graph.node.append(_const(f"c{i}", array))
        for op in extra:
            graph.node.append(tfpb.NodeDef(name=f"{op}{i}", op=op, input=[f"c{i}"]))
    graph.versions.producer = 7
    data = graph.SerializeToString()
    rest, cuts = strip(memoryview(data), 0, len(data), GRAPH_DEF_SPEC, threshold)
    parsed = tfpb.GraphDef.FromString(rest)
    cut_by_node = {c.path[0][1]: c for c in cuts}
    for index, node in enumerate(parsed.node):
        original = graph.node[index]
        if index in cut_by_node:
            cut = cut_by_node[index]
            assert data[cut.offset:cut.offset + cut.length] == original.attr["value"].tensor.tensor_content
            assert cut.length >= threshold
            original = tfpb.NodeDef.FromString(original.SerializeToString())
            original.attr["value"].tensor.ClearField("tensor_content")
        assert node == original
    assert parsed.versions.producer == 7


def test_file_reader_serves_bytes_and_slices_like_bytes(tmp_path):
    from scopefusion.parser.wire import FileReader

    data = bytes(range(256)) * 40
    path = tmp_path / "data.bin"
    path.write_bytes(data)
    with open(path, "rb") as f:
        reader = FileReader(f.fileno(), len(data), chunk=100)
        assert len(reader) == len(data)
        for i in (0, 99, 100, 5000, len(data) - 1, -1):
            assert reader[i] == data[i]
        for a, b in ((0, 10), (95, 105), (150, 160), (0, len(data)), (10, 5), (len(data) - 3, len(data) + 10)):
            assert reader[a:b] == data[a:b]
        with pytest.raises(IndexError):
            reader[len(data)]
        graph = tfpb.GraphDef(node=[_const("big", np.arange(500, dtype=np.float32)), tfpb.NodeDef(name="r", op="Relu")])
        blob = graph.SerializeToString()
        path.write_bytes(blob)
    with open(path, "rb") as f:
        assert strip(FileReader(f.fileno(), len(blob), chunk=64), 0, len(blob), GRAPH_DEF_SPEC, 256) == strip(
            blob, 0, len(blob), GRAPH_DEF_SPEC, 256)


@settings(max_examples=200, deadline=None)
@given(
    values=st.lists(st.integers(0, 2**64 - 1), min_size=1, max_size=40),
    tail=st.binary(max_size=12),
    chunk=st.integers(16, 80),
)
def test_read_varint_in_long_buffers_and_file_chunks(tmp_path_factory, values, tail, chunk):
    """Varints read inside long buffers (the fast path) and across a FileReader's chunk edges agree with
    what was encoded, and a run of more than ten continuation bytes is refused wherever it lies."""
    from scopefusion.parser.wire import FileReader, encode_varint

    data = b"".join(encode_varint(v) for v in values) + b"\xff" * 11 + tail
    path = tmp_path_factory.mktemp("varints") / "data.bin"
    path.write_bytes(data)
    with open(path, "rb") as f:
        for buf in (data, FileReader(f.fileno(), len(data), chunk=chunk)):
            pos, found = 0, []
            for _ in values:
                value, pos = read_varint(buf, pos, len(data))
                found.append(value)
            assert found == values
            with pytest.raises(WireError, match="longer than 10 bytes"):
                read_varint(buf, pos, len(data))
