"""Dataflow patterns of multi-head attention for :mod:`.multi_head_attention`: the scaled-dot-product cores
(TF, ONNX, Keras einsum spellings) and the projection / output segments around them.

Each pattern is a :class:`~scopefusion.scope.DataflowPattern`; the rule module reads the constants.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from scopefusion.scope import DataflowPattern

from ..records import FrozenRecord
from .attention_lowered import TF2ONNX_MASK, ctx_lowered, scores_lowered

__all__ = [
    "ATTENTION_NAMES", "ATTENTION_WORDS", "BMM", "COMPATIBLE", "CORE_PATTERNS", "OUTPUTS", "PRODUCTS", "PROJECTIONS",
    "CoreKind",
]

ADD = ("Add", "AddV2")
BIAS = ("BiasAdd", "Add", "AddV2")
DIV = ("RealDiv", "Div")
BMM = ("BatchMatMulV2", "BatchMatMul", "BatchMatMulV3")
PRODUCTS = ("MatMul", "Einsum") + BMM
NO_ADJ = {"adj_x": False, "adj_y": False}
NO_TRANSPOSE = {"transpose_a": False, "transpose_b": False}
ATTENTION_WORDS = ("attention", "attn")
ATTENTION_NAMES = ("self", "mha")


# ---------------------------------------------------------------------------------------- core patterns
def _scores_tf(op, q, k):
    return op.op(BMM, q, k, _attrs={"adj_x": False, "adj_y": True}, _name="qk")


def _swaps_last_two(node: Any) -> str | None:
    """A Transpose with a permutation that is not a swap of the last two axes is a head split (tf2onnx
    merges k's split and transpose into one ``[0, 2, 3, 1]``), not the scores' transpose."""
    perm = node.attrs.get("perm")
    if perm is None or len(node.inputs) > 1:
        return None  # a computed permutation: refused with its reason once the core is read
    perm = [int(p) for p in perm]
    if perm[-2:] == [len(perm) - 1, len(perm) - 2] and perm[:-2] == list(range(len(perm) - 2)):
        return None
    return f"perm {perm} does not swap the last two axes"


def _scores_onnx(op, q, k):
    return op.MatMul(q, op.Transpose(k, _name="k_t", _check=_swaps_last_two), _name="qk")


def _scores_onnx_kt(op, q, k):
    return op.MatMul(q, k, _name="qk")


def _scores_keras(op, q, k):
    return op.Einsum(q, k, _name="qk", _commute=True)


def _ctx_tf(op, p, v):
    return op.op(BMM, p, v, _attrs=NO_ADJ, _name="ctx")


def _ctx_onnx(op, p, v):
    return op.MatMul(p, v, _name="ctx")


def _ctx_keras(op, p, v):
    return op.Einsum(p, v, _name="ctx")


SCALINGS: dict[str, Callable[[Any, Callable, Any, Any], Any]] = {
    "post_mul": lambda op, s, q, k: op.Mul(s(op, q, k), op.const("scale")),
    "post_div": lambda op, s, q, k: op.op(DIV, s(op, q, k), op.const("divisor")),
    "pre_q": lambda op, s, q, k: s(op, op.Mul(q, op.const("scale")), k),
    "none": lambda op, s, q, k: s(op, q, k),
}

# Family -> (scores variants, context product, layout of the core's q/k/v).
FAMILIES: dict[str, tuple[dict[str, Callable], Callable, str]] = {
    "tf": ({"bmm": _scores_tf}, _ctx_tf, "BNSD"),
    "onnx": ({"transpose": _scores_onnx, "k_t": _scores_onnx_kt}, _ctx_onnx, "BNSD"),
    "keras": ({"einsum": _scores_keras}, _ctx_keras, "BSND"),
    "tf2onnx_keras": ({"lowered": scores_lowered}, ctx_lowered, "BSND"),
}


class CoreKind(FrozenRecord):
    _fields = ("family", "scores", "scaling", "mask")

    def __init__(self, family: str, scores: str, scaling: str, mask: str = "none") -> None:
        self.family = family
        self.scores = scores
        self.scaling = scaling
        self.mask = mask
    """How the scores are masked before the Softmax: a key of :data:`MASKINGS`."""

    @property
    def masked(self) -> bool:
        """The core reads a mask tensor (its fourth input)."""
        return MASKINGS[self.mask][0]


SELECT = ("SelectV2", "Select", "Where")


def _keras_everywhere(op, logits, mask):
    """Keras broadcasts a mask to the scores' shape: ``LogicalAnd(Fill(Shape(scores), True), mask)``."""
    ones = op.Fill(op.Shape(logits, _name="ones_shape"), op.const("ones_value", value=True))
    return op.LogicalAnd(ones, mask, _name="mask_and")


def _keras_causal(op, logits):
    """Keras' ``use_causal_mask``: ``band_part(ones([Sq, Sk]), -1, 0)`` with two new leading axes, Sq and Sk
    sliced from the scores' shape."""
    shape = op.Shape(logits, _name="causal_shape")
    length = [op.StridedSlice(shape, op.const(value=[axis]), op.const(value=[axis + 1]), op.const(value=[1]),
                              _attrs={"shrink_axis_mask": 1, "new_axis_mask": 0, "ellipsis_mask": 0},
                              _name=f"causal_dim{axis}") for axis in (2, 3)]
    square = op.Fill(op.Pack(*length, _attrs={"axis": 0}), op.const("causal_ones", value=True))
    lower = op.MatrixBandPart(square, op.const("band_lower", value=-1), op.const("band_upper", value=0), _name="band")
    return op.StridedSlice(lower, op.const(), op.const(), op.const(), _name="causal_expand",
                           _attrs={"new_axis_mask": 3, "shrink_axis_mask": 0, "ellipsis_mask": 0})


# Mask spelling -> (reads a mask tensor, the masked scores from (op, logits, mask)).
MASKINGS: dict[str, tuple[bool, Callable[..., Any]]] = {
    "none": (False, lambda op, logits, mask: logits),
    "additive": (True, lambda op, logits, mask: op.op(ADD, logits, mask, _name="masked")),
    "boolean": (True, lambda op, logits, mask: op.op(SELECT, mask, logits, op.const("fill"), _name="masked")),
    "boolean_keras": (True, lambda op, logits, mask: op.op(
        SELECT, _keras_everywhere(op, logits, mask), logits, op.const("fill"), _name="masked")),
    "causal_keras": (False, lambda op, logits, mask: op.op(
        SELECT, _keras_everywhere(op, logits, _keras_causal(op, logits)), logits, op.const("fill"), _name="masked")),
    "boolean_tf2onnx": TF2ONNX_MASK,
}
# Which spellings each family writes.
FAMILY_MASKS = {"tf": ("none", "additive", "boolean"), "onnx": ("none", "additive", "boolean"),
                "keras": ("none", "additive", "boolean", "boolean_keras", "causal_keras"),
                "tf2onnx_keras": ("none", "additive", "boolean_tf2onnx")}


def _core_pattern(kind: CoreKind) -> DataflowPattern:
    scores_fns, ctx_fn, _ = FAMILIES[kind.family]
    scores, scaling = scores_fns[kind.scores], SCALINGS[kind.scaling]
    _, masking = MASKINGS[kind.mask]

    def logits(op, q, k):
        return scaling(op, scores, q, k)

    def masked_attention(op, q, k, v, mask):
        return ctx_fn(op, op.Softmax(masking(op, logits(op, q, k), mask), _name="probs"), v)

    def plain_attention(op, q, k, v):
        return ctx_fn(op, op.Softmax(masking(op, logits(op, q, k), None), _name="probs"), v)

    attention = masked_attention if kind.masked else plain_attention

    name = f"attention_{kind.family}_{kind.scores}_{kind.scaling}{'' if kind.mask == 'none' else '_' + kind.mask}"
    return DataflowPattern(attention, name=name, deferred=True)


def _sdpa_pattern(masked: bool) -> DataflowPattern:
    """PyTorch's scaled_dot_product_attention export: sqrt(scale) on q and on k's transpose."""

    def logits(op, q, k):
        return op.MatMul(
            op.Mul(q, op.const("scale")), op.Mul(op.Transpose(k, _name="k_t"), op.const("scale_k")), _name="qk"
        )

    def masked_attention(op, q, k, v, mask):
        return _ctx_onnx(op, op.Softmax(op.op(ADD, logits(op, q, k), mask, _name="masked"), _name="probs"), v)

    def plain_attention(op, q, k, v):
        return _ctx_onnx(op, op.Softmax(logits(op, q, k), _name="probs"), v)

    attention = masked_attention if masked else plain_attention

    return DataflowPattern(attention, name=f"attention_sdpa{'_masked' if masked else ''}", deferred=True)


def _sdpa_dynamic_pattern(masked: bool, outer_cast: bool) -> DataflowPattern:
    """The same with the scale computed at run time: ``1 / sqrt(Cast(Slice(Shape(q), [-1], [max])))``."""

    def logits(op, q, k):
        dim = op.Slice(op.Shape(q), op.const("dim_start"), op.const("dim_end"))
        scale = op.op(DIV, op.const("one"), op.Sqrt(op.Cast(dim)))
        if outer_cast:
            scale = op.Cast(scale)
        return op.MatMul(op.Mul(q, op.Sqrt(scale)), op.Mul(op.Transpose(k, _name="k_t"), op.Sqrt(scale)), _name="qk")

    def masked_attention(op, q, k, v, mask):
        return _ctx_onnx(op, op.Softmax(op.op(ADD, logits(op, q, k), mask, _name="masked"), _name="probs"), v)

    def plain_attention(op, q, k, v):
        return _ctx_onnx(op, op.Softmax(logits(op, q, k), _name="probs"), v)

    attention = masked_attention if masked else plain_attention

    name = f"attention_sdpa_dynamic{'_masked' if masked else ''}{'_cast' if outer_cast else ''}"
    return DataflowPattern(attention, name=name, deferred=True)


CORE_PATTERNS: tuple[tuple[CoreKind, DataflowPattern], ...] = tuple(
    (kind, _core_pattern(kind))
    for family, (scores_fns, _, _) in FAMILIES.items()
    for scores in scores_fns
    for scaling in SCALINGS
    for mask in FAMILY_MASKS[family]
    for kind in [CoreKind(family, scores, scaling, mask)]
) + tuple(
    (CoreKind("onnx", "transpose", "sdpa", "additive" if m else "none"), _sdpa_pattern(m)) for m in (True, False)
) + tuple(
    (CoreKind("onnx", "transpose", "sdpa_dynamic", "additive" if m else "none"), _sdpa_dynamic_pattern(m, c))
    for m in (True, False) for c in (True, False)
)


# ---------------------------------------------------------------------------------------- segments
def _transpose(op, x, perm_attr: bool):
    """TF's Transpose(x, perm) or ONNX's Transpose(x) with the permutation in its attribute."""
    if perm_attr:
        return op.Transpose(x, _name="transpose", _check=lambda n: None if "perm" in n.attrs else "no perm attribute")
    return op.Transpose(x, op.const("perm"), _name="transpose")


def _p_split(op, x, bias: bool, perm_attr: bool = False):
    y = op.MatMul(x, op.const("w"), _name="matmul")
    if bias:
        y = op.op(BIAS, y, op.const("b"), _commute=False)
    return _transpose(op, op.Reshape(y, op.var("target"), _name="split"), perm_attr)


def _p_single(op, x, bias: bool):
    y = op.MatMul(x, op.const("w"), _name="matmul")
    return op.op(BIAS, y, op.const("b"), _commute=False) if bias else y


def _p_keras(op, x, bias: bool):
    y = op.op(BMM, x, op.Reshape(op.const("w"), op.const("w_shape")), _attrs=NO_ADJ, _name="matmul")
    y = op.Reshape(y, op.var("target"), _name="split")
    return op.op(ADD, y, op.const("b")) if bias else y


def _p_keras_einsum(op, x, bias: bool):
    y = op.Einsum(x, op.const("w"), _name="matmul")
    return op.op(ADD, y, op.const("b")) if bias else y


def _o_merge(op, ctx, proj: bool, bias: bool, perm_attr: bool = False):
    y = op.Reshape(_transpose(op, ctx, perm_attr), op.var("target"), _name="merge")
    if proj:
        y = op.MatMul(y, op.const("w"), _name="matmul")
        if bias:
            y = op.op(BIAS, y, op.const("b"), _commute=False)
    return y


def _o_single(op, ctx, proj: bool, bias: bool):
    y = op.MatMul(ctx, op.const("w"), _name="matmul")
    return op.op(BIAS, y, op.const("b"), _commute=False) if bias else y


def _o_keras(op, ctx, proj: bool, bias: bool):
    y = op.op(BMM, op.Reshape(ctx, op.var("target"), _name="merge"), op.Reshape(op.const("w"), op.const("w_shape")),
              _attrs=NO_ADJ, _name="matmul")
    return op.op(BIAS, y, op.const("b"), _commute=False) if bias else y


def _p_keras_onnx(op, x, bias: bool):
    """Keras' projection through tf2onnx: its kernel reshape folded, ``MatMul(x, W[E, H*d])`` then the split."""
    y = op.Reshape(op.MatMul(x, op.const("w"), _name="matmul"), op.var("target"), _name="split")
    return op.op(ADD, y, op.const("b")) if bias else y


def _o_keras_onnx(op, ctx, proj: bool, bias: bool):
    y = op.MatMul(op.Reshape(ctx, op.var("target"), _name="merge"), op.const("w"), _name="matmul")
    return op.op(ADD, y, op.const("b")) if bias else y


def _o_keras_einsum(op, ctx, proj: bool, bias: bool):
    y = op.Einsum(ctx, op.const("w"), _name="matmul")
    return op.op(BIAS, y, op.const("b"), _commute=False) if bias else y


def _segment(fn: Callable, tag: str, *flags: bool, perm_attr: bool = False) -> DataflowPattern:
    extra = {"perm_attr": True} if perm_attr else {}
    suffix = "_perm_attr" if perm_attr else ""
    if len(flags) == 1:

        def projection(op, x):
            return fn(op, x, *flags, **extra)

        return DataflowPattern(projection, name=f"projection_{tag}{'_bias' if flags[0] else ''}{suffix}", deferred=True)

    def output(op, ctx):
        return fn(op, ctx, *flags, **extra)

    name = f"output_{tag}{'_proj' if flags[0] else ''}{'_bias' if flags[1] else ''}{suffix}"
    return DataflowPattern(output, name=name, deferred=True)


PROJECTIONS: tuple[tuple[str, DataflowPattern], ...] = tuple(
    (kind, _segment(fn, kind, bias))
    for kind, fn in (("split", _p_split), ("single", _p_single), ("keras", _p_keras), ("keras_einsum", _p_keras_einsum),
                     ("keras_onnx", _p_keras_onnx))
    for bias in (True, False)
) + tuple(("split", _segment(_p_split, "split", bias, perm_attr=True)) for bias in (True, False))
OUTPUTS: tuple[tuple[str, DataflowPattern], ...] = (
    tuple(
        ("split", _segment(_o_merge, "merge", p, b, perm_attr=a))
        for p, b in ((True, True), (True, False), (False, False))
        for a in (False, True)
    )
    + tuple(("single", _segment(_o_single, "single", True, b)) for b in (True, False))
    + tuple(("keras", _segment(_o_keras, "keras", True, b)) for b in (True, False))
    + tuple(("keras_einsum", _segment(_o_keras_einsum, "keras_einsum", True, b)) for b in (True, False))
    + tuple(("keras_onnx", _segment(_o_keras_onnx, "keras_onnx", True, b)) for b in (True, False))
)
# Which projection kinds go with which core family.
COMPATIBLE = {"tf": ("split",), "onnx": ("split", "single"), "keras": ("keras", "keras_einsum"),
              "tf2onnx_keras": ("keras_onnx",)}
