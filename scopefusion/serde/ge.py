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

Writing is deterministic: same IR, same bytes (maps sorted, ``deterministic=True``). :func:`to_model_bytes`
gives the bytes as pieces that stream each large tensor from its array to the file
(:mod:`scopefusion.serde.weight_stream`).
"""

from __future__ import annotations

import heapq
import re
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Mapping, Sequence

from google.protobuf import text_format
from google.protobuf.message import DecodeError

from ..errors import ScopeFusionError, SerdeError
from ..ir.attrs import AttrValue
from ..ir.core_ops import core_ops
from ..ir.graph import Graph, Node, Value
from ..ir.opdef import OpRegistry
from ..ir.types import IRContext, TensorType, Type
from ..parser.wire import encode_varint
from . import ge_ir_pb2 as pb
from .attr_serializers import AttrSerializerRegistry, SerdeContext, default_serializer_registry
from .shared_weights import SHARED_WEIGHT_ATTR, check_model_size, restore_shared_weights, share_weights
from .tensors import tensor_desc_bytes, value_type_from_desc, value_type_to_desc
from .weight_stream import ModelBytes, stream_message

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
_INDEX = re.compile(r"-?[0-9]+")


@dataclass(frozen=True)
class ModelContents:
    """What a ``ModelDef`` holds: the top-level graphs (``graphs[0]`` the main one) and model facts."""

    graphs: tuple[Graph, ...]
    name: str = ""
    attrs: Mapping[str, AttrValue] = field(default_factory=dict)
    version: int = 0
    custom_version: str = ""

    @property
    def main(self) -> Graph:
        return self.graphs[0]


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
    for graph, graph_def in zip(graphs, defs):
        _write_graph(graph, graph_def, graph.name, sink, ctx)
    share_weights(graphs, defs)
    for key, value in sorted((attrs or {}).items()):
        where = f"model attribute {key!r}"
        try:
            value = AttrValue.of(value)
        except (TypeError, ValueError) as e:
            raise SerdeError(f"{where}: {e}") from None
        ctx.at(where).write_attr(value, model.attr[key])
    return model


def model_from_proto(
    model: pb.ModelDef,
    *,
    context: IRContext | None = None,
    registry: AttrSerializerRegistry | None = None,
    ops: OpRegistry | None = None,
) -> ModelContents:
    """The graphs and facts of a ``ModelDef``; types are made in ``context`` (a fresh one by default)."""
    ctx = _reading_context(context, registry, ops)
    if not len(model.graph):
        raise SerdeError("the model has no graph; expected the main graph at ModelDef.graph[0]")
    names = [g.name for g in model.graph]
    seen: set[str] = set()
    for n in names:
        if n in seen:
            raise SerdeError(f"the model has two graphs named {n!r}; subgraph references would be ambiguous")
        seen.add(n)
    referenced = {s for g in model.graph for op in g.op for s in op.subgraph_name}
    if names[0] in referenced:
        raise SerdeError(f"the main graph {names[0]!r} is named as a subgraph of an op; graph[0] must be the main graph")
    restore_shared_weights(model)
    top = [g for i, g in enumerate(model.graph) if i == 0 or g.name not in referenced]
    bodies = _BodySource({g.name: g for g in model.graph if g.name in referenced}, "the model")
    graphs = tuple(_read_graph(g, bodies, ctx) for g in top)
    bodies.check_all_used()
    attrs = {k: ctx.at(f"model attribute {k!r}").read_attr(v) for k, v in sorted(model.attr.items())}
    return ModelContents(graphs, model.name, attrs, model.version, model.custom_version)


def graph_to_proto(graph: Graph, *, registry: AttrSerializerRegistry | None = None) -> pb.GraphDef:
    """A standalone ``GraphDef`` of ``graph``, its bodies in the reserved attribute ``_subgraphs``."""
    graph_def = pb.GraphDef()
    write_standalone_graph(graph, graph_def, SerdeContext(registry=registry, where="graph"))
    return graph_def


def graph_from_proto(
    graph_def: pb.GraphDef,
    *,
    context: IRContext | None = None,
    registry: AttrSerializerRegistry | None = None,
    ops: OpRegistry | None = None,
) -> Graph:
    """The IR graph of a standalone ``GraphDef`` (as :func:`graph_to_proto` writes it)."""
    return read_standalone_graph(graph_def, _reading_context(context, registry, ops))


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


def model_from_bytes(
    data: bytes,
    context: IRContext | None = None,
    registry: AttrSerializerRegistry | None = None,
    *,
    ops: OpRegistry | None = None,
) -> ModelContents:
    """Every top-level graph and the facts of a binary ``ModelDef``."""
    if not isinstance(data, (bytes, bytearray, memoryview)):
        raise TypeError(f"model_from_bytes needs bytes, found {type(data).__name__}")
    model = pb.ModelDef()
    try:
        model.ParseFromString(bytes(data))
    except (DecodeError, RuntimeError, ValueError) as e:
        raise SerdeError(
            f"cannot decode {len(data)} bytes as a GE ModelDef ({e}); the data is truncated or not a GE model"
        ) from None
    return model_from_proto(model, context=context, registry=registry, ops=ops)


def from_bytes(
    data: bytes,
    context: IRContext | None = None,
    registry: AttrSerializerRegistry | None = None,
    *,
    ops: OpRegistry | None = None,
) -> Graph:
    """The main graph of a binary ``ModelDef`` (:func:`model_from_bytes` gives every graph)."""
    return model_from_bytes(data, context, registry, ops=ops).main


def to_text(graphs: Graph | Sequence[Graph], **model: Any) -> str:
    """The protobuf text form of the ``ModelDef`` of ``graphs``; keywords as :func:`model_to_proto`."""
    return text_format.MessageToString(model_to_proto(graphs, **model))


def model_from_text(
    text: str,
    context: IRContext | None = None,
    registry: AttrSerializerRegistry | None = None,
    *,
    ops: OpRegistry | None = None,
) -> ModelContents:
    """Every top-level graph and the facts of a text-form ``ModelDef``."""
    model = pb.ModelDef()
    try:
        text_format.Parse(text, model)
    except (text_format.ParseError, UnicodeError, ValueError) as e:
        raise SerdeError(f"cannot parse the text as a GE ModelDef ({e}); fix the text at that position") from None
    return model_from_proto(model, context=context, registry=registry, ops=ops)


def from_text(
    text: str,
    context: IRContext | None = None,
    registry: AttrSerializerRegistry | None = None,
    *,
    ops: OpRegistry | None = None,
) -> Graph:
    """The main graph of a text-form ``ModelDef``."""
    return model_from_text(text, context, registry, ops=ops).main


def write_standalone_graph(graph: Graph, graph_def: pb.GraphDef, ctx: SerdeContext) -> None:
    """Writes ``graph`` into the empty ``graph_def``, its bodies into the reserved ``_subgraphs`` list."""
    graph_def.SetInParent()
    sink = None
    if any(node.subgraphs for node in graph.nodes):
        bodies = graph_def.attr[SUBGRAPHS_ATTR].list
        bodies.val_type = _VT.VT_LIST_GRAPH
        sink = _BodySink(bodies.g, {graph.name})
    _write_graph(graph, graph_def, graph.name, sink, ctx)


def read_standalone_graph(graph_def: pb.GraphDef, ctx: SerdeContext) -> Graph:
    """The IR graph of a standalone ``GraphDef``, its bodies read from ``_subgraphs``."""
    where = f"graph {graph_def.name!r}"
    source: dict[str, pb.GraphDef] = {}
    if SUBGRAPHS_ATTR in graph_def.attr:
        attr = graph_def.attr[SUBGRAPHS_ATTR]
        if attr.WhichOneof("value") != "list" or attr.list.val_type not in (_VT.VT_LIST_GRAPH, _VT.VT_LIST_NONE):
            raise SerdeError(f"{where}: reserved attribute {SUBGRAPHS_ATTR!r} must be a list of graphs")
        for body in attr.list.g:
            if body.name in source or body.name == graph_def.name:
                raise SerdeError(
                    f"{where}: two of its graphs are named {body.name!r}; subgraph references would be ambiguous"
                )
            source[body.name] = body
    bodies = _BodySource(source, where)
    graph = _read_graph(graph_def, bodies, ctx)
    bodies.check_all_used()
    return graph


def _reading_context(
    context: IRContext | None, registry: AttrSerializerRegistry | None, ops: OpRegistry | None
) -> SerdeContext:
    return SerdeContext(
        context if context is not None else IRContext(),
        registry if registry is not None else default_serializer_registry(),
        ops if ops is not None else OpRegistry(core_ops()),
        where="model",
    )


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


def _write_graph(graph: Graph, graph_def: pb.GraphDef, name: str, sink: _BodySink | None, ctx: SerdeContext) -> None:
    where = f"graph {graph.name!r}"
    graph_def.name = name
    if name != graph.name:
        graph_def.attr[GRAPH_NAME_ATTR].s = graph.name.encode("utf-8", "surrogateescape")
    written: dict[str, Node] = {}
    ge_types: dict[str, str] = {}  # op -> the type written (one definition lookup per op)
    add_op = graph_def.op.add
    for index, node in enumerate(graph.nodes):
        if node.name in written:
            raise SerdeError(f"{where}: two ops are named {node.name!r}; node names must be unique in a graph")
        op = node.op
        ge_type = ge_types.get(op)
        if ge_type is None:
            ge_type = ge_types[op] = _ge_type(node, op)
        _write_op(node, ge_type, index, add_op(), written, sink, ctx, f"{where} op {node.name!r} ({op})")
        written[node.name] = node
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


# OpDef fields input_desc (33) and output_desc (34), as (tag, empty field) in the wire form.
_INPUT_DESC = (b"\x8a\x02", b"\x8a\x02\x00")
_OUTPUT_DESC = (b"\x92\x02", b"\x92\x02\x00")


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
    return field[0] + encode_varint(len(data)) + data


def _write_op(
    node: Node,
    ge_type: str,
    index: int,
    op_def: pb.OpDef,
    written: Mapping[str, Node],
    sink: _BodySink | None,
    ctx: SerdeContext,
    where: str,
) -> None:
    # NOTE: the descriptors of all inputs and outputs are merged into the message as one serialized string,
    # each from its type's cached bytes (tensors.tensor_desc_bytes): a model writes several per op.
    op_type = node.op_type
    if "." in op_type or not op_type:
        raise SerdeError(f"{where}: op type {op_type!r} must be a non-empty name without '.'")
    op_def.name = node.name
    op_def.type = ge_type
    op_def.id = index
    if node.dialect != DEFAULT_DIALECT:
        op_def.attr[DIALECT_ATTR].s = node.dialect.encode("utf-8", "surrogateescape")
    if ge_type != op_type:
        op_def.attr[OP_TYPE_ATTR].s = op_type.encode("utf-8", "surrogateescape")
    refs: list[str] = []
    descs: list[bytes] = []
    for slot, value in enumerate(node.inputs):
        if value is None:
            refs.append("")
            descs.append(_INPUT_DESC[1])
            continue
        producer = value.producer
        if written.get(producer.name) is not producer and value.meta.get("back_edge"):
            back = op_def.attr[BACK_EDGES_ATTR].list
            back.val_type = _VT.VT_LIST_INT
            back.i.append(slot)
            refs.append(value.ref)
        else:
            refs.append(_ref(value, written, f"{where} input {slot}"))
        descs.append(_desc_field(_INPUT_DESC, value.type, lambda slot=slot: f"{where} input {slot}"))  # type: ignore[misc]
    for ctrl in node.control_inputs:
        if written.get(ctrl.name) is not ctrl:
            raise SerdeError(
                f"{where}: control input {ctrl.name!r} is not an earlier op of the graph; run graph.verify()"
            )
        refs.append(f"{ctrl.name}:{CONTROL_INDEX}")
    op_def.input.extend(refs)
    for value in node.outputs:
        descs.append(_desc_field(_OUTPUT_DESC, value.type, lambda value=value: f"{where} output {value.index}"))  # type: ignore[misc]
    op_def.MergeFromString(b"".join(descs))
    if node.subgraphs:
        if sink is None:  # pragma: no cover - write_standalone_graph and model_to_proto always give one
            raise SerdeError(f"{where}: has bodies but no place to write them")
        keys = op_def.attr[SUBGRAPH_KEYS_ATTR].list
        keys.val_type = _VT.VT_LIST_STRING
        for key, body in node.subgraphs.items():
            body_name, body_def = sink.add(body)
            op_def.subgraph_name.append(body_name)
            keys.s.append(key.encode("utf-8", "surrogateescape"))
            _write_graph(body, body_def, body_name, sink, ctx)
    for key, attr_value in node.attrs.items():
        if key in RESERVED_OP_ATTRS:
            raise SerdeError(f"{where}: attribute name {key!r} is reserved by the GE serializer; rename the attribute")
        ctx.at(f"{where} attribute {key!r}").write_attr(attr_value, op_def.attr[key])


# ============================================================================= reading
class _BodySource:
    """The GraphDefs that ops may name as bodies; each is taken at most once."""

    __slots__ = ("defs", "used", "owner")

    def __init__(self, defs: dict[str, pb.GraphDef], owner: str) -> None:
        self.defs = defs
        self.used: set[str] = set()
        self.owner = owner

    def take(self, name: str, where: str) -> pb.GraphDef:
        found = self.defs.get(name)
        if found is None:
            raise SerdeError(f"{where}: names subgraph {name!r}, but {self.owner} has no graph of that name")
        if name in self.used:
            raise SerdeError(f"{where}: names subgraph {name!r}, which another op (or an enclosing graph) already owns")
        self.used.add(name)
        return found

    def check_all_used(self) -> None:
        left = [n for n in self.defs if n not in self.used]
        if left:
            raise SerdeError(
                f"{self.owner} has subgraphs {sorted(left)} that no reachable op owns; their references form a cycle"
            )


class _OpRecord:
    """One ``OpDef`` as read, before its inputs are resolved (a plain class: a dataclass costs a third of a
    millisecond at import, and writing GE imports this module too)."""

    __slots__ = ("name", "op", "inputs", "controls", "types", "bodies", "attrs", "where", "back_edges")

    def __init__(self, name: str, op: str, inputs: list[tuple[str, int] | None], controls: list[str],
                 types: list[Any], bodies: list[tuple[str, str]], attrs: dict[str, AttrValue], where: str,
                 back_edges: tuple[int, ...] = ()) -> None:
        self.name, self.op, self.inputs, self.controls, self.types = name, op, inputs, controls, types
        self.bodies = bodies  # (key, GraphDef name)
        self.attrs, self.where, self.back_edges = attrs, where, back_edges


def _read_graph(graph_def: pb.GraphDef, bodies: _BodySource, ctx: SerdeContext) -> Graph:
    name = graph_def.name
    if GRAPH_NAME_ATTR in graph_def.attr:
        name = _reserved_str(graph_def.attr[GRAPH_NAME_ATTR], f"graph {graph_def.name!r} attribute {GRAPH_NAME_ATTR!r}")
    where = f"graph {name!r}"
    records = [_parse_op(op_def, where, ctx) for op_def in graph_def.op]
    graph = Graph(name, ctx.ir, ctx.ops)
    outputs: dict[str, list[Value]] = {}
    back_edges: list[tuple[_OpRecord, int]] = []
    for record in _schedule(records, where):
        inputs = [
            None if ref is None or slot in record.back_edges else _value(outputs, ref, f"{record.where} input {slot}")
            for slot, ref in enumerate(record.inputs)
        ]
        back_edges.extend((record, slot) for slot in record.back_edges)
        subgraphs = {}
        for key, body_name in record.bodies:
            body_def = bodies.take(body_name, record.where)
            subgraphs[key] = _read_graph(body_def, bodies, ctx)
        try:
            node = graph.add_node(
                record.op,
                inputs,
                name=record.name,
                attrs=record.attrs,
                output_types=record.types,
                control_inputs=[graph.node(c) for c in record.controls],
                subgraphs=subgraphs,
                allow_unknown=True,
            )
        except (ScopeFusionError, TypeError, ValueError, KeyError) as e:
            raise SerdeError(f"{record.where}: cannot rebuild the op in the IR ({e})") from None
        outputs[node.name] = node.outputs
    for record, slot in back_edges:
        value = _value(outputs, record.inputs[slot], f"{record.where} input {slot}")  # type: ignore[arg-type]
        value.meta["back_edge"] = True
        graph.node(record.name).replace_input_with(slot, value)
    graph.inputs = [_graph_value(outputs, r, f"{where} input {i}") for i, r in enumerate(graph_def.input)]
    graph.outputs = [_graph_value(outputs, r, f"{where} output {i}") for i, r in enumerate(graph_def.output)]
    for key, attr in sorted(graph_def.attr.items()):
        if key in RESERVED_GRAPH_ATTRS:
            continue
        attr_value = ctx.at(f"{where} attribute {key!r}").read_attr(attr)
        try:
            graph.attrs.set_attr(key, attr_value)
        except (TypeError, ValueError) as e:
            raise SerdeError(f"{where} attribute {key!r}: {e}") from None
    return graph


def _parse_op(op_def: pb.OpDef, graph_where: str, ctx: SerdeContext) -> _OpRecord:
    where = f"{graph_where} op {op_def.name!r} ({op_def.type})"
    if not op_def.name:
        raise SerdeError(f"{graph_where}: an op of type {op_def.type!r} has no name; every op needs a unique name")
    if not op_def.type or "." in op_def.type:
        raise SerdeError(f"{where}: op type {op_def.type!r} must be a non-empty name without '.'")
    dialect = DEFAULT_DIALECT
    if DIALECT_ATTR in op_def.attr:
        dialect = _reserved_str(op_def.attr[DIALECT_ATTR], f"{where} attribute {DIALECT_ATTR!r}")
    inputs: list[tuple[str, int] | None] = []
    controls: list[str] = []
    for i, text in enumerate(op_def.input):
        ref = _parse_ref(text, f"{where} input {i}") if text else None
        if ref is not None and ref[1] == CONTROL_INDEX:
            controls.append(ref[0])
        else:
            inputs.append(ref)
    types = [value_type_from_desc(d, ctx.ir, f"{where} output {i}") for i, d in enumerate(op_def.output_desc)]
    keys = list(op_def.subgraph_name)
    if SUBGRAPH_KEYS_ATTR in op_def.attr:
        attr = op_def.attr[SUBGRAPH_KEYS_ATTR]
        if attr.WhichOneof("value") != "list" or attr.list.val_type not in (_VT.VT_LIST_STRING, _VT.VT_LIST_NONE):
            raise SerdeError(f"{where}: reserved attribute {SUBGRAPH_KEYS_ATTR!r} must be a list of strings")
        keys = [k.decode("utf-8", "surrogateescape") for k in attr.list.s]
        if len(keys) != len(op_def.subgraph_name) or len(set(keys)) != len(keys):
            raise SerdeError(
                f"{where}: {len(keys)} body keys for {len(op_def.subgraph_name)} subgraph names; "
                "expected one distinct key per subgraph"
            )
    elif len(set(keys)) != len(keys):
        raise SerdeError(f"{where}: names one subgraph twice; each subgraph belongs to one op slot")
    attrs = {}
    for key, attr in sorted(op_def.attr.items()):
        if key not in RESERVED_OP_ATTRS:
            attrs[key] = ctx.at(f"{where} attribute {key!r}").read_attr(attr)
    op_type = op_def.type
    if OP_TYPE_ATTR in op_def.attr:
        op_type = _reserved_str(op_def.attr[OP_TYPE_ATTR], f"{where} attribute {OP_TYPE_ATTR!r}")
    back_edges: tuple[int, ...] = ()
    if BACK_EDGES_ATTR in op_def.attr:
        attr = op_def.attr[BACK_EDGES_ATTR]
        back_edges = tuple(int(i) for i in attr.list.i) if attr.WhichOneof("value") == "list" else ()
        if not back_edges or any(not 0 <= i < len(inputs) or inputs[i] is None for i in back_edges):
            raise SerdeError(f"{where}: reserved attribute {BACK_EDGES_ATTR!r} must list input slots that read an op")
    op = f"{dialect}.{op_type}" if dialect else op_type
    return _OpRecord(
        op_def.name, op, inputs, controls, types, list(zip(keys, op_def.subgraph_name)), attrs, where, back_edges
    )


def _reserved_str(attr: pb.AttrDef, where: str) -> str:
    if attr.WhichOneof("value") != "s":
        found = attr.WhichOneof("value")
        raise SerdeError(f"{where}: the reserved attribute must hold a string (case 's'), found case {found!r}")
    return attr.s.decode("utf-8", "surrogateescape")


def _parse_ref(text: str, where: str, data_only: bool = False) -> tuple[str, int]:
    """``"op:index"`` → ``(op, index)``; ``"op:-1"`` or ``"^op"`` → ``(op, -1)``; a bare ``"op"`` → ``(op, 0)``."""
    head, sep, tail = text.rpartition(":")
    if sep and _INDEX.fullmatch(tail):
        ref = (head, int(tail))
    elif text.startswith("^"):
        ref = (text[1:], CONTROL_INDEX)
    else:
        ref = (text, 0)
    if not ref[0] or ref[1] < CONTROL_INDEX or (data_only and ref[1] == CONTROL_INDEX):
        raise SerdeError(
            f"{where}: reference {text!r} is malformed; expected 'op:index' with index >= 0 (or -1 for control)"
        )
    return ref


def _graph_value(outputs: Mapping[str, list[Value]], text: str, where: str) -> Value:
    return _value(outputs, _parse_ref(text, where, data_only=True), where)


def _value(outputs: Mapping[str, list[Value]], ref: tuple[str, int], where: str) -> Value:
    name, index = ref
    values = outputs.get(name)
    if values is None:
        raise SerdeError(f"{where}: reads {name}:{index}, but the graph has no op named {name!r}")
    if index >= len(values):
        raise SerdeError(f"{where}: reads {name}:{index}, but op {name!r} has {len(values)} outputs")
    return values[index]


def _schedule(records: list[_OpRecord], where: str) -> Iterable[_OpRecord]:
    """The records in file order when that is topological, else in the stable topological order."""
    index: dict[str, int] = {}
    for i, record in enumerate(records):
        if record.name in index:
            raise SerdeError(f"{where}: two ops are named {record.name!r}; op names must be unique in a graph")
        index[record.name] = i
    deps: list[set[int]] = []
    in_order = True
    for i, record in enumerate(records):
        producers = set()
        for slot, ref in enumerate(record.inputs):
            if ref is not None and slot not in record.back_edges:
                producers.add(_producer_index(index, ref[0], f"{record.where} input {slot}"))
        for ctrl in record.controls:
            producers.add(_producer_index(index, ctrl, f"{record.where} control input"))
        in_order = in_order and all(p < i for p in producers)
        deps.append(producers)
    if in_order:
        return records
    users: list[list[int]] = [[] for _ in records]
    waiting = [len(d) for d in deps]
    for i, producers in enumerate(deps):
        for p in producers:
            users[p].append(i)
    ready = [i for i, n in enumerate(waiting) if n == 0]
    heapq.heapify(ready)
    order = []
    while ready:
        i = heapq.heappop(ready)
        order.append(records[i])
        for u in users[i]:
            waiting[u] -= 1
            if waiting[u] == 0:
                heapq.heappush(ready, u)
    if len(order) != len(records):
        stuck = sorted(records[i].name for i, n in enumerate(waiting) if n)[:5]
        raise SerdeError(f"{where}: its ops form a cycle (among {stuck}); a graph must be acyclic")
    return order


def _producer_index(index: Mapping[str, int], name: str, where: str) -> int:
    found = index.get(name)
    if found is None:
        raise SerdeError(f"{where}: reads op {name!r}, but the graph has no op of that name")
    return found
