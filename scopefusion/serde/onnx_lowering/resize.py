"""``ResizeBicubic`` and ``ResizeArea`` (``tf.image.resize`` with ``bicubic`` / ``area``, ``tf.compat.v1``'s
``align_corners`` and ``half_pixel_centers`` variants) as two matrix products with TensorFlow's own weights.

Both resizes are separable: ``out[y, x] = Σ Wy[y, i] · Wx[x, j] · in[i, j]``. The images, as NCHW float32,
become ``MatMul(MatMul(Wy, x), Wxᵀ)``, where ``Wy`` is ``[out_h, in_h]`` and ``Wxᵀ`` ``[in_w, out_w]``. Along an
axis of static size the matrix is computed at export time, in float32, the way TensorFlow's kernel computes
its weights; along an axis known only at run time the graph computes it from ``Shape`` with the same
formulas (the bicubic coefficients gathered from the same table), as it does for a ``size`` computed at run
time.

ONNX ``Resize`` is not used because it does not compute TF's values: TF's bicubic kernel reads its
weights from a 1024-entry table (the fractional position rounded to 1/1024, an error up to ~1e-3 against the
exact cubic ONNX evaluates) and ONNX has no area mode.

* Scale: ``in / out``, or ``(in - 1) / (out - 1)`` with ``align_corners`` (and ``out > 1``).
* Bicubic, ``half_pixel_centers``: source ``(o + 0.5)·scale - 0.5``, Keys' cubic ``a = -0.5``; taps outside
  the image get weight 0 and the four weights are renormalized to sum to 1. Otherwise: source ``o·scale``,
  ``a = -0.75``, taps outside the image read the edge pixel.
* Area: output cell ``[o·scale, (o + 1)·scale)`` averages the input cells it overlaps, each weighted by the
  overlap (indices past the image read the last pixel, which ``align_corners`` can reach). A one-pixel
  axis takes the plain scale even with ``align_corners`` (TF's kernel does).
"""

from __future__ import annotations

from typing import Callable

import numpy as np

from .emitter import LoweringEmitter
from .nn import to_channels_first, to_channels_last

__all__ = ["LOWERINGS", "area_weights", "bicubic_weights"]

_TABLE_SIZE = 1024
_F = np.float32


def _scale(size_in: int, size_out: int, align_corners: bool) -> np.float32:
    if align_corners and size_out > 1:
        return _F(size_in - 1) / _F(size_out - 1)
    return _F(size_in) / _F(size_out)


def _cubic_table(a: float) -> np.ndarray:
    """TF's coefficient table: row ``i`` holds the weights at distance ``i/1024`` and ``1 + i/1024``."""
    x = np.arange(_TABLE_SIZE + 1, dtype=np.float64) / _TABLE_SIZE
    near = ((a + 2) * x - (a + 3)) * x * x + 1
    x1 = x + 1.0
    far = ((a * x1 - 5 * a) * x1 + 8 * a) * x1 - 4 * a
    return np.stack([near, far], axis=1).astype(_F)


def bicubic_weights(size_in: int, size_out: int, align_corners: bool, half_pixel_centers: bool) -> np.ndarray:
    """The ``[size_out, size_in]`` matrix of TF's bicubic resize along one axis."""
    table = _cubic_table(-0.5 if half_pixel_centers else -0.75)
    scale = _scale(size_in, size_out, align_corners)
    weights = np.zeros((size_out, size_in), _F)
    for o in range(size_out):
        source = (_F(o) + _F(0.5)) * scale - _F(0.5) if half_pixel_centers else _F(o) * scale
        base = int(np.floor(source))
        offset = int(np.rint((source - _F(base)) * _F(_TABLE_SIZE)))
        taps = [table[offset, 1], table[offset, 0], table[_TABLE_SIZE - offset, 0], table[_TABLE_SIZE - offset, 1]]
        indices = [base - 1 + k for k in range(4)]
        bounded = [min(max(i, 0), size_in - 1) for i in indices]
        if half_pixel_centers:
            taps = [w if i == b else _F(0) for w, i, b in zip(taps, indices, bounded)]
            total = _F(sum(taps, _F(0)))
            if abs(total) >= 1000 * np.finfo(_F).tiny:
                taps = [w * (_F(1) / total) for w in taps]
        for i, w in zip(bounded, taps):
            weights[o, i] += w
    return weights


def area_weights(size_in: int, size_out: int, align_corners: bool) -> np.ndarray:
    """The ``[size_out, size_in]`` matrix of TF's area resize along one axis (its share of the ``1/scale``
    normalisation included)."""
    scale = _scale(size_in, size_out, align_corners and size_in > 1)  # TF's rule for a one-pixel axis
    weights = np.zeros((size_out, size_in), np.float64)
    for o in range(size_out):
        start, stop = _F(o) * scale, _F(o + 1) * scale
        for i in range(int(np.floor(start)), int(np.ceil(stop))):
            if i < start:
                share = scale if i + 1 > stop else _F(i + 1) - start
            else:
                share = stop - _F(i) if i + 1 > stop else _F(1)
            weights[o, min(i, size_in - 1)] += float(share)
    return (weights / float(scale)).astype(_F)


# ----------------------------------------------------------------------------- weights computed in the graph
class _Axis:
    """The ONNX tensors one axis's weights are computed from when a size is known only at run time: the input
    size ``n`` (int64 and float32 scalars), TF's ``scale``, the output positions ``o`` and ``o + 1`` (float32
    ``[out, 1]``) and the input positions ``i`` (int64 and float32 ``[1, n]``). ``size_out`` is an int, or
    the name of an int64 scalar tensor."""

    def __init__(self, e: LoweringEmitter, x: str, axis: int, size_out: int | str, align_corners: bool,
                 area: bool) -> None:
        self.e = e
        n = e.op("Gather", [e.op("Shape", [x])[0], e.const(np.asarray(axis, np.int64), "axis")], axis=0)[0]
        self.n, self.n_float = n, e.cast(n, np.float32)
        one = e.const(np.asarray(1, np.int64), "one")
        zero = e.const(np.asarray(0, np.int64), "zero")
        if isinstance(size_out, int):
            out_float = e.const(_F(size_out), "out_size")
            out_less_one = e.const(_F(size_out - 1), "out_minus_one")
            self.o = e.const(np.arange(size_out, dtype=_F).reshape(-1, 1), "out_positions")
        else:
            out_float = e.cast(size_out, np.float32)
            out_less_one = e.cast(e.op("Sub", [size_out, one])[0], np.float32)
            self.o = e.unsqueeze(e.cast(e.op("Range", [zero, size_out, one])[0], np.float32), [1])
        self.o_next = e.op("Add", [self.o, self.f(1.0)])[0]
        plain = e.op("Div", [self.n_float, out_float])[0]
        if not align_corners or (isinstance(size_out, int) and size_out == 1):
            self.scale = plain
        else:  # corners where the output has more than one pixel (and, for area, the input too)
            corners = e.op("Div", [e.cast(e.op("Sub", [n, one])[0], np.float32), out_less_one])[0]
            conditions = [] if isinstance(size_out, int) else [e.op("Greater", [size_out, one])[0]]
            if area:
                conditions.append(e.op("Greater", [n, one])[0])
            if len(conditions) == 2:
                conditions = [e.op("And", conditions)[0]]
            self.scale = e.op("Where", [conditions[0], corners, plain])[0] if conditions else corners
        index = e.op("Range", [zero, n, one])[0]
        self.i = e.unsqueeze(index, [0])
        self.i_float = e.cast(self.i, np.float32)

    def f(self, value: float) -> str:
        return self.e.const(_F(value), "scalar")


def _bicubic_in_graph(ax: _Axis, half_pixel_centers: bool) -> str:
    e = ax.e
    table = _cubic_table(-0.5 if half_pixel_centers else -0.75).reshape(-1)
    if half_pixel_centers:
        shifted = e.op("Mul", [e.op("Add", [ax.o, ax.f(0.5)])[0], ax.scale])[0]
        source = e.op("Sub", [shifted, ax.f(0.5)])[0]
    else:
        source = e.op("Mul", [ax.o, ax.scale])[0]
    base = e.op("Floor", [source])[0]
    delta = e.op("Sub", [source, base])[0]
    offset = e.cast(e.op("Round", [e.op("Mul", [delta, ax.f(_TABLE_SIZE)])[0]])[0], np.int64)
    # The four taps' entries of the flattened [1025, 2] table: far and near at offset, near and far at 1024 - offset.
    rows = e.op("Add", [e.op("Mul", [offset, e.ints([2, 2, -2, -2], "row_step")])[0],
                        e.ints([1, 0, 2 * _TABLE_SIZE, 2 * _TABLE_SIZE + 1], "row_base")])[0]
    taps = e.op("Gather", [e.const(table, "cubic_table"), rows], axis=0)[0]
    indices = e.op("Add", [e.cast(base, np.int64), e.ints([-1, 0, 1, 2], "tap_offsets")])[0]
    last = e.op("Sub", [ax.n, e.const(np.asarray(1, np.int64), "one")])[0]
    bounded = e.op("Min", [e.op("Max", [indices, e.const(np.asarray(0, np.int64), "zero")])[0], last])[0]
    if half_pixel_centers:
        inside = e.op("Equal", [indices, bounded])[0]
        taps = e.op("Where", [inside, taps, ax.f(0.0)])[0]
        total = e.reduce("ReduceSum", taps, [1], keepdims=1)
        scaled = e.op("Mul", [taps, e.op("Div", [ax.f(1.0), total])[0]])[0]
        big = e.op("GreaterOrEqual", [e.op("Abs", [total])[0], ax.f(1000 * float(np.finfo(_F).tiny))])[0]
        taps = e.op("Where", [big, scaled, taps])[0]
    hits = e.op("Equal", [e.unsqueeze(bounded, [2]), e.unsqueeze(ax.i, [0])])[0]  # [out, 4, n]
    spread = e.op("Where", [hits, e.unsqueeze(taps, [2]), ax.f(0.0)])[0]
    return e.reduce("ReduceSum", spread, [1], keepdims=0)


def _area_in_graph(ax: _Axis) -> str:
    e = ax.e
    start = e.op("Mul", [ax.o, ax.scale])[0]
    stop = e.op("Mul", [ax.o_next, ax.scale])[0]
    i, i_next = ax.i_float, e.op("Add", [ax.i_float, ax.f(1.0)])[0]
    before, past = e.op("Less", [i, start])[0], e.op("Greater", [i_next, stop])[0]
    share = e.op("Where", [before, e.op("Where", [past, ax.scale, e.op("Sub", [i_next, start])[0]])[0],
                           e.op("Where", [past, e.op("Sub", [stop, i])[0], ax.f(1.0)])[0]])[0]
    covered = e.op("And", [e.op("Greater", [i_next, start])[0], e.op("Less", [i, stop])[0]])[0]
    share = e.op("Where", [covered, share, ax.f(0.0)])[0]
    # Cells past the image read its last pixel: their overlap goes to the last column.
    beyond = e.op("Max", [e.op("Sub", [stop, e.op("Max", [ax.n_float, start])[0]])[0], ax.f(0.0)])[0]
    last = e.op("Equal", [ax.i, e.op("Sub", [ax.n, e.const(np.asarray(1, np.int64), "one")])[0]])[0]
    share = e.op("Add", [share, e.op("Where", [last, beyond, ax.f(0.0)])[0]])[0]
    return e.op("Div", [share, ax.scale])[0]


# ----------------------------------------------------------------------------- the lowerings
def _resize(kind: str) -> Callable[[LoweringEmitter], None]:
    def lower(e: LoweringEmitter) -> None:
        if e.rank(0) != 4:
            e.decline("the images are not rank 4")
        found_size = e.const_value(1)
        sizes: list[int | str]
        if found_size is not None:
            constant = [int(v) for v in np.asarray(found_size).reshape(-1)]
            if len(constant) != 2 or min(constant) < 1:
                e.decline(f"size {constant} is not two positive sizes")
            sizes = list(constant)
        else:
            size_type = e.input_type(1)
            if size_type is None or size_type.shape != (2,):
                e.decline("its size is not a vector of 2 values")
            size_t = e.int64(1)
            sizes = [e.op("Gather", [size_t, e.const(np.asarray(k, np.int64), "axis")], axis=0)[0] for k in (0, 1)]
        align, half = bool(e.attr("align_corners", False)), bool(e.attr("half_pixel_centers", False))
        if align and half:
            e.decline("align_corners and half_pixel_centers are both set")
        t = e.input_type(0)
        x = e.input(0)
        if e.dtype(0).numpy != np.dtype(np.float32):
            x = e.cast(x, np.float32)
        x = e.op("Transpose", [x], perm=to_channels_first(4))[0]
        matrices = []
        for axis, size_out in zip((2, 3), sizes):
            size_in = t.shape[axis - 1]  # type: ignore[union-attr]
            if size_in >= 0 and isinstance(size_out, int):
                found = (bicubic_weights(size_in, size_out, align, half) if kind == "bicubic"
                         else area_weights(size_in, size_out, align))
                matrices.append(e.const(found if axis == 2 else np.ascontiguousarray(found.T), "weights"))
                continue
            ax = _Axis(e, x, axis, size_out, align, kind == "area")
            found_t = _bicubic_in_graph(ax, half) if kind == "bicubic" else _area_in_graph(ax)
            matrices.append(found_t if axis == 2 else e.op("Transpose", [found_t], perm=[1, 0])[0])
        y = e.op("MatMul", [matrices[0], x])[0]
        y = e.op("MatMul", [y, matrices[1]])[0]
        e.result("Transpose", [y], perm=to_channels_last(4))

    return lower


LOWERINGS: list[tuple[str, Callable[[LoweringEmitter], None]]] = [
    ("ResizeBicubic", _resize("bicubic")), ("ResizeArea", _resize("area")),
]  # fmt: skip
