"""A fusion result's op type must be defined: the fused dialect of the conversion's op registry."""

from __future__ import annotations

import pytest

from scopefusion.dialects import default_op_registry
from scopefusion.scope import (
    KnownOpTypes,
    NodeOpTypeFeature,
    PassManager,
    PassRegistry,
    ScopeGraph,
    ScopePattern,
    scope_rule,
)


@pytest.fixture
def graph(mk):
    nodes = [mk.node("x", "Placeholder")]
    nodes += mk.ops(("block/relu", "Relu", "x"), ("y", "Neg", "block/relu"))
    return ScopeGraph.build(mk.graph(*nodes))


def _rule(op_type):
    @scope_rule(ScopePattern("block", NodeOpTypeFeature("Relu", 1)), name="Typo", type=op_type, general=True)
    def rule(scope, result, graph):
        result.insert_inputs("relu", [0])
        result.insert_outputs("relu", [0])

    registry = PassRegistry()
    registry.register(rule)
    return registry


def test_a_misspelled_fused_type_is_refused_with_the_nearest_known_names(graph):
    report = PassManager(_rule("Swishh"), ops=default_op_registry()).run(graph)
    assert report.accepted == []
    reason = report.refused[0].reason
    assert reason.startswith("unknown fused op type 'Swishh'; did you mean 'Swish'")
    assert "define the op" in reason


def test_reluu_is_refused_and_a_defined_type_is_accepted(graph):
    ops = default_op_registry()
    refused = PassManager(_rule("Reluu"), ops=ops).run(graph)
    assert refused.accepted == [] and "unknown fused op type 'Reluu'" in refused.refused[0].reason
    accepted = PassManager(_rule("Gelu"), ops=ops).run(graph)
    assert [a.op_type for a in accepted.accepted] == ["Gelu"] and accepted.refused == []


def test_a_bare_manager_without_op_types_accepts_any_type(graph):
    assert [a.op_type for a in PassManager(_rule("Reluu")).run(graph).accepted] == ["Reluu"]


def test_catalog_from_plain_names():
    known = KnownOpTypes(["LayerNorm", "Gelu"], ["Relu"])
    assert known.fused_refusal("Gelu") is None
    assert known.fused_refusal("Relu").startswith("unknown fused op type 'Relu'")
    assert known.inner_refusal("a", "Relu") is None
    assert "neither a fused op type nor an op of the model's framework" in known.inner_refusal("a", "Relux")
    assert "no op types are defined" in KnownOpTypes([]).fused_refusal("X")
