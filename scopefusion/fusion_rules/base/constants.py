"""What the rules read of constants: scalar checks for ``ConstPattern``, values seen through the
view ops Keras and frozen graphs put between a weight and its use, and reduction axes.
"""

from __future__ import annotations

import math

import numpy as np

from scopefusion.scope import (
    Match,
    ScopeGraph,
)

__all__ = ["ADD", "DIV", "WHILE", "const_value", "eps_check", "int_check", "read_axes"]


ADD = ("Add", "AddV2")
DIV = ("Div", "RealDiv")
WHILE = ("While", "StatelessWhile")  # the functional loops


# ------------------------------------------------------------------------------------------ constants
def eps_check(array: np.ndarray) -> str | None:
    """A ConstPattern check: one finite, non-negative float."""
    if array.size != 1 or array.dtype.kind != "f":
        return f"is not a float scalar (shape {array.shape}, dtype {array.dtype})"
    value = float(array.item())  # its one element, as a Python number (cheaper than a 0-d view)
    if not math.isfinite(value) or value < 0:
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
