"""Malformed framework attributes are errors, not silently dropped or copied through.

An attribute the op definition declares but whose value has another kind (a string where a list of
ints is expected), or a TF number attribute ``N`` that does not match the inputs given for the one
variadic input it counts, is a :class:`~scopefusion.errors.ParseError` naming the node, the attribute,
what was expected and what was found.
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

from ..errors import ParseError
from ..ir.opdef import OpDef, ParamType

__all__ = ["check_source_attrs"]


def _found(value: Any) -> str:
    text = repr(value)
    return f"{type(value).__name__} {text if len(text) <= 40 else text[:37] + '...'}"


def check_source_attrs(node_name: str, op: str, attrs: Mapping[str, Any], dropped: Sequence[str],
                       opdef: OpDef | None, num_inputs: int) -> None:
    """Raises ParseError for a declared attribute of the wrong kind or an ``N`` that contradicts the inputs."""
    if opdef is None:
        return
    for name in dropped:
        spec = opdef.attrs.get(name)
        if spec is not None:
            raise ParseError(
                f"node {node_name!r} ({op}): attribute {name!r} must be {spec.type_id.name}, found "
                f"{_found(attrs[name])}; the model is malformed"
            )
    count = attrs.get("N")
    if count is None:
        return
    dynamic = [s for s in opdef.inputs if s.param is ParamType.DYNAMIC]
    if isinstance(count, int) and not isinstance(count, bool) and len(dynamic) == 1:
        fixed = sum(1 for s in opdef.inputs if s.param is ParamType.REQUIRED)
        given = num_inputs - fixed
        if given != count:
            raise ParseError(
                f"node {node_name!r} ({op}): attribute 'N' is {count} but the node gives {given} "
                f"{dynamic[0].name!r} input(s); the model is malformed"
            )
