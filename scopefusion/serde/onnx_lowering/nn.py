"""Neural-network ``tf`` ops: matmuls, convolutions, pooling, batch norm, bias, softmax, resize, LRN.

Layout: TensorFlow's channels-last ops (``data_format`` ``NHWC`` / ``NDHWC``, the default) become the
channels-first ONNX op, which reads its input channels first (``[0, C, spatial…]``: the form the layout
tracking holds, else a Transpose) and leaves its result held channels first (:mod:`.layout`); without the
tracking (a graph with bodies) it sits between two Transposes, in and back out, which the clean-up pushes
through and cancels (:mod:`..onnx_transposes`). A constant filter is rearranged at export time (``HWIO`` →
``OIHW``; a depthwise ``[H, W, C, M]`` → ``[C·M, 1, H, W]`` with ``group = C``).

Padding: ``VALID`` → no pads; ``SAME`` → explicit pads where the input's spatial dims are static (the
extra one at the end, as TF), else ``auto_pad = SAME_UPPER`` (the same rule); ``EXPLICIT`` → the
``explicit_paddings`` pairs. Average pooling never counts padding (TF's rule, ``count_include_pad = 0``).

Resize: ``align_corners`` → ``align_corners``; ``half_pixel_centers`` → ``half_pixel`` (nearest: rounding
half up, which is TF's ``floor((x + 0.5) · scale)``); neither → ``asymmetric`` (nearest: ``floor``).
``FusedBatchNorm*`` is inference mode only (``is_training`` false).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable, Sequence

import numpy as np

from .emitter import LoweringEmitter
from .registry import Lowering, PlainOp

if TYPE_CHECKING:  # pragma: no cover
    from ...ir.graph import Node

__all__ = ["LOWERINGS", "to_channels_first", "to_channels_last"]


# ----------------------------------------------------------------------------- layout helpers
_CHANNELS_LAST = ("NHWC", "NDHWC", "NWC")


def _channels_last(e: LoweringEmitter) -> bool:
    layout = str(e.attr("data_format", "NHWC"))
    if layout in _CHANNELS_LAST:
        return True
    if layout in ("NCHW", "NCDHW", "NCW"):
        return False
    e.decline(f"data_format {layout!r} is not one TensorFlow defines")


def to_channels_first(rank: int) -> list[int]:
    return [0, rank - 1, *range(1, rank - 1)]


def to_channels_last(rank: int) -> list[int]:
    return [0, *range(2, rank), 1]


def _spatial(values: Sequence[int], rank: int, channels_last: bool) -> list[int]:
    values = list(values)
    if len(values) != rank:
        return values
    return values[1:-1] if channels_last else values[2:]


def _in_layout(e: LoweringEmitter, x: str, rank: int, channels_last: bool) -> str:
    """Input 0 (``x``) channels first: as the layout tracking holds it, else transposed (see :mod:`.layout`)."""
    return e.channels_first(0) if channels_last else x


def _out_layout(e: LoweringEmitter, y: str, rank: int, channels_last: bool, index: int = 0) -> None:
    """Output ``index`` from its channels-first form ``y``: held so where the layout is tracked, else transposed."""
    if channels_last:
        if not e.hold_channels_first(y, index):
            e.result("Transpose", [y], index, perm=to_channels_last(rank))
    else:
        e.result("Identity", [y], index)


def _pads(e: LoweringEmitter, kernel: Sequence[int], strides: Sequence[int], dilations: Sequence[int],
          channels_last: bool) -> dict:
    """ONNX ``pads`` / ``auto_pad`` for TF's ``padding`` attribute (see the module docstring)."""
    padding = str(e.attr("padding", "VALID"))
    rank = e.rank(0)
    if padding == "VALID":
        return {"pads": [0] * (2 * len(kernel))}
    if padding == "EXPLICIT":
        pairs = list(e.attr("explicit_paddings", ()))
        if len(pairs) != 2 * rank:
            e.decline(f"explicit_paddings has {len(pairs)} values for rank {rank}")
        by_dim = [(pairs[2 * d], pairs[2 * d + 1]) for d in range(rank)]
        spatial = by_dim[1:-1] if channels_last else by_dim[2:]
        if any(p != (0, 0) for p in (by_dim[0], by_dim[-1] if channels_last else by_dim[1])):
            e.decline("explicit_paddings pads the batch or channel dim")
        return {"pads": [b for b, _ in spatial] + [a for _, a in spatial]}
    if padding != "SAME":
        e.decline(f"padding {padding!r} is not VALID, SAME or EXPLICIT")
    t = e.input_type(0)
    dims = _spatial(t.shape, rank, channels_last) if t is not None and t.rank is not None else []
    if (not dims or any(d < 0 for d in dims)) and any(s != 1 for s in strides):
        return {"auto_pad": "SAME_UPPER"}  # TF allows no dilation with strides, and onnxruntime none with auto_pad
    dims = dims if dims and all(d >= 0 for d in dims) else [1] * len(kernel)  # stride 1: pads are size-free
    begin, end = [], []
    for size, k, s, d in zip(dims, kernel, strides, dilations):
        out = -(-size // s)
        total = max((out - 1) * s + (k - 1) * d + 1 - size, 0)
        begin.append(total // 2)
        end.append(total - total // 2)
    return {"pads": begin + end}


# ----------------------------------------------------------------------------- matmuls
def _transpose_last2(e: LoweringEmitter, x: str, rank: int) -> str:
    return e.op("Transpose", [x], perm=[*range(rank - 2), rank - 1, rank - 2])[0]


def _matmul(e: LoweringEmitter) -> None:
    a, b = e.input(0), e.input(1)
    if e.node.op_type == "MatMul":
        flags = bool(e.attr("transpose_a", False)), bool(e.attr("transpose_b", False))
    else:
        flags = bool(e.attr("adj_x", False)), bool(e.attr("adj_y", False))
    if flags[0]:
        a = _transpose_last2(e, a, e.rank(0))
    if flags[1]:
        b = _transpose_last2(e, b, e.rank(1))
    e.result("MatMul", [a, b])


def _untransposed(node: Node) -> bool:
    """True when a matmul reads both operands as they are (no transpose or adjoint flag): :func:`_matmul` then
    writes one ``MatMul`` of its two inputs."""
    attrs = node.attrs
    if node.op_type == "MatMul":
        return not attrs.get("transpose_a") and not attrs.get("transpose_b")
    return not attrs.get("adj_x") and not attrs.get("adj_y")


def _einsum(e: LoweringEmitter) -> None:
    e.result("Einsum", [e.input(i) for i in range(len(e.inputs))], equation=str(e.attr("equation")))


# ----------------------------------------------------------------------------- convolutions
def _conv_weights(e: LoweringEmitter, depthwise: bool, rank: int) -> tuple[str, list[int], int]:
    """The ONNX ``W`` (``[O, I/group, k…]``), the kernel's spatial size and the group count."""
    filter_type = e.input_type(1)
    if filter_type is None or filter_type.rank != rank or not filter_type.is_static:
        e.decline("the filter has no static shape")
    shape = list(filter_type.shape)
    kernel, c_in, c_out = shape[:-2], shape[-2], shape[-1]
    to_oihw = [rank - 1, rank - 2, *range(rank - 2)]
    if depthwise:
        flat = [*kernel, 1, c_in * c_out]
        value = e.const_value(1)
        if value is not None:
            return e.const(np.transpose(value.reshape(flat), to_oihw), "W"), kernel, c_in
        reshaped = e.op("Reshape", [e.input(1), e.ints(flat, "shape")])[0]
        return e.op("Transpose", [reshaped], perm=to_oihw)[0], kernel, c_in
    channels_last = _channels_last(e)
    x_type = e.input_type(0)
    channels = x_type.shape[-1 if channels_last else 1] if x_type is not None and x_type.rank else -1
    if channels < 0:
        channels = c_in  # TF requires a multiple of the filter's channels; unknown, it is the plain (group 1) case
    if channels % c_in:
        e.decline(f"the input's {channels} channels are not a multiple of the filter's {c_in}")
    value = e.const_value(1)
    if value is not None:
        return e.const(np.transpose(value, to_oihw), "W"), kernel, channels // c_in
    w = e.op("Transpose", [e.input(1)], perm=to_oihw)[0]
    return w, kernel, channels // c_in


def _conv(depthwise: bool = False) -> Lowering:
    def lower(e: LoweringEmitter) -> None:
        rank = e.rank(0)
        channels_last = _channels_last(e)
        w, kernel, group = _conv_weights(e, depthwise, rank)
        strides = _spatial(e.attr("strides", [1] * rank), rank, channels_last)
        dilations = _spatial(e.attr("dilations", [1] * rank), rank, channels_last)
        pads = _pads(e, kernel, strides, dilations, channels_last)
        x = _in_layout(e, e.input(0), rank, channels_last)
        y = e.op("Conv", [x, w], kernel_shape=kernel, strides=strides, dilations=dilations,
                 group=group if group != 1 else None, **pads)[0]
        _out_layout(e, y, rank, channels_last)

    return lower


def _pool(onnx_op: str, from_inputs: bool = False) -> Lowering:
    def lower(e: LoweringEmitter) -> None:
        rank = e.rank(0)
        channels_last = _channels_last(e)
        if from_inputs:
            ksize = [int(v) for v in e.require_const(1, "ksize")]
            strides_all = [int(v) for v in e.require_const(2, "strides")]
        else:
            ksize, strides_all = list(e.attr("ksize")), list(e.attr("strides"))
        kernel = _spatial(ksize, rank, channels_last)
        strides = _spatial(strides_all, rank, channels_last)
        if len(kernel) != rank - 2 or any(v != 1 for v in (ksize[0], ksize[-1] if channels_last else ksize[1])):
            e.decline("it pools over the batch or channel dim")
        pads = _pads(e, kernel, strides, [1] * len(kernel), channels_last)
        extra: dict[str, Any] = {"count_include_pad": 0} if onnx_op == "AveragePool" else {}
        x = _in_layout(e, e.input(0), rank, channels_last)
        y = e.op(onnx_op, [x], kernel_shape=kernel, strides=strides, **pads, **extra)[0]
        _out_layout(e, y, rank, channels_last)

    return lower


# ----------------------------------------------------------------------------- normalization, bias, softmax
def _fused_batch_norm(e: LoweringEmitter) -> None:
    if bool(e.attr("is_training", False)):
        e.decline("is_training is set; only inference-mode batch norm has an ONNX form")
    e.only_outputs(1)
    rank = e.rank(0)
    channels_last = _channels_last(e)
    x = _in_layout(e, e.input(0), rank, channels_last)
    params = [e.input(i) for i in range(1, 5)]
    y = e.op("BatchNormalization", [x, *params], epsilon=float(e.attr("epsilon", 1e-4)))[0]
    _out_layout(e, y, rank, channels_last)


def _bias_add(e: LoweringEmitter) -> None:
    bias = e.input(1)
    if not _channels_last(e):
        rank = e.rank(0)
        value = e.const_value(1)
        trailing = [1] * (rank - 2)
        if value is not None:
            bias = e.const(value.reshape(-1, *trailing), "bias")
        else:
            bias = e.unsqueeze(bias, list(range(1, rank - 1)))
    e.result("Add", [e.input(0), bias])


def _bias_last(node: Node) -> bool:
    """True when a bias is added along the last dim (channels last, the default): :func:`_bias_add` then writes
    one ``Add`` of the node's two inputs."""
    layout = node.attrs.get("data_format")
    return str(layout if layout is not None else "NHWC") in _CHANNELS_LAST


def _softmax(onnx_op: str) -> Lowering:
    def lower(e: LoweringEmitter) -> None:
        e.result(onnx_op, [e.input(0)], axis=-1)

    return lower


def _lrn(e: LoweringEmitter) -> None:
    rank = e.rank(0)
    radius = int(e.attr("depth_radius", 5))
    size = 2 * radius + 1
    x = _in_layout(e, e.input(0), rank, True)
    y = e.op("LRN", [x], size=size, alpha=float(e.attr("alpha", 1.0)) * size, beta=float(e.attr("beta", 0.5)),
             bias=float(e.attr("bias", 1.0)))[0]
    _out_layout(e, y, rank, True)


def _l2_loss(e: LoweringEmitter) -> None:
    total = e.reduce("ReduceSumSquare", e.input(0), list(range(e.rank(0))), keepdims=0)
    e.result("Div", [total, e.typed_scalar(2, e.dtype(0), "two")])


# ----------------------------------------------------------------------------- resize, depth/space
def _resize(mode: str) -> Lowering:
    def lower(e: LoweringEmitter) -> None:
        if e.rank(0) != 4:
            e.decline("the images are not rank 4")
        align, half = bool(e.attr("align_corners", False)), bool(e.attr("half_pixel_centers", False))
        if align and half:
            e.decline("align_corners and half_pixel_centers are both set")
        transform = "align_corners" if align else "half_pixel" if half else "asymmetric"
        extra = {}
        if mode == "nearest":
            extra["nearest_mode"] = "floor" if transform == "asymmetric" else "round_prefer_ceil"
        x = _in_layout(e, e.input(0), 4, True)
        batch_channels = e.op("Slice", [e.op("Shape", [x])[0], e.ints([0], "start"), e.ints([2], "end")])[0]
        sizes = e.op("Concat", [batch_channels, e.int64(1)], axis=0)[0]
        y = e.op("Resize", [x, "", "", sizes], mode=mode, coordinate_transformation_mode=transform, **extra)[0]
        out_dtype = e.out_dtype(0)
        if out_dtype != e.dtype(0):
            y = e.cast(y, out_dtype)
        _out_layout(e, y, 4, True)

    return lower


def _depth_space(onnx_op: str) -> Lowering:
    def lower(e: LoweringEmitter) -> None:
        channels_last = _channels_last(e)
        x = _in_layout(e, e.input(0), 4, channels_last)
        extra = {"mode": "DCR"} if onnx_op == "DepthToSpace" else {}
        y = e.op(onnx_op, [x], blocksize=int(e.attr("block_size")), **extra)[0]
        _out_layout(e, y, 4, channels_last)

    return lower


# The usual matmul and bias add are one ONNX op of the node's inputs, written without an emitter (see PlainOp).
_PLAIN_MATMUL = PlainOp("MatMul", 2, _matmul, plain=_untransposed)
_PLAIN_BIAS_ADD = PlainOp("Add", 2, _bias_add, plain=_bias_last)

LOWERINGS: list[tuple[str, Callable[[LoweringEmitter], None]]] = [
    ("MatMul", _PLAIN_MATMUL), ("BatchMatMul", _PLAIN_MATMUL), ("BatchMatMulV2", _PLAIN_MATMUL),
    ("BatchMatMulV3", _PLAIN_MATMUL),
    ("Einsum", _einsum), ("Conv2D", _conv()), ("Conv3D", _conv()), ("DepthwiseConv2dNative", _conv(depthwise=True)),
    ("MaxPool", _pool("MaxPool")), ("AvgPool", _pool("AveragePool")), ("MaxPool3D", _pool("MaxPool")),
    ("AvgPool3D", _pool("AveragePool")), ("MaxPoolV2", _pool("MaxPool", from_inputs=True)),
    ("FusedBatchNorm", _fused_batch_norm), ("FusedBatchNormV2", _fused_batch_norm),
    ("FusedBatchNormV3", _fused_batch_norm), ("BiasAdd", _PLAIN_BIAS_ADD), ("BiasAddV1", _PLAIN_BIAS_ADD),
    ("Softmax", _softmax("Softmax")), ("LogSoftmax", _softmax("LogSoftmax")), ("LRN", _lrn), ("L2Loss", _l2_loss),
    ("ResizeBilinear", _resize("linear")), ("ResizeNearestNeighbor", _resize("nearest")),
    ("DepthToSpace", _depth_space("DepthToSpace")), ("SpaceToDepth", _depth_space("SpaceToDepth")),
]  # fmt: skip
