"""A changed op is the whole difference: the weights it reads, and their reads, are never reported with it."""

from __future__ import annotations

import numpy as np
import pytest

from scopefusion.testing import graph_diff
from tests.testing.ir_graphs import WIDTH, Spec, build, index_of, replace


def normalized_mlp(blocks: int) -> Spec:
    """``blocks`` of MatMul -> Norm(scale, offset, mean, variance) -> Relu on one input, every weight a
    ``ge.Const`` read through an ``Identity``; the norm weights are equal in every block (ones and zeros,
    as a model fresh from its initializers has them), so only their consumer tells them apart."""
    rng = np.random.default_rng(1)
    spec = Spec([], [])
    h = spec.add("ge.Data", attrs={"index": 0}, name="x")

    def read(value: np.ndarray) -> int:
        return spec.add("tf.Identity", spec.const(value))

    for _ in range(blocks):
        matmul = spec.add("tf.MatMul", h, read(rng.standard_normal((WIDTH, WIDTH)).astype(np.float32)))
        ones, zeros = np.ones(WIDTH, np.float32), np.zeros(WIDTH, np.float32)
        norm = spec.add("fused.BatchNorm", matmul, read(ones), read(zeros), read(zeros), read(ones), attrs={"epsilon": 1e-3})
        h = spec.add("tf.Relu", norm)
    spec.outputs = [(h, 0)]
    return spec


@pytest.fixture(scope="module")
def spec() -> Spec:
    spec = normalized_mlp(23)
    assert len(spec.ops) >= 300
    return spec


@pytest.mark.parametrize("op, nth, change", [
    ("fused.BatchNorm", 11, {"op": "fused.LayerNorm"}),
    ("fused.BatchNorm", 0, {"op": "fused.InstanceNorm"}),
    ("tf.MatMul", 17, {"op": "tf.BatchMatMulV2"}),
    ("tf.Relu", 5, {"op": "tf.Relu6"}),
])  # fmt: skip
def test_a_one_op_change_is_the_first_and_only_entry(spec, op, nth, change):
    index = index_of(spec, op, nth)
    original = build(spec)
    changed = build(spec, edit=replace([index], **change), order_seed=7)
    diff = graph_diff(changed, original)
    name_a, name_b = f"n{index}_{change['op'].split('.')[-1]}", f"n{index}_{op.split('.')[-1]}"
    assert [u.node.name for u in diff.unmatched_a] == [name_a], diff.format()
    assert [u.node.name for u in diff.unmatched_b] == [name_b], diff.format()
    assert not diff.attrs and not diff.types and not diff.interface
    assert diff.matched + 1 + diff.unlisted // 2 == len(spec.ops)
    first = diff.format().splitlines()[1]
    assert first.startswith(f"first unmatched node in a: %{name_a} = {change['op']}")


def test_a_changed_weight_is_an_attribute_difference_of_that_weight(spec):
    index = index_of(spec, "ge.Const", 30)
    value = np.array(spec.ops[index].attrs["value"], copy=True)
    value.flat[0] += 1
    diff = graph_diff(build(spec, edit=replace([index], attrs={"value": value})), build(spec))
    assert not diff.unmatched_a and not diff.unmatched_b
    assert [(d.a.name, d.name) for d in diff.attrs] == [(f"n{index}_Const", "value")]
