"""Swish / SiLU → ``Swish(x, scale)``::

    Mul(x, Sigmoid(x))                   → Swish(x, scale=1)      Keras swish/silu, PyTorch SiLU export
    Mul(x, Sigmoid(Mul(x, beta)))        → Swish(x, scale=beta)   tf.nn.silu(x, beta)

Operands of ``Mul`` match in either order and ``beta`` through ``Identity`` reads. ``tf.nn.silu``'s
custom gradient leaves an ``IdentityN`` that reads ``x`` and ``beta`` as well; it stays outside and
keeps reading them.

General (on by default): the dataflow pins ``x`` as the very tensor both under the sigmoid and
multiplied by it, so gating (``x * sigmoid(g)`` with ``g`` another tensor: GLU, LSTM gates,
squeeze-and-excitation) never matches, and ``beta`` must be a scalar constant. A Swish-named scope
whose ops do not compute a Swish is refused with the reason.

Candidates come from the op-type index (each ``Sigmoid`` node); the pattern is anchored at the ``Mul``
that consumes it, so graphs without scope names fuse the same way.
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from scopefusion.fusion_rules.gelu import best_match, claimed_nodes, downstream, fusion_name, named_like
from scopefusion.scope import (
    DataflowPattern,
    FusionScopesResult,
    Match,
    ScopeBasePass,
    ScopeGraph,
    ScopesResult,
    map_ports,
)

__all__ = ["PASS", "SwishFusion"]


def silu(op, x):
    return op.Mul(x, op.Sigmoid(x), _name="out")


def swish_beta(op, x):
    return op.Mul(x, op.Sigmoid(op.Mul(x, op.const("beta"))), _name="out")


PATTERNS = (("silu", DataflowPattern(silu)), ("beta", DataflowPattern(swish_beta)))


class SwishFusion(ScopeBasePass):
    """Fuses ``x * sigmoid(beta * x)`` into ``Swish``; see the module docstring."""

    name = "SwishFusion"
    general = True

    # NOTE: candidates from the op-type index, not scope patterns (see GeluFusion).
    def define_patterns(self) -> list:
        return []

    def last_match_scopes_and_ops(self, graph: ScopeGraph, matches: Sequence[Any]) -> list[ScopesResult]:
        selected = []
        for node in graph.nodes_by_type("Sigmoid"):
            anchors = downstream(graph, node.name, 1, ("Mul",))
            _, match, miss = best_match(graph, anchors, PATTERNS, node.name)
            if match is not None:
                selected.append(ScopesResult(nodes=claimed_nodes(graph, match), captures={"match": match}))
            elif named_like(graph.tree.scope_of(node.name).name, ("swish", "silu")):
                why = f"{node.name} (Sigmoid) in a Swish-named scope does not compute a Swish: " + (
                    str(miss) if miss is not None else "no Mul consumes it"
                )
                selected.append(ScopesResult(nodes=[node.name], captures={"refuse": why}))
        return selected

    def generate_fusion_result(self, scopes: Sequence[Any], result: FusionScopesResult, graph: ScopeGraph) -> None:
        if "refuse" in result.captures:
            result.invalidate(result.captures["refuse"])
            return
        match: Match = result.captures["match"]
        output = match["out"].name
        result.type = "Swish"
        result.name = fusion_name(graph, result.nodes, output)
        result.description = f"Swish ({match.pattern.name})"
        map_ports(result, graph, match)
        scale = 1.0
        if "beta" in match.captures:
            beta = np.asarray(match.value("beta"))
            if beta.size != 1 or beta.ndim > 1:
                result.invalidate(f"{output}: the sigmoid's factor {match['beta'].name} has shape {beta.shape}, not a scalar")
                return
            scale = float(beta.reshape(()))
        result.attrs["scale"] = scale


PASS = SwishFusion()
