"""A one-value constant with a huge shape (a splat) stays a splat: ``tf.Fill(dims, value)``.

TensorFlow stores a constant of one repeated value as that value and a shape; the parser keeps it as a
broadcast view that costs no memory. Written out in full it could take gigabytes, so a splat larger
than ``max_folded_bytes`` becomes a ``tf.Fill`` of its scalar value (two tiny constants and one op, the
same value at run time); where the op registry has no ``tf.Fill`` it is refused with a clear error.
"""

from __future__ import annotations

import numpy as np

from ..budgets import current_budgets
from ..errors import ParseError
from ..ir.graph import Graph, Value

__all__ = ["add_constant", "is_splat"]

FILL_OP = "tf.Fill"


def is_splat(array: np.ndarray) -> bool:
    """A multi-element array that repeats one value through zero strides (a broadcast view)."""
    return array.size > 1 and array.ndim > 0 and 0 in array.strides


def add_constant(graph: Graph, array: np.ndarray, name: str) -> Value:
    """``graph.add_const(array)``, or a ``tf.Fill`` for a splat over the folded-value budget."""
    if not is_splat(array):
        return graph.add_const(array, name, unique=False)
    limit = current_budgets().max_folded_bytes
    if array.nbytes <= limit:
        return graph.add_const(array, name, unique=False)
    if graph.registry.lookup(FILL_OP) is None or array.dtype == object:
        raise ParseError(
            f"constant node {name!r} repeats one value over shape {list(array.shape)} ({array.nbytes:,} bytes), more "
            f"than the limit of {limit:,} bytes for a value written out in full; raise it with --max-folded-bytes "
            "(max_folded_bytes=) if the model is trusted"
        )
    dims = graph.add_const(np.asarray(array.shape, np.int64), f"{name}/splat_dims")
    scalar = np.array(array.reshape(-1)[0], dtype=array.dtype)
    value = graph.add_const(scalar, f"{name}/splat_value")
    node = graph.add_node(FILL_OP, [dims, value], name=name, unique=False)
    return node.outputs[0]
