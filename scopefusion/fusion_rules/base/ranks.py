"""Static ranks of source tensors, read from the dataflow (no shape inference runs before fusion),
and axes normalized against them.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np

from scopefusion.scope import (
    ScopeGraph,
)

from .shapes import shape_parts

__all__ = ["normalized_axes", "static_rank"]


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
