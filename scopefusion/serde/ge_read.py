"""GE ``ModelDef`` / ``GraphDef`` to IR graphs: the reading side of :mod:`.ge` (the format is described there).

The ops of a file that are not in schedule order (GE does not promise it) are put into a stable topological
order; anything malformed is a :class:`~scopefusion.errors.SerdeError` naming the graph, the op and the field.
:mod:`.ge` gives these names too, importing this module on first use: writing a model does not load it.
"""

from __future__ import annotations

import heapq
import re
from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping

from google.protobuf import text_format
from google.protobuf.message import DecodeError

from ..errors import ScopeFusionError, SerdeError
from ..ir.attrs import AttrValue
from ..ir.core_ops import core_ops
from ..ir.graph import Graph, Value
from ..ir.opdef import OpRegistry
from ..ir.types import IRContext
from . import ge_ir_pb2 as pb
from .attr_serializers import AttrSerializerRegistry, SerdeContext, default_serializer_registry
from .ge import (
    _VT,
    BACK_EDGES_ATTR,
    CONTROL_INDEX,
    DEFAULT_DIALECT,
    DIALECT_ATTR,
    GRAPH_NAME_ATTR,
    OP_TYPE_ATTR,
    RESERVED_GRAPH_ATTRS,
    RESERVED_OP_ATTRS,
    SUBGRAPH_KEYS_ATTR,
    SUBGRAPHS_ATTR,
)
from .shared_weights import restore_shared_weights
from .tensors import value_type_from_desc

__all__ = [
    "ModelContents",
    "from_bytes",
    "from_text",
    "graph_from_proto",
    "model_from_bytes",
    "model_from_proto",
    "model_from_text",
    "read_standalone_graph",
]

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


def graph_from_proto(
    graph_def: pb.GraphDef,
    *,
    context: IRContext | None = None,
    registry: AttrSerializerRegistry | None = None,
    ops: OpRegistry | None = None,
) -> Graph:
    """The IR graph of a standalone ``GraphDef`` (as :func:`graph_to_proto` writes it)."""
    return read_standalone_graph(graph_def, _reading_context(context, registry, ops))


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
