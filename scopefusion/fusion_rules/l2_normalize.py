"""L2NormalizeFusion: scaling to unit L2 norm written out in ops → ``L2Normalize(x)``.

TensorFlow's ``tf.math.l2_normalize(x, axis, epsilon)`` (scope ``l2_normalize/``)::

    Mul(x, Rsqrt(Maximum(Sum(Square(x), axis), eps)))                 → L2Normalize(x, axis, epsilon=eps)

PyTorch's ``F.normalize(x, p=2, dim)`` exported to ONNX, and its hand-written variants::

    Div(x, Expand(Clip(ReduceL2(x, axes), eps), Shape(x)))            → L2Normalize(x, axes, epsilon=eps²)
    Div(x, Clip(ReduceL2(x, axes), eps))                              → L2Normalize(x, axes, epsilon=eps²)
    Div(x, Max(Sqrt(ReduceSumSquare(x, axes)), eps))                  → L2Normalize(x, axes, epsilon=eps²)

The fused op bounds the squared norm as TF does; PyTorch bounds the norm, ``max(||x||, eps)``, which is
``sqrt(max(||x||², eps²))``, so the ONNX forms fuse with ``epsilon = eps²``. Sums keep their dims
(``keep_dims`` / ``keepdims``); the axes come from the constant or the attribute (no axes at all, a
reduction over every axis, is fused only when the rank of ``x`` is known). ``Clip`` must have no upper
bound.

Candidates: every ``l2_normalize`` scope (Square=1, Rsqrt=1) and every scope with ReduceL2=1,
Clip=1, Div=1; one that computes something else is refused with the dataflow's nearest miss. The
dataflow patterns run over the whole graph, so the same subgraph without scope names fuses too.

General (on by default): the dataflow and both constants are checked, so a fusion is always the
subgraph it replaces, and the fused op saves a backend four to five element-wise ops and a reduction.
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np

from scopefusion.scope import DataflowPattern, Match, NodeOpTypeFeature, Refused, ScopeFeature, ScopeGraph, ScopePattern

from .base.constants import eps_check, int_check, read_axes
from .base.ranks import static_rank
from .base.scoped_dataflow import ScopedDataflowPass

__all__ = ["L2NormalizeFusion", "PASS"]


def _keepdims(node: Any) -> str | None:
    return None if node.attrs.get("keepdims", 1) in (1, True) else "keepdims is 0"


def _tf(op: Any, x: Any) -> Any:
    square_sum = op.Sum(op.Square(x), op.const("axes", check=int_check), _attrs={"keep_dims": True}, _name="sum")
    return op.Mul(x, op.Rsqrt(op.Maximum(square_sum, op.const("eps", check=eps_check))), _name="y")


def _norm(reduce: str, axes_input: bool) -> Callable[[Any, Any], Any]:
    def build(op: Any, x: Any) -> Any:
        args = (x, op.const("axes", check=int_check)) if axes_input else (x,)
        if reduce == "ReduceL2":
            return op.ReduceL2(*args, _check=_keepdims, _name="sum")
        return op.Sqrt(op.ReduceSumSquare(*args, _check=_keepdims, _name="sum"))

    return build


def _onnx(norm: Callable[[Any, Any], Any], clamp: str, expand: bool) -> Callable[[Any, Any], Any]:
    def pattern(op: Any, x: Any) -> Any:
        n = norm(op, x)
        eps = op.const("eps", check=eps_check)
        bounded = op.Clip(n, eps) if clamp == "Clip" else op.Max(n, eps)
        denominator = op.Expand(bounded, op.Shape(x)) if expand else bounded
        return op.Div(x, denominator, _name="y")

    return pattern


def _patterns() -> tuple[DataflowPattern, ...]:
    out = [DataflowPattern(_tf, name="tf_l2_normalize", deferred=True)]
    for reduce in ("ReduceL2", "ReduceSumSquare"):
        for axes_input in (False, True):
            for clamp in ("Clip", "Max"):
                for expand in (True, False):
                    label = f"onnx{'18' if axes_input else ''}_{reduce}_{clamp}{'_expand' if expand else ''}"
                    out.append(DataflowPattern(_onnx(_norm(reduce, axes_input), clamp, expand), name=label, deferred=True))
    return tuple(out)


PATTERNS = _patterns()

_SCOPE_PATTERNS = (
    ScopePattern(
        "l2_normalize",
        NodeOpTypeFeature("Square", 1),
        NodeOpTypeFeature("Rsqrt", 1),
        ScopeFeature("", 0, suffix="l2_normalize"),
    ),
    ScopePattern(
        "l2_normalize_onnx",
        NodeOpTypeFeature("ReduceL2", 1),
        NodeOpTypeFeature("Clip", 1),
        NodeOpTypeFeature("Div", 1),
    ),
)


class L2NormalizeFusion(ScopedDataflowPass):
    """``x / sqrt(max(sum(x²), eps))`` and PyTorch's ``x / max(||x||, eps)`` → ``L2Normalize``; see the module docstring."""

    name = "L2NormalizeFusion"
    general = True
    fused_type = "L2Normalize"
    what = "an L2 normalization"
    patterns = PATTERNS

    def define_patterns(self) -> Any:
        return _SCOPE_PATTERNS

    def required_ops(self, pattern: DataflowPattern) -> tuple[str, ...]:
        if pattern.name.startswith("tf_"):
            return ("Square",)
        return ("ReduceL2",) if "ReduceL2" in pattern.name else ("ReduceSumSquare",)

    def judge(self, graph: ScopeGraph, match: Match) -> dict[str, Any] | None:
        axes = read_axes(match, "sum", "axes")
        if axes is None:
            rank = static_rank(graph, match.inputs[0])
            if rank is None:
                raise Refused("it sums over every axis and the rank of its input is unknown")
            axes = tuple(range(rank))
        if not axes:
            raise Refused("it sums over no axis")
        eps = float(np.asarray(match.value("eps")).reshape(()))
        epsilon = eps if match.pattern.name.startswith("tf_") else eps * eps
        return {"axis": [int(a) for a in axes], "epsilon": epsilon}


PASS = L2NormalizeFusion()
