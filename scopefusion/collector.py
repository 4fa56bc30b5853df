"""Pausing Python's cyclic garbage collector around work that allocates many long-lived objects."""

from __future__ import annotations

import gc
from contextlib import contextmanager
from typing import Callable, Iterator, TypeVar

T = TypeVar("T")

__all__ = ["call_collector_paused", "collector_paused"]


@contextmanager
def collector_paused() -> Iterator[None]:
    """Pauses Python's cyclic garbage collector for the block, and restores its state after it.

    A conversion or an export allocates many objects that all stay alive (the source graph, the IR and its
    profiles, the ONNX model); the collector's full passes would walk them again and again (a third of the
    time on a CNN) to find little garbage. Cycles made meanwhile are collected after the block.
    """
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def call_collector_paused(fn: Callable[..., T], *args: object) -> T:
    """``fn(*args)`` with the collector paused, as :func:`collector_paused` does, without a context manager's
    cost: for work run once per conversion stage or more (building a scope graph, running its passes)."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        return fn(*args)
    finally:
        if enabled:
            gc.enable()
