"""Limits on how far a model may make the converter expand it.

A small file can ask for enormous work: a function library where each function calls the one below it
twice, a constant subgraph that folds to billions of elements, a one-value constant with a huge shape.
The limits below bound that work; the defaults are far above what a real model needs, and a refusal
names the node, the size and the option that raises the limit.

``convert(..., max_inlined_nodes=..., max_folded_bytes=...)`` (CLI: ``--max-inlined-nodes``,
``--max-folded-bytes``) sets them for one conversion; code deeper down reads :func:`current_budgets`.
"""

from __future__ import annotations

import contextvars
from contextlib import contextmanager
from typing import Iterator

from .records import FrozenRecord

__all__ = [
    "Budgets",
    "DEFAULT_BUDGETS",
    "DEFAULT_MAX_FOLDED_BYTES",
    "DEFAULT_MAX_INLINED_NODES",
    "MAX_CALL_DEPTH",
    "MAX_ELEMENTS",
    "current_budgets",
    "use_budgets",
]

DEFAULT_MAX_INLINED_NODES = 1_000_000
DEFAULT_MAX_FOLDED_BYTES = 64 << 20
# Function calls nested deeper than this are refused (no real model comes near it).
MAX_CALL_DEPTH = 200
# Element counts and byte sizes must fit int64, as every runtime's tensor sizes do.
MAX_ELEMENTS = (1 << 63) - 1


class Budgets(FrozenRecord):
    """``max_inlined_nodes``: nodes that inlining TF function calls may add, over the whole model.
    ``max_folded_bytes``: bytes of one value computed at build time (constant folding, a one-value
    constant written out in full); a larger value stays an op with a known shape."""

    _fields = ("max_inlined_nodes", "max_folded_bytes")

    def __init__(self, max_inlined_nodes: int = DEFAULT_MAX_INLINED_NODES,
                 max_folded_bytes: int = DEFAULT_MAX_FOLDED_BYTES) -> None:
        self.max_inlined_nodes = max_inlined_nodes
        self.max_folded_bytes = max_folded_bytes
        for name in self._fields:
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 0:
                raise ValueError(f"{name} must be a non-negative integer, not {value!r}")


DEFAULT_BUDGETS = Budgets()
_current: contextvars.ContextVar[Budgets] = contextvars.ContextVar("scopefusion_budgets", default=DEFAULT_BUDGETS)


def current_budgets() -> Budgets:
    """The limits of the conversion running in this context (the defaults outside one)."""
    return _current.get()


@contextmanager
def use_budgets(budgets: Budgets) -> Iterator[Budgets]:
    """Makes ``budgets`` current for the block."""
    token = _current.set(budgets)
    try:
        yield budgets
    finally:
        _current.reset(token)
