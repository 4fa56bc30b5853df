"""ONNX models: synthetic input/initializer nodes, subgraphs, functions, names, tensors, external data."""

from __future__ import annotations

import mmap
import os
import re

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from scopefusion import dtypes
from scopefusion.errors import ModelLoadError, ParseError
from scopefusion.parser import (
    ABSENT_INPUT,
    INITIALIZER_OP,
    INPUT_OP,
    OUTER_SCOPE_OP,
    AttrPlaceholder,
    GraphInput,
    GraphOutput,
    SourceGraph,
    load,
)
from tests.models import onnx_models


def _root(array):
    while isinstance(array, np.ndarray) and array.base is not None:
        array = array.base
    return array.obj if isinstance(array, memoryview) else array


def _save(model, tmp_path, name="m.onnx"):
    path = tmp_path / name
    path.write_bytes(model.SerializeToString())
    return path


def test_nodes_inputs_and_attributes_agree_with_onnx(onnx_attention):
    graph = load(onnx_attention)
    model = onnx.load(str(onnx_attention))
    producers = {i.name: (i.name, 0) for i in model.graph.initializer}
    producers.update({i.name: (i.name, 0) for i in model.graph.input})
    for n in model.graph.node:
        producers.update({o: (n.name, k) for k, o in enumerate(n.output)})
    assert len(graph) == len(model.graph.node) + len(model.graph.initializer) + 1
    for n in model.graph.node:
        ours = graph.node(n.name)
        assert (ours.op_type, ours.domain, ours.output_names) == (n.op_type, n.domain, list(n.output))
        assert ours.inputs == [producers[i] for i in n.input]
        for attr in n.attribute:
            expected = helper.get_attribute_value(attr)
            value = ours.attrs[attr.name]
            assert value == pytest.approx(tuple(expected) if isinstance(expected, list) else expected)
    for init in model.graph.initializer:
        node = graph.node(init.name)
        assert (node.op_type, node.synthetic, node.output_names) == (INITIALIZER_OP, True, [init.name])
        np.testing.assert_array_equal(node.value, numpy_helper.to_array(init))
        assert not node.value.flags.writeable
        assert node.attrs["dtype"] is dtypes.FLOAT32


def test_graph_inputs_outputs_types_and_scope_names(onnx_attention):
    graph = load(onnx_attention)
    assert graph.framework == "onnx" and graph.name == "attention_block"
    assert graph.inputs == [GraphInput("x", "x", dtypes.FLOAT32, (-1, 4, 16), 0)]
    x = graph.node("x")
    assert (x.op_type, x.synthetic, x.attrs["dim_params"]) == (INPUT_OP, True, ("batch", "", ""))
    assert graph.outputs == [GraphOutput("y", "/encoder/layers.0/norm/LayerNormalization", 0)]
    assert "/encoder/layers.0/self_attn/q_proj/MatMul" in graph
    assert graph.opset_imports == {"": onnx_models.OPSET}
    assert graph.metadata["value_info"]["/encoder/layers.0/self_attn/Softmax_output_0"] == (dtypes.FLOAT32, (-1, 4, 4))
    assert graph.metadata["producer_name"] == "scopefusion-tests" and graph.metadata["ir_version"] == 8


def test_large_initializers_are_views_of_the_mapped_file(onnx_attention):
    weight = load(onnx_attention).node("encoder.layers.0.self_attn.q_proj.weight").value
    assert weight.shape == (16, 16) and isinstance(_root(weight), mmap.mmap)


def test_initializers_listed_as_graph_inputs_are_not_inputs(tmp_path):
    model = onnx_models.attention_block()
    for init in model.graph.initializer:
        model.graph.input.append(helper.make_tensor_value_info(init.name, init.data_type, list(init.dims)))
    graph = load(_save(model, tmp_path))
    assert [i.name for i in graph.inputs] == ["x"]
    assert graph.node("scale").op_type == INITIALIZER_OP


def test_if_loop_and_scan_bodies_are_subgraphs_reading_outer_tensors(onnx_control_flow):
    graph = load(onnx_control_flow)
    branch = graph.node("/block/If")
    assert sorted(branch.subgraphs) == ["else_branch", "then_branch"]
    then = branch.subgraphs["then_branch"]
    assert branch.attrs["then_branch"] is then and isinstance(then, SourceGraph)
    assert [(n.name, n.op_type, n.synthetic) for n in then if n.op_type == OUTER_SCOPE_OP] == [
        ("x", OUTER_SCOPE_OP, True), ("shifted", OUTER_SCOPE_OP, True)]
    assert then.node("then/Add").inputs == [("x", 0), ("shifted", 0)]
    assert then.outputs == [GraphOutput("then_out", "then/Add", 0)]
    assert branch.inputs == [("cond", 0)] and branch.control_inputs == ["x", "/pre/Add"]
    loop = graph.node("/block/Loop")
    assert loop.inputs == [("trip", 0), ABSENT_INPUT, ("x", 0)]
    assert loop.control_inputs == ["/pre/Add"]
    body = loop.subgraphs["body"]
    assert [i.name for i in body.inputs] == ["iter", "cond_in", "acc_in"]
    assert body.inputs[0] == GraphInput("iter", "iter", dtypes.INT64, (), 0)
    assert [o.name for o in body.outputs] == ["cond_out", "acc_out"]
    scan = graph.node("/block/Scan")
    assert scan.output_names == ["scan_out", "scan_rows"] and scan.attrs["num_scan_inputs"] == 1
    assert sorted(scan.subgraphs) == ["body"] and not scan.control_inputs
    assert list(graph.nx.predecessors("/block/Loop")) == ["trip", "x", "/pre/Add"]


def test_a_body_reading_a_tensor_two_levels_up(tmp_path):
    inner = helper.make_graph([helper.make_node("Neg", ["outer_t"], ["z"], name="inner/Neg")], "inner", [],
                              [helper.make_tensor_value_info("z", TensorProto.FLOAT, [1])])
    middle = helper.make_graph([helper.make_node("If", ["c"], ["m"], name="middle/If", then_branch=inner, else_branch=inner)],
                               "middle", [], [helper.make_tensor_value_info("m", TensorProto.FLOAT, [1])])
    graph = helper.make_graph(
        [helper.make_node("Relu", ["x"], ["outer_t"], name="outer/Relu"),
         helper.make_node("If", ["c"], ["y"], name="outer/If", then_branch=middle, else_branch=middle)],
        "nested", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1]), helper.make_tensor_value_info("c", TensorProto.BOOL, [])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1])])
    loaded = load(_save(helper.make_model(graph), tmp_path))
    outer_if = loaded.node("outer/If")
    assert outer_if.control_inputs == ["c", "outer/Relu"]
    middle_graph = outer_if.subgraphs["then_branch"]
    assert {n.name for n in middle_graph if n.op_type == OUTER_SCOPE_OP} == {"c", "outer_t"}
    assert middle_graph.node("middle/If").control_inputs == ["outer_t"]
    assert middle_graph.node("middle/If").subgraphs["else_branch"].node("inner/Neg").inputs == [("outer_t", 0)]


def test_model_local_functions_and_opset_imports(onnx_function):
    graph = load(onnx_function)
    assert graph.opset_imports == {"": onnx_models.OPSET, "custom": 1}
    call = graph.node("/act/ScaledRelu")
    assert (call.domain, call.attrs) == ("custom", {"alpha": 0.5})
    function = graph.functions["custom::ScaledRelu"]
    assert [i.name for i in function.inputs] == ["X"] and [o.name for o in function.outputs] == ["Y"]
    assert function.node("c").attrs == {"value_float": AttrPlaceholder("alpha")} and function.node("c").value is None
    assert function.metadata["attributes"] == ("alpha",) and function.opset_imports == {"": onnx_models.OPSET}
    assert function.node("mul").inputs == [("relu", 0), ("c", 0)]


def test_empty_and_repeated_names_get_deterministic_names(onnx_messy):
    graph = load(onnx_messy)
    assert [n.name for n in graph] == ["x", "Relu_0", "dup", "dup_1", "Constant_3", "x_1", "Relu_5"]
    clip = graph.node("x_1")
    assert clip.inputs == [("dup_1", 0), ABSENT_INPUT, ("Constant_3", 0)] and clip.output_names == ["d"]
    assert graph.node("Constant_3").value == np.float32(6.0)
    assert graph.producers("x_1") == ["dup_1", "Constant_3"]
    assert [n.name for n in load(onnx_messy)] == [n.name for n in graph]


def test_typed_field_tensors_and_sparse_initializers(tmp_path):
    sparse = helper.make_sparse_tensor(
        numpy_helper.from_array(np.array([5.0, 7.0], np.float32), "sp"),
        numpy_helper.from_array(np.array([1, 4], np.int64), "sp_idx"), [2, 3])
    inits = [
        helper.make_tensor("f", TensorProto.FLOAT, [2], [1.5, 2.5]),
        helper.make_tensor("i64", TensorProto.INT64, [3], [1, -2, 3]),
        helper.make_tensor("h", TensorProto.FLOAT16, [2], np.array([0.5, -1.0], np.float16)),
        helper.make_tensor("s", TensorProto.STRING, [2], [b"ab", b"c"]),
        helper.make_tensor("i4", TensorProto.INT4, [3], [-1, 2, 7]),
        helper.make_tensor("bf", TensorProto.BFLOAT16, [1], [2.0]),
    ]
    graph = helper.make_graph([helper.make_node("Identity", ["f"], ["y"], name="id")], "typed", [],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])], inits, sparse_initializer=[sparse])
    loaded = load(_save(helper.make_model(graph), tmp_path))
    np.testing.assert_array_equal(loaded.node("f").value, [1.5, 2.5])
    np.testing.assert_array_equal(loaded.node("i64").value, np.array([1, -2, 3], np.int64))
    assert loaded.node("h").value.dtype == np.float16 and loaded.node("h").value.tolist() == [0.5, -1.0]
    assert loaded.node("s").value.tolist() == [b"ab", b"c"]
    assert loaded.node("i4").value.astype(int).tolist() == [-1, 2, 7]
    assert loaded.node("bf").value.astype(np.float32).tolist() == [2.0] and loaded.node("bf").attrs["dtype"] is dtypes.BFLOAT16
    np.testing.assert_array_equal(loaded.node("sp").value, [[0, 5, 0], [0, 7, 0]])


def test_external_data_is_a_view_of_the_data_file(onnx_external):
    weight = load(onnx_external).node("w").value
    assert weight.shape == (64, 64) and weight[1, 2] == np.float32(66 / 100.0)
    assert isinstance(_root(weight), mmap.mmap) and not weight.flags.writeable


def _external_model(tmp_path, location, offset=0, length=None):
    tensor = numpy_helper.from_array(np.zeros((2, 2), np.float32), "w")
    tensor.ClearField("raw_data")
    tensor.data_location = TensorProto.EXTERNAL
    for key, value in (("location", location), ("offset", str(offset)), ("length", str(16 if length is None else length))):
        tensor.external_data.add(key=key, value=value)
    graph = helper.make_graph([helper.make_node("Identity", ["w"], ["y"], name="id")], "ext", [],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 2])], [tensor])
    model_dir = tmp_path / "model"
    model_dir.mkdir(exist_ok=True)
    return _save(helper.make_model(graph), model_dir)


@pytest.mark.parametrize("location, message", [
    ("../secret.bin", "leaves the model's directory"),
    ("/etc/passwd", "absolute path"),
    ("link.bin", "leaves the model's directory"),
    ("missing.bin", "does not exist"),
    ("short.bin", "truncated"),
])
def test_external_data_outside_the_model_directory_or_missing_is_refused(location, message, tmp_path):
    path = _external_model(tmp_path, location)
    (tmp_path / "secret.bin").write_bytes(b"\x00" * 16)
    os.symlink(tmp_path / "secret.bin", path.parent / "link.bin")
    (path.parent / "short.bin").write_bytes(b"\x00" * 8)
    with pytest.raises(ModelLoadError, match=message) as info:
        load(path)
    assert str(path) in str(info.value) and "'w'" in str(info.value)


@pytest.mark.parametrize("case, message", [
    ("missing", "reads tensor 'nowhere', which no node, graph input or initializer produces"),
    ("twice", "tensor 'a' is produced twice"),
    ("bad_output", "a graph output reads tensor 'ghost'"),
    ("raw_size", "needs 8 bytes of raw_data, found 3"),
])
def test_invalid_onnx_graphs_raise_parse_error(case, message, tmp_path):
    nodes = [helper.make_node("Relu", ["x"], ["a"], name="r1")]
    outputs = ["a"]
    inits = []
    if case == "missing":
        nodes.append(helper.make_node("Add", ["a", "nowhere"], ["b"], name="add"))
    if case == "twice":
        nodes.append(helper.make_node("Relu", ["x"], ["a"], name="r2"))
    if case == "bad_output":
        outputs = ["ghost"]
    if case == "raw_size":
        bad = helper.make_tensor("w", TensorProto.FLOAT, [2], [1.0, 2.0])
        bad.ClearField("float_data")
        bad.raw_data = b"abc"
        inits.append(bad)
    graph = helper.make_graph(nodes, "bad", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])],
                              [helper.make_tensor_value_info(o, TensorProto.FLOAT, [2]) for o in outputs], inits)
    path = _save(helper.make_model(graph), tmp_path)
    with pytest.raises(ParseError, match=message) as info:
        load(path)
    assert str(path) in str(info.value)


def test_attribute_kinds_and_constant_values(tmp_path):
    big = np.arange(512, dtype=np.float32)
    custom = helper.make_node("Custom", ["x"], ["c"], name="custom", domain="my.domain", floats=[0.5, 1.5], ints=[1, 2],
                              strings=[b"a", b"b"], label="text",
                              tensors=[numpy_helper.from_array(np.array([1, 2], np.int32))],
                              kind=helper.make_tensor_type_proto(TensorProto.FLOAT, [2, None]))
    nodes = [
        helper.make_node("Constant", [], ["ints"], name="k_ints", value_ints=[3, 4]),
        helper.make_node("Constant", [], ["f"], name="k_float", value_float=2.5),
        helper.make_node("Constant", [], ["t"], name="k_big", value=numpy_helper.from_array(big)),
        custom,
        helper.make_node("Add", ["t", "f"], ["y"], name="add"),
    ]
    graph = helper.make_graph(nodes, "kinds", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [512])])
    loaded = load(_save(helper.make_model(graph), tmp_path))
    assert loaded.node("k_ints").value.tolist() == [3, 4] and loaded.node("k_ints").value.dtype == np.int64
    assert loaded.node("k_float").value.tolist() == 2.5
    assert isinstance(_root(loaded.node("k_big").value), mmap.mmap)
    np.testing.assert_array_equal(loaded.node("k_big").value, big)
    attrs = loaded.node("custom").attrs
    assert attrs["floats"] == (0.5, 1.5) and attrs["ints"] == (1, 2) and attrs["strings"] == ("a", "b")
    assert attrs["label"] == "text" and attrs["tensors"][0].tolist() == [1, 2]
    assert attrs["kind"] == (dtypes.FLOAT32, (2, -1))
    assert loaded.node("custom").domain == "my.domain"
    assert loaded.outputs == [GraphOutput("y", "add", 0)]


def _utf8_model():
    then_branch = helper.make_graph(
        [helper.make_node("Identity", ["x"], ["t"], name="Zthen")], "then",
        [], [helper.make_tensor_value_info("t", TensorProto.FLOAT, [2])])
    else_branch = helper.make_graph(
        [helper.make_node("Neg", ["x"], ["e"], name="Zelse")], "else",
        [], [helper.make_tensor_value_info("e", TensorProto.FLOAT, [2])])
    graph = helper.make_graph(
        [
            helper.make_node("Relu", ["x"], ["r"], name="Zrelu", doc_string="Zdoc"),
            helper.make_node("Cast", ["r"], ["c"], name="Zcast", to=TensorProto.BOOL),
            helper.make_node("ReduceMax", ["c"], ["cond"], name="Zany", keepdims=0),
            helper.make_node("If", ["cond"], ["y"], name="Zif", then_branch=then_branch, else_branch=else_branch),
        ],
        "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


@pytest.mark.parametrize(
    "marker, field",
    [
        (b"Zrelu", "model.graph.node[0].name"),
        (b"Zdoc", "model.graph.node[0].doc_string"),
        (b"Zelse", "model.graph.node[3].attribute[0].g.node[0].name"),  # attributes sorted: else_branch first
    ],
)
def test_a_string_field_that_is_not_utf8_is_named(tmp_path, marker, field):
    blob = _utf8_model().SerializeToString()
    assert blob.count(marker) == 1
    path = tmp_path / "bad.onnx"
    path.write_bytes(blob.replace(marker, b"\xff" * len(marker)))
    with pytest.raises(ParseError, match=re.escape(f"the string field {field} holds bytes that are not UTF-8")):
        load(path)
    load(_save(_utf8_model(), tmp_path))  # the same model with its own names loads


@pytest.mark.parametrize("marker", [b"Zrelu", b"Zdoc", b"Zelse"])
def test_the_quick_utf8_check_agrees_with_the_field_walk(marker):
    from scopefusion.parser.onnx_frontend import _non_utf8_field, _strings_are_utf8

    blob = _utf8_model().SerializeToString()
    assert _strings_are_utf8(blob) and _non_utf8_field(_utf8_model()) is None
    bad = blob.replace(marker, b"\xff" * len(marker))
    model = onnx.ModelProto()
    model.ParseFromString(bad)
    assert not _strings_are_utf8(bad) and _non_utf8_field(model) is not None
