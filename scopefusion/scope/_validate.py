"""Validation of one :class:`FusionScopesResult` against the graph and the fusions accepted before it.

Every check that fails refuses the result with one sentence (:class:`Refused`); nothing is applied
half-way. :func:`validate_result` runs one check per refusal reason, in this order: problems the rule
recorded, the op type, the name, what the result claims, the index maps, nodes it only reads (kept),
ports on edges that do not enter the fusion, inputs that enter without a port, intermediate values
that leave without a port, graph outputs without a port, nodes claimed by an earlier fusion, name
collisions, many-to-many inner nodes, and last (the only check that is not local) whether contracting
the claimed nodes would close a cycle.

NOTE: the cycle check contracts a many-to-many fusion into one vertex too, as if its inner nodes were
one op. That is conservative: inner nodes that do not depend on each other could legally sit on both
sides of an outside path, and such a result is refused.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

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


@dataclass
class _Draft:
    """What validation has learned so far about one result."""

    result: FusionScopesResult
    graph: ScopeGraph
    plan: FusionPlan
    op_type: str = ""
    name: str = ""
    candidates: dict[str, SourceNode] = field(default_factory=dict)
    uses: dict[str, list[tuple[str, int, int]]] = field(default_factory=dict)
    in_ports: dict[int, Tensor] = field(default_factory=dict)
    out_ports: dict[int, Tensor] = field(default_factory=dict)
    inputs: list[FusedInput] = field(default_factory=list)
    port_of_input: dict[Tensor, int] = field(default_factory=dict)
    port_of_output: dict[Tensor, int] = field(default_factory=dict)
    kept: set[str] = field(default_factory=set)
    claimed: list[str] = field(default_factory=list)
    claimed_set: set[str] = field(default_factory=set)
    absorbed: dict[str, None] = field(default_factory=dict)
    control_inputs: dict[str, None] = field(default_factory=dict)
    control_outputs: dict[str, None] = field(default_factory=dict)
    consumers_of: dict[int, list[tuple[str, int]]] = field(default_factory=dict)
    graph_outputs_of: dict[int, list[str]] = field(default_factory=dict)
    inner_nodes: tuple[ResolvedInnerNode, ...] = ()
    contraction: Contraction | None = None

    @property
    def many(self) -> bool:
        return self.op_type == SCOPE_TO_MULTI_NODES

    def in_order(self, names: dict[str, None] | set[str]) -> tuple[str, ...]:
        return tuple(sorted(names, key=self.graph.tree.positions.__getitem__)) if names else ()


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
    draft = _Draft(result, graph, plan)
    check_recorded_problems(draft)
    check_op_type(draft, known_types)
    check_name(draft)
    collect_claims(draft)
    check_index_maps(draft)
    find_kept_nodes(draft)
    check_ports_enter(draft)
    check_unmapped_inputs(draft)
    check_values_leaving(draft)
    check_graph_outputs(draft)
    check_earlier_claims(draft)
    check_name_collisions(draft)
    check_inner_nodes(draft, known_types)
    check_cycle(draft)
    assert draft.contraction is not None
    return _accepted(draft), draft.claimed, draft.contraction


# ------------------------------------------------------------------------------------ the result itself
def check_recorded_problems(d: _Draft) -> None:
    """The rule recorded a problem while filling the result."""
    if d.result.problems:
        raise Refused(d.result.problems[0])


def check_op_type(d: _Draft, known: KnownOpTypes | None) -> None:
    """The result names a valid op type (a known fused type, when the pass manager knows them)."""
    kind = d.result.op_type
    if not isinstance(kind, str) or not kind or kind == SCOPE_INVALID_TYPE:
        raise Refused(f"the result has an invalid type {kind!r}; set result.type to the fused op type")
    d.op_type = kind
    if not d.many and known is not None:
        reason = known.fused_refusal(kind)
        if reason is not None:
            raise Refused(reason)


def check_name(d: _Draft) -> None:
    """The result has a name."""
    name = d.result.name
    if not isinstance(name, str) or not name:
        raise Refused("the result has no name; set result.name")
    d.name = name


def collect_claims(d: _Draft) -> None:
    """Every node the result names exists, and it names some."""
    wanted: dict[str, SourceNode] = {}
    for scope in d.result.scopes:
        for node in scope.all_nodes:
            wanted[node.name] = node
    get = d.graph.get
    for node_name in d.result.nodes:
        claimed = get(node_name) if isinstance(node_name, str) else None
        if claimed is None:
            raise Refused(f"the result claims node {node_name!r}, which is not in the graph")
        wanted[node_name] = claimed
    if not wanted:
        raise Refused("the result claims no nodes (its scopes are empty and it names no nodes)")
    if len(d.result.scopes) + len(d.result.nodes) > 1:  # one scope's all_nodes is in graph order already
        wanted = {n: wanted[n] for n in sorted(wanted, key=d.graph.tree.positions.__getitem__)}
    d.candidates = wanted
    consumers = d.graph.shared_consumers
    d.uses = {n: consumers(n) for n in wanted}


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


def _ports(maps: dict[str, list[int]], candidates: dict[str, SourceNode], what: str) -> dict[int, Tensor]:
    """Port -> (claimed node, its input slot or output index), each port mapped once, ports 0..n-1."""
    ports: dict[int, Tensor] = {}
    for key, index_map in maps.items():
        node = _resolve_key(key, candidates, what)
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


def check_index_maps(d: _Draft) -> None:
    """Input and output maps name claimed nodes, number ports 0..n-1 once each, and point at slots and
    outputs the nodes have; no output feeds two ports."""
    d.in_ports = _ports(d.result._inputs, d.candidates, "insert_inputs")  # read only: no copies
    d.out_ports = _ports(d.result._outputs, d.candidates, "insert_outputs")
    for port in sorted(d.in_ports):
        node_name, slot = d.in_ports[port]
        node = d.candidates[node_name]
        if slot >= len(node.inputs):
            raise Refused(
                f"insert_inputs maps input {slot} of {node_name} ({node.op_type}), which has only "
                f"{len(node.inputs)} data input(s)"
            )
        producer, index = node.inputs[slot]
        if not producer:
            raise Refused(f"insert_inputs maps input {slot} of {node_name} ({node.op_type}), which is an omitted optional input")
        d.port_of_input.setdefault((producer, index), port)
        d.inputs.append(FusedInput(port, producer, index, node_name, slot))
    for port in sorted(d.out_ports):
        node_name, index = d.out_ports[port]
        node = d.candidates[node_name]
        if node.output_names and index >= len(node.output_names):
            raise Refused(
                f"insert_outputs maps output {index} of {node_name} ({node.op_type}), which has only "
                f"{len(node.output_names)} output(s)"
            )
        if (node_name, index) in d.port_of_output:
            raise Refused(f"output {index} of {node_name} is mapped to two fused ports; map it once")
        d.port_of_output[(node_name, index)] = port


# ------------------------------------------------------------------------------------- kept and claimed
def find_kept_nodes(d: _Draft) -> None:
    """Nodes that only produce fused inputs stay outside the fusion (kept); the rest is claimed."""
    candidates, uses, port_of_input = d.candidates, d.uses, d.port_of_input
    anchored = {n for n, _ in d.in_ports.values()} | {n for n, _ in d.out_ports.values()}
    kept: set[str] = set()
    for node_name in reversed(candidates):  # consumers first
        if node_name in anchored:
            continue
        feeds_port = False
        feeds_inside = False
        for consumer, slot, index in uses[node_name]:
            if consumer not in candidates:
                continue
            if consumer in kept or (slot >= 0 and (node_name, index) in port_of_input):
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
                c in candidates and c not in kept and (slot < 0 or (node_name, index) not in port_of_input)
                for c, slot, index in uses[node_name]
            )
            if reads_inside or feeds_inside:
                kept.discard(node_name)
                changed = True
    d.kept = kept
    d.claimed = [n for n in candidates if n not in kept]
    d.claimed_set = set(d.claimed)


def check_ports_enter(d: _Draft) -> None:
    """Every fused input port sits on an edge that enters the fusion."""
    for item in d.inputs:
        if item.producer in d.claimed_set:
            raise Refused(
                f"fused input port {item.port} is fed by {item.producer}:{item.index}, which the fusion "
                "claims; map ports only on edges that enter the fusion"
            )


# ------------------------------------------------------------------------------------------ boundary
def check_unmapped_inputs(d: _Draft) -> None:
    """A value entering the fusion without a port is a constant (absorbed); control inputs are kept."""
    for node_name in d.claimed:
        node = d.candidates[node_name]
        for slot, (producer, index) in enumerate(node.inputs):
            if not producer or producer in d.claimed_set or (producer, index) in d.port_of_input:
                continue
            if d.graph.constant_source(producer) is not None or (node_name, slot) in d.result.dropped_inputs:
                d.absorbed[producer] = None
                continue
            raise Refused(
                f"input {slot} of {node_name} ({node.op_type}) comes from {producer}:{index} outside the "
                "fusion but no fused input port maps it; map it with insert_inputs"
            )
        for producer in node.control_inputs:
            if producer not in d.claimed_set:
                d.control_inputs[producer] = None


def check_values_leaving(d: _Draft) -> None:
    """A value used outside the fusion leaves through a fused output port."""
    d.consumers_of = {port: [] for port in d.out_ports}
    for node_name in d.claimed:
        for consumer, slot, index in d.uses[node_name]:
            if consumer in d.claimed_set:
                continue
            if slot < 0:
                d.control_outputs[consumer] = None
                continue
            port = d.port_of_output.get((node_name, index))
            if port is None:
                raise Refused(
                    f"intermediate value {node_name}:{index} is consumed outside the fusion by {consumer} "
                    f"(input {slot}); map it to a fused output port or leave the node out"
                )
            d.consumers_of[port].append((consumer, slot))


def check_graph_outputs(d: _Draft) -> None:
    """A graph output produced inside the fusion leaves through a fused output port."""
    d.graph_outputs_of = {port: [] for port in d.out_ports}
    for node_name in d.claimed:
        for out in d.plan.graph_outputs_at(node_name):
            port = d.port_of_output.get((out.node, out.index))
            if port is None:
                raise Refused(
                    f"graph output {out.name!r} ({out.node}:{out.index}) is inside the fusion but no fused "
                    "output port maps it"
                )
            d.graph_outputs_of[port].append(out.name)


# ------------------------------------------------------------------------------ earlier fusions, names
def check_earlier_claims(d: _Draft) -> None:
    """No claimed node belongs to a fusion accepted before."""
    for node_name in d.claimed:
        owner = d.plan.owner(node_name)
        if owner is not None:
            raise Refused(f"node {node_name} is already claimed by fusion {owner!r}")


def check_name_collisions(d: _Draft) -> None:
    """The fusion's name is new: no other fusion's, no node's it leaves in place."""
    user = d.plan.name_user(d.name)
    if user is not None:
        raise Refused(f"fusion name {d.name!r} is already used by fusion {user!r}; choose another name")
    if d.name in d.graph.source and d.name not in d.claimed_set:
        raise Refused(f"fusion name {d.name!r} collides with a graph node the fusion does not replace")


# ------------------------------------------------------------------------------------------ inner nodes
def check_inner_nodes(d: _Draft, known: KnownOpTypes | None) -> None:
    """A many-to-many result has inner nodes that are wired consistently; a one-to-one result has none."""
    result = d.result
    if not d.many:
        if result.inner_nodes:
            raise Refused(
                f"the result has {len(result.inner_nodes)} inner node(s) but type {d.op_type!r}; inner nodes need "
                f"type {SCOPE_TO_MULTI_NODES!r}"
            )
        return
    infos = result.inner_nodes
    if not infos:
        raise Refused(f"type {SCOPE_TO_MULTI_NODES!r} needs inner nodes; add them with add_inner_node")
    problem = result.check_inner_nodes_info()
    if problem is not None:
        raise Refused(problem)
    fusion = d.name
    names = {info.name for info in infos}
    by_port = {item.port: item for item in d.inputs}
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
        if full in d.graph.source and full not in d.claimed_set:
            raise Refused(f"inner node name {full!r} collides with a graph node the fusion does not replace")
        user = d.plan.name_user(full)
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
                if index not in d.out_ports:
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
    if sorted(used_out) != sorted(d.out_ports):
        raise Refused(f"inner nodes write fused output ports {sorted(used_out)} but insert_outputs maps {sorted(d.out_ports)}")
    cycle_edges = find_cycle(dag)
    if cycle_edges:
        cycle = " -> ".join(u for u, _ in cycle_edges)
        raise Refused(f"the inner nodes form a cycle ({cycle})")
    d.inner_nodes = tuple(resolved)


# ------------------------------------------------------------------------------------------------ cycle
def check_cycle(d: _Draft) -> None:
    """Contracting the claimed nodes into one vertex closes no cycle."""
    cycle, contraction = d.plan.find_cycle(d.name, d.claimed)
    if cycle is not None:
        raise Refused(f"fusing would create a cycle ({' -> '.join(cycle)})")
    d.contraction = contraction


def _accepted(d: _Draft) -> AcceptedFusion:
    outputs = []
    position = d.graph.tree.positions
    for port in sorted(d.out_ports):
        node_name, index = d.out_ports[port]
        found = sorted(d.consumers_of[port], key=lambda c: (position[c[0]], c[1]))
        outputs.append(FusedOutput(port, node_name, index, tuple(found), tuple(d.graph_outputs_of[port])))
    return AcceptedFusion(
        name=d.name,
        op_type=d.op_type,
        pass_name=d.result.pass_name,
        description=d.result.description,
        scopes=tuple(s.name for s in d.result.scopes),
        claimed=tuple(d.claimed),
        kept=tuple(n for n in d.candidates if n in d.kept),
        inputs=tuple(d.inputs),
        outputs=tuple(outputs),
        absorbed=d.in_order(d.absorbed),
        control_inputs=d.in_order(d.control_inputs),
        control_outputs=d.in_order(d.control_outputs),
        inner_nodes=d.inner_nodes,
        attrs=dict(d.result.attrs),
        captures=dict(d.result.captures),
    )
