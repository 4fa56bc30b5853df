"""Builtin fusion passes, one module per rule, listed in one explicit ordered tuple.

:func:`default_fusion_setup` makes the pass registry (user rules first, then the builtins) and the op
parser registry (with each fused op type's parameter parser) that ``convert`` uses.
"""

from __future__ import annotations

from os import PathLike
from typing import Any, Iterable

__all__ = ["BUILTIN_RULES", "default_fusion_setup"]

# (pass class or instance, fused op type, fused parameter parser or None), in run order.
BUILTIN_RULES: tuple[tuple[Any, str, Any], ...] = ()


def default_fusion_setup(
    *,
    rules: Iterable[str | PathLike] = (),
    enable: Iterable[str] = (),
    disable: Iterable[str] = (),
    entry_points: bool = True,
):
    """``(PassRegistry, OpParserRegistry)`` with user rules (files, then installed packages) before the builtins."""
    from ..ir_builder.op_parsers import default_op_parsers
    from ..scope import PassRegistry

    registry = PassRegistry()
    for path in rules:
        registry.load_rules_file(path)
    if entry_points:
        registry.load_entry_points()
    registry.load_builtins([rule for rule, _, _ in BUILTIN_RULES])
    registry.configure(enable=tuple(enable), disable=tuple(disable))
    parsers = default_op_parsers()
    for _, fused_type, parser in BUILTIN_RULES:
        if parser is not None:
            parsers.register_fused(fused_type, parser)
    return registry, parsers
