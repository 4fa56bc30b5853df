"""ONNX-dialect inference remembers answers per op definition: identical nodes reuse them, and
the converted model is the same as without the cache."""

from __future__ import annotations

from pathlib import Path

import pytest

from scopefusion.convert import convert
from scopefusion.dialects import default_op_registry
from scopefusion.dialects.onnx import infer
from scopefusion.ir.printer import format_graph
from scopefusion.ir_builder import shape_inference

ENCODER = Path(__file__).resolve().parents[3] / "testdata" / "torch_encoder_opset17.onnx"


def _caches(model):
    out = []
    for opdef in model.graph.registry:
        answers = opdef.__dict__.get("_onnx_answers")
        if answers is not None and answers.owner is opdef:
            out.append(answers)
    return out


def _no_native(ctx, op):
    """Every node to ONNX's inference: the answers computed in Python (test_native_inference.py) set aside."""
    return None


@pytest.fixture(scope="module")
def cached_model():
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(infer, "native_answer", _no_native)
        mp.setattr(shape_inference, "_node_key", lambda node, known: None)  # repeated nodes asked too
        return convert(ENCODER)


def test_repeated_nodes_hit_the_cache(cached_model):
    caches = _caches(cached_model)
    hits = sum(c.hits for c in caches)
    misses = sum(c.misses for c in caches)
    assert misses > 0
    assert hits > misses  # the encoder's layers repeat the same shapes
    assert all(len(c) <= c.capacity for c in caches)


def test_results_equal_the_uncached_path(cached_model, monkeypatch):
    monkeypatch.setattr(infer, "native_answer", _no_native)
    monkeypatch.setattr(infer, "_answer_key", lambda ctx, op: None)
    # Conversions that declare no op share one op registry, with its caches: none of them was asked again.
    asked = {id(c): c.hits + c.misses for c in _caches(cached_model)}
    uncached = convert(ENCODER)
    assert all(c.hits + c.misses == asked.get(id(c), 0) for c in _caches(uncached))
    assert format_graph(cached_model.graph) == format_graph(uncached.graph)
    assert cached_model.to_bytes("ge") == uncached.to_bytes("ge")
    assert cached_model.to_bytes("onnx") == uncached.to_bytes("onnx")


def test_each_registry_has_its_own_cache(cached_model):
    fresh = default_op_registry()
    mat_mul = fresh.get("onnx.MatMul")
    answers = infer.answer_cache(mat_mul)
    assert answers.owner is mat_mul and len(answers) == 0
    assert answers is not infer.answer_cache(cached_model.graph.registry.get("onnx.MatMul"))


def test_cache_drops_least_recently_used_past_capacity():
    answers = infer.AnswerCache(default_op_registry().get("onnx.Relu"), capacity=2)
    answers.put(("a",), [(None, None)])
    answers.put(("b",), [(None, None)])
    assert answers.get(("a",)) is not None
    answers.put(("c",), [(None, None)])
    assert len(answers) == 2
    assert answers.get(("b",)) is None and answers.get(("a",)) is not None and answers.get(("c",)) is not None


@pytest.mark.parametrize(
    ("left", "right"),
    [(1, True), (0.0, -0.0), (1, 1.0), ([1, 2], (1, 2)), ("1", b"1")],
)
def test_attribute_keys_tell_apart_values_python_calls_equal(left, right):
    assert infer._frozen(left) != infer._frozen(right)


def test_tensor_attributes_are_not_keyed():
    import numpy as np

    assert infer._frozen(np.zeros(2)) is infer._UNKEYABLE
    assert infer._frozen([1, np.zeros(2)]) is infer._UNKEYABLE
