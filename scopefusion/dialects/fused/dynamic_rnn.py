"""``fused.DynamicRNN``: an LSTM over a whole sequence (GE's DynamicRNN layout), the loop included.

Inputs ``x`` (``[batch, time, input_size]``, or ``[time, batch, input_size]`` with ``time_major``) and the
optional initial states ``init_h`` / ``init_c`` (``[batch, hidden_size]``; zeros when absent). Per step
``t``, with ``w`` ``[input_size + hidden_size, 4·hidden_size]`` and ``b`` ``[4·hidden_size]`` holding the
gate blocks in the order **i, j, f, o**::

    i, j, f, o = split([x_t, h] @ w + b, 4)
    c = σ(f)·c + σ(i)·tanh(j)          h = σ(o)·tanh(c)

Outputs: ``y``, every step's ``h`` in ``x``'s layout (``[batch, hidden_size]``, the last ``h``, when
``return_sequences`` is False); ``output_h`` and ``output_c``, the final states (optional).

NOTE: the weights are attributes in one canonical layout, not inputs: the rule rearranges the
framework's kernels (Keras' separate ``kernel`` / ``recurrent_kernel`` in i, f, c, o order, TF's
concatenated kernel in i, j, f, o order) and folds any constant added to a gate (TF's ``forget_bias``)
into ``b``. This module also holds what ``fused.DynamicGRU`` shares (:func:`rnn_shapes`,
:func:`sequence_steps`).
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np

from ... import dtypes as D
from ...ir.attrs import BOOL, INT, TENSOR
from ...ir.opdef import FollowType, InferContext, OpDef, ParamType

__all__ = [
    "check_bias",
    "check_weights",
    "definition",
    "initial_states",
    "lstm",
    "rnn_shapes",
    "sequence_steps",
    "sigmoid",
]

_FLOATS = (D.FLOAT16, D.BFLOAT16, D.FLOAT32, D.FLOAT64)


def sigmoid(x: np.ndarray) -> np.ndarray:
    return 0.5 * (1.0 + np.tanh(0.5 * x))  # no overflow for large negative x


def sequence_steps(
    x: np.ndarray,
    attrs: dict[str, Any],
    states: list[np.ndarray],
    step: Callable[[np.ndarray, list[np.ndarray]], list[np.ndarray]],
) -> list[np.ndarray]:
    """Runs ``step(x_t, states) -> states`` (``states[0]`` is the output ``h``) over ``x`` in float64;
    returns ``[y, *final states]`` in ``x``'s dtype and layout."""
    dtype = np.asarray(x).dtype
    seq = np.asarray(x, np.float64)
    if not attrs.get("time_major", False):
        seq = seq.swapaxes(0, 1)
    outputs = []
    for x_t in seq:
        states = step(x_t, states)
        outputs.append(states[0])
    if attrs.get("return_sequences", True):
        hidden = states[0].shape[-1]
        y = np.stack(outputs) if outputs else np.zeros((0, seq.shape[1], hidden))
        if not attrs.get("time_major", False):
            y = y.swapaxes(0, 1)
    else:
        y = states[0]
    return [np.ascontiguousarray(t).astype(dtype) for t in [y, *states]]


def initial_states(inputs: list[np.ndarray | None], x: np.ndarray, attrs: dict[str, Any], count: int) -> list[np.ndarray]:
    """The ``count`` initial states in float64: inputs 1.. when given, else zeros ``[batch, hidden_size]``."""
    batch = np.shape(x)[1 if attrs.get("time_major", False) else 0]
    hidden = int(attrs["hidden_size"])
    out = []
    for k in range(count):
        given = inputs[1 + k] if len(inputs) > 1 + k else None
        out.append(np.zeros((batch, hidden)) if given is None else np.asarray(given, np.float64))
    return out


def lstm(inputs: list[np.ndarray | None], attrs: dict[str, Any]) -> list[np.ndarray]:
    """The op's outputs ``[y, output_h, output_c]`` for ``inputs`` (x, init_h, init_c) and ``attrs``."""
    x = np.asarray(inputs[0])
    w = np.asarray(attrs["w"], np.float64)
    b = np.asarray(attrs["b"], np.float64)

    def step(x_t: np.ndarray, states: list[np.ndarray]) -> list[np.ndarray]:
        h, c = states
        i, j, f, o = np.split(np.concatenate([x_t, h], axis=1) @ w + b, 4, axis=1)
        c = sigmoid(f) * c + sigmoid(i) * np.tanh(j)
        return [sigmoid(o) * np.tanh(c), c]

    return sequence_steps(x, attrs, initial_states(inputs, x, attrs, 2), step)


def rnn_shapes(ctx: InferContext, input_rows: int) -> None:
    """Output shapes of a sequence op, ``y`` and the final states; checks ``x``'s feature size against
    the ``input_rows`` rows of input weights and the initial states against ``hidden_size``."""
    hidden = int(ctx.attr("hidden_size"))
    time_major = bool(ctx.attr("time_major"))
    x = ctx.param("x").shape
    if x is not None and len(x) != 3:
        raise ValueError(f"x has rank {len(x)}, expected 3 ([batch, time, features] or time-major)")
    if x is not None and x[2] >= 0 and x[2] != input_rows:
        raise ValueError(f"x has {x[2]} features, the weights expect {input_rows}")
    batch, steps = (-1, -1) if x is None else ((x[1], x[0]) if time_major else (x[0], x[1]))
    for i, spec in enumerate(ctx.opdef.inputs[1:], start=1):
        if ctx.has_input(i):
            shape = ctx.input(i).shape
            if shape is not None and (len(shape) != 2 or shape[1] not in (-1, hidden)):
                raise ValueError(f"{spec.name} has shape {list(shape)}, expected [batch, {hidden}]")
    if ctx.attr("return_sequences"):
        ctx.set_output_shape(0, (steps, batch, hidden) if time_major else (batch, steps, hidden))
    else:
        ctx.set_output_shape(0, (batch, hidden))
    for i in range(1, ctx.num_outputs):
        ctx.set_output_shape(i, (batch, hidden))


def check_weights(ctx: InferContext, name: str, rows: int | None, cols: int) -> int:
    """The row count of weight attribute ``name``; ValueError unless it is ``[rows, cols]`` (any rows if None)."""
    weight = np.asarray(ctx.attr(name))
    if weight.ndim != 2 or weight.shape[1] != cols or (rows is not None and weight.shape[0] != rows):
        want = f"[{rows if rows is not None else 'rows'}, {cols}]"
        raise ValueError(f"{name} has shape {list(weight.shape)}, expected {want}")
    return int(weight.shape[0])


def check_bias(ctx: InferContext, name: str, size: int) -> None:
    bias = np.asarray(ctx.attr(name))
    if bias.shape != (size,):
        raise ValueError(f"{name} has shape {list(bias.shape)}, expected [{size}]")


def _infer_shape(ctx: InferContext) -> None:
    hidden = int(ctx.attr("hidden_size"))
    rows = check_weights(ctx, "w", None, 4 * hidden)
    check_bias(ctx, "b", 4 * hidden)
    rnn_shapes(ctx, rows - hidden)


def definition() -> OpDef:
    return (
        OpDef("DynamicRNN", "fused", doc=__doc__ or "")
        .input("x", dtypes=_FLOATS)
        .input("init_h", ParamType.OPTIONAL, dtypes=_FLOATS)
        .input("init_c", ParamType.OPTIONAL, dtypes=_FLOATS)
        .output("y", follow=("x", FollowType.DTYPE))
        .output("output_h", ParamType.OPTIONAL, follow=("x", FollowType.DTYPE))
        .output("output_c", ParamType.OPTIONAL, follow=("x", FollowType.DTYPE))
        .attr("hidden_size", INT)
        .attr("w", TENSOR)
        .attr("b", TENSOR)
        .attr("time_major", BOOL, default=False)
        .attr("return_sequences", BOOL, default=True)
        .set_infer_shape(_infer_shape)
        .set_reference(lstm)
    )
