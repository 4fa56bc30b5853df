"""Frozen (binary) and text GraphDefs into a :class:`SourceGraph`, without TensorFlow.

Binary GraphDefs are read from a buffer (an ``mmap`` of the file): :mod:`.wire` cuts every large
``tensor_content`` out before protobuf parses the rest, so constants are read-only views of the file and
parsing costs memory in proportion to the graph's structure, not its weights.

Graph inputs are the ``Placeholder`` nodes; graph outputs are the tensors named by ``outputs=`` or, by
default, every output of each node nothing consumes (constants and ``NoOp`` excepted, and the nodes inside a
TF1 loop's body or condition: they run once per iteration and TensorFlow cannot fetch them).
"""

from __future__ import annotations

import os
from typing import AbstractSet, Any, Iterable, Mapping, Sequence

from ..dtypes import DType
from ..errors import ModelLoadError, ParseError
from .graph_def_decoder import decode_graph_def
from .node_cuts import cut_node
from .source_graph import FRAMEWORK_TENSORFLOW, GraphInput, GraphOutput, SourceGraph, SourceNode
from .tf_attrs import ContentViews
from .tf_functions import FunctionLibrary
from .tf_node_decoder import decode_graph_def_nodes
from .tf_nodes import assign_output_names, decode_node_def, parse_tensor_name
from .wire import CUT, MapField, Spec, WireError, strip

__all__ = [
    "GRAPH_DEF_SPEC",
    "NON_OUTPUT_OPS",
    "graph_from_graph_def",
    "graph_from_graph_def_buffer",
    "parse_graph_def_buffer",
    "parse_graph_def_text",
    "tf_graph_from_buffer",
]

# Which fields lead to a TensorProto's tensor_content: NodeDef.attr[*].tensor.tensor_content.
_NODE_SPEC = Spec({5: MapField(Spec({8: Spec({4: CUT})}))})
_LIBRARY_SPEC = Spec({1: Spec({3: _NODE_SPEC})})  # FunctionDefLibrary.function[*].node_def[*]
GRAPH_DEF_SPEC = Spec({1: _NODE_SPEC, 2: _LIBRARY_SPEC})
_FIELD_SPECS = {1: _NODE_SPEC, 2: _LIBRARY_SPEC}  # GRAPH_DEF_SPEC's fields, each a Spec

NON_OUTPUT_OPS = frozenset({"Const", "HostConst", "NoOp", "Placeholder", "PlaceholderWithDefault"})
_TENSOR_SUFFIX = ((2, 0), (8, 0), (4, 0))
# A GraphDef read whole (bytes) is stripped and decoded in one walk (_decode_unstripped): a tenth of a small
# model's decoding saved, and 6% of a MobileNet's, whose large nodes .node_cuts strips (wire.strip's generic
# walk of each of them would cost what the one walk saves).


def _views_by_node(
    buffer, cuts, where: str, prefix: tuple = ()
) -> tuple[dict[int, dict[str, Any]], dict[tuple[int, int], dict[str, Any]]]:
    """The views of the cut tensors of the main graph's nodes by node index, and of the function bodies' nodes by
    ``(function index, node index)``, each by attribute name; ``prefix``: the path of the field ``cuts`` were cut
    from (their paths are relative to it)."""
    nodes: dict[int, dict[str, Any]] = {}
    functions: dict[tuple[int, int], dict[str, Any]] = {}
    for cut in cuts:
        path = prefix + cut.path if prefix else cut.path
        view = (buffer, cut.offset, cut.length)
        if len(path) == 5 and path[0][0] == 1 and path[1][0] == 5 and path[2:] == _TENSOR_SUFFIX:
            nodes.setdefault(path[0][1], {})[path[1][1]] = view
        elif (len(path) == 7 and path[0] == (2, 0) and path[1][0] == 1 and path[2][0] == 3 and path[3][0] == 5
              and path[4:] == _TENSOR_SUFFIX):
            functions.setdefault((path[1][1], path[2][1]), {})[path[3][1]] = view
        else:
            raise ModelLoadError(
                f"{where}: a tensor at byte {cut.offset} is stored in repeated singular fields, which TensorFlow "
                "never writes; the file is corrupt"
            )
    return nodes, functions


def parse_graph_def_buffer(buffer, where: str, threshold: int = 1024, reader=None):
    """Parses GraphDef bytes (``bytes`` or ``mmap``) with large tensor contents kept in ``buffer``.

    ``reader`` (default: ``buffer``) is what the wire walker reads, e.g. a :class:`.FileReader` over the
    same file as the ``mmap`` ``buffer``, so walking does not make the mapped weights resident.

    Returns ``(graph_def message, node views by node index, views by (function index, node index))``.

    Raises:
        ModelLoadError: the bytes are not a well-formed GraphDef.
    """
    small, cuts = _strip_graph_def(buffer, where, threshold, reader)
    return _decode_stripped(buffer, small, cuts, where)


def _strip_graph_def(buffer, where: str, threshold: int, reader) -> tuple[bytes, list]:
    reader = buffer if reader is None else reader
    try:
        return strip(reader, 0, len(reader), GRAPH_DEF_SPEC, threshold)
    except WireError as exc:
        raise ModelLoadError(f"{where}: not a valid binary GraphDef ({exc}); the file is truncated or not a TensorFlow model") from None


def _decode_stripped(buffer, small: bytes, cuts: list, where: str):
    graph_def = decode_graph_def(small)
    if graph_def is None:  # something the Python decoder leaves to protobuf, malformed bytes included
        graph_def = _parse_with_protobuf(small, where)
    node_views, func_views = _views_by_node(buffer, cuts, where)
    return graph_def, node_views, func_views


def graph_from_graph_def_buffer(buffer, where: str, *, reader=None, threshold: int = 1024, **options: Any) -> SourceGraph:
    """``graph_from_graph_def(*parse_graph_def_buffer(buffer, where, threshold, reader), **options)``, with the main
    graph's nodes decoded straight from the bytes where :mod:`.tf_node_decoder` can (the same nodes, in one
    pass instead of two; a file read whole is stripped in that pass too); else, and for every error, exactly
    that."""
    data = buffer if reader is None else reader
    if data.__class__ is bytes:  # stripped and decoded in one walk where it can be
        decoded, func_views = _decode_unstripped(data, buffer, where, threshold)
        if decoded is not None:
            graph_def, nodes = decoded
            return graph_from_graph_def(graph_def, where, None, func_views, decoded_nodes=nodes, **options)
    small, cuts = _strip_graph_def(buffer, where, threshold, reader)
    try:
        node_views, func_views = _views_by_node(buffer, cuts, where)
    except ModelLoadError:  # raised by _decode_stripped below, after what it finds first
        decoded = None
    else:
        decoded = decode_graph_def_nodes(small, node_views)
    if decoded is None:
        graph_def, node_views, func_views = _decode_stripped(buffer, small, cuts, where)
        return graph_from_graph_def(graph_def, where, node_views, func_views, **options)
    graph_def, nodes = decoded
    return graph_from_graph_def(graph_def, where, node_views, func_views, decoded_nodes=nodes, **options)


def _decode_unstripped(
    data: bytes, buffer, where: str, threshold: int
) -> tuple[tuple[Any, list[SourceNode]] | None, dict[tuple[int, int], dict[str, Any]]]:
    """``(decode_graph_def_nodes of the stripped GraphDef, views by (function index, node index))`` of the
    GraphDef in ``data`` (the bytes of ``buffer``), each large field stripped as :func:`.wire.strip` strips it
    within the GraphDef, with its cuts' views made as :func:`_views_by_node` makes them; None first when the
    caller must take the general way (which meets any error again)."""
    func_views: dict[tuple[int, int], dict[str, Any]] = {}

    def strip_field(number: int, occurrence: int, start: int, end: int) -> tuple[bytes, dict[str, Any] | None]:
        if number == 1 and (cut := cut_node(data, start, end, threshold, buffer)) is not None:
            return cut  # a node of the common layout: what strip and _views_by_node give, found directly
        stripped, cuts = strip(data, start, end, _FIELD_SPECS[number], threshold)
        if not cuts:
            return stripped, None
        node_views, functions = _views_by_node(buffer, cuts, where, ((number, occurrence),))
        func_views.update(functions)
        return stripped, node_views.get(occurrence)

    return decode_graph_def_nodes(data, {}, strip_field, threshold), func_views


def _parse_with_protobuf(small: bytes, where: str):
    from google.protobuf import message

    from .proto import tf_framework_pb2 as tfpb

    graph_def = tfpb.GraphDef()
    try:
        graph_def.ParseFromString(small)
    except message.DecodeError as exc:
        raise ModelLoadError(f"{where}: not a valid binary GraphDef ({exc or 'protobuf decode error'}); the file is truncated or not a TensorFlow model") from None
    return graph_def


def parse_graph_def_text(text: str, where: str):
    """Parses a text GraphDef.

    Raises:
        ModelLoadError: the text is not a GraphDef in protobuf text format.
    """
    from google.protobuf import text_format

    from .proto import tf_framework_pb2 as tfpb

    graph_def = tfpb.GraphDef()
    try:
        text_format.Parse(text, graph_def, allow_unknown_field=True)
    except text_format.ParseError as exc:
        raise ModelLoadError(f"{where}: not a valid text GraphDef ({exc}); fix the text or pass the right format") from None
    return graph_def


def graph_from_graph_def(
    graph_def,
    where: str,
    node_views: Mapping[int, ContentViews] | None = None,
    function_views: Mapping[tuple[int, int], ContentViews] | None = None,
    *,
    inputs: Sequence[tuple[str, str]] | None = None,
    outputs: Sequence[str | tuple[str, str]] | None = None,
    inline_functions: bool = True,
    name: str = "",
    metadata: Mapping[str, Any] | None = None,
    decoded_nodes: list[SourceNode] | None = None,
) -> SourceGraph:
    """Converts a GraphDef message (ours or TensorFlow's class) into a SourceGraph.

    Args:
        inputs: ``(input name, tensor name)`` pairs naming the graph inputs (a SavedModel signature's
            keys); default: every ``Placeholder``, named after the node.
        outputs: graph output tensor names (``"node"`` or ``"node:1"``), or ``(output name, tensor name)``
            pairs; default: every output of each node nothing consumes, constants, placeholders,
            ``NoOp`` and the nodes inside a TF1 loop excepted.
        inline_functions: inline ``PartitionedCall`` / ``StatefulPartitionedCall`` and direct function calls.
        metadata: extra entries for ``SourceGraph.metadata``.
        decoded_nodes: the main graph's nodes as :func:`.decode_node_def` decodes ``graph_def.node``, decoded
            already (by :func:`.decode_graph_def_nodes`, whose ``graph_def`` has no ``node``).

    Raises:
        ParseError: duplicate names, a missing producer, a data cycle, an invalid function body.
        ModelLoadError: the GraphDef holds no nodes.
    """
    if decoded_nodes is not None:
        nodes = decoded_nodes
    elif not graph_def.node:
        raise ModelLoadError(f"{where}: the GraphDef holds no nodes; the file is empty or not a TensorFlow GraphDef")
    else:
        node_views = node_views or {}
        nodes = [decode_node_def(nd, where, node_views.get(i)) for i, nd in enumerate(graph_def.node)]
    library = FunctionLibrary(graph_def.library.function, where, function_views, inline_functions)
    nodes, tensor_map = library.expand(nodes, where)

    graph_inputs: list[GraphInput] = []  # given ones; the placeholders are found once the graph is made
    if inputs is not None:
        by_name = {n.name: n for n in nodes}
        for i, (input_name, tensor) in enumerate(inputs):
            node_name, _ = parse_tensor_name(tensor)
            node = by_name.get(node_name)
            if node is None:
                raise ParseError(f"{where}: graph input {input_name!r} names tensor {tensor!r}, but no node is named {node_name!r}")
            graph_inputs.append(GraphInput(input_name, node_name, _dtype(node.attrs.get("dtype")), _shape(node.attrs.get("shape")), i))
    graph_outputs: list[GraphOutput] = []  # given ones; the sinks are found once the graph is made
    if outputs is not None:
        for item in outputs:
            output_name, text = (item, item) if isinstance(item, str) else item
            out_node, index = parse_tensor_name(text)
            out_node, index = library.follow(tensor_map, (out_node, index))
            graph_outputs.append(GraphOutput(output_name, out_node, index))
        assign_output_names(nodes, library.signatures, ((o.node, o.index) for o in graph_outputs))
    else:
        assign_output_names(nodes, library.signatures)
    metadata = dict(metadata or {})
    if graph_def.HasField("versions"):
        metadata["producer"] = graph_def.versions.producer
        metadata["min_consumer"] = graph_def.versions.min_consumer
    graph = SourceGraph(
        nodes,
        inputs=graph_inputs,
        outputs=graph_outputs,
        functions=library.graphs(),
        framework=FRAMEWORK_TENSORFLOW,
        path=where,
        name=name or os.path.basename(where),
        metadata=metadata,
    )
    if inputs is None:  # every Placeholder in file order, found from the op-type index the graph made
        graph.inputs = [
            GraphInput(n.name, n.name, _dtype(n.attrs.get("dtype")), _shape(n.attrs.get("shape")), i)
            for i, n in enumerate(graph.file_nodes_by_type.get("Placeholder", ()))
        ]
    if outputs is None:  # the sinks, found from the graph's edges (they name existing nodes: nothing to check)
        graph.outputs = list(_sink_outputs(nodes, graph.out_edges, graph.op_types_present))
    return graph


def _sink_outputs(nodes: list[SourceNode], out_edges: Mapping[str, Mapping[str, Any]],
                  op_types: AbstractSet[str]) -> Iterable[GraphOutput]:
    """The outputs of the nodes, in ``nodes`` order, that nothing reads (no edge in ``out_edges``, the
    graph's: data or control), constants, placeholders, ``NoOp`` and the nodes inside a TF1 loop excepted;
    ``op_types``: the op types among the nodes."""
    depth = _frame_depths(nodes) if "Enter" in op_types else {}
    for node in nodes:
        if out_edges[node.name] or node.op_type in NON_OUTPUT_OPS:
            continue
        if depth.get(node.name, 0) > 0:
            continue  # inside a loop (an invariant's Enter included): it runs once per iteration, no single value
        for i in range(len(node.output_names)):
            yield GraphOutput(node.name if i == 0 else f"{node.name}:{i}", node.name, i)


def _frame_depths(nodes: list[SourceNode]) -> dict[str, int]:
    """How many TF1 loop frames each node runs inside: an ``Enter`` is one deeper than what it reads, an
    ``Exit`` one shallower, any other node as deep as the first of its producers reached (data or control)
    from the nodes that read nothing."""
    readers: dict[str, list[str]] = {}
    for node in nodes:
        name = node.name
        # Each producer lists each reader once, in node order: a reader reading it again is its last entry.
        for producer, _ in node.inputs:
            found = readers.get(producer)
            if found is None:
                readers[producer] = [name]
            elif found[-1] != name:
                found.append(name)
        for producer in node.control_inputs:
            found = readers.get(producer)
            if found is None:
                readers[producer] = [name]
            elif found[-1] != name:
                found.append(name)
    steps = {n.name: _FRAME_STEP[n.op_type] for n in nodes if n.op_type in _FRAME_STEP}
    depth = {n.name: 0 for n in nodes if not n.inputs and not n.control_inputs}
    todo = list(depth)
    while todo:
        name = todo.pop()
        here = depth[name]
        for reader in readers.get(name, ()):
            if reader not in depth:
                below = here + steps.get(reader, 0)
                depth[reader] = below if below > 0 else 0
                todo.append(reader)
    return depth


_FRAME_STEP = {"Enter": 1, "Exit": -1}  # how an op moves its outputs into (out of) a loop frame


def _dtype(value):
    return value if isinstance(value, DType) else None


def _shape(value):
    return value if isinstance(value, tuple) or value is None else None


def tf_graph_from_buffer(buffer, where: str, **options: Any) -> SourceGraph:
    """A binary GraphDef in ``buffer`` to a SourceGraph (see :func:`graph_from_graph_def` for options)."""
    return graph_from_graph_def_buffer(buffer, where, **options)
