"""``fused.BatchNorm``: batch normalization in inference form with given statistics (GE's ``BatchNorm``,
``is_training=False``, output ``y`` only).

    y = (x - mean) * rsqrt(variance + epsilon) * scale + offset

Inputs in GE's order: ``x``, ``scale``, ``offset``, ``mean``, ``variance``. The four parameters hold one
value per channel: the last axis for ``data_format="NHWC"``, axis 1 for ``"NCHW"``. A 1-D parameter is
laid along that axis; a parameter of higher rank ([1, 1, 1, C], [C, 1, 1]) broadcasts against ``x``
numpy-style, as ``tf.nn.batch_normalization`` does.

NOTE: GE's BatchNorm also returns the batch statistics and reserve spaces for training; this is the
inference op, so only ``y`` exists here.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ...ir.attrs import BOOL, FLOAT, STR
from ...ir.opdef import FollowType, InferContext, OpDef
from .instance_norm import DATA_FORMATS
from .layer_norm import FLOATS, params_shape_check

__all__ = ["batch_norm", "definition"]

_PARAMS = ("scale", "offset", "mean", "variance")


def _along_channel(param: Any, rank: int, data_format: str) -> np.ndarray:
    array = np.asarray(param, dtype=np.float64)
    if data_format == "NCHW" and array.ndim == 1 and rank >= 2:
        return array.reshape((-1,) + (1,) * (rank - 2))
    return array


def batch_norm(x: np.ndarray, params: list[Any], epsilon: float, data_format: str) -> np.ndarray:
    """The normalization in float64, cast back to ``x``'s dtype."""
    scale, offset, mean, variance = (_along_channel(p, x.ndim, data_format) for p in params)
    y = (x.astype(np.float64) - mean) / np.sqrt(variance + epsilon) * scale + offset
    return y.astype(x.dtype)


def definition() -> OpDef:
    op = OpDef("BatchNorm", "fused", doc=__doc__.split("\n\n")[0]).input("x", dtypes=FLOATS)
    for name in _PARAMS:
        op.input(name, dtypes=FLOATS)
    op.output("y", follow=("x", FollowType.ALL))
    op.attr("epsilon", FLOAT, default=1e-3).attr("data_format", STR, default="NHWC").attr("is_training", BOOL, default=False)

    def shape(ctx: InferContext) -> None:
        data_format = ctx.attr("data_format")
        if data_format not in DATA_FORMATS:
            raise ValueError(f"data_format is {data_format!r}, expected one of {DATA_FORMATS}")
        if ctx.attr("is_training"):
            raise ValueError("is_training is true; fused.BatchNorm is the inference form")
        x = ctx.param("x")
        if data_format == "NCHW":
            for name in _PARAMS:
                shape = ctx.param(name).shape
                if shape is not None and len(shape) == 1 and x.shape is not None and len(x.shape) >= 2:
                    if -1 not in (shape[0], x.shape[1]) and shape[0] not in (1, x.shape[1]):
                        raise ValueError(f"{name} has {shape[0]} values for {x.shape[1]} channels")
        else:
            params_shape_check(ctx, x.shape, _PARAMS)
        ctx.set_output_shape(0, x.shape)
        ctx.set_output_format(0, x.format)

    def kernel(inputs: list[np.ndarray | None], attrs: dict[str, Any]) -> list[np.ndarray]:
        x = np.asarray(inputs[0])
        return [batch_norm(x, list(inputs[1:]), attrs["epsilon"], attrs["data_format"])]

    return op.set_infer_shape(shape).set_reference(kernel)
