"""Building the IR graph from a SourceGraph and the accepted fusions.

* Every node no fusion claimed is converted one to one by its op parser (:mod:`.op_parsers`): framework
  ops into the ``tf`` / ``onnx`` dialects with their attributes typed, constants into ``ge.Const``, graph
  inputs into ``ge.Data``.
* A one-to-one fusion becomes one fused op (dialect ``fused``) whose inputs and outputs follow the
  result's index maps; a many-to-many fusion becomes its inner nodes. Every fused node records the
  rule that made it (``_fusion_rule``) and the original node names (``_original_nodes``).
* Control edges survive: a control input on a claimed node moves to the fused node.
* Control-flow bodies (TF function bodies, ONNX If/Loop/Scan graphs) are built recursively.

Units (fusions and unclaimed nodes) are emitted in a topological order of the graph contracted by the
fusions, ties broken by source order, so the output is deterministic.
"""

from __future__ import annotations

import heapq
from operator import attrgetter
from typing import TYPE_CHECKING, Any, Callable, Iterable, Iterator, Mapping, Sequence

from ..errors import FusionError
from ..ir.attrs import LIST_STR, STR
from ..ir.graph import Graph, Node, Value
from ..ir.opdef import OpRegistry
from ..ir.types import IRContext
from ..parser.source_graph import BACK_EDGE_OPS, SourceGraph, SourceNode
from ..records import Record
from ..scope.result import OUTPUT_TO_FUSION_SCOPE
from .op_parsers import BuildContext, OpParserRegistry, is_back_edge

if TYPE_CHECKING:  # pragma: no cover
    from ..scope.accepted import AcceptedFusion

__all__ = ["BuildResult", "build_graph", "find_cycle", "lexicographic_order"]


class BuildResult(Record):
    _fields = ("graph", "dropped_attrs", "fused_nodes")

    def __init__(
        self,
        graph: Graph,
        dropped_attrs: dict[str, list[str]] | None = None,
        fused_nodes: dict[str, str] | None = None,
    ) -> None:
        self.graph = graph
        self.dropped_attrs = {} if dropped_attrs is None else dropped_attrs  # node -> attribute names with no IR form
        self.fused_nodes = {} if fused_nodes is None else fused_nodes  # IR node name -> rule


def build_graph(
    source: SourceGraph,
    *,
    context: IRContext,
    registry: OpRegistry,
    parsers: OpParserRegistry,
    fusions: Sequence["AcceptedFusion"] = (),
    name: str = "main",
) -> BuildResult:
    """Builds the IR graph of ``source`` with ``fusions`` applied (see the module docstring)."""
    graph = Graph(name, context, registry)
    result = BuildResult(graph)
    ctx = BuildContext(source, graph, parsers, result.dropped_attrs, _body_builder(context, registry, parsers))
    claimed_by: dict[str, AcceptedFusion] = {}
    for fusion in fusions:
        for node_name in fusion.claimed:
            if node_name in claimed_by:
                raise FusionError(
                    f"{source.path or source.name}: node {node_name!r} is claimed by fusions {claimed_by[node_name].name!r} "
                    f"and {fusion.name!r}; the pass manager should have refused the second"
                )
            claimed_by[node_name] = fusion
    for declared in source.inputs:  # graph inputs first, in the model's order
        node = source.get(declared.node)
        if node is not None and node.name not in claimed_by and not node.inputs:
            parsers.convert_node(ctx, node)
    built = ctx._nodes  # what ctx.node_for reads: a graph input is built above already
    for unit in _schedule(source, fusions, claimed_by):
        if isinstance(unit, SourceNode):
            if unit.name not in built:
                parsers.convert_node(ctx, unit)
        else:
            _apply_fusion(ctx, unit)
            for emitted in ctx.emitted_for(unit.name):
                result.fused_nodes[emitted.name] = unit.pass_name
    ctx.connect_back_edges()
    _mark_tf1_frames(graph)
    _set_outputs(ctx)
    return result


def _mark_tf1_frames(graph: Graph) -> None:
    """Marks every value computed inside a TF1 while frame (from Enter up to Exit) with ``meta["in_frame"]``.

    NOTE: such a value is produced once per iteration and read across iterations through the loop's back
    edge, so one fixed arena slot per value does not describe it; the memory plan leaves these values to
    run time, like dynamic ones.
    """
    if _ENTER_OPS.isdisjoint(map(_OP_TYPE, graph.nodes)):  # the usual case, found without a loop in Python
        return
    stack = [n for n in graph.nodes if n._op_type in _ENTER_OPS]
    seen: set[int] = set()
    while stack:
        node = stack.pop()
        if id(node) in seen:
            continue
        seen.add(id(node))
        for value in node.outputs:
            value.meta["in_frame"] = True
            for user, _ in value._uses:
                if user._op_type not in _EXIT_OPS and id(user) not in seen:
                    stack.append(user)


_ENTER_OPS = frozenset({"Enter", "RefEnter"})
_OP_TYPE = attrgetter("_op_type")
_EXIT_OPS = frozenset({"Exit", "RefExit"})


def _body_builder(context: IRContext, registry: OpRegistry, parsers: OpParserRegistry):
    def build_body(body: SourceGraph, name: str) -> Graph:
        return build_graph(body, context=context, registry=registry, parsers=parsers, name=name).graph

    return build_body


def _schedule(source: SourceGraph, fusions: Sequence["AcceptedFusion"], claimed_by: dict[str, "AcceptedFusion"]) -> list[Any]:
    """Fusions and unclaimed nodes in a topological order of the contracted graph.

    A unit (an unclaimed node, or a fusion with a claimed node in the graph) is numbered by the source
    position of its first node, and the order is :func:`lexicographic_order` with those numbers as ranks:
    Kahn's algorithm, always taking the ready unit of least rank. It is computed in one pass over the units in
    rank order, without a table of successors: a unit whose predecessors are all out when the pass reaches it
    is the least ready one (every ready unit of lower rank is out), so it goes out at once; one that waits is
    noted under each predecessor not out yet, and goes out (least rank first, from a heap) as soon as its last
    one does, before the pass goes on: it ranks below every unit the pass has not reached. In a source whose
    edges run forward only a fusion can wait, for a producer placed after its first node.
    """
    nodes = source.nodes
    if not fusions:
        return list(nodes)
    units: list[Any] = [None] * len(nodes)  # by rank
    claimed: dict[int, list[SourceNode]] = {}  # rank of a fusion -> its claimed nodes in the graph, in source order
    rank_of: dict[str, int] = {}  # source node name -> rank of its unit
    fusion_rank: dict[str, int] = {}
    count = 0  # units
    for position, node in enumerate(nodes):
        fusion = claimed_by.get(node.name)
        if fusion is None:
            rank_of[node.name] = position
            units[position] = node
            count += 1
            continue
        rank = fusion_rank.get(fusion.name)
        if rank is None:
            rank = fusion_rank[fusion.name] = position
            units[position] = fusion
            claimed[rank] = [node]
            count += 1
        else:
            claimed[rank].append(node)
        rank_of[node.name] = rank
    loop_sources = {node.name for node in nodes if node.op_type in BACK_EDGE_OPS}
    out = [False] * len(nodes)  # by rank: whether the unit is out
    waiting: dict[int, int] = {}  # rank of a unit that waits -> how many of its predecessors are not out
    waiters: dict[int, list[int]] = {}  # rank -> the units that wait for it
    ready: list[int] = []  # waiting units whose predecessors are all out: a heap
    order: list[Any] = []
    get = rank_of.get
    pop, push = heapq.heappop, heapq.heappush
    # With every edge running forward, an unclaimed node's producers all have lower ranks: while no unit
    # waits, every unit of lower rank is out, so the node goes out at once, its inputs not looked at.
    forward = source.edges_run_forward
    held = 0  # units that wait and are not out yet
    for rank, unit in enumerate(units):
        if unit is None:
            continue
        if forward and not held and rank not in claimed:
            order.append(unit)
            out[rank] = True
            continue
        missing: dict[int, None] | None = None  # the predecessors not out, once each
        for node in claimed.get(rank) or (unit,):
            for producer, _ in node.inputs:
                src = get(producer)
                if src is not None and not out[src] and src != rank and not (
                        producer in loop_sources and is_back_edge(source, producer, node)):
                    missing = missing or {}
                    missing[src] = None
            for producer in node.control_inputs:  # as the data inputs
                src = get(producer)
                if src is not None and not out[src] and src != rank and not (
                        producer in loop_sources and is_back_edge(source, producer, node)):
                    missing = missing or {}
                    missing[src] = None
        if missing is not None:
            waiting[rank] = len(missing)
            held += 1
            for src in missing:
                waiters.setdefault(src, []).append(rank)
            continue
        while True:
            order.append(units[rank])
            out[rank] = True
            if waiters and rank in waiters:
                for waiter in waiters.pop(rank):
                    waiting[waiter] -= 1
                    if not waiting[waiter]:
                        push(ready, waiter)
            if not ready:
                break
            rank = pop(ready)
            held -= 1
    if len(order) < count:
        _raise_cycle(source, units, rank_of, loop_sources, out)
    return order


def _producers(node: SourceNode) -> Iterator[str]:
    """The names of the nodes ``node`` reads, data inputs then control inputs (a name as often as it is read)."""
    for producer, _ in node.inputs:
        yield producer
    yield from node.control_inputs


def _raise_cycle(source: SourceGraph, units: list[Any], rank_of: dict[str, int], loop_sources: set[str],
                 out: list[bool]) -> None:
    """Raises the FusionError naming a cycle among the units ``_schedule`` could not put out."""
    successors: dict[int, dict[int, None]] = {rank: {} for rank, unit in enumerate(units) if unit is not None}
    for node in source.nodes:
        dst = rank_of[node.name]
        for producer in _producers(node):
            src = rank_of.get(producer)
            if src is not None and src != dst and not (producer in loop_sources and is_back_edge(source, producer, node)):
                successors[src][dst] = None
    left = {rank for rank in successors if not out[rank]}
    cycle = " -> ".join(units[rank].name for rank in find_cycle(successors, left))
    raise FusionError(f"{source.path or source.name}: applying the fusions creates a cycle ({cycle})")


def lexicographic_order(successors: Mapping[Any, Iterable[Any]], rank: Callable[[Any], Any]) -> list[Any]:
    """A topological order of the graph ``successors`` (every vertex a key, an edge at most once), always
    taking the ready vertex of least ``rank`` (ranks are distinct) — Kahn's algorithm with a heap. Vertices
    on or after a cycle are left out, so a shorter list than ``successors`` means the graph has a cycle."""
    indegree = dict.fromkeys(successors, 0)
    for targets in successors.values():
        for target in targets:
            indegree[target] += 1
    ready = [(rank(v), i, v) for i, (v, n) in enumerate(indegree.items()) if n == 0]
    heapq.heapify(ready)
    order = []
    count = len(ready)
    while ready:
        _, _, vertex = heapq.heappop(ready)
        order.append(vertex)
        for target in successors[vertex]:
            indegree[target] -= 1
            if indegree[target] == 0:
                heapq.heappush(ready, (rank(target), count, target))
                count += 1
    return order


def find_cycle(successors: Mapping[Any, Iterable[Any]], among: set[Any]) -> list[Any]:
    """The vertices of one cycle through ``among`` (the vertices a topological order left out), in edge
    order; empty when there is none. Deterministic: vertices and edges are tried in the mapping's order."""
    on_path: dict[Any, int] = {}
    path: list[Any] = []
    done: set[Any] = set()
    for start in successors:
        if start not in among or start in done:
            continue
        stack = [iter(successors[start])]
        on_path[start] = 0
        path.append(start)
        while stack:
            for target in stack[-1]:
                if target not in among or target in done:
                    continue
                if target in on_path:
                    return path[on_path[target] :]
                on_path[target] = len(path)
                path.append(target)
                stack.append(iter(successors[target]))
                break
            else:
                stack.pop()
                done.add(path[-1])
                del on_path[path.pop()]
    return []


def _apply_fusion(ctx: BuildContext, fusion: "AcceptedFusion") -> None:
    provenance = {"_fusion_rule": fusion.pass_name, "_original_nodes": list(fusion.claimed) or [fusion.name]}
    found = [ctx.node_for(name) for name in fusion.control_inputs]
    controls = [c for c in found if c is not None]
    if fusion.is_many_to_many:
        _apply_many_to_many(ctx, fusion, provenance, controls)
        return
    inputs: list[Value | None] = []
    for fused_input in sorted(fusion.inputs, key=lambda i: i.port):
        while len(inputs) < fused_input.port:
            inputs.append(None)
        inputs.append(ctx.value(fused_input.producer, fused_input.index))  # fused ports are never back edges
    n_out = max((o.port for o in fusion.outputs), default=-1) + 1
    node = ctx.parsers.convert_fused(ctx, fusion, inputs, max(n_out, 1), provenance, controls)
    for out in fusion.outputs:
        ctx.bind(out.claimed_node, out.index, node.outputs[out.port])
    ctx.record(fusion.name, [node])


def _apply_many_to_many(ctx: BuildContext, fusion: "AcceptedFusion", provenance: dict, controls: list[Node]) -> None:
    emitted: list[Node] = []
    inner_names = {inner.name for inner in fusion.inner_nodes}
    pending = list(fusion.inner_nodes)
    # Inner nodes may be listed in any order: emit each once its inner producers exist.
    while pending:
        progressed = False
        for inner in list(pending):
            if any(src in inner_names and ctx.graph.get_node(src) is None for src, idx in inner.inputs if idx >= 0):
                continue
            data = [(s, i) for s, i in inner.inputs if i >= 0]
            inputs = [ctx.value(src, idx) for src, idx in data]
            ctrl = [ctx.node_for(s) for s, i in inner.inputs if i < 0]
            n_out = max(1, sum(1 for _, i in inner.outputs if i >= 0))
            node = ctx.parsers.convert_inner(
                ctx, fusion, inner, inputs, n_out, provenance, [c for c in ctrl if c is not None] + controls
            )
            emitted.append(node)
            pending.remove(inner)
            progressed = True
        if not progressed:
            names = ", ".join(i.name for i in pending)
            raise FusionError(f"fusion {fusion.name!r} ({fusion.pass_name}): inner nodes {names} read each other in a cycle")
    for inner in fusion.inner_nodes:
        node = ctx.graph.node(inner.name)
        j = 0
        for dst, port in inner.outputs:
            if port < 0:
                continue
            if dst == OUTPUT_TO_FUSION_SCOPE:
                for out in fusion.outputs:
                    if out.port == port:
                        ctx.bind(out.claimed_node, out.index, node.outputs[j])
            j += 1
    ctx.record(fusion.name, emitted)


def _set_outputs(ctx: BuildContext) -> None:
    graph = ctx.graph
    outputs = []
    for out in ctx.source.outputs:
        value = ctx.value(out.node, out.index)
        outputs.append(value)
        value.meta.setdefault("output_names", []).append(out.name)
    graph.set_outputs(outputs)
    graph.attrs.set_attr("_output_names", [o.name for o in ctx.source.outputs], LIST_STR)
    if ctx.source.framework:
        graph.attrs.set_attr("_framework", ctx.source.framework, STR)

