"""LayerNormFusion: layer normalization written out in ops → ``LayerNorm(x, gamma, beta)``.

TF1 / BERT (``tf.nn.moments`` + ``tf.nn.batch_normalization``, scopes ``LayerNorm/moments/`` and
``LayerNorm/batchnorm/``)::

    mean = Mean(x, axes)                     var = Mean(SquaredDifference(x, StopGradient(mean)), axes)
    inv  = Mul(Rsqrt(AddV2(var, eps)), gamma)
    AddV2(Mul(x, inv), Sub(beta, Mul(mean, inv)))                     → LayerNorm(x, gamma, beta)

Keras 3 ``LayerNormalization`` (frozen; gamma and beta read through a Reshape)::

    AddV2(Mul(x, inv), AddV2(Mul(Neg(mean), inv), beta))             → LayerNorm(x, gamma, beta)

Hand-written, and the PyTorch ONNX export below opset 17 (``/encoder/layers.0/norm1/...``)::

    d = Sub(x, ReduceMean(x, axes))          var = ReduceMean(Pow(d, 2), axes)
    Add(Mul(Div(d, Sqrt(Add(var, eps))), gamma), beta)               → LayerNorm(x, gamma, beta)
    Add(Mul(Mul(d, Rsqrt(Add(var, eps))), gamma), beta)              → LayerNorm(x, gamma, beta)

and ONNX's own ``LayerNormalization(x, gamma, beta)`` (PyTorch at opset 17+) → ``LayerNorm(x, gamma, beta)``.

Attributes read from the graph: ``epsilon`` (the constant added to the variance) and ``begin_norm_axis``
(``-k`` for a reduction over the last ``k`` axes; positive axes are accepted when the rank of ``x`` is known
from the graph). The mean and the variance must use the same axes, and those must be the trailing axes:
a moments-normalization over the spatial axes [1, 2] of a rank-4 tensor is left to InstanceNormFusion,
anything else is refused with the reason. The fused op has one output; a layer norm whose mean, variance
or any other intermediate is read outside it is refused by validation. A layer norm without gamma or
beta (Keras ``scale=False`` / ``center=False``) is not fused.

Candidates: every ``moments`` scope (Mean=2, SquaredDifference=1) names its parent as a layer norm
candidate (``.../LayerNorm/``, Keras's ``layer_normalization/``), and every scope with ReduceMean=2, Sqrt=1,
Div=1 is one (ONNX). The dataflow patterns run once over the whole graph (anchors come from the op-type
index), so a graph without scope names fuses too; a match inside a candidate is named after it, as CANN
names its LayerNorm, and a candidate with no match inside is refused with the nearest miss of the pattern
that came closest (the scope is named like a layer norm but computes something else).

General (on by default), as CANN's ScopeLayerNormPass is: unlike CANN's, which trusts the names, every
fusion here is confirmed by dataflow with its parameters read from the constants, so a fusion is always
numerically the subgraph it replaces.

The shared base :class:`~scopefusion.fusion_rules.base.scoped_dataflow.ScopedDataflowPass` finds the
matches and names them; the moments patterns are in :mod:`~scopefusion.fusion_rules.moments_patterns`.
"""

from __future__ import annotations

from typing import Any

import numpy as np

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

from .base.ranks import normalized_axes
from .base.scoped_dataflow import ScopedDataflowPass
from .moments_patterns import MOMENTS_NORM_PATTERNS, ONNX_LAYER_NORM, moments_axes, moments_norm_required_ops

__all__ = ["LayerNormFusion", "PASS"]


_SCOPE_PATTERNS = (
    ScopePattern(
        "layer_norm_moments",
        NodeOpTypeFeature("Mean", 2),
        NodeOpTypeFeature("SquaredDifference", 1),
        ScopeFeature("", 0, suffix="moments"),
    ),
    ScopePattern(
        "layer_norm_onnx",
        NodeOpTypeFeature("ReduceMean", 2),
        NodeOpTypeFeature("Sqrt", 1),
        NodeOpTypeFeature("Div", 1),
    ),
)


class LayerNormFusion(ScopedDataflowPass):
    """``moments`` + normalize over the trailing axes → ``LayerNorm(x, gamma, beta)``; see the module docstring."""

    name = "LayerNormFusion"
    general = True
    fused_type = "LayerNorm"
    what = "a layer norm"
    patterns = MOMENTS_NORM_PATTERNS + (ONNX_LAYER_NORM,)

    def define_patterns(self) -> Any:
        return _SCOPE_PATTERNS

    def region(self, graph: ScopeGraph, scope: Scope) -> Scope:
        if scope.last_name == "moments" and scope.parent is not None:
            return scope.parent
        return scope

    def records_refusal(self, region: Scope) -> bool:
        return "instance" not in region.last_name.lower().replace("_", "")

    def required_ops(self, pattern: DataflowPattern) -> tuple[str, ...]:
        return moments_norm_required_ops(pattern)

    def judge(self, graph: ScopeGraph, match: Match) -> dict[str, Any] | None:
        if match.pattern is ONNX_LAYER_NORM:
            node = match["y"]
            axis = int(node.attrs.get("axis", -1))
            epsilon = float(node.attrs.get("epsilon", 1e-5))
            return {"begin_norm_axis": axis, "epsilon": epsilon}
        read = moments_axes(match, graph)
        if isinstance(read, str):
            raise Refused(read)
        axes, rank = read
        epsilon = float(np.asarray(match.value("eps")).reshape(()))
        k = len(set(axes))
        if all(a < 0 for a in axes):
            if sorted(set(axes)) == list(range(-k, 0)):
                return {"begin_norm_axis": -k, "epsilon": epsilon}
            raise Refused(f"it normalizes over axes {sorted(axes)}, which are not the trailing axes")
        normal = normalized_axes(axes, rank)
        if rank is None or normal is None:
            raise Refused(f"it normalizes over axes {sorted(axes)} and the rank of its input is unknown, so "
                           "they cannot be shown to be the trailing axes")
        if list(normal) == list(range(rank - k, rank)):
            return {"begin_norm_axis": -k, "epsilon": epsilon}
        if rank == 4 and normal == (1, 2):
            return None  # the spatial axes of NHWC: an instance norm (InstanceNormFusion)
        raise Refused(f"it normalizes over axes {list(normal)} of a rank-{rank} input, which are not its trailing axes")


PASS = LayerNormFusion()
