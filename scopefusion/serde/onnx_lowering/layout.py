"""Layout tracking while lowering: which values of a graph the ONNX lowering holds channels first.

TensorFlow's channels-last ops (``Conv2D``, ``DepthwiseConv2dNative``, pools, batch norm in ``NHWC``) become
channels-first ONNX ops. Lowered one by one, each sits between two Transposes (to channels first and back),
which the clean-up (:mod:`..onnx_transposes`) then moves and cancels in pairs: work done and then undone.
:class:`LayoutTracker` keeps, per IR value of the graph being written, the ONNX name of its channels-first
form (``[N, C, spatial…]``) where one exists:

* A channels-last op whose input is held channels first reads that form directly
  (:meth:`~..onnx_fused.FusedEmitter.channels_first`); one whose input is not writes the Transpose once and
  the tracker remembers it for the value's other readers. Its result is *held*: only its channels-first
  form is written (:meth:`~..onnx_fused.FusedEmitter.hold_channels_first`).
* A layout-agnostic op all of whose layout-bearing inputs are held (:meth:`LayoutTracker.pass_through`)
  runs on the channels-first forms and its result is held too: element-wise ``tf`` ops (a constant operand
  broadcast to the rank and laid out channels first), ``BiasAdd`` (its ``[C]`` bias as ``[C, 1, …]``),
  ``Pad`` (paddings permuted), ``Mean`` / ``Sum`` / ``Max`` / ``Min`` / ``Prod`` with constant axes (axes
  mapped; without ``keep_dims`` only where the kept dims keep their order, and then the result is plain),
  and the fused element-wise ops (``HardSwish``, ``Swish``, ``Clip``, ``Gelu``).
* A held value's own (channels-last) name is written, by one ``Transpose`` (:meth:`LayoutTracker.materialize`),
  only where something reads it: an op the layout cannot be carried through, or a graph output.
* An op that gives its input back (an identity, an ``IdentityN`` of which only the first output is read;
  ``x + 0``, ``x · 1``… with a neutral constant, as a Keras layer's zero bias) writes nothing: its output is the input's channels-first form, or, for a plain input,
  the input's own name (:meth:`LayoutTracker.same_value`; for a graph output, the node computing the input
  writes the output's name); what the clean-up would make of it.
* A layout-agnostic op goes channels first only when that writes no more transposes than lowering it as it
  is (:meth:`LayoutTracker._worth_it`): an op whose held input is read channels last anyway (a graph output,
  a reshape) and whose result is too runs as it is, on the channels-last form.

Only graphs without bodies are tracked (a body may read any tensor of its graph by name). What is left of
the transposes (a graph's channels-last input and output) is still the clean-up's to move and fold; the
result is the same model with the transposes never written.
"""

from __future__ import annotations

from typing import Any, Callable, Collection, Mapping, Sequence

import numpy as np

from ...ir.graph import CONST_OP, DATA_OP, Node, Value
from ...ir.types import TensorType
from ..onnx_attrs import onnx_elem_type
from ..onnx_node import Initializer
from ..onnx_node import Node as OnnxNode

__all__ = ["CANDIDATES", "ChannelsFirstType", "LayoutTracker", "PassThrough", "channels_first_perm",
           "channels_last_perm"]

# ``tf`` ops computing each element from the elements at the same place of their inputs (numpy broadcasting),
# whatever the layout: the lowering reads no shape of theirs but the dtype.
_ELEMENTWISE_TF = frozenset({
    "Abs", "Neg", "Sqrt", "Reciprocal", "Inv", "Exp", "Log", "Sigmoid", "Tanh", "Relu", "Elu", "Softplus",
    "Softsign", "Erf", "Floor", "Ceil", "Round", "Rint", "Sign", "Sin", "Cos", "IsNan", "IsInf", "LogicalNot",
    "Relu6", "Selu", "LeakyRelu", "Rsqrt", "Square", "Cast", "Identity", "Snapshot", "StopGradient",
    "Add", "AddV2", "Sub", "Mul", "RealDiv", "Div", "Maximum", "Minimum", "Pow", "SquaredDifference",
    "Equal", "Less", "LessEqual", "Greater", "GreaterEqual", "LogicalAnd", "LogicalOr",
})  # fmt: skip
_BIAS_TF = frozenset({"BiasAdd", "BiasAddV1"})
_PAD_TF = frozenset({"Pad", "PadV2", "MirrorPad"})
_REDUCE_TF = frozenset({"Mean", "Sum", "Max", "Min", "Prod"})
_FIRST = (0,)  # the first output held channels first
# Fused ops of one input computed element by element (their exporters read its dtype only).
_ELEMENTWISE_FUSED = frozenset({"HardSwish", "Swish", "Clip", "Gelu"})
# Every op type :meth:`LayoutTracker.pass_through` may take, asked first (most nodes are none of them).
CANDIDATES = _ELEMENTWISE_TF | _BIAS_TF | _PAD_TF | _REDUCE_TF | _ELEMENTWISE_FUSED | {"IdentityN"}
# Ops that pass their input on as it is, looked through when weighing a move (to at most _DEPTH of them in a row).
_IDENTITIES = frozenset({"Identity", "IdentityN", "Snapshot", "StopGradient"})
_DEPTH = 4
# Ops that give their one input back, and ops that do with a neutral constant operand: (the value, either side).
_ALIASES = frozenset({"Identity", "Snapshot", "StopGradient"})
_NEUTRAL = {"Add": (0, True), "AddV2": (0, True), "BiasAdd": (0, False), "BiasAddV1": (0, False), "Sub": (0, False),
            "Mul": (1, True), "RealDiv": (1, False), "Div": (1, False)}
_NEUTRAL_ELEMENTS = 4096  # the largest neutral operand looked at
# Ops whose lowering reads a channels-last input channels first (FusedEmitter.channels_first), ``tf`` and fused.
_CHANNELS_FIRST_READERS = frozenset({
    "Conv2D", "Conv3D", "DepthwiseConv2dNative", "MaxPool", "AvgPool", "MaxPool3D", "AvgPool3D", "MaxPoolV2",
    "FusedBatchNorm", "FusedBatchNormV2", "FusedBatchNormV3", "LRN", "ResizeBilinear", "ResizeNearestNeighbor",
    "DepthToSpace", "SpaceToDepth", "BatchNorm", "InstanceNorm",
})  # fmt: skip


def channels_first_perm(rank: int) -> list[int]:
    """The ``Transpose`` perm from channels last to channels first: ``[0, rank-1, 1, …, rank-2]``."""
    return [0, rank - 1, *range(1, rank - 1)]


def channels_last_perm(rank: int) -> list[int]:
    """The ``Transpose`` perm from channels first back to channels last: ``[0, 2, …, rank-1, 1]``."""
    return [0, *range(2, rank), 1]


class ChannelsFirstType:
    """The type of a value's channels-first form, for its value info: what the writer
    (:func:`~..onnx_attrs.type_into`) and the clean-up read of a :class:`~scopefusion.ir.types.TensorType` (dtype,
    rank, shape), without making an IR type (interned in the model's context) that nothing else would read."""

    __slots__ = ("dtype", "rank", "shape")

    def __init__(self, source: TensorType) -> None:
        shape = source.shape
        self.dtype = source.dtype
        self.rank: int | None = source.rank
        self.shape: tuple[int, ...] = (shape[0], shape[-1], *shape[1:-1])


class PassThrough:
    """How to lower one layout-agnostic node on channels-first data (:meth:`LayoutTracker.pass_through`).

    ``inputs``: the ONNX names it reads instead; ``overrides``: the constant inputs' values as re-laid out,
    by slot (what the lowering reads of them); ``initializers``: those values' new initializers; ``held``:
    the outputs held channels first, by index (the others are written plain). ``alias``: for a node that gives
    held inputs back unchanged, the channels-first names its held outputs take, in the order of ``held`` (then
    nothing is written for it), else None."""

    __slots__ = ("inputs", "overrides", "initializers", "held", "alias")

    def __init__(self, inputs: list[str], overrides: dict[int, np.ndarray], initializers: list[Initializer],
                 held: tuple[int, ...], alias: tuple[str, ...] | None = None) -> None:
        self.inputs = inputs
        self.overrides = overrides
        self.initializers = initializers
        self.held = held
        self.alias = alias


class LayoutTracker:
    """The channels-first forms of one graph's values (see the module docstring).

    Args:
        fresh_tensor: claims a model-wide unique tensor name from a hint.
        fresh_node: claims a model-wide unique node name from a hint.
        outputs: the graph's outputs (read channels last).
    """

    __slots__ = ("first", "pending", "by_name", "infos", "read_by_name", "_types", "_fresh", "_fresh_node", "_outputs")

    def __init__(self, fresh_tensor: Callable[[str], str], fresh_node: Callable[[str], str],
                 outputs: "set[Value] | frozenset[Value]" = frozenset()) -> None:
        self.first: dict[Value, str] = {}  # value -> the ONNX name of its channels-first form
        self.pending: dict[Value, str] = {}  # held value -> its own (channels-last) name, not yet written
        self.by_name: dict[str, Value] = {}  # the pending values by their own names
        # Set when a lowering asked for the ONNX name of a pending value (see LoweringEmitter.value_name).
        self.read_by_name = False
        self.infos: list[tuple[str, ChannelsFirstType]] = []  # value infos of the channels-first forms written
        self._types: dict[TensorType, ChannelsFirstType | None] = {}  # by the value's type (types are interned)
        self._fresh = fresh_tensor
        self._fresh_node = fresh_node
        self._outputs = outputs

    # ------------------------------------------------------------------ recording
    def note(self, value: Value, name: str) -> None:
        """Records ``name`` as the channels-first form of ``value`` (whose own name is written)."""
        if value not in self.first:
            self.first[value] = name
            self._info(value, name)

    def hold(self, value: Value, name: str, own: str, alias: bool = False) -> None:
        """Records ``name`` as the channels-first form of ``value``, whose own name ``own`` is not written; with
        ``alias``, ``name`` is another value's form (which has its value info)."""
        self.first[value] = name
        self.pending[value] = own
        self.by_name[own] = value
        if not alias:
            self._info(value, name)

    def _info(self, value: Value, name: str) -> None:
        t = value.type
        if t in self._types:
            found = self._types[t]  # type: ignore[index]
        else:
            found = None
            if isinstance(t, TensorType) and t.rank is not None and t.rank >= 3 and onnx_elem_type(t.dtype) != 0:
                found = ChannelsFirstType(t)
            self._types[t] = found  # type: ignore[index]
        if found is not None:
            self.infos.append((name, found))

    # ------------------------------------------------------------------ channels last again
    def materialize(self, value: Value) -> OnnxNode:
        """The ``Transpose`` writing held ``value``'s own name from its channels-first form; no longer pending."""
        own = self.pending.pop(value)
        del self.by_name[own]
        rank = value.type.rank  # type: ignore[union-attr]
        return OnnxNode.with_attrs("Transpose", [self.first[value]], [own],
                                   self._fresh_node(f"{value.name}/to_channels_last"), "",
                                   {"perm": channels_last_perm(rank)})

    def may_read_pending(self, node: Node) -> bool:
        """True when the ONNX form of ``node`` (just written) may read a pending value by its own name: the node
        reads one, or its lowering asked for the name of one (then the flag is reset)."""
        if self.read_by_name:
            self.read_by_name = False
            return True
        return not self.pending.keys().isdisjoint(node.inputs)

    def materialize_reads(self, nodes: list[OnnxNode]) -> list[Value]:
        """Puts before ``nodes`` (one IR node's ONNX form, changed in place) the Transposes writing the pending
        values they read; returns those values."""
        by_name = self.by_name
        wanted: list[Value] = []
        for node in nodes:
            for name in node.input:
                if name in by_name:
                    value = by_name[name]
                    if value not in wanted:
                        wanted.append(value)
        if wanted:
            nodes[:0] = [self.materialize(v) for v in wanted]
        return wanted

    # ------------------------------------------------------------------ layout-agnostic ops
    def pass_through(self, node: Node, inputs: Sequence[str], folded: Mapping[Value, Any] | None) -> PassThrough | None:
        """How ``node`` runs on channels-first data (see the module docstring), or None when it does not: it is
        no layout-agnostic op, none of its inputs is held channels first, one cannot follow, or it would cost
        more transposes than it saves (:meth:`_worth_it`)."""
        if self.first.keys().isdisjoint(node.inputs):
            return None
        plan = self._plan(node, inputs, folded)
        return plan if plan is None or self._worth_it(node, plan) else None

    def _worth_it(self, node: Node, plan: PassThrough) -> bool:
        """Whether running ``node`` on channels-first forms writes no more transposes than running it as it is.

        As it is, it reads the channels-last form of each input held channels first: a transpose for one that
        is pending and that nothing else reads channels last, against at most one for the output. When there is
        none such, as it is costs nothing more: the node goes channels first only when each result it holds is
        read so (by a channels-first reader or another node the layout may pass through), or by nothing channels
        last."""
        pending = self.pending
        for v in node.inputs:
            if v is not None and v in pending and not self._read_channels_last(v, node):
                return True
        for k in plan.held:
            if self._read_channels_last(node.outputs[k], None) and not self._read_channels_first(node.outputs[k]):
                return False
        return bool(plan.held)

    def _read_channels_last(self, value: Value, but: Node | None, depth: int = 0) -> bool:
        """True when a graph output is ``value`` or a node other than ``but`` reads it that cannot take it
        channels first (none that may pass the layout through, no channels-first reader); through identities."""
        if value in self._outputs:
            return True
        for user, _ in value._uses:  # the uses themselves, not the copy Value.uses makes
            op = user.op_type
            if user is but:
                continue
            if op in _IDENTITIES and depth < _DEPTH:
                if any(self._read_channels_last(v, None, depth + 1) for v in user.outputs):
                    return True
            elif op not in _CHANNELS_FIRST_READERS and op not in CANDIDATES:
                return True
        return False

    @staticmethod
    def _read_channels_first(value: Value, depth: int = 0) -> bool:
        """True when a node that may take ``value`` channels first reads it (through identities)."""
        for user, _ in value._uses:
            op = user.op_type
            if op in _IDENTITIES and depth < _DEPTH:
                if any(LayoutTracker._read_channels_first(v, depth + 1) for v in user.outputs):
                    return True
            elif op in _CHANNELS_FIRST_READERS or op in CANDIDATES:
                return True
        return False

    def _plan(self, node: Node, inputs: Sequence[str], folded: Mapping[Value, Any] | None) -> PassThrough | None:
        """The :class:`PassThrough` of ``node`` (see :meth:`pass_through`), costs not weighed."""
        op = node.op_type
        if node.dialect == "fused":
            if op not in _ELEMENTWISE_FUSED or len(node.inputs) != 1 or len(node.outputs) != 1:
                return None
            found = self.first.get(node.inputs[0])  # type: ignore[arg-type]
            return PassThrough([found], {}, [], _FIRST) if found is not None else None
        if op == "IdentityN":
            return self._identities(node, inputs)
        if len(node.outputs) != 1 or folded is None:
            return None
        if op in _ALIASES or op in _NEUTRAL:
            alias = self._alias(node, folded)
            if alias is not None:
                return alias
        if op in _ELEMENTWISE_TF:
            return self._elementwise(node, inputs, folded)
        if op in _BIAS_TF or op in _PAD_TF or op in _REDUCE_TF:
            x = node.inputs[0] if node.inputs else None
            found = self.first.get(x) if x is not None else None
            if found is None:
                return None
            rank = x.type.rank  # type: ignore[union-attr]
            constant = _constant(node.inputs[1] if len(node.inputs) > 1 else None, folded)
            if constant is None:
                return None
            if op in _BIAS_TF:
                return self._bias(node, inputs, found, rank, constant)
            if op in _PAD_TF:
                return self._pad(inputs, found, rank, constant)
            return self._reduce(node, inputs, found, rank, constant)
        return None

    def _elementwise(self, node: Node, inputs: Sequence[str], folded: Mapping[Value, Any]) -> PassThrough | None:
        out = node.outputs[0].type
        rank = out.rank if isinstance(out, TensorType) else None
        if rank is None or rank < 3:
            return None
        names = list(inputs)
        overrides: dict[int, np.ndarray] = {}
        initializers: list[Initializer] = []
        held = False
        for i, value in enumerate(node.inputs):
            if value is None:
                continue
            found = self.first.get(value)
            if found is not None:
                if value.type.rank != rank:  # type: ignore[union-attr]
                    return None
                names[i] = found
                held = True
                continue
            constant = _constant(value, folded)
            if constant is not None:
                if constant.ndim > rank:
                    return None
                if _layout_free(constant.shape):
                    continue
                laid_out = np.ascontiguousarray(np.transpose(
                    constant.reshape((1,) * (rank - constant.ndim) + constant.shape), channels_first_perm(rank)))
                names[i] = self._fresh(f"{inputs[i]}_channels_first")
                overrides[i] = laid_out
                initializers.append(Initializer.of_array(names[i], laid_out))
                continue
            t = value.type
            if not (isinstance(t, TensorType) and t.rank is not None and t.is_static and _layout_free(t.shape)):
                return None  # a channels-last operand that varies along a dim
        return PassThrough(names, overrides, initializers, _FIRST) if held else None

    def _identities(self, node: Node, inputs: Sequence[str]) -> PassThrough | None:
        """``IdentityN``: each output held channels first whose input is; when that is every output in use, the
        outputs are the inputs' forms themselves (nothing is written)."""
        names = list(inputs)
        held = []
        every = True
        for k, value in enumerate(node.inputs):
            if k >= len(node.outputs) or not (node.outputs[k]._uses or node.outputs[k] in self._outputs):
                continue
            found = self.first.get(value) if value is not None else None
            if found is not None:
                names[k] = found
                held.append(k)
            else:
                every = False
        if not held:
            return None
        return PassThrough(names, {}, [], tuple(held), tuple(names[k] for k in held) if every else None)

    def same_value(self, node: Node, folded: Mapping[Value, Any] | None) -> Value | None:
        """The input ``node`` gives back unchanged when it is an identity or has a neutral constant operand (see
        :meth:`_alias`) and the input is held in no other form: the writer then names the output as the input
        and writes nothing (what the clean-up would make of it). When the output is a graph output, only an input
        that node alone reads, computed by a node (whose output the writer renames to the graph output's name).
        Else None."""
        op = node.op_type
        if folded is None or node.dialect != "tf":
            return None
        if op == "IdentityN":  # output k is input k: as an identity of its first when only that one is read
            found = node.inputs[0] if _first_alone(node, self._outputs) else None
        elif (op not in _ALIASES and op not in _NEUTRAL) or len(node.outputs) != 1:
            return None
        else:
            found = self._neutral_input(node, folded, held=False)
        if found is None or found in self.first:
            return None
        if node.outputs[0] in self._outputs and (found in self._outputs or len(found._uses) != 1 or found in folded
                                                 or found.producer.op in (DATA_OP, CONST_OP)):
            return None
        return found

    def _neutral_input(self, node: Node, folded: Mapping[Value, Any], held: bool = True) -> Value | None:
        """The input of identity or neutral op ``node`` (see :meth:`_alias`) that it gives back, held channels
        first when ``held``; else None."""
        op = node.op_type
        if op in _ALIASES:
            x = node.inputs[0] if len(node.inputs) == 1 else None
            return x if x is not None and (not held or x in self.first) else None
        neutral, either = _NEUTRAL[op]
        if len(node.inputs) != 2:
            return None
        for data, const in ((0, 1), (1, 0)) if either else ((0, 1),):
            x, c = node.inputs[data], node.inputs[const]
            if x is None or (held and x not in self.first) or x.type != node.outputs[0].type:
                continue
            value = _constant(c, folded)
            if value is None or value.size > _NEUTRAL_ELEMENTS or value.dtype.kind not in "iuf":
                continue
            if value.size and value.item(0) != neutral:  # the first element, by flat index, without a reshaped view
                continue
            if np.count_nonzero(value if neutral == 0 else value != neutral):
                continue
            t = x.type
            if not isinstance(t, TensorType) or t.rank is None or _constant(x, folded) is not None:
                continue
            shape = t.shape
            if value.ndim > len(shape) or any(d != 1 and d != s for d, s in zip(value.shape[::-1], shape[::-1])):
                continue  # it could broadcast x to a larger shape
            return x
        return None

    def _alias(self, node: Node, folded: Mapping[Value, Any]) -> PassThrough | None:
        """An identity of a held value, or an op with a neutral constant operand (``x + 0``, ``x - 0``, ``x · 1``,
        ``x / 1`` with a small constant of that value everywhere that broadcasts ``x`` to no larger shape, as the
        clean-up removes them): its output is the held input's channels-first form itself."""
        x = self._neutral_input(node, folded)
        return PassThrough([], {}, [], _FIRST, (self.first[x],)) if x is not None else None

    def _bias(self, node: Node, inputs: Sequence[str], found: str, rank: int,
              bias: np.ndarray) -> PassThrough | None:
        layout = node.attrs.get("data_format")
        if (layout is not None and str(layout) not in ("NHWC", "NDHWC")) or bias.ndim != 1:
            return None
        laid_out = bias.reshape((-1,) + (1,) * (rank - 2))
        name = self._fresh(f"{inputs[1]}_channels_first")
        return PassThrough([found, name, *inputs[2:]], {1: laid_out}, [Initializer.of_array(name, laid_out)], _FIRST)

    def _pad(self, inputs: Sequence[str], found: str, rank: int, paddings: np.ndarray) -> PassThrough | None:
        if paddings.size != 2 * rank:
            return None
        pairs = np.asarray(paddings).reshape(rank, 2)
        laid_out = np.ascontiguousarray(pairs[channels_first_perm(rank)])
        name = self._fresh(f"{inputs[1]}_channels_first")
        return PassThrough([found, name, *inputs[2:]], {1: laid_out}, [Initializer.of_array(name, laid_out)], _FIRST)

    def _reduce(self, node: Node, inputs: Sequence[str], found: str, rank: int,
                axes_value: np.ndarray) -> PassThrough | None:
        listed = axes_value.reshape(-1).tolist()
        if not listed or any(type(a) is not int or not -rank <= a < rank for a in listed):
            return None  # reducing nothing (or a bad axis): left to the plain lowering
        axes = sorted({a % rank for a in listed})
        perm = channels_first_perm(rank)
        # A channels-last dim d > 0 sits at d + 1 channels first, the channels (rank - 1) at 1.
        mapped = np.asarray(sorted(1 if a == rank - 1 else a + (a > 0) for a in axes), dtype=axes_value.dtype)
        keep = bool(node.attrs.get("keep_dims") or False)
        if not keep and [d for d in range(rank) if d not in axes] != [d for d in perm if d not in axes]:
            return None  # the kept dims would come out in another order
        name = self._fresh(f"{inputs[1]}_channels_first")
        return PassThrough([found, name, *inputs[2:]], {1: mapped}, [Initializer.of_array(name, mapped)],
                           _FIRST if keep else ())


def _first_alone(node: Node, outputs: Collection[Value]) -> bool:
    """True when ``node`` (an ``IdentityN``) has as many inputs as outputs and only its first output is read (or
    is a graph output)."""
    values = node.outputs
    return (len(node.inputs) == len(values) > 0
            and all(not v._uses and v not in outputs for v in values[1:]))


def _constant(value: Value | None, folded: Mapping[Value, Any]) -> np.ndarray | None:
    """The array ``value`` always holds (a ``ge.Const`` or a folded value), else None."""
    if value is None:
        return None
    found = folded.get(value)
    if found is not None:
        return np.asarray(found)
    if value.producer.op == CONST_OP:
        return np.asarray(value.producer.attrs.as_tensor("value"))
    return None


def _layout_free(shape: Sequence[int]) -> bool:
    """True when a tensor of ``shape`` broadcasts the same way in either layout: at most one element."""
    return all(d == 1 for d in shape)
