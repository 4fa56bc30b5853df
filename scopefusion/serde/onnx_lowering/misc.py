"""Identities and no-ops: Identity, Snapshot, StopGradient, EnsureShape… → ``Identity`` (removed again by
the export's clean-up); ``IdentityN`` → one ``Identity`` per used output; ``NoOp`` / ``Assert`` /
``ControlTrigger`` → nothing (ONNX has no control edges); ``Print`` → its first input."""

from __future__ import annotations

from typing import Callable

from .emitter import LoweringEmitter

__all__ = ["LOWERINGS"]

_IDENTITIES = ("Identity", "Snapshot", "StopGradient", "PreventGradient", "CheckNumerics", "DebugIdentity",
               "EnsureShape", "PlaceholderWithDefault", "Print")


def _identity(e: LoweringEmitter) -> None:
    e.result("Identity", [e.input(0)])


def _identity_n(e: LoweringEmitter) -> None:
    for k in range(len(e.outputs)):
        if e.used(k):
            e.result("Identity", [e.input(k)], k)


def _nothing(e: LoweringEmitter) -> None:
    if any(e.used(k) for k in range(len(e.outputs))):
        e.decline("its output is in use")


LOWERINGS: list[tuple[str, Callable[[LoweringEmitter], None]]] = [
    *((op, _identity) for op in _IDENTITIES),
    ("IdentityN", _identity_n), ("NoOp", _nothing), ("Assert", _nothing), ("ControlTrigger", _nothing),
]  # fmt: skip
