"""Neural-network ``tf`` ops: matrix products, convolutions, pooling, normalization, softmax, resize,
top-k and non-max suppression.

Convolution and pooling output sizes follow TF's padding rules (``VALID``: ``(in - eff_k) // s + 1``,
``SAME``: ``ceil(in / s)``, ``EXPLICIT``: pads added first), in the node's ``data_format``. Contradictions
between known sizes (a filter's input channels against the image's, MatMul inner dims, a window larger
than its VALID-padded input) raise. NonMaxSuppression's selection count depends on data: its output
length is unknown (-1) unless padded to a known ``max_output_size``.
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from ... import dtypes as D
from ...ir.attrs import BOOL, DTYPE, FLOAT, INT, LIST_INT, STR
from ...ir.opdef import FollowType, InferContext, OpDef, ParamType
from ._common import (
    ALL,
    Shape,
    broadcast,
    first_dtype,
    int_list,
    merge_dim,
    merge_shapes,
    quiet,
    scalar_int,
    tf_op,
    unknown,
)

__all__ = ["definitions", "window_output_size"]


# ------------------------------------------------------------------------------------------ matmul
def _matmul() -> OpDef:
    op = (
        tf_op("MatMul").input("a").input("b").output("product")
        .attr("transpose_a", BOOL, default=False).attr("transpose_b", BOOL, default=False)
    )  # fmt: skip

    def shape(ctx: InferContext) -> None:
        a, b = ctx.param("a").shape, ctx.param("b").shape
        for name, s in (("a", a), ("b", b)):
            if s is not None and len(s) != 2:
                raise ValueError(f"MatMul input {name} must be a matrix, found rank {len(s)}")
        a = (-1, -1) if a is None else (a[::-1] if ctx.attr("transpose_a") else a)
        b = (-1, -1) if b is None else (b[::-1] if ctx.attr("transpose_b") else b)
        merge_dim(a[1], b[0], "MatMul inner dims")
        ctx.set_output_shape(0, (a[0], b[1]))

    def kernel(inputs: list[np.ndarray], attrs: dict[str, Any]) -> list[np.ndarray]:
        a, b = inputs
        a = a.T if attrs["transpose_a"] else a
        b = b.T if attrs["transpose_b"] else b
        return [np.matmul(a, b).astype(inputs[0].dtype)]

    op.set_infer_dtype(lambda ctx: ctx.set_output_dtype(0, first_dtype([ctx.param("a"), ctx.param("b")])))
    return op.set_infer_shape(shape).set_reference(kernel)


def _batch_matmul(name: str) -> OpDef:
    op = tf_op(name).input("x").input("y").output("output")
    op.attr("adj_x", BOOL, default=False).attr("adj_y", BOOL, default=False)
    if name == "BatchMatMulV3":
        op.attr("Tout", DTYPE)
        op.set_infer_dtype(lambda ctx: ctx.set_output_dtype(0, ctx.attr("Tout")))
    else:
        op.set_infer_dtype(lambda ctx: ctx.set_output_dtype(0, first_dtype([ctx.input(0), ctx.input(1)])))

    def shape(ctx: InferContext) -> None:
        x, y = ctx.param("x").shape, ctx.param("y").shape
        for arg, s in (("x", x), ("y", y)):
            if s is not None and len(s) < 2:
                raise ValueError(f"{name} input {arg} needs rank >= 2, found {len(s)}")
        if x is not None and ctx.attr("adj_x"):
            x = x[:-2] + (x[-1], x[-2])
        if y is not None and ctx.attr("adj_y"):
            y = y[:-2] + (y[-1], y[-2])
        if x is not None and y is not None:
            merge_dim(x[-1], y[-2], f"{name} contraction dims")
        rows = -1 if x is None else x[-2]
        cols = -1 if y is None else y[-1]
        if x is None or y is None:
            ctx.set_output_shape(0, None)
            return
        if name == "BatchMatMul":
            batch = merge_shapes(x[:-2], y[:-2], "BatchMatMul batch dims")
        else:
            batch = broadcast(x[:-2], y[:-2])
        assert batch is not None  # both operands are known shapes
        ctx.set_output_shape(0, tuple(batch) + (rows, cols))

    def kernel(inputs: list[np.ndarray], attrs: dict[str, Any]) -> list[np.ndarray]:
        x, y = inputs
        if attrs["adj_x"]:
            x = np.conj(np.swapaxes(x, -1, -2))
        if attrs["adj_y"]:
            y = np.conj(np.swapaxes(y, -1, -2))
        out = attrs["Tout"].numpy if "Tout" in attrs else inputs[0].dtype
        return [np.matmul(x, y).astype(out)]

    return op.set_infer_shape(shape).set_reference(kernel)


def _parse_einsum(equation: str, n: int) -> tuple[list[str], str]:
    eq = equation.replace(" ", "")
    lhs, arrow, rhs = eq.partition("->")
    terms = lhs.split(",")
    if len(terms) != n:
        raise ValueError(f"einsum equation {equation!r} has {len(terms)} operands, the node has {n} inputs")
    if not arrow:
        labels = [c for t in terms for c in t.replace("...", "")]
        rhs = ("..." if any("..." in t for t in terms) else "") + "".join(
            sorted(c for c in set(labels) if labels.count(c) == 1)
        )
    return terms, rhs


def _einsum() -> OpDef:
    op = tf_op("Einsum").input("inputs", ParamType.DYNAMIC).output("output").attr("equation", STR)

    def shape(ctx: InferContext) -> None:
        infos = ctx.params("inputs")
        terms, rhs = _parse_einsum(ctx.attr("equation"), len(infos))
        dims: dict[str, int] = {}
        ellipsis: Shape = ()
        for term, info in zip(terms, infos):
            if info.shape is None:
                if "..." in term:
                    ellipsis = None
                continue
            head, dots, tail = term.partition("...")
            n_ell = len(info.shape) - len(head) - len(tail)
            if (not dots and n_ell != 0) or n_ell < 0:
                raise ValueError(f"einsum term {term!r} does not fit an input of rank {len(info.shape)}")
            shape_of = dict(zip(head, info.shape[: len(head)]))
            shape_of.update(zip(tail, info.shape[len(info.shape) - len(tail) :]))
            for label, d in shape_of.items():
                dims[label] = merge_dim(dims.get(label, -1), d, f"einsum label {label!r}")
            if dots and ellipsis is not None:
                ellipsis = broadcast(ellipsis, info.shape[len(head) : len(head) + n_ell])
        head, dots, tail = rhs.partition("...")
        if dots and ellipsis is None:
            ctx.set_output_shape(0, None)
            return
        out = [dims.get(c, -1) for c in head] + (list(ellipsis) if dots and ellipsis is not None else []) + [dims.get(c, -1) for c in tail]
        ctx.set_output_shape(0, out)

    op.set_infer_dtype(lambda ctx: ctx.set_output_dtype(0, first_dtype(ctx.params("inputs"))))
    kernel = lambda i, a: [np.asarray(np.einsum(a["equation"].replace(" ", ""), *i)).astype(i[0].dtype)]  # noqa: E731
    return op.set_infer_shape(shape).set_reference(kernel)


# ------------------------------------------------------------------------------------------ windows
def window_output_size(size: int, window: int, stride: int, dilation: int, padding: str, pads: Sequence[int] = (0, 0)) -> int:
    """One spatial output size under TF's padding rules; -1 when the input size or window is unknown."""
    if size < 0 or window < 0:
        return -1
    eff = (window - 1) * dilation + 1
    if padding == "SAME":
        return (size + stride - 1) // stride
    if padding == "EXPLICIT":
        size = size + pads[0] + pads[1]
    elif padding != "VALID":
        raise ValueError(f"unknown padding {padding!r}; expected SAME, VALID or EXPLICIT")
    if size < eff:
        raise ValueError(f"window {window} (dilated to {eff}) is larger than the padded input size {size}")
    return (size - eff) // stride + 1


def _layout(data_format: str, rank: int) -> tuple[int, list[int]]:
    """(channel axis, spatial axes) of a data format such as NHWC, NCHW, NDHWC."""
    if data_format.startswith("NC"):
        return 1, list(range(2, rank))
    return rank - 1, list(range(1, rank - 1))


def _windowed(
    ctx: InferContext,
    x: Shape,
    rank: int,
    window: Sequence[int] | None,
    strides: Sequence[int] | None,
    dilations: Sequence[int],
    out_channels: int | None,
) -> None:
    """Sets output 0 of a convolution or pooling op (``out_channels`` None: the input's channels)."""
    if x is not None and len(x) != rank:
        raise ValueError(f"{ctx.opdef.name} expects a rank-{rank} input, found rank {len(x)}")
    x = x if x is not None else (-1,) * rank
    fmt = ctx.attr("data_format")
    channel, spatial = _layout(fmt, rank)
    padding = ctx.attr("padding")
    pads = list(ctx.attr("explicit_paddings") or ()) if "explicit_paddings" in ctx.opdef.attrs else []
    if padding == "EXPLICIT" and len(pads) != 2 * rank:
        raise ValueError(f"EXPLICIT padding needs {2 * rank} explicit_paddings, found {len(pads)}")
    out = list(x)
    for j, axis in enumerate(spatial):
        if window is None or strides is None:
            out[axis] = -1
            continue
        w = window[j]
        s = strides[axis]
        d = dilations[axis] if dilations else 1
        if s <= 0 or d <= 0:
            raise ValueError(f"strides and dilations must be positive, found {list(strides)} and {list(dilations)}")
        out[axis] = window_output_size(x[axis], w, s, d, padding, pads[2 * axis : 2 * axis + 2] if pads else (0, 0))
    if out_channels is not None:
        out[channel] = out_channels
    ctx.set_output_shape(0, out)


def _conv(name: str, rank: int) -> OpDef:
    default_format = "NHWC" if rank == 4 else "NDHWC"
    op = tf_op(name).input("input").input("filter").output("output", follow=("input", FollowType.DTYPE))
    op.attr("strides", LIST_INT).attr("padding", STR).attr("data_format", STR, default=default_format)
    op.attr("dilations", LIST_INT, default=(1,) * rank)
    if rank == 4:
        op.attr("explicit_paddings", LIST_INT, default=())
    depthwise = name == "DepthwiseConv2dNative"

    def shape(ctx: InferContext) -> None:
        x, f = ctx.param("input").shape, ctx.param("filter").shape
        if f is not None and len(f) != rank:
            raise ValueError(f"{name} filter must have rank {rank}, found {len(f)}")
        f = f if f is not None else (-1,) * rank
        strides = ctx.attr("strides")
        if len(strides) != rank:
            raise ValueError(f"{name} needs {rank} strides, found {len(strides)}")
        channel, _ = _layout(ctx.attr("data_format"), rank)
        in_c = -1 if x is None or len(x) != rank else x[channel]
        if depthwise:
            in_c = merge_dim(in_c, f[2], "input channels and filter in_channels")
            out_c = in_c * f[3] if in_c >= 0 and f[3] >= 0 else -1
        else:
            if in_c >= 0 and f[-2] > 0 and in_c % f[-2] != 0:
                raise ValueError(f"input channels {in_c} are not a multiple of the filter's in_channels {f[-2]}")
            out_c = f[-1]
        _windowed(ctx, x, rank, f[: rank - 2], strides, ctx.attr("dilations"), out_c)

    return op.set_infer_shape(shape)


def _conv2d_backprop_input() -> OpDef:
    op = (
        tf_op("Conv2DBackpropInput", "Transposed convolution: the output shape is the input_sizes value.")
        .input("input_sizes", value_depend=True).input("filter").input("out_backprop")
        .output("output", follow=("filter", FollowType.DTYPE))
        .attr("strides", LIST_INT).attr("padding", STR).attr("data_format", STR, default="NHWC")
    )  # fmt: skip

    def shape(ctx: InferContext) -> None:
        sizes = int_list(ctx.param("input_sizes"))
        ob, f = ctx.param("out_backprop").shape, ctx.param("filter").shape
        channel, spatial = _layout(ctx.attr("data_format"), 4)
        out = [-1] * 4
        out[0] = -1 if ob is None or len(ob) != 4 else ob[0]
        out[channel] = -1 if f is None or len(f) != 4 else f[2]
        if sizes is not None and len(sizes) == 4:
            out = [merge_dim(a, b, "input_sizes and the other inputs") for a, b in zip(sizes, out)]
        elif sizes is not None:  # only the spatial sizes given
            if len(sizes) != 2:
                raise ValueError(f"input_sizes must hold 4 or 2 values, found {len(sizes)}")
            out[spatial[0]], out[spatial[1]] = sizes
        ctx.set_output_shape(0, out)

    return op.set_infer_shape(shape)


def _pool(name: str, rank: int, explicit: bool) -> OpDef:
    default_format = "NHWC" if rank == 4 else "NDHWC"
    arg = "value" if name == "AvgPool" else "input"
    op = tf_op(name).input(arg).output("output", follow=(arg, FollowType.DTYPE))
    op.attr("ksize", LIST_INT).attr("strides", LIST_INT).attr("padding", STR).attr("data_format", STR, default=default_format)
    if explicit:
        op.attr("explicit_paddings", LIST_INT, default=())

    def shape(ctx: InferContext) -> None:
        ksize, strides = ctx.attr("ksize"), ctx.attr("strides")
        if len(ksize) != rank or len(strides) != rank:
            raise ValueError(f"{name} needs {rank} ksize and strides, found {len(ksize)} and {len(strides)}")
        _, spatial = _layout(ctx.attr("data_format"), rank)
        _windowed(ctx, ctx.input_shape(0), rank, [ksize[a] for a in spatial], strides, (), None)

    return op.set_infer_shape(shape)


def _max_pool_v2() -> OpDef:
    op = (
        tf_op("MaxPoolV2").input("input").input("ksize", value_depend=True).input("strides", value_depend=True)
        .output("output", follow=("input", FollowType.DTYPE))
        .attr("padding", STR).attr("data_format", STR, default="NHWC")
    )  # fmt: skip

    def shape(ctx: InferContext) -> None:
        ksize, strides = int_list(ctx.param("ksize")), int_list(ctx.param("strides"))
        _, spatial = _layout(ctx.attr("data_format"), 4)
        window = None if ksize is None else [ksize[a] for a in spatial]
        _windowed(ctx, ctx.param("input").shape, 4, window, strides, (), None)

    return op.set_infer_shape(shape)


# ------------------------------------------------------------------------------------------ normalization
def _fused_batch_norm(name: str) -> OpDef:
    op = tf_op(name).input("x").input("scale").input("offset").input("mean").input("variance")
    op.output("y", follow=("x", ALL))
    for out in ("batch_mean", "batch_variance", "reserve_space_1", "reserve_space_2"):
        op.output(out, follow=("scale", FollowType.DTYPE))
    if name == "FusedBatchNormV3":
        op.output("reserve_space_3", follow=("scale", FollowType.DTYPE))
    op.attr("epsilon", FLOAT, default=1e-4).attr("data_format", STR, default="NHWC").attr("is_training", BOOL, default=True)

    def shape(ctx: InferContext) -> None:
        x = ctx.param("x").shape
        if x is not None and len(x) not in (4, 5):
            raise ValueError(f"{name} input x must have rank 4 or 5, found {len(x)}")
        if x is None:
            x = (-1,) * (5 if "D" in ctx.attr("data_format") else 4)
        channels = -1
        if x is not None:
            channels = x[_layout(ctx.attr("data_format"), len(x))[0]]
        vectors = ["scale", "offset"] + ([] if ctx.attr("is_training") else ["mean", "variance"])
        for arg in vectors:
            s = ctx.param(arg).shape
            if s is not None:
                if len(s) != 1:
                    raise ValueError(f"{name} {arg} must be a vector, found rank {len(s)}")
                channels = merge_dim(channels, s[0], f"channels of x and {arg}")
        if x is not None:
            out = list(x)
            out[_layout(ctx.attr("data_format"), len(x))[0]] = channels
            x = tuple(out)
        ctx.set_output_shape(0, x)
        for i in range(1, 5):
            ctx.set_output_shape(i, (channels,))
        if ctx.num_outputs > 5:
            ctx.set_output_shape(5, None)  # opaque workspace, its size is the kernel's business

    return op.set_infer_shape(shape)


def _bias_add(name: str) -> OpDef:
    op = tf_op(name).input("value").input("bias").output("output", follow=("value", ALL))
    if name == "BiasAdd":
        op.attr("data_format", STR, default="NHWC")

    def shape(ctx: InferContext) -> None:
        x, b = ctx.param("value").shape, ctx.param("bias").shape
        if b is not None and len(b) != 1:
            raise ValueError(f"bias must be a vector, found rank {len(b)}")
        if x is None:
            ctx.set_output_shape(0, None)
            return
        if len(x) < 2:
            raise ValueError(f"{name} value needs rank >= 2, found {len(x)}")
        nchw = name == "BiasAdd" and ctx.attr("data_format") == "NCHW" and len(x) >= 3
        axis = 1 if nchw else len(x) - 1
        out = list(x)
        out[axis] = merge_dim(x[axis], -1 if b is None else b[0], "value channels and bias length")
        ctx.set_output_shape(0, out)

    def kernel(inputs: list[np.ndarray], attrs: dict[str, Any]) -> list[np.ndarray]:
        x, b = inputs
        if attrs.get("data_format") == "NCHW" and x.ndim >= 3:
            b = b.reshape((-1,) + (1,) * (x.ndim - 2))
        return [(x + b).astype(x.dtype)]

    return op.set_infer_shape(shape).set_reference(kernel)


@quiet
def _softmax_kernel(inputs: list[np.ndarray], attrs: dict[str, Any]) -> list[np.ndarray]:
    x = inputs[0]
    e = np.exp(x - np.max(x, axis=-1, keepdims=True))
    return [(e / np.sum(e, axis=-1, keepdims=True)).astype(x.dtype)]


@quiet
def _log_softmax_kernel(inputs: list[np.ndarray], attrs: dict[str, Any]) -> list[np.ndarray]:
    x = inputs[0]
    shifted = x - np.max(x, axis=-1, keepdims=True)
    return [(shifted - np.log(np.sum(np.exp(shifted), axis=-1, keepdims=True))).astype(x.dtype)]


def _softmax(name: str) -> OpDef:
    op = tf_op(name).input("logits").output("softmax" if name == "Softmax" else "logsoftmax", follow=("logits", ALL))

    def shape(ctx: InferContext) -> None:
        s = ctx.param("logits").shape
        if s is not None and len(s) < 1:
            raise ValueError(f"{name} logits must have rank >= 1, found a scalar")
        ctx.set_output_shape(0, s)

    return op.set_infer_shape(shape).set_reference(_softmax_kernel if name == "Softmax" else _log_softmax_kernel)


# ------------------------------------------------------------------------------------------ images
def _resize(name: str) -> OpDef:
    follow_dtype = name == "ResizeNearestNeighbor"
    op = tf_op(name).input("images").input("size", value_depend=True)
    op.output("resized_images", dtypes=None if follow_dtype else (D.FLOAT32,), follow=("images", FollowType.DTYPE) if follow_dtype else None)
    op.attr("align_corners", BOOL, default=False)
    if name != "ResizeArea":
        op.attr("half_pixel_centers", BOOL, default=False)

    def shape(ctx: InferContext) -> None:
        x = ctx.param("images").shape
        if x is not None and len(x) != 4:
            raise ValueError(f"{name} images must have rank 4, found {len(x)}")
        size = int_list(ctx.param("size"))
        if size is not None and len(size) != 2:
            raise ValueError(f"{name} size must hold 2 values, found {len(size)}")
        h, w = size if size is not None else (-1, -1)
        n, c = (-1, -1) if x is None else (x[0], x[3])
        ctx.set_output_shape(0, (n, h, w, c))

    return op.set_infer_shape(shape)


def _depth_space(name: str) -> OpDef:
    op = tf_op(name).input("input").output("output", follow=("input", FollowType.DTYPE))
    op.attr("block_size", INT).attr("data_format", STR, default="NHWC")

    def shape(ctx: InferContext) -> None:
        x = ctx.param("input").shape
        if x is None:
            ctx.set_output_shape(0, unknown(4))
            return
        if len(x) != 4:
            raise ValueError(f"{name} input must have rank 4, found {len(x)}")
        b = ctx.attr("block_size")
        if b < 2:
            raise ValueError(f"{name} block_size must be >= 2, found {b}")
        channel, spatial = _layout(ctx.attr("data_format"), 4)
        out = list(x)
        if name == "DepthToSpace":
            if x[channel] >= 0 and x[channel] % (b * b):
                raise ValueError(f"channels {x[channel]} are not divisible by block_size^2 = {b * b}")
            out[channel] = x[channel] // (b * b) if x[channel] >= 0 else -1
            for a in spatial:
                out[a] = x[a] * b if x[a] >= 0 else -1
        else:
            for a in spatial:
                if x[a] >= 0 and x[a] % b:
                    raise ValueError(f"spatial size {x[a]} is not divisible by block_size {b}")
                out[a] = x[a] // b if x[a] >= 0 else -1
            out[channel] = x[channel] * b * b if x[channel] >= 0 else -1
        ctx.set_output_shape(0, out)

    return op.set_infer_shape(shape)


# ------------------------------------------------------------------------------------------ selection
def _top_k() -> OpDef:
    name = "TopKV2"
    op = tf_op(name).input("input").input("k", value_depend=True)
    op.output("values", follow=("input", FollowType.DTYPE)).output("indices")
    op.attr("sorted", BOOL, default=True).attr("index_type", DTYPE, default=D.INT32)

    def shape(ctx: InferContext) -> None:
        x = ctx.param("input").shape
        k = scalar_int(ctx.param("k"))
        if x is None:
            out: Shape = None
        else:
            if len(x) < 1:
                raise ValueError(f"{name} input must have rank >= 1")
            if k is not None and x[-1] >= 0 and k > x[-1]:
                raise ValueError(f"{name} k = {k} is larger than the last dim {x[-1]}")
            out = x[:-1] + (-1 if k is None else k,)
        ctx.set_output_shape(0, out)
        ctx.set_output_shape(1, out)

    def dtype(ctx: InferContext) -> None:
        ctx.set_output_dtype(0, ctx.param("input").dtype)
        ctx.set_output_dtype(1, ctx.attr("index_type"))

    def kernel(inputs: list[np.ndarray], attrs: dict[str, Any]) -> list[np.ndarray]:
        x, k = inputs[0], int(inputs[1])
        order = np.argsort(-x.astype(np.float64), axis=-1, kind="stable")[..., :k]
        return [np.take_along_axis(x, order, axis=-1), order.astype(attrs["index_type"].numpy)]

    return op.set_infer_shape(shape).set_infer_dtype(dtype).set_reference(kernel)


def _nms(name: str) -> OpDef:
    """NonMaxSuppression V2..V5: how many boxes survive depends on the data, so the length is -1."""
    op = tf_op(name).input("boxes").input("scores").input("max_output_size", value_depend=True).input("iou_threshold")
    version = int(name[-1])
    if version >= 3:
        op.input("score_threshold")
    if version == 5:
        op.input("soft_nms_sigma")
    op.output("selected_indices", dtypes=(D.INT32,))
    if version == 5:
        op.output("selected_scores", follow=("scores", FollowType.DTYPE))
    if version >= 4:
        op.output("valid_outputs", dtypes=(D.INT32,)).attr("pad_to_max_output_size", BOOL, default=False)

    def shape(ctx: InferContext) -> None:
        boxes, scores = ctx.param("boxes").shape, ctx.param("scores").shape
        if boxes is not None and (len(boxes) != 2 or boxes[1] not in (-1, 4)):
            raise ValueError(f"{name} boxes must be [num_boxes, 4], found {list(boxes)}")
        if scores is not None and len(scores) != 1:
            raise ValueError(f"{name} scores must be a vector, found rank {len(scores)}")
        if boxes is not None and scores is not None:
            merge_dim(boxes[0], scores[0], "boxes and scores counts")
        n = -1
        if version >= 4 and ctx.attr("pad_to_max_output_size"):
            limit = scalar_int(ctx.param("max_output_size"))
            n = -1 if limit is None else limit
        for i in range(ctx.num_outputs):
            ctx.set_output_shape(i, () if i == ctx.num_outputs - 1 and version >= 4 else (n,))

    return op.set_infer_shape(shape)


def _in_top_k_shape(ctx: InferContext) -> None:
    predictions = merge_shapes(ctx.param("predictions").shape, (-1, -1), "InTopKV2 predictions") or (-1, -1)
    targets = merge_shapes(ctx.param("targets").shape, (-1,), "InTopKV2 targets") or (-1,)
    ctx.set_output_shape(0, (merge_dim(predictions[0], targets[0], "predictions and targets counts"),))


def _misc_nn() -> list[OpDef]:
    lrn = (
        tf_op("LRN").input("input").output("output", follow=("input", ALL))
        .attr("depth_radius", INT, default=5).attr("bias", FLOAT, default=1.0)
        .attr("alpha", FLOAT, default=1.0).attr("beta", FLOAT, default=0.5)
        .set_infer_shape(lambda ctx: ctx.set_output_shape(0, merge_shapes(ctx.input_shape(0), (-1,) * 4, "LRN input")))
    )  # fmt: skip
    l2 = tf_op("L2Loss").input("t").output("output", follow=("t", FollowType.DTYPE))
    l2.set_infer_shape(lambda ctx: ctx.set_output_shape(0, ()))
    l2.set_reference(lambda i, a: [np.asarray(np.sum(np.square(i[0])) / 2, i[0].dtype)])
    in_top_k = (
        tf_op("InTopKV2").input("predictions").input("targets").input("k").output("precision", dtypes=(D.BOOL,))
        .set_infer_shape(_in_top_k_shape)
    )  # fmt: skip
    return [lrn, l2, in_top_k]


def definitions() -> list[OpDef]:
    """Every neural-network ``tf`` op definition."""
    ops = [_matmul()] + [_batch_matmul(n) for n in ("BatchMatMul", "BatchMatMulV2", "BatchMatMulV3")] + [_einsum()]
    ops += [_conv("Conv2D", 4), _conv("Conv3D", 5), _conv("DepthwiseConv2dNative", 4), _conv2d_backprop_input()]
    ops += [_pool("MaxPool", 4, True), _pool("AvgPool", 4, False), _pool("MaxPool3D", 5, False), _pool("AvgPool3D", 5, False)]
    ops += [_max_pool_v2()]
    ops += [_fused_batch_norm(n) for n in ("FusedBatchNorm", "FusedBatchNormV2", "FusedBatchNormV3")]
    ops += [_bias_add("BiasAdd"), _bias_add("BiasAddV1"), _softmax("Softmax"), _softmax("LogSoftmax")]
    ops += [_resize(n) for n in ("ResizeBilinear", "ResizeNearestNeighbor", "ResizeBicubic", "ResizeArea")]
    ops += [_depth_space("DepthToSpace"), _depth_space("SpaceToDepth")]
    ops += [_top_k()]
    ops += [_nms(n) for n in ("NonMaxSuppressionV2", "NonMaxSuppressionV3", "NonMaxSuppressionV4", "NonMaxSuppressionV5")]
    return ops + _misc_nn()
