"""Builtin fusion passes, one module per rule, listed in one explicit ordered tuple.

A rule narrows candidates by scope features, confirms the dataflow with a pattern, reads its
parameters from the constants into the fusion result's attributes, and names a fused op type of the
``fused`` dialect (defined in :mod:`scopefusion.dialects.fused`). This package depends on
:mod:`scopefusion.scope` only.
"""

from __future__ import annotations

from typing import Any

__all__ = ["BUILTIN_RULES"]

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

# Pass instances in run order (after the user's passes).
BUILTIN_RULES: tuple[Any, ...] = (
    dynamic_rnn.PASS, dynamic_gru.PASS,  # recurrent loops first: they claim whole loops
    layer_norm.PASS,
    instance_norm.PASS,
    batch_norm.PASS,
    l2_normalize.PASS,
    multi_head_attention.PASS, gelu.PASS, hard_swish.PASS, swish.PASS, clip.PASS,
)
