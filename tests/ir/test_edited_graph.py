"""A model's graph edited through its methods after conversion: what inference found of it no longer holds,
so the ONNX export folds the edited graph's constants again, and a profile made afterwards infers it again,
instead of taking answers about values that changed (or about removed values whose ``id`` a new one took)."""

from __future__ import annotations

import numpy as np
import onnxruntime as ort
import pytest

from scopefusion.convert import convert
from scopefusion.ir.graph import Graph
from scopefusion.ir_builder.shape_inference import infer_graph
from scopefusion.serde.onnx_export import model_to_onnx_bytes

C1, C2, C3 = [1.0, 2.0, 3.0], [10.0, 20.0, 30.0], [-1.0, 0.5, 4.0]


@pytest.fixture(scope="module")
def frozen_graph(tmp_path_factory) -> str:
    """x + c1 * c2 and x * c3, three constants made before the products (so each may feed either)."""
    import tensorflow as tf

    graph = tf.Graph()
    with graph.as_default():
        x = tf.compat.v1.placeholder(tf.float32, [3], name="x")
        c1 = tf.constant(C1, name="c1")
        c2 = tf.constant(C2, name="c2")
        c3 = tf.constant(C3, name="c3")
        tf.identity(x + tf.multiply(c1, c2, name="product"), name="sum")
        tf.identity(x * c3, name="scaled")
    path = tmp_path_factory.mktemp("edited") / "graph.pb"
    path.write_bytes(graph.as_graph_def().SerializeToString())
    return str(path)


def _run(data: bytes, x: np.ndarray) -> dict[str, np.ndarray]:
    session = ort.InferenceSession(data, providers=["CPUExecutionProvider"])
    names = [o.name for o in session.get_outputs()]
    return dict(zip(names, session.run(None, {session.get_inputs()[0].name: x})))


def test_the_export_folds_an_edited_product_again(frozen_graph):
    model = convert(frozen_graph)
    graph = model.graph
    product = graph.node("product")
    assert model.inference.known(product.outputs[0]).tolist() == [10.0, 40.0, 90.0]
    product.replace_input_with(1, graph.node("c3").outputs[0])
    x = np.array([0.5, -2.0, 7.0], np.float32)
    outputs = _run(model_to_onnx_bytes(model), x)
    np.testing.assert_allclose(outputs["sum"], x + np.float32(C1) * np.float32(C3))
    np.testing.assert_allclose(outputs["scaled"], x * np.float32(C3))


def test_a_profile_made_after_an_edit_infers_the_edited_graph(frozen_graph):
    model = convert(frozen_graph)
    model.graph.node("product").replace_input_with(1, model.graph.node("c3").outputs[0])
    profile = model.profiles[0]  # made on first use, after the edit
    product = profile.graph.node("product")
    assert profile.inference.known(product.outputs[0]).tolist() == [-1.0, 1.0, 12.0]


def test_an_unedited_model_keeps_inferences_answers(frozen_graph):
    model = convert(frozen_graph)
    assert model.inference.describes(model.graph)
    model_to_onnx_bytes(model)
    _ = model.profiles[0].graph
    assert model.inference.describes(model.graph)  # neither the export nor the profile edits the graph


def test_each_editing_method_counts_an_edit(frozen_graph):
    graph: Graph = convert(frozen_graph).graph
    inference = infer_graph(graph)
    assert inference.describes(graph)
    product, c3 = graph.node("product"), graph.node("c3").outputs[0]
    edits = [
        lambda: graph.add_const(np.float32(2.0), name="two"),
        lambda: graph.add_node("tf.Neg", [c3], name="negated", attrs={"T": product.attrs.get_attr("T")}),
        lambda: product.replace_input_with(0, c3),
        lambda: graph.set_outputs(list(graph.outputs)),
        lambda: graph.remove_node(graph.node("negated")),
        lambda: graph.node("x").set_attr("_note", "edited"),
    ]
    for edit in edits:
        before = graph.edits
        edit()
        assert graph.edits > before
        assert not inference.describes(graph)
    assert infer_graph(graph).describes(graph)
