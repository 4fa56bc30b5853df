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


# The reading side (:mod:`.ge_read`), imported on first use: writing a model does not load it.
_READING = frozenset(("ModelContents", "from_bytes", "from_text", "graph_from_proto", "model_from_bytes",
                      "model_from_proto", "model_from_text", "read_standalone_graph"))


def __getattr__(name: str) -> Any:
    if name not in _READING:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__package__}.ge_read"), name)
    globals()[name] = value
    return value
