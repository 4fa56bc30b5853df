"""Identities and no-ops: Identity, Snapshot, StopGradient, EnsureShape… → ``Identity`` (removed again by
the export's clean-up); ``IdentityN`` → one ``Identity`` per used output; ``NoOp`` / ``Assert`` /
``ControlTrigger`` → nothing (ONNX has no control edges); ``Print`` → its first input."""

from __future__ import annotations

from typing import Callable

from .emitter import LoweringEmitter

__all__ = ["LOWERINGS", "write_nothing"]

_IDENTITIES = ("Identity", "Snapshot", "StopGradient", "PreventGradient", "CheckNumerics", "DebugIdentity",
               "EnsureShape", "PlaceholderWithDefault", "Print")


def _identity(e: LoweringEmitter) -> None:
    e.result("Identity", [e.input(0)])


def _identity_n(e: LoweringEmitter) -> None:
    for k in range(len(e.outputs)):
        if e.used(k):
            e.result("Identity", [e.input(k)], k)


def write_nothing(e: LoweringEmitter) -> None:
    """The lowering of an op whose outputs nothing reads (TF control only): no nodes."""
    if any(e.used(k) for k in range(len(e.outputs))):
        e.decline("its output is in use")


LOWERINGS: list[tuple[str, Callable[[LoweringEmitter], None]]] = [
    *((op, _identity) for op in _IDENTITIES),
    ("IdentityN", _identity_n), ("NoOp", write_nothing), ("Assert", write_nothing), ("ControlTrigger", write_nothing),
]  # fmt: skip
