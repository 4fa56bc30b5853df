"""Validation of one :class:`FusionScopesResult` against the graph and the fusions accepted before it.

Every check that fails refuses the result with one sentence (:class:`Refused`); nothing is applied
half-way. :func:`validate_result` runs one check per refusal reason, in this order: problems the rule
recorded, the op type, the name, what the result claims, the index maps, nodes it only reads (kept),
ports on edges that do not enter the fusion, inputs that enter without a port, intermediate values
that leave without a port, graph outputs without a port, nodes claimed by an earlier fusion, name
collisions, many-to-many inner nodes, and last (the only check that is not local) whether contracting
the claimed nodes would close a cycle. The checks of unmapped inputs, leaving values and graph outputs
share one walk over the claimed nodes; a result with several problems is refused for the first problem
of the earliest kind, as if each check walked the nodes on its own.

NOTE: the cycle check contracts a many-to-many fusion into one vertex too, as if its inner nodes were
one op. That is conservative: inner nodes that do not depend on each other could legally sit on both
sides of an outside path, and such a result is refused.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Mapping, Sequence

from ..parser.source_graph import SourceNode
from ._order import Contraction, find_cycle
from .accepted import AcceptedFusion, FusedInput, FusedOutput, ResolvedInnerNode
from .op_types import KnownOpTypes
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


class Refused(Exception):
    """A fusion candidate is refused; ``reason`` says why, in one sentence.

    Raised by the validator, and by rules that find a candidate is not what they fuse.
    """

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


Tensor = tuple[str, int]


def validate_result(
    result: FusionScopesResult,
    graph: ScopeGraph,
    plan: FusionPlan,
    known_types: KnownOpTypes | None,
) -> tuple[AcceptedFusion, list[str], Contraction]:
    """Checks ``result``; returns the accepted fusion, its claimed nodes, and the contraction to apply.

    Raises:
        Refused: the reason, one sentence.
    """
    problems = result.problems
    if problems:  # the rule recorded a problem while filling the result
        raise Refused(problems[0])
    op_type = result.op_type
    if not isinstance(op_type, str) or not op_type or op_type == SCOPE_INVALID_TYPE:
        raise Refused(f"the result has an invalid type {op_type!r}; set result.type to the fused op type")
    many = op_type == SCOPE_TO_MULTI_NODES
    if not many and known_types is not None:
        reason = known_types.fused_refusal(op_type)
        if reason is not None:
            raise Refused(reason)
    name = result.name
    if not isinstance(name, str) or not name:
        raise Refused("the result has no name; set result.name")
    positions = graph.tree.positions
    out_edges = graph.source.out_edges_by_position
    candidates, position_of, uses = _claims(result, graph, positions, out_edges)
    anchored: set[str] = set()  # the nodes that ports map
    in_ports = _ports(result._inputs, candidates, "insert_inputs", anchored)  # read only: no copies
    out_ports = _ports(result._outputs, candidates, "insert_outputs", anchored)
    inputs, port_of_input = _fused_inputs(in_ports, candidates)
    port_of_output = _fused_output_ports(out_ports, candidates)
    kept = _kept_nodes(candidates, uses, anchored, port_of_input) if _may_keep(candidates, anchored, port_of_input) else set()
    claimed = [n for n in candidates if n not in kept] if kept else list(candidates)
    claimed_set = set(claimed)
    for item in inputs:
        if item.producer in claimed_set:
            raise Refused(
                f"fused input port {item.port} is fed by {item.producer}:{item.index}, which the fusion "
                "claims; map ports only on edges that enter the fusion"
            )
    absorbed, control_inputs, control_outputs, consumers_of, graph_outputs_of, outside = _boundary(
        result, graph, plan, candidates, claimed, claimed_set, uses, port_of_input, port_of_output
    )
    owned = plan.first_owned(claimed, [position_of[n] for n in claimed])
    if owned is not None:
        raise Refused(f"node {owned[0]} is already claimed by fusion {owned[1]!r}")
    user = plan.name_user(name)
    if user is not None:
        raise Refused(f"fusion name {name!r} is already used by fusion {user!r}; choose another name")
    if name not in claimed_set and name in graph.source:  # a claimed name first: no graph-sized look-up
        raise Refused(f"fusion name {name!r} collides with a graph node the fusion does not replace")
    inner_nodes = _inner_nodes(result, graph, plan, known_types, name, many, claimed_set, inputs, out_ports)
    cycle, contraction = plan.find_cycle(name, claimed, candidates, uses, position_of, outside)  # none is owned
    if cycle is not None:  # the only check that is not local
        raise Refused(f"fusing would create a cycle ({' -> '.join(cycle)})")
    assert contraction is not None
    outputs = []
    for port in range(len(out_ports)):  # the ports are 0..n-1 (_ports checked)
        node_name, index = out_ports[port]
        found = consumers_of[port]
        if len(found) > 1:
            found.sort(key=lambda c: (positions[c[0]], c[1]))
        outputs.append(FusedOutput(port, node_name, index, tuple(found), tuple(graph_outputs_of[port])))
    accepted = AcceptedFusion.assemble({
        "name": name,
        "op_type": op_type,
        "pass_name": result.pass_name,
        "description": result.description,
        "scopes": tuple(s.name for s in result.scopes) if result.scopes else (),
        "claimed": tuple(claimed),
        "kept": tuple(n for n in candidates if n in kept) if kept else (),
        "inputs": tuple(inputs),
        "outputs": tuple(outputs),
        "absorbed": _in_order(absorbed, positions),
        "control_inputs": _in_order(control_inputs, positions),
        "control_outputs": _in_order(control_outputs, positions),
        "inner_nodes": inner_nodes,
        "attrs": dict(result.attrs),
        "captures": dict(result.captures),
    })
    return accepted, claimed, contraction


def _in_order(names: dict[str, None], positions: Mapping[str, int]) -> tuple[str, ...]:
    if not names:
        return ()
    if len(names) == 1:
        return tuple(names)
    return tuple(sorted(names, key=positions.__getitem__))


# ------------------------------------------------------------------------------------- the result itself
def _claims(
    result: FusionScopesResult, graph: ScopeGraph, positions: Mapping[str, int],
    out_edges: Sequence[dict[str, dict[int, int]]],
) -> tuple[dict[str, SourceNode], dict[str, int], dict[str, dict[str, dict[int, int]]]]:
    """Every node the result names exists, and it names some: the candidates, in graph order, their indexes
    in graph order (read once here from the graph-sized table, for the checks that need them) and each one's
    consumers -> {slot: index} (slot and index -1: a control edge; ``out_edges`` by index), for the walks
    that read them (kept nodes, boundary)."""
    wanted: dict[str, SourceNode] = {}
    position_of: dict[str, int] = {}
    scopes, nodes = result.scopes, result.nodes
    for scope in scopes:
        start = scope.all_nodes_start
        if start >= 0:  # consecutive graph nodes: their indexes without look-ups
            for at, node in enumerate(scope.all_nodes, start):
                wanted[node.name] = node
                position_of[node.name] = at
        else:
            for node in scope.all_nodes:
                wanted[node.name] = node
                position_of[node.name] = positions[node.name]
    # A node by name: its index (one look-up in a graph-sized table), then the node at that index of the graph.
    graph_nodes = graph.source.nodes
    for node_name in nodes:
        index = positions.get(node_name) if isinstance(node_name, str) else None
        if index is None:
            raise Refused(f"the result claims node {node_name!r}, which is not in the graph")
        position_of[node_name] = index
    if not position_of:
        raise Refused("the result claims no nodes (its scopes are empty and it names no nodes)")
    if scopes or len(nodes) == 1:
        for node_name in nodes:
            wanted[node_name] = graph_nodes[position_of[node_name]]
        if len(scopes) + len(nodes) > 1:  # one scope's all_nodes is in graph order already
            wanted = {n: wanted[n] for n in sorted(wanted, key=position_of.__getitem__)}
        return wanted, position_of, {n: out_edges[position_of[n]] for n in wanted}
    # Nodes by name only: each is the graph's node at its index (above), so the candidates in graph order are
    # the graph's nodes at their indexes in order (distinct names, distinct indexes).
    ordered: dict[str, SourceNode] = {}
    uses: dict[str, dict[str, dict[int, int]]] = {}
    for index in sorted(position_of.values()):
        node = graph_nodes[index]
        ordered[node.name] = node
        uses[node.name] = out_edges[index]
    return ordered, position_of, uses


# ------------------------------------------------------------------------------------------ index maps
def _resolve_key(key: str, candidates: dict[str, SourceNode], what: str) -> str:
    if key in candidates:
        return key
    tail = "/" + key.strip("/")
    hits = [name for name in candidates if name.endswith(tail)]
    if len(hits) == 1:
        return hits[0]
    if not hits:
        raise Refused(f"{what}({key!r}) names no node the fusion claims; use a claimed node's name or '/'-separated tail")
    shown = ", ".join(sorted(hits)[:4])
    raise Refused(f"{what}({key!r}) is ambiguous: it ends {len(hits)} claimed nodes ({shown}); use a longer tail")


def _ports(
    maps: dict[str, list[int]], candidates: dict[str, SourceNode], what: str, anchored: set[str]
) -> dict[int, Tensor]:
    """Port -> (claimed node, its input slot or output index), each port mapped once, ports 0..n-1; adds
    the nodes that ports map to ``anchored``."""
    ports: dict[int, Tensor] = {}
    for key, index_map in maps.items():
        node = key if key in candidates else _resolve_key(key, candidates, what)
        mapped = len(ports)
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
        if len(ports) > mapped:
            anchored.add(node)
    # The ports are distinct ints >= 0 (index maps hold nothing else), so they are 0..n-1 exactly when none
    # is n or more.
    if ports and max(ports) >= len(ports):
        raise Refused(
            f"{what} maps ports {sorted(ports)}; fused ports must be numbered 0..n-1 without gaps"
        )
    return ports


def _fused_inputs(
    in_ports: dict[int, Tensor], candidates: dict[str, SourceNode]
) -> tuple[list[FusedInput], dict[Tensor, int]]:
    """Input ports point at data inputs the claimed nodes have: the fused inputs in port order, and the
    first port that reads each tensor."""
    inputs: list[FusedInput] = []
    port_of_input: dict[Tensor, int] = {}
    for port in range(len(in_ports)):  # the ports are 0..n-1 (_ports checked): in order without a sort
        node_name, slot = in_ports[port]
        node = candidates[node_name]
        if slot >= len(node.inputs):
            raise Refused(
                f"insert_inputs maps input {slot} of {node_name} ({node.op_type}), which has only "
                f"{len(node.inputs)} data input(s)"
            )
        tensor = node.inputs[slot]
        producer, index = tensor
        if not producer:
            raise Refused(f"insert_inputs maps input {slot} of {node_name} ({node.op_type}), which is an omitted optional input")
        if tensor not in port_of_input:
            port_of_input[tensor] = port
        inputs.append(FusedInput(port, producer, index, node_name, slot))
    return inputs, port_of_input


def _fused_output_ports(out_ports: dict[int, Tensor], candidates: dict[str, SourceNode]) -> dict[Tensor, int]:
    """Output ports point at outputs the claimed nodes have, and no output feeds two ports."""
    port_of_output: dict[Tensor, int] = {}
    for port in range(len(out_ports)):  # the ports are 0..n-1 (_ports checked)
        tensor = out_ports[port]
        node_name, index = tensor
        node = candidates[node_name]
        if node.output_names and index >= len(node.output_names):
            raise Refused(
                f"insert_outputs maps output {index} of {node_name} ({node.op_type}), which has only "
                f"{len(node.output_names)} output(s)"
            )
        if tensor in port_of_output:
            raise Refused(f"output {index} of {node_name} is mapped to two fused ports; map it once")
        port_of_output[tensor] = port
    return port_of_output


# ------------------------------------------------------------------------------------- kept and claimed
def _may_keep(candidates: dict[str, SourceNode], anchored: set[str], port_of_input: dict[Tensor, int]) -> bool:
    """False when :func:`_kept_nodes` would keep nothing, told without its walk: the first node it keeps (it
    keeps a node only when the node feeds a port, and before any other is kept that means through an edge
    whose tensor a fused input port reads) produces a fused input and is a candidate that no port maps. A
    dataflow rule's inputs come from outside the nodes it claims, so most results have no such node."""
    if len(anchored) >= len(candidates):  # every candidate is mapped by a port (and claimed)
        return False
    for producer, _ in port_of_input:
        if producer in candidates and producer not in anchored:
            return True
    return False


def _kept_nodes(
    candidates: dict[str, SourceNode],
    uses: Mapping[str, Mapping[str, Mapping[int, int]]],
    anchored: set[str],
    port_of_input: dict[Tensor, int],
) -> set[str]:
    """Nodes that only produce fused inputs stay outside the fusion (kept); the rest is claimed. Nodes that
    ports map (``anchored``) are claimed. ``uses``: node -> consumer -> {input slot: output index}."""
    kept: set[str] = set()
    for node_name in reversed(candidates):  # consumers first
        if node_name in anchored:
            continue
        feeds_port = False
        feeds_inside = False
        for consumer, keyed in uses[node_name].items():
            if consumer not in candidates:
                continue
            if consumer in kept:
                feeds_port = True
                continue
            for slot, index in keyed.items():
                if slot >= 0 and (node_name, index) in port_of_input:
                    feeds_port = True
                else:
                    feeds_inside = True
                    break
            if feeds_inside:
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
                c in candidates and c not in kept and (slot < 0 or (node_name, index) not in port_of_input)
                for c, keyed in uses[node_name].items()
                for slot, index in keyed.items()
            )
            if reads_inside or feeds_inside:
                kept.discard(node_name)
                changed = True
    return kept


# ------------------------------------------------------------------------------------------ boundary
def _boundary(
    result: FusionScopesResult,
    graph: ScopeGraph,
    plan: FusionPlan,
    candidates: dict[str, SourceNode],
    claimed: list[str],
    claimed_set: set[str],
    uses: Mapping[str, Mapping[str, Mapping[int, int]]],
    port_of_input: dict[Tensor, int],
    port_of_output: dict[Tensor, int],
) -> tuple[dict[str, None], dict[str, None], dict[str, None], dict[int, list[tuple[str, int]]], dict[int, list[str]],
           tuple[list[str], list[str]]]:
    """The edges that cross the boundary of the claimed nodes: ``(absorbed, control inputs, control outputs,
    consumers per output port, graph outputs per output port, (producers, consumers))``, the last two lists
    naming every producer and consumer outside the claimed nodes at each edge (for the cycle check, which
    then walks no edge again).

    Three checks share this walk over the claimed nodes, each reporting its first problem, the earlier
    check first: a value entering without a port is a constant (absorbed; control inputs are kept), a value
    used outside leaves through a fused output port, and so does a graph output produced inside.
    """
    absorbed: dict[str, None] = {}
    control_inputs: dict[str, None] = {}
    control_outputs: dict[str, None] = {}
    consumers_of: dict[int, list[tuple[str, int]]] = {port: [] for port in port_of_output.values()}
    graph_outputs_of: dict[int, list[str]] = {port: [] for port in port_of_output.values()}
    leaving: str | None = None
    graph_output: str | None = None
    constant_source = graph.constant_source
    graph_outputs_at = plan.graph_outputs_by_node.get
    dropped: frozenset[tuple[str, int]] | None = None
    producers: list[str] = []
    consumers: list[str] = []
    for node_name in claimed:
        node = candidates[node_name]
        for slot, tensor in enumerate(node.inputs):
            producer = tensor[0]
            if not producer or producer in claimed_set:
                continue
            producers.append(producer)
            if tensor in port_of_input:
                continue
            if dropped is None:
                dropped = result.dropped_inputs
            if constant_source(producer) is not None or (node_name, slot) in dropped:
                absorbed[producer] = None
                continue
            # The first kind of problem: no later node can report an earlier one.
            raise Refused(
                f"input {slot} of {node_name} ({node.op_type}) comes from {producer}:{tensor[1]} outside the "
                "fusion but no fused input port maps it; map it with insert_inputs"
            )
        for producer in node.control_inputs:
            if producer not in claimed_set:
                control_inputs[producer] = None
                producers.append(producer)
        for consumer, keyed in uses[node_name].items():
            if consumer in claimed_set:
                continue
            consumers.append(consumer)
            for slot, index in keyed.items():
                if slot < 0:
                    control_outputs[consumer] = None
                    continue
                port = port_of_output.get((node_name, index))
                if port is None:
                    if leaving is None:
                        leaving = (
                            f"intermediate value {node_name}:{index} is consumed outside the fusion by {consumer} "
                            f"(input {slot}); map it to a fused output port or leave the node out"
                        )
                    continue
                consumers_of[port].append((consumer, slot))
        outs = graph_outputs_at(node_name)
        if outs is None:
            continue
        for out in outs:
            port = port_of_output.get((out.node, out.index))
            if port is None:
                if graph_output is None:
                    graph_output = (
                        f"graph output {out.name!r} ({out.node}:{out.index}) is inside the fusion but no fused "
                        "output port maps it"
                    )
                continue
            graph_outputs_of[port].append(out.name)
    if leaving is not None:
        raise Refused(leaving)
    if graph_output is not None:
        raise Refused(graph_output)
    return absorbed, control_inputs, control_outputs, consumers_of, graph_outputs_of, (producers, consumers)


# ------------------------------------------------------------------------------------------ inner nodes
def _inner_nodes(
    result: FusionScopesResult,
    graph: ScopeGraph,
    plan: FusionPlan,
    known: KnownOpTypes | None,
    fusion: str,
    many: bool,
    claimed_set: set[str],
    inputs: list[FusedInput],
    out_ports: dict[int, Tensor],
) -> tuple[ResolvedInnerNode, ...]:
    """A many-to-many result has inner nodes that are wired consistently; a one-to-one result has none."""
    if not many:
        if result.inner_nodes:
            raise Refused(
                f"the result has {len(result.inner_nodes)} inner node(s) but type {result.op_type!r}; inner nodes need "
                f"type {SCOPE_TO_MULTI_NODES!r}"
            )
        return ()
    infos = result.inner_nodes
    if not infos:
        raise Refused(f"type {SCOPE_TO_MULTI_NODES!r} needs inner nodes; add them with add_inner_node")
    problem = result.check_inner_nodes_info()
    if problem is not None:
        raise Refused(problem)
    names = {info.name for info in infos}
    by_port = {item.port: item for item in inputs}
    used_in: list[int] = []
    used_out: list[int] = []
    dag: dict[str, dict[str, None]] = {}
    resolved = []
    for info in infos:
        if known is not None:
            reason = known.inner_refusal(info.name, info.op_type)
            if reason is not None:
                raise Refused(reason)
        full = info.full_name(fusion)
        if full in graph.source and full not in claimed_set:
            raise Refused(f"inner node name {full!r} collides with a graph node the fusion does not replace")
        user = plan.name_user(full)
        if user is not None:
            raise Refused(f"inner node name {full!r} is already used by fusion {user!r}")
        dag.setdefault(info.name, {})
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
            dag.setdefault(src, {})[info.name] = None
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
        resolved.append(ResolvedInnerNode(full, info.op_type, tuple(ins), tuple(outs), dict(info.attrs)))
    if sorted(used_in) != sorted(by_port):
        raise Refused(f"inner nodes read fused input ports {sorted(used_in)} but insert_inputs maps {sorted(by_port)}")
    if sorted(used_out) != sorted(out_ports):
        raise Refused(f"inner nodes write fused output ports {sorted(used_out)} but insert_outputs maps {sorted(out_ports)}")
    cycle_edges = find_cycle(dag)
    if cycle_edges:
        cycle = " -> ".join(u for u, _ in cycle_edges)
        raise Refused(f"the inner nodes form a cycle ({cycle})")
    return tuple(resolved)
