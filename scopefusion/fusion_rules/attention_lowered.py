"""Keras attention einsums as tf2onnx lowers them, for :mod:`.multi_head_attention`.

tf2onnx writes each of Keras' two attention einsums as a batched MatMul between reshapes whose targets it
computes from the operands' own shapes::

    scores = Squeeze(Reshape(MatMul(Reshape(Transpose(Unsqueeze(q, [3]), [0, 2, 1, 3, 4]), flat_q),
                                    Transpose(Reshape(Transpose(Unsqueeze(k, [1]), [0, 3, 1, 2, 4]), flat_k),
                                              [0, 2, 1])),
                             unflat), [4])                                       BTNH,BSNH->BNTS
    context = Transpose(Squeeze(Reshape(MatMul(Reshape(Unsqueeze(p, [3]), flat_p),
                                               Transpose(Reshape(Transpose(Unsqueeze(v, [2]), [0, 3, 2, 4, 1]),
                                                                 flat_v), [0, 2, 1])),
                                        unflat), [4]), [0, 2, 1, 3])             BNTS,BSNH->BTNH

with ``flat_x = Concat(ReduceProd(Gather(Shape(x'), [0, 1])), [-1], Gather(Shape(x'), [4]))`` (the two
batch axes of the operand ``x'`` the Reshape reads merged, its last axis kept) and
``unflat = Concat(Max(Gather(Shape(a'), [0, 1]), Gather(Shape(b'), [0, 1])), Gather(Shape(a'), [2]),
Gather(Shape(b'), [3]), [1])``. The patterns fix every axis and permutation by value; :func:`lowered_claims`
proves the computed targets are these, from the dataflow, and returns the nodes computing them (the fusion
claims them: they read its intermediates).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from scopefusion.scope import Match, ScopeGraph

from .base.constants import const_value

__all__ = ["TF2ONNX_MASK", "ctx_lowered", "lowered_claims", "scores_lowered"]

Tensor = tuple[str, int]


def _perm(values: list[int]) -> Any:
    def check(node: Any) -> str | None:
        perm = node.attrs.get("perm")
        if perm is None or [int(p) for p in perm] != values:
            return f"perm {None if perm is None else list(perm)}, expected {values}"
        return None

    return check


def _squeeze_4(op: Any, x: Any, name: str) -> Any:
    return op.Squeeze(x, op.const(f"{name}_axes", value=[4]), _name=name)


def scores_lowered(op: Any, q: Any, k: Any) -> Any:
    """BTNH,BSNH->BNTS as tf2onnx writes it (see the module docstring); the capture ``qk`` is the Squeeze."""
    left = op.Reshape(op.Transpose(op.Unsqueeze(q, op.const("qk_a_axes", value=[3]), _name="qk_a_unsqueeze"),
                                   _check=_perm([0, 2, 1, 3, 4]), _name="qk_a_perm"), op.var("qk_a_target"),
                      _name="qk_a_flat")
    right = op.Reshape(op.Transpose(op.Unsqueeze(k, op.const("qk_b_axes", value=[1]), _name="qk_b_unsqueeze"),
                                    _check=_perm([0, 3, 1, 2, 4]), _name="qk_b_perm"), op.var("qk_b_target"),
                       _name="qk_b_flat")
    product = op.MatMul(left, op.Transpose(right, _check=_perm([0, 2, 1])), _name="qk_mm")
    return _squeeze_4(op, op.Reshape(product, op.var("qk_target"), _name="qk_unflat"), "qk")


def ctx_lowered(op: Any, p: Any, v: Any) -> Any:
    """BNTS,BSNH->BTNH as tf2onnx writes it; the capture ``ctx`` is the closing Transpose."""
    left = op.Reshape(op.Unsqueeze(p, op.const("ctx_a_axes", value=[3]), _name="ctx_a_unsqueeze"),
                      op.var("ctx_a_target"), _name="ctx_a_flat")
    right = op.Reshape(op.Transpose(op.Unsqueeze(v, op.const("ctx_b_axes", value=[2]), _name="ctx_b_unsqueeze"),
                                    _check=_perm([0, 3, 2, 4, 1]), _name="ctx_b_perm"), op.var("ctx_b_target"),
                       _name="ctx_b_flat")
    product = op.MatMul(left, op.Transpose(right, _check=_perm([0, 2, 1])), _name="ctx_mm")
    merged = _squeeze_4(op, op.Reshape(product, op.var("ctx_target"), _name="ctx_unflat"), "ctx_squeeze")
    return op.Transpose(merged, _check=_perm([0, 2, 1, 3]), _name="ctx")


def _onnx_select(op: Any, logits: Any, mask: Any) -> Any:
    """tf2onnx's SelectV2 of Keras' mask: ``Cast(c) * scores + fill * Cast(Not(c))`` with
    ``c = And(Expand(True, Shape(scores)), mask)``: the scores where ``c``, ``fill`` elsewhere (finite scores)."""
    shape = op.Cast(op.Cast(op.Shape(logits, _name="ones_shape")))
    cond = op.And(op.Expand(op.const("ones_value", value=True), shape), mask, _name="mask_and")
    kept = op.Mul(op.Cast(cond, _attrs={"to": 1}), logits)
    return op.Add(kept, op.Mul(op.const("fill"), op.Cast(op.Not(cond), _attrs={"to": 1})), _name="masked")


TF2ONNX_MASK = (True, _onnx_select)


# ---------------------------------------------------------------------------------------- proving the targets
class _Targets:
    """Reads the computed reshape targets of one lowered einsum; ``nodes`` collects what computes them."""

    def __init__(self, graph: ScopeGraph) -> None:
        self.graph = graph
        self.nodes: list[str] = []

    def _node(self, tensor: Tensor) -> Any:
        node = self.graph.node(tensor[0])
        while node.op_type == "Cast" and node.inputs and node.value is None:
            self.nodes.append(node.name)
            node = self.graph.node(node.inputs[0][0])
        return node

    def dims(self, tensor: Tensor) -> tuple[Tensor, list[int]] | None:
        """``Gather(Shape(t), indices)`` → ``(t, indices)``."""
        gather = self._node(tensor)
        if gather.op_type != "Gather" or int(gather.attrs.get("axis", 0)) != 0 or len(gather.inputs) != 2:
            return None
        indices = const_value(self.graph, gather.inputs[1])
        shape = self._node(gather.inputs[0])
        if indices is None or indices.ndim != 1 or shape.op_type != "Shape" or shape.attrs.get("start") is not None:
            return None
        self.nodes += [gather.name, shape.name]
        return shape.inputs[0], [int(i) for i in indices]

    def concat(self, tensor: Tensor, parts: int) -> list[Tensor] | None:
        node = self._node(tensor)
        if node.op_type != "Concat" or int(node.attrs.get("axis", 0)) != 0 or len(node.inputs) != parts:
            return None
        self.nodes.append(node.name)
        return list(node.inputs)

    def flat_of(self, reshape: Any) -> bool:
        """The target is ``[d0 * d1, -1, d4]`` of the Reshape's own input."""
        pieces = self.concat(reshape.inputs[1], 3)
        if pieces is None:
            return False
        prod = self._node(pieces[0])
        if prod.op_type != "ReduceProd" or not int(prod.attrs.get("keepdims", 1)) or len(prod.inputs) != 1:
            return False
        self.nodes.append(prod.name)
        minus_one = const_value(self.graph, pieces[1])
        return (
            self.dims(prod.inputs[0]) == (reshape.inputs[0], [0, 1])
            and minus_one is not None and [int(v) for v in minus_one.reshape(-1)] == [-1]
            and self.dims(pieces[2]) == (reshape.inputs[0], [4])
        )

    def unflat_of(self, reshape: Any, a: Tensor, b: Tensor) -> bool:
        """The target is ``[max(a.batch, b.batch)..., a.d2, b.d3, 1]`` of the product's two operands."""
        pieces = self.concat(reshape.inputs[1], 4)
        if pieces is None:
            return False
        batch = self._node(pieces[0])
        if batch.op_type != "Max" or len(batch.inputs) != 2:
            return False
        self.nodes.append(batch.name)
        one = const_value(self.graph, pieces[3])
        return (
            sorted([self.dims(t) for t in batch.inputs], key=repr) == sorted([(a, [0, 1]), (b, [0, 1])], key=repr)
            and self.dims(pieces[1]) == (a, [2])
            and self.dims(pieces[2]) == (b, [3])
            and one is not None and [int(v) for v in np.asarray(one).reshape(-1)] == [1]
        )


def lowered_claims(graph: ScopeGraph, core: Match) -> list[str] | str:
    """The nodes computing the reshape targets of a lowered scores / context pair, or why a target is not
    the one the einsum needs."""
    targets = _Targets(graph)
    for tag, (a_src, b_src) in (("qk", ("qk_a_perm", "qk_b_perm")), ("ctx", ("ctx_a_unsqueeze", "ctx_b_perm"))):
        for side in ("a", "b"):
            flat = core[f"{tag}_{side}_flat"]
            if not targets.flat_of(flat):
                return f"{flat.name} does not merge the two batch axes of its operand as the einsum needs"
        unflat = core[f"{tag}_unflat"]
        if not targets.unflat_of(unflat, (core[a_src].name, 0), (core[b_src].name, 0)):
            return f"{unflat.name} does not restore the batch axes and the product's two lengths"
    return list(dict.fromkeys(targets.nodes))  # the constants they read are absorbed by the fusion
