"""``tf.clip_by_value`` and its mirror → ``Clip(x, min, max)``::

    Maximum(Minimum(x, hi), lo)   → Clip(x, min=lo, max=hi)     tf.clip_by_value
    Minimum(Maximum(x, lo), hi)   → Clip(x, min=lo, max=hi)

``Minimum`` / ``Maximum`` are also ONNX's two-input ``Min`` / ``Max``; operands in either order; the
bounds are scalar constants (through ``Identity`` reads), read into the attributes.

General (on by default): the two orders agree only when ``lo <= hi`` (with ``lo > hi`` the first gives
``lo`` everywhere, the second ``hi``), so a pair with ``lo > hi`` is refused with the reason, as are
non-scalar bounds and non-floating-point constants (the fused op's bounds are floats). Non-constant
bounds never match. A clip-named scope whose ops do not compute a clip is refused with the reason.

Candidates come from the op-type index (each ``Minimum`` / ``Min``); the pattern is anchored at it or at
the ``Maximum`` / ``Max`` that consumes it. Runs after ``HardSwishFusion``, which claims the
``Minimum(Maximum(x + 3, 0), 6)`` inside a HardSwish first.
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

__all__ = ["PASS", "ClipFusion"]

MIN = ("Minimum", "Min")
MAX = ("Maximum", "Max")


def max_of_min(op, x):
    return op.op(MAX, op.op(MIN, x, op.const("hi")), op.const("lo"), _name="out")


def min_of_max(op, x):
    return op.op(MIN, op.op(MAX, x, op.const("lo")), op.const("hi"), _name="out")


PATTERNS = (("max_of_min", DataflowPattern(max_of_min)), ("min_of_max", DataflowPattern(min_of_max)))


def bounds_reason(match: Match) -> str | None:
    """Why the matched bounds cannot make a Clip, or None."""
    lo, hi = np.asarray(match.value("lo")), np.asarray(match.value("hi"))
    for name, bound in (("lo", lo), ("hi", hi)):
        if bound.size != 1 or bound.ndim > 1:
            return f"the bound {match[name].name} has shape {bound.shape}, not a scalar"
        if bound.dtype.kind != "f":
            return f"the bound {match[name].name} is {bound.dtype}; Clip carries floating-point bounds"
    low, high = float(lo.reshape(())), float(hi.reshape(()))
    if low > high:
        return f"the lower bound {low!r} exceeds the upper bound {high!r}, where the two orders of Minimum/Maximum differ"
    return None


class ClipFusion(ScopeBasePass):
    """Fuses ``Maximum(Minimum(x, hi), lo)`` and ``Minimum(Maximum(x, lo), hi)`` into ``Clip``."""

    name = "ClipFusion"
    general = True

    # NOTE: candidates from the op-type index, not scope patterns (see GeluFusion).
    def define_patterns(self) -> list:
        return []

    def last_match_scopes_and_ops(self, graph: ScopeGraph, matches: Sequence[Any]) -> list[ScopesResult]:
        selected = []
        taken: set[str] = set()
        for op_type in MIN:
            for node in graph.nodes_by_type(op_type):
                if node.name in taken:
                    continue
                anchors = [node.name] + downstream(graph, node.name, 1, MAX)
                _, match, miss = best_match(graph, anchors, PATTERNS, node.name)
                if match is not None:
                    taken.update(match.node_names)
                    captures = {"match": match, "reason": bounds_reason(match)}
                    selected.append(ScopesResult(nodes=claimed_nodes(graph, match), captures=captures))
                elif named_like(graph.tree.scope_of(node.name).name, ("clip",)):
                    why = f"{node.name} ({op_type}) in a clip-named scope does not clip by constants: {miss}"
                    selected.append(ScopesResult(nodes=[node.name], captures={"refuse": why}))
        return selected

    def generate_fusion_result(self, scopes: Sequence[Any], result: FusionScopesResult, graph: ScopeGraph) -> None:
        if "refuse" in result.captures:
            result.invalidate(result.captures["refuse"])
            return
        match: Match = result.captures["match"]
        output = match["out"].name
        result.type = "Clip"
        result.name = fusion_name(graph, result.nodes, output)
        result.description = f"Clip ({match.pattern.name})"
        map_ports(result, graph, match)
        reason = result.captures["reason"]
        if reason is not None:
            result.invalidate(f"{output} has the dataflow of a clip but {reason}")
            return
        result.attrs["min"] = float(np.asarray(match.value("lo")).reshape(()))
        result.attrs["max"] = float(np.asarray(match.value("hi")).reshape(()))


PASS = ClipFusion()
