"""Running a node's op definition to set its output types.

For each input, inference sees the producer's type (shape, dtype, format); a value-dependent input
also sees its value when the producer is a ``ge.Const``. Outputs get ``TensorType``s in the graph's
context.
"""

from __future__ import annotations

import numpy as np

from ..errors import InferenceError
from .graph import Node, Value
from .opdef import InferContext, InputInfo
from .types import TensorType

__all__ = ["infer_node", "input_info"]


def input_info(value: Value | None, data: np.ndarray | None) -> InputInfo | None:
    """What inference sees of ``value``: its type's shape, dtype and format, and ``data`` (its value when
    known at build time)."""
    if value is None:
        return None
    t = value.type
    if isinstance(t, TensorType):
        return InputInfo(None if t.rank is None else t.shape, t.dtype, t.format, data)
    return InputInfo(None, None, "ND", data)


def infer_node(node: Node) -> InferContext:
    """Infers and sets ``node``'s output types; raises InferenceError naming the node, its inputs and the reason."""
    if node.opdef is None:
        raise InferenceError(f"node {node.name!r} ({node.op}) has no op definition; register one to infer its outputs")
    ctx = InferContext(
        node.opdef,
        node.name,
        [input_info(v, None if v is None else v.const_value) for v in node.inputs],
        dict(node.attrs.items()),
        len(node.outputs),
        node.subgraphs,
    )
    node.opdef.infer(ctx)
    context = node.graph.context
    for value, (shape, dtype, fmt) in zip(node.outputs, ctx.results()):
        value.type = context.tensor(dtype, shape, fmt)
    return ctx
