"""Op definitions of the ``fused`` dialect: one per fused op type a builtin rule produces."""

from __future__ import annotations

from ..ir_builder.opdef import OpDef

__all__ = ["fused_definitions"]


def fused_definitions() -> list[OpDef]:
    """Every fused op definition (a fresh list of fresh definitions)."""
    return []
