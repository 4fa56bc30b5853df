"""DynamicRNNFusion: an LSTM run over a sequence by a loop → ``DynamicRNN(x[, init_h, init_c])``.

Keras ``LSTM(unroll=False)`` frozen with functional control flow (``lstm/while``, a ``While`` whose body
holds the cell, TensorList ops around it)::

    TensorListFromTensor(Transpose(x, [1, 0, 2])) ─► While{ z = BiasAdd(x_t @ W + h @ U, b)
        i, f, g, o = Split(z, 4);  c' = σ(f)·c + σ(i)·tanh(g);  h' = σ(o)·tanh(c') }
    ─► TensorListStack ─► Transpose([1, 0, 2])                   → DynamicRNN(x) : y, h_T, c_T

TF1 ``tf.compat.v1.nn.dynamic_rnn`` over a basic LSTM cell (``rnn/while/...``: ``TensorArrayV3``,
``Enter`` / ``Merge`` / ``Switch`` / ``NextIteration`` / ``Exit`` / ``LoopCond``, the cell under
``rnn/while/lstm_cell``)::

    TensorArrayScatterV3(Transpose(x)) ─► frame{ z = BiasAdd(ConcatV2(x_t, h) @ K, b)
        i, j, f, o = Split(z, 4);  c' = c·σ(f + forget_bias) + σ(i)·tanh(j);  h' = tanh(c')·σ(o) }
    ─► TensorArrayGatherV3 ─► Transpose                          → DynamicRNN(x) : y, h_T, c_T

The fused op replaces the whole loop (the ``While`` with its bodies, or every node of the TF1 frame)
with the nodes that only feed it (unstacking, zero initial states, trip-count arithmetic, weights) and
the stacking after it. Its inputs: the sequence ``x`` (batch-major when both transposes are claimed,
else the time-major tensor the loop unstacks), and ``init_h`` / ``init_c`` unless both initial states
are zeros. Its outputs: the output sequence (Keras ``return_sequences=False``: the last output) and the
final ``h`` and ``c`` when something reads them.

Canonical layout (GE's DynamicRNN): ``w`` ``[input_size + hidden_size, 4·hidden_size]`` (the rows for
``x_t`` first, then those for ``h``) and ``b`` ``[4·hidden_size]``, gate blocks in the order **i, j, f,
o** (input, cell candidate, forget, output). The rearrangement is not assumed from the framework: the
rule reads which ``Split`` output feeds which place of the cell equations, and
:func:`affine` reads each gate's pre-activation as matrices of ``x_t`` and ``h`` plus a
bias. So Keras' ``i, f, c, o`` blocks of ``kernel`` / ``recurrent_kernel`` are stacked and reordered to
``i, j, f, o``; TF's ``i, j, f, o`` concatenated kernel keeps its order; a constant added to a gate's
pre-activation (TF's ``forget_bias``) is folded into ``b``.

Refused with the reason: a cell whose activations are not tanh (cell input and output) and sigmoid
(gates) — the cell equations' pattern names the node that differs; a gate pre-activation that is not
affine in ``x_t`` and ``h`` (peepholes, projections, layer-normalized cells); a loop that is not one
pass over the whole sequence (``sequence_length`` masking, another trip count, a second sequence); an
intermediate of the loop read outside it (validation).

General (on by default), where CANN keeps its DynamicRNN passes off and trusts the names: here every
fusion is proven from the dataflow — the trip count, the read and write positions, the cell's
equations and the weights read from the constants — and validation refuses a loop any of whose values
escapes, so an accepted fusion computes exactly what the loop computed.

Loops of one state are left to DynamicGRUFusion. The candidates, the claim and the port maps are
:class:`~scopefusion.fusion_rules.base.recurrent.RecurrentLoopPass`'s, shared with it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Sequence

import numpy as np

from scopefusion.scope import (
    DataflowPattern,
    Match,
    Refused,
)

from .base.constants import ADD as ADD_OPS
from .base.recurrent import ACTIVATIONS, Affine, Cell, RecurrentLoopPass, activation_mismatch, affine

if TYPE_CHECKING:  # pragma: no cover
    from .rnn_loops import SequenceLoop
    from .rnn_values import Tensor

__all__ = ["DynamicRNNFusion", "LSTM_CELL", "LSTM_SKELETON", "PASS", "lstm_pattern"]


def lstm_pattern(gate: Sequence[str], act: Sequence[str], name: str) -> DataflowPattern:
    """The LSTM state update with gate activations ``gate`` and cell activations ``act`` (op types), the
    four gate pre-activations as variables."""

    def lstm_cell(op: Any, c_prev: Any, f: Any, i: Any, j: Any, o: Any) -> Any:
        kept = op.Mul(c_prev, op.op(gate, f))
        new_c = op.op(ADD_OPS, kept, op.Mul(op.op(gate, i), op.op(act, j)), _name="new_c")
        return op.Mul(op.op(act, new_c), op.op(gate, o), _name="new_h")

    return DataflowPattern(lstm_cell, name=name, deferred=True)


LSTM_CELL = lstm_pattern(("Sigmoid",), ("Tanh",), "lstm_cell")
LSTM_SKELETON = lstm_pattern(ACTIVATIONS, ACTIVATIONS, "lstm_skeleton")


class DynamicRNNFusion(RecurrentLoopPass):
    """An LSTM loop → ``DynamicRNN``; see the module docstring."""

    name = "DynamicRNNFusion"
    fused_type = "DynamicRNN"
    num_states = 2
    what = "an LSTM"

    def cell(self, seq: SequenceLoop) -> Cell:
        body = seq.loop.body
        _, new_h, index = body.producer(seq.written)
        found = LSTM_CELL.match_at(body.graph, new_h)
        if not isinstance(found, Match) or index != 0:
            expected = {"Sigmoid": 3, "Tanh": 2}
            other = activation_mismatch(body.graph, LSTM_SKELETON, new_h, expected, "the cell", self.what)
            raise Refused(other or f"the value written per step does not follow the LSTM equations: {found}")
        c = self.state_var(seq, found["c_prev"])
        if c is None or not body.same(c.next, (found["new_c"].name, 0)):
            raise Refused(f"the cell state {found['c_prev'][0]} is not the loop state {found['new_c'].name} updates")
        h = next(v for v in seq.states if v is not c)
        if not body.same(h.next, seq.written):
            raise Refused(f"the loop's second state is not the output {new_h.name} of the cell")
        x_t, h_t = seq.x_t, body.resolve(h.body)[1]
        leaves: dict[Tensor, int | None] = {x_t: seq.input_size, h_t: None}
        gates: list[Affine] = [affine(body, found[g], leaves) for g in ("i", "j", "f", "o")]
        hidden = gates[0].width
        if any(g.width != hidden for g in gates):
            raise Refused(f"the gates have {[g.width for g in gates]} units, not one size")
        if any(g.terms.get(h_t, np.zeros((hidden, hidden))).shape[0] != hidden for g in gates):
            raise Refused(f"the recurrent weights do not map the {hidden}-unit state to {hidden} units")
        dtype = self.weights_dtype(seq)
        w_x = np.hstack([g.matrix(x_t, seq.input_size) for g in gates])
        w = np.vstack([w_x, np.hstack([g.matrix(h_t, hidden) for g in gates])])
        b = np.concatenate([g.bias for g in gates])
        return Cell({"hidden_size": hidden, "w": w.astype(dtype), "b": b.astype(dtype)}, [h, c])


PASS = DynamicRNNFusion()
