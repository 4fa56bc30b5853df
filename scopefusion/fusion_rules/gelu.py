"""GELU, exact (erf) or tanh-approximated, in the forms frameworks write it → ``Gelu(x)``.

Exact (``approximate="none"``)::

    Mul(Mul(x, 0.5), Add(Erf(Div(x, sqrt(2))), 1))         google-research/bert, tf.nn.gelu (TF1)
    Mul(Mul(x, Add(Erf(Div(x, 1.4142135)), 1)), 0.5)        PyTorch nn.GELU exported to ONNX
    Mul(x, Mul(0.5, Add(Erf(Mul(x, 0.7071068)), 1)))        multiplying by 1/sqrt(2)
    Mul(Mul(0.5, x), Erfc(Mul(Neg(x), 0.7071068)))          Keras 3 gelu(approximate=False) / tf.nn.gelu
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
from typing import Any, Callable, Iterable, Sequence

import numpy as np

from scopefusion.scope import (
    DataflowPattern,
    FusionScopesResult,
    Match,
    NearMiss,
    ScopeBasePass,
    ScopeGraph,
    ScopesResult,
    map_ports,
)

__all__ = ["PASS", "GeluFusion", "best_match", "claimed_nodes", "downstream", "fusion_name", "named_like"]

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

    return DataflowPattern(gelu, name=f"gelu_{term_name}_{grouping}")


PATTERNS: tuple[tuple[str, DataflowPattern], ...] = tuple(
    (TERMS[t][0], _pattern(t, g)) for t in TERMS for g in GROUPINGS
)


# ---------------------------------------------------------------------------------------- helpers
def constant_reason(match: Match) -> str | None:
    """Why the matched constants do not make a GELU, or None when each has its expected value."""
    for name, (want, what) in EXPECTED.items():
        if name not in match.captures:
            continue
        found = np.asarray(match.value(name))
        if found.size != 1 or found.ndim > 1:
            return f"{what} is {match[name].name}, a constant of shape {found.shape}, not a scalar"
        value = float(found.reshape(()))
        if not math.isclose(value, want, rel_tol=RTOL):
            return f"{what} is {value!r} ({match[name].name}), expected {want!r}"
    return None


def downstream(graph: ScopeGraph, name: str, hops: int, op_types: Sequence[str]) -> list[str]:
    """Nodes of ``op_types`` reached from ``name`` along data edges in at most ``hops`` steps, farthest first."""
    seen: dict[str, int] = {}
    frontier = [name]
    for depth in range(1, hops + 1):
        following = []
        for node in frontier:
            for consumer, slot, _ in graph.consumers(node):
                if slot >= 0 and consumer not in seen:
                    seen[consumer] = depth
                    following.append(consumer)
        frontier = following
    hits = [n for n in seen if graph.node(n).op_type in op_types]
    return sorted(hits, key=lambda n: (-seen[n], graph.position(n)))


def claimed_nodes(graph: ScopeGraph, match: Match) -> list[str]:
    """The matched op nodes plus the constants (and their Identity reads) that only they consume."""
    claimed = dict.fromkeys(match.node_names)
    for chain in match.constants:
        for node in chain:
            if node.name in claimed:
                continue
            if all(consumer in claimed for consumer, _, _ in graph.consumers(node.name)):
                claimed[node.name] = None
            else:
                break
    return list(claimed)


def fusion_name(graph: ScopeGraph, claimed: Iterable[str], output: str) -> str:
    """The name of the innermost scope holding every claimed node when the fusion replaces all of that
    scope (and no other node has the name), else the output node's name."""
    claimed = set(claimed)
    tree = graph.tree
    scopes = {tree.scope_of(n).name: tree.scope_of(n) for n in claimed}.values()
    common = tree.scope_of(output)
    while not common.is_root and not all(common.contains(s) for s in scopes):
        common = common.parent
    if common.is_root or not all(node.name in claimed for node in common.all_nodes):
        return output
    name = common.name.rstrip("/")
    return name if graph.get(name) is None or name in claimed else output


def best_match(
    graph: ScopeGraph,
    anchors: Sequence[str],
    patterns: Sequence[tuple[Any, DataflowPattern]],
    must_hold: str | None = None,
    accept: Callable[[Match], bool] | None = None,
) -> tuple[Any, Match | None, NearMiss | None]:
    """``(tag, match, None)`` for the largest match over ``anchors`` x ``patterns`` that binds op node
    ``must_hold`` and that ``accept`` takes; else ``(None, None, deepest near miss)``."""
    best: tuple[Any, Match] | None = None
    miss: NearMiss | None = None
    for anchor in anchors:
        for tag, pattern in patterns:
            if graph.node(anchor).op_type not in pattern.anchor_types:
                continue
            found = pattern.match_at(graph, anchor)
            if isinstance(found, Match):
                wanted = (must_hold is None or must_hold in found.node_names) and (accept is None or accept(found))
                if wanted and (best is None or len(found.nodes) > len(best[1].nodes)):
                    best = (tag, found)
            elif miss is None or found.depth > miss.depth:
                miss = found
    if best is None:
        return None, None, miss
    return best[0], best[1], None


def named_like(scope_name: str, words: Sequence[str]) -> bool:
    last = scope_name.rstrip("/").rsplit("/", 1)[-1].lower()
    return any(w in last for w in words)


# ---------------------------------------------------------------------------------------- the pass
class GeluFusion(ScopeBasePass):
    """Fuses exact and tanh-approximated GELUs into ``Gelu``; see the module docstring."""

    name = "GeluFusion"
    general = True

    # NOTE: no scope patterns: a ScopeBasePass whose patterns match no scope never reaches
    # last_match_scopes_and_ops, and GELUs must fuse in graphs without scope names too. Candidates
    # come from the op-type index instead; scope names only decide which failures are worth reporting.
    def define_patterns(self) -> list:
        return []

    def last_match_scopes_and_ops(self, graph: ScopeGraph, matches: Sequence[Any]) -> list[ScopesResult]:
        selected: list[ScopesResult] = []
        taken: set[str] = set()
        for op_type in NONLINEAR:
            for node in graph.nodes_by_type(op_type):
                if node.name in taken:
                    continue
                anchors = downstream(graph, node.name, 3, ("Mul",))
                approximate, match, miss = best_match(graph, anchors, PATTERNS, node.name)
                if match is not None:
                    taken.update(match.node_names)
                    reason = constant_reason(match)
                    captures = {"match": match, "approximate": approximate, "reason": reason}
                    selected.append(ScopesResult(nodes=claimed_nodes(graph, match), captures=captures))
                elif named_like(graph.tree.scope_of(node.name).name, ("gelu",)):
                    why = f"{node.name} ({op_type}) in a GELU-named scope does not compute a GELU: " + (
                        str(miss) if miss is not None else "no Mul follows it"
                    )
                    selected.append(ScopesResult(nodes=[node.name], captures={"refuse": why}))
        return selected

    def generate_fusion_result(self, scopes: Sequence[Any], result: FusionScopesResult, graph: ScopeGraph) -> None:
        if "refuse" in result.captures:
            result.invalidate(result.captures["refuse"])
            return
        match: Match = result.captures["match"]
        output = match["out"].name
        result.type = "Gelu"
        result.name = fusion_name(graph, result.nodes, output)
        result.description = f"GELU ({match.pattern.name})"
        result.attrs["approximate"] = result.captures["approximate"]
        map_ports(result, graph, match)
        if result.captures["reason"] is not None:
            result.invalidate(f"{output} has the dataflow of a GELU but {result.captures['reason']}")


PASS = GeluFusion()
