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
    from . import (  # issue 6  # issue 6: recurrent loops
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

    return [
        layer_norm.definition(),
        instance_norm.definition(),
        batch_norm.definition(),
        l2_normalize.definition(),
        *(m.definition() for m in (multi_head_attention, gelu, hard_swish, swish, clip)),  # issue 6
        dynamic_rnn.definition(), dynamic_gru.definition(),  # issue 6: recurrent loops
    ]
