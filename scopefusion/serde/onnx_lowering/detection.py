"""Selection ``tf`` ops: ``TopKV2`` and ``NonMaxSuppressionV2``–``V5``.

* ``TopKV2(x, k)`` → ``TopK(x, [k], axis=-1, largest=1, sorted=1)``; the int64 indices are cast to TF's
  int32.
* ``NonMaxSuppressionV*(boxes [N, 4], scores [N], max_output_size, iou_threshold[, score_threshold])`` →
  ``NonMaxSuppression`` on ``[1, N, 4]`` / ``[1, 1, N]`` (corner boxes in either diagonal order, as TF);
  the selected indices are column 2 of its ``[K, 3]`` output, cast to int32. TF and ONNX both keep a box
  whose score is above the threshold and drop one whose IoU with a kept box is above the IoU threshold.
  ``V4``'s ``valid_outputs`` is the count; ``pad_to_max_output_size`` pads with zeros to the maximum.
  ``V5`` with ``soft_nms_sigma`` 0 gives the selected scores by gathering them.
"""

from __future__ import annotations

from typing import Callable

import numpy as np

from .emitter import LoweringEmitter

__all__ = ["LOWERINGS"]


def _top_k(e: LoweringEmitter) -> None:
    if not bool(e.attr("sorted", True)):
        pass  # TF leaves the order unspecified then; sorted is one valid order
    k = e.op("Reshape", [e.int64(1), e.ints([1], "shape")])[0]
    values, indices = e.op("TopK", [e.input(0), k], outputs=[e.outputs[0], None], axis=-1, largest=1, sorted=1)
    if e.used(1):
        e.cast(indices, e.out_dtype(1), out=e.outputs[1])


def _scalar_f32(e: LoweringEmitter, i: int) -> str:
    value = e.const_value(i)
    if value is not None:
        return e.const(np.asarray(value, np.float32).reshape(1), f"in{i}")
    x = e.input(i)
    if e.dtype(i).numpy != np.dtype(np.float32):
        x = e.cast(x, np.float32)
    return e.op("Reshape", [x, e.ints([1], "shape")])[0]


def _nms(e: LoweringEmitter) -> None:
    version = e.node.op_type[-2:]
    boxes = e.unsqueeze(e.input(0), [0])
    scores = e.unsqueeze(e.input(1), [0, 1])
    if e.dtype(0).numpy != np.dtype(np.float32):
        boxes, scores = e.cast(boxes, np.float32), e.cast(scores, np.float32)
    max_out = e.op("Reshape", [e.int64(2), e.ints([1], "shape")])[0]
    inputs = [boxes, scores, max_out, _scalar_f32(e, 3)]
    if version in ("V3", "V4", "V5"):
        inputs.append(_scalar_f32(e, 4))
    if version == "V5":
        sigma = e.const_value(5)
        if sigma is None or float(sigma) != 0.0:
            e.decline("soft_nms_sigma is not a constant 0 (soft NMS has no ONNX form)")
    selected = e.op("NonMaxSuppression", inputs, center_point_box=0)[0]
    column = e.op("Gather", [selected, e.ints([2], "column")], axis=1)[0]
    indices = e.squeeze(column, [1])
    count = e.op("Shape", [indices])[0]
    pad = bool(e.attr("pad_to_max_output_size", False)) and version in ("V4", "V5")
    if pad:
        missing = e.op("Sub", [max_out, count])[0]
        indices = e.op("Pad", [indices, e.op("Concat", [e.ints([0], "zero"), missing], axis=0)[0]])[0]
    e.cast(indices, e.out_dtype(0), out=e.outputs[0])
    if version == "V5" and e.used(1):
        e.op("Gather", [e.input(1), indices], outputs=[e.outputs[1]], axis=0)
    count_index = {"V4": 1, "V5": 2}.get(version)
    if count_index is not None and e.used(count_index):
        e.cast(e.squeeze(count, [0]), e.out_dtype(count_index), out=e.outputs[count_index])


LOWERINGS: list[tuple[str, Callable[[LoweringEmitter], None]]] = [
    ("TopKV2", _top_k),
    *((f"NonMaxSuppressionV{v}", _nms) for v in (2, 3, 4, 5)),
]
