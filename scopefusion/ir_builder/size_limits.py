"""Tensor sizes must fit int64: a dim of 2**62 is read, but a tensor whose element count or bytes, or a
memory plan whose arena, would not fit is an :class:`~scopefusion.errors.InferenceError` naming it."""

from __future__ import annotations

from typing import Any

from ..budgets import MAX_ELEMENTS
from ..errors import InferenceError
from ..ir.graph import Graph, Node, Value
from ..ir.types import TensorType
from .memory_plan import DEFAULT_ALIGNMENT

__all__ = ["arena_fits", "check_arena", "check_tensor_sizes", "checked_arena_fits"]


def check_tensor_sizes(graph: Graph, where: str = "", _fitting: set[int] | None = None) -> None:
    """Raises InferenceError for the first value whose static bytes do not fit int64."""
    fitting = set() if _fitting is None else _fitting  # ids of the (interned) types already found to fit
    for node in graph.nodes:
        for value in node.outputs:
            t = value.type
            if id(t) in fitting or not isinstance(t, TensorType):  # only tensor types are added
                continue
            _check_size(t, node, value, where)
            fitting.add(id(t))
        if node.subgraphs:
            for body in node.subgraphs.values():
                check_tensor_sizes(body, where, fitting)


def checked_arena_fits(graph: Graph, where: str = "") -> bool:
    """:func:`check_tensor_sizes` then :func:`arena_fits` of ``graph`` in one walk of its nodes: raises what the
    check raises, else returns what ``arena_fits`` returns.

    Each type's bytes (plus the alignment; 0 for a type without static bytes) are found once for both, when
    its size is checked, and kept in the graph's IRContext (``memo``) with those of every type checked before:
    a type found to fit always fits, and conversions sharing a context check most of their types once."""
    sizes: dict[Any, int] = graph.context.memo.setdefault(__name__, {})  # type -> bytes + alignment, checked
    total = 0
    for node in graph.nodes:
        for value in node.outputs:
            t = value.type
            size = sizes.get(t)
            if size is None:
                nbytes = None
                if isinstance(t, TensorType):
                    _check_size(t, node, value, where)
                    nbytes = t.nbytes
                size = sizes[t] = 0 if nbytes is None else nbytes + DEFAULT_ALIGNMENT
            total += size
        if node.subgraphs:
            fitting = {id(t) for t in sizes if isinstance(t, TensorType)}  # as check_tensor_sizes keeps it
            for body in node.subgraphs.values():
                check_tensor_sizes(body, where, fitting)
    return total <= MAX_ELEMENTS // 2


def _check_size(t: TensorType, node: Node, value: Value, where: str) -> None:
    """Raises InferenceError when ``t`` (``value``'s type) has a dim or static bytes that do not fit int64."""
    if t.shape is not None and any(d > MAX_ELEMENTS for d in t.shape):
        raise InferenceError(
            f"{where}node {node.name!r} ({node.op}) output {value.ref} has shape {list(t.shape)}, a dim larger "
            "than a size can hold (int64); check the model's or --input-shape's dims"
        )
    nbytes = t.nbytes if t.is_static else None
    if nbytes is not None and nbytes > MAX_ELEMENTS:
        raise InferenceError(
            f"{where}node {node.name!r} ({node.op}) output {value.ref} has shape {list(t.shape)}: "
            f"{nbytes:,} bytes, more than a tensor size can hold (int64); check the model's or --input-shape's dims"
        )


def check_arena(arena_bytes: int, where: str) -> None:
    if arena_bytes > MAX_ELEMENTS:
        raise InferenceError(
            f"{where}: the memory plan needs {arena_bytes:,} bytes, more than a size can hold (int64); "
            "check the model's or --input-shape's dims"
        )


def arena_fits(graph: Graph) -> bool:
    """Whether every memory plan of ``graph`` surely passes :func:`check_arena`, with room to spare: the
    bytes of all its statically shaped values, each rounded up to the alignment, add up to at most half
    of what a size can hold. A plan's arena is never larger than that sum: each buffer lies at or below
    the end of the buffers placed before it."""
    total = 0
    sizes: dict[int, int] = {}  # id(type) -> its bytes plus the alignment (types are interned: few distinct ones)
    for node in graph.nodes:
        for value in node.outputs:
            t = value.type
            size = sizes.get(id(t))
            if size is None:
                nbytes = t.nbytes if isinstance(t, TensorType) else None
                size = sizes[id(t)] = 0 if nbytes is None else nbytes + DEFAULT_ALIGNMENT
            total += size
    return total <= MAX_ELEMENTS // 2
