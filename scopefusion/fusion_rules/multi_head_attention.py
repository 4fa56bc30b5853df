"""Multi-head attention → ``MultiHeadAttention(query, key, value[, mask])``.

The core, in every framework's spelling (``BatchMatMulV2(adj_y)`` / ``MatMul(q, Transpose(k))`` /
Keras' ``Einsum``; the scale after the scores, on ``q`` before them, split as ``sqrt`` on both sides as
PyTorch's ``scaled_dot_product_attention`` export does, as a division, or absent)::

    MatMul(Softmax(Add(Mul(MatMul(q, Transpose(k)), scale), mask)), v)

and the scores masked before the Softmax in one of these spellings (attributes of the fused op)::

    Add(scores, mask)                                          mask_kind="additive": BERT's (1 - m) * -10000,
                                                               PyTorch's -inf key padding
    SelectV2|Where(mask, scores, fill)                         mask_kind="boolean", mask_fill=fill
    SelectV2(LogicalAnd(Fill(Shape(scores), True), mask), scores, fill)        the same, Keras' attention_mask
    SelectV2(LogicalAnd(Fill(Shape(scores), True), band_part(ones[Sq, Sk], -1, 0)[None, None]), scores, fill)
                                                               causal=1, mask_fill=fill: Keras' use_causal_mask

A mask applied to the probabilities after the Softmax is refused with that reason.

with, when all three inputs and the output have them, the projections and the head split / merge::

    q = Transpose(Reshape(BiasAdd(MatMul(query, Wq), bq), [-1, S, H, d]), [0, 2, 1, 3])   TF1 BERT, ONNX
    q = Add(Reshape(BatchMatMulV2(query, Reshape(Wq)), [-1, S, H, d]), bq)                  Keras 3
    q = Add(Einsum(query, Wq), bq)                                                            Keras 2 / older 3
    q = MatMul(query, Wq)                                                                     one head, no split
    out = BiasAdd(MatMul(Reshape(Transpose(ctx, [0, 2, 1, 3]), [-1, H*d]), Wo), bo)          (Wo optional)
        → MultiHeadAttention(query, key, value[, mask], input_layout="BSH", num_heads=H, head_size=d,
                             scale, query_weight=Wq, query_bias=bq, ..., out_weight=Wo, out_bias=bo)

Split and merge targets are read in every spelling that computes the same shape (see
:mod:`.base.shapes`): constants, ``Concat`` / ``Pack`` of parts, and targets with one entry computed at
run time (google-research BERT's ``Pack(tf.shape(x)[0], S, H, d)``, tf2onnx's ``Shape / Slice / Unsqueeze /
Concat`` chains), which equal the same target with ``-1`` there; such a computed target's edge is dropped from
the fusion (``drop_input``). tf2onnx's key transpose merged into its split (``[0, 2, 3, 1]``) is read too.

When the projections are not there in a known form (PyTorch's packed ``in_proj`` export splits q/k/v
with ``Reshape / Unsqueeze / Transpose / Squeeze / Gather``), only the core is fused, on the per-head
tensors: ``MultiHeadAttention(q, k, v[, mask], input_layout="BNSD")``, its head count and size read from
the ``Reshape`` that produces ``q`` (or from the merge after the core).

NOTE: the weights and biases become attributes, reshaped to ``[in, H*d]`` / ``[H*d]`` / ``[H*d, out]``,
not inputs: every framework stores them differently (Keras ``[E, H, d]``, TF ``[E, H*d]``, PyTorch's
packed ``[3E, E]``), and an attribute in one canonical layout keeps the fused op's meaning independent of
the source. Their constants are absorbed by the fusion.

General (on by default): the dataflow is confirmed end to end; the projection, split and merge
constants are checked against each other (``H``, ``d``, permutations ``[0, 2, 1, 3]``, einsum equations
read for what they compute, Softmax over the last axis); the scale is read from the constants. A
scope named like attention that holds matrix products but no such dataflow (no Softmax, a Softmax over
another axis) is refused with the reason, and so is an attention whose probabilities or scores are also
used elsewhere (the scope layer refuses intermediates leaving the fusion).

Candidates come from the op-type index: each ``Softmax``, the core anchored at the product that
consumes it. The fusion takes the name of the Softmax's scope (``.../attention/self``).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from scopefusion.fusion_rules.base.anchored import best_match, downstream, seeded_miss
from scopefusion.scope import (
    FusionScopesResult,
    Match,
    PatternCheck,
    Refused,
    Scope,
    ScopeBasePass,
    ScopeGraph,
    ScopesResult,
    claimed_nodes,
    map_ports,
    reads_op_type_counts,
)

from ..records import Record
from .attention_lowered import lowered_claims
from .attention_patterns import (
    ATTENTION_NAMES,
    ATTENTION_WORDS,
    BMM,
    COMPATIBLE,
    CORE_PATTERNS,
    OUTPUTS,
    PRODUCTS,
    PROJECTIONS,
    CoreKind,
)
from .base.constants import const_value
from .base.shapes import reshape_target, shape_parts

__all__ = ["PASS", "MultiHeadAttentionFusion"]


# ---------------------------------------------------------------------------------------- reading constants
def _ints(match: Match, name: str) -> list[int]:
    return [int(v) for v in np.asarray(match.value(name)).reshape(-1)]


def _perm(match: Match) -> list[int]:
    if "perm" in match.captures:
        return _ints(match, "perm")
    return [int(v) for v in match["transpose"].attrs["perm"]]


def _scalar(match: Match, name: str) -> float:
    value = np.asarray(match.value(name))
    if value.size != 1:
        raise Refused(f"{match[name].name} has shape {value.shape} where a scalar scale is expected")
    return float(value.reshape(()))


def _equation(node: Any) -> tuple[list[str], str]:
    eq = node.attrs.get("equation", "")
    eq = eq.decode() if isinstance(eq, bytes) else str(eq)
    if "->" not in eq or "." in eq:
        raise Refused(f"{node.name} has the einsum equation {eq!r}, expected explicit operands and output")
    ins, out = eq.replace(" ", "").split("->")
    return ins.split(","), out


def _check_scores_einsum(node: Any, q_slot: int) -> None:
    (a, b), out = _equation(node)
    q, k = (a, b) if q_slot == 0 else (b, a)
    ok = (
        len(q) == len(k) == len(out) == 4
        and len(set(q + k)) == 5
        and q[0] == k[0] == out[0]
        and q[2] == k[2] == out[1]
        and q[3] == k[3]
        and q[3] not in out
        and out[2] == q[1]
        and out[3] == k[1]
    )
    if not ok:
        raise Refused(f"{node.name}: einsum {node.attrs.get('equation')!r} does not contract q and k per head")


def _check_ctx_einsum(node: Any) -> None:
    (p, v), out = _equation(node)
    ok = (
        len(p) == len(v) == len(out) == 4
        and p[0] == v[0] == out[0]
        and p[1] == v[2] == out[2]
        and p[2] == out[1]
        and p[3] == v[1]
        and p[3] not in out
        and v[3] == out[3]
    )
    if not ok:
        raise Refused(f"{node.name}: einsum {node.attrs.get('equation')!r} does not weight v by the probabilities")


def _check_dense_einsum(node: Any, spec_in: str, spec_w: str, spec_out: str) -> None:
    (x, w), out = _equation(node)
    letters = {c: i for i, c in enumerate(dict.fromkeys(x + w))}
    canon = lambda s: "".join(chr(ord("a") + letters[c]) if c in letters else "?" for c in s)  # noqa: E731
    if (canon(x), canon(w), canon(out)) != (spec_in, spec_w, spec_out):
        raise Refused(f"{node.name}: einsum {node.attrs.get('equation')!r}, expected {spec_in},{spec_w}->{spec_out}")


def _softmax_axis_reason(graph: ScopeGraph, node: Any, rank: int) -> str | None:
    if "axis" not in node.attrs:
        if node.domain == "" and graph.source.is_onnx:
            opset = graph.source.opset_imports.get("", graph.source.opset_imports.get("ai.onnx", 13))
            if opset < 13:
                return f"{node.name} is an opset-{opset} Softmax, which normalizes over the flattened trailing axes"
        return None
    axis = int(node.attrs["axis"])
    if axis not in (-1, rank - 1):
        return f"{node.name} normalizes over axis {axis}, not the last axis"
    return None


class Candidate(Record):
    """What one attention fusion claims and reads."""

    _fields = ("softmax", "core", "kind", "layout", "projections", "output", "attrs", "dropped", "extra")

    def __init__(
        self,
        softmax: str,
        core: Match,
        kind: CoreKind,
        layout: str = "BNSD",
        projections: list[Match] | None = None,
        output: Match | None = None,
        attrs: dict[str, Any] | None = None,
        dropped: list[tuple[str, int]] | None = None,
        extra: list[str] | None = None,
    ) -> None:
        self.softmax = softmax
        self.core = core
        self.kind = kind
        self.layout = layout
        self.projections = [] if projections is None else projections
        self.output = output
        self.attrs = {} if attrs is None else attrs
        self.dropped = [] if dropped is None else dropped
        self.extra = [] if extra is None else extra
    """Nodes claimed besides the matches' (the computed reshape targets of tf2onnx's lowered einsums)."""
    """(Reshape, slot) of split / merge targets computed at run time: read as shapes, their edges dropped."""

    @property
    def matches(self) -> list[Match]:
        return [self.core, *self.projections] + ([self.output] if self.output is not None else [])

    def ports(self, output: tuple[str, int]) -> Match:
        """One match standing for the whole fusion, for ``map_ports``: inputs query, key, value[, mask] (each
        mapped on its own projection's reader first), output the attention's."""
        if self.layout == "BNSD":
            inputs, nodes = list(self.core.inputs[:3]), list(self.core.nodes)
        else:
            inputs = [m.inputs[0] for m in self.projections]
            nodes = [n for m in self.projections for n in m.nodes] + list(self.core.nodes)
        if self.kind.masked:
            inputs.append(self.core.inputs[3])
        return Match(self.core.pattern, nodes, {}, inputs, [output])


def _producer_reshape(graph: ScopeGraph, tensor: tuple[str, int]) -> Any | None:
    """The Reshape that makes ``tensor`` (through Transposes), or None."""
    node = graph.node(tensor[0])
    for _ in range(3):
        if node.op_type == "Reshape":
            return node
        if node.op_type != "Transpose" or not node.inputs:
            return None
        node = graph.node(node.inputs[0][0])
    return None


def _target(graph: ScopeGraph, c: Candidate, reshape: Any, role: str) -> list[int]:
    """The head split / merge target of ``reshape`` as a shape (see :mod:`.base.shapes`)."""
    read = reshape_target(graph, reshape)
    if read is None:
        raise Refused(f"the {role} reshape {reshape.name} has a target that is not read as a shape "
                      "(computed in more than one entry, or no constant or concatenation of parts)")
    shape, computed = read
    if computed:
        c.dropped.append((reshape.name, 1))
    return shape


def _projection_width(graph: ScopeGraph, ctx: str) -> int | None:
    """The input width of the first Gemm / MatMul with a constant weight after the context, if any."""
    for name in reversed(downstream(graph, ctx, 3, ("Gemm", "MatMul"))):
        node = graph.node(name)
        if len(node.inputs) < 2:
            continue
        weight = const_value(graph, node.inputs[1])
        if weight is None or weight.ndim != 2:
            continue
        transposed = bool(node.attrs.get("transB", 0) or node.attrs.get("transpose_b", False))
        return int(weight.shape[1] if transposed else weight.shape[0])
    return None


def _core_scale(c: Candidate) -> float | None:
    """The scale read from the constants; None when it is computed as 1/sqrt(head size) at run time."""
    m = c.core
    if "dim_start" in m.captures:
        if _ints(m, "dim_start") != [-1] or _ints(m, "dim_end")[0] < 2**31 - 1 or _scalar(m, "one") != 1.0:
            raise Refused("the run-time scale is not 1/sqrt of the query's last dimension")
        return None
    if "scale_k" in m.captures:
        return _scalar(m, "scale") * _scalar(m, "scale_k")
    if "divisor" in m.captures:
        divisor = _scalar(m, "divisor")
        if divisor == 0:
            raise Refused(f"the scores are divided by zero ({m['divisor'].name})")
        return 1.0 / divisor
    return _scalar(m, "scale") if "scale" in m.captures else 1.0


def _masked_after_softmax(graph: ScopeGraph, softmax: str) -> str | None:
    """Why a Softmax whose probabilities are masked before they weight the values is no attention core."""
    for consumer, _, _ in graph.consumers(softmax):
        node = graph.node(consumer)
        if node.op_type not in ("Add", "AddV2", "Mul", "Where", "SelectV2", "Select"):
            continue
        if any(graph.node(c).op_type in PRODUCTS for c, _, _ in graph.consumers(consumer)):
            return (f"{consumer} ({node.op_type}) masks the probabilities after the Softmax; an attention "
                    "mask applies to the scores before it")
    return None


def _mask_attrs(c: Candidate) -> dict[str, Any]:
    """``mask_kind``, ``mask_fill`` and ``causal`` of the core's masking (see the fused op's definition)."""
    m, kind = c.core, c.kind.mask
    if kind == "none":
        return {}
    if kind == "additive":
        return {"mask_kind": "additive"}
    attrs: dict[str, Any] = {"mask_fill": _scalar(m, "fill")}
    if kind == "causal_keras":
        expand = m["causal_expand"]
        if expand.attrs.get("begin_mask") != 12 or expand.attrs.get("end_mask") != 12:
            raise Refused(f"{expand.name} slices the causal band instead of only adding two leading axes")
        attrs["causal"] = 1
        return attrs
    attrs["mask_kind"] = "boolean"
    return attrs


def _k_transpose_perm(c: Candidate) -> None:
    if "k_t" in c.core.captures:
        node = c.core["k_t"]
        perm_tensor = node.inputs[1] if len(node.inputs) > 1 else None
        perm = node.attrs.get("perm")
        if perm_tensor is not None:
            raise Refused(f"{node.name}: a Transpose with a computed permutation")
        perm = list(perm) if perm is not None else None
        if perm not in ([0, 1, 3, 2], [0, 2, 1]):
            raise Refused(f"{node.name} transposes k with perm {perm}, not its last two axes")


def _read_projection(
    graph: ScopeGraph, c: Candidate, m: Match, kind: str, role: str
) -> tuple[int, int, np.ndarray, np.ndarray | None]:
    """(heads, head size, weight [in, H*d], bias [H*d] | None) of one projection."""
    w = np.asarray(m.value("w"))
    b = np.asarray(m.value("b")).reshape(-1) if "b" in m.captures else None
    if kind == "single":
        if w.ndim != 2:
            raise Refused(f"the {role} weight {m['w'].name} has shape {w.shape}, expected a matrix")
        heads, size = 1, w.shape[1]
    else:
        shape = _target(graph, c, m["split"], f"{role} head split")
        if len(shape) != 4 or shape[2] <= 0 or shape[3] <= 0:
            raise Refused(f"the {role} head split reshapes to {shape}, expected [batch, length, heads, head size]")
        heads, size = shape[2], shape[3]
        if kind == "split":
            perm = _perm(m)
            want = [[0, 2, 1, 3]] if role != "key" or c.kind.scores != "k_t" else [[0, 2, 3, 1]]
            if perm not in want:
                raise Refused(f"the {role} heads are transposed with perm {perm}, expected {want[0]}")
            if m["matmul"].op_type == "MatMul" and m["matmul"].attrs.get("transpose_b"):
                w = w.T
            if m["matmul"].attrs.get("transpose_a"):
                raise Refused(f"{m['matmul'].name} transposes its input")
        elif kind == "keras_einsum":
            _check_dense_einsum(m["matmul"], "abc", "cde", "abde")
        if w.ndim == 3:
            w = w.reshape(w.shape[0], -1)
        if w.ndim != 2 or w.shape[1] != heads * size:
            raise Refused(f"the {role} weight {m['w'].name} has shape {w.shape}, expected [in, {heads}*{size}]")
    if b is not None and b.shape[0] != heads * size:
        raise Refused(f"the {role} bias {m['b'].name} has {b.shape[0]} values, expected {heads * size}")
    return heads, size, w, b


def _read_output(
    graph: ScopeGraph, c: Candidate, m: Match, kind: str, heads: int, size: int, flat: bool
) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if kind == "split":
        perm = _perm(m)
        if perm != [0, 2, 1, 3]:
            raise Refused(f"the heads are merged with perm {perm}, expected [0, 2, 1, 3]")
        shape = _target(graph, c, m["merge"], "head merge")
        if len(shape) != (2 if flat else 3) or shape[-1] != heads * size:
            want = f"[{'' if flat else 'batch, '}-1, {heads * size}]"
            raise Refused(f"the heads are merged into shape {shape}, expected {want}")
    elif kind in ("keras", "keras_onnx"):
        shape = _target(graph, c, m["merge"], "head merge")
        if len(shape) != 3 or shape[-1] != heads * size:
            raise Refused(f"the heads are merged into shape {shape}, expected [batch, length, {heads * size}]")
    elif kind == "keras_einsum":
        _check_dense_einsum(m["matmul"], "abcd", "cde", "abe")
    if "w" in m.captures:
        w = np.asarray(m.value("w"))
        if kind == "split" and m["matmul"].attrs.get("transpose_b"):
            w = w.T
        w = w.reshape(heads * size, -1) if w.size % (heads * size) == 0 else w
        if w.ndim != 2 or w.shape[0] != heads * size:
            raise Refused(f"the output weight {m['w'].name} has shape {w.shape}, expected [{heads * size}, out]")
        out["out_weight"] = w
        if "b" in m.captures:
            b = np.asarray(m.value("b")).reshape(-1)
            if b.shape[0] != w.shape[1]:
                raise Refused(f"the output bias {m['b'].name} has {b.shape[0]} values, expected {w.shape[1]}")
            out["out_bias"] = b
    return out


# ---------------------------------------------------------------------------------------- the pass
class MultiHeadAttentionFusion(ScopeBasePass):
    """Fuses attention blocks into ``MultiHeadAttention``; see the module docstring."""

    name = "MultiHeadAttentionFusion"
    general = True

    # NOTE: candidates from the op-type index (Softmax), not scope patterns: a ScopeBasePass whose
    # patterns match no scope never reaches last_match_scopes_and_ops, and attention must fuse in
    # graphs without scope names too. Attention-named scopes only decide which failures are reported.
    def define_patterns(self) -> tuple:
        return ()

    @staticmethod
    def _core_anchors(graph: ScopeGraph, softmax: str) -> list[str]:
        """The matrix products a core pattern is anchored at for ``softmax``."""
        consumers = graph.shared_consumers(softmax)  # read only: no copy
        anchors = [c for c, slot, _ in consumers if slot == 0 and graph.node(c).op_type in PRODUCTS]
        if any(graph.node(c).op_type == "Unsqueeze" for c, _, _ in consumers):
            anchors += downstream(graph, softmax, 7, ("Transpose",))  # tf2onnx's lowered einsum
        return anchors

    def explain(self, scope: Scope, graph: ScopeGraph | None = None) -> list[PatternCheck]:
        """The attention core tried from every Softmax in ``scope``: the nearest miss, or why a matched core
        is not attention after all (its projections, heads or Softmax axis)."""
        where = "dataflow pattern attention core (Softmax between two matrix products)"
        if graph is None:
            return [PatternCheck(where, "not tried without a graph")]
        miss = seeded_miss(graph, scope, ("Softmax",), self._core_anchors, CORE_PATTERNS)
        if miss is not None:
            return [PatternCheck(where, miss)]
        for node in scope.all_nodes:
            if node.op_type != "Softmax":
                continue
            kind, core, _ = best_match(graph, self._core_anchors(graph, node.name), CORE_PATTERNS, node.name)
            if core is None:
                continue
            try:
                self._extend(graph, Candidate(node.name, core, kind))
            except Refused as refused:
                return [PatternCheck(where, f"the core at {node.name} matches, but it is not fused: {refused.reason}")]
            return [PatternCheck(where, None)]
        return [PatternCheck(where, None)]

    @reads_op_type_counts
    def selects_nothing(self, graph: ScopeGraph) -> bool:
        """The candidates are the Softmax nodes and the scopes holding two matrix products or more: none in a
        graph without a Softmax and with fewer than two matrix products."""
        if not self._selects_as(MultiHeadAttentionFusion) or graph.nodes_by_type("Softmax"):
            return False
        return sum(len(graph.nodes_by_type(op_type)) for op_type in dict.fromkeys(PRODUCTS)) < 2

    def last_match_scopes_and_ops(self, graph: ScopeGraph, matches: Sequence[Any]) -> list[ScopesResult]:
        selected: list[ScopesResult] = []
        covered: list[str] = []
        for softmax in graph.nodes_by_type("Softmax"):
            anchors = self._core_anchors(graph, softmax.name)
            kind, core, miss = best_match(graph, anchors, CORE_PATTERNS, softmax.name)
            scope = graph.tree.scope_of(softmax.name)
            if core is None:
                after = _masked_after_softmax(graph, softmax.name)
                if after is not None or self._attention_named(scope.name) or (miss is not None and miss.depth >= 4):
                    why = after or (str(miss) if miss else "no matrix product consumes it")
                    why = f"{softmax.name}: not an attention: {why}"
                    selected.append(ScopesResult(nodes=[softmax.name], refusal=why))
                    covered.append(softmax.name)
                continue
            covered.append(softmax.name)
            candidate = Candidate(softmax.name, core, kind)
            try:
                self._extend(graph, candidate)
            except Refused as refused:
                selected.append(ScopesResult(nodes=[softmax.name], refusal=f"{softmax.name}: {refused.reason}"))
                continue
            selected.append(ScopesResult(nodes=self._claimed(graph, candidate), captures={"candidate": candidate}))
        selected.extend(self._named_without_attention(graph, covered))
        return selected

    # ------------------------------------------------------------------ growing a core match
    def _extend(self, graph: ScopeGraph, c: Candidate) -> None:
        self._grow(graph, c)
        c.attrs.update(_mask_attrs(c))

    def _grow(self, graph: ScopeGraph, c: Candidate) -> None:
        rank = len(c.core["k_t"].attrs.get("perm") or ()) if "k_t" in c.core.captures else 4
        reason = _softmax_axis_reason(graph, c.core["probs"], rank or 4)
        if reason is not None:
            raise Refused(reason)
        _k_transpose_perm(c)
        scale = _core_scale(c)
        if c.kind.family == "keras":
            qk, (q_t, k_t) = c.core["qk"], c.core.inputs[:2]
            q_slot = next(
                i for i, t in enumerate(qk.inputs)
                if t == q_t or (t != k_t and graph.node(t[0]).op_type == "Mul" and q_t in graph.node(t[0]).inputs)
            )
            _check_scores_einsum(qk, q_slot)
            _check_ctx_einsum(c.core["ctx"])
        if c.kind.family == "tf2onnx_keras":
            claims = lowered_claims(graph, c.core)
            if isinstance(claims, str):
                raise Refused(claims)
            c.extra = claims
        q_t, k_t, v_t = c.core.inputs[:3]
        projections: list[tuple[str, str, Match]] = []
        for role, tensor in (("query", q_t), ("key", k_t), ("value", v_t)):

            def makes(m: Match, t: tuple[str, int] = tensor) -> bool:
                return m.outputs[0] == t

            tag, m, _ = best_match(graph, [tensor[0]], PROJECTIONS, accept=makes, near_miss=False)
            if m is None or tag not in COMPATIBLE[c.kind.family]:
                projections = []
                break
            projections.append((role, tag, m))
        kinds = {tag for _, tag, _ in projections}
        output = None
        if projections and len(kinds) == 1:
            kind = kinds.pop()
            ctx_node = c.core["ctx"].name
            anchors = downstream(graph, ctx_node, 4, ("Reshape", "MatMul", "BiasAdd", "Add", "AddV2", "Einsum") + BMM)
            out_kinds = [(k, p) for k, p in OUTPUTS if k == kind]
            _, output, _ = best_match(
                graph, anchors, out_kinds, accept=lambda m: m.inputs[0] == (ctx_node, 0), near_miss=False
            )
            if output is not None:
                self._read_bsh(graph, c, projections, output, kind, scale)
                return
        if c.kind.family in ("keras", "tf2onnx_keras"):
            raise Refused("a Keras attention core whose projections or output are not in a known form")
        self._read_bnsd(graph, c, scale)

    def _read_bsh(
        self, graph: ScopeGraph, c: Candidate, projections: list, output: Match, kind: str, scale: float | None
    ) -> None:
        attrs: dict[str, Any] = {"input_layout": "BSH"}
        # A rank-2 merge target ([batch * length, H*d]) means rank-2 inputs (TF1 BERT's flattened
        # sequence): the lengths come from the splits.
        flat = kind == "split" and len(_target(graph, c, output["merge"], "head merge")) == 2
        shapes = set()
        for role, tag, m in projections:
            heads, size, w, b = _read_projection(graph, c, m, tag, role)
            shapes.add((heads, size))
            attrs[f"{role}_weight"] = w
            if b is not None:
                attrs[f"{role}_bias"] = b
            if flat:
                split = _target(graph, c, m["split"], f"{role} head split")
                if split[1] <= 0:
                    raise Refused(f"the {role} split {split} does not give the sequence length of its flattened input")
                attrs.setdefault("query_length" if role == "query" else "key_length", split[1])
        if len(shapes) != 1:
            raise Refused(f"query, key and value split into different heads {sorted(shapes)}")
        heads, size = shapes.pop()
        attrs.update(_read_output(graph, c, output, kind, heads, size, flat))
        attrs.update(num_heads=heads, head_size=size, scale=scale if scale is not None else 1.0 / math.sqrt(size))
        c.layout = "BSH"
        c.projections = [m for _, _, m in projections]
        c.output = output
        c.attrs = attrs

    def _read_bnsd(self, graph: ScopeGraph, c: Candidate, scale: float | None) -> None:
        """Core only: heads and head size from the Reshape making ``q`` (constant, or a Concat of parts
        with a constant head count), the head size else from the projection after the core."""
        q_t = c.core.inputs[0]
        reshape = _producer_reshape(graph, q_t)
        if reshape is None or len(reshape.inputs) < 2:
            raise Refused("the query heads come from no Reshape, so the head count is unknown")
        if c.kind.scores == "k_t":
            raise Refused("the key reaches the scores already transposed, from a projection in no known form")
        parts = shape_parts(graph, reshape.inputs[1])
        if parts is None:
            raise Refused(f"the query split {reshape.name} has a computed target that is no concatenation of parts")
        direct = reshape.name == q_t[0] and len(parts) == 4
        heads = parts[1] if direct and parts[1] is not None else None
        size = parts[-1] if parts[-1] is not None and parts[-1] > 0 else None
        if heads is None or size is None:
            width = _projection_width(graph, c.core["ctx"].name)
            if heads is None and size is not None and width is not None and width % size == 0:
                heads = width // size
            if size is None and heads is not None and width is not None and width % heads == 0:
                size = width // heads
        if heads is None or size is None or heads <= 0 or size <= 0:
            raise Refused(f"the head count and size are not known from constants (query split {parts})")
        if scale is None:
            scale = 1.0 / math.sqrt(size)
        c.layout = "BNSD"
        c.attrs = {"input_layout": "BNSD", "num_heads": heads, "head_size": size, "scale": scale}

    # ------------------------------------------------------------------ claims and refusals
    @staticmethod
    def _claimed(graph: ScopeGraph, c: Candidate) -> list[str]:
        return sorted(dict.fromkeys([*claimed_nodes(graph, *c.matches), *c.extra]), key=graph.positions.__getitem__)

    @staticmethod
    def _attention_named(scope_name: str) -> bool:
        last = scope_name.rstrip("/").rsplit("/", 1)[-1].lower()
        return any(w in last for w in ATTENTION_WORDS) or last in ATTENTION_NAMES

    def _named_without_attention(self, graph: ScopeGraph, covered: list[str]) -> list[ScopesResult]:
        """Innermost attention-named scopes with matrix products whose Softmax (if any) was never a candidate."""
        flagged = []
        candidates = set(covered)
        # Only a scope holding two matrix products or more qualifies: count them up each product's ancestors
        # instead of looking at every scope, then take those scopes in tree order.
        product_nodes = [node for op_type in dict.fromkeys(PRODUCTS) for node in graph.nodes_by_type(op_type)]
        if len(product_nodes) < 2:  # no scope holds two (a CNN's one classifier MatMul)
            return []
        products_in: dict[Scope, int] = {}
        scope_of = graph.tree.scope_of
        for node in product_nodes:
            scope: Scope | None = scope_of(node.name)
            while scope is not None:
                products_in[scope] = products_in.get(scope, 0) + 1
                scope = scope.parent
        # The scopes holding a candidate Softmax: its scope and that scope's ancestors (rather than a look at every
        # node of each attention-named scope).
        holding_candidate: set[Scope] = set()
        for name in candidates:
            scope = scope_of(name)
            while scope is not None and scope not in holding_candidate:
                holding_candidate.add(scope)
                scope = scope.parent
        for scope in sorted((s for s, n in products_in.items() if n >= 2), key=lambda s: s.index):
            if scope.is_root or not self._attention_named(scope.name) or scope in holding_candidate:
                continue
            flagged.append(scope)
        innermost = [s for s in flagged if not any(o is not s and s.contains(o) for o in flagged)]
        out = []
        for scope in innermost:
            products = products_in[scope]  # the matrix products of its whole subtree, counted above
            why = f"scope {scope.name} is named like attention and holds {products} matrix products but no Softmax"
            out.append(ScopesResult(nodes=[scope.all_nodes[-1].name], refusal=why))
        return out

    def generate_fusion_result(self, scopes: Sequence[Any], result: FusionScopesResult, graph: ScopeGraph) -> None:
        c: Candidate = result.captures.pop("candidate")  # handed to the rule, not kept with the fusion
        last = c.output if c.output is not None else c.core
        output = last.outputs[0]
        scope = graph.tree.scope_of(c.softmax)
        name = scope.name.rstrip("/")
        if scope.is_root or (graph.get(name) is not None and name not in result.nodes):
            name = output[0]
        result.name = name
        result.type = "MultiHeadAttention"
        result.description = f"attention ({c.core.pattern.name}, {c.layout})"
        result.attrs.update(c.attrs)
        map_ports(result, graph, c.ports(output))
        for node_name, slot in c.dropped:
            result.drop_input(node_name, slot)


PASS = MultiHeadAttentionFusion()
