"""Op definitions by dialect: ``ge`` (graph inputs, constants), ``tf`` (TensorFlow's op registry),
``onnx`` (ONNX's operator schemas) and ``fused`` (the fused ops of the fusion rules).

:func:`default_op_registry` assembles a fresh :class:`~scopefusion.ir.opdef.OpRegistry` with all of
them; the ONNX definitions follow the model's opset.
"""

from __future__ import annotations

from functools import lru_cache
from typing import TYPE_CHECKING, Iterable, Iterator

from ..ir.opdef import OpDef, OpRegistry

if TYPE_CHECKING:  # pragma: no cover
    from ...parser.source_graph import SourceGraph

__all__ = ["DEFAULT_ONNX_OPSET", "default_op_registry"]

DEFAULT_ONNX_OPSET = 17


def default_op_registry(source: "SourceGraph | None" = None, *, extra: Iterable[OpDef] = ()) -> OpRegistry:
    """A registry with every builtin definition; ONNX ones at ``source``'s default-domain opset.

    The registry and its definitions are new objects on each call (copies of definitions made once per
    process), so changing one registry changes no other. For an ONNX ``source``, onnxruntime's
    definitions (contrib ops, ``SimplifiedLayerNormalization``) are included only when the model has
    an op that ONNX's default domain does not define at its opset: a model that cannot use them does
    not pay for loading onnxruntime.
    """
    registry = OpRegistry(d.copy() for d in _prototypes("ge"))
    if source is None or not source.is_onnx:
        for d in _prototypes("tf"):
            registry.register(d.copy())
    if source is None or source.is_onnx:
        opset = DEFAULT_ONNX_OPSET
        if source is not None:
            opset = source.opset_imports.get("", source.opset_imports.get("ai.onnx", DEFAULT_ONNX_OPSET))
        onnx_defs = _prototypes("onnx", opset)
        for d in onnx_defs:
            registry.register(d.copy())
        if source is None or _uses_ops_beyond(source, {d.name for d in onnx_defs}):
            for d in _prototypes("onnxruntime"):
                registry.register(d.copy())
    for d in _prototypes("fused"):
        registry.register(d.copy())
    for d in extra:
        registry.register(d)
    return registry


@lru_cache(maxsize=None)
def _prototypes(dialect: str, opset: int = 0) -> tuple[OpDef, ...]:
    """A dialect's builtin definitions, made once per process; registries get copies, never these."""
    if dialect == "ge":
        from . import ge

        return tuple(ge.definitions())
    if dialect == "tf":
        from . import tf

        return tuple(tf.definitions())
    if dialect == "onnx":
        from . import onnx

        return tuple(onnx.definitions(opset, onnxruntime=False))
    if dialect == "onnxruntime":
        from .onnx.microsoft import microsoft_definitions, onnxruntime_extensions

        return tuple(onnxruntime_extensions() + microsoft_definitions())
    from . import fused

    return tuple(fused.definitions())


def _uses_ops_beyond(source: "SourceGraph", default_domain_ops: set[str]) -> bool:
    """Whether some node of ``source`` (bodies included) is outside ONNX's default domain or neither one of
    ``default_domain_ops`` nor a graph input, initializer or outer-scope value of the frontend."""
    from ..parser.source_graph import INITIALIZER_OP, INPUT_OP, OUTER_SCOPE_OP

    known = default_domain_ops | {INITIALIZER_OP, INPUT_OP, OUTER_SCOPE_OP}
    return any(node.domain not in ("", "ai.onnx") or node.op_type not in known for node in _all_nodes(source))


def _all_nodes(source: "SourceGraph") -> Iterator:
    for node in source:
        yield node
        for body in node.subgraphs.values():
            yield from _all_nodes(body)
