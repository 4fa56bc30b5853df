"""IR graphs ⇄ GE ``ModelDef`` / ``GraphDef``, in protobuf binary and text form.

A model is a list of graphs, ``graphs[0]`` the main one, plus model attributes. Each IR node is one
``OpDef`` in schedule order:

* ``name``, ``type`` = the op type; the dialect in the reserved attribute ``_dialect`` unless it is
  ``ge`` (so GE's own ops, ``Data`` and ``Const`` among them, read back as dialect ``ge``);
* ``input``: one ``"producer:index"`` per input slot (``""`` for an absent optional input), then
  one ``"producer:-1"`` per control input (GE's convention; ``"^producer"`` is read too);
* ``input_desc`` / ``output_desc``: a ``TensorDescriptor`` per input slot / output, from the value
  types (see :mod:`scopefusion.serde.tensors`); ``attr``: the node's attributes through the registry.

``id`` is the op's schedule index. Graph inputs and outputs are ``GraphDef.input`` / ``GraphDef.output``
as ``"op:index"``. On the way back, the ops of a file that are not in schedule order (GE does not
promise it) are put into a stable topological order; anything malformed is a :class:`SerdeError`
naming the graph, the op and the field.

NOTE: bodies (``node.subgraphs``) are stored flat, as GE does: each body is one more ``GraphDef`` in
``ModelDef.graph`` after the top-level graphs, in depth-first order, and the op names it in
``subgraph_name``. A body keeps its graph name when that is free in the model and is otherwise
renamed ``name_1``, ``name_2``... with the IR name kept in the reserved graph attribute
``_graph_name``; the body keys of the op are in its reserved attribute ``_subgraph_keys``. A graph
written alone (a GRAPH attribute, :func:`graph_to_proto`) has no model around it, so its bodies go,
flat in the same way, into its own reserved attribute ``_subgraphs`` (a list of GraphDefs). On the way
back every graph of the model that no op names is a top-level graph: ``graphs[0]``, then the others
in file order.

Top-level graphs after the first (shape profiles) share the main graph's equal constants: their data
is written once (layout in :mod:`scopefusion.serde.shared_weights`), and a model too large for one
protobuf file is refused before it is written.

Reading is :mod:`.ge_read` (its names are given here too, the module imported on first use). Writing is
deterministic: same IR, same bytes (maps sorted, ``deterministic=True``). :func:`to_model_bytes`
gives the bytes as pieces that stream each large tensor from its array to the file
(:mod:`scopefusion.serde.weight_stream`).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any, Callable, Mapping, Sequence

from google.protobuf import text_format

from ..errors import SerdeError
from ..ir.attrs import AttrValue
from ..ir.graph import Graph, Node, Value
from ..ir.types import TensorType, Type
from ..parser.wire import encode_varint
from . import ge_ir_pb2 as pb
from .attr_serializers import AttrSerializerRegistry, SerdeContext, default_serializer_registry
from .shared_weights import SHARED_WEIGHT_ATTR, check_model_size, share_weights
from .tensors import tensor_desc_bytes, value_type_to_desc
from .weight_stream import ModelBytes, stream_message

if TYPE_CHECKING:  # pragma: no cover
    from .ge_read import (
        ModelContents,
        from_bytes,
        from_text,
        graph_from_proto,
        model_from_bytes,
        model_from_proto,
        model_from_text,
        read_standalone_graph,
    )

__all__ = [
    "CONTROL_INDEX",
    "DEFAULT_DIALECT",
    "RESERVED_GRAPH_ATTRS",
    "RESERVED_OP_ATTRS",
    "ModelContents",
    "from_bytes",
    "from_text",
    "graph_from_proto",
    "graph_to_proto",
    "model_from_bytes",
    "model_from_proto",
    "model_from_text",
    "model_to_proto",
    "read_standalone_graph",
    "to_bytes",
    "to_model_bytes",
    "to_text",
    "write_standalone_graph",
]

DEFAULT_DIALECT = "ge"
CONTROL_INDEX = -1
DIALECT_ATTR = "_dialect"
SUBGRAPH_KEYS_ATTR = "_subgraph_keys"
GRAPH_NAME_ATTR = "_graph_name"
SUBGRAPHS_ATTR = "_subgraphs"
# Input slots that read a later op: TF1 loop back edges (NextIteration -> Merge), the one cycle a graph may hold.
BACK_EDGES_ATTR = "_back_edges"
# The IR op type of an op whose definition names another type to write to GE (a declared fused op's ge_type).
OP_TYPE_ATTR = "_op_type"
RESERVED_OP_ATTRS = frozenset({DIALECT_ATTR, SUBGRAPH_KEYS_ATTR, BACK_EDGES_ATTR, SHARED_WEIGHT_ATTR, OP_TYPE_ATTR})
RESERVED_GRAPH_ATTRS = frozenset({GRAPH_NAME_ATTR, SUBGRAPHS_ATTR})
_VT = pb.AttrDef.ListValue
# The largest message protobuf serializes or parses (2 GiB - 1 bytes).
MAX_PROTOBUF_BYTES = (1 << 31) - 1
# ============================================================================= public API
def model_to_proto(
    graphs: Graph | Sequence[Graph],
    *,
    name: str | None = None,
    attrs: Mapping[str, Any] | None = None,
    version: int = 0,
    custom_version: str = "",
    registry: AttrSerializerRegistry | None = None,
) -> pb.ModelDef:
    """A ``ModelDef`` of ``graphs`` (the first is the main graph; ``name`` defaults to its name)."""
    graphs = [graphs] if isinstance(graphs, Graph) else list(graphs)
    if not graphs:
        raise SerdeError("a model needs at least one graph (the main graph); pass the graph to write")
    ctx = SerdeContext(registry=registry if registry is not None else default_serializer_registry(), where="model")
    names = [g.name for g in graphs]
    for i, n in enumerate(names):
        if n in names[:i]:
            raise SerdeError(f"two top-level graphs of the model are named {n!r}; give each graph its own name")
    model = pb.ModelDef()
    try:
        model.name = graphs[0].name if name is None else name
        model.version = version
        model.custom_version = custom_version
    except (TypeError, ValueError) as e:
        raise SerdeError(f"invalid model name or version ({e}); the version is a uint32") from None
    check_model_size(graphs)
    defs = [model.graph.add() for _ in graphs]
    sink = _BodySink(model.graph, set(names))
    entries = _AttrEntries(ctx)
    for graph, graph_def in zip(graphs, defs):
        _write_graph(graph, graph_def, graph.name, sink, ctx, entries)
    share_weights(graphs, defs)
    for key, value in sorted((attrs or {}).items()):
        where = f"model attribute {key!r}"
        try:
            value = AttrValue.of(value)
        except (TypeError, ValueError) as e:
            raise SerdeError(f"{where}: {e}") from None
        ctx.at(where).write_attr(value, model.attr[key])
    return model


def graph_to_proto(graph: Graph, *, registry: AttrSerializerRegistry | None = None) -> pb.GraphDef:
    """A standalone ``GraphDef`` of ``graph``, its bodies in the reserved attribute ``_subgraphs``."""
    graph_def = pb.GraphDef()
    write_standalone_graph(graph, graph_def, SerdeContext(registry=registry, where="graph"))
    return graph_def


def to_bytes(graphs: Graph | Sequence[Graph], **model: Any) -> bytes:
    """The binary ``ModelDef`` of ``graphs``; keywords as :func:`model_to_proto`. Deterministic."""
    return to_model_bytes(graphs, **model).tobytes()


def to_model_bytes(graphs: Graph | Sequence[Graph], **model: Any) -> ModelBytes:
    """The binary ``ModelDef`` of ``graphs`` as pieces to stream to a file (large tensors are written from
    their arrays, :mod:`.weight_stream`); the same bytes as :func:`to_bytes`."""
    return checked_size(stream_message(lambda: model_to_proto(graphs, **model)))


def checked_size(data: ModelBytes) -> ModelBytes:
    """``data``, unless it is too large for protobuf to parse (SerdeError: a file nothing could read)."""
    if len(data) > MAX_PROTOBUF_BYTES:
        raise SerdeError(
            f"the GE model takes {len(data):,} bytes, more than a protobuf file can hold ({MAX_PROTOBUF_BYTES:,}); "
            "write --format onnx, or split the model"
        )
    return data


def to_text(graphs: Graph | Sequence[Graph], **model: Any) -> str:
    """The protobuf text form of the ``ModelDef`` of ``graphs``; keywords as :func:`model_to_proto`."""
    return text_format.MessageToString(model_to_proto(graphs, **model))


def write_standalone_graph(graph: Graph, graph_def: pb.GraphDef, ctx: SerdeContext) -> None:
    """Writes ``graph`` into the empty ``graph_def``, its bodies into the reserved ``_subgraphs`` list."""
    graph_def.SetInParent()
    sink = None
    if any(node.subgraphs for node in graph.nodes):
        bodies = graph_def.attr[SUBGRAPHS_ATTR].list
        bodies.val_type = _VT.VT_LIST_GRAPH
        sink = _BodySink(bodies.g, {graph.name})
    _write_graph(graph, graph_def, graph.name, sink, ctx)


# ============================================================================= writing
class _BodySink:
    """Where bodies are written: a repeated GraphDef field, and the graph names taken in it."""

    __slots__ = ("defs", "taken")

    def __init__(self, defs: Any, taken: set[str]) -> None:
        self.defs = defs
        self.taken = taken

    def add(self, body: Graph) -> tuple[str, pb.GraphDef]:
        name, n = body.name, 1
        while name in self.taken:
            name, n = f"{body.name}_{n}", n + 1
        self.taken.add(name)
        return name, self.defs.add()


def _write_graph(
    graph: Graph,
    graph_def: pb.GraphDef,
    name: str,
    sink: _BodySink | None,
    ctx: SerdeContext,
    entries: "_AttrEntries | None" = None,
) -> None:
    """Writes ``graph`` into ``graph_def``: its ops as one serialized string merged at once (see :func:`_op_bytes`).

    ``entries``: the attribute encodings of the whole write (the graphs of a model share most attribute values)."""
    where = f"graph {graph.name!r}"
    if entries is None:
        entries = _AttrEntries(ctx)
    graph_def.name = name
    if name != graph.name:
        graph_def.attr[GRAPH_NAME_ATTR].s = graph.name.encode("utf-8", "surrogateescape")
    written: dict[str, Node] = {}
    ge_types: dict[str, str] = {}  # op -> the type written (one definition lookup per op)
    ops: list[bytes] = []
    for index, node in enumerate(graph.nodes):
        if node.name in written:
            raise SerdeError(f"{where}: two ops are named {node.name!r}; node names must be unique in a graph")
        op = node.op
        ge_type = ge_types.get(op)
        if ge_type is None:
            ge_type = ge_types[op] = _ge_type(node, op)
        data = _op_bytes(node, ge_type, index, written, sink, ctx, entries, where)
        ops.append(_GRAPH_OP + _length(len(data)) + data)
        written[node.name] = node
    graph_def.MergeFromString(b"".join(ops))
    for i, value in enumerate(graph.inputs):
        graph_def.input.append(_ref(value, written, f"{where} input {i}"))
    for i, value in enumerate(graph.outputs):
        graph_def.output.append(_ref(value, written, f"{where} output {i}"))
    for key, attr_value in graph.attrs.items():
        if key in RESERVED_GRAPH_ATTRS:
            raise SerdeError(f"{where}: attribute name {key!r} is reserved by the GE serializer; rename the attribute")
        ctx.at(f"{where} attribute {key!r}").write_attr(attr_value, graph_def.attr[key])


def _ge_type(node: Node, op: str) -> str:
    """The op type written to GE: the definition's ``ge_type`` when it names one, else the IR op type."""
    opdef = node.graph.registry.lookup(op)
    ge_type = getattr(opdef, "ge_type", None)
    if ge_type and isinstance(ge_type, str) and "." not in ge_type:
        return ge_type
    return node.op_type


def _ref(value: Value, written: Mapping[str, Node], where: str) -> str:
    producer = value.producer
    if written.get(producer.name) is not producer:
        raise SerdeError(
            f"{where} reads {value.ref}, whose producer is not an earlier op of the graph; "
            "run graph.verify() to find the dangling or out-of-order value"
        )
    return value.ref


# Field keys in the wire form: GraphDef.op (6); OpDef name (1), type (2), input (5), attr (10), id (21),
# input_desc (33), output_desc (34), subgraph_name (35); an attr map entry's key (1) and value (2).
_GRAPH_OP = b"\x32"
_OP_NAME, _OP_TYPE, _OP_INPUT, _OP_ATTR, _OP_ID = b"\x0a", b"\x12", b"\x2a", b"\x52", b"\xa8\x01"
_OP_SUBGRAPH_NAME = b"\x9a\x02"
_ENTRY_KEY, _ENTRY_VALUE = b"\x0a", b"\x12"
# OpDef fields input_desc (33) and output_desc (34), as (tag, empty field) in the wire form.
_INPUT_DESC = (b"\x8a\x02", b"\x8a\x02\x00")
_OUTPUT_DESC = (b"\x92\x02", b"\x92\x02\x00")
_SHORT_LENGTHS = tuple(bytes((n,)) for n in range(128))


def _length(n: int) -> bytes:
    """The varint of a length (one byte below 128, as most lengths here are)."""
    return _SHORT_LENGTHS[n] if n < 128 else encode_varint(n)


def _text(tag: bytes, text: str) -> bytes:
    """A string field: ``tag``, the UTF-8 length, the UTF-8 bytes."""
    data = text.encode("utf-8")
    return tag + _length(len(data)) + data


class _AttrEntries:
    """The encodings an op is written with, kept for one write: ``attr`` map entries by name and value, the
    reserved string attributes, and descriptor fields by type.

    NOTE: why. A model's shape profiles are clones of its main graph sharing the (immutable) attribute
    values, and a value is serialized by a stateless serializer (:mod:`.attr_serializers`), so the entry of a
    name and a value object already written is the same bytes: it is reused instead of serialized again
    (deferred tensors included: the entry holds the same marker, which stands for the same array). The value
    is kept with its entry, so an id is never taken for another object's. Types are immutable and interned,
    and most values of a model share a few of them."""

    __slots__ = ("ctx", "_by_value", "_strings", "_inputs", "_outputs")

    def __init__(self, ctx: SerdeContext) -> None:
        self.ctx = ctx
        self._by_value: dict[tuple[str, int], tuple[AttrValue, bytes]] = {}
        self._strings: dict[tuple[str, str], bytes] = {}
        self._inputs: dict[Type, bytes] = {}
        self._outputs: dict[Type, bytes] = {}

    def entry(self, key: str, value: AttrValue, where: str, node: Node) -> bytes:
        """The serialized map entry of attribute ``key`` = ``value`` of ``node`` (``where``: its graph)."""
        found = self._by_value.get((key, id(value)))
        if found is not None and found[0] is value:
            return found[1]
        attr_def = pb.AttrDef()
        self.ctx.at(f"{_op_where(where, node)} attribute {key!r}").write_attr(value, attr_def)
        data = map_entry(key, attr_def.SerializeToString(deterministic=True))
        self._by_value[(key, id(value))] = (value, data)
        return data

    def string(self, key: str, text: str) -> bytes:
        """The map entry of a reserved string attribute (``_dialect``, ``_op_type``)."""
        data = self._strings.get((key, text))
        if data is None:
            attr_def = pb.AttrDef()
            attr_def.s = text.encode("utf-8", "surrogateescape")
            data = self._strings[(key, text)] = _reserved_entry(key, attr_def)
        return data

    def input_desc(self, t: Type | None, where: str, node: Node, slot: int) -> bytes:
        """The ``input_desc`` field of an input of type ``t``."""
        data = self._inputs.get(t) if t is not None else _INPUT_DESC[1]
        if data is None:
            data = _desc_field(_INPUT_DESC, t, lambda: f"{_op_where(where, node)} input {slot}")
            if isinstance(t, TensorType):
                self._inputs[t] = data
        return data

    def output_desc(self, t: Type | None, where: str, node: Node, index: int) -> bytes:
        """The ``output_desc`` field of an output of type ``t``."""
        data = self._outputs.get(t) if t is not None else _OUTPUT_DESC[1]
        if data is None:
            data = _desc_field(_OUTPUT_DESC, t, lambda: f"{_op_where(where, node)} output {index}")
            if isinstance(t, TensorType):
                self._outputs[t] = data
        return data


def map_entry(key: str, value: bytes) -> bytes:
    """An ``attr`` map entry (field 10 of ``OpDef``) of ``key`` and a serialized ``AttrDef``."""
    entry = _text(_ENTRY_KEY, key) + _ENTRY_VALUE + _length(len(value)) + value
    return _OP_ATTR + _length(len(entry)) + entry


def _reserved_entry(key: str, attr_def: pb.AttrDef) -> bytes:
    return map_entry(key, attr_def.SerializeToString(deterministic=True))


def _desc_field(field: tuple[bytes, bytes], t: Type | None, where: Callable[[], str]) -> bytes:
    """One serialized descriptor field of an ``OpDef`` describing a value of type ``t``."""
    if t is None:
        return field[1]
    if isinstance(t, TensorType):
        data = tensor_desc_bytes(t)
    else:
        desc = pb.TensorDescriptor()
        value_type_to_desc(t, desc, where())
        data = desc.SerializeToString(deterministic=True)
    return field[0] + _length(len(data)) + data


def _op_bytes(
    node: Node,
    ge_type: str,
    index: int,
    written: Mapping[str, Node],
    sink: _BodySink | None,
    ctx: SerdeContext,
    entries: _AttrEntries,
    where: str,
) -> bytes:
    """The serialized ``OpDef`` of ``node`` (``where``: its graph, for errors).

    NOTE: the op is written as wire bytes, field by field, and merged into the graph's message with the
    graph's other ops: setting each field through the message costs several times more per op. The parsed
    message is what the same fields set one by one would give (protobuf then serializes it as ever: fields
    in number order, map entries sorted), so the file's bytes do not change."""
    op_type = node.op_type
    if "." in op_type or not op_type:
        raise SerdeError(f"{_op_where(where, node)}: op type {op_type!r} must be a non-empty name without '.'")
    name = node.name.encode("utf-8")
    type_name = ge_type.encode("utf-8")
    parts = [_OP_NAME, _length(len(name)), name, _OP_TYPE, _length(len(type_name)), type_name]
    if node.dialect != DEFAULT_DIALECT:
        parts.append(entries.string(DIALECT_ATTR, node.dialect))
    if ge_type != op_type:
        parts.append(entries.string(OP_TYPE_ATTR, op_type))
    back_edges: list[int] = []
    descs: list[bytes] = []
    for slot, value in enumerate(node.inputs):
        if value is None:
            parts.append(_OP_INPUT + b"\x00")
            descs.append(_INPUT_DESC[1])
            continue
        producer = value.producer
        if written.get(producer.name) is not producer:
            if value.meta.get("back_edge"):
                back_edges.append(slot)
            else:
                _ref(value, written, f"{_op_where(where, node)} input {slot}")
        ref = f"{producer.name}:{value.index}".encode("utf-8")
        parts.append(_OP_INPUT + _length(len(ref)) + ref)
        descs.append(entries.input_desc(value.type, where, node, slot))
    for ctrl in node.control_inputs:
        if written.get(ctrl.name) is not ctrl:
            raise SerdeError(
                f"{_op_where(where, node)}: control input {ctrl.name!r} is not an earlier op of the graph; "
                "run graph.verify()"
            )
        parts.append(_text(_OP_INPUT, f"{ctrl.name}:{CONTROL_INDEX}"))
    if back_edges:
        attr_def = pb.AttrDef()
        attr_def.list.val_type = _VT.VT_LIST_INT
        attr_def.list.i.extend(back_edges)
        parts.append(_reserved_entry(BACK_EDGES_ATTR, attr_def))
    for value in node.outputs:
        descs.append(entries.output_desc(value.type, where, node, value.index))
    if index:
        parts.append(_OP_ID + _length(index))
    parts.extend(descs)
    if node.subgraphs:
        if sink is None:  # pragma: no cover - write_standalone_graph and model_to_proto always give one
            raise SerdeError(f"{_op_where(where, node)}: has bodies but no place to write them")
        keys = pb.AttrDef()
        keys.list.val_type = _VT.VT_LIST_STRING
        for key, body in node.subgraphs.items():
            body_name, body_def = sink.add(body)
            parts.append(_text(_OP_SUBGRAPH_NAME, body_name))
            keys.list.s.append(key.encode("utf-8", "surrogateescape"))
            _write_graph(body, body_def, body_name, sink, ctx, entries)
        parts.append(_reserved_entry(SUBGRAPH_KEYS_ATTR, keys))
    for key, attr_value in node.attrs.items():
        if key in RESERVED_OP_ATTRS:
            raise SerdeError(
                f"{_op_where(where, node)}: attribute name {key!r} is reserved by the GE serializer; "
                "rename the attribute"
            )
        parts.append(entries.entry(key, attr_value, where, node))
    return b"".join(parts)


def _op_where(where_graph: str, node: Node) -> str:
    return f"{where_graph} op {node.name!r} ({node.op})"


# The reading side (:mod:`.ge_read`), imported on first use: writing a model does not load it.
_READING = frozenset(("ModelContents", "from_bytes", "from_text", "graph_from_proto", "model_from_bytes",
                      "model_from_proto", "model_from_text", "read_standalone_graph"))


def __getattr__(name: str) -> Any:
    if name not in _READING:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__package__}.ge_read"), name)
    globals()[name] = value
    return value
