"""IR graphs to GE wire bytes, written field by field (the layout is :mod:`.ge`'s).

NOTE: why bytes. A model writes several fields per op (name, type, inputs, attributes, a descriptor per
input and output); setting each through a protobuf message, then serializing the message, costs several
times more than putting the fields' bytes together, and most of them repeat: a shape profile is a clone
of the main graph sharing its (immutable) attribute values, and most values share a few (interned) types.
So an op is written as bytes, each attribute value and each type encoded once per write
(:class:`_Encodings`), and a graph and the model are their ops' bytes with their own fields around them.

The bytes are protobuf's own serialization of the same message (``deterministic=True``): fields in number
order, every map's entries sorted by key, a scalar field left out when it holds its default (0, ``""``),
each attribute value and each descriptor serialized by protobuf itself. A test checks that reading the
bytes and serializing again gives them back unchanged.
"""

from __future__ import annotations

from typing import Callable, Mapping, Sequence

from ..errors import SerdeError
from ..ir import attrs as A
from ..ir.attrs import AttrType, AttrValue
from ..ir.graph import Graph, Node, Value
from ..ir.types import TensorType, Type
from ..parser.wire import encode_varint
from . import ge_ir_pb2 as pb
from .attr_serializers import BUILTIN_SERIALIZERS, SerdeContext
from .shared_weights import SHARED_WEIGHT_ATTR, check_model_size, shared_constants
from .tensors import tensor_desc_bytes, value_type_to_desc

__all__ = [
    "BACK_EDGES_ATTR",
    "CONTROL_INDEX",
    "DEFAULT_DIALECT",
    "DIALECT_ATTR",
    "GRAPH_NAME_ATTR",
    "OP_TYPE_ATTR",
    "RESERVED_GRAPH_ATTRS",
    "RESERVED_OP_ATTRS",
    "SUBGRAPHS_ATTR",
    "SUBGRAPH_KEYS_ATTR",
    "OutputFields",
    "graph_bytes",
    "model_bytes",
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

# What a top-level graph adds to an op's output descriptors: the serialized ``TensorDescriptor`` fields
# numbered after ``attr`` (5), in number order, for an output of a node (b"" for none).
OutputFields = Callable[[Node, Value], bytes]

# Field keys in the wire form: ModelDef.graph (7); GraphDef name (1), input (4), output (5), op (6); OpDef
# name (1), type (2), input (5), attr (10), id (21), input_desc (33), output_desc (34), subgraph_name (35);
# a map entry's key (1) and value (2).
_MODEL_GRAPH = b"\x3a"
_GRAPH_NAME, _GRAPH_INPUT, _GRAPH_OUTPUT, _GRAPH_OP = b"\x0a", b"\x22", b"\x2a", b"\x32"
_OP_NAME, _OP_TYPE, _OP_INPUT, _OP_ATTR, _OP_ID = b"\x0a", b"\x12", b"\x2a", b"\x52", b"\xa8\x01"
_INPUT_DESC, _OUTPUT_DESC, _OP_SUBGRAPH_NAME = b"\x8a\x02", b"\x92\x02", b"\x9a\x02"
_ENTRY_KEY, _ENTRY_VALUE = b"\x0a", b"\x12"
_SHORT_LENGTHS = tuple(bytes((n,)) for n in range(128))
# Attribute types whose equal values the builtin serializers write as the same bytes (not floats: 0.0 == -0.0).
_WRITTEN_BY_EQUALITY = (A.INT, A.BOOL, A.STR, A.DTYPE, A.LIST_INT, A.LIST_BOOL, A.LIST_STR, A.LIST_DTYPE)
_BUILTIN = dict(BUILTIN_SERIALIZERS)


def _length(n: int) -> bytes:
    """The varint of a length (one byte below 128, as most lengths here are, two below 16384)."""
    if n < 128:
        return _SHORT_LENGTHS[n]
    if n < 16384:
        return bytes((n & 0x7F | 0x80, n >> 7))
    return encode_varint(n)


def _field(tag: bytes, data: bytes) -> bytes:
    return tag + _length(len(data)) + data


def _text(tag: bytes, text: str) -> bytes:
    """A string field: ``tag``, the UTF-8 length, the UTF-8 bytes."""
    return _field(tag, text.encode("utf-8"))


def _entry(key: str, attr_def: pb.AttrDef) -> bytes:
    """An ``attr`` map entry (``OpDef`` field 10) of ``key`` and ``attr_def``."""
    return _field(_OP_ATTR, _text(_ENTRY_KEY, key) + _field(_ENTRY_VALUE, attr_def.SerializeToString(deterministic=True)))


def _key_order(key: str) -> tuple[int, ...]:
    """Where protobuf writes the entry of ``key`` among a map's entries: by the key's UTF-8 bytes, except
    that a key goes after the longer keys it begins (``Tshape`` before ``T``); the bytes then one past any
    byte give that order."""
    return (*key.encode("utf-8"), 256)


class _Encodings:
    """The encodings ops are written with, kept for one write: ``attr`` map entries by name and value (with
    the value's data left out, for a profile's weights shared with the main graph), the reserved string
    attributes, and descriptors by type.

    NOTE: a value is serialized by a stateless serializer (:mod:`.attr_serializers`), so the entry of a name
    and a value object already written is the same bytes (a deferred tensor's too: the entry holds the same
    marker, which stands for the same array). The value is kept with its entry, so an id is never taken for
    another object's. Types are immutable and interned."""

    __slots__ = (
        "ctx", "by_value", "_by_equal", "_equal_types", "_tensors", "_shared", "_strings", "_descs", "fields", "_orders",
    )  # fmt: skip

    def __init__(self, ctx: SerdeContext) -> None:
        self.ctx = ctx
        # Entries by name and value object (read directly by the op writer, the common case).
        self.by_value: dict[tuple[str, int], tuple[AttrValue, bytes]] = {}
        # Entries of plain values (ints, strings, dtypes and their lists) by name and value: many ops share them.
        self._by_equal: dict[tuple[str, AttrType, object], bytes] = {}
        registry = ctx.registry
        self._equal_types = frozenset(
            t for t in _WRITTEN_BY_EQUALITY if t in registry and registry.serializer(t) is _BUILTIN[t]
        )
        self._tensors: dict[tuple[str, int], pb.AttrDef] = {}  # the messages of tensor entries, to share
        self._shared: dict[tuple[str, int], tuple[AttrValue, bytes]] = {}
        self._strings: dict[tuple[str, str], bytes] = {}
        self._descs: dict[Type, bytes] = {}
        self.fields: dict[tuple[bytes, Type | None], bytes] = {}
        self._orders: dict[tuple[str, ...], tuple[int, ...]] = {}

    def sort(self, entries: list[tuple[str, bytes]]) -> list[bytes]:
        """An op's ``(name, entry)`` pairs' entries in the order protobuf writes a map's entries; the order
        of a sequence of names is kept (ops of a kind have the same attributes in the same order)."""
        names = tuple(name for name, _ in entries)
        order = self._orders.get(names)
        if order is None:
            order = self._orders[names] = tuple(sorted(range(len(names)), key=lambda i: _key_order(names[i])))
        return [entries[i][1] for i in order]

    def _write(self, key: str, value: AttrValue, where: str, node: Node) -> pb.AttrDef:
        attr_def = pb.AttrDef()
        self.ctx.at(f"{_op_where(where, node)} attribute {key!r}").write_attr(value, attr_def)
        return attr_def

    def entry(self, key: str, value: AttrValue, where: str, node: Node) -> bytes:
        """The map entry of attribute ``key`` = ``value`` of ``node`` (``where``: its graph, for errors)."""
        found = self.by_value.get((key, id(value)))
        if found is not None and found[0] is value:
            return found[1]
        plain = (key, value.type_id, value.value) if value.type_id in self._equal_types else None
        if plain is not None:
            try:
                hit = self._by_equal.get(plain)
            except TypeError:  # an unhashable payload
                plain, hit = None, None
            if hit is not None:
                return hit
        attr_def = self._write(key, value, where, node)
        data = _entry(key, attr_def)
        self.by_value[(key, id(value))] = (value, data)
        if plain is not None:
            self._by_equal[plain] = data
        if attr_def.HasField("t"):
            self._tensors[(key, id(value))] = attr_def
        return data

    def shared_entry(self, key: str, value: AttrValue, where: str, node: Node) -> bytes:
        """The map entry of a tensor attribute with its data left out (see :mod:`.shared_weights`): the main
        graph's entry of the same value, its data emptied."""
        found = self._shared.get((key, id(value)))
        if found is not None and found[0] is value:
            return found[1]
        main = self.by_value.get((key, id(value)))
        attr_def = self._tensors.pop((key, id(value)), None) if main is not None and main[0] is value else None
        if attr_def is None:
            attr_def = self._write(key, value, where, node)
        attr_def.t.data = b""
        data = _entry(key, attr_def)
        self._shared[(key, id(value))] = (value, data)
        return data

    def string(self, key: str, text: str) -> bytes:
        """The map entry of a reserved string attribute (``_dialect``, ``_op_type``, ``_weight_from``)."""
        data = self._strings.get((key, text))
        if data is None:
            attr_def = pb.AttrDef()
            attr_def.s = text.encode("utf-8", "surrogateescape")
            data = self._strings[(key, text)] = _entry(key, attr_def)
        return data

    def desc(self, t: Type | None, where: Callable[[], str]) -> bytes:
        """The serialized descriptor of a value of type ``t`` (``where()`` names the value in errors)."""
        if t is None:
            return b""
        data = self._descs.get(t)
        if data is None:
            if isinstance(t, TensorType):
                data = self._descs[t] = tensor_desc_bytes(t)
            else:
                desc = pb.TensorDescriptor()
                value_type_to_desc(t, desc, where())
                data = desc.SerializeToString(deterministic=True)
        return data

    def desc_field(self, tag: bytes, t: Type | None, where: Callable[[], str]) -> bytes:
        """A whole ``input_desc`` / ``output_desc`` field (``tag``) of a value of type ``t``; kept by type
        (:attr:`fields`) for a tensor type or None, which most values have."""
        desc = self.desc(t, where)
        data = tag + _length(len(desc)) + desc
        if t is None or isinstance(t, TensorType):
            self.fields[tag, t] = data
        return data


class _BodySink:
    """Where bodies go: the graph names taken, and each body's bytes in the order the bodies were met."""

    __slots__ = ("taken", "graphs")

    def __init__(self, taken: set[str]) -> None:
        self.taken = taken
        self.graphs: list[bytes] = []

    def add(self, body: Graph) -> tuple[str, int]:
        """A free name for ``body`` and the index of its place."""
        name, n = body.name, 1
        while name in self.taken:
            name, n = f"{body.name}_{n}", n + 1
        self.taken.add(name)
        self.graphs.append(b"")
        return name, len(self.graphs) - 1


class _GraphWriter:
    """What the ops of one write share: the encodings, the body sink, and for a top-level graph after the
    first, the constants whose data the main graph holds and the extra output descriptor fields."""

    __slots__ = ("ctx", "encodings", "sink")

    def __init__(self, ctx: SerdeContext, sink: _BodySink) -> None:
        self.ctx = ctx
        self.encodings = _Encodings(ctx)
        self.sink = sink

    def graph(
        self,
        graph: Graph,
        name: str,
        *,
        shared: tuple[set[str], str] | None = None,
        outputs: OutputFields | None = None,
        extra_attrs: Callable[[], Mapping[str, pb.AttrDef]] | None = None,
    ) -> bytes:
        """The serialized ``GraphDef`` of ``graph`` named ``name``. ``shared``: the names of its constants
        equal to the main graph's and the main graph's name; ``extra_attrs()``: reserved graph attributes
        (asked for once the ops are written)."""
        where = f"graph {graph.name!r}"
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
            data = self.op(node, ge_type, index, written, where, shared, outputs)
            ops.append(_GRAPH_OP + _length(len(data)) + data)
            written[node.name] = node
        parts = [_text(_GRAPH_NAME, name)] if name else []
        for i, value in enumerate(graph.inputs):
            parts.append(_text(_GRAPH_INPUT, _ref(value, written, f"{where} input {i}")))
        for i, value in enumerate(graph.outputs):
            parts.append(_text(_GRAPH_OUTPUT, _ref(value, written, f"{where} output {i}")))
        parts.extend(ops)
        attrs = pb.GraphDef()
        if name != graph.name:
            attrs.attr[GRAPH_NAME_ATTR].s = graph.name.encode("utf-8", "surrogateescape")
        for key, attr_def in (extra_attrs() if extra_attrs is not None else {}).items():
            attrs.attr[key].CopyFrom(attr_def)
        for key, attr_value in graph.attrs.items():
            if key in RESERVED_GRAPH_ATTRS:
                raise SerdeError(f"{where}: attribute name {key!r} is reserved by the GE serializer; rename the attribute")
            self.ctx.at(f"{where} attribute {key!r}").write_attr(attr_value, attrs.attr[key])
        parts.append(attrs.SerializeToString(deterministic=True))  # the attr map, field 11: the last field
        return b"".join(parts)

    def op(
        self,
        node: Node,
        ge_type: str,
        index: int,
        written: Mapping[str, Node],
        where: str,
        shared: tuple[set[str], str] | None,
        outputs: OutputFields | None,
    ) -> bytes:
        """The serialized ``OpDef`` of ``node`` (``where``: its graph, for errors)."""
        encodings = self.encodings
        fields = encodings.fields
        op_type = node.op_type
        if "." in op_type or not op_type:
            raise SerdeError(f"{_op_where(where, node)}: op type {op_type!r} must be a non-empty name without '.'")
        name = node.name.encode("utf-8")
        type_name = ge_type.encode("utf-8")
        parts = [_OP_NAME, _length(len(name)), name] if name else []  # proto3 leaves an empty string out
        parts += (_OP_TYPE, _length(len(type_name)), type_name)
        entries: list[tuple[str, bytes]] = []
        if node.dialect != DEFAULT_DIALECT:
            entries.append((DIALECT_ATTR, encodings.string(DIALECT_ATTR, node.dialect)))
        if ge_type != op_type:
            entries.append((OP_TYPE_ATTR, encodings.string(OP_TYPE_ATTR, op_type)))
        back_edges: list[int] = []
        descs: list[bytes] = []
        for slot, value in enumerate(node.inputs):
            if value is None:
                parts.append(_OP_INPUT + b"\x00")
                descs.append(_INPUT_DESC + b"\x00")
                continue
            producer = value.producer
            if written.get(producer.name) is not producer:
                if value.meta.get("back_edge"):
                    back_edges.append(slot)
                else:
                    _ref(value, written, f"{_op_where(where, node)} input {slot}")
            ref = f"{producer.name}:{value.index}".encode("utf-8")
            parts.append(_OP_INPUT + _length(len(ref)) + ref)
            field = fields.get((_INPUT_DESC, value.type))
            if field is None:
                field = encodings.desc_field(
                    _INPUT_DESC, value.type, lambda slot=slot: f"{_op_where(where, node)} input {slot}"  # type: ignore[misc]
                )
            descs.append(field)
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
            entries.append((BACK_EDGES_ATTR, _entry(BACK_EDGES_ATTR, attr_def)))
        for value in node.outputs:
            if outputs is None:
                field = fields.get((_OUTPUT_DESC, value.type))
                if field is None:
                    field = encodings.desc_field(
                        _OUTPUT_DESC, value.type, lambda value=value: f"{_op_where(where, node)} output {value.index}"  # type: ignore[misc]
                    )
                descs.append(field)
                continue
            desc = encodings.desc(value.type, lambda value=value: f"{_op_where(where, node)} output {value.index}")  # type: ignore[misc]
            desc += outputs(node, value)
            descs.append(_OUTPUT_DESC + _length(len(desc)) + desc)
        subgraph_names: list[bytes] = []
        if node.subgraphs:
            keys = pb.AttrDef()
            keys.list.val_type = _VT.VT_LIST_STRING
            for key, body in node.subgraphs.items():
                body_name, place = self.sink.add(body)
                subgraph_names.append(_text(_OP_SUBGRAPH_NAME, body_name))
                keys.list.s.append(key.encode("utf-8", "surrogateescape"))
                self.sink.graphs[place] = self.graph(body, body_name)
            entries.append((SUBGRAPH_KEYS_ATTR, _entry(SUBGRAPH_KEYS_ATTR, keys)))
        share = shared is not None and node.name in shared[0] and ge_type == "Const" and "value" in node.attrs
        by_value = encodings.by_value
        for key, attr_value in node.attrs.items():
            if key in RESERVED_OP_ATTRS:
                raise SerdeError(
                    f"{_op_where(where, node)}: attribute name {key!r} is reserved by the GE serializer; "
                    "rename the attribute"
                )
            if share and key == "value":
                entries.append((key, encodings.shared_entry(key, attr_value, where, node)))
                continue
            found = by_value.get((key, id(attr_value)))
            if found is not None and found[0] is attr_value:
                entries.append((key, found[1]))
            else:
                entries.append((key, encodings.entry(key, attr_value, where, node)))
        if share:
            entries.append((SHARED_WEIGHT_ATTR, encodings.string(SHARED_WEIGHT_ATTR, shared[1])))  # type: ignore[index]
        if len(entries) > 1:
            parts.extend(encodings.sort(entries))
        elif entries:
            parts.append(entries[0][1])
        if index:
            parts.append(_OP_ID + _length(index))
        parts.extend(descs)
        parts.extend(subgraph_names)
        return b"".join(parts)


def graph_bytes(graph: Graph, ctx: SerdeContext) -> bytes:
    """The serialized standalone ``GraphDef`` of ``graph``: its bodies in its reserved attribute ``_subgraphs``."""
    sink = _BodySink({graph.name})
    writer = _GraphWriter(ctx, sink)
    if not any(node.subgraphs for node in graph.nodes):
        return writer.graph(graph, graph.name)

    def bodies() -> dict[str, pb.AttrDef]:
        attr_def = pb.AttrDef()
        attr_def.list.val_type = _VT.VT_LIST_GRAPH
        for body in sink.graphs:
            attr_def.list.g.add().MergeFromString(body)
        return {SUBGRAPHS_ATTR: attr_def}

    return writer.graph(graph, graph.name, extra_attrs=bodies)


def model_bytes(
    graphs: Sequence[Graph],
    ctx: SerdeContext,
    header: pb.ModelDef,
    attrs: Callable[[], pb.ModelDef],
    outputs: Sequence[OutputFields | None] = (),
) -> bytes:
    """The serialized ``ModelDef`` of ``graphs`` (the main graph first), with the fields of ``header`` (name,
    versions) and the attributes of ``attrs()`` (asked for once the graphs are written); ``outputs[i]``: the
    extra output descriptor fields of graph i."""
    shared = shared_constants(graphs)
    check_model_size(graphs, shared)
    sink = _BodySink({g.name for g in graphs})
    writer = _GraphWriter(ctx, sink)
    main_name = graphs[0].name
    parts = [header.SerializeToString(deterministic=True)]
    for i, graph in enumerate(graphs):
        data = writer.graph(
            graph, graph.name, shared=(shared[i - 1], main_name) if i else None,
            outputs=outputs[i] if i < len(outputs) else None,
        )
        parts.append(_MODEL_GRAPH + _length(len(data)) + data)
    for data in sink.graphs:
        parts.append(_MODEL_GRAPH + _length(len(data)) + data)
    parts.append(attrs().SerializeToString(deterministic=True))  # the attr map, field 11: the last field
    return b"".join(parts)


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


def _op_where(where_graph: str, node: Node) -> str:
    return f"{where_graph} op {node.name!r} ({node.op})"
