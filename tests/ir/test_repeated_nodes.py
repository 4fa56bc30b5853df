"""Within one graph, a node that reads what an earlier node of the same op read takes that node's answer
(``shape_inference``): the result is exactly what inferring every node gives, on TF and ONNX models, and the
converted model's bytes are the same."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from scopefusion.budgets import DEFAULT_MAX_INLINED_NODES, Budgets, use_budgets
from scopefusion.convert import convert
from scopefusion.ir.graph import Graph
from scopefusion.ir_builder import shape_inference
from scopefusion.ir_builder.shape_inference import InferenceResult
from tests.ir.inference_checks import assert_same_values, fixed_shapes, from_scratch

REPO = Path(__file__).resolve().parents[2]
MODELS = ["tf_mobilenet_pb", "tf_bert_pb", "tf1_cond_pb", "tf_rnn_pb", "tf2_control_flow_pb", "torch_opset17", "torch_opset14"]


@pytest.fixture(params=MODELS)
def model_path(request) -> Path:
    if request.param.startswith("torch_opset"):
        return REPO / "testdata" / f"torch_encoder_opset{request.param[-2:]}.onnx"
    return request.getfixturevalue(request.param)


def assert_same_inference(got: Graph, got_result: InferenceResult, want: Graph, want_result: InferenceResult) -> None:
    assert_same_values(got, got_result, want, want_result)
    assert list(got_result.outcomes.values()) == list(want_result.outcomes.values())


def _every_node_inferred(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(shape_inference, "_node_key", lambda node, known: None)


def _same_with_and_without(monkeypatch: pytest.MonkeyPatch, shortcut: str, declined: object, graph: Graph,
                           shapes: dict) -> list:
    """Infers ``graph`` from scratch with ``shape_inference.<shortcut>`` recording its answers, then with it
    always answering ``declined`` (the general path), asserts both give the same inference, and returns the
    recorded answers."""
    answers = []
    original = getattr(shape_inference, shortcut)

    def recorded(*args):
        found = original(*args)
        answers.append(found)
        return found

    monkeypatch.setattr(shape_inference, shortcut, recorded)
    got, got_result = from_scratch(graph, shapes)
    monkeypatch.setattr(shape_inference, shortcut, lambda *args: declined)
    want, want_result = from_scratch(graph, shapes)
    assert_same_inference(got, got_result, want, want_result)
    return answers


@pytest.mark.parametrize("static", [False, True], ids=["model_shapes", "static_shapes"])
def test_repeated_nodes_give_what_inferring_each_gives(model_path, static, monkeypatch):
    graph = convert(model_path).graph
    shapes = fixed_shapes(graph) if static else {}
    keys = []
    node_key = shape_inference._node_key

    def counted(node, known):
        key = node_key(node, known)
        keys.append(key)
        return key

    monkeypatch.setattr(shape_inference, "_node_key", counted)
    got, got_result = from_scratch(graph, shapes)
    _every_node_inferred(monkeypatch)
    want, want_result = from_scratch(graph, shapes)
    assert_same_inference(got, got_result, want, want_result)
    assert keys or not _repeated_inferring_defs(graph)  # nodes were keyed where some can repeat


def _repeated_inferring_defs(graph: Graph) -> list[tuple]:
    """The op definitions with an inference function and input types that more than one node of ``graph``
    reads: only their nodes are keyed (a node reading what no earlier node read cannot repeat one, and a node
    taking its input's type is not keyed)."""
    counts = Counter(
        shape_inference._types_read(n) for n in graph.nodes
        if n.opdef is not None and (n.opdef.infer_shape or n.opdef.infer_dtype) and not n.subgraphs
    )
    return [read for read, count in counts.items() if read is not None and count > 1]


def test_nodes_are_keyed_only_once_a_later_node_reads_the_same_types(tf_mobilenet_pb, monkeypatch):
    """A node is keyed when a later node reads its op's input types (both are then), never before; a node
    reading a loop back edge, whose known value is found after it, is never keyed."""
    keyed = []
    node_key = shape_inference._node_key

    def counted(node, known):
        keyed.append(node)
        return node_key(node, known)

    monkeypatch.setattr(shape_inference, "_node_key", counted)
    convert(tf_mobilenet_pb)
    reads = Counter(shape_inference._types_read(n) for n in keyed)
    assert keyed and all(count > 1 for count in reads.values()), reads


def test_a_node_reading_a_loop_back_edge_is_never_keyed(tf1_cond_pb):
    graph = convert(tf1_cond_pb).graph
    readers = [n for n in graph.nodes if any(v is not None and v.meta.get("back_edge") for v in n.inputs)]
    assert readers and all(shape_inference._types_read(n) is None for n in readers)
    assert any(shape_inference._types_read(n) is not None for n in graph.nodes if n.inputs and n not in readers)


def test_the_encoder_repeats_its_shape_arithmetic(monkeypatch):
    repeats = []
    node_key = shape_inference._node_key
    seen = set()

    def counted(node, known):
        key = node_key(node, known)
        if key is not None:
            repeats.append(key in seen)
            seen.add(key)
        return key

    monkeypatch.setattr(shape_inference, "_node_key", counted)
    convert(REPO / "testdata" / "torch_encoder_opset17.onnx", input_shapes={"input_ids": [2, 16]})
    assert sum(repeats) > len(repeats) // 3


@pytest.mark.parametrize("name", ["torch_encoder_opset17.onnx", "torch_encoder_opset14.onnx"])
def test_converted_bytes_are_the_same(name, monkeypatch):
    path = REPO / "testdata" / name
    shapes = {"input_ids": [2, 16]}
    fast = convert(path, input_shapes=shapes)
    _every_node_inferred(monkeypatch)
    slow = convert(path, input_shapes=shapes)
    for fmt in ("ge", "ge-text", "onnx"):
        assert fast.to_bytes(fmt) == slow.to_bytes(fmt), fmt


@pytest.mark.parametrize("static", [False, True], ids=["model_shapes", "static_shapes"])
def test_outputs_that_follow_an_input_get_what_inference_gives(model_path, static, monkeypatch):
    """A node whose outputs follow one input's type takes that type without running inference: the same
    types, folds and notes as running the op's rules through inference for every node."""
    graph = convert(model_path).graph
    shapes = fixed_shapes(graph) if static else {}
    _every_node_inferred(monkeypatch)
    answers = _same_with_and_without(monkeypatch, "_direct_types", None, graph, shapes)
    direct = [found is not None for found in answers]
    if model_path.suffix == ".pb":
        assert any(direct)  # TF models have Identity reads of their weights


@pytest.mark.parametrize("static", [False, True], ids=["model_shapes", "static_shapes"])
def test_identity_reads_of_known_values_fold_as_the_general_path_folds_them(model_path, static, monkeypatch):
    """An identity-like node reading a known value (an Identity read of a weight) takes its input's type and
    value at once: the same types, values, counts and notes as the general path of a node whose outputs
    follow its input."""
    graph = convert(model_path).graph
    shapes = fixed_shapes(graph) if static else {}
    _every_node_inferred(monkeypatch)
    taken = []
    identity_read = shape_inference._identity_read

    def counted(node, direct, known, limit):
        found = identity_read(node, direct, known, limit)
        taken.append(found is not None)
        return found

    monkeypatch.setattr(shape_inference, "_identity_read", counted)
    got, got_result = from_scratch(graph, shapes)
    monkeypatch.setattr(shape_inference, "_identity_read", lambda node, direct, known, limit: None)
    want, want_result = from_scratch(graph, shapes)
    assert_same_inference(got, got_result, want, want_result)
    if model_path.suffix == ".pb" and ("mobilenet" in model_path.name or "bert" in model_path.name):
        assert any(taken)  # Keras and TF1 models read their weights through Identity nodes


@pytest.mark.parametrize("limit", [0, 4, 64])
def test_outputs_that_follow_an_input_are_held_to_the_folding_budget_as_inferred_ones(model_path, limit, monkeypatch):
    """The folded-value budget check of a node whose outputs take their input's types, read from the types'
    sizes, folds and notes what the check of the shapes inference would give finds."""
    graph = convert(model_path).graph
    _every_node_inferred(monkeypatch)
    with use_budgets(Budgets(max_inlined_nodes=DEFAULT_MAX_INLINED_NODES, max_folded_bytes=limit)):
        got, got_result = from_scratch(graph, {})

        def by_shapes(node, types, result, limit):
            inferred = [(None if t.rank is None else t.shape, t.dtype, t.format) for t in types]
            return shape_inference._fold_fits(node, inferred, result, limit)

        monkeypatch.setattr(shape_inference, "_direct_fits", by_shapes)
        want, want_result = from_scratch(graph, {})
    assert_same_inference(got, got_result, want, want_result)
    if limit == 0 and model_path.suffix == ".pb":
        assert got_result.unfolded  # every static output over the budget is noted


def test_nodes_reading_weights_repeat_by_the_weights_types(tf_mobilenet_pb, monkeypatch):
    """A convolution or a fused batch norm reads its weights' types only (it cannot fold): layers of one
    shape share one answer whatever their weights and source names."""
    repeated_ops = []
    node_key = shape_inference._node_key
    seen = set()

    def counted(node, known):
        key = node_key(node, known)
        if key is not None and key in seen:
            repeated_ops.append(node.op_type)
        if key is not None:
            seen.add(key)
        return key

    monkeypatch.setattr(shape_inference, "_node_key", counted)
    convert(tf_mobilenet_pb)
    assert {"Conv2D", "BatchNorm"} & set(repeated_ops), repeated_ops


@pytest.mark.parametrize("static", [False, True], ids=["model_shapes", "static_shapes"])
def test_identity_reads_of_weights_take_their_inputs_types_as_folding_gives_them(model_path, static, monkeypatch):
    """An output that follows its input and folds to a value of its type's shape (an Identity read of a
    weight) takes its input's type at once: the same types and values as making the type from the value."""
    graph = convert(model_path).graph
    shapes = fixed_shapes(graph) if static else {}
    _every_node_inferred(monkeypatch)
    monkeypatch.setattr(shape_inference, "_identity_read", lambda node, direct, known, limit: None)
    taken = _same_with_and_without(monkeypatch, "_folded_as_typed", False, graph, shapes)
    if model_path.suffix == ".pb" and ("mobilenet" in model_path.name or "bert" in model_path.name):
        assert any(taken)  # Keras and TF1 models read their weights through Identity nodes


def test_converting_again_adds_no_remembered_attribute_maps(tf_mobilenet_pb):
    """A fused node's ``_original_nodes`` (its own value) is no part of the attribute maps remembered for keys:
    a model converted again finds every map it keyed the first time, so the tables (which keep their values
    alive) do not grow with each conversion."""
    convert(tf_mobilenet_pb)
    maps, plain = len(shape_inference._attrs_memo), len(shape_inference._plain_memo)
    model = convert(tf_mobilenet_pb)
    assert any(n.op.startswith("fused.") for n in model.graph.nodes)
    assert (len(shape_inference._attrs_memo), len(shape_inference._plain_memo)) == (maps, plain)
