"""HardSwish: ``x * relu6(x + 3) / 6`` in its written forms → ``HardSwish(x)``::

    Mul(x, RealDiv(Relu6(Add(x, 3)), 6))        Keras hard_swish / hard_silu
    Mul(x, Mul(Relu6(Add(x, 3)), 1/6))          x * hard_sigmoid(x) written with a factor
    RealDiv(Mul(x, Relu6(Add(x, 3))), 6)        Mul(Mul(x, Relu6(Add(x, 3))), 1/6)
    Mul(x, HardSigmoid(x, alpha=1/6, beta=0.5)) ONNX (PyTorch hardswish below opset 14)
        → HardSwish(x)

``relu6(t)`` is also matched as ``Clip(t, 0, 6)`` (ONNX), ``Minimum(Maximum(t, 0), 6)`` (either order,
``tf.clip_by_value``) and ``Minimum(Relu(t), 6)``; operands of ``Add`` / ``Mul`` / ``Minimum`` /
``Maximum`` in either order; constants through ``Identity`` reads.

General (on by default): ``x`` must be the very tensor both shifted by 3 and multiplied, which rules out
MobileNetV3's squeeze-and-excitation gate ``x * hard_sigmoid(conv(x))`` (a look-alike with the same ops),
and every constant (3, 0, 6, 1/6, HardSigmoid's alpha and beta) is checked by value. A structure that
matches with a wrong constant, and a HardSwish-named scope whose ops do not compute one, are refused
with the reason.

Candidates come from the op-type index (each ``Relu6`` / ``Clip`` / ``Minimum`` / ``HardSigmoid``);
the patterns are anchored at the ``Mul`` / ``RealDiv`` / ``Div`` at most three edges after it. Runs
before ``ClipFusion``, whose pattern the ``Minimum(Maximum(...))`` form also contains.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any, Callable

import numpy as np

from scopefusion.fusion_rules.base.anchored import AnchoredDataflowPass, downstream, scalar_constants_reason
from scopefusion.fusion_rules.base.ranks import static_rank
from scopefusion.scope import DataflowPattern, FusionScopesResult, Match, ScopeGraph

__all__ = ["PASS", "HardSwishFusion"]

ADD = ("Add", "AddV2")
DIV = ("RealDiv", "Div")
MIN = ("Minimum", "Min")
MAX = ("Maximum", "Max")
RTOL = 1e-5

EXPECTED: dict[str, tuple[float, str]] = {
    "three": (3.0, "the shift 3"),
    "zero": (0.0, "the lower bound 0 of relu6"),
    "six": (6.0, "the upper bound 6 of relu6"),
    "divisor": (6.0, "the divisor 6"),
    "sixth": (1.0 / 6.0, "the factor 1/6"),
}


def _shifted(op, x):
    return op.op(ADD, x, op.const("three"))


def _relu6(op, x):
    return op.Relu6(_shifted(op, x))


def _clip(op, x):
    return op.Clip(_shifted(op, x), op.const("zero"), op.const("six"))


def _min_max(op, x):
    return op.op(MIN, op.op(MAX, _shifted(op, x), op.const("zero")), op.const("six"))


def _max_min(op, x):
    return op.op(MAX, op.op(MIN, _shifted(op, x), op.const("six")), op.const("zero"))


def _min_relu(op, x):
    return op.op(MIN, op.Relu(_shifted(op, x)), op.const("six"))


RELU6: dict[str, Callable[[Any, Any], Any]] = {
    "relu6": _relu6,
    "clip": _clip,
    "min_max": _min_max,
    "max_min": _max_min,
    "min_relu": _min_relu,
}

GROUPINGS: dict[str, Callable[[Any, Any, Any], Any]] = {
    "x_div": lambda op, x, r: op.Mul(x, op.op(DIV, r, op.const("divisor")), _name="out"),
    "x_mul": lambda op, x, r: op.Mul(x, op.Mul(r, op.const("sixth")), _name="out"),
    "div_x": lambda op, x, r: op.op(DIV, op.Mul(x, r), op.const("divisor"), _name="out"),
    "mul_x": lambda op, x, r: op.Mul(op.Mul(x, r), op.const("sixth"), _name="out"),
}


def _pattern(relu6: str, grouping: str) -> DataflowPattern:
    r, g = RELU6[relu6], GROUPINGS[grouping]

    def hard_swish(op, x):
        return g(op, x, r(op, x))

    return DataflowPattern(hard_swish, name=f"hard_swish_{relu6}_{grouping}", deferred=True)


def hard_sigmoid_x(op, x):
    return op.Mul(x, op.HardSigmoid(x, _name="hard_sigmoid"), _name="out")


PATTERNS: tuple[tuple[str, DataflowPattern], ...] = tuple(
    (r, _pattern(r, g)) for r in RELU6 for g in GROUPINGS
) + (("hard_sigmoid", DataflowPattern(hard_sigmoid_x, deferred=True)),)

CANDIDATE_TYPES = ("Relu6", "Clip", "Minimum", "Min", "HardSigmoid")
ANCHOR_TYPES = ("Mul", "RealDiv", "Div")


def constant_reason(match: Match) -> str | None:
    """Why the matched constants do not make a HardSwish, or None."""
    reason = scalar_constants_reason(match, EXPECTED, RTOL, abs_tol=1e-12, any_rank=True)
    if reason is not None:
        return reason
    if "hard_sigmoid" in match.captures:
        attrs = match["hard_sigmoid"].attrs
        alpha, beta = float(attrs.get("alpha", 0.2)), float(attrs.get("beta", 0.5))
        if not (math.isclose(alpha, 1.0 / 6.0, rel_tol=RTOL) and math.isclose(beta, 0.5, rel_tol=RTOL)):
            return f"HardSigmoid has alpha={alpha!r}, beta={beta!r}, expected alpha=1/6, beta=0.5"
    return None


class HardSwishFusion(AnchoredDataflowPass):
    """Fuses ``x * relu6(x + 3) / 6`` into ``HardSwish``; see the module docstring."""

    name = "HardSwishFusion"
    fused_type = "HardSwish"
    what = "HardSwish"
    seed_types = CANDIDATE_TYPES
    scope_words = ("hard_swish", "hardswish", "hard_silu")
    patterns = PATTERNS
    no_match = "nothing multiplies it"

    def anchors(self, graph: ScopeGraph, seed: str) -> list[str]:
        return downstream(graph, seed, 3, ANCHOR_TYPES)

    def parameters(self, match: Match, tag: Any, result: FusionScopesResult) -> str | None:
        return constant_reason(match)

    def generate_fusion_result(self, scopes: Sequence[Any], result: FusionScopesResult, graph: ScopeGraph) -> None:
        match = result.captures.get("match")
        if match is not None:
            ndim = max((np.ndim(match.value(n)) for n in EXPECTED if n in match.captures), default=0)
            rank = static_rank(graph, match.inputs[0]) if ndim > 1 else None
            if ndim > 1 and (rank is None or rank < ndim):
                result.invalidate(f"{match['out'].name} has the dataflow of a HardSwish but its constants of rank "
                                  f"{ndim} could broadcast its input of rank {rank} to a higher rank")
                return
        super().generate_fusion_result(scopes, result, graph)


PASS = HardSwishFusion()
