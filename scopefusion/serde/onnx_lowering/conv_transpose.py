"""Transposed convolution: ``Conv2DBackpropInput`` (Keras ``Conv2DTranspose``, ``tf.nn.conv2d_transpose``)
→ ONNX ``ConvTranspose``.

TensorFlow computes the gradient of a forward convolution whose input has the spatial size ``H`` that
``input_sizes`` gives: the full transposed convolution (``(h - 1)·s + (k - 1)·d + 1`` long for an
``out_backprop`` of length ``h``), cropped to ``H`` from the forward convolution's leading pad. The leading
pad is TF's: none for ``VALID``, ``⌊total / 2⌋`` for ``SAME`` (``total = max((h - 1)·s + (k - 1)·d + 1 - H,
0)`` with ``h = ⌈H / s⌉``), the given one for ``EXPLICIT``. ONNX gets that as explicit ``pads``: the leading
pad, and at the end what is left past ``H``; when the full output is shorter than ``H`` (``VALID`` with a
stride that does not divide ``H - k``), the missing tail, which TF fills with zeros, is ``output_padding``.

``H`` must be static: the node's inferred output shape, ``input_sizes`` when constant, or the constant
elements of the ``Pack`` that builds it (Keras packs the dynamic batch with the constant spatial sizes). The
filter ``[kh, kw, C, K]`` becomes ``W = [K, C, kh, kw]``; a constant one is rearranged at export time.
Channels-last data is transposed in and out as in :mod:`.nn`.
"""

from __future__ import annotations

from typing import Callable

import numpy as np

from .emitter import LoweringEmitter
from .nn import to_channels_first, to_channels_last

__all__ = ["LOWERINGS"]


def _spatial_sizes(e: LoweringEmitter, channels_last: bool) -> list[int]:
    """The result's static spatial sizes ``[H, W]`` (see the module docstring); declines when unknown."""
    spatial = [1, 2] if channels_last else [2, 3]
    t = e.output_type(0)
    found = [t.shape[a] for a in spatial] if t is not None and t.rank == 4 else [-1, -1]
    sizes = e.const_value(0)
    if sizes is None:
        producer = e.node.inputs[0].producer if e.node.inputs[0] is not None else None
        if producer is not None and producer.op == "tf.Pack" and int(producer.attrs.get("axis", 0)) == 0:
            parts = [e.value_const(v) for v in producer.inputs]
            sizes = np.asarray([int(p) if p is not None and np.size(p) == 1 else -1 for p in parts])
    if sizes is not None:
        values = [int(v) for v in np.asarray(sizes).reshape(-1)]
        given = [values[a] for a in spatial] if len(values) == 4 else values if len(values) == 2 else [-1, -1]
        found = [f if f >= 0 else g for f, g in zip(found, given)]
    if any(d < 0 for d in found):
        e.decline("the spatial sizes of its result (input_sizes) are not static")
    return found


def _conv2d_backprop_input(e: LoweringEmitter) -> None:
    layout = str(e.attr("data_format", "NHWC"))
    if layout not in ("NHWC", "NCHW"):
        e.decline(f"data_format {layout!r} is not NHWC or NCHW")
    channels_last = layout == "NHWC"
    filter_type = e.input_type(1)
    if filter_type is None or filter_type.rank != 4 or not filter_type.is_static:
        e.decline("the filter has no static shape")
    kh, kw, _, c_in = filter_type.shape
    x_type = e.input_type(2)
    channels = x_type.shape[3 if channels_last else 1] if x_type is not None and x_type.rank == 4 else -1
    if channels >= 0 and channels != c_in:
        e.decline(f"out_backprop has {channels} channels where the filter has {c_in}")
    pick = (lambda v: [v[1], v[2]]) if channels_last else (lambda v: [v[2], v[3]])
    strides = pick(list(e.attr("strides", [1, 1, 1, 1])))
    dilations = pick(list(e.attr("dilations", [1, 1, 1, 1])))
    sizes = _spatial_sizes(e, channels_last)
    padding = str(e.attr("padding", "VALID"))
    explicit = list(e.attr("explicit_paddings", ()))
    begin, end, extra = [], [], []
    for axis, (size, k, s, d) in enumerate(zip(sizes, (kh, kw), strides, dilations)):
        span = (k - 1) * d + 1
        if padding == "SAME":
            h = -(-size // s)
            lead = max((h - 1) * s + span - size, 0) // 2
        elif padding == "VALID":
            h = (size - span) // s + 1
            lead = 0
        elif padding == "EXPLICIT" and len(explicit) == 8:
            dim = pick(list(range(4)))[axis]
            lead, trail = int(explicit[2 * dim]), int(explicit[2 * dim + 1])
            h = (size + lead + trail - span) // s + 1
        else:
            e.decline(f"padding {padding!r} with explicit_paddings {explicit} is not one it knows")
        given = x_type.shape[pick(list(range(4)))[axis]] if x_type is not None and x_type.rank == 4 else -1
        if h < 1 or given not in (-1, h):
            e.decline(f"out_backprop's spatial size {given} is not the {h} a {padding} convolution of size {size} "
                      f"with filter {span} and stride {s} gives")
        tail = (h - 1) * s + span - lead - size
        if tail < 0 and -tail >= max(s, d):
            e.decline(f"its result is {-tail} longer than the transposed convolution covers")
        begin.append(lead)
        end.append(max(tail, 0))
        extra.append(max(-tail, 0))
    value = e.const_value(1)
    to_kchw = [3, 2, 0, 1]
    if value is not None:
        w = e.const(np.transpose(value, to_kchw), "W")
    else:
        w = e.op("Transpose", [e.input(1)], perm=to_kchw)[0]
    x = e.op("Transpose", [e.input(2)], perm=to_channels_first(4))[0] if channels_last else e.input(2)
    y = e.op("ConvTranspose", [x, w], kernel_shape=[kh, kw], strides=strides, dilations=dilations,
             pads=begin + end, output_padding=extra if any(extra) else None)[0]
    if channels_last:
        e.result("Transpose", [y], perm=to_channels_last(4))
    else:
        e.result("Identity", [y])


LOWERINGS: list[tuple[str, Callable[[LoweringEmitter], None]]] = [
    ("Conv2DBackpropInput", _conv2d_backprop_input),
]
