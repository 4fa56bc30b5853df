"""The ``fused`` dialect: one op definition per fused op type the builtin rules produce.

Each definition declares the fused op's attributes (its parameters, read by the rule from the source
constants), its shape and dtype inference, and its numpy ``reference`` kernel, against which the rule's
numerical equivalence is proven and which the runtime executes.

Each op's module is imported when its definition is first made (:func:`definition`), so a conversion
pays only for the fused ops its model uses; :data:`OP_MODULES` names them without importing any.
"""

from __future__ import annotations

from importlib import import_module

from ...ir.opdef import OpDef

__all__ = ["OP_MODULES", "definition", "definitions"]

# Fused op name -> the module of this package that defines it, in registration order.
OP_MODULES: dict[str, str] = {
    "LayerNorm": "layer_norm",
    "InstanceNorm": "instance_norm",
    "BatchNorm": "batch_norm",
    "L2Normalize": "l2_normalize",
    "MultiHeadAttention": "multi_head_attention",
    "Gelu": "gelu",
    "HardSwish": "hard_swish",
    "Swish": "swish",
    "Clip": "clip",
    "DynamicRNN": "dynamic_rnn",
    "DynamicGRU": "dynamic_gru",
}


def definition(name: str) -> OpDef:
    """The definition of fused op ``name`` (a fresh object), importing its module.

    Raises:
        KeyError: ``name`` is not a builtin fused op.
    """
    made: OpDef = import_module(f"{__name__}.{OP_MODULES[name]}").definition()
    return made


def definitions() -> list[OpDef]:
    """Every fused op definition (fresh objects), in :data:`OP_MODULES` order."""
    return [definition(name) for name in OP_MODULES]
