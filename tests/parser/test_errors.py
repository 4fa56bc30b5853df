"""Bad input: every failure is a ModelLoadError or ParseError naming the file and, where there is one, the node."""

from __future__ import annotations

import numpy as np
import pytest

from scopefusion.errors import ModelLoadError, ParseError, ScopeFusionError
from scopefusion.parser import load
from scopefusion.parser.proto import tf_framework_pb2 as tfpb
from tests.models import onnx_models

from . import tf_graph_util as tg


def _graph(tmp_path, nodes, name="g.pb"):
    return tg.write(tmp_path / name, nodes)


@pytest.mark.parametrize("name", ["m.pb", "m.onnx", "m.pbtxt", "m.bin"])
def test_an_empty_file(name, tmp_path):
    path = tmp_path / name
    path.write_bytes(b"")
    with pytest.raises(ModelLoadError, match="the file is empty") as info:
        load(path)
    assert str(path) in str(info.value)


@pytest.mark.parametrize("name", ["m.pb", "m.onnx", "m.bin"])
@pytest.mark.parametrize("seed", range(3))
def test_random_bytes(name, seed, tmp_path):
    path = tmp_path / name
    path.write_bytes(np.random.default_rng(seed).integers(0, 256, 4000, dtype=np.uint8).tobytes())
    with pytest.raises(ModelLoadError) as info:
        load(path)
    assert str(path) in str(info.value) and "bug" not in str(info.value)


def test_a_truncated_graph_def(tf_bert_pb, tmp_path):
    path = tmp_path / "cut.pb"
    path.write_bytes(tf_bert_pb.read_bytes()[: tf_bert_pb.stat().st_size // 2])
    with pytest.raises(ModelLoadError, match="not a valid binary GraphDef .*truncated") as info:
        load(path)
    assert str(path) in str(info.value)


def test_a_truncated_onnx_model(onnx_attention, tmp_path):
    path = tmp_path / "cut.onnx"
    path.write_bytes(onnx_attention.read_bytes()[:-100])
    with pytest.raises(ModelLoadError, match="not a valid ONNX model"):
        load(path)


def test_an_onnx_file_that_holds_a_graph_def(tf_convnet_pb, tmp_path):
    path = tmp_path / "model.onnx"
    path.write_bytes(tf_convnet_pb.read_bytes())
    with pytest.raises(ModelLoadError, match="the name says an ONNX model, but the bytes look like a TensorFlow GraphDef"):
        load(path)
    assert load(path, format="pb").framework == "tensorflow"


def test_a_pb_file_that_holds_an_onnx_model(onnx_attention, tmp_path):
    path = tmp_path / "model.pb"
    path.write_bytes(onnx_attention.read_bytes())
    with pytest.raises(ModelLoadError, match="the bytes look like an ONNX model"):
        load(path)


def test_an_onnx_model_without_a_graph(tmp_path):
    path = tmp_path / "no_graph.onnx"
    path.write_bytes(b"\x08\x07")
    with pytest.raises(ModelLoadError, match=r"not an ONNX model \(ir_version 7, no graph\)"):
        load(path)


def test_forced_format_of_an_unrelated_file(onnx_attention):
    with pytest.raises(ModelLoadError, match="GraphDef"):
        load(onnx_attention, format="pb")


def test_a_file_with_an_unknown_suffix_is_read_by_its_bytes(tf_convnet_pb, onnx_attention, tmp_path):
    for source, framework in ((tf_convnet_pb, "tensorflow"), (onnx_attention, "onnx")):
        path = tmp_path / f"model_{framework}.bin"
        path.write_bytes(source.read_bytes())
        assert load(path).framework == framework


def test_missing_paths_and_unknown_formats(tmp_path):
    with pytest.raises(ModelLoadError, match="no such file or directory"):
        load(tmp_path / "nothing.pb")
    with pytest.raises(ModelLoadError, match="unknown format 'tflite'; expected one of savedmodel, pb, pbtxt, onnx"):
        load(tmp_path, format="tflite")
    (tmp_path / "m.onnx").write_bytes(onnx_models.messy_names().SerializeToString())
    with pytest.raises(ModelLoadError, match="signature= and tags= apply to SavedModels only"):
        load(tmp_path / "m.onnx", signature="serving_default")
    with pytest.raises(ModelLoadError, match="outputs= applies to GraphDefs only"):
        load(tmp_path / "m.onnx", outputs=["y"])


def test_text_graph_defs_that_are_not_text_graph_defs(tmp_path):
    bad = tmp_path / "bad.pbtxt"
    bad.write_text('node { name: "a" op: "Const" }\nnode { name: "b" op: \n')
    with pytest.raises(ModelLoadError, match="not a valid text GraphDef"):
        load(bad)
    binary = tmp_path / "binary.pbtxt"
    binary.write_bytes(b"node {\xff\xfe}")
    with pytest.raises(ModelLoadError, match="must be UTF-8"):
        load(binary)
    empty_graph = tmp_path / "empty.pbtxt"
    empty_graph.write_text("versions { producer: 1 }\n")
    with pytest.raises(ModelLoadError, match="holds no nodes"):
        load(empty_graph)


def test_an_input_naming_a_missing_node(tmp_path):
    path = _graph(tmp_path, [tg.node("x", "Placeholder", dtype=tg.type_attr()), tg.node("y", "Relu", ["x", "ghost:1"])])
    with pytest.raises(ParseError, match=r"node 'y' \(Relu\) input 1 names 'ghost':1, but no node has that name") as info:
        load(path)
    assert str(path) in str(info.value)
    path = _graph(tmp_path, [tg.node("x", "Placeholder"), tg.node("y", "Relu", ["x", "^ghost"])], "ctl.pb")
    with pytest.raises(ParseError, match=r"control input \^ghost"):
        load(path)
    with pytest.raises(ParseError, match="graph output 'nope' names node 'nope'"):
        load(_graph(tmp_path, [tg.node("x", "Placeholder")], "o.pb"), outputs=["nope"])


def test_duplicate_node_names(tmp_path):
    path = _graph(tmp_path, [tg.node("x", "Placeholder"), tg.node("x", "Relu", ["x"])])
    with pytest.raises(ParseError, match=r"two nodes are named 'x' \(op types Placeholder and Relu\)") as info:
        load(path)
    assert str(path) in str(info.value)


def test_a_data_cycle(tmp_path):
    path = _graph(tmp_path, [tg.node("a", "Relu", ["c"]), tg.node("b", "Relu", ["a"]), tg.node("c", "Relu", ["b"])])
    with pytest.raises(ParseError, match=r"data cycle \(a -> b -> c -> a\)|data cycle \(.* -> .*\)") as info:
        load(path)
    assert str(path) in str(info.value)


def test_unnamed_or_op_less_nodes_and_unreadable_constants(tmp_path):
    with pytest.raises(ParseError, match="empty name"):
        load(_graph(tmp_path, [tg.node("", "Relu")], "noname.pb"))
    with pytest.raises(ParseError, match="node 'a' has no op type"):
        load(_graph(tmp_path, [tg.node("a", "")], "noop.pb"))
    tensor = tfpb.TensorProto(dtype=tfpb.DT_FLOAT, tensor_content=b"abc")
    tensor.tensor_shape.dim.add().size = 4
    bad = tg.node("w", "Const", dtype=tg.type_attr(), value=tfpb.AttrValue(tensor=tensor))
    with pytest.raises(ParseError, match=r"node 'w' \(Const\) has an unreadable tensor attribute: .*needs 16 bytes"):
        load(_graph(tmp_path, [bad], "const.pb"))


def test_a_node_list_without_nodes(tmp_path):
    path = tmp_path / "lib_only.pb"
    graph = tfpb.GraphDef()
    graph.versions.producer = 3
    path.write_bytes(graph.SerializeToString())
    with pytest.raises(ModelLoadError, match="holds no nodes"):
        load(path, format="pb")


def test_every_error_is_a_scopefusion_error():
    assert issubclass(ModelLoadError, ScopeFusionError) and issubclass(ParseError, ScopeFusionError)
