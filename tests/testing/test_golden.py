"""Golden files: the GE text form with the printed form as comments, read back and compared structurally."""

from __future__ import annotations

import numpy as np
import pytest

from scopefusion import pytest_plugin
from scopefusion.errors import SerdeError
from scopefusion.ir_builder import format_graph
from scopefusion.testing import assert_matches_golden, golden_text, graph_diff, read_golden, write_golden
from scopefusion.testing.golden import UPDATE_OPTION
from tests.testing.ir_graphs import build, index_of, replace, transformer


@pytest.fixture(scope="module")
def spec():
    return transformer(3)


def test_a_golden_file_reads_back_to_an_equal_graph(spec, tmp_path):
    graph = build(spec)
    path = tmp_path / "g.golden.txt"
    assert write_golden(path, graph) is True
    assert write_golden(path, graph) is False  # unchanged text is not rewritten
    text = path.read_text()
    assert text.startswith("# scopefusion golden graph.") and text == golden_text(graph)
    printed = [line[2:] for line in text.splitlines() if line.startswith("# ") and "=" in line]
    assert printed[0] in format_graph(graph)
    assert_matches_golden(graph, path, check_names=True)
    values = [n.attrs.get("value") for n in read_golden(path).nodes if n.op == "ge.Const"]
    summaries = [v.item().decode() for v in values if v.dtype == object]
    assert summaries and all(s.startswith("weight f32[8,8] sha256:") and len(s.split(":")[1]) == 64 for s in summaries)
    full = tmp_path / "full.golden.txt"
    write_golden(full, graph, keep_weights=True)
    assert graph_diff(read_golden(full), graph, check_names=True).equal


def test_assert_matches_golden_compares_structurally_and_updates(spec, tmp_path):
    path = tmp_path / "g.golden.txt"
    graph = build(spec)
    with pytest.raises(AssertionError, match=f"golden file .* does not exist; run pytest {UPDATE_OPTION}"):
        assert_matches_golden(graph, path)
    assert_matches_golden(graph, path, update=True)
    assert_matches_golden(build(spec, order_seed=4, names=lambda i, op: f"v{i}"), path)  # other order and names
    with pytest.raises(AssertionError):
        assert_matches_golden(build(spec, names=lambda i, op: f"v{i}"), path, check_names=True)
    changed = build(spec, edit=replace([index_of(spec, "t.Softmax", 1)], attrs={"axis": 0}))
    with pytest.raises(AssertionError) as info:
        assert_matches_golden(changed, path)
    message = str(info.value)
    assert message.startswith(f"the graph (a) differs from golden file {path} (b)")
    assert "axis" in message and "attribute differences (1)" in message
    assert_matches_golden(changed, path, ignore_attrs=["axis"])


def test_a_broken_golden_file_names_itself(tmp_path):
    path = tmp_path / "bad.golden.txt"
    path.write_text("graph { op { name: \n")
    with pytest.raises(SerdeError, match="golden file .*bad.golden.txt"):
        read_golden(path)
    with pytest.raises(SerdeError, match="cannot read golden file"):
        read_golden(tmp_path / "missing.golden.txt")


def test_the_plugin_option_is_the_golden_option():
    assert pytest_plugin.UPDATE_OPTION == UPDATE_OPTION


@pytest.fixture(scope="module")
def zoo_keras_cnn_pb(model_store):
    """The zoo's Keras CNN (``keras_activation_cnn``: Conv2D, BatchNormalization, swish, hard swish, Dense)."""
    from tests.e2e.zoo import BY_NAME

    model = BY_NAME["keras_activation_cnn"]
    return model_store.file(model.file_name, model.builder)


@pytest.mark.parametrize("fixture", ["zoo_keras_cnn_pb", "tf_convnet_pb"])
def test_the_keras_cnn_golden_is_small_and_names_a_changed_weight(fixture, request, tmp_path):
    from scopefusion.convert import convert
    from scopefusion.serde.ge import model_from_proto, model_to_proto

    model = convert(request.getfixturevalue(fixture))
    path = tmp_path / "convnet.golden.txt"
    write_golden(path, model)
    size = path.stat().st_size
    assert size < 50_000, size
    assert size < 4 * len(format_graph(model.graph))  # about the size of the printed graph, comments included
    assert_matches_golden(model, path)

    proto = model_to_proto(model.graph)  # the same graph with one weight changed by one bit
    kernel = next(op for op in proto.graph[0].op if op.type == "Const" and len(op.attr["value"].t.data) > 64)
    data = bytearray(kernel.attr["value"].t.data)
    data[-1] ^= 1
    kernel.attr["value"].t.data = bytes(data)
    changed = model_from_proto(proto).main
    with pytest.raises(AssertionError) as info:
        assert_matches_golden(changed, path)
    message = str(info.value)
    assert "graphs differ: 1 attribute difference" in message
    assert f"%{kernel.name}  value" in message and "sha256:" in message


def test_a_golden_with_weight_bytes_compares_within_a_tolerance(spec, tmp_path):
    graph = build(spec)
    path = tmp_path / "bytes.golden.txt"
    write_golden(path, graph, keep_weights=True)
    index = index_of(spec, "ge.Const", 3)
    nudged = spec.ops[index].attrs["value"] + np.float32(1e-6)
    close = build(spec, edit=replace([index], attrs={"value": nudged}))
    assert_matches_golden(close, path, atol=1e-4)  # bytes kept: values within the tolerance
    with pytest.raises(AssertionError, match="value"):
        assert_matches_golden(close, path)  # no tolerance: the hashes differ


def test_a_bert_golden_is_about_the_size_of_its_printed_graph(tf_bert_pb, tmp_path):
    from scopefusion.convert import convert

    model = convert(tf_bert_pb)  # 13.5k parameters, most of them absorbed by fused attention ops
    path = tmp_path / "bert.golden.txt"
    write_golden(path, model)
    size = path.stat().st_size
    assert size < 4 * len(format_graph(model.graph)) and size * 3 < len(golden_text(model, keep_weights=True))
    assert_matches_golden(model, path)


@pytest.mark.parametrize("fixture", ["onnx_control_flow", "tf_rnn_pb", "tf2_control_flow_pb"])
def test_goldens_of_models_with_bodies_and_loops_read_back(fixture, request, tmp_path):
    from scopefusion.convert import convert

    model = convert(request.getfixturevalue(fixture))
    path = tmp_path / "m.golden.txt"
    write_golden(path, model)
    assert_matches_golden(model, path, check_names=True)
    full = tmp_path / "full.golden.txt"
    write_golden(full, model, keep_weights=True)
    assert_matches_golden(model, full, check_names=True, atol=1e-9)  # by value: the bytes are there
