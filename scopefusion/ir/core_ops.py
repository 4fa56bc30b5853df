"""The two ops every IR graph is made of besides computation: graph inputs and constants.

They form the ``ge`` dialect (``ge.Data``, ``ge.Const``, the names GE gives them); the IR core defines them
because :class:`~scopefusion.ir.graph.Graph` builds inputs and constants itself, and
:mod:`scopefusion.dialects.ge` presents them as that dialect.
"""

from __future__ import annotations

from .. import dtypes as _dt
from .attrs import INT, TENSOR
from .opdef import InferContext, OpDef

__all__ = ["CONST_OP", "DATA_OP", "core_ops"]

DATA_OP = "ge.Data"
CONST_OP = "ge.Const"


def core_ops() -> list[OpDef]:
    """The op definitions every IR graph relies on: graph inputs and constants (dialect ``ge``)."""
    data = OpDef("Data", "ge", doc="A graph input; its value is fed at run time.").output("y").attr("index", INT)
    data.set_infer_shape(lambda ctx: None).set_infer_dtype(lambda ctx: None)
    const = OpDef("Const", "ge", doc="A constant tensor.").output("y").attr("value", TENSOR)

    def const_dtype(ctx: InferContext) -> None:
        ctx.set_output_dtype(0, _dt.from_numpy(ctx.attr("value").dtype))

    def const_shape(ctx: InferContext) -> None:
        ctx.set_output_shape(0, ctx.attr("value").shape)

    const.set_infer_dtype(const_dtype).set_infer_shape(const_shape)
    return [data, const]
