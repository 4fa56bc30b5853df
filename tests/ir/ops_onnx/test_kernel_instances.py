"""Reference-kernel instances reused across nodes (``kernels.REUSABLE``) give what a fresh instance gives,
and nodes whose attributes differ never share one."""

from __future__ import annotations

import numpy as np
import onnx.defs
import pytest

from scopefusion.dialects.onnx import kernels
from scopefusion.dialects.onnx.schemas import onnx_op


def op(op_type: str, opset: int = 17):
    return onnx_op(onnx.defs.get_schema(op_type, opset), opset)


CASES = [
    ("Unsqueeze", [np.array([3, 4], np.int64), np.array([0], np.int64)], {}),
    ("Concat", [np.array([1], np.int64), np.array([2, 3], np.int64)], {"axis": 0}),
    ("Gather", [np.array([5, 6, 7], np.int64), np.array(1, np.int64)], {"axis": 0}),
    ("Cast", [np.array([1.5, -2.5], np.float32)], {"to": 7}),
    ("Cast", [np.array([1.5, -2.5], np.float32)], {"to": 10}),
    ("Slice", [np.arange(6, dtype=np.int64), np.array([1], np.int64), np.array([4], np.int64)], {}),
    ("Shape", [np.zeros((2, 3, 4), np.float32)], {"start": 1}),
    ("Shape", [np.zeros((2, 3, 4), np.float32)], {"start": -1}),
]


@pytest.fixture(autouse=True)
def reference_only(monkeypatch):
    """The implementation instances are what this module checks: the numpy kernels that answer common
    inputs first (tested in test_native_kernels.py) are set aside."""
    monkeypatch.setattr(kernels, "native_outputs", lambda *args: None)


@pytest.fixture
def fresh_table(monkeypatch):
    monkeypatch.setattr(kernels, "_INSTANCES", {})
    return kernels


def fresh(op_type, inputs, attrs):
    """The result with no reuse at all."""
    saved = kernels.REUSABLE
    kernels.REUSABLE = frozenset()
    try:
        return kernels.run_reference(op(op_type), inputs, attrs)
    finally:
        kernels.REUSABLE = saved


def test_reused_instances_give_the_fresh_results(fresh_table):
    for _ in range(2):  # the second round reuses every instance
        for op_type, inputs, attrs in CASES:
            got = kernels.run_reference(op(op_type), inputs, attrs)
            want = fresh(op_type, inputs, attrs)
            assert len(got) == len(want)
            for g, w in zip(got, want):
                assert g.dtype == w.dtype and g.shape == w.shape and np.array_equal(g, w), (op_type, attrs)
    assert len(fresh_table._INSTANCES) == len(CASES), "each distinct node description has its own instance"


def test_floats_are_keyed_by_their_bits_and_tensors_are_not_keyed():
    assert kernels._exact(0.0) != kernels._exact(-0.0)
    assert kernels._exact((1, True)) != kernels._exact((1, 1))
    assert kernels._exact(np.array([1])) is None and kernels._exact((1, [2])) is None


def test_the_table_stays_bounded(fresh_table, monkeypatch):
    monkeypatch.setattr(kernels, "INSTANCES_LIMIT", 3)
    for start in range(-3, 3):
        kernels.run_reference(op("Shape"), [np.zeros((2, 3, 4), np.float32)], {"start": start})
        assert len(fresh_table._INSTANCES) <= 3
