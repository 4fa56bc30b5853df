"""The lowering registry: TF op type → lowering function; an ordinary object, fresh per use."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any, Callable, Iterable, Sequence

from ...errors import SerdeError
from ...ir.types import TensorType
from ..onnx_node import Initializer
from ..onnx_node import Node as OnnxNode

if TYPE_CHECKING:  # pragma: no cover
    from ...dtypes import DType
    from ...ir.graph import Node
    from .emitter import LoweringEmitter
    from .layout import PassThrough

__all__ = ["FAMILIES", "FRAME_MARKERS", "Lowering", "LoweringRegistry", "PlainOp", "PlainWritten",
           "default_lowerings", "family_types"]

Lowering = Callable[["LoweringEmitter"], None]


class PlainOp:
    """A lowering (or fused-op exporter) that writes ONNX op ``onnx_op`` (no attributes) of the node's first
    ``arity`` inputs into its output 0, through ``lower`` (the lowering itself, run on an emitter), for an export at
    opset ``min_opset`` or later; with ``exact``, only for a node of exactly ``arity`` inputs and one output; for a
    unary op, only where ``composed`` (given the input's dtype) is False, else ``lower`` writes a composition; with
    ``plain``, only for a node whose attributes it accepts (else ``lower`` writes something else, such as the
    transposes of a ``MatMul``'s flags). Most ``tf`` element-wise ops are one, and ``MatMul`` and ``BiasAdd`` in
    their usual forms: the writer writes such a node itself, without an emitter (:meth:`inputs_of`), the same node
    ``lower`` would write."""

    __slots__ = ("onnx_op", "arity", "lower", "min_opset", "composed", "exact", "plain")

    def __init__(self, onnx_op: str, arity: int, lower: Callable[[Any], None], min_opset: int = 1,
                 composed: "Callable[[str, DType], bool] | None" = None, exact: bool = False,
                 plain: "Callable[[Node], bool] | None" = None) -> None:
        self.onnx_op = onnx_op
        self.arity = arity
        self.lower = lower
        self.min_opset = min_opset
        self.composed = composed
        self.exact = exact
        self.plain = plain

    def __call__(self, e: Any) -> None:
        self.lower(e)

    def inputs_of(self, node: "Node", inputs: Sequence[str], opset: int) -> list[str] | None:
        """The inputs of the one ``onnx_op`` node ``lower`` writes for ``node``, whose inputs the writer names
        ``inputs``; None when it would write something else or decline (an absent input, an unknown dtype, a
        composition, too low an opset)."""
        arity = self.arity
        if opset < self.min_opset or len(inputs) < arity:
            return None
        if self.exact and (len(inputs) != arity or len(node.outputs) != 1):
            return None
        if self.plain is not None and not self.plain(node):
            return None
        names = list(inputs[:arity])
        if not all(names):
            return None
        composed = self.composed
        if composed is not None:
            t = node.inputs[0].type  # type: ignore[union-attr]  # inputs[0] named: the value is there
            if not isinstance(t, TensorType) or composed(self.onnx_op, t.dtype):
                return None
        return names

    def write(self, node: "Node", inputs: Sequence[str], output: str, opset: int, fresh_node: Callable[[str], str],
              plan: "PassThrough | None" = None) -> "PlainWritten | None":
        """The one node ``lower`` writes for ``node`` (inputs named ``inputs``, output 0 ``output``), without an
        emitter, or None as :meth:`inputs_of`; ``fresh_node`` claims its name, as the emitter does; the initializers
        of the layout's ``plan`` (its operands laid out channels first) go with it, as with an emitter."""
        names = self.inputs_of(node, inputs, opset)
        if names is None:
            return None
        op = self.onnx_op
        written = PlainWritten(OnnxNode(op, "", fresh_node(f"{node.name}/{op}"), names, [output] if output else [],
                                        body=False))
        if plan is not None:
            written.initializers = plan.initializers
        return written


class PlainWritten:
    """What the writer reads of an emitter (:meth:`.GraphWriter._emit`), for the one node a :class:`PlainOp` wrote
    (its emitter would have made nothing else); ``initializers`` are those the writer adds (a layout's operands)."""

    __slots__ = ("nodes", "initializers")
    held: list[tuple[int, str]] | None = None
    noted: list[tuple[int, str]] | None = None
    scalars_made: dict[tuple[str, bytes], str] | None = None
    domains: dict[str, int] = {}  # read only

    def __init__(self, node: "OnnxNode") -> None:
        self.nodes = [node]
        self.initializers: list[Initializer] = []


class LoweringRegistry:
    """Lowerings by ``tf`` op type (``"Conv2D"``, no dialect)."""

    def __init__(self, lowerings: Iterable[tuple[str, Lowering]] = ()) -> None:
        # a str value names the builtin family module whose LOWERINGS holds the function (not yet imported)
        self._lowerings: dict[str, Lowering | str] = {}
        self._shared = False  # whether _lowerings is the builtin table (:data:`_FAMILY_OF`), copied before a change
        for op_type, fn in lowerings:
            self.register(op_type, fn)

    def register(self, op_type: str, lowering: Lowering, *, replace: bool = False) -> None:
        """Maps TF op type ``op_type`` to ``lowering``.

        Raises:
            SerdeError: the type has a lowering already and ``replace`` is False, or the name has a dialect.
        """
        if not op_type or "." in op_type:
            raise SerdeError(f"tf op type {op_type!r}: give the plain type (\"Conv2D\"), without the dialect")
        if op_type in self._lowerings and not replace:
            raise SerdeError(f"tf op type {op_type!r} has an ONNX lowering already; pass replace=True to replace it")
        if self._shared:
            self._lowerings = dict(self._lowerings)
            self._shared = False
        self._lowerings[op_type] = lowering

    def get(self, op_type: str) -> Lowering | None:
        found = self._lowerings.get(op_type)
        if isinstance(found, str):
            # Resolving it resolves the builtin table too: a registry reading that table finds the function there.
            fn = _family_lowerings(found)[op_type]
            if not self._shared:
                self._lowerings[op_type] = fn
            return fn
        return found

    def types(self) -> list[str]:
        return sorted(self._lowerings)

    def __contains__(self, op_type: object) -> bool:
        return op_type in self._lowerings

    def __len__(self) -> int:
        return len(self._lowerings)


# The builtin lowering families: module of this package -> the tf op types its ``LOWERINGS`` maps (a module is
# imported on the first lookup of one of its types: a model needs a few families). tests/serde/
# test_onnx_lowering_registry.py compares this table with what the modules register.
FAMILIES: dict[str, str] = {  # the types separated by spaces
    "elementwise": (
        "Abs Acos Acosh Add AddN AddV2 ApproximateEqual Asin Asinh Atan Atanh BitwiseAnd BitwiseOr BitwiseXor "
        "Cast Ceil ClipByValue Cos Cosh Div DivNoNan Elu Equal Erf Erfc Exp Expm1 Floor FloorDiv FloorMod "
        "Greater GreaterEqual Inv Invert IsFinite IsInf IsNan LeakyRelu LeftShift Less LessEqual Log Log1p "
        "LogicalAnd LogicalNot LogicalOr Maximum Minimum Mod Mul MulNoNan Neg NotEqual OnesLike Pow RealDiv "
        "Reciprocal Relu Relu6 RightShift Rint Round Rsqrt Select SelectV2 Selu Sigmoid Sign Sin Sinh "
        "Softplus Softsign Sqrt Square SquaredDifference Sub Tan Tanh TruncateDiv TruncateMod Xdivy Xlogy "
        "ZerosLike"
    ),
    "compositions": "Atan2 BroadcastGradientArgs Cumprod InTopKV2",
    "nn": (
        "AvgPool AvgPool3D BatchMatMul BatchMatMulV2 BatchMatMulV3 BiasAdd BiasAddV1 Conv2D Conv3D "
        "DepthToSpace DepthwiseConv2dNative Einsum FusedBatchNorm FusedBatchNormV2 FusedBatchNormV3 L2Loss "
        "LRN LogSoftmax MatMul MaxPool MaxPool3D MaxPoolV2 ResizeBilinear ResizeNearestNeighbor Softmax "
        "SpaceToDepth"
    ),
    "conv_transpose": "Conv2DBackpropInput",
    "resize": "ResizeArea ResizeBicubic",
    "detection": "NonMaxSuppressionV2 NonMaxSuppressionV3 NonMaxSuppressionV4 NonMaxSuppressionV5 TopKV2",
    "array": (
        "BroadcastTo ConjugateTranspose ExpandDims Fill InvertPermutation MirrorPad Pad PadV2 Range Reshape "
        "ReverseV2 Squeeze Tile Transpose Unique Where"
    ),
    "space_batch": "BatchToSpaceND SpaceToBatchND",
    "slicing": (
        "Concat ConcatV2 Gather GatherNd GatherV2 OneHot Pack ScatterNd Slice Split SplitV StridedSlice "
        "TensorScatterAdd TensorScatterUpdate Unpack"
    ),
    "shapes": "BroadcastArgs Rank Shape ShapeN Size",
    "reduce": "All Any ArgMax ArgMin Cumsum EuclideanNorm Max Mean Min Prod Sum",
    "control": (
        "Case Enter Exit If LoopCond Merge NextIteration PartitionedCall StatefulPartitionedCall "
        "StatelessCase StatelessIf StatelessWhile Switch While"
    ),
    "tensor_lists": (
        "EmptyTensorList TensorArrayCloseV3 TensorArrayConcatV3 TensorArrayGatherV3 TensorArrayReadV3 "
        "TensorArrayScatterV3 TensorArraySizeV3 TensorArraySplitV3 TensorArrayV3 TensorArrayWriteV3 "
        "TensorListElementShape TensorListFromTensor TensorListGather TensorListGetItem TensorListLength "
        "TensorListPopBack TensorListPushBack TensorListReserve TensorListSetItem TensorListStack"
    ),
    "misc": (
        "Assert CheckNumerics ControlTrigger DebugIdentity EnsureShape Identity IdentityN NoOp "
        "PlaceholderWithDefault PreventGradient Print Snapshot StopGradient"
    ),
    "random_ops": "RandomStandardNormal RandomUniform RandomUniformInt TruncatedNormal",
}

# The qualified ops that mark a TF1 loop frame or a v1 cond: a graph without them needs no rebuilding, and the
# writer imports :mod:`.tf1_frames` only for one that has them.
FRAME_MARKERS = frozenset({"tf.LoopCond", "tf.Switch"})

# NOTE: pure caches. _FAMILY_OF: tf op type -> its family's module name (made from FAMILIES on first use), or the
# builtin function once its family is imported, so a fresh registry starts with the families loaded so far
# resolved. _LOADED: family -> its module's LOWERINGS as a dict, once imported.
_FAMILY_OF: dict[str, Lowering | str] = {}
_LOADED: dict[str, dict[str, Lowering]] = {}


def _family_lowerings(family: str) -> dict[str, Lowering]:
    """The builtin lowerings of ``family`` (its module imported on the first call); resolves its types in
    :data:`_FAMILY_OF` for the registries made afterwards."""
    found = _LOADED.get(family)
    if found is None:
        found = _LOADED[family] = dict(importlib.import_module(f"{__package__}.{family}").LOWERINGS)
        if not _FAMILY_OF:
            _fill_family_table()
        for op_type, fn in found.items():
            if _FAMILY_OF.get(op_type) == family:
                _FAMILY_OF[op_type] = fn
    return found


def _fill_family_table() -> None:
    _FAMILY_OF.update((op_type, family) for family in FAMILIES for op_type in family_types(family))


def family_types(family: str) -> list[str]:
    """The tf op types :data:`FAMILIES` gives ``family``."""
    return FAMILIES[family].split()


def default_lowerings() -> LoweringRegistry:
    """A fresh registry holding every builtin lowering (each family's module imported on first use)."""
    if not _FAMILY_OF:
        _fill_family_table()
    # It reads the builtin table itself until a lowering is registered: an export that registers none (most)
    # does not copy the table, and a registration never reaches another registry.
    registry = LoweringRegistry()
    registry._lowerings = _FAMILY_OF
    registry._shared = True
    return registry
