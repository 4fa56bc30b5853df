"""The ``fused`` dialect: one op definition per fused op type the builtin rules produce.

Each definition declares the fused op's attributes (its parameters, read by the rule from the source
constants), its shape and dtype inference, and its numpy ``reference`` kernel, against which the rule's
numerical equivalence is proven and which the runtime executes.
"""

from __future__ import annotations

from ...ir.opdef import OpDef

__all__ = ["definitions"]


def definitions() -> list[OpDef]:
    """Every fused op definition (fresh objects)."""
    from . import (
        batch_norm,
        clip,
        dynamic_gru,
        dynamic_rnn,
        gelu,
        hard_swish,
        instance_norm,
        l2_normalize,
        layer_norm,
        multi_head_attention,
        swish,
    )

    modules = (
        layer_norm, instance_norm, batch_norm, l2_normalize, multi_head_attention, gelu, hard_swish, swish, clip,
        dynamic_rnn, dynamic_gru,
    )  # fmt: skip
    return [m.definition() for m in modules]
