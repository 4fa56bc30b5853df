"""``fused.DynamicGRU``: a GRU over a whole sequence (GE's DynamicGRUV2, gate order z, r, n), the loop included.

Inputs ``x`` (``[batch, time, input_size]``, or ``[time, batch, input_size]`` with ``time_major``) and the
optional initial state ``init_h`` (``[batch, hidden_size]``; zeros when absent). Per step ``t``, with
``w_input`` ``[input_size, 3·hidden_size]``, ``w_hidden`` ``[hidden_size, 3·hidden_size]``, ``b_input`` and
``b_hidden`` ``[3·hidden_size]`` holding the blocks z (update), r (reset), n (candidate)::

    gx = x_t @ w_input + b_input                         gh = h @ w_hidden + b_hidden
    z = σ(gx_z + gh_z)      r = σ(gx_r + gh_r)
    n = tanh(gx_n + r·gh_n)                              (reset_after, Keras' default, ONNX linear_before_reset=1)
    n = tanh(gx_n + (r·h) @ w_hidden_n + b_hidden_n)     (not reset_after: TF's GRUCell)
    h = z·h + (1 - z)·n

Outputs: ``y``, every step's ``h`` in ``x``'s layout (the last ``h`` when ``return_sequences`` is False),
and ``output_h``, the final state (optional).

NOTE: the weights are attributes in one canonical layout, not inputs, as for ``fused.DynamicRNN``.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ... import dtypes as D
from ...ir.attrs import BOOL, INT, TENSOR
from ...ir.opdef import FollowType, InferContext, OpDef, ParamType
from .dynamic_rnn import check_bias, check_weights, initial_states, rnn_shapes, sequence_steps, sigmoid

__all__ = ["definition", "gru"]

_FLOATS = (D.FLOAT16, D.BFLOAT16, D.FLOAT32, D.FLOAT64)


def gru(inputs: list[np.ndarray | None], attrs: dict[str, Any]) -> list[np.ndarray]:
    """The op's outputs ``[y, output_h]`` for ``inputs`` (x, init_h) and ``attrs``."""
    x = np.asarray(inputs[0])
    w_x, w_h = (np.asarray(attrs[k], np.float64) for k in ("w_input", "w_hidden"))
    b_x, b_h = (np.asarray(attrs[k], np.float64) for k in ("b_input", "b_hidden"))
    hidden = int(attrs["hidden_size"])
    reset_after = bool(attrs.get("reset_after", True))

    def step(x_t: np.ndarray, states: list[np.ndarray]) -> list[np.ndarray]:
        (h,) = states
        gx = x_t @ w_x + b_x
        gh = h @ w_h[:, : 2 * hidden] + b_h[: 2 * hidden]
        z = sigmoid(gx[:, :hidden] + gh[:, :hidden])
        r = sigmoid(gx[:, hidden : 2 * hidden] + gh[:, hidden:])
        if reset_after:
            n = np.tanh(gx[:, 2 * hidden :] + r * (h @ w_h[:, 2 * hidden :] + b_h[2 * hidden :]))
        else:
            n = np.tanh(gx[:, 2 * hidden :] + (r * h) @ w_h[:, 2 * hidden :] + b_h[2 * hidden :])
        return [z * h + (1.0 - z) * n]

    return sequence_steps(x, attrs, initial_states(inputs, x, attrs, 1), step)


def _infer_shape(ctx: InferContext) -> None:
    hidden = int(ctx.attr("hidden_size"))
    rows = check_weights(ctx, "w_input", None, 3 * hidden)
    check_weights(ctx, "w_hidden", hidden, 3 * hidden)
    check_bias(ctx, "b_input", 3 * hidden)
    check_bias(ctx, "b_hidden", 3 * hidden)
    rnn_shapes(ctx, rows)


def definition() -> OpDef:
    return (
        OpDef("DynamicGRU", "fused", doc=__doc__ or "")
        .input("x", dtypes=_FLOATS)
        .input("init_h", ParamType.OPTIONAL, dtypes=_FLOATS)
        .output("y", follow=("x", FollowType.DTYPE))
        .output("output_h", ParamType.OPTIONAL, follow=("x", FollowType.DTYPE))
        .attr("hidden_size", INT)
        .attr("w_input", TENSOR)
        .attr("w_hidden", TENSOR)
        .attr("b_input", TENSOR)
        .attr("b_hidden", TENSOR)
        .attr("reset_after", BOOL, default=True)
        .attr("time_major", BOOL, default=False)
        .attr("return_sequences", BOOL, default=True)
        .set_infer_shape(_infer_shape)
        .set_reference(gru)
    )
