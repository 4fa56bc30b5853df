"""DynamicGRUFusion: a GRU run over a sequence by a loop → ``DynamicGRU(x[, init_h])``.

Keras ``GRU(unroll=False)`` frozen with functional control flow (a ``While`` whose body holds the cell),
``reset_after=True`` (the Keras default; ONNX ``linear_before_reset=1``)::

    While{ xz, xr, xn = Split(x_t @ W + bx, 3);  hz, hr, hn = slices of (h @ U + bh)
        z = σ(xz + hz);  r = σ(xr + hr);  n = tanh(xn + r·hn);  h' = z·h + (1 - z)·n }   → DynamicGRU(x)

``reset_after=False``: ``n = tanh(xn + (r·h) @ Un)``. TF1 ``dynamic_rnn`` over a GRU cell written as
TF's ``GRUCell`` (``rnn/while/gru_cell/gates``, ``.../candidate``)::

    frame{ r, u = Split(σ(ConcatV2(x_t, h) @ Kg + bg), 2)
        n = tanh(ConcatV2(x_t, r·h) @ Kc + bc);  h' = u·h + (1 - u)·n }                 → DynamicGRU(x)

The loop, the claim and the ports are DynamicRNNFusion's (:class:`~.dynamic_rnn.RecurrentLoopPass`):
the fused op replaces the whole loop; its inputs are the sequence and, unless it is zeros, the initial
state; its outputs the output sequence (or the last output) and the final state when it is read.

Canonical layout (GE's DynamicGRUV2 with ``gate_order="zrh"``, ONNX's GRU order): ``w_input``
``[input_size, 3·hidden_size]``, ``w_hidden`` ``[hidden_size, 3·hidden_size]``, ``b_input`` and
``b_hidden`` ``[3·hidden_size]``, gate blocks in the order **z, r, n** (update, reset, candidate), and
``reset_after``. Rearrangement, read from the dataflow (which slice of which product feeds which place of
the equations, :func:`~.dynamic_rnn.affine`): Keras' ``kernel`` / ``recurrent_kernel`` are already
z, r, h; TF's ``gates`` kernel is r, u (u = z) over ``[x_t, h]`` rows and is split into ``w_input`` /
``w_hidden``, its ``candidate`` kernel gives the n blocks. Biases of z and r are summed into ``b_input``
(they are only ever added together); n keeps its input and hidden biases apart, since with
``reset_after`` the reset gate multiplies the hidden one.

Refused with the reason: another activation than tanh (candidate) and sigmoid (gates), a gate that is
not affine in ``x_t`` and ``h``, a loop that is not one pass over the whole sequence, a value of the
loop read outside it. Loops of two states are left to DynamicRNNFusion.

General (on by default) for the reason DynamicRNNFusion is: every fusion is proven from the dataflow
and validated against escaping values.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Sequence

import numpy as np

from scopefusion.scope import DataflowPattern, Match, Refused

from .base.constants import ADD as ADD_OPS
from .base.recurrent import ACTIVATIONS, Affine, Cell, RecurrentLoopPass, activation_mismatch, affine, gate_affine

if TYPE_CHECKING:  # pragma: no cover
    from .rnn_loops import SequenceLoop
    from .rnn_values import Tensor

__all__ = ["DynamicGRUFusion", "GRU_SKELETON", "GRU_UPDATE", "PASS", "gru_pattern"]


def gru_pattern(act: Sequence[str], name: str) -> DataflowPattern:
    """``z·h + (1 - z)·act(n)``, with the update gate and the candidate's pre-activation as variables."""

    def gru_update(op: Any, h_prev: Any, z: Any, n: Any) -> Any:
        return op.op(ADD_OPS, op.Mul(z, h_prev), op.Mul(op.Sub(1.0, z), op.op(act, n)), _name="new_h")

    return DataflowPattern(gru_update, name=name, deferred=True)


GRU_UPDATE = gru_pattern(("Tanh",), "gru_update")
GRU_SKELETON = gru_pattern(ACTIVATIONS, "gru_skeleton")


class DynamicGRUFusion(RecurrentLoopPass):
    """A GRU loop → ``DynamicGRU``; see the module docstring."""

    name = "DynamicGRUFusion"
    fused_type = "DynamicGRU"
    num_states = 1
    what = "a GRU"

    def cell(self, seq: SequenceLoop) -> Cell:
        body = seq.loop.body
        _, new_h, index = body.producer(seq.written)
        found = GRU_UPDATE.match_at(body.graph, new_h)
        if not isinstance(found, Match) or index != 0:
            other = activation_mismatch(body.graph, GRU_SKELETON, new_h, {"Tanh": 1}, "the candidate", self.what)
            raise Refused(other or f"the value written per step does not follow the GRU update: {found}")
        (h,) = seq.states
        h_t = body.resolve(h.body)[1]
        if not body.same(found["h_prev"], h_t) or not body.same(h.next, seq.written):
            raise Refused(f"{new_h.name} does not update the loop's state {h_t[0]}")
        x_t = seq.x_t
        leaves: dict[Tensor, int | None] = {x_t: seq.input_size, h_t: None}
        z = gate_affine(body, found["z"], leaves)
        hidden = z.width
        leaves[h_t] = hidden
        reset_after, r, n_x, n_h = self._candidate(seq, found["n"], leaves, hidden)
        if any(g.width != hidden for g in (r, n_x, n_h)):
            raise Refused(f"the gates have {[g.width for g in (z, r, n_x, n_h)]} units, not one size")
        for g in (z, r):
            if g.terms.get(h_t, np.zeros((hidden, hidden))).shape[0] != hidden:
                raise Refused(f"the recurrent weights do not map the {hidden}-unit state to {hidden} units")
        dtype = self.weights_dtype(seq)
        size = seq.input_size
        w_input = np.hstack([z.matrix(x_t, size), r.matrix(x_t, size), n_x.matrix(x_t, size)])
        w_hidden = np.hstack([z.matrix(h_t, hidden), r.matrix(h_t, hidden), n_h.matrix(h_t, hidden)])
        b_input = np.concatenate([z.bias, r.bias, n_x.bias])
        b_hidden = np.concatenate([np.zeros(2 * hidden), n_h.bias])
        attrs = {
            "hidden_size": hidden,
            "reset_after": reset_after,
            "w_input": w_input.astype(dtype),
            "w_hidden": w_hidden.astype(dtype),
            "b_input": b_input.astype(dtype),
            "b_hidden": b_hidden.astype(dtype),
        }
        return Cell(attrs, [h])

    @staticmethod
    def _candidate(seq: SequenceLoop, n: Tensor, leaves: dict, hidden: int) -> tuple[bool, Affine, Affine, Affine]:
        """``(reset_after, r, n's input part, n's hidden part)`` from the candidate's pre-activation ``n``:
        ``xn + r·(h @ Un + bn)`` (reset after) or affine in ``x_t`` and ``r·h`` (reset before)."""
        body = seq.loop.body
        x_t, h_t = seq.x_t, body.resolve(seq.states[0].body)[1]
        # The one product of the reset gate with something: the gate is the factor that is a sigmoid gate.
        products = _products(body, n)
        if len(products) != 1:
            raise Refused(f"the candidate pre-activation {n[0]} holds {len(products)} products, not the reset gate's one")
        mul = products[0]
        for gate, other in ((mul.inputs[0], mul.inputs[1]), (mul.inputs[1], mul.inputs[0])):
            try:
                r = gate_affine(body, gate, {x_t: leaves[x_t], h_t: hidden})
            except Refused:
                continue
            if body.same(other, h_t):  # reset before: (r·h) @ Un
                rh = body.resolve((mul.name, 0))[1]
                whole = affine(body, n, {x_t: leaves[x_t], rh: hidden})
                n_x = Affine({x_t: whole.matrix(x_t, leaves[x_t])}, whole.bias, whole.width)
                n_h = Affine({h_t: whole.matrix(rh, hidden)}, np.zeros(whole.width), whole.width)
                return False, r, n_x, n_h
            _, add, _ = body.producer(n)
            if add.op_type not in ADD_OPS or not any(body.same(a, (mul.name, 0)) for a in add.inputs):
                raise Refused(f"{n[0]} does not add the reset product {mul.name} to the input's part")
            rest = next(a for a in add.inputs if not body.same(a, (mul.name, 0)))
            n_x = affine(body, rest, {x_t: leaves[x_t]})
            n_h = affine(body, other, {h_t: hidden})
            return True, r, n_x, n_h
        raise Refused(f"{mul.name} does not multiply by a sigmoid reset gate")


def _products(body: Any, tensor: Tensor, depth: int = 10) -> list[Any]:
    """The ``Mul`` nodes feeding ``tensor`` through adds, matmuls, concatenations and slices."""
    _, node, _ = body.producer(tensor)
    if node.op_type == "Mul":
        return [node]
    if depth < 0 or node.op_type not in ("BiasAdd", "MatMul", "ConcatV2", *ADD_OPS):
        return []
    found = []
    for t in node.inputs:
        if body.value(t) is None:
            found += [m for m in _products(body, t, depth - 1) if m not in found]
    return found


PASS = DynamicGRUFusion()
