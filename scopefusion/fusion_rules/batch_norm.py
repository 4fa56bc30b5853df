"""BatchNormFusion: ``tf.nn.batch_normalization`` with constant statistics → ``BatchNorm(x, scale, offset, mean, variance)``.

Batch normalization in inference form written out in ops (Keras 3's BatchNormalization at inference,
or ``tf.nn.batch_normalization`` with frozen moving statistics; not the FusedBatchNorm kernel)::

    inv = Mul(Rsqrt(AddV2(variance, eps)), scale)
    AddV2(Mul(x, inv), Sub(offset, Mul(mean, inv)))                → BatchNorm(x, scale, offset, mean, variance)
    AddV2(Mul(x, inv), AddV2(Mul(Neg(mean), inv), offset))        → BatchNorm(x, scale, offset, mean, variance)
    AddV2(Mul(RealDiv(Sub(x, mean), Sqrt(AddV2(variance, eps))), scale), offset) → BatchNorm(...)
    AddV2(Mul(Mul(Sub(x, mean), Rsqrt(AddV2(variance, eps))), scale), offset)    → BatchNorm(...)

``mean`` and ``variance`` must be constants (read through Identity / Reshape / ExpandDims / Squeeze / Cast);
when the mean is computed (a ``Mean`` of moments) the subgraph is a layer or instance norm and is left to
those rules; any other computed statistic is refused. The variance is the first operand of the ``eps``
addition, as TF writes it, so the two are never confused. Attributes: ``epsilon``, ``is_training=False``
and ``data_format``: ``"NCHW"`` when the statistics are shaped to broadcast along axis 1 ([C, 1, 1],
[1, C, 1, 1]), else ``"NHWC"``.

Candidates: every ``batchnorm`` scope (Rsqrt=1, no Mean) that is not the second half of a layer norm
(its parent has no ``moments`` scope); one that computes something else is refused with the dataflow's
nearest miss. The dataflow patterns run over the whole graph, so the same subgraph without scope names
fuses too.

General (on by default): the statistics, epsilon and wiring are all read from the graph, so the fused
op is always the subgraph it replaces, and Keras 3 writes every BatchNormalization out this way: one
BatchNorm per layer (which a backend can fold into the convolution before it) instead of seven
element-wise ops. A batch normalization without scale or offset is not fused.
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

from .base.constants import ADD, DIV, const_value, eps_check
from .base.scoped_dataflow import ScopedDataflowPass

__all__ = ["BatchNormFusion", "PASS"]


def _var_eps(op: Any, variance: Any) -> Any:
    return op.op(ADD, variance, op.const("eps", check=eps_check), _commute=False)


def _batchnorm(op: Any, x: Any, scale: Any, offset: Any, mean: Any, variance: Any) -> Any:
    inv = op.Mul(op.Rsqrt(_var_eps(op, variance)), scale)
    return op.op(ADD, op.Mul(x, inv), op.Sub(offset, op.Mul(mean, inv)), _name="y")


def _keras(op: Any, x: Any, scale: Any, offset: Any, mean: Any, variance: Any) -> Any:
    inv = op.Mul(op.Rsqrt(_var_eps(op, variance)), scale)
    return op.op(ADD, op.Mul(x, inv), op.op(ADD, op.Mul(op.Neg(mean), inv), offset), _name="y")


def _div(op: Any, x: Any, scale: Any, offset: Any, mean: Any, variance: Any) -> Any:
    normed = op.op(DIV, op.Sub(x, mean), op.Sqrt(_var_eps(op, variance)))
    return op.op(ADD, op.Mul(normed, scale), offset, _name="y")


def _rsqrt(op: Any, x: Any, scale: Any, offset: Any, mean: Any, variance: Any) -> Any:
    normed = op.Mul(op.Sub(x, mean), op.Rsqrt(_var_eps(op, variance)))
    return op.op(ADD, op.Mul(normed, scale), offset, _name="y")


PATTERNS = tuple(
    DataflowPattern(fn, name=f"batch_norm_{label}", deferred=True)
    for label, fn in (("batchnorm", _batchnorm), ("keras", _keras), ("div", _div), ("rsqrt", _rsqrt))
)

_COMPUTED_MEAN = frozenset({"Mean", "ReduceMean"})

_SCOPE_PATTERN = ScopePattern(
    "batch_norm",
    NodeOpTypeFeature("Rsqrt", 1),
    NodeOpTypeFeature("Mean", -1),
    ScopeFeature("", 0, suffix="batchnorm"),
)


class BatchNormFusion(ScopedDataflowPass):
    """Inference batch normalization with constant statistics → ``BatchNorm``; see the module docstring."""

    name = "BatchNormFusion"
    general = True
    fused_type = "BatchNorm"
    what = "a batch norm"
    patterns = PATTERNS

    def define_patterns(self) -> Any:
        return _SCOPE_PATTERN

    def records_refusal(self, region: Scope) -> bool:
        parent = region.parent
        return parent is None or not any(child.last_name == "moments" for child in parent.children)

    def required_ops(self, pattern: DataflowPattern) -> tuple[str, ...]:
        return ("Sqrt",) if pattern.name == "batch_norm_div" else ("Rsqrt",)

    def judge(self, graph: ScopeGraph, match: Match) -> dict[str, Any] | None:
        x, scale, offset, mean_tensor, variance_tensor = match.inputs
        producer = graph.node(mean_tensor[0])
        if producer.op_type in _COMPUTED_MEAN or (producer.op_type == "StopGradient" and producer.inputs
                                                  and graph.node(producer.inputs[0][0]).op_type in _COMPUTED_MEAN):
            return None  # moments: a layer or instance norm
        mean = const_value(graph, mean_tensor)
        variance = const_value(graph, variance_tensor)
        if mean is None or variance is None:
            which = "mean" if mean is None else "variance"
            raise Refused(f"the {which} is computed ({graph.node((mean_tensor if mean is None else variance_tensor)[0]).op_type}), not a constant")
        epsilon = float(np.asarray(match.value("eps")).item())  # one element: eps_check held
        return {"epsilon": epsilon, "data_format": _data_format(mean.shape), "is_training": False}


def _data_format(shape: tuple[int, ...]) -> str:
    """``NCHW`` when the statistics broadcast along axis 1 of x ([C, 1, 1], [1, C, 1, 1]), else ``NHWC``."""
    wide = [i for i, d in enumerate(shape) if d != 1]
    if len(shape) >= 2 and len(wide) == 1 and wide[0] != len(shape) - 1:
        return "NCHW"
    return "NHWC"


PASS = BatchNormFusion()
