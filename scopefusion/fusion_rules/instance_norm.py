"""InstanceNormFusion: instance normalization written out in ops → ``InstanceNorm(x, gamma, beta)``.

Moments over the spatial axes of an NHWC tensor (``tf.nn.moments(x, [1, 2], keepdims=True)``, rank 4),
then the normalization in any of the forms LayerNormFusion reads::

    mean = Mean(x, [1, 2])                   var = Mean(SquaredDifference(x, StopGradient(mean)), [1, 2])
    inv  = Mul(Rsqrt(AddV2(var, eps)), gamma)
    AddV2(Mul(x, inv), Sub(beta, Mul(mean, inv)))                      → InstanceNorm(x, gamma, beta)
    AddV2(Mul(x, inv), AddV2(Mul(Neg(mean), inv), beta))              → InstanceNorm(x, gamma, beta)
    AddV2(Mul(RealDiv(Sub(x, mean), Sqrt(AddV2(var, eps))), gamma), beta) → InstanceNorm(x, gamma, beta)
    AddV2(Mul(Mul(Sub(x, mean), Rsqrt(AddV2(var, eps))), gamma), beta)    → InstanceNorm(x, gamma, beta)

Attributes read from the graph: ``epsilon`` and ``data_format="NHWC"``. The rank of ``x`` must be known
from the graph (a Conv2D, a pooling, an input with a shape...) to be 4, and the mean and the variance
must both reduce over exactly [1, 2]; a constant gamma or beta must hold one value per channel
([C] or [1, 1, 1, C]). Moments over other axes are left to LayerNormFusion (which refuses what is
neither).

Candidates: the parent of every ``moments`` scope, as CANN's ScopeInstanceNormPass pairs ``instancenorm``
and ``moments``; a candidate named like an instance norm (``instance_norm``, ``InstanceNorm``...) that
computes something else is refused with the dataflow's nearest miss. The dataflow patterns run over
the whole graph, so the same subgraph without scope names fuses too.

General (on by default): CANN's ScopeInstanceNormPass is not, because it trusts names; here the dataflow,
the rank and the axes are all checked, so a fusion is always the subgraph it replaces.

NOTE: an NCHW instance norm reduces over [2, 3], the trailing axes of a rank-4 tensor; LayerNormFusion
fuses that as ``LayerNorm(begin_norm_axis=-2)`` with per-channel gamma and beta, which computes the same.
"""

from __future__ import annotations

from typing import Any

from scopefusion.scope import (
    DataflowPattern,
    Match,
    NodeOpTypeFeature,
    Refused,
    Scope,
    ScopeFeature,
    ScopeGraph,
    ScopePattern,
)

from .base.constants import const_value
from .base.ranks import normalized_axes
from .base.scoped_dataflow import ScopedDataflowPass
from .moments_patterns import MOMENTS_NORM_PATTERNS, moments_axes, moments_norm_required_ops

__all__ = ["InstanceNormFusion", "PASS"]

_SCOPE_PATTERN = ScopePattern(
    "instance_norm_moments",
    NodeOpTypeFeature("Mean", 2),
    NodeOpTypeFeature("SquaredDifference", 1),
    ScopeFeature("", 0, suffix="moments"),
)


class InstanceNormFusion(ScopedDataflowPass):
    """``moments`` over [1, 2] of an NHWC tensor + normalize → ``InstanceNorm``; see the module docstring."""

    name = "InstanceNormFusion"
    general = True
    fused_type = "InstanceNorm"
    what = "an instance norm"
    patterns = MOMENTS_NORM_PATTERNS

    def define_patterns(self) -> Any:
        return _SCOPE_PATTERN

    def region(self, graph: ScopeGraph, scope: Scope) -> Scope:
        return scope.parent if scope.parent is not None else scope

    def records_refusal(self, region: Scope) -> bool:
        return "instancenorm" in region.last_name.lower().replace("_", "")

    def required_ops(self, pattern: DataflowPattern) -> tuple[str, ...]:
        return moments_norm_required_ops(pattern)

    def judge(self, graph: ScopeGraph, match: Match) -> dict[str, Any] | None:
        read = moments_axes(match, graph)
        if isinstance(read, str):
            return None  # LayerNormFusion refuses it with this reason
        axes, rank = read
        if rank != 4 or normalized_axes(axes, rank) != (1, 2):
            return None  # not the spatial axes of a known rank-4 tensor: LayerNormFusion's to judge
        for port, label in ((1, "gamma"), (2, "beta")):
            value = const_value(graph, match.inputs[port])
            if value is not None and value.ndim > 1 and value.size != value.shape[-1]:
                raise Refused(f"{label} has shape {list(value.shape)}, not one value per channel")
        epsilon = float(match.value("eps").reshape(()))
        return {"data_format": "NHWC", "epsilon": epsilon}


PASS = InstanceNormFusion()
