"""The ``onnx`` dialect: one op definition per ONNX operator schema, made when a registry is built.

``definitions(opset)`` reads the installed ``onnx`` package's schemas for that opset (the package is
imported then, never when this module is imported) and returns fresh :class:`~scopefusion.ir.opdef.OpDef`
objects, dialect ``onnx``; with ``onnxruntime=True`` (the default) also onnxruntime's contrib ops,
dialect ``onnx:com.microsoft`` (the form the lead builder gives domain ``com.microsoft``), and its few own
default-domain ops (SimplifiedLayerNormalization), all backed by onnxruntime (:mod:`.microsoft`).
Register them in an
:class:`~scopefusion.ir.opdef.OpRegistry` of your own::

    registry = OpRegistry(core_ops() + definitions(17))

See :mod:`.schemas` for how a schema becomes a definition, :mod:`.infer` and :mod:`.control_flow` for
inference, :mod:`.kernels` for reference kernels and constant folding.
"""

from __future__ import annotations

from ...ir.opdef import OpDef

__all__ = ["DIALECT", "MICROSOFT_DIALECT", "definitions"]

DIALECT = "onnx"
MICROSOFT_DIALECT = "onnx:com.microsoft"


def definitions(opset: int, *, onnxruntime: bool = True) -> list[OpDef]:
    """The op definitions of ONNX's default domain at ``opset``; with ``onnxruntime``, also
    onnxruntime's contrib ops (dialect ``onnx:com.microsoft``) and its own default-domain ops.

    Raises:
        ValueError: ``opset`` is not a version the installed ``onnx`` knows.
    """
    from .schemas import default_domain_definitions

    out = default_domain_definitions(opset)
    if onnxruntime:
        from .microsoft import microsoft_definitions, onnxruntime_extensions

        out += onnxruntime_extensions() + microsoft_definitions()
    return out
