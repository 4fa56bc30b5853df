"""Transposed convolution: ``Conv2DBackpropInput`` (Keras ``Conv2DTranspose``, ``tf.nn.conv2d_transpose``)
→ ONNX ``ConvTranspose``.

TensorFlow computes the gradient of a forward convolution whose input has the spatial size ``H`` that
``input_sizes`` gives: the full transposed convolution (``(h - 1)·s + (k - 1)·d + 1`` long for an
``out_backprop`` of length ``h``), cropped to ``H`` from the forward convolution's leading pad. The leading
pad is TF's: none for ``VALID``, ``⌊total / 2⌋`` for ``SAME`` (``total = max((h - 1)·s + (k - 1)·d + 1 - H,
0)`` with ``h = ⌈H / s⌉``), the given one for ``EXPLICIT``. ONNX gets that as explicit ``pads``: the leading
pad, and at the end what is left past ``H``; when the full output is shorter than ``H`` (``VALID`` with a
stride that does not divide ``H - k``), the missing tail, which TF fills with zeros, is ``output_padding``.

``H`` is static when the node's inferred output shape, ``input_sizes`` (constant), or the constant elements
of the ``Pack`` that builds it (Keras packs the run-time batch with constant spatial sizes) give it. Else
(a model of any image size) the full transposed convolution is cut at run time: ``Slice`` from the leading
pad (computed from ``Shape``), ``H`` long, then ``Pad`` with the zeros of an uncovered tail. The
filter ``[kh, kw, C, K]`` becomes ``W = [K, C, kh, kw]``; a constant one is rearranged at export time.
Channels-last data is transposed in and out as in :mod:`.nn`.
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np

from .emitter import LoweringEmitter
from .nn import to_channels_first, to_channels_last

__all__ = ["LOWERINGS"]


def _spatial_sizes(e: LoweringEmitter, channels_last: bool) -> list[int] | None:
    """The result's static spatial sizes ``[H, W]`` (see the module docstring), else None."""
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
    return None if any(d < 0 for d in found) else found


class _Geometry:
    """One transposed convolution's attributes, read and checked."""

    def __init__(self, e: LoweringEmitter) -> None:
        layout = str(e.attr("data_format", "NHWC"))
        if layout not in ("NHWC", "NCHW"):
            e.decline(f"data_format {layout!r} is not NHWC or NCHW")
        self.channels_last = layout == "NHWC"
        filter_type = e.input_type(1)
        if filter_type is None or filter_type.rank != 4 or not filter_type.is_static:
            e.decline("the filter has no static shape")
        self.kernel = list(filter_type.shape[:2])
        c_in = filter_type.shape[3]
        self.spatial_axes = [1, 2] if self.channels_last else [2, 3]
        x_type = e.input_type(2)
        self.x_dims = list(x_type.shape) if x_type is not None and x_type.rank == 4 else [-1] * 4
        channels = self.x_dims[3 if self.channels_last else 1]
        if channels >= 0 and channels != c_in:
            e.decline(f"out_backprop has {channels} channels where the filter has {c_in}")
        self.strides = [int(v) for v in self.pick(list(e.attr("strides", [1, 1, 1, 1])))]
        self.dilations = [int(v) for v in self.pick(list(e.attr("dilations", [1, 1, 1, 1])))]
        self.spans = [(k - 1) * d + 1 for k, d in zip(self.kernel, self.dilations)]
        self.padding = str(e.attr("padding", "VALID"))
        explicit = [int(v) for v in e.attr("explicit_paddings", ())]
        if self.padding == "EXPLICIT" and len(explicit) == 8:
            self.explicit = [(explicit[2 * a], explicit[2 * a + 1]) for a in self.spatial_axes]
        elif self.padding not in ("SAME", "VALID"):
            e.decline(f"padding {self.padding!r} with explicit_paddings {explicit} is not one it knows")

    def pick(self, values: list) -> list:
        return [values[a] for a in self.spatial_axes]


def _static_pads(e: LoweringEmitter, g: _Geometry, sizes: list[int]) -> dict[str, Any]:
    """``pads`` and ``output_padding`` for static result sizes (see the module docstring)."""
    begin, end, extra = [], [], []
    for axis, (size, span, s) in enumerate(zip(sizes, g.spans, g.strides)):
        if g.padding == "SAME":
            h = -(-size // s)
            lead = max((h - 1) * s + span - size, 0) // 2
        elif g.padding == "VALID":
            h = (size - span) // s + 1
            lead = 0
        else:
            lead, trail = g.explicit[axis]
            h = (size + lead + trail - span) // s + 1
        given = g.pick(g.x_dims)[axis]
        if h < 1 or given not in (-1, h):
            e.decline(f"out_backprop's spatial size {given} is not the {h} a {g.padding} convolution of size "
                      f"{size} with filter {span} and stride {s} gives")
        tail = (h - 1) * s + span - lead - size
        if tail < 0 and -tail >= max(s, g.dilations[axis]):
            e.decline(f"its result is {-tail} longer than the transposed convolution covers")
        begin.append(lead)
        end.append(max(tail, 0))
        extra.append(max(-tail, 0))
    return {"pads": begin + end, "output_padding": extra if any(extra) else None}


def _crop_to_sizes(e: LoweringEmitter, g: _Geometry, full: str, x: str) -> str:
    """The full transposed convolution ``full`` (NCHW) cut to the run-time ``input_sizes``: from TF's
    leading pad, ``H`` long, zeros added where the convolution does not reach."""
    sizes = e.int64(0)
    count = e.input_type(0).shape[0] if e.input_type(0) is not None else -1  # type: ignore[union-attr]
    if count not in (2, 4):
        e.decline(f"input_sizes holds {count} values, not 4 (or the 2 spatial sizes)")
    sizes = e.op("Gather", [sizes, e.ints(g.spatial_axes if count == 4 else [0, 1], "spatial")], axis=0)[0]
    h = e.op("Slice", [e.op("Shape", [x])[0], e.ints([2], "start"), e.ints([4], "end")])[0]
    covered = e.op("Add", [e.op("Mul", [e.op("Sub", [h, e.ints([1, 1], "one")])[0], e.ints(g.strides, "strides")])[0],
                           e.ints(g.spans, "spans")])[0]
    if g.padding == "SAME":
        total = e.op("Max", [e.op("Sub", [covered, sizes])[0], e.ints([0, 0], "zero")])[0]
        lead = e.op("Div", [total, e.ints([2, 2], "two")])[0]
    else:
        lead = e.ints([p[0] for p in g.explicit] if g.padding == "EXPLICIT" else [0, 0], "lead")
    y = e.op("Slice", [full, lead, e.op("Add", [lead, sizes])[0], e.ints([2, 3], "axes")])[0]
    missing = e.op("Max", [e.op("Sub", [sizes, e.op("Sub", [covered, lead])[0]])[0], e.ints([0, 0], "zero")])[0]
    pads = e.op("Concat", [e.ints([0] * 6, "no_pads"), missing], axis=0)[0]
    return e.op("Pad", [y, pads])[0]


def _conv2d_backprop_input(e: LoweringEmitter) -> None:
    g = _Geometry(e)
    sizes = _spatial_sizes(e, g.channels_last)
    value = e.const_value(1)
    to_kchw = [3, 2, 0, 1]
    if value is not None:
        w = e.const(np.transpose(value, to_kchw), "W")
    else:
        w = e.op("Transpose", [e.input(1)], perm=to_kchw)[0]
    x = e.op("Transpose", [e.input(2)], perm=to_channels_first(4))[0] if g.channels_last else e.input(2)
    attrs: dict[str, Any] = {"kernel_shape": g.kernel, "strides": g.strides, "dilations": g.dilations}
    if sizes is not None:
        y = e.op("ConvTranspose", [x, w], **attrs, **_static_pads(e, g, sizes))[0]
    else:
        y = _crop_to_sizes(e, g, e.op("ConvTranspose", [x, w], **attrs)[0], x)
    if g.channels_last:
        e.result("Transpose", [y], perm=to_channels_last(4))
    else:
        e.result("Identity", [y])


LOWERINGS: list[tuple[str, Callable[[LoweringEmitter], None]]] = [
    ("Conv2DBackpropInput", _conv2d_backprop_input),
]
