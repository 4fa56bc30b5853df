"""The ONNX node of the export pipeline: a plain-Python stand-in for ``NodeProto``, made once per node.

The emitters (:mod:`.onnx_fused`, :mod:`.onnx_lowering`) write :class:`Node` objects, the clean-up
(:mod:`.onnx_optimize`) rewrites them, and each becomes a ``NodeProto`` once, at the end, written in place
into its graph (:meth:`Node.fill`). Building protobuf messages node by node (``onnx.helper.make_node``)
and converting them back and forth between passes cost more than the rewrites themselves.

A node has ``NodeProto``'s fields as Python values: ``op_type``, ``domain`` (``""`` is left unset, as
``make_node`` does), ``name``, ``input`` and ``output`` (lists), ``doc_string`` and its attributes, in
order, each kept as its value with its ``AttributeProto`` type (see :func:`attribute_entry`, which
classifies values as ``onnx.helper.make_attribute`` does, and raises the same errors). A node read from a
``NodeProto`` (:meth:`Node.of`) keeps the message, so the fields it does not model stay as they were.
The messages are scopefusion's own (:mod:`.onnx_proto`); an attribute value that is one of the onnx
package's messages is read into them.
"""

from __future__ import annotations

import numbers
import sys
from collections.abc import Iterable
from typing import Any, Iterator

import numpy as np

from .onnx_attrs import _raw_code, tensor_into, tensor_proto
from .onnx_proto import (
    AttributeProto,
    GraphProto,
    NodeProto,
    SparseTensorProto,
    TensorProto,
    TypeProto,
    get_attribute_value,
    make_attribute,
    to_array,
)
from .weight_stream import defer_array

__all__ = ["Initializer", "Node", "append_initializers", "append_nodes", "attribute_entry"]

# An attribute: (name, AttributeProto type, value); _MESSAGE marks a value kept as an AttributeProto.
_MESSAGE = -1
_INT, _FLOAT, _STRING = AttributeProto.INT, AttributeProto.FLOAT, AttributeProto.STRING
_TENSOR, _GRAPH = AttributeProto.TENSOR, AttributeProto.GRAPH
_INTS, _FLOATS, _STRINGS, _GRAPHS = AttributeProto.INTS, AttributeProto.FLOATS, AttributeProto.STRINGS, AttributeProto.GRAPHS
_BODY_TYPES = (_GRAPH, _GRAPHS)

Entry = tuple[str, int, Any]
_ONLY_INT = {int}
_MAYBE_BODY = frozenset((_GRAPH, _GRAPHS, _MESSAGE))


def attribute_entry(name: str, value: Any) -> Entry:
    """``value`` as an attribute of the type ``onnx.helper.make_attribute`` gives it (same errors)."""
    kind = type(value)
    if kind is int:
        return (name, _INT, value)
    if (kind is list or kind is tuple) and value and set(map(type, value)) == _ONLY_INT:
        return (name, _INTS, list(value))
    if kind is str:
        return (name, _STRING, value.encode("utf-8"))
    if kind is float:
        return (name, _FLOAT, value)
    if isinstance(value, numbers.Integral):
        return (name, _INT, int(value))
    if isinstance(value, numbers.Real):
        return (name, _FLOAT, float(value))
    if isinstance(value, str):
        return (name, _STRING, value.encode("utf-8"))
    if isinstance(value, bytes):
        return (name, _STRING, value)
    if isinstance(value, TensorProto):
        return (name, _TENSOR, value)
    if isinstance(value, GraphProto):
        return (name, _GRAPH, value)
    if isinstance(value, Iterable) and not isinstance(value, (SparseTensorProto, TypeProto)):
        items = list(value)
        if items:
            types = {type(v) for v in items}
            if all(issubclass(t, numbers.Integral) for t in types):
                return (name, _INTS, [int(v) for v in items])
            if all(issubclass(t, numbers.Real) for t in types):
                return (name, _FLOATS, [float(v) for v in items])
            if all(issubclass(t, (str, bytes)) for t in types):
                return (name, _STRINGS, [v.encode("utf-8") if isinstance(v, str) else v for v in items])
            if all(issubclass(t, GraphProto) for t in types):
                return (name, _GRAPHS, items)
    return (name, _MESSAGE, make_attribute(name, value))  # the rest, and its errors, as onnx has them


def _fill_attribute(a: AttributeProto, entry: Entry) -> None:
    name, kind, value = entry
    a.name = name
    if kind == _INT:
        a.i = value
    elif kind == _INTS:
        a.ints.extend(value)
    elif kind == _FLOAT:
        a.f = value
    elif kind == _STRING:
        a.s = value
    elif kind == _FLOATS:
        a.floats.extend(value)
    elif kind == _STRINGS:
        a.strings.extend(value)
    elif kind == _TENSOR:
        a.t.CopyFrom(value)
    elif kind == _GRAPH:
        a.g.CopyFrom(value)
    elif kind == _GRAPHS:
        a.graphs.extend(value)
    a.type = kind  # type: ignore[assignment]


def _attribute_proto(entry: Entry) -> AttributeProto:
    if entry[1] == _MESSAGE:
        return entry[2]
    a = AttributeProto()
    _fill_attribute(a, entry)
    return a


class Node:
    """One ONNX node (see the module docstring). ``body_reads`` is None for a node without a body
    (``GRAPH`` / ``GRAPHS`` attribute), else the names its bodies read, in order."""

    __slots__ = ("op_type", "domain", "name", "input", "output", "attrs", "doc_string", "proto", "body_reads")

    def __init__(self, op_type: str, domain: str, name: str, inputs: list[str], outputs: list[str],
                 attrs: list[Entry] | None = None, proto: NodeProto | None = None, doc_string: str = "",
                 body: bool | None = None) -> None:
        self.op_type = op_type
        self.domain = domain
        self.name = name
        self.input = inputs
        self.output = outputs
        self.attrs: list[Entry] = attrs if attrs is not None else []
        self.doc_string = doc_string
        self.proto = proto
        self.body_reads: list[str] | None = None
        if body if body is not None else (self.attrs and any(_is_body(e) for e in self.attrs)):
            self.body_reads = [name for body in self.bodies() for inner in _inner_nodes(body.node) for name in inner.input]

    @classmethod
    def make(cls, op_type: str, inputs: list[str], outputs: list[str], name: str = "", domain: str = "",
             **attrs: Any) -> "Node":
        """A node as ``onnx.helper.make_node`` would make it (attributes in name order, None ones left out)."""
        return cls.with_attrs(op_type, inputs, outputs, name, domain, attrs)

    @classmethod
    def with_attrs(cls, op_type: str, inputs: list[str], outputs: list[str], name: str, domain: str,
                   attrs: dict[str, Any]) -> "Node":
        """As :meth:`make`, the attributes given as a dict (read, not kept): the emitters pass theirs on as it is."""
        if not attrs:
            return cls(op_type, domain, name, inputs, outputs, None, None, "", False)
        entries = []
        body = False
        for key in sorted(attrs) if len(attrs) > 1 else attrs:
            value = attrs[key]
            if value is None:
                continue
            entry = attribute_entry(key, value)
            if entry[1] in _MAYBE_BODY:
                body = body or _is_body(entry)
            entries.append(entry)
        return cls(op_type, domain, name, inputs, outputs, entries, None, "", body)

    @classmethod
    def of(cls, proto: NodeProto) -> "Node":
        entries = [(a.name, _MESSAGE, a) for a in proto.attribute]
        return cls(proto.op_type, proto.domain, proto.name, list(proto.input), list(proto.output), entries, proto)

    # ------------------------------------------------------------------ attributes
    def attr(self, name: str, default: Any = None) -> Any:
        """The value of attribute ``name`` as ``onnx.helper.get_attribute_value`` gives it, else ``default``."""
        for entry in self.attrs:
            if entry[0] == name:
                kind, value = entry[1], entry[2]
                if kind == _MESSAGE:
                    return get_attribute_value(value)
                if kind == _FLOAT:
                    return float(np.float32(value))
                if kind == _FLOATS:
                    return [float(v) for v in np.asarray(value, np.float32)]
                return list(value) if kind in (_INTS, _STRINGS, _GRAPHS) else value
        return default

    def ints_view(self, name: str) -> Any:
        """As :meth:`attr`, without copying an ``INTS`` attribute's list: the node's own, for reading only
        (the clean-up reads a transpose's permutation many times)."""
        for entry in self.attrs:
            if entry[0] == name:
                return entry[2] if entry[1] == _INTS else self.attr(name)
        return None

    def set_attr(self, name: str, value: Any) -> None:
        """Sets attribute ``name`` (moved to the end when it was there, as a rewrite of the message would)."""
        self.attrs = [e for e in self.attrs if e[0] != name]
        self.attrs.append(attribute_entry(name, value))

    def clear_attrs(self) -> None:
        self.attrs = []

    @property
    def attribute(self) -> list[AttributeProto]:
        """The attributes as ``AttributeProto`` messages (made on each call: for reading)."""
        return [_attribute_proto(e) for e in self.attrs]

    def attr_key(self) -> tuple[bytes, ...]:
        """The attributes' serialized forms, sorted: equal for nodes with equal attributes."""
        return tuple(sorted(_attribute_proto(e).SerializeToString(deterministic=True) for e in self.attrs))

    def bodies(self) -> list[GraphProto]:
        out: list[GraphProto] = []
        for entry in self.attrs:
            kind, value = entry[1], entry[2]
            if kind == _GRAPH:
                out.append(value)
            elif kind == _GRAPHS:
                out.extend(value)
            elif kind == _MESSAGE:
                if value.type == _GRAPH:
                    out.append(value.g)
                elif value.type == _GRAPHS:
                    out.extend(value.graphs)
        return out

    # ------------------------------------------------------------------ writing
    def fill(self, out: NodeProto) -> None:
        """Writes the node into ``out``, an empty ``NodeProto`` (such as ``graph.node.add()``)."""
        proto = self.proto
        if proto is not None:
            out.CopyFrom(proto)
            del out.input[:], out.output[:], out.attribute[:]
            # Set only what differs: proto2 fields have presence, and an empty field set is written.
            if out.op_type != self.op_type:
                out.op_type = self.op_type
            if out.domain != self.domain:
                out.domain = self.domain
            if out.name != self.name:
                out.name = self.name
        else:
            if self.op_type:
                out.op_type = self.op_type
            if self.domain:
                out.domain = self.domain
            if self.name:
                out.name = self.name
        out.input.extend(self.input)
        out.output.extend(self.output)
        if self.attrs:
            attributes = out.attribute
            for entry in self.attrs:
                if entry[1] == _MESSAGE:
                    attributes.append(entry[2])
                else:
                    _fill_attribute(attributes.add(), entry)
        if self.doc_string:
            out.doc_string = self.doc_string

    def to_proto(self) -> NodeProto:
        out = NodeProto()
        self.fill(out)
        return out


def _is_body(entry: Entry) -> bool:
    kind = entry[1]
    return kind in _BODY_TYPES or (kind == _MESSAGE and entry[2].type in _BODY_TYPES)


def _inner_nodes(nodes: Iterable[NodeProto]) -> Iterator[NodeProto]:
    """``nodes`` and the nodes of their bodies, recursively."""
    for node in nodes:
        yield node
        for attr in node.attribute:
            if attr.type == _GRAPH:
                yield from _inner_nodes(attr.g.node)
            elif attr.type == _GRAPHS:
                for body in attr.graphs:
                    yield from _inner_nodes(body.node)


def append_nodes(graph: GraphProto, nodes: Iterable[Node]) -> None:
    """Appends ``nodes`` to ``graph``, each written in place (no copy of a message)."""
    add = graph.node.add
    for node in nodes:
        node.fill(add())


class Initializer:
    """One initializer of the export pipeline: its array (a numeric array written as its raw bytes, whose
    value reads back as it is), else its ``TensorProto`` (made at once, as ``tensor_proto`` makes it). It
    becomes a ``TensorProto`` of its graph once, at the end (:meth:`write_into`); one the clean-up removes
    never does."""

    __slots__ = ("name", "array", "proto")

    def __init__(self, name: str, array: np.ndarray | None = None, proto: TensorProto | None = None) -> None:
        self.name = name
        self.array = array
        self.proto = proto

    @classmethod
    def of_array(cls, name: str, array: Any) -> "Initializer":
        if type(array) is not np.ndarray:
            array = np.asarray(array)
        found = _READS_BACK.get(array.dtype)
        if found if found is not None else _reads_back(array.dtype):
            return cls(name, array)
        return cls(name, None, tensor_proto(array, name))

    @classmethod
    def of_proto(cls, proto: TensorProto) -> "Initializer":
        return cls(proto.name, None, proto)

    @property
    def dims(self) -> Any:
        return self.array.shape if self.array is not None else self.proto.dims  # type: ignore[union-attr]

    @property
    def data_type(self) -> int:
        if self.array is not None:
            return _raw_code(self.array) or 0
        return self.proto.data_type  # type: ignore[union-attr]

    def to_proto(self) -> TensorProto:
        return self.proto if self.proto is not None else tensor_proto(self.array, self.name)  # type: ignore[arg-type]

    def write_into(self, target: TensorProto) -> None:
        """Writes the initializer into ``target``, an empty ``TensorProto`` (such as ``graph.initializer.add()``)."""
        array = self.array
        if array is None:
            target.CopyFrom(self.proto)  # type: ignore[arg-type]
        elif _LITTLE:  # tensor_into's steps for a numeric array in the host's (little-endian) byte order
            target.dims.extend(array.shape)
            if self.name:
                target.name = self.name
            marker = defer_array(array)
            target.raw_data = marker if marker is not None else array.tobytes()
            target.data_type = _raw_code(array)  # type: ignore[assignment]
        else:
            tensor_into(array, self.name, target)


_READS_BACK: dict[np.dtype, bool] = {}
_LITTLE = sys.byteorder == "little"


def _reads_back(dtype: np.dtype) -> bool:
    """True when an array of ``dtype`` is written as its raw bytes and reads back (``numpy_helper.to_array``)
    with the same dtype: then its value is the array itself."""
    found = _READS_BACK.get(dtype)
    if found is None:
        sample = np.zeros(1, dtype)
        found = False
        if _raw_code(sample) is not None:
            try:
                found = to_array(tensor_proto(sample, "x")).dtype == dtype
            except Exception:  # noqa: BLE001 - a dtype onnx cannot read back stays a message
                found = False
        _READS_BACK[dtype] = found
    return found


def append_initializers(graph: GraphProto, initializers: Iterable[Initializer]) -> None:
    """Appends ``initializers`` to ``graph``, each written in place."""
    add = graph.initializer.add
    for initializer in initializers:
        initializer.write_into(add())
