"""Contradictions the frameworks' own shape inference lets through, refused in every mode.

ONNX's inference accepts a ``Reshape`` whose target holds another element count than its input, and
gives ``Range`` with a zero or vanishing ``delta`` a length of 0; a model that says either is wrong,
so both are an :class:`~scopefusion.errors.InferenceError` naming the node (TF and ONNX dialects alike).
"""

from __future__ import annotations

import math
from typing import Sequence

import numpy as np

from ..budgets import MAX_ELEMENTS
from ..errors import InferenceError
from ..ir.graph import Node
from ..ir.opdef import InputInfo

__all__ = ["check_contradictions"]


def _count(shape: Sequence[int] | None) -> int | None:
    if shape is None or any(d is None or d < 0 for d in shape):
        return None
    return math.prod(shape)


def check_contradictions(node: Node, infos: list[InputInfo | None], inferred) -> None:
    """Raises InferenceError when ``node``'s inputs contradict its op (see the module docstring)."""
    op_type = node.op_type
    if op_type == "Reshape" and infos and infos[0] is not None and inferred:
        before, after = _count(infos[0].shape), _count(inferred[0][0])
        if before is not None and after is not None and before != after:
            raise InferenceError(
                f"node {node.name!r} ({node.op}) reshapes {before} elements {list(infos[0].shape or ())} to "
                f"{list(inferred[0][0])} ({after} elements); the target shape contradicts the input"
            )
    elif op_type == "Range" and len(infos) == 3 and all(i is not None and i.data is not None for i in infos):
        start, limit, delta = (np.asarray(i.data).reshape(-1)[0].item() for i in infos)  # type: ignore[union-attr]
        where = f"node {node.name!r} ({node.op})"
        if delta == 0:
            raise InferenceError(f"{where}: delta is 0, so the range from {start} to {limit} never ends")
        try:
            steps = (limit - start) / delta
        except (OverflowError, ZeroDivisionError):
            steps = math.inf
        if not math.isfinite(steps):
            raise InferenceError(f"{where}: the range from {start} to {limit} by {delta} has no finite length")
        if steps > MAX_ELEMENTS:
            raise InferenceError(
                f"{where}: the range from {start} to {limit} by {delta} has {steps:.3g} elements, more than a tensor can hold"
            )
