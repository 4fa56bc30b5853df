"""GELU, exact (erf) or tanh-approximated, in the forms frameworks write it → ``Gelu(x)``.

Exact (``approximate="none"``)::

    Mul(Mul(x, 0.5), Add(Erf(Div(x, sqrt(2))), 1))         google-research/bert, tf.nn.gelu (TF1)
    Mul(Mul(x, Add(Erf(Div(x, 1.4142135)), 1)), 0.5)        PyTorch nn.GELU exported to ONNX
    Mul(x, Mul(0.5, Add(Erf(Mul(x, 0.7071068)), 1)))        multiplying by 1/sqrt(2)
    Mul(Mul(0.5, x), Erfc(Mul(Neg(x), 0.7071068)))          Keras 3 gelu(approximate=False) / tf.nn.gelu
    Mul(Mul(0.5, x), Sub(1, Erf(Mul(Neg(x), 0.7071068))))   the same through tf2onnx (Erfc = 1 - Erf)
        → Gelu(x, approximate="none")

Tanh approximation (``approximate="tanh"``)::

    Mul(Mul(0.5, x), Add(1, Tanh(Mul(sqrt(2/pi), Add(x, Mul(0.044715, Pow(x, 3)))))))
        (x^3 also as Mul(x, Mul(x, x)): PyTorch's GELU(approximate="tanh") export)
        → Gelu(x, approximate="tanh")

The three factors ``x``, ``0.5`` and ``1 + erf(...)`` match in any grouping, operands of ``Add`` / ``Mul``
in either order, ``sqrt(2)`` also as ``Sqrt(2)``, and constants through ``Identity`` reads.

General (on by default): the rule fuses only what its dataflow proves to be a GELU, and every constant
is checked by value (``0.5``, ``1``, ``sqrt(2)`` or ``1/sqrt(2)``, ``sqrt(2/pi)``, ``0.044715``, ``3``,
within a relative 1e-5), so no model that computes anything else is changed. A structure that matches
with a wrong constant, and a GELU-named scope whose ops do not compute a GELU, are refused with the
reason.

Candidates come from the op-type index (each ``Erf`` / ``Erfc`` / ``Tanh`` node, the node-level
``NodeOpTypeFeature``); the patterns are anchored at the ``Mul`` nodes at most three edges after it, so
graphs without scope names fuse the same way as named ones. The fusion takes the name of the scope
whose ops it replaces entirely (Keras' ``.../Gelu``), else of its output node.
"""

from __future__ import annotations

import math
from typing import Any, Callable

from scopefusion.fusion_rules.base.anchored import AnchoredDataflowPass, downstream, scalar_constants_reason
from scopefusion.scope import DataflowPattern, FusionScopesResult, Match, ScopeGraph

__all__ = ["PASS", "GeluFusion"]

ADD = ("Add", "AddV2")
DIV = ("RealDiv", "Div")
NONLINEAR = ("Erf", "Erfc", "Tanh")

# Constant name -> (expected value, what it is); every captured constant is checked by value.
EXPECTED: dict[str, tuple[float, str]] = {
    "half": (0.5, "the factor 0.5"),
    "one": (1.0, "the 1 added to erf/tanh"),
    "sqrt2": (math.sqrt(2.0), "the divisor sqrt(2)"),
    "two": (2.0, "the 2 under the square root of the divisor"),
    "inv_sqrt2": (1.0 / math.sqrt(2.0), "the factor 1/sqrt(2)"),
    "neg_inv_sqrt2": (-1.0 / math.sqrt(2.0), "the factor -1/sqrt(2)"),
    "beta": (math.sqrt(2.0 / math.pi), "the factor sqrt(2/pi)"),
    "kappa": (0.044715, "the cubic coefficient 0.044715"),
    "three": (3.0, "the exponent 3"),
}
RTOL = 1e-5


# ---------------------------------------------------------------------------------------- patterns
def _erf_div(op, x):
    return op.op(ADD, op.Erf(op.op(DIV, x, op.const("sqrt2"))), op.const("one"))


def _erf_div_sqrt(op, x):
    return op.op(ADD, op.Erf(op.op(DIV, x, op.Sqrt(op.const("two")))), op.const("one"))


def _erf_mul(op, x):
    return op.op(ADD, op.Erf(op.Mul(x, op.const("inv_sqrt2"))), op.const("one"))


def _erfc_neg(op, x):
    return op.Erfc(op.Mul(op.Neg(x), op.const("inv_sqrt2")))


def _erfc_mul(op, x):
    return op.Erfc(op.Mul(x, op.const("neg_inv_sqrt2")))


def _one_minus_erf_neg(op, x):
    """``Erfc(z)`` as ``1 - Erf(z)``: how tf2onnx writes Keras' exact GELU when ``Erfc`` is converted."""
    return op.Sub(op.const("one"), op.Erf(op.Mul(op.Neg(x), op.const("inv_sqrt2"))))


def _one_minus_erf_mul(op, x):
    return op.Sub(op.const("one"), op.Erf(op.Mul(x, op.const("neg_inv_sqrt2"))))


def _tanh(cube: Callable[[Any, Any], Any]) -> Callable[[Any, Any], Any]:
    def term(op, x):
        inner = op.Mul(op.const("beta"), op.op(ADD, x, op.Mul(op.const("kappa"), cube(op, x))))
        return op.op(ADD, op.Tanh(inner), op.const("one"))

    return term


def _pow3(op, x):
    return op.Pow(x, op.const("three"))


def _cube_right(op, x):
    return op.Mul(x, op.Mul(x, x))


def _cube_left(op, x):
    return op.Mul(op.Mul(x, x), x)


# Term name -> (approximation, builder of "1 + erf(...)" or its equivalent).
TERMS: dict[str, tuple[str, Callable[[Any, Any], Any]]] = {
    "erf_div": ("none", _erf_div),
    "erf_div_sqrt": ("none", _erf_div_sqrt),
    "erf_mul": ("none", _erf_mul),
    "erfc_neg": ("none", _erfc_neg),
    "erfc_mul": ("none", _erfc_mul),
    "one_minus_erf_neg": ("none", _one_minus_erf_neg),
    "one_minus_erf_mul": ("none", _one_minus_erf_mul),
    "tanh_pow": ("tanh", _tanh(_pow3)),
    "tanh_cube": ("tanh", _tanh(_cube_right)),
    "tanh_cube_left": ("tanh", _tanh(_cube_left)),
}

# The three groupings of the product x * 0.5 * term.
GROUPINGS: dict[str, Callable[[Any, Any, Any], Any]] = {
    "x_half": lambda op, x, t: op.Mul(op.Mul(x, op.const("half")), t, _name="out"),
    "x_term": lambda op, x, t: op.Mul(op.Mul(x, t), op.const("half"), _name="out"),
    "half_term": lambda op, x, t: op.Mul(x, op.Mul(op.const("half"), t), _name="out"),
}


def _pattern(term_name: str, grouping: str) -> DataflowPattern:
    _, term = TERMS[term_name]
    group = GROUPINGS[grouping]

    def gelu(op, x):
        return group(op, x, term(op, x))

    return DataflowPattern(gelu, name=f"gelu_{term_name}_{grouping}", deferred=True)


PATTERNS: tuple[tuple[str, DataflowPattern], ...] = tuple(
    (TERMS[t][0], _pattern(t, g)) for t in TERMS for g in GROUPINGS
)


# ---------------------------------------------------------------------------------------- helpers
def constant_reason(match: Match) -> str | None:
    """Why the matched constants do not make a GELU, or None when each has its expected value."""
    return scalar_constants_reason(match, EXPECTED, RTOL)


# ---------------------------------------------------------------------------------------- the pass
class GeluFusion(AnchoredDataflowPass):
    """Fuses exact and tanh-approximated GELUs into ``Gelu``; see the module docstring."""

    name = "GeluFusion"
    fused_type = "Gelu"
    what = "GELU"
    seed_types = NONLINEAR
    scope_words = ("gelu",)
    patterns = PATTERNS
    no_match = "no Mul follows it"

    def anchors(self, graph: ScopeGraph, seed: str) -> list[str]:
        return downstream(graph, seed, 3, ("Mul",))

    def parameters(self, match: Match, tag: Any, result: FusionScopesResult) -> str | None:
        result.attrs["approximate"] = tag
        return constant_reason(match)


PASS = GeluFusion()
