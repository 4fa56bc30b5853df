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

from typing import Any

import numpy as np

from scopefusion.fusion_rules.base.anchored import AnchoredDataflowPass, downstream
from scopefusion.scope import DataflowPattern, FusionScopesResult, Match, NearMiss, ScopeGraph

__all__ = ["PASS", "ClipFusion"]

MIN = ("Minimum", "Min")
MAX = ("Maximum", "Max")


def max_of_min(op, x):
    return op.op(MAX, op.op(MIN, x, op.const("hi")), op.const("lo"), _name="out")


def min_of_max(op, x):
    return op.op(MIN, op.op(MAX, x, op.const("lo")), op.const("hi"), _name="out")


PATTERNS = (("max_of_min", DataflowPattern(max_of_min, deferred=True)), ("min_of_max", DataflowPattern(min_of_max, deferred=True)))


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


class ClipFusion(AnchoredDataflowPass):
    """Fuses ``Maximum(Minimum(x, hi), lo)`` and ``Minimum(Maximum(x, lo), hi)`` into ``Clip``."""

    name = "ClipFusion"
    fused_type = "Clip"
    what = "clip"
    seed_types = MIN
    scope_words = ("clip",)
    patterns = PATTERNS

    def anchors(self, graph: ScopeGraph, seed: str) -> list[str]:
        return [seed] + downstream(graph, seed, 1, MAX)

    def refusal(self, seed: str, op_type: str, miss: NearMiss | None) -> str:
        return f"{seed} ({op_type}) in a clip-named scope does not clip by constants: {miss}"

    def parameters(self, match: Match, tag: Any, result: FusionScopesResult) -> str | None:
        reason = bounds_reason(match)
        if reason is None:
            result.attrs["min"] = float(np.asarray(match.value("lo")).reshape(()))
            result.attrs["max"] = float(np.asarray(match.value("hi")).reshape(()))
        return reason


PASS = ClipFusion()
