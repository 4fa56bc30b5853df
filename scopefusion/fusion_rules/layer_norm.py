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

This module also holds what the other normalization rules share: :class:`ScopedDataflowPass` (dataflow
matches over the whole graph, named and explained by scope candidates), the moments-normalization
patterns, and helpers that read axes, constants and ranks.
"""

from __future__ import annotations

import abc
from dataclasses import dataclass
from typing import Any, Callable, Sequence

import numpy as np

from scopefusion.fusion_rules.attention_shapes import shape_parts
from scopefusion.scope import (
    DataflowPattern,
    FusionScopesResult,
    Match,
    NodeOpTypeFeature,
    PatternCheck,
    Refused,
    Scope,
    ScopeBasePass,
    ScopeFeature,
    ScopeGraph,
    ScopePattern,
    ScopesResult,
    claimed_nodes,
    map_ports,
)

__all__ = [
    "ADD",
    "DIV",
    "LayerNormFusion",
    "MOMENTS_NORM_PATTERNS",
    "ONNX_LAYER_NORM",
    "PASS",
    "ScopedDataflowPass",
    "const_value",
    "eps_check",
    "int_check",
    "moments_axes",
    "moments_norm_required_ops",
    "normalized_axes",
    "read_axes",
    "static_rank",
]

ADD = ("Add", "AddV2")
DIV = ("Div", "RealDiv")


# ------------------------------------------------------------------------------------------ constants
def eps_check(array: np.ndarray) -> str | None:
    """A ConstPattern check: one finite, non-negative float."""
    if array.size != 1 or array.dtype.kind != "f":
        return f"is not a float scalar (shape {array.shape}, dtype {array.dtype})"
    value = float(array.reshape(()))
    if not np.isfinite(value) or value < 0:
        return f"is {value}, not a finite non-negative epsilon"
    return None


def int_check(array: np.ndarray) -> str | None:
    """A ConstPattern check: integers (reduction axes)."""
    if array.dtype.kind not in "iu" or array.ndim > 1:
        return f"is not a list of axes (shape {array.shape}, dtype {array.dtype})"
    return None


_VIEW_OPS = frozenset({"Identity", "Reshape", "ExpandDims", "Squeeze", "Unsqueeze", "Cast", "StopGradient"})


def const_value(graph: ScopeGraph, tensor: tuple[str, int], depth: int = 8) -> np.ndarray | None:
    """The value of ``tensor`` when it is a constant seen through Identity / Reshape / ExpandDims /
    Squeeze / Unsqueeze / Cast reads of constants (as Keras reads its weights), else None."""
    node = graph.get(tensor[0])
    if node is None or depth < 0:
        return None
    if node.value is not None:
        return np.asarray(node.value)
    if node.op_type not in _VIEW_OPS or not node.inputs:
        return None
    data = const_value(graph, node.inputs[0], depth - 1)
    if data is None:
        return None
    op = node.op_type
    if op in ("Identity", "StopGradient"):
        return data
    if op == "Cast":
        dst = node.attrs.get("DstT", node.attrs.get("to"))
        numpy_dtype = getattr(dst, "numpy", None)
        return data.astype(numpy_dtype) if numpy_dtype is not None else None
    if op == "Squeeze" and len(node.inputs) == 1:
        axes = node.attrs.get("squeeze_dims", node.attrs.get("axes", ()))
        return np.squeeze(data, tuple(int(a) for a in axes)) if axes else np.squeeze(data)
    if len(node.inputs) != 2:
        return None
    arg = const_value(graph, node.inputs[1], depth - 1)
    if arg is None:
        return None
    try:
        if op == "Reshape":
            return data.reshape(tuple(int(d) for d in arg.reshape(-1)))
        if op in ("ExpandDims", "Unsqueeze"):
            out = data
            for axis in sorted(int(a) for a in arg.reshape(-1)):
                out = np.expand_dims(out, axis)
            return out
        if op == "Squeeze":
            return np.squeeze(data, tuple(int(a) for a in arg.reshape(-1)))
    except (ValueError, TypeError):
        return None
    return None


def read_axes(match: Match, node_capture: str, const_capture: str) -> tuple[int, ...] | None:
    """A reduction's axes: the captured constant input, else the captured node's ``axes`` attribute."""
    if const_capture in match.captures:
        return tuple(int(a) for a in np.asarray(match.value(const_capture)).reshape(-1))
    axes = match[node_capture].attrs.get("axes")
    if axes is None:
        return None
    return tuple(int(a) for a in np.asarray(axes).reshape(-1))


# ------------------------------------------------------------------------------------------ ranks
_SAME_RANK = frozenset(
    {"Identity", "StopGradient", "Relu", "Relu6", "Elu", "Selu", "LeakyRelu", "Tanh", "Sigmoid", "Neg",
     "Abs", "Exp", "Log", "Sqrt", "Rsqrt", "Square", "Erf", "Cast", "Softmax", "LogSoftmax", "BiasAdd",
     "Gelu", "Softplus", "Reciprocal", "Floor", "Ceil", "Round", "Dropout", "FusedBatchNorm",
     "FusedBatchNormV2", "FusedBatchNormV3", "LayerNormalization", "Transpose", "ConcatV2", "Concat", "Clip",
     "InstanceNormalization", "BatchNormalization", "Mish", "HardSigmoid", "Swish"}
)
_BROADCAST = frozenset(
    {"Add", "AddV2", "Sub", "Mul", "Div", "RealDiv", "Maximum", "Minimum", "Pow", "SquaredDifference", "Max",
     "Min", "BatchMatMulV2", "BatchMatMulV3", "BatchMatMul", "Where", "SelectV2"}
)
# Reductions that keep the rank with keepdims (ONNX's default) / keep_dims (TF's is off); pooling over all
# spatial axes keeps it too.
_REDUCTIONS = frozenset({"ReduceMean", "ReduceSum", "ReduceMax", "ReduceMin", "ReduceProd", "ReduceL2", "Mean", "Sum",
                         "Max", "Min", "Prod"})
_SAME_RANK = _SAME_RANK | {"GlobalAveragePool", "GlobalMaxPool", "Not", "LogicalNot", "Conv", "ConvTranspose",
                           "AveragePool", "HardSigmoid", "HardSwish"}
_BROADCAST = _BROADCAST | {"Less", "Greater", "LessOrEqual", "GreaterOrEqual", "Equal", "NotEqual", "And", "Or",
                           "LogicalAnd", "LogicalOr"}
_FIXED_RANK = {"MatMul": 2, "Gemm": 2, "Conv2D": 4, "DepthwiseConv2dNative": 4, "MaxPool": 4, "AvgPool": 4,
               "Conv3D": 5, "MaxPool3D": 5, "AvgPool3D": 5, "Conv2DBackpropInput": 4}


def static_rank(graph: ScopeGraph, tensor: tuple[str, int], depth: int = 160, _memo: dict | None = None) -> int | None:
    """The rank of ``tensor`` when the graph fixes it (input shapes, constants, shape-preserving and
    broadcasting ops, MatMul, convolutions, Reshape to a constant shape), else None."""
    memo: dict = {} if _memo is None else _memo
    if tensor not in memo:
        memo[tensor] = _static_rank(graph, tensor, depth, memo)
    return memo[tensor]


def _static_rank(graph: ScopeGraph, tensor: tuple[str, int], depth: int, memo: dict) -> int | None:
    node = graph.get(tensor[0])
    if node is None or depth < 0:
        return None
    shapes = node.attrs.get("_output_shapes")
    if isinstance(shapes, (list, tuple)) and tensor[1] < len(shapes) and shapes[tensor[1]] is not None:
        try:
            return len(shapes[tensor[1]])
        except TypeError:
            pass
    if node.value is not None:
        return int(np.ndim(node.value))
    if not node.inputs:
        shape = node.attrs.get("shape")
        if shape is None:
            for graph_input in graph.source.inputs:
                if graph_input.node == node.name:
                    shape = graph_input.shape
        return None if shape is None or not isinstance(shape, (list, tuple)) else len(shape)
    op = node.op_type
    if op == "MatMul" and graph.source.is_onnx:
        ranks = [static_rank(graph, t, depth - 1, memo) for t in node.inputs]
        return None if None in ranks or 1 in ranks else max(ranks)  # type: ignore[type-var]
    if op in _FIXED_RANK:
        return _FIXED_RANK[op]
    if op in _SAME_RANK or (op in _REDUCTIONS and bool(node.attrs.get("keepdims", node.attrs.get("keep_dims", op[0] == "R")))):
        return static_rank(graph, node.inputs[0], depth - 1, memo)
    if op in ("Gather", "GatherV2") and len(node.inputs) >= 2:  # data rank + indices rank - 1 (- batch dims)
        ranks = [static_rank(graph, t, depth - 1, memo) for t in node.inputs[:2]]
        if ranks[0] is None or ranks[1] is None:
            return None
        return ranks[0] + ranks[1] - 1 - int(node.attrs.get("batch_dims", 0) or 0)
    if op == "Reshape" and len(node.inputs) == 2:
        parts = shape_parts(graph, node.inputs[1])  # a constant, or a concatenation of known length
        return None if parts is None else len(parts)
    if op in _BROADCAST:
        ranks = [static_rank(graph, t, depth - 1, memo) for t in node.inputs if t[0]]
        if any(r is None for r in ranks) or not ranks:
            return None
        return max(ranks)  # type: ignore[type-var]
    return None


def normalized_axes(axes: Sequence[int], rank: int | None) -> tuple[int, ...] | None:
    """Axes as non-negative, sorted and unique for ``rank``; None when that needs an unknown rank or an
    axis is out of range."""
    if rank is None:
        if all(a >= 0 for a in axes):
            return tuple(sorted(set(axes)))
        return None
    if any(not -rank <= a < rank for a in axes):
        return None
    return tuple(sorted({a % rank for a in axes}))


# ------------------------------------------------------------------------------------------ patterns
def _tf_mean(op: Any, t: Any, capture: str, axes: str) -> Any:
    return op.Mean(t, op.const(axes, check=int_check), _attrs={"keep_dims": True}, _name=capture)


def _keepdims(node: Any) -> str | None:
    return None if node.attrs.get("keepdims", 1) in (1, True) else "keepdims is 0"


def _onnx_mean_attr(op: Any, t: Any, capture: str, axes: str) -> Any:
    return op.ReduceMean(t, _check=_keepdims, _name=capture)


def _global_average(op: Any, t: Any, capture: str, axes: str) -> Any:
    """tf2onnx writes a keep-dims mean over the last axis of a rank-3 tensor as ``GlobalAveragePool``."""
    return op.GlobalAveragePool(t, _name=capture)


def _onnx_mean_input(op: Any, t: Any, capture: str, axes: str) -> Any:
    return op.ReduceMean(t, op.const(axes, check=int_check), _check=_keepdims, _name=capture)


def _moments_tf(stop_gradient: bool) -> Callable[..., tuple[Any, Any, Any]]:
    """``tf.nn.moments(x, axes, keepdims=True)``: (mean, variance, None)."""

    def build(op: Any, x: Any) -> tuple[Any, Any, Any]:
        mean = _tf_mean(op, x, "mean", "axes")
        centre = op.StopGradient(mean) if stop_gradient else mean
        variance = _tf_mean(op, op.SquaredDifference(x, centre), "variance", "variance_axes")
        return mean, variance, None

    return build


def _moments_centred(reduce: Callable[..., Any], square: str) -> Callable[..., tuple[Any, Any, Any]]:
    """``d = x - mean(x)``, ``var = mean(d * d)`` written out: (mean, variance, d)."""

    def build(op: Any, x: Any) -> tuple[Any, Any, Any]:
        mean = reduce(op, x, "mean", "axes")
        d = op.Sub(x, mean)
        squared = {"Square": lambda: op.Square(d), "Pow": lambda: op.Pow(d, 2.0), "Mul": lambda: op.Mul(d, d)}[square]()
        return mean, reduce(op, squared, "variance", "variance_axes"), d

    return build


def _norm_batchnorm(op: Any, x: Any, mean: Any, var: Any, d: Any, gamma: Any, beta: Any) -> Any:
    inv = op.Mul(op.Rsqrt(op.op(ADD, var, op.const("eps", check=eps_check))), gamma)
    return op.op(ADD, op.Mul(x, inv), op.Sub(beta, op.Mul(mean, inv)), _name="y")


def _norm_keras(op: Any, x: Any, mean: Any, var: Any, d: Any, gamma: Any, beta: Any) -> Any:
    inv = op.Mul(op.Rsqrt(op.op(ADD, var, op.const("eps", check=eps_check))), gamma)
    return op.op(ADD, op.Mul(x, inv), op.op(ADD, op.Mul(op.Neg(mean), inv), beta), _name="y")


def _norm_batchnorm_reciprocal(op: Any, x: Any, mean: Any, var: Any, d: Any, gamma: Any, beta: Any) -> Any:
    """The batch-norm arithmetic as tf2onnx writes it: ``Rsqrt`` as ``Reciprocal(Sqrt)``."""
    inv = op.Mul(op.Reciprocal(op.Sqrt(op.op(ADD, var, op.const("eps", check=eps_check)))), gamma)
    return op.op(ADD, op.Mul(x, inv), op.Sub(beta, op.Mul(mean, inv)), _name="y")


def _norm_keras_reciprocal(op: Any, x: Any, mean: Any, var: Any, d: Any, gamma: Any, beta: Any) -> Any:
    inv = op.Mul(op.Reciprocal(op.Sqrt(op.op(ADD, var, op.const("eps", check=eps_check)))), gamma)
    return op.op(ADD, op.Mul(x, inv), op.op(ADD, op.Mul(op.Neg(mean), inv), beta), _name="y")


def _norm_div(op: Any, x: Any, mean: Any, var: Any, d: Any, gamma: Any, beta: Any) -> Any:
    d = op.Sub(x, mean) if d is None else d
    normed = op.op(DIV, d, op.Sqrt(op.op(ADD, var, op.const("eps", check=eps_check))))
    return op.op(ADD, op.Mul(normed, gamma), beta, _name="y")


def _norm_rsqrt(op: Any, x: Any, mean: Any, var: Any, d: Any, gamma: Any, beta: Any) -> Any:
    d = op.Sub(x, mean) if d is None else d
    normed = op.Mul(d, op.Rsqrt(op.op(ADD, var, op.const("eps", check=eps_check))))
    return op.op(ADD, op.Mul(normed, gamma), beta, _name="y")


def _moments_norm_pattern(name: str, moments: Callable[..., Any], norm: Callable[..., Any]) -> DataflowPattern:
    def pattern(op: Any, x: Any, gamma: Any, beta: Any) -> Any:
        mean, var, d = moments(op, x)
        return norm(op, x, mean, var, d, gamma, beta)

    return DataflowPattern(pattern, name=name)


def _build_moments_norm_patterns() -> tuple[DataflowPattern, ...]:
    out = []
    tf_moments = [("tf_moments", _moments_tf(True)), ("tf_moments_no_stop_gradient", _moments_tf(False))]
    for moments_name, moments in tf_moments:
        for norm_name, norm in (("batchnorm", _norm_batchnorm), ("keras", _norm_keras), ("div", _norm_div), ("rsqrt", _norm_rsqrt)):
            out.append(_moments_norm_pattern(f"{moments_name}_{norm_name}", moments, norm))
    centred = [
        ("tf_centred_square", _moments_centred(_tf_mean, "Square")),
        ("onnx_centred_pow", _moments_centred(_onnx_mean_attr, "Pow")),
        ("onnx_centred_mul", _moments_centred(_onnx_mean_attr, "Mul")),
        ("onnx18_centred_pow", _moments_centred(_onnx_mean_input, "Pow")),
        ("onnx18_centred_mul", _moments_centred(_onnx_mean_input, "Mul")),
        ("tf_centred_pow", _moments_centred(_tf_mean, "Pow")),
    ]
    for moments_name, moments in centred:
        for norm_name, norm in (("div", _norm_div), ("rsqrt", _norm_rsqrt)):
            out.append(_moments_norm_pattern(f"{moments_name}_{norm_name}", moments, norm))
    # tf2onnx: TF's moments as Sub / Mul(d, d) / ReduceMean, TF's batch-norm or Keras arithmetic after it.
    tf2onnx = [*centred[1:5], ("onnx_global_average_mul", _moments_centred(_global_average, "Mul"))]
    for moments_name, moments in tf2onnx:
        for norm_name, norm in (("batchnorm_reciprocal", _norm_batchnorm_reciprocal), ("keras_reciprocal", _norm_keras_reciprocal)):
            out.append(_moments_norm_pattern(f"{moments_name}_{norm_name}", moments, norm))
    return tuple(out)


#: (mean, variance) of ``x`` over some axes, then ``(x - mean) / sqrt(variance + eps) * gamma + beta``,
#: in the forms TF, Keras and PyTorch's ONNX export write it; inputs (x, gamma, beta), captures ``mean``,
#: ``variance`` (the reductions), ``axes`` / ``variance_axes`` (their axes constants, when inputs) and ``eps``.
MOMENTS_NORM_PATTERNS = _build_moments_norm_patterns()


def _onnx_layer_norm(op: Any, x: Any, gamma: Any, beta: Any) -> Any:
    return op.LayerNormalization(x, gamma, beta, _name="y")


ONNX_LAYER_NORM = DataflowPattern(_onnx_layer_norm, name="onnx_layer_normalization")


def moments_norm_required_ops(pattern: DataflowPattern) -> tuple[str, ...]:
    """The reduction a moments-normalization pattern cannot match without (``Mean`` for TF forms)."""
    if pattern is ONNX_LAYER_NORM:
        return ("LayerNormalization",)
    name = str(pattern.name)
    if "global_average" in name:
        return ("GlobalAveragePool",)
    return ("Mean",) if name.startswith("tf_") else ("ReduceMean",)


def moments_axes(match: Match, graph: ScopeGraph) -> tuple[tuple[int, ...], int | None] | str:
    """``(axes of the mean, rank of x)`` of a moments-normalization match, or why it cannot be read."""
    if match["mean"].op_type == "GlobalAveragePool":  # every axis from 2 on: the last one of a rank-3 input
        rank = static_rank(graph, match.inputs[0])
        if rank != 3:
            return f"GlobalAveragePool reduces over the axes from 2 on and the input's rank is {rank}, not 3"
        return (2,), rank
    axes = read_axes(match, "mean", "axes")
    variance_axes = read_axes(match, "variance", "variance_axes")
    if axes is None or variance_axes is None:
        return "the mean or the variance has no axes (it reduces over every axis)"
    if not axes:
        return "the mean reduces over no axis"
    negative = all(a < 0 for a in axes + variance_axes)
    rank = None if negative else static_rank(graph, match.inputs[0])
    if rank is not None:
        if normalized_axes(axes, rank) is None or normalized_axes(variance_axes, rank) is None:
            return f"the axes {list(axes)} / {list(variance_axes)} are out of range for an input of rank {rank}"
        same = normalized_axes(axes, rank) == normalized_axes(variance_axes, rank)
    else:
        same = sorted(set(axes)) == sorted(set(variance_axes))
    if not same:
        return f"the mean reduces over axes {list(axes)} but the variance over {list(variance_axes)}"
    return axes, rank


# ------------------------------------------------------------------------------------------ the pass
@dataclass
class _Judged:
    """What :meth:`ScopedDataflowPass.judge` made of one match: ``attrs`` to fuse it, the ``reason`` it
    refused it, or neither (the match belongs to another rule and is left alone)."""

    attrs: dict[str, Any] | None = None
    reason: str | None = None

    @property
    def skips(self) -> bool:
        return self.attrs is None and self.reason is None

    @classmethod
    def of(cls, rule: ScopedDataflowPass, graph: ScopeGraph, match: Match) -> _Judged:
        try:
            return cls(attrs=rule.judge(graph, match))
        except Refused as refused:
            return cls(reason=refused.reason)


class ScopedDataflowPass(ScopeBasePass, abc.ABC):
    """A rule whose fusions are dataflow matches and whose scope features find candidate regions: a match
    in a region is named after it, a region without a match is refused with the nearest miss.

    A subclass sets ``name``, ``fused_type``, ``what`` (``"a layer norm"``, for reasons), ``patterns``
    (dataflow patterns tried in order, inputs = fused input ports, first output = fused output 0) and
    implements :meth:`judge`; it may override :meth:`define_patterns`, :meth:`region` (the scope searched
    for a matched scope: default itself) and :meth:`records_refusal` (whether a candidate region with no
    dataflow match is reported: default yes).

    Each match becomes one result: fused (``judge`` returns its attributes), refused with the reason
    (``judge`` raises :class:`~scopefusion.scope.Refused`), or left alone (``judge`` returns None). A region where no pattern matches is
    refused with the nearest miss of the pattern that came closest.
    """

    # A graph whose names carry no scopes is still searched (its dataflow at the root).
    select_without_matches = True
    general = True
    fused_type = ""
    what = ""
    patterns: tuple[DataflowPattern, ...] = ()

    # ------------------------------------------------------------------ what a rule overrides
    @abc.abstractmethod
    def judge(self, graph: ScopeGraph, match: Match) -> dict[str, Any] | None:
        """The fused op's attributes when ``match`` is this rule's computation; None when it is another
        rule's to judge.

        Raises:
            Refused: ``match`` looks like this rule's computation but is not; the reason, one sentence.
        """

    def region(self, graph: ScopeGraph, scope: Scope) -> Scope:
        return scope

    def records_refusal(self, region: Scope) -> bool:
        return True

    def required_ops(self, pattern: DataflowPattern) -> tuple[str, ...]:
        """Op types that must all be present where ``pattern`` is searched (a cheap filter; default none)."""
        return ()

    # ------------------------------------------------------------------ candidates
    def _search(self, graph: ScopeGraph, within: Scope | None) -> tuple[list[Match], str]:
        found: list[Match] = []
        taken: set[str] = set()
        best = None
        root = within is None or within.is_root
        for pattern in self.patterns:
            needed = self.required_ops(pattern)
            if any(not graph.nodes_by_type(t) if root else within.op_count(t) < 0 for t in needed):  # type: ignore[union-attr]
                continue
            matches = pattern.find(graph, within=within)
            for match in matches:
                names = set(match.node_names)
                if names & taken:
                    continue
                taken |= names
                found.append(match)
            miss = matches.near_miss
            if miss is not None and (best is None or miss.depth > best[1].depth):
                best = (pattern.name, miss)
        where = "" if best is None else f"nearest miss of pattern {best[0]!r} {best[1]}"
        return found, where

    def last_match_scopes_and_ops(self, graph: ScopeGraph, matches: Sequence[Scope]) -> list[ScopesResult]:
        regions: dict[str, Scope] = {}
        for scope in matches:
            region = self.region(graph, scope)
            if not region.is_root:
                regions.setdefault(region.name, region)
        # One search of the whole graph; each match answers for the candidate region holding one of its
        # nodes (tf.math.l2_normalize names its last op beside its scope, so "any node" rather than "all").
        scope_of = graph.tree.scope_of
        found, _ = self._search(graph, None)
        judged: list[tuple[Match, _Judged, Scope | None]] = []
        answered: dict[str, int] = {}
        for match in found:
            verdict = _Judged.of(self, graph, match)
            home = next((r for r in regions.values() if any(r.contains(scope_of(n)) for n in match.node_names)), None)
            if home is not None:  # a region answered only by other rules' matches is not refused either
                answered[home.name] = answered.get(home.name, 0) + (0 if verdict.skips else 1)
            judged.append((match, verdict, home))
        results: list[ScopesResult] = []
        for match, verdict, home in judged:
            if verdict.skips:
                continue
            name = home.name.rstrip("/") if home is not None and answered[home.name] == 1 else None
            results.append(self._candidate(graph, match, verdict, name))
        for region in regions.values():
            if region.name in answered or not self.records_refusal(region):
                continue
            _, miss = self._search(graph, region)
            reason = f"{region.name} does not compute {self.what}: {miss or 'no candidate node'}"
            results.append(ScopesResult(scopes=[region], refusal=reason))
        return results

    def _candidate(self, graph: ScopeGraph, match: Match, verdict: _Judged, name: str | None) -> ScopesResult:
        nodes = claimed_nodes(graph, match)
        output = match.outputs[0][0]
        if name is None or (graph.get(name) is not None and name not in nodes):
            name = output
        captures = {"match": match, "verdict": verdict, "name": name}
        return ScopesResult(nodes=nodes, captures=captures)

    def generate_fusion_result(self, scopes: Sequence[Scope], result: FusionScopesResult, graph: ScopeGraph) -> None:
        match: Match = result.captures["match"]
        verdict: _Judged = result.captures["verdict"]
        result.name = result.captures["name"]
        if verdict.reason is not None:
            result.invalidate(f"{match.outputs[0][0]} is not {self.what}: {verdict.reason}")
            return
        result.op_type = self.fused_type
        result.description = f"{self.pass_name}: pattern {match.pattern.name}"
        result.attrs.update(verdict.attrs or {})
        map_ports(result, graph, match)

    # ------------------------------------------------------------------ the framework
    def explain(self, scope: Scope, graph: ScopeGraph | None = None) -> list[PatternCheck]:
        """The scope patterns on ``scope``; when none matches, also on its direct children, since a
        candidate region is often the parent of the matched scope (``LayerNorm/`` of ``LayerNorm/moments/``)."""
        checks = super().explain(scope, graph)
        if any(c.matched for c in checks):
            return checks
        for child in scope.children:
            if graph is None or self.region(graph, child) is not scope:
                continue
            for check in super().explain(child, graph):
                if check.matched:
                    checks.append(PatternCheck(f"sub-scope {child.name}: {check.where}", None))
        return checks


class LayerNormFusion(ScopedDataflowPass):
    """``moments`` + normalize over the trailing axes → ``LayerNorm(x, gamma, beta)``; see the module docstring."""

    name = "LayerNormFusion"
    general = True
    fused_type = "LayerNorm"
    what = "a layer norm"
    patterns = MOMENTS_NORM_PATTERNS + (ONNX_LAYER_NORM,)

    def define_patterns(self) -> Any:
        moments = ScopePattern(
            "layer_norm_moments",
            NodeOpTypeFeature("Mean", 2),
            NodeOpTypeFeature("SquaredDifference", 1),
            ScopeFeature("", 0, suffix="moments"),
        )
        onnx = ScopePattern(
            "layer_norm_onnx",
            NodeOpTypeFeature("ReduceMean", 2),
            NodeOpTypeFeature("Sqrt", 1),
            NodeOpTypeFeature("Div", 1),
        )
        return [moments, onnx]

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
