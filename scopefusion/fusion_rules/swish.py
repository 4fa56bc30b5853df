"""Swish / SiLU → ``Swish(x, scale)``::

    Mul(x, Sigmoid(x))                   → Swish(x, scale=1)      Keras swish/silu, PyTorch SiLU export
    Mul(x, Sigmoid(Mul(x, beta)))        → Swish(x, scale=beta)   tf.nn.silu(x, beta)

Operands of ``Mul`` match in either order and ``beta`` through ``Identity`` reads. ``tf.nn.silu``'s
custom gradient leaves an ``IdentityN`` that reads ``x`` and ``beta`` as well; it stays outside and
keeps reading them.

General (on by default): the dataflow pins ``x`` as the very tensor both under the sigmoid and
multiplied by it, so gating (``x * sigmoid(g)`` with ``g`` another tensor: GLU, LSTM gates,
squeeze-and-excitation) never matches, and ``beta`` must be a scalar constant. A Swish-named scope
whose ops do not compute a Swish is refused with the reason.

Candidates come from the op-type index (each ``Sigmoid`` node); the pattern is anchored at the ``Mul``
that consumes it, so graphs without scope names fuse the same way.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from scopefusion.fusion_rules.base.anchored import AnchoredDataflowPass, downstream
from scopefusion.scope import DataflowPattern, FusionScopesResult, Match, ScopeGraph

__all__ = ["PASS", "SwishFusion"]


def silu(op, x):
    return op.Mul(x, op.Sigmoid(x), _name="out")


def swish_beta(op, x):
    return op.Mul(x, op.Sigmoid(op.Mul(x, op.const("beta"))), _name="out")


PATTERNS = (("silu", DataflowPattern(silu, deferred=True)), ("beta", DataflowPattern(swish_beta, deferred=True)))


class SwishFusion(AnchoredDataflowPass):
    """Fuses ``x * sigmoid(beta * x)`` into ``Swish``; see the module docstring."""

    name = "SwishFusion"
    fused_type = "Swish"
    what = "Swish"
    seed_types = ("Sigmoid",)
    scope_words = ("swish", "silu")
    patterns = PATTERNS
    no_match = "no Mul consumes it"

    def anchors(self, graph: ScopeGraph, seed: str) -> list[str]:
        return downstream(graph, seed, 1, ("Mul",))

    def parameters(self, match: Match, tag: Any, result: FusionScopesResult) -> str | None:
        scale = 1.0
        if "beta" in match.captures:
            beta = np.asarray(match.value("beta"))
            if beta.size != 1 or beta.ndim > 1:
                return f"the sigmoid's factor {match['beta'].name} has shape {beta.shape}, not a scalar"
            scale = float(beta.reshape(()))
        result.attrs["scale"] = scale
        return None


PASS = SwishFusion()
