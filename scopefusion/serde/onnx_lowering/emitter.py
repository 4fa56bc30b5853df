"""What a lowering sees of one ``tf`` node, and where it writes ONNX nodes.

:class:`LoweringEmitter` is the fused-op emitter (:class:`~scopefusion.serde.onnx_fused.FusedEmitter`: input
and output names, attributes, ``op`` / ``const`` / ``reduce``) plus what TF ops need: the value of an input
that is a constant (after folding, see :mod:`scopefusion.serde.onnx_fold`), int64 copies of index inputs,
``Unsqueeze`` / ``Squeeze`` / ``Cast`` helpers and the node's output types.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable, Collection, Mapping, Sequence

import numpy as np

from ...dtypes import DType
from ...ir.graph import CONST_OP, Graph, Node, Value
from ...ir.types import TensorType
from ..onnx_attrs import onnx_elem_type
from ..onnx_fused import _NO_SCALARS, FusedEmitter
from ..onnx_node import Initializer
from ..onnx_node import Node as OnnxNode
from ..onnx_proto import AttributeProto, GraphProto, np_dtype_to_tensor_dtype

if TYPE_CHECKING:  # pragma: no cover
    from .layout import LayoutTracker

__all__ = ["INT64_MAX", "INT64_MIN", "LoweringEmitter", "constant_of"]

INT64_MAX = np.iinfo(np.int64).max
INT64_MIN = np.iinfo(np.int64).min


def constant_of(value: Value | None, folded: Mapping[Value, np.ndarray]) -> np.ndarray | None:
    """The array ``value`` always holds (a ``ge.Const`` or a folded value), else None."""
    if value is None:
        return None
    found = folded.get(value)
    if found is not None:
        return found
    if value.producer.op == CONST_OP:
        array = value.producer.attrs.as_tensor("value")
        return array if type(array) is np.ndarray else np.asarray(array)  # np.asarray returns an array as it is
    return None


class LoweringEmitter(FusedEmitter):
    """The emitter of one ``tf`` node (see the module docstring)."""

    def __init__(self, node: Node, opset: int, inputs: Sequence[str], outputs: Sequence[str], used: Sequence[bool],
                 fresh_tensor: Callable[[str], str], fresh_node: Callable[[str], str],
                 folded: Mapping[Value, np.ndarray], write_body: Callable[[Graph], GraphProto] | None = None,
                 names: Mapping[Value, str] | None = None, overrides: Mapping[int, np.ndarray] | None = None,
                 layout: "LayoutTracker | None" = None, scalars: Mapping[tuple[str, bytes], str] = _NO_SCALARS,
                 written: Sequence[OnnxNode] = (), graph_outputs: Collection[Value] = ()) -> None:
        # By position, as the writer passes them (see the NOTE of FusedEmitter.__init__).
        FusedEmitter.__init__(self, node, opset, inputs, outputs, used, fresh_tensor, fresh_node, layout, scalars,
                              folded, written, graph_outputs)
        self._folded = folded
        self._write_body = write_body
        self._names = names or {}
        # Constant inputs as the node reads them here, by slot, when that differs from the IR's value (an operand
        # laid out channels first, see :mod:`.layout`).
        self._overrides = overrides

    # ------------------------------------------------------------------ bodies
    def body(self, key: str) -> Graph:
        found = self.node.subgraphs.get(key)
        if found is None:
            self.decline(f"its body {key!r} is not in the IR")
        return found

    def inline(self, graph: Graph, inputs: Sequence[str], into: GraphProto | None = None) -> list[str]:
        """Writes body ``graph`` (lowered) with its inputs bound to tensors ``inputs`` (by the inputs' ``index``
        attribute, else their order); its nodes go to this emitter (or ``into``); returns its output names."""
        if self._write_body is None:
            self.decline("bodies cannot be written here")
        proto = self._write_body(graph)
        positions = []
        declared = [v for v in graph.inputs if v.producer.attrs.get("_outer_name") is None]  # others read by name
        for k, value in enumerate(declared):
            index = value.producer.attrs.get("index")
            positions.append(int(index) if index is not None else k)
        if len(proto.input) != len(positions) or any(p >= len(inputs) for p in positions):
            self.decline(f"body {graph.name!r} has {len(proto.input)} inputs for {len(inputs)} values")
        renames = {info.name: inputs[p] for info, p in zip(proto.input, positions)}
        _rename_reads(proto, renames)
        outputs = [renames.get(o.name, o.name) for o in proto.output]
        if into is not None:
            into.node.extend(proto.node)
            into.initializer.extend(proto.initializer)
        else:
            self.nodes.extend(OnnxNode.of(node) for node in proto.node)
            self.initializers.extend(Initializer.of_proto(t) for t in proto.initializer)
        return outputs

    def fresh(self, hint: str) -> str:
        return self._fresh(f"{self.node.name}/{hint}")

    @property
    def where(self) -> str:
        return f"node {self.node.name!r} ({self.node.op})"

    # ------------------------------------------------------------------ reading the node
    def const_value(self, i: int) -> np.ndarray | None:
        """The value of input ``i`` when it is a constant, else None."""
        if self._overrides is not None and i in self._overrides:
            return self._overrides[i]
        value = self.node.inputs[i] if i < len(self.node.inputs) else None
        return constant_of(value, self._folded)

    def value_const(self, value: Value | None) -> np.ndarray | None:
        """The array any IR value of this graph always holds (a constant or a folded value), else None."""
        return constant_of(value, self._folded)

    def value_name(self, value: Value) -> str | None:
        """The ONNX tensor name of an IR value of this graph written before this node, else None; a lowering
        that rewrites a chain of nodes ending at its own reads the chain's inputs through it."""
        if self.layout is not None and value in self.layout.pending:
            self.layout.read_by_name = True  # what it writes may read the value's own name (see .layout)
        return self._names.get(value)

    def require_const(self, i: int, what: str) -> np.ndarray:
        """The value of input ``i`` (``what`` it is, for the reason); declines when it is not constant."""
        found = self.const_value(i)
        if found is None:
            self.decline(f"its {what} (input {i}) is not a constant")
        return found

    def output_type(self, i: int = 0) -> TensorType | None:
        t = self.node.outputs[i].type if i < len(self.node.outputs) else None
        return t if isinstance(t, TensorType) else None

    def out_dtype(self, i: int = 0) -> DType:
        t = self.output_type(i)
        if t is None:
            self.decline(f"the dtype of output {i} is unknown")
        return t.dtype

    def dtype_attr(self, name: str) -> DType:
        found = self.attr(name)
        if not isinstance(found, DType):
            self.decline(f"attribute {name!r} is not a dtype")
        return found

    def onnx_type(self, dtype: DType) -> int:
        code = onnx_elem_type(dtype)
        if not code:
            self.decline(f"dtype {dtype.name} has no ONNX element type")
        return code

    # ------------------------------------------------------------------ writing ONNX
    def result(self, op_type: str, inputs: Sequence[str], index: int = 0, **attrs: Any) -> str:
        """Writes one node whose (single) output is the node's output ``index``."""
        return self.op(op_type, inputs, outputs=[self.outputs[index]], **attrs)[0]

    def int64(self, i: int) -> str:
        """Input ``i`` as int64 (a constant converted in place, else a Cast)."""
        found = self.const_value(i)
        if found is not None:
            return self.const(np.asarray(found).astype(np.int64), f"in{i}_i64")
        t = self.input_type(i)
        if t is not None and t.dtype.numpy == np.dtype(np.int64):
            return self.input(i)
        return self.op("Cast", [self.input(i)], to=7)[0]

    def ints(self, values: Sequence[int] | np.ndarray, hint: str = "ints") -> str:
        return self.const(np.asarray(values, np.int64).reshape(-1), hint)

    def cast(self, x: str, dtype: DType | np.dtype | type, out: str | None = None) -> str:
        code = onnx_elem_type(dtype) if isinstance(dtype, DType) else _numpy_code(np.dtype(dtype))
        return self.op("Cast", [x], outputs=[out], to=code)[0]

    def unsqueeze(self, x: str, axes: Sequence[int], out: str | None = None) -> str:
        return self.op("Unsqueeze", [x, self.ints(axes, "axes")], outputs=[out])[0]

    def squeeze(self, x: str, axes: Sequence[int] | None, out: str | None = None) -> str:
        inputs = [x] if axes is None else [x, self.ints(axes, "axes")]
        return self.op("Squeeze", inputs, outputs=[out])[0]

    def typed_scalar(self, value: Any, dtype: DType | np.dtype, hint: str = "scalar") -> str:
        numpy = dtype.numpy if isinstance(dtype, DType) else np.dtype(dtype)
        return self.shared_scalar(np.asarray(value, dtype=numpy), hint)


def _rename_reads(graph: GraphProto, renames: Mapping[str, str]) -> None:
    """Every read of a renamed tensor in ``graph`` and the bodies inside it reads the new name."""
    for node in graph.node:
        for k, name in enumerate(node.input):
            if name in renames:
                node.input[k] = renames[name]
        for attr in node.attribute:
            for body in [attr.g] if attr.type == AttributeProto.GRAPH else list(attr.graphs):
                _rename_reads(body, renames)


def _numpy_code(dtype: np.dtype) -> int:
    return int(np_dtype_to_tensor_dtype(dtype))
