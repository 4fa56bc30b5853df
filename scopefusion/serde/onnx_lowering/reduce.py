"""Reductions: Sum, Prod, Max, Min, Mean, EuclideanNorm, All, Any, ArgMax, ArgMin, Cumsum.

* ``Sum(x, axes, keep_dims)`` → ``ReduceSum`` with the axes as an int64 input and ``noop_with_empty_axes``
  (TF reduces nothing over an empty axis list); the other ``Reduce*`` take their axes as an input from
  opset 18, an attribute (constant axes only) before. ``EuclideanNorm`` → ``ReduceL2``.
* ``All`` / ``Any`` → ``ReduceMin`` / ``ReduceMax`` over the booleans as uint8, cast back.
* ``ArgMax`` / ``ArgMin`` → the ONNX op (first index on ties, as TF), cast to ``output_type``.
* ``Cumsum`` → ``CumSum`` with ``exclusive`` / ``reverse``.
"""

from __future__ import annotations

from typing import Callable

import numpy as np

from .emitter import LoweringEmitter

__all__ = ["LOWERINGS"]

_REDUCE = {"Sum": "ReduceSum", "Prod": "ReduceProd", "Max": "ReduceMax", "Min": "ReduceMin", "Mean": "ReduceMean",
           "EuclideanNorm": "ReduceL2", "All": "ReduceMin", "Any": "ReduceMax"}
_AXES_INPUT_SINCE = {"ReduceSum": 13}


def _reduce(e: LoweringEmitter) -> None:
    onnx_op = _REDUCE[e.node.op_type]
    keep = 1 if bool(e.attr("keep_dims", False)) else 0
    x = e.input(0)
    boolean = e.node.op_type in ("All", "Any")
    if boolean:
        x = e.cast(x, np.uint8)
    out = None if boolean else e.outputs[0]
    axes_c = e.const_value(1)
    if e.opset >= _AXES_INPUT_SINCE.get(onnx_op, 18):
        axes = e.int64(1) if axes_c is None else e.ints(np.asarray(axes_c).reshape(-1), "axes")
        if axes_c is None and e.rank(1) == 0:
            axes = e.op("Reshape", [axes, e.ints([1], "shape")])[0]
        y = e.op(onnx_op, [x, axes], outputs=[out], keepdims=keep, noop_with_empty_axes=1)[0]
    else:
        if axes_c is None:
            e.decline(f"its axes are not constant and ONNX {onnx_op} takes them as an attribute before opset 18")
        listed = [int(a) for a in np.asarray(axes_c).reshape(-1)]
        if not listed:
            e.result("Identity", [e.input(0)])
            return
        y = e.op(onnx_op, [x], outputs=[out], axes=listed, keepdims=keep)[0]
    if boolean:
        e.result("Cast", [y], to=9)


def _arg(onnx_op: str) -> Callable[[LoweringEmitter], None]:
    def lower(e: LoweringEmitter) -> None:
        axis = int(np.asarray(e.require_const(1, "axis")).reshape(-1)[0])
        y = e.op(onnx_op, [e.input(0)], axis=axis, keepdims=0)[0]
        dtype = e.out_dtype(0)
        if dtype.numpy == np.dtype(np.int64):
            e.result("Identity", [y])
        else:
            e.cast(y, dtype, out=e.outputs[0])

    return lower


def _cumsum(e: LoweringEmitter) -> None:
    axis = e.op("Reshape", [e.int64(1), e.ints([], "scalar")])[0]
    e.result("CumSum", [e.input(0), axis], exclusive=int(bool(e.attr("exclusive", False))),
             reverse=int(bool(e.attr("reverse", False))))


LOWERINGS: list[tuple[str, Callable[[LoweringEmitter], None]]] = [
    *((tf_op, _reduce) for tf_op in _REDUCE),
    ("ArgMax", _arg("ArgMax")), ("ArgMin", _arg("ArgMin")), ("Cumsum", _cumsum),
]  # fmt: skip
