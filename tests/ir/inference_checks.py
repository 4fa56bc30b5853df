"""Shared checks of the inference tests: fixed input shapes, inference from scratch on a clone, and the
comparison of two inference results value by value."""

from __future__ import annotations

import numpy as np

from scopefusion.ir.graph import Graph
from scopefusion.ir.types import TensorType
from scopefusion.ir_builder.profiles import input_name
from scopefusion.ir_builder.shape_inference import InferenceResult, infer_graph


def fixed_shapes(graph: Graph) -> dict[str, list[int]]:
    """Every graph input with a known rank, its unknown dims set to 2."""
    out = {}
    for value in graph.inputs:
        t = value.type
        if isinstance(t, TensorType) and t.rank is not None:
            out[input_name(value)] = [2 if d < 0 else d for d in t.shape]
    return out


def from_scratch(graph: Graph, shapes: dict[str, list[int]]) -> tuple[Graph, InferenceResult]:
    """A clone of ``graph`` with ``shapes`` on its inputs, inferred from nothing."""
    clone = graph.clone()
    for value in clone.inputs:
        name = input_name(value)
        if name in shapes:
            t = value.type
            value.type = clone.context.tensor(t.element, tuple(shapes[name]), t.format)
    return clone, infer_graph(clone)


def assert_same_values(got: Graph, got_result: InferenceResult, want: Graph, want_result: InferenceResult) -> None:
    """Every value has the same (interned) type and known array, and the results count the same
    folds, unfolded notes, dynamic and uninferred values."""
    for value, expected in zip(got.values(), want.values(), strict=True):
        assert value.type is expected.type, f"{value.ref}: {value.type} != {expected.type}"
        known, expected_known = got_result.known(value), want_result.known(expected)
        assert (known is None) == (expected_known is None), value.ref
        if known is not None:
            assert known.dtype == expected_known.dtype and known.shape == expected_known.shape, value.ref
            assert np.array_equal(known, expected_known, equal_nan=known.dtype.kind in "fc"), value.ref
    assert got_result.folded == want_result.folded
    assert got_result.unfolded == want_result.unfolded
    assert got_result.dynamic_values == want_result.dynamic_values
    assert got_result.uninferred == want_result.uninferred
