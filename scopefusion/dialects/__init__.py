"""Op definitions by dialect: ``ge`` (graph inputs, constants), ``tf`` (TensorFlow's op registry),
``onnx`` (ONNX's operator schemas) and ``fused`` (the fused ops of the fusion rules).

:func:`default_op_registry` assembles a fresh :class:`~scopefusion.ir.opdef.OpRegistry` with all of
them; the ONNX definitions follow the model's opset.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Iterable

from ..ir.opdef import OpDef, OpRegistry

if TYPE_CHECKING:  # pragma: no cover
    from ...parser.source_graph import SourceGraph

__all__ = ["DEFAULT_ONNX_OPSET", "default_op_registry"]

DEFAULT_ONNX_OPSET = 17


def default_op_registry(source: "SourceGraph | None" = None, *, extra: Iterable[OpDef] = ()) -> OpRegistry:
    """A registry with every builtin definition; ONNX ones at ``source``'s default-domain opset."""
    from . import fused as fused_ops
    from . import ge as ge_ops
    from . import onnx as onnx_ops
    from . import tf as tf_ops

    registry = OpRegistry(ge_ops.definitions())
    if source is None or not source.is_onnx:
        for d in tf_ops.definitions():
            registry.register(d)
    if source is None or source.is_onnx:
        opset = DEFAULT_ONNX_OPSET
        if source is not None:
            opset = source.opset_imports.get("", source.opset_imports.get("ai.onnx", DEFAULT_ONNX_OPSET))
        for d in onnx_ops.definitions(opset):
            registry.register(d)
    for d in fused_ops.definitions():
        registry.register(d)
    for d in extra:
        registry.register(d)
    return registry
