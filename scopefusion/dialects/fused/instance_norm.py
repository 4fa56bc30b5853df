"""``fused.InstanceNorm``: instance normalization over the spatial axes (GE's ``InstanceNorm``, output ``y`` only).

    y = (x - mean(x, spatial)) / sqrt(var(x, spatial) + epsilon) * gamma + beta

The spatial axes are all but the batch and channel axes: ``[1, rank - 1)`` for ``data_format="NHWC"``
(channel last), ``[2, rank)`` for ``"NCHW"``. ``gamma`` and ``beta`` hold one value per channel and
broadcast against ``x`` numpy-style, as in the source graphs ([C] or [1, 1, 1, C] for NHWC).

NOTE: GE's InstanceNorm also returns the mean and variance; the rule refuses an instance norm whose
statistics are read outside it, so only ``y`` exists here.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ...ir.attrs import FLOAT, STR
from ...ir.opdef import FollowType, InferContext, OpDef
from .layer_norm import FLOATS, layer_norm, params_shape_check

__all__ = ["DATA_FORMATS", "definition", "spatial_axes"]

DATA_FORMATS = ("NHWC", "NCHW")


def spatial_axes(rank: int, data_format: str) -> tuple[int, ...]:
    """The axes an instance norm reduces over; ValueError for an unknown format or a rank below 3."""
    if data_format not in DATA_FORMATS:
        raise ValueError(f"data_format is {data_format!r}, expected one of {DATA_FORMATS}")
    if rank < 3:
        raise ValueError(f"an instance norm needs an input of rank 3 or more (batch, spatial, channel), found rank {rank}")
    return tuple(range(1, rank - 1)) if data_format == "NHWC" else tuple(range(2, rank))


def definition() -> OpDef:
    op = (
        OpDef("InstanceNorm", "fused", doc=__doc__.split("\n\n")[0])
        .input("x", dtypes=FLOATS)
        .input("gamma", dtypes=FLOATS)
        .input("beta", dtypes=FLOATS)
        .output("y", follow=("x", FollowType.ALL))
        .attr("data_format", STR, default="NHWC")
        .attr("epsilon", FLOAT, default=1e-6)
    )  # fmt: skip

    def shape(ctx: InferContext) -> None:
        x = ctx.param("x")
        if x.shape is not None:
            spatial_axes(len(x.shape), ctx.attr("data_format"))
        else:
            spatial_axes(3, ctx.attr("data_format"))
        params_shape_check(ctx, x.shape, ("gamma", "beta"))
        ctx.set_output_shape(0, x.shape)
        ctx.set_output_format(0, x.format)

    def kernel(inputs: list[np.ndarray | None], attrs: dict[str, Any]) -> list[np.ndarray]:
        x, gamma, beta = inputs
        x = np.asarray(x)
        return [layer_norm(x, spatial_axes(x.ndim, attrs["data_format"]), attrs["epsilon"], gamma, beta)]

    return op.set_infer_shape(shape).set_reference(kernel)
