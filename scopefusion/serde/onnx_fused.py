"""Fused ops to ONNX: a registry of exporters, one small function per fused op type.

An exporter receives a :class:`FusedEmitter` for one ``fused.<Type>`` node and writes the ONNX nodes that
compute it (``emitter.op(...)``), or calls ``emitter.decline(reason)`` when it cannot at this opset or for
this node (a missing attribute, an unknown rank, an extra output in use). A declined node, and a fused op
type with no exporter, is written as one node of domain ``scopefusion`` with its attributes, the reason in
its ``doc_string``. Nothing an exporter wrote before declining is kept.

Registering a mapping is one call::

    exporters = default_fused_exporters()
    exporters.register("MyNorm", export_my_norm)

The builtin exporters, their ONNX forms and the attribute names they read are in
:mod:`.onnx_fused_ops`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable, Collection, Iterable, Mapping, NoReturn, Sequence

import numpy as np

from ..dialects.fused.declared import declared_ops_of
from ..dtypes import DType
from ..errors import SerdeError
from ..ir.graph import CONST_OP, Node, Value
from ..ir.types import TensorType
from .onnx_node import Initializer
from .onnx_node import Node as OnnxNode

if TYPE_CHECKING:  # pragma: no cover
    from .onnx_lowering.layout import LayoutTracker

__all__ = [
    "FusedEmitter",
    "FusedExporter",
    "FusedExporterRegistry",
    "Unmapped",
    "default_fused_exporters",
    "fused_exporters_for",
]

FusedExporter = Callable[["FusedEmitter"], None]

_REQUIRED = object()
_NO_SCALARS: Mapping[tuple[str, bytes], str] = {}

# Reduce ops whose ``axes`` moved from an attribute to an input, by the opset where it moved.
_AXES_INPUT_SINCE = {"ReduceSum": 13}
_AXES_INPUT_DEFAULT = 18


class Unmapped(Exception):
    """Raised by :meth:`FusedEmitter.decline`: this node has no standard ONNX form here (the reason)."""


class FusedExporterRegistry:
    """Exporters by fused op type; an ordinary object, fresh per use (see :func:`default_fused_exporters`)."""

    def __init__(self, exporters: Iterable[tuple[str, FusedExporter]] = ()) -> None:
        self._exporters: dict[str, FusedExporter] = {}
        self._shared = False  # whether _exporters is the builtin table, copied before a change (see _own)
        for fused_type, fn in exporters:
            self.register(fused_type, fn)

    @classmethod
    def _of_builtins(cls, builtins: dict[str, FusedExporter]) -> FusedExporterRegistry:
        """A registry reading the builtin table itself until it is changed: an export that registers nothing
        (most) does not copy the table, and a change never reaches another registry."""
        registry = cls()
        registry._exporters = builtins
        registry._shared = True
        return registry

    def _own(self) -> dict[str, FusedExporter]:
        """The table to change: this registry's own copy of the builtin table it was reading."""
        if self._shared:
            self._exporters = dict(self._exporters)
            self._shared = False
        return self._exporters

    def register(self, fused_type: str, exporter: FusedExporter, *, replace: bool = False) -> None:
        """Maps fused op type ``fused_type`` (``"LayerNorm"``, no dialect) to ``exporter``.

        Raises:
            SerdeError: the type has an exporter already and ``replace`` is False.
        """
        if not fused_type or "." in fused_type:
            raise SerdeError(f"fused op type {fused_type!r}: give the plain type (\"LayerNorm\"), without the dialect")
        if fused_type in self._exporters and not replace:
            raise SerdeError(
                f"fused op type {fused_type!r} has an ONNX exporter already; pass replace=True to replace it"
            )
        self._own()[fused_type] = exporter

    def remove(self, fused_type: str) -> None:
        """Forgets the exporter of ``fused_type`` (if any): such nodes go to domain ``scopefusion``."""
        if fused_type in self._exporters:
            del self._own()[fused_type]

    def get(self, fused_type: str) -> FusedExporter | None:
        return self._exporters.get(fused_type)

    def types(self) -> list[str]:
        return sorted(self._exporters)

    def __contains__(self, fused_type: object) -> bool:
        return fused_type in self._exporters


def default_fused_exporters() -> FusedExporterRegistry:
    """A fresh registry holding the builtin exporters."""
    if not _BUILTIN:
        from .onnx_fused_ops import BUILTIN_EXPORTERS

        _BUILTIN.update(FusedExporterRegistry(BUILTIN_EXPORTERS)._exporters)
    return FusedExporterRegistry._of_builtins(_BUILTIN)


# The builtin exporters, checked once; a registry reads them until it changes, then changes a copy of its own.
_BUILTIN: dict[str, FusedExporter] = {}


def fused_exporters_for(op_registry: Any) -> FusedExporterRegistry:
    """The builtin exporters, with those of the fused ops a conversion's rules declared in
    ``op_registry`` (:func:`scopefusion.define_fused_op`): a declared op's ``onnx_export`` is its exporter;
    a declared op without one (a replaced builtin included) goes to domain ``scopefusion``."""
    exporters = default_fused_exporters()
    for op in declared_ops_of(op_registry) if op_registry is not None else ():
        if op.onnx_export is not None:
            exporters.register(op.name, op.onnx_export, replace=True)
        else:
            exporters.remove(op.name)
    return exporters


class FusedEmitter:
    """What an exporter sees of one fused node, and where it writes ONNX nodes.

    ``inputs`` are the ONNX tensor names of the node's inputs (``""`` for an absent optional one),
    ``outputs`` the names its outputs must get; ``opset`` is the export's default-domain opset. What it
    writes collects in ``nodes`` (:class:`~.onnx_node.Node`) and ``initializers``
    (:class:`~.onnx_node.Initializer`), plain-Python until the model is written.
    """

    # Layout tracking (:mod:`.onnx_lowering.layout`): what this node leaves held channels first (output index, name)
    # and the channels-first forms it wrote (input, name), None until it does either. Scalar constants this node
    # made (the writer keeps them once the node is written), None until it makes one. Class-level defaults: the
    # writer makes an emitter per node, and most nodes set neither.
    held: list[tuple[int, str]] | None = None
    noted: list[tuple[int, str]] | None = None
    scalars_made: dict[tuple[str, bytes], str] | None = None

    # NOTE: every argument may be passed by position: the writer makes an emitter per node and does so (by
    # keywords, through LoweringEmitter's, making one took about twice as long).
    def __init__(self, node: Node, opset: int, inputs: Sequence[str], outputs: Sequence[str], used: Sequence[bool],
                 fresh_tensor: Callable[[str], str], fresh_node: Callable[[str], str],
                 layout: "LayoutTracker | None" = None, scalars: Mapping[tuple[str, bytes], str] = _NO_SCALARS,
                 folded: Mapping[Value, Any] | None = None, written: Sequence[OnnxNode] = (),
                 graph_outputs: Collection[Value] = ()) -> None:
        self.node = node
        self.opset = opset
        self.inputs = tuple(inputs)
        self.outputs = tuple(outputs)
        self._fresh = fresh_tensor
        self._fresh_node = fresh_node
        self._used = tuple(used)
        self.nodes: list[OnnxNode] = []
        self.initializers: list[Initializer] = []
        self.domains: dict[str, int] = {}
        # What the writer tells of the graph written (the defaults outside one):
        # the layout tracker of the graph, or None (:mod:`.onnx_lowering.layout`);
        self.layout = layout
        # the scalar constants earlier nodes of the graph made, by (dtype, bytes);
        self.scalars = scalars
        # the values of the graph computed from constants when the writer lowers ``tf`` ops, else None;
        self.folded = folded
        # the nodes written so far in the graph, and the graph's outputs.
        self.written = written
        self.graph_outputs = graph_outputs

    @property
    def where(self) -> str:
        return f"fused node {self.node.name!r} ({self.node.op})"

    # ------------------------------------------------------------------ reading the node
    def decline(self, reason: str) -> NoReturn:
        """Gives up on a standard form: the node goes to domain ``scopefusion`` with ``reason`` recorded."""
        raise Unmapped(reason)

    def attr(self, name: str, default: Any = _REQUIRED) -> Any:
        """The payload of attribute ``name``; a missing one gives ``default``, or declines when there is none."""
        value = self.node.attrs.get(name)
        if value is not None:
            return value
        if default is _REQUIRED:
            self.decline(f"attribute {name!r} is not set")
        return default

    def attr_any(self, names: Sequence[str], default: Any = _REQUIRED) -> Any:
        """The first of ``names`` that is set (for attributes with several customary spellings)."""
        for name in names:
            value = self.node.attrs.get(name)
            if value is not None:
                return value
        if default is _REQUIRED:
            self.decline(f"none of the attributes {', '.join(map(repr, names))} is set")
        return default

    def has_input(self, i: int) -> bool:
        return i < len(self.inputs) and bool(self.inputs[i])

    def input(self, i: int) -> str:
        """The name of input ``i``; declines when it is absent."""
        if not self.has_input(i):
            self.decline(f"input {i} is absent")
        return self.inputs[i]

    def expect_inputs(self, low: int, high: int | None = None) -> None:
        """Declines unless the node has between ``low`` and ``high`` (default ``low``) input slots."""
        high = low if high is None else high
        if not low <= len(self.inputs) <= high:
            span = str(low) if low == high else f"{low} to {high}"
            self.decline(f"it has {len(self.inputs)} inputs, the ONNX mapping expects {span}")

    def used(self, i: int) -> bool:
        """True when output ``i`` is read (by a node or as a graph output); an unused one need not be written."""
        return i < len(self._used) and self._used[i]

    def only_outputs(self, count: int) -> None:
        """Declines when an output past the first ``count`` is in use (the ONNX form does not give it)."""
        extra = [i for i, used in enumerate(self._used) if i >= count and used]
        if extra:
            self.decline(f"its output {extra[0]} is in use and the ONNX form computes only {count} output(s)")

    def const_input(self, i: int) -> np.ndarray | None:
        """The value of input ``i`` when the export writes it as a constant (a ``ge.Const``, or a value the
        writer folds) and the writer lowers ``tf`` ops, else None: an exporter may then write what it computes
        from it as a new constant, instead of nodes that the clean-up would fold into one."""
        folded = self.folded
        value = self.node.inputs[i] if folded is not None and i < len(self.node.inputs) else None
        if value is None:
            return None
        found = folded.get(value)  # type: ignore[union-attr]
        if found is not None:
            return np.asarray(found)
        if value.producer.op == CONST_OP:
            return np.asarray(value.producer.attrs.as_tensor("value"))
        return None

    def only_reader(self, i: int) -> bool:
        """True when this node is the only reader of input ``i`` and the input is no graph output."""
        value = self.node.inputs[i] if i < len(self.node.inputs) else None
        return value is not None and len(value._uses) == 1 and value not in self.graph_outputs

    def producer(self, name: str) -> OnnxNode | None:
        """The node written before this one that writes tensor ``name`` (the last such), or None."""
        for node in reversed(self.written):
            if name in node.output:
                return node
        return None

    def input_type(self, i: int) -> TensorType | None:
        inputs = self.node.inputs
        value = inputs[i] if i < len(inputs) else None
        if value is None:
            return None
        t = value.type
        return t if isinstance(t, TensorType) else None

    def dtype(self, i: int = 0) -> DType:
        t = self.input_type(i)
        if t is None:
            self.decline(f"the dtype of input {i} is unknown")
        return t.dtype

    def rank(self, i: int = 0) -> int:
        t = self.input_type(i)
        if t is None or t.rank is None:
            self.decline(f"the rank of input {i} is unknown")
        return t.rank

    def dim(self, i: int, axis: int) -> int:
        """A static dim of input ``i``; declines when it is unknown."""
        t = self.input_type(i)
        if t is None or t.rank is None:
            self.decline(f"the rank of input {i} is unknown")
        rank = t.rank
        d = t.shape[axis % rank] if -rank <= axis < rank else -1
        if d < 0:
            self.decline(f"dim {axis} of input {i} is not static")
        return d

    # ------------------------------------------------------------------ layouts
    def channels_first(self, i: int = 0) -> str:
        """Input ``i`` (channels last, ``[N, spatial…, C]``) as channels first (``[N, C, spatial…]``): the form the
        layout tracking holds of it, else a new ``Transpose`` (which the tracking then keeps for its other
        readers)."""
        layout = self.layout
        if layout is not None:
            found = layout.first.get(self.node.inputs[i])  # type: ignore[arg-type]
            if found is not None:
                return found
        rank = self.rank(i)
        name = self.op("Transpose", [self.input(i)], perm=[0, rank - 1, *range(1, rank - 1)])[0]
        if layout is not None:
            if self.noted is None:
                self.noted = []
            self.noted.append((i, name))
        return name

    def hold_channels_first(self, name: str, index: int = 0) -> bool:
        """Leaves output ``index`` as its channels-first form ``name`` when the layout is tracked (its own,
        channels-last name is then written only where something reads it) and returns True; returns False when
        it is not (the caller writes the output itself)."""
        if self.layout is None:
            return False
        if self.held is None:
            self.held = []
        self.held.append((index, name))
        return True

    # ------------------------------------------------------------------ writing ONNX
    def op(self, op_type: str, inputs: Sequence[str], *, outputs: int | Sequence[str | None] = 1, domain: str = "",
           **attrs: Any) -> list[str]:
        """Writes one ONNX node; returns its output names.

        ``outputs`` is a count of fresh outputs, or a list of names where None asks for a fresh name and
        ``""`` leaves an optional output out.
        """
        base = f"{self.node.name}/{op_type}"
        fresh = self._fresh
        if outputs == 1:
            names: list[str] = [fresh(base)]
            written = list(names)
        elif type(outputs) is list and len(outputs) == 1:  # one named output (``result``): as below, shorter
            wanted = outputs[0]
            names = [fresh(base) if wanted is None else wanted]
            written = list(names) if names[0] else []
        else:
            if isinstance(outputs, int):
                outputs = [None] * outputs
            many = len(outputs) > 1
            names = [fresh(f"{base}:{k}" if many else base) if o is None else o for k, o in enumerate(outputs)]
            written = list(names)
            while written and not written[-1]:
                written.pop()
        inputs = list(inputs)
        if inputs and not inputs[-1]:
            while inputs and not inputs[-1]:
                inputs.pop()
        self.nodes.append(OnnxNode.with_attrs(op_type, inputs, written, self._fresh_node(base), domain, attrs))
        if domain:
            self.domains.setdefault(domain, 1)
        return names  # a list of its own: the node keeps ``written``

    def const(self, value: Any, hint: str, dtype: Any = None) -> str:
        """Writes an initializer holding ``value`` (as ``dtype`` when given); returns its name."""
        array = np.asarray(value, dtype=dtype)
        name = self._fresh(f"{self.node.name}/{hint}")
        self.initializers.append(Initializer.of_array(name, array))
        return name

    def scalar(self, value: float, hint: str, like: int = 0) -> str:
        """A scalar constant of input ``like``'s dtype."""
        return self.shared_scalar(np.asarray(value, dtype=self.dtype(like).numpy), hint)

    def shared_scalar(self, array: np.ndarray, hint: str) -> str:
        """An initializer holding the 0-d ``array``: the one an earlier node of the graph made for the same value
        and dtype, else a new one. A scalar is read, never changed: one initializer serves every reader (as
        ``Relu6``'s bounds, each model's few epsilons and ones), where one each would all be written."""
        key = (array.dtype.str, array.tobytes())
        found = self.scalars.get(key)
        if found is None:
            made = self.scalars_made
            if made is None:
                made = self.scalars_made = {}
            found = made.get(key)
            if found is None:
                found = made[key] = self.const(array, hint)
        return found

    def reduce(self, op_type: str, x: str, axes: Sequence[int], keepdims: int = 1) -> str:
        """A ``Reduce*`` node over ``axes``, with axes as an attribute or an input as the opset wants."""
        since = _AXES_INPUT_SINCE.get(op_type, _AXES_INPUT_DEFAULT)
        if self.opset >= since:
            axes_name = self.const(np.asarray(list(axes), np.int64), f"{op_type}_axes")
            return self.op(op_type, [x, axes_name], keepdims=keepdims)[0]
        return self.op(op_type, [x], axes=list(axes), keepdims=keepdims)[0]

    def to_output(self, name: str, index: int = 0) -> None:
        """Makes output ``index`` be the tensor ``name`` (an Identity; use ``outputs=`` on the last op instead
        when you can)."""
        self.op("Identity", [name], outputs=[self.outputs[index]])
