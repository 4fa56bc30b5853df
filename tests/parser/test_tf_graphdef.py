"""Frozen and text GraphDefs: every node, input and attribute agrees with TensorFlow's own reading."""

from __future__ import annotations

import mmap

import numpy as np
import pytest

from scopefusion import dtypes
from scopefusion.parser import FunctionRef, GraphOutput, SourceGraph, load
from scopefusion.parser.values import ForeignDType

GRAPHS = ["tf_convnet_pb", "tf_mobilenet_pb", "tf_bert_pb", "tf_rnn_pb", "tf1_cond_pb"]


def _tf_graph_def(path):
    import tensorflow as tf

    return tf.compat.v1.GraphDef.FromString(path.read_bytes())


def _expected_attr(value):
    """TensorFlow's own decoding of an AttrValue, in our representation."""
    import tensorflow as tf

    kind = value.WhichOneof("value")
    if kind == "tensor":
        return tf.make_ndarray(value.tensor)
    if kind == "type":
        return tf.as_dtype(value.type).name
    if kind == "shape":
        shape = tf.TensorShape(value.shape)
        return None if shape.rank is None else tuple(-1 if d is None else d for d in shape.as_list())
    if kind == "s":
        return value.s
    if kind == "list":
        for field in ("s", "i", "f", "b", "type", "shape", "tensor", "func"):
            items = getattr(value.list, field)
            if len(items):
                single = {"s": "s", "i": "i", "f": "f", "b": "b", "type": "type", "shape": "shape", "tensor": "tensor", "func": "func"}[field]
                return tuple(_expected_attr(tf.compat.v1.AttrValue(**{single: item})) for item in items)
        return ()
    if kind == "func":
        return value.func.name
    return getattr(value, kind)


def _same_attr(ours, expected) -> bool:
    if isinstance(expected, np.ndarray):
        return isinstance(ours, np.ndarray) and ours.dtype == expected.dtype and ours.shape == expected.shape and (
            list(ours.ravel()) == list(expected.ravel()) if expected.dtype == object
            else np.array_equal(ours, expected, equal_nan=True)
        )
    if isinstance(ours, (dtypes.DType,)):
        return {"half": "float16", "double": "float64", "float": "float32"}.get(expected, expected) == ours.name or (
            ours.name == expected
        )
    if isinstance(ours, ForeignDType):
        return ours.name.lower() == f"dt_{expected}".replace("_ref", "") + ("_ref" if ours.name.endswith("_REF") else "")
    if isinstance(ours, FunctionRef):
        return ours.name == expected
    if isinstance(expected, bytes):
        return ours == expected or ours == expected.decode("utf-8", "strict")
    if isinstance(expected, float):
        return ours == pytest.approx(expected)
    if isinstance(expected, tuple):
        return isinstance(ours, tuple) and len(ours) == len(expected) and all(_same_attr(a, b) for a, b in zip(ours, expected))
    return ours == expected


@pytest.mark.parametrize("fixture", GRAPHS)
def test_every_node_input_and_attribute_agrees_with_tensorflow(fixture, request):
    path = request.getfixturevalue(fixture)
    graph = load(path)
    tf_graph = _tf_graph_def(path)
    assert sorted(n.name for n in graph) == sorted(n.name for n in tf_graph.node)
    for tf_node in tf_graph.node:
        node = graph.node(tf_node.name)
        assert node.op_type == tf_node.op
        assert node.device == tf_node.device
        data = [i for i in tf_node.input if not i.startswith("^")]
        assert [f"{p}:{i}" for p, i in node.inputs] == [i if ":" in i else f"{i}:0" for i in data], node.name
        assert node.control_inputs == [i[1:] for i in tf_node.input if i.startswith("^")]
        assert sorted(node.attrs) == sorted(tf_node.attr)
        for key, value in tf_node.attr.items():
            assert _same_attr(node.attrs[key], _expected_attr(value)), f"{node.name}.{key}: {node.attrs[key]!r}"
        if tf_node.op == "Const":
            assert node.value is node.attrs["value"] and not node.value.flags.writeable


@pytest.mark.parametrize("fixture", GRAPHS)
def test_nodes_come_in_topological_order(fixture, request):
    graph = load(request.getfixturevalue(fixture))
    seen = set()
    for node in graph:
        for producer in [p for p, _ in node.inputs] + node.control_inputs:
            back_edge = node.op_type == "Merge" and graph.node(producer).op_type == "NextIteration"
            assert producer in seen or back_edge, f"{node.name} before {producer}"
        seen.add(node.name)
    assert [n.name for n in load(request.getfixturevalue(fixture))] == [n.name for n in graph]


def _root(array):
    while isinstance(array, np.ndarray) and array.base is not None:
        array = array.base
    return array.obj if isinstance(array, memoryview) else array


def test_large_constants_are_read_only_views_of_the_mapped_file(tf_mobilenet_pb):
    graph = load(tf_mobilenet_pb)
    big = [n for n in graph if n.value is not None and n.value.nbytes >= 4096]
    assert len(big) > 10
    for node in big:
        assert isinstance(_root(node.value), mmap.mmap), node.name
        assert not node.value.flags.writeable
        with pytest.raises(ValueError):
            node.value.ravel()[0] = 1


def test_graph_inputs_are_placeholders_and_outputs_the_unconsumed_tensors(tf_bert_pb):
    graph = load(tf_bert_pb)
    assert graph.framework == "tensorflow" and graph.path == str(tf_bert_pb)
    assert [(i.name, i.dtype, i.shape) for i in graph.inputs] == [
        ("input_ids", dtypes.INT32, (-1, 8)),
        ("input_mask", dtypes.INT32, (-1, 8)),
        ("token_type_ids", dtypes.INT32, (-1, 8)),
    ]
    assert graph.outputs == [GraphOutput("bert/pooler/dense/Tanh", "bert/pooler/dense/Tanh", 0)]
    assert graph.metadata["producer"] > 0


def test_outputs_option_names_graph_outputs(tf_bert_pb):
    graph = load(tf_bert_pb, outputs=["bert/encoder/Reshape_final", "bert/pooler/dense/Tanh:0"])
    assert graph.outputs == [
        GraphOutput("bert/encoder/Reshape_final", "bert/encoder/Reshape_final", 0),
        GraphOutput("bert/pooler/dense/Tanh:0", "bert/pooler/dense/Tanh", 0),
    ]


def test_scope_paths_are_kept_in_node_names(tf_bert_pb):
    graph = load(tf_bert_pb)
    names = {n.name for n in graph}
    assert "bert/encoder/layer_0/attention/self/query/MatMul" in names
    assert "bert/encoder/layer_1/output/LayerNorm/batchnorm/Rsqrt" in names
    kernel = graph.node("bert/encoder/layer_1/attention/self/key/kernel")
    assert kernel.op_type == "Const" and kernel.value.shape == (32, 32) and kernel.value.dtype == np.float32


def test_output_names_follow_the_op_signatures(tf_rnn_pb, tf_bert_pb):
    graph = load(tf_rnn_pb)
    split = next(n for n in graph if n.op_type == "Split")
    assert split.output_names == [f"{split.name}:{i}" for i in range(4)]
    switch = next(n for n in graph if n.op_type == "Switch")
    assert len(switch.output_names) == 2
    assert graph.node("y").output_names == ["y:0"]
    bert = load(tf_bert_pb)
    assert all(len(n.output_names) == 1 for n in bert if n.op_type in ("MatMul", "Const"))


def test_tf1_control_flow_keeps_frames_and_back_edges(tf_rnn_pb, tf1_cond_pb):
    graph = load(tf_rnn_pb)
    enters = [n for n in graph if n.op_type == "Enter"]
    assert enters and {n.frame for n in enters} == {"rnn_model/rnn/while/while_context"}
    assert all(n.frame is None for n in graph if n.op_type != "Enter")
    merges = [n for n in graph if n.op_type == "Merge"]
    assert merges and all(graph.node(m.inputs[1][0]).op_type == "NextIteration" for m in merges)
    ops = graph.op_types()
    for op in ("Enter", "Exit", "Switch", "Merge", "NextIteration", "LoopCond"):
        assert ops[op] >= 1, op
    cond = load(tf1_cond_pb)
    assert {n.frame for n in cond if n.op_type == "Enter"} == {"loop/while/while_context"}
    assert cond.node("branch/cond/Merge").op_type == "Merge"


def test_text_graph_def_reads_the_same_as_the_binary_one(tf_bert_pb, tf_bert_pbtxt):
    binary = load(tf_bert_pb)
    text = load(tf_bert_pbtxt)
    assert isinstance(text, SourceGraph) and text.path == str(tf_bert_pbtxt)
    assert [n.name for n in text] == [n.name for n in binary]
    for a, b in zip(text, binary):
        assert (a.op_type, a.inputs, a.control_inputs, sorted(a.attrs)) == (b.op_type, b.inputs, b.control_inputs, sorted(b.attrs))
        for key in a.attrs:
            assert _same_attr(a.attrs[key], b.attrs[key]) if isinstance(b.attrs[key], np.ndarray) else a.attrs[key] == b.attrs[key]
    assert [i.name for i in text.inputs] == [i.name for i in binary.inputs]


def test_loading_twice_gives_identical_graphs(tf_mobilenet_pb):
    a, b = load(tf_mobilenet_pb), load(tf_mobilenet_pb)
    assert [(n.name, n.inputs, n.control_inputs, n.output_names) for n in a] == [
        (n.name, n.inputs, n.control_inputs, n.output_names) for n in b
    ]
    assert list(a.nx.edges(keys=True, data=True)) == list(b.nx.edges(keys=True, data=True))


def test_reading_the_file_whole_or_by_chunks_gives_identical_graphs(tf_mobilenet_pb):
    """Without progress reports a small file is read whole for the wire walker; with them, in chunks."""
    from scopefusion.parser.loader import WHOLE_READ_BYTES

    assert tf_mobilenet_pb.stat().st_size <= WHOLE_READ_BYTES
    reports = []
    whole = load(tf_mobilenet_pb)
    chunked = load(tf_mobilenet_pb, progress=lambda *report: reports.append(report))
    assert reports and reports[-1][1] == reports[-1][2] == tf_mobilenet_pb.stat().st_size
    assert [(n.name, n.op_type, n.inputs, n.control_inputs, n.output_names, sorted(n.attrs)) for n in whole] == [
        (n.name, n.op_type, n.inputs, n.control_inputs, n.output_names, sorted(n.attrs)) for n in chunked
    ]
    for a, b in zip(whole, chunked):
        for key, value in a.attrs.items():
            assert _same_attr(value, b.attrs[key]) if isinstance(value, np.ndarray) else value == b.attrs[key]
        if a.value is not None and a.value.nbytes >= 4096:
            assert isinstance(_root(a.value), mmap.mmap) and isinstance(_root(b.value), mmap.mmap), a.name


def test_a_small_file_read_unmapped_gives_the_graph_a_mapped_one_gives(tmp_path, monkeypatch):
    """A small GraphDef is not mapped: its constants, cut out of the file or not, are read-only views of the
    bytes read, equal to those of the mapped file."""
    from scopefusion.parser import loader
    from scopefusion.parser.proto import tf_framework_pb2 as tfpb

    from . import tf_graph_util as tg

    weights = np.arange(600, dtype=np.float32).reshape(20, 30)
    big = tfpb.TensorProto(dtype=tfpb.DT_FLOAT, tensor_content=weights.tobytes())
    big.tensor_shape.dim.add(size=20)
    big.tensor_shape.dim.add(size=30)
    path = tg.write(tmp_path / "small.pb", [
        tg.node("x", "Placeholder", dtype=tg.type_attr()),
        tg.node("w", "Const", dtype=tg.type_attr(), value=tfpb.AttrValue(tensor=big)),
        tg.const("one"),
        tg.node("mm", "MatMul", ["x", "w"], T=tg.type_attr()),
        tg.node("y", "Add", ["mm", "one"], T=tg.type_attr()),
    ])
    assert path.stat().st_size <= loader.UNMAPPED_BYTES
    unmapped = load(path)
    monkeypatch.setattr(loader, "UNMAPPED_BYTES", 0)
    mapped = load(path)
    assert [(n.name, n.op_type, n.inputs, n.control_inputs, n.output_names, sorted(n.attrs)) for n in unmapped] == [
        (n.name, n.op_type, n.inputs, n.control_inputs, n.output_names, sorted(n.attrs)) for n in mapped
    ]
    for a, b in zip(unmapped, mapped):
        for key, value in a.attrs.items():
            assert _same_attr(value, b.attrs[key]) if isinstance(value, np.ndarray) else value == b.attrs[key]
    assert np.array_equal(unmapped.node("w").value, weights) and not unmapped.node("w").value.flags.writeable
    assert isinstance(_root(unmapped.node("w").value), bytes) and isinstance(_root(mapped.node("w").value), mmap.mmap)
    with pytest.raises(ValueError):
        unmapped.node("w").value.ravel()[0] = 1


def _loops_with_dropped_values() -> bytes:
    """TF1 loops one in the other over ``x`` [2]; each body computes a value nothing reads."""
    import tensorflow as tf

    tf.compat.v1.disable_control_flow_v2()
    try:
        graph = tf.Graph()
        with graph.as_default():
            x = tf.compat.v1.placeholder(tf.float32, [2], name="x")

            def outer(i, h):
                def inner(j, h):
                    tf.identity(h * 3.0, name="inner_dropped")
                    return j + 1, h * 0.5 + x

                _, h = tf.compat.v1.while_loop(lambda j, h: j < i, inner, [0, h])
                tf.identity(h, name="outer_dropped")
                return i + 1, h

            _, h = tf.compat.v1.while_loop(lambda i, h: i < 3, outer, [tf.constant(0), x])
            tf.identity(h, name="h")
            tf.identity(x * 2.0, name="after")
        return graph.as_graph_def().SerializeToString()
    finally:
        tf.compat.v1.enable_control_flow_v2()


def test_default_outputs_leave_out_the_values_inside_tf1_loops(model_store):
    path = model_store.file("parser_loops_with_dropped_values.pb", _loops_with_dropped_values)
    graph = load(path)
    # the loop bodies' dropped values run once per iteration: TensorFlow cannot fetch them; the outer
    # loop's counter Exit, read by nothing, is at the top level and stays an output
    assert sorted(o.name for o in graph.outputs) == ["after", "h", "while/Exit"]
    named = load(path, outputs=["while/while/inner_dropped"])  # named outputs are taken as given
    assert [o.node for o in named.outputs] == ["while/while/inner_dropped"]
