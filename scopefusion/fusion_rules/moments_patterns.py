"""The moments-normalization patterns the normalization rules share: ``mean``, ``variance`` of the
centred input, and the normalization ``(x - mean) / sqrt(variance + eps) * gamma + beta`` in the
spellings TensorFlow, Keras, PyTorch and tf2onnx write; and ONNX's own ``LayerNormalization``.
"""

from __future__ import annotations

from typing import Any, Callable

from scopefusion.scope import (
    DataflowPattern,
    Match,
    ScopeGraph,
)

from .base.constants import ADD, DIV, eps_check, int_check, read_axes
from .base.ranks import normalized_axes, static_rank

__all__ = ["MOMENTS_NORM_PATTERNS", "ONNX_LAYER_NORM", "moments_axes", "moments_norm_required_ops"]


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

    return DataflowPattern(pattern, name=name, deferred=True)


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


ONNX_LAYER_NORM = DataflowPattern(_onnx_layer_norm, name="onnx_layer_normalization", deferred=True)


def moments_norm_required_ops(pattern: DataflowPattern) -> tuple[str, ...]:
    """The reduction a moments-normalization pattern cannot match without (``Mean`` for TF forms)."""
    if pattern is ONNX_LAYER_NORM:
        return ("LayerNormalization",)
    name = str(pattern.name)
    if "global_average" in name:
        return ("GlobalAveragePool",)
    return ("Mean",) if name.startswith("tf_") else ("ReduceMean",)


def moments_axes(match: Match, graph: ScopeGraph) -> tuple[tuple[int, ...], int | None] | str:
    """``(axes of the mean, rank of x)`` of a moments-normalization match, or why it cannot be read; read once
    per match, as LayerNormFusion and InstanceNormFusion judge the same matches (shared in the graph's memo)."""
    key = ("moments axes", id(match))
    known = graph.memo.get(key)
    if known is not None and known[0] is match:  # the match itself is kept, so its id is not reused meanwhile
        return known[1]
    answer = _read_moments_axes(match, graph)
    graph.memo[key] = (match, answer)
    return answer


def _read_moments_axes(match: Match, graph: ScopeGraph) -> tuple[tuple[int, ...], int | None] | str:
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
