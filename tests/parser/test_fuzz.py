"""Mutated model bytes: loading either succeeds or raises our own errors, never anything else."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from scopefusion.errors import ModelLoadError, ParseError
from scopefusion.parser import SourceGraph, load
from scopefusion.parser.proto import tf_framework_pb2 as tfpb
from tests.models import onnx_models

from . import tf_graph_util as tg


def _graph_def_bytes() -> bytes:
    weights = np.arange(600, dtype=np.float32).reshape(20, 30)
    tensor = tfpb.TensorProto(dtype=tfpb.DT_FLOAT, tensor_content=weights.tobytes())
    for size in weights.shape:
        tensor.tensor_shape.dim.add().size = size
    body = tg.function("Scale", ["a"], {"out": "mul:z:0"}, [
        tg.const("two", 2.0), tg.node("mul", "Mul", ["a", "two:output:0"], T=tg.type_attr())])
    graph = tfpb.GraphDef(node=[
        tg.node("x", "Placeholder", dtype=tg.type_attr()),
        tg.node("w", "Const", dtype=tg.type_attr(), value=tfpb.AttrValue(tensor=tensor)),
        tg.node("mm", "MatMul", ["x", "w"], T=tg.type_attr()),
        tg.node("call", "PartitionedCall", ["mm"], f=tg.func_attr("Scale")),
        tg.node("loop", "Enter", ["call"], frame_name=tfpb.AttrValue(s=b"frame")),
        tg.node("y", "Identity", ["loop", "^w"], T=tg.type_attr()),
    ])
    graph.library.function.append(body)
    return graph.SerializeToString()


@pytest.fixture(scope="module")
def seeds(tmp_path_factory):
    onnx_flow = onnx_models.control_flow().SerializeToString()
    onnx_attention = onnx_models.attention_block(hidden=16).SerializeToString()
    graph_def = _graph_def_bytes()
    text = str(tfpb.GraphDef.FromString(graph_def)).encode()
    for name, data in (("flow.onnx", onnx_flow), ("attn.onnx", onnx_attention), ("g.pb", graph_def), ("g.pbtxt", text)):
        assert isinstance(load_bytes(tmp_path_factory.mktemp("seed"), name, data), SourceGraph)
    return {
        "flow.onnx": onnx_flow,
        "attn.onnx": onnx_attention,
        "g.pb": graph_def,
        "g.pbtxt": text,
    }, tmp_path_factory.mktemp("fuzz")


def load_bytes(directory, name, data):
    path = directory / name
    path.write_bytes(data)
    return load(path)


mutation = st.one_of(
    st.tuples(st.just("flip"), st.lists(st.tuples(st.floats(0, 1, exclude_max=True), st.integers(0, 255)), min_size=1, max_size=8)),
    st.tuples(st.just("truncate"), st.floats(0, 1, exclude_max=True)),
    st.tuples(st.just("insert"), st.tuples(st.floats(0, 1), st.binary(min_size=1, max_size=12))),
    st.tuples(st.just("splice"), st.tuples(st.floats(0, 1), st.floats(0, 1), st.floats(0, 1))),
)


def mutate(data: bytes, kind: str, arg) -> bytes:
    out = bytearray(data)
    if kind == "flip":
        for where, value in arg:
            out[int(where * len(out))] = value
    elif kind == "truncate":
        del out[int(arg * len(out)):]
    elif kind == "insert":
        where, extra = arg
        out[int(where * len(out)):int(where * len(out))] = extra
    else:
        a, b, c = sorted(int(x * len(out)) for x in arg)
        out[c:c] = out[a:b]
    return bytes(out)


@settings(max_examples=600, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(name=st.sampled_from(["flow.onnx", "attn.onnx", "g.pb", "g.pbtxt"]), change=mutation)
def test_mutated_models_raise_only_our_errors(seeds, name, change):
    originals, directory = seeds
    data = mutate(originals[name], *change)
    try:
        graph = load_bytes(directory, name, data)
    except (ModelLoadError, ParseError) as exc:
        assert "scopefusion bug" not in str(exc), str(exc)
        assert str(directory / name) in str(exc)
    else:
        assert isinstance(graph, SourceGraph)
