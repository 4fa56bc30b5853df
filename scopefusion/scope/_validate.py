"""Validation of one :class:`FusionScopesResult` against the graph and the fusions accepted before it.

Every check that fails refuses the result with one sentence; nothing is applied half-way. In order:
problems the rule recorded, the type, what the result claims, the index maps, nodes it only reads
(kept), inputs that enter without a port, intermediate values that leave without a port, nodes
claimed by an earlier fusion, name collisions, many-to-many inner nodes, and last (the only check
that is not local) whether contracting the claimed nodes would close a cycle.

NOTE: the cycle check contracts a many-to-many fusion into one vertex too, as if its inner nodes were
one op. That is conservative: inner nodes that do not depend on each other could legally sit on both
sides of an outside path, and such a result is refused.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Callable

import networkx as nx

from ..parser.source_graph import SourceNode
from .accepted import AcceptedFusion, FusedInput, FusedOutput, ResolvedInnerNode
from .result import (
    FUSION_DISABLE_INDEX,
    INPUT_FROM_FUSION_SCOPE,
    OUTPUT_TO_FUSION_SCOPE,
    SCOPE_INVALID_TYPE,
    SCOPE_TO_MULTI_NODES,
    FusionScopesResult,
)

if TYPE_CHECKING:
    from .graph import ScopeGraph
    from .plan import FusionPlan

__all__ = ["Refused", "validate_result"]

_CONSTANT_OPS = frozenset({"Const", "Initializer", "Constant"})
_PASS_THROUGH_OPS = frozenset({"Identity"})


class Refused(Exception):
    """Internal: carries the reason a result is refused."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def _is_constant_like(graph: ScopeGraph, name: str) -> bool:
    for _ in range(16):
        node = graph.node(name)
        if node.value is not None or node.op_type in _CONSTANT_OPS:
            return True
        if node.op_type in _PASS_THROUGH_OPS and len(node.inputs) == 1 and not node.control_inputs:
            name = node.inputs[0][0]
            continue
        return False
    return False


def _resolve_key(key: str, claimed: dict[str, int], what: str) -> str:
    if key in claimed:
        return key
    tail = "/" + key.strip("/")
    hits = [name for name in claimed if name.endswith(tail)]
    if len(hits) == 1:
        return hits[0]
    if not hits:
        raise Refused(f"{what}({key!r}) names no node the fusion claims; use a claimed node's name or '/'-separated tail")
    shown = ", ".join(sorted(hits)[:4])
    raise Refused(f"{what}({key!r}) is ambiguous: it ends {len(hits)} claimed nodes ({shown}); use a longer tail")


def _ports(maps: dict[str, list[int]], claimed: dict[str, int], what: str) -> dict[int, tuple[str, int]]:
    """Port -> (claimed node, its input slot or output index), each port mapped once, ports 0..n-1."""
    ports: dict[int, tuple[str, int]] = {}
    for key, index_map in maps.items():
        node = _resolve_key(key, claimed, what)
        for k, port in enumerate(index_map):
            if port == FUSION_DISABLE_INDEX:
                continue
            if port in ports:
                first = ports[port]
                raise Refused(
                    f"fused {'input' if what == 'insert_inputs' else 'output'} port {port} is mapped twice "
                    f"({first[0]}:{first[1]} and {node}:{k}); map each port once"
                )
            ports[port] = (node, k)
    if sorted(ports) != list(range(len(ports))):
        raise Refused(
            f"{what} maps ports {sorted(ports)}; fused ports must be numbered 0..n-1 without gaps"
        )
    return ports


def validate_result(
    result: FusionScopesResult,
    graph: ScopeGraph,
    plan: FusionPlan,
    known_types: Callable[[str], bool] | None,
) -> tuple[AcceptedFusion, list[str], object]:
    """Checks ``result``; returns the accepted fusion, its claimed nodes, and the cycle-check token.

    Raises:
        Refused: the reason, one sentence.
    """
    if result.problems:
        raise Refused(result.problems[0])
    kind = result.type
    if not isinstance(kind, str) or not kind or kind == SCOPE_INVALID_TYPE:
        raise Refused(f"the result has an invalid type {kind!r}; set result.type to the fused op type")
    many = kind == SCOPE_TO_MULTI_NODES
    if not many and known_types is not None and not known_types(kind):
        raise Refused(f"fused op type {kind!r} is not a known op type; register the op or fix the type")
    name = result.name
    if not isinstance(name, str) or not name:
        raise Refused("the result has no name; set result.name")

    # --- what the result claims, in graph order
    position = graph.tree._position
    wanted: dict[str, SourceNode] = {}
    for scope in result.scopes:
        for node in scope.all_nodes:
            wanted[node.name] = node
    for node_name in result.nodes:
        node = graph.get(node_name) if isinstance(node_name, str) else None
        if node is None:
            raise Refused(f"the result claims node {node_name!r}, which is not in the graph")
        wanted[node_name] = node
    if not wanted:
        raise Refused("the result claims no nodes (its scopes are empty and it names no nodes)")
    if len(result.scopes) + len(result.nodes) > 1:  # one scope's all_nodes is in graph order already
        wanted = {n: wanted[n] for n in sorted(wanted, key=position.__getitem__)}
    candidates = wanted
    uses = {n: graph.consumers(n) for n in candidates}

    in_ports = _ports(result._inputs, candidates, "insert_inputs")
    out_ports = _ports(result._outputs, candidates, "insert_outputs")
    port_tensors: dict[tuple[str, int], int] = {}
    inputs: list[FusedInput] = []
    for port in sorted(in_ports):
        node_name, slot = in_ports[port]
        node = candidates[node_name]
        if slot >= len(node.inputs):
            raise Refused(
                f"insert_inputs maps input {slot} of {node_name} ({node.op_type}), which has only "
                f"{len(node.inputs)} data input(s)"
            )
        producer, index = node.inputs[slot]
        if not producer:
            raise Refused(f"insert_inputs maps input {slot} of {node_name} ({node.op_type}), which is an omitted optional input")
        port_tensors.setdefault((producer, index), port)
        inputs.append(FusedInput(port, producer, index, node_name, slot))
    out_tensor: dict[tuple[str, int], int] = {}
    for port in sorted(out_ports):
        node_name, index = out_ports[port]
        node = candidates[node_name]
        if node.output_names and index >= len(node.output_names):
            raise Refused(
                f"insert_outputs maps output {index} of {node_name} ({node.op_type}), which has only "
                f"{len(node.output_names)} output(s)"
            )
        if (node_name, index) in out_tensor:
            raise Refused(f"output {index} of {node_name} is mapped to two fused ports; map it once")
        out_tensor[(node_name, index)] = port

    # --- nodes that only produce fused inputs stay outside (kept), consumers first
    anchored = {n for n, _ in in_ports.values()} | {n for n, _ in out_ports.values()}
    kept: set[str] = set()
    for node_name in reversed(candidates):
        if node_name in anchored:
            continue
        feeds_port = False
        feeds_inside = False
        for consumer, slot, index in uses[node_name]:
            if consumer not in candidates:
                continue
            if consumer in kept or (slot >= 0 and (node_name, index) in port_tensors):
                feeds_port = True
            else:
                feeds_inside = True
                break
        if feeds_port and not feeds_inside:
            kept.add(node_name)
    # A kept node must also read only from outside or from kept nodes; dropping one may drop its producers.
    changed = bool(kept)
    while changed:
        changed = False
        for node_name in [n for n in candidates if n in kept]:
            node = candidates[node_name]
            reads_inside = any(p in candidates and p not in kept for p, _ in node.inputs) or any(
                p in candidates and p not in kept for p in node.control_inputs
            )
            feeds_inside = any(
                c in candidates and c not in kept and (slot < 0 or (node_name, index) not in port_tensors)
                for c, slot, index in uses[node_name]
            )
            if reads_inside or feeds_inside:
                kept.discard(node_name)
                changed = True
    claimed = [n for n in candidates if n not in kept]
    claimed_set = set(claimed)
    for item in inputs:
        if item.producer in claimed_set:
            raise Refused(
                f"fused input port {item.port} is fed by {item.producer}:{item.index}, which the fusion "
                "claims; map ports only on edges that enter the fusion"
            )

    # --- boundary: inputs without a port, values leaving without a port
    absorbed: dict[str, None] = {}
    control_inputs: dict[str, None] = {}
    control_outputs: dict[str, None] = {}
    consumers_of: dict[int, list[tuple[str, int]]] = {port: [] for port in out_ports}
    for node_name in claimed:
        node = candidates[node_name]
        for slot, (producer, index) in enumerate(node.inputs):
            if not producer or producer in claimed_set or (producer, index) in port_tensors:
                continue
            if _is_constant_like(graph, producer):
                absorbed[producer] = None
                continue
            raise Refused(
                f"input {slot} of {node_name} ({node.op_type}) comes from {producer}:{index} outside the "
                "fusion but no fused input port maps it; map it with insert_inputs"
            )
        for producer in node.control_inputs:
            if producer not in claimed_set:
                control_inputs[producer] = None
        for consumer, slot, index in uses[node_name]:
            if consumer in claimed_set:
                continue
            if slot < 0:
                control_outputs[consumer] = None
                continue
            port = out_tensor.get((node_name, index))
            if port is None:
                raise Refused(
                    f"intermediate value {node_name}:{index} is consumed outside the fusion by {consumer} "
                    f"(input {slot}); map it to a fused output port or leave the node out"
                )
            consumers_of[port].append((consumer, slot))
    graph_outputs_of: dict[int, list[str]] = {port: [] for port in out_ports}
    for out in (o for node_name in claimed for o in plan._graph_outputs.get(node_name, ())):
        if out.node in claimed_set:
            port = out_tensor.get((out.node, out.index))
            if port is None:
                raise Refused(
                    f"graph output {out.name!r} ({out.node}:{out.index}) is inside the fusion but no fused "
                    "output port maps it"
                )
            graph_outputs_of[port].append(out.name)
    outputs = []
    for port in sorted(out_ports):
        node_name, index = out_ports[port]
        found = sorted(consumers_of[port], key=lambda c: (position[c[0]], c[1]))
        outputs.append(FusedOutput(port, node_name, index, tuple(found), tuple(graph_outputs_of[port])))

    # --- earlier fusions and names
    for node_name in claimed:
        owner = plan.owner(node_name)
        if owner is not None:
            raise Refused(f"node {node_name} is already claimed by fusion {owner!r}")
    plan_names = plan._names
    if name in plan_names:
        raise Refused(f"fusion name {name!r} is already used by fusion {plan_names[name]!r}; choose another name")
    if name in position and name not in claimed_set:
        raise Refused(f"fusion name {name!r} collides with a graph node the fusion does not replace")

    inner_nodes: tuple[ResolvedInnerNode, ...] = ()
    if many:
        inner_nodes = _resolve_inner(result, graph, plan, claimed_set, inputs, out_ports, known_types)
    elif result.inner_nodes:
        raise Refused(
            f"the result has {len(result.inner_nodes)} inner node(s) but type {kind!r}; inner nodes need "
            f"type {SCOPE_TO_MULTI_NODES!r}"
        )

    cycle, token = plan._order.find_cycle(name, claimed)
    if cycle is not None:
        raise Refused(f"fusing would create a cycle ({' -> '.join(cycle)})")

    accepted = AcceptedFusion(
        name=name,
        type=kind,
        pass_name=result.pass_name,
        description=result.description,
        scopes=tuple(s.name for s in result.scopes),
        claimed=tuple(claimed),
        kept=tuple(n for n in candidates if n in kept),
        inputs=tuple(inputs),
        outputs=tuple(outputs),
        absorbed=tuple(sorted(absorbed, key=position.__getitem__)),
        control_inputs=tuple(sorted(control_inputs, key=position.__getitem__)),
        control_outputs=tuple(sorted(control_outputs, key=position.__getitem__)),
        inner_nodes=inner_nodes,
        attrs=dict(result.attrs),
        captures=dict(result.captures),
    )
    return accepted, claimed, token


def _resolve_inner(
    result: FusionScopesResult,
    graph: ScopeGraph,
    plan: FusionPlan,
    claimed: set[str],
    inputs: list[FusedInput],
    out_ports: dict[int, tuple[str, int]],
    known_types: Callable[[str], bool] | None,
) -> tuple[ResolvedInnerNode, ...]:
    infos = result.inner_nodes
    if not infos:
        raise Refused(f"type {SCOPE_TO_MULTI_NODES!r} needs inner nodes; add them with add_inner_node")
    problem = result.check_inner_nodes_info()
    if problem is not None:
        raise Refused(problem)
    fusion = result.name
    names = {info.name for info in infos}
    by_port = {item.port: item for item in inputs}
    used_in: list[int] = []
    used_out: list[int] = []
    dag = nx.DiGraph()
    resolved = []
    for info in infos:
        if known_types is not None and not known_types(info.type):
            raise Refused(f"inner node {info.name!r} has type {info.type!r}, which is not a known op type")
        full = info.full_name(fusion)
        if full in graph.source and full not in claimed:
            raise Refused(f"inner node name {full!r} collides with a graph node the fusion does not replace")
        if full in plan._names:
            raise Refused(f"inner node name {full!r} is already used by fusion {plan._names[full]!r}")
        dag.add_node(info.name)
        ins = []
        for src, index in info.inputs:
            if src == INPUT_FROM_FUSION_SCOPE:
                item = by_port.get(index)
                if item is None:
                    raise Refused(f"inner node {info.name!r} reads fused input port {index}, which insert_inputs does not map")
                used_in.append(index)
                ins.append((item.producer, item.index))
                continue
            if src not in names:
                raise Refused(f"inner node {info.name!r} reads {src!r}, which is no inner node of the fusion")
            dag.add_edge(src, info.name)
            ins.append((f"{fusion.rstrip('/')}/{src}", index))
        outs = []
        for dst, index in info.outputs:
            if dst == OUTPUT_TO_FUSION_SCOPE:
                if index not in out_ports:
                    raise Refused(f"inner node {info.name!r} writes fused output port {index}, which insert_outputs does not map")
                used_out.append(index)
                outs.append((dst, index))
                continue
            if dst not in names:
                raise Refused(f"inner node {info.name!r} writes to {dst!r}, which is no inner node of the fusion")
            outs.append((f"{fusion.rstrip('/')}/{dst}", index))
        resolved.append(ResolvedInnerNode(full, info.type, tuple(ins), tuple(outs), dict(info.attrs)))
    if sorted(used_in) != sorted(by_port):
        raise Refused(f"inner nodes read fused input ports {sorted(used_in)} but insert_inputs maps {sorted(by_port)}")
    if sorted(used_out) != sorted(out_ports):
        raise Refused(f"inner nodes write fused output ports {sorted(used_out)} but insert_outputs maps {sorted(out_ports)}")
    if not nx.is_directed_acyclic_graph(dag):
        cycle = " -> ".join(u for u, _ in nx.find_cycle(dag))
        raise Refused(f"the inner nodes form a cycle ({cycle})")
    return tuple(resolved)
