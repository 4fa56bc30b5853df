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
:mod:`.ge_write`, which puts the wire bytes together op by op, exactly as protobuf serializes the message
(``deterministic=True``: maps sorted): same IR, same bytes. :func:`to_model_bytes`
gives the bytes as pieces that stream each large tensor from its array to the file
(:mod:`scopefusion.serde.weight_stream`).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any, Mapping, Sequence

from google.protobuf import text_format

from ..errors import SerdeError
from ..ir.attrs import AttrValue
from ..ir.graph import Graph
from . import ge_ir_pb2 as pb
from .attr_serializers import AttrSerializerRegistry, SerdeContext, default_serializer_registry
from .ge_write import (  # noqa: F401 - the layout's names, read by ge_read and others from here
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
    OutputFields,
    graph_bytes,
    model_bytes,
)
from .weight_stream import ModelBytes, stream_bytes

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
    return pb.ModelDef.FromString(
        model_wire_bytes(graphs, name=name, attrs=attrs, version=version, custom_version=custom_version, registry=registry)
    )


def model_wire_bytes(
    graphs: Graph | Sequence[Graph],
    *,
    name: str | None = None,
    attrs: Mapping[str, Any] | None = None,
    version: int = 0,
    custom_version: str = "",
    registry: AttrSerializerRegistry | None = None,
    outputs: Sequence[OutputFields | None] = (),
) -> bytes:
    """The serialized ``ModelDef`` of ``graphs`` (:mod:`.ge_write`), as :func:`model_to_proto` would serialize;
    ``outputs[i]``: what top-level graph ``i`` adds to its ops' output descriptors. A large tensor's data is a
    marker while writers defer arrays (:mod:`.weight_stream`)."""
    graphs = [graphs] if isinstance(graphs, Graph) else list(graphs)
    if not graphs:
        raise SerdeError("a model needs at least one graph (the main graph); pass the graph to write")
    ctx = SerdeContext(registry=registry if registry is not None else default_serializer_registry(), where="model")
    names = [g.name for g in graphs]
    for i, n in enumerate(names):
        if n in names[:i]:
            raise SerdeError(f"two top-level graphs of the model are named {n!r}; give each graph its own name")
    header = pb.ModelDef()
    try:
        header.name = graphs[0].name if name is None else name
        header.version = version
        header.custom_version = custom_version
    except (TypeError, ValueError) as e:
        raise SerdeError(f"invalid model name or version ({e}); the version is a uint32") from None

    def model_attrs() -> pb.ModelDef:
        tail = pb.ModelDef()
        for key, value in sorted((attrs or {}).items()):
            where = f"model attribute {key!r}"
            try:
                value = AttrValue.of(value)
            except (TypeError, ValueError) as e:
                raise SerdeError(f"{where}: {e}") from None
            ctx.at(where).write_attr(value, tail.attr[key])
        return tail

    return model_bytes(graphs, ctx, header, model_attrs, outputs)


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
    return checked_size(stream_bytes(lambda: model_wire_bytes(graphs, **model), pb.ModelDef.DESCRIPTOR))


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
    graph_def.MergeFromString(graph_bytes(graph, ctx))


# The reading side (:mod:`.ge_read`), imported on first use: writing a model does not load it.
_READING = frozenset(("ModelContents", "from_bytes", "from_text", "graph_from_proto", "model_from_bytes",
                      "model_from_proto", "model_from_text", "read_standalone_graph"))


def __getattr__(name: str) -> Any:
    if name not in _READING:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__package__}.ge_read"), name)
    globals()[name] = value
    return value
