"""Sample invocations of ``tf`` ops, run by TensorFlow and by our definitions and kernels.

A :class:`Case` gives an op's inputs (numpy arrays; a list of arrays for a dynamic input) and the attributes
TF needs (payloads as the IR holds them: :class:`~scopefusion.dtypes.DType`, tuples...). ``run=False``
marks ops TF cannot run eagerly on CPU (an NCHW convolution): only their static shapes are compared.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from scopefusion import dtypes as D

__all__ = ["CASES", "Case"]

RNG = np.random.default_rng(7)


@dataclass
class Case:
    op: str
    inputs: list[Any]
    attrs: dict[str, Any] = field(default_factory=dict)
    run: bool = True  # TF can run it eagerly on CPU
    tag: str = ""

    @property
    def id(self) -> str:
        return f"{self.op}-{self.tag}" if self.tag else self.op


def f32(*shape: int, lo: float = -2.0, hi: float = 2.0) -> np.ndarray:
    return RNG.uniform(lo, hi, shape).astype(np.float32)


def i32(values: Any) -> np.ndarray:
    return np.asarray(values, np.int32)


def i64(values: Any) -> np.ndarray:
    return np.asarray(values, np.int64)


def boolean(*shape: int) -> np.ndarray:
    return RNG.uniform(size=shape) > 0.5


UNARY_DOMAINS = {"Acosh": (1.1, 3.0), "Asin": (-0.9, 0.9), "Acos": (-0.9, 0.9), "Atanh": (-0.9, 0.9)}
POSITIVE = {"Sqrt", "Rsqrt", "Log", "Log1p", "Reciprocal", "Inv"}
UNARY = [
    "Abs", "Neg", "Sqrt", "Rsqrt", "Square", "Reciprocal", "Inv", "Exp", "Expm1", "Log", "Log1p", "Sigmoid", "Tanh",
    "Relu", "Relu6", "Elu", "Selu", "Softplus", "Softsign", "Erf", "Erfc", "Floor", "Ceil", "Round", "Rint", "Sign",
    "Sin", "Cos", "Tan", "Asin", "Acos", "Atan", "Sinh", "Cosh", "Asinh", "Acosh", "Atanh", "ZerosLike", "OnesLike",
]  # fmt: skip
FLOAT_BINARY = [
    "Add", "AddV2", "Sub", "Mul", "MulNoNan", "Div", "RealDiv", "DivNoNan", "FloorDiv", "FloorMod", "Mod",
    "TruncateMod", "Maximum", "Minimum", "Pow", "SquaredDifference", "Atan2", "Xlogy", "Xdivy",
]  # fmt: skip
INT_BINARY = ["Add", "Sub", "Mul", "Div", "TruncateDiv", "FloorDiv", "FloorMod", "Mod", "TruncateMod", "Maximum", "Minimum"]
BITWISE = ["BitwiseAnd", "BitwiseOr", "BitwiseXor", "LeftShift", "RightShift"]
COMPARISONS = ["Equal", "NotEqual", "Less", "LessEqual", "Greater", "GreaterEqual"]
REDUCTIONS = ["Mean", "Sum", "Max", "Min", "Prod", "EuclideanNorm"]


def _elementwise() -> list[Case]:
    cases = []
    for op in UNARY:
        lo, hi = UNARY_DOMAINS.get(op, (0.1, 2.0) if op in POSITIVE else (-2.0, 2.0))
        cases.append(Case(op, [f32(2, 3, lo=lo, hi=hi)]))
    cases.append(Case("Invert", [i32([[1, -2, 3]])]))
    cases.append(Case("Neg", [i32([[1, -2], [3, 0]])], tag="int"))
    cases.append(Case("Abs", [i64([-5, 3])], tag="int64"))
    cases += [Case(op, [np.float32(0.5)], tag="scalar") for op in ("Erf", "Erfc")]
    special = np.array([[1.0, np.nan, np.inf], [-np.inf, 0.0, 2.0]], np.float32)
    cases += [Case(op, [special]) for op in ("IsNan", "IsInf", "IsFinite")]
    cases.append(Case("LogicalNot", [boolean(2, 3)]))
    cases.append(Case("LeakyRelu", [f32(2, 3)], {"alpha": 0.3}))
    cases.append(Case("Cast", [f32(2, 3, lo=-3, hi=3)], {"DstT": D.INT32}))
    cases.append(Case("Cast", [i32([[0, 2, -1]])], {"DstT": D.BOOL}, tag="bool"))
    cases.append(Case("Cast", [i32([3, 4])], {"DstT": D.INT64}, tag="int64"))
    cases.append(Case("ClipByValue", [f32(2, 3), np.float32(-0.5), np.float32(0.5)]))
    for op in FLOAT_BINARY:
        pos = op in ("Pow", "FloorDiv", "FloorMod", "Mod", "TruncateMod", "Xlogy", "Div", "RealDiv")
        cases.append(Case(op, [f32(2, 1, 3, lo=0.5 if pos else -2), f32(4, 1, lo=0.5, hi=2.0)]))
    for op in INT_BINARY:
        cases.append(Case(op, [i32([[-7, 7, -7, 7]]), i32([[2], [-2], [3]])], tag="int"))
    for op in BITWISE:
        cases.append(Case(op, [i32([[5, 12, 7]]), i32([1, 2, 3])]))
    for op in COMPARISONS:
        a = f32(3, 1)
        cases.append(Case(op, [a, np.concatenate([a[:2, 0], f32(2)]).astype(np.float32)]))
    cases.append(Case("Equal", [i32([1, 2]), i32([1, 2, 3])], {"incompatible_shape_error": False}, tag="incompatible"))
    cases += [Case(op, [boolean(2, 3), boolean(3)]) for op in ("LogicalAnd", "LogicalOr")]
    cases.append(Case("ApproximateEqual", [f32(2, 3), f32(2, 3)], {"tolerance": 0.5}))
    cases.append(Case("AddN", [[f32(2, 3), f32(2, 3), f32(2, 3)]]))
    cases.append(Case("Select", [boolean(3), f32(3, 2), f32(3, 2)], tag="vector"))
    cases.append(Case("Select", [boolean(3, 2), f32(3, 2), f32(3, 2)]))
    cases.append(Case("SelectV2", [boolean(1, 2), f32(3, 1), f32(2)]))
    return cases


def _nn() -> list[Case]:
    image = f32(2, 9, 9, 3)
    cases = [
        Case("MatMul", [f32(3, 4), f32(5, 4)], {"transpose_b": True}),
        Case("MatMul", [f32(4, 3), f32(4, 5)], {"transpose_a": True}, tag="ta"),
        Case("BatchMatMul", [f32(2, 3, 4), f32(2, 4, 5)]),
        Case("BatchMatMulV2", [f32(2, 1, 3, 4), f32(5, 6, 4)], {"adj_y": True}),
        Case("BatchMatMulV3", [f32(3, 4), f32(2, 4, 5)], {"Tout": D.FLOAT32}),
        Case("Einsum", [[f32(2, 3, 4), f32(2, 4, 5)]], {"equation": "bij,bjk->bik"}),
        Case("Einsum", [[f32(2, 3, 3, 4), f32(4, 5)]], {"equation": "...ij,jk->...ik"}, tag="ellipsis"),
        Case("Conv2D", [image, f32(3, 3, 3, 4)], {"strides": (1, 2, 2, 1), "padding": "SAME"}),
        Case("Conv2D", [image, f32(3, 3, 3, 4)], {"strides": (1, 1, 1, 1), "padding": "VALID", "dilations": (1, 2, 2, 1)}, tag="dilated"),
        Case("Conv2D", [image, f32(2, 2, 3, 4)], {"strides": (1, 2, 2, 1), "padding": "EXPLICIT", "explicit_paddings": (0, 0, 1, 2, 0, 1, 0, 0)}, tag="explicit"),
        Case("Conv2D", [f32(2, 3, 9, 9), f32(3, 3, 3, 4)], {"strides": (1, 1, 2, 2), "padding": "SAME", "data_format": "NCHW"}, run=False, tag="nchw"),
        Case("Conv3D", [f32(1, 5, 6, 7, 2), f32(2, 3, 3, 2, 4)], {"strides": (1, 1, 2, 2, 1), "padding": "VALID"}),
        Case("DepthwiseConv2dNative", [image, f32(3, 3, 3, 2)], {"strides": (1, 2, 2, 1), "padding": "SAME"}),
        Case("Conv2DBackpropInput", [i32([2, 9, 9, 3]), f32(3, 3, 3, 4), f32(2, 5, 5, 4)], {"strides": (1, 2, 2, 1), "padding": "SAME"}),
        Case("MaxPool", [image], {"ksize": (1, 3, 3, 1), "strides": (1, 2, 2, 1), "padding": "VALID"}),
        Case("AvgPool", [image], {"ksize": (1, 2, 2, 1), "strides": (1, 2, 2, 1), "padding": "SAME"}),
        Case("MaxPool3D", [f32(1, 4, 6, 6, 2)], {"ksize": (1, 2, 2, 2, 1), "strides": (1, 2, 2, 2, 1), "padding": "SAME"}),
        Case("AvgPool3D", [f32(1, 4, 6, 6, 2)], {"ksize": (1, 2, 3, 3, 1), "strides": (1, 1, 2, 2, 1), "padding": "VALID"}),
        Case("MaxPoolV2", [image, i32([1, 3, 3, 1]), i32([1, 2, 2, 1])], {"padding": "SAME"}),
        Case("BiasAdd", [f32(2, 3, 4), f32(4)]),
        Case("BiasAdd", [f32(2, 4, 3, 3), f32(4)], {"data_format": "NCHW"}, tag="nchw"),
        Case("BiasAddV1", [f32(2, 4), f32(4)]),
        Case("Softmax", [f32(2, 5)]),
        Case("LogSoftmax", [f32(2, 5)]),
        Case("LRN", [f32(1, 3, 3, 8)], {"depth_radius": 2}),
        Case("L2Loss", [f32(3, 4)]),
        Case("InTopKV2", [f32(3, 5), i32([0, 2, 4]), i32(2)]),
        Case("ResizeBilinear", [image, i32([4, 5])]),
        Case("ResizeNearestNeighbor", [image, i32([18, 3])]),
        Case("ResizeBicubic", [image, i32([4, 4])]),
        Case("ResizeArea", [image, i32([3, 3])]),
        Case("DepthToSpace", [f32(1, 2, 3, 8)], {"block_size": 2}),
        Case("SpaceToDepth", [f32(1, 4, 6, 2)], {"block_size": 2}),
        Case("TopKV2", [f32(3, 6), i32(2)]),
    ]
    boxes = RNG.uniform(0, 1, (6, 4)).astype(np.float32)
    scores = RNG.uniform(0, 1, 6).astype(np.float32)
    thresholds = [np.float32(0.5), np.float32(0.1)]
    cases += [
        Case("FusedBatchNormV3", [image, f32(3), f32(3), f32(3), f32(3, lo=0.5)], {"is_training": False}),
        Case("FusedBatchNorm", [image, f32(3), f32(3), f32(3), f32(3, lo=0.5)], {"is_training": False}),
        Case("FusedBatchNormV2", [image, f32(3), f32(3), np.zeros(0, np.float32), np.zeros(0, np.float32)], tag="training"),
        Case("NonMaxSuppressionV2", [boxes, scores, i32(4), thresholds[0]]),
        Case("NonMaxSuppressionV3", [boxes, scores, i32(4)] + thresholds),
        Case("NonMaxSuppressionV4", [boxes, scores, i32(4)] + thresholds, {"pad_to_max_output_size": True}),
        Case("NonMaxSuppressionV5", [boxes, scores, i32(4)] + thresholds + [np.float32(0.0)]),
    ]
    return cases


def _array() -> list[Case]:
    x = f32(2, 3, 4)
    return [
        Case("Reshape", [x, i32([4, -1])]),
        Case("Reshape", [x, i64([24])], tag="flat"),
        Case("Reshape", [f32(0, 3), i32([-1, 0])], tag="zero_dim"),
        Case("Squeeze", [f32(1, 3, 1, 2)], {"squeeze_dims": (2,)}),
        Case("Squeeze", [f32(1, 3, 1, 2)], tag="all"),
        Case("ExpandDims", [x, i32(-1)]),
        Case("ExpandDims", [x, i64([1])], tag="vector"),
        Case("Transpose", [x, i32([2, 0, 1])]),
        Case("ConjugateTranspose", [x, i32([1, 0, 2])]),
        Case("Tile", [x, i32([1, 2, 0])]),
        Case("Pad", [x, i32([[0, 1], [2, 0], [1, 1]])]),
        Case("PadV2", [x, i64([[1, 1], [0, 0], [0, 2]]), np.float32(7)]),
        Case("MirrorPad", [x, i32([[1, 1], [0, 2], [1, 0]])], {"mode": "REFLECT"}),
        Case("MirrorPad", [x, i32([[1, 1], [1, 2], [1, 0]])], {"mode": "SYMMETRIC"}, tag="symmetric"),
        Case("Fill", [i32([2, 3]), np.float32(1.5)]),
        Case("Range", [i32(2), i32(11), i32(3)]),
        Case("Range", [np.float32(1), np.float32(0), np.float32(-0.3)], tag="float"),
        Case("BroadcastTo", [f32(3, 1), i32([2, 3, 4])]),
        Case("ReverseV2", [x, i32([0, 2])]),
        Case("SpaceToBatchND", [f32(2, 4, 5, 3), i32([2, 2]), i32([[0, 0], [1, 0]])]),
        Case("BatchToSpaceND", [f32(8, 2, 3, 3), i32([2, 2]), i32([[0, 1], [1, 0]])]),
        Case("Where", [boolean(3, 4)]),
        Case("Unique", [i32([4, 1, 4, 2, 1, 7])]),
        Case("Unique", [i32([3, 3, 1])], {"out_idx": D.INT64}, tag="int64"),
        Case("InvertPermutation", [i32([2, 0, 3, 1])]),
    ]


def _slicing() -> list[Case]:
    x = f32(4, 5, 6)
    ss = "StridedSlice"
    idx = lambda *v: i32(list(v))  # noqa: E731
    return [
        Case(ss, [x, idx(1, -4, 0), idx(3, 5, 6), idx(1, 2, 2)]),
        Case(ss, [x, idx(0, 0), idx(0, 0), idx(1, 1)], {"shrink_axis_mask": 1, "begin_mask": 2, "end_mask": 2}, tag="shrink"),
        Case(ss, [x, idx(0, 0, 1), idx(0, 0, 3), idx(1, 1, 1)], {"ellipsis_mask": 1, "new_axis_mask": 2}, tag="ellipsis_newaxis"),
        Case(ss, [x, idx(-1, 0), idx(0, 0), idx(-1, 1)], {"end_mask": 3}, tag="reverse"),
        Case(ss, [x, idx(0, -1), idx(0, 0), idx(1, 1)], {"ellipsis_mask": 1, "shrink_axis_mask": 2}, tag="last"),
        Case(ss, [i32([2, 8, 32]), idx(0), idx(1), idx(1)], {"shrink_axis_mask": 1}, tag="shape_chain"),
        Case(ss, [x, idx(5), idx(10), idx(1)], tag="clamped"),
        Case("Slice", [x, idx(1, 0, 2), idx(2, -1, 3)]),
        Case("Split", [i32(1), f32(2, 6, 3)], {"num_split": 3}),
        Case("SplitV", [f32(2, 7, 3), idx(2, -1, 4), i32(-2)], {"num_split": 3}),
        Case("ConcatV2", [[f32(2, 3), f32(2, 1), f32(2, 2)], i32(-1)]),
        Case("Concat", [i32(0), [f32(1, 3), f32(2, 3)]]),
        Case("Pack", [[i32(2), i32(8), i32(32)]]),
        Case("Pack", [[f32(2, 3), f32(2, 3)]], {"axis": -1}, tag="axis"),
        Case("Unpack", [f32(3, 2, 4)], {"num": 2, "axis": 1}),
        Case("GatherV2", [f32(10, 4), i32([[1, 2], [3, 9]]), i32(0)]),
        Case("GatherV2", [f32(2, 5, 3), i32([[0, 4, 1], [2, 2, 3]]), i32(1)], {"batch_dims": 1}, tag="batch_dims"),
        Case("GatherV2", [i32([2, 8, 32]), i32([0, 2]), i64(0)], tag="shape_chain"),
        Case("Gather", [f32(5, 2), i32([4, 0])]),
        Case("GatherNd", [f32(3, 4, 5), i32([[0, 1], [2, 3]])]),
        Case("OneHot", [i32([[0, 2], [1, -1]]), i32(3), np.float32(5), np.float32(-1)], {"axis": 1}),
        Case("ScatterNd", [i32([[0], [2]]), f32(2, 3), i32([4, 3])]),
        Case("TensorScatterUpdate", [f32(4, 3), i32([[1], [3]]), f32(2, 3)]),
        Case("TensorScatterAdd", [f32(4, 3), i32([[1], [1]]), f32(2, 3)]),
    ]


def _shapes_and_reductions() -> list[Case]:
    x = f32(2, 3, 4)
    cases = [
        Case("Shape", [x]),
        Case("Shape", [x], {"out_type": D.INT64}, tag="int64"),
        Case("ShapeN", [[x, f32(5)]]),
        Case("Size", [x]),
        Case("Rank", [x]),
        Case("BroadcastArgs", [i32([2, 1, 4]), i32([3, 1])]),
        Case("BroadcastGradientArgs", [i32([2, 1, 4]), i32([3, 1])]),
        Case("BroadcastGradientArgs", [i32([1, 1]), i32([1])], tag="ones"),
        Case("ArgMax", [x, i32(1)]),
        Case("ArgMin", [x, i32(-1)], {"output_type": D.INT32}),
        Case("Cumsum", [x, i32(1)], {"exclusive": True}),
        Case("Cumprod", [x, i32(2)], {"reverse": True}),
        Case("Cumsum", [i32([[1, 2, 3]]), i32(1)], {"exclusive": True, "reverse": True}, tag="int"),
        Case("Mean", [i32([[1, 2], [4, -7]]), i32([1])], tag="int"),
        Case("All", [boolean(3, 4), i32([0])]),
        Case("Any", [boolean(3, 4), i32([1])], {"keep_dims": True}),
        Case("Identity", [x]),
        Case("Snapshot", [x]),
        Case("StopGradient", [x]),
        Case("PreventGradient", [x]),
        Case("CheckNumerics", [x], {"message": "bad"}),
        Case("EnsureShape", [x], {"shape": (2, -1, 4)}),
        Case("PlaceholderWithDefault", [x], {"shape": (-1, 3, 4)}),
        Case("IdentityN", [[x, i32([1, 2])]]),
        Case("RandomUniform", [i32([2, 3])], {"dtype": D.FLOAT32}),
        Case("RandomStandardNormal", [i32([4])], {"dtype": D.FLOAT32}),
        Case("TruncatedNormal", [i32([2, 2])], {"dtype": D.FLOAT32}),
        Case("RandomUniformInt", [i32([3]), i32(0), i32(10)]),
    ]
    for op in REDUCTIONS:
        cases.append(Case(op, [x, i32([0, -1])], {"keep_dims": op == "Max"}))
    cases.append(Case("Sum", [x, i32([])], tag="no_axes"))
    return cases


CASES: list[Case] = _elementwise() + _nn() + _array() + _slicing() + _shapes_and_reductions()
