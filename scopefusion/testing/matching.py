"""Structural comparison of two IR graphs: pair their nodes, then report what does not pair.

Two graphs are equal when there is a one-to-one pairing of their nodes such that paired nodes have the
same op, the same number of inputs and outputs, inputs that read paired producers at the same output
index in the same slot (port order), the same control inputs (as a set), equal output types, equal
attributes (constants by value, floats within ``rtol``/``atol``; names and name-only attributes ignored
unless ``check_names``), and equal bodies; graph input ``i`` pairs with graph input ``i`` and graph
output ``i`` with graph output ``i``.

NOTE: how nodes are paired. A graph isomorphism search (VF2) on a few-thousand-node graph is slow and,
when the graphs differ, says only "not isomorphic". But an IR graph is anchored: its outputs are
ordered and every input slot has exactly one producer, so a breadth-first walk from the graph outputs
that pairs producer with producer, slot by slot, pairs every node an output depends on in O(nodes +
edges), deterministically. A candidate pair that disagrees in structure (op, ports, name when checked)
is not paired: each node keeps the other as its counterpart and the reason, and the walk stops there.
Then, in order:

1. forward: the unpaired users and control inputs of paired nodes are paired when their key
   (signature plus the pair ids of their producers) is unique on both sides, which any isomorphism
   extending the pairing would force (this pairs dead code, control-only nodes, and the nodes around
   an inserted or removed op, so an inserted op is the one node left over);
2. leftovers: what is still unpaired gets Weisfeiler-Lehman labels (a few rounds of refining each
   node's signature with its neighbours', the pairs so far as fixed anchors); a label held by one node
   on each side pairs them (forced, as labels are invariant), nodes in excess of the other side's
   multiset of labels are the difference, and the rest goes to networkx's ``MultiDiGraphMatcher``
   (VF2) with the anchors fixed, bounded to a number of steps (past it the nodes are reported
   unmatched, saying so);
3. near matches: leftover nodes with the same op, ports and paired producers, unique on both sides,
   are paired so that their attribute or type differences are reported as such.

Finally every pair's inputs, control inputs and the graph outputs are checked against the pairing, so
the verdict does not depend on the heuristics above: they only decide how fast a pairing is found and
which difference is reported first (nearest to a graph output).

NOTE: what is reported. A node left unpaired only because its consumer changed is not a difference
of its own: the weights a changed op reads (equal constants such as zero biases or unit scales, and
their ``Identity`` reads) may have twins elsewhere that leave them no unique counterpart. So an
unpaired node whose input cone (its signature and, recursively, its producers', down to paired
nodes) an unpaired node of the other side also has is left out of the lists, as long as some other
difference remains to be reported; the verdict is the same either way.
"""

from __future__ import annotations

from collections import Counter, defaultdict, deque
from typing import Iterable

import networkx as nx
from networkx.algorithms.isomorphism import MultiDiGraphMatcher

from ..ir.compare import types_equal
from ..ir.graph import Graph, Node
from ..ir.printer import format_value
from .diff import AttrDifference, GraphDiff, NodeRef, TypeDifference, UnmatchedNode
from .values import NAME_ATTRS, Tolerance, attr_difference, node_signature

__all__ = ["graph_diff"]

_WL_ROUNDS = 3
_VF2_BUDGET = 200_000
_PATH_STEPS = 6


def graph_diff(
    a: Graph,
    b: Graph,
    *,
    check_names: bool = False,
    check_attrs: bool = True,
    rtol: float = 0.0,
    atol: float = 0.0,
    ignore_attrs: Iterable[str] = (),
) -> GraphDiff:
    """How IR graph ``a`` differs from ``b`` (see the module docstring); ``.equal`` when it does not.

    Args:
        check_names: node names, graph names and name-only attributes (``_original_nodes``...) must match.
        check_attrs: compare attributes; without it only ops, wiring and types are compared (a
            constant's value is an attribute).
        rtol / atol: tolerance for floating-point attribute payloads and constants.
        ignore_attrs: attribute names never compared (on nodes and graphs).
    """
    for side, g in (("a", a), ("b", b)):
        if not isinstance(g, Graph):
            raise TypeError(f"graph_diff compares IR graphs; {side} is a {type(g).__name__} (pass model.graph for a Model)")
    ignore = frozenset(ignore_attrs) | (frozenset() if check_names else NAME_ATTRS)
    options = _Options(check_names, check_attrs, Tolerance(float(rtol), float(atol)), ignore)
    return _Matcher(a, b, options).run()


class _Options:
    __slots__ = ("check_names", "check_attrs", "tol", "ignore")

    def __init__(self, check_names: bool, check_attrs: bool, tol: Tolerance, ignore: frozenset[str]) -> None:
        self.check_names = check_names
        self.check_attrs = check_attrs
        self.tol = tol
        self.ignore = ignore

    def graphs_equal(self, x: Graph, y: Graph) -> bool:
        return _Matcher(x, y, self).run().equal


class _Side:
    """Per-graph indexes: schedule positions, control users, signatures, paths from the outputs."""

    def __init__(self, graph: Graph, options: _Options, prefix: str) -> None:
        self.graph = graph
        self.options = options
        self.prefix = prefix
        self.position = {node: i for i, node in enumerate(graph.nodes)}
        self.control_users: dict[Node, list[Node]] = defaultdict(list)
        for node in graph.nodes:
            for ctrl in node.control_inputs:
                self.control_users[ctrl].append(node)
        self._signatures: dict[Node, tuple] = {}
        self._parents: dict[Node, tuple[Node | None, int]] | None = None
        self._depths: dict[Node, int] = {}

    def signature(self, node: Node) -> tuple:
        sig = self._signatures.get(node)
        if sig is None:
            o = self.options
            sig = self._signatures[node] = node_signature(
                node, check_names=o.check_names, check_attrs=o.check_attrs, ignore=o.ignore, tol=o.tol
            )
        return sig

    def users(self, node: Node) -> list[tuple[Node, int, int]]:
        """``(consumer, slot, output index)`` of every output, then ``(control user, -1, -1)``, in a
        deterministic order."""
        out = [(user, slot, value.index) for value in node.outputs for user, slot in value.uses]
        out += [(user, -1, -1) for user in self.control_users.get(node, ())]
        return out

    def ref(self, node: Node) -> NodeRef:
        return NodeRef(node.name, node.op, self.path(node))

    def path(self, node: Node) -> str:
        """``return[i] <- %c.in[s] <- ...``: the shortest way from a graph output to ``node``."""
        parents = self._paths()
        if node not in parents:
            return ""
        steps: list[str] = []
        while True:
            consumer, slot = parents[node]
            if consumer is None:
                steps.append(f"return[{slot}]")
                break
            steps.append(f"%{consumer.name}.in[{slot}]")
            node = consumer
        steps.reverse()
        if len(steps) > _PATH_STEPS:
            keep = _PATH_STEPS // 2
            steps = steps[:keep] + [f"... {len(steps) - 2 * keep} steps ..."] + steps[-keep:]
        return self.prefix + " <- ".join(steps)

    def depth(self, node: Node) -> int:
        """Steps from the nearest graph output (a very large number when no output reads the node)."""
        self._paths()
        return self._depths.get(node, 1 << 30)

    def _paths(self) -> dict[Node, tuple[Node | None, int]]:
        if self._parents is None:
            parents: dict[Node, tuple[Node | None, int]] = {}
            depths: dict[Node, int] = {}
            queue: deque[Node] = deque()
            for i, value in enumerate(self.graph.outputs):
                if value.producer not in parents:
                    parents[value.producer] = (None, i)
                    depths[value.producer] = 0
                    queue.append(value.producer)
            while queue:
                node = queue.popleft()
                for slot, source in enumerate(node.inputs):
                    if source is not None and source.producer not in parents:
                        parents[source.producer] = (node, slot)
                        depths[source.producer] = depths[node] + 1
                        queue.append(source.producer)
            self._parents, self._depths = parents, depths
        return self._parents


class _Matcher:
    """One comparison of two graphs (bodies get their own); see the module NOTE for the phases."""

    def __init__(self, a: Graph, b: Graph, options: _Options, prefix_a: str = "", prefix_b: str = "") -> None:
        self.options = options
        self.a = _Side(a, options, prefix_a)
        self.b = _Side(b, options, prefix_b)
        self.ab: dict[Node, Node] = {}
        self.ba: dict[Node, Node] = {}
        self.pid_a: dict[Node, int] = {}
        self.pid_b: dict[Node, int] = {}
        self.order: list[tuple[Node, Node]] = []
        self.queue: deque[tuple[Node, Node]] = deque()
        self.bad: dict[Node, str] = {}  # a-node of a pair whose wiring disagrees with the pairing -> why
        self.hints_a: dict[Node, str] = {}  # why an unpaired node is unpaired
        self.hints_b: dict[Node, str] = {}
        self.counterpart_a: dict[Node, Node] = {}  # the node it was compared with, if any
        self.counterpart_b: dict[Node, Node] = {}
        self.interface: list[str] = []
        self.attrs: list[AttrDifference] = []
        self.types: list[TypeDifference] = []
        self.extra_a: list[UnmatchedNode] = []
        self.extra_unlisted = 0
        self.extra_b: list[UnmatchedNode] = []

    # ------------------------------------------------------------------ driver
    def run(self) -> GraphDiff:
        self._interface()
        a, b = self.a.graph, self.b.graph
        for va, vb in zip(a.inputs, b.inputs):
            self._link(va.producer, vb.producer)
        for i, (va, vb) in enumerate(zip(a.outputs, b.outputs)):
            if va.index != vb.index:
                self.interface.append(f"{self.a.prefix}graph output {i} is output {va.index} of its node in a, output {vb.index} in b")
            self._link(va.producer, vb.producer)
        self._drain()
        self._forward()
        while self._residual():
            self._forward()
        while self._near():
            self._forward()
        self._verify_edges()
        self._bodies()
        return self._result()

    def _interface(self) -> None:
        a, b, o = self.a.graph, self.b.graph, self.options
        where = self.a.prefix
        if o.check_names and a.name != b.name:
            self.interface.append(f"{where}graph names differ: {a.name!r} vs {b.name!r}")
        for what, xs, ys in (("inputs", a.inputs, b.inputs), ("outputs", a.outputs, b.outputs)):
            if len(xs) != len(ys):
                self.interface.append(f"{where}a has {len(xs)} graph {what}, b has {len(ys)}")
        if o.check_attrs:
            attrs_a = {k: v for k, v in a.attrs.items() if k not in o.ignore}
            attrs_b = {k: v for k, v in b.attrs.items() if k not in o.ignore}
            for key in sorted(set(attrs_a) | set(attrs_b)):
                x, y = attrs_a.get(key), attrs_b.get(key)
                if x is None or y is None:
                    self.interface.append(f"{where}graph attribute {key!r} is only in {'a' if y is None else 'b'}")
                else:
                    diff = attr_difference(x, y, o.tol, o.graphs_equal)
                    if diff is not None:
                        self.interface.append(f"{where}graph attribute {key!r} differs: {diff}")

    # ------------------------------------------------------------------ pairing
    def _link(self, na: Node, nb: Node) -> bool:
        """Pairs ``na`` with ``nb`` when neither is paired and they agree in structure (op, ports,
        names when checked); True when a new pair was made. A disagreeing candidate is remembered as
        each node's counterpart and reason, and left for the later phases, which may pair the nodes
        better (an inserted node, say)."""
        pa, pb = self.ab.get(na), self.ba.get(nb)
        if pa is nb:
            return False
        if pa is None and pb is None:
            reason = self._structure(na, nb)
            if reason is not None:
                if na not in self.hints_a:
                    self.hints_a[na], self.counterpart_a[na] = reason, nb
                if nb not in self.hints_b:
                    self.hints_b[nb], self.counterpart_b[nb] = reason, na
                return False
            self.ab[na], self.ba[nb] = nb, na
            self.pid_a[na] = self.pid_b[nb] = len(self.order)
            self.order.append((na, nb))
            self.queue.append((na, nb))
            return True
        if pa is not None and pb is None:
            self.hints_b.setdefault(nb, f"it is read where a reads %{na.name}, but %{na.name} already corresponds to b's %{pa.name}")
        elif pb is not None and pa is None:
            self.hints_a.setdefault(na, f"it is read where b reads %{nb.name}, but %{nb.name} already corresponds to a's %{pb.name}")
        return False

    def _drain(self) -> None:
        while self.queue:
            na, nb = self.queue.popleft()
            self._visit(na, nb)

    def _visit(self, na: Node, nb: Node) -> None:
        """Compares a new (structurally equal) pair's values and pairs its producers slot by slot."""
        self._values(na, nb)
        for va, vb in zip(na.inputs, nb.inputs):
            if va is not None and vb is not None:
                self._link(va.producer, vb.producer)

    def _structure(self, na: Node, nb: Node) -> str | None:
        if na.op != nb.op:
            return f"op {na.op} vs {nb.op}"
        if self.options.check_names and na.name != nb.name:
            return f"name {na.name!r} vs {nb.name!r}"
        if len(na.inputs) != len(nb.inputs):
            return f"{len(na.inputs)} inputs vs {len(nb.inputs)}"
        if len(na.outputs) != len(nb.outputs):
            return f"{len(na.outputs)} outputs vs {len(nb.outputs)}"
        for slot, (va, vb) in enumerate(zip(na.inputs, nb.inputs)):
            if (va is None) != (vb is None):
                return f"input {slot} is {'absent' if va is None else 'present'} in a, {'absent' if vb is None else 'present'} in b"
            if va is not None and vb is not None and va.index != vb.index:
                return f"input {slot} reads output {va.index} of its producer in a, output {vb.index} in b"
        if len(na.control_inputs) != len(nb.control_inputs):
            return f"{len(na.control_inputs)} control inputs vs {len(nb.control_inputs)}"
        if sorted(na.subgraphs) != sorted(nb.subgraphs):
            return f"bodies {sorted(na.subgraphs)} vs {sorted(nb.subgraphs)}"
        return None

    def _values(self, na: Node, nb: Node, record: bool = True) -> bool:
        """True when the output types and attributes of a structurally equal pair are equal; records the
        differences unless ``record`` is false."""
        equal = True
        for i, (va, vb) in enumerate(zip(na.outputs, nb.outputs)):
            if not types_equal(va.type, vb.type):
                if not record:
                    return False
                equal = False
                self.types.append(TypeDifference(self.a.ref(na), self.b.ref(nb), i, _type(va.type), _type(vb.type)))
        o = self.options
        if not o.check_attrs:
            return equal
        attrs_a = {k: v for k, v in na.attrs.items() if k not in o.ignore}
        attrs_b = {k: v for k, v in nb.attrs.items() if k not in o.ignore}
        for key in sorted(set(attrs_a) | set(attrs_b)):
            x, y = attrs_a.get(key), attrs_b.get(key)
            if x is not None and y is not None:
                detail = attr_difference(x, y, o.tol, o.graphs_equal)
                if detail is None:
                    continue
            else:
                detail = f"only {'a' if y is None else 'b'} has it"
            if not record:
                return False
            equal = False
            self.attrs.append(
                AttrDifference(
                    self.a.ref(na), self.b.ref(nb), key,
                    None if x is None else format_value(x), None if y is None else format_value(y), detail,
                )
            )  # fmt: skip
        return equal

    def _full_key(self, side: _Side, node: Node) -> tuple:
        """Signature plus the pair ids of its producers (and control inputs): equal under any pairing extension."""
        pid = self.pid_a if side is self.a else self.pid_b
        producers = tuple(None if v is None else (pid.get(v.producer), v.index) for v in node.inputs)
        controls = tuple(sorted(pid.get(c, -1) for c in node.control_inputs))
        return (side.signature(node), producers, controls)

    def _link_unique(self, xs: Iterable[Node], ys: Iterable[Node], key) -> int:
        """Pairs the unpaired nodes of ``xs`` and ``ys`` whose key is unique on both sides."""
        groups_a: dict[tuple, list[Node]] = defaultdict(list)
        groups_b: dict[tuple, list[Node]] = defaultdict(list)
        for n in dict.fromkeys(xs):
            if n not in self.ab:
                groups_a[key(self.a, n)].append(n)
        for n in dict.fromkeys(ys):
            if n not in self.ba:
                groups_b[key(self.b, n)].append(n)
        made = 0
        for k, group in groups_a.items():
            other = groups_b.get(k)
            if len(group) == 1 and other is not None and len(other) == 1:
                made += self._link(group[0], other[0])
        return made

    def _forward(self) -> None:
        """Pairs unreached nodes forward from paired producers (see the module NOTE)."""
        if len(self.ab) == len(self.a.graph.nodes) and len(self.ba) == len(self.b.graph.nodes):
            return
        i = 0
        while True:
            while i < len(self.order):
                na, nb = self.order[i]
                i += 1
                # Control inputs are a set, so the walk leaves them; the unpaired ones pair here.
                ctrl_a = [n for n in na.control_inputs if n not in self.ab]
                ctrl_b = [n for n in nb.control_inputs if n not in self.ba]
                if ctrl_a and ctrl_b and self._link_unique(ctrl_a, ctrl_b, self._full_key):
                    self._drain()
                users_a = [n for n, _, _ in self.a.users(na) if n not in self.ab]
                users_b = [n for n, _, _ in self.b.users(nb) if n not in self.ba]
                if users_a and users_b and self._link_unique(users_a, users_b, self._full_key):
                    self._drain()
            # Nodes with no paired neighbour at all (isolated constants, say): unique by key alone.
            if not self._link_unique(self._left(self.a), self._left(self.b), self._full_key):
                return
            self._drain()

    def _left(self, side: _Side) -> list[Node]:
        paired = self.ab if side is self.a else self.ba
        return [n for n in side.graph.nodes if n not in paired]

    # ------------------------------------------------------------------ leftovers: WL labels, then VF2
    def _residual(self) -> bool:
        """Pairs leftovers by WL labels, then through bounded VF2; True when it paired anything."""
        left_a, left_b = self._left(self.a), self._left(self.b)
        if not left_a or not left_b:
            return False
        ga, gb = self._residual_graph(self.a, left_a), self._residual_graph(self.b, left_b)
        wl_a, wl_b = _wl_labels(ga), _wl_labels(gb)
        count_a, count_b = Counter(wl_a[n] for n in left_a), Counter(wl_b[n] for n in left_b)
        # A label that one node holds on each side is forced: labels are invariant under the pairing.
        unique_b = {wl_b[n]: n for n in left_b if count_b[wl_b[n]] == 1}
        made = [self._link(n, unique_b[wl_a[n]]) for n in left_a if count_a[wl_a[n]] == 1 and wl_a[n] in unique_b]
        if any(made):
            self._drain()
            return True
        # Nodes whose label the other side has fewer of cannot all be paired: they are the difference.
        excess_a, excess_b = _excess(left_a, wl_a, count_b), _excess(left_b, wl_b, count_a)
        for nodes, hints in ((excess_a, self.hints_a), (excess_b, self.hints_b)):
            for n in nodes:
                hints.setdefault(n, "no node of the other graph has its op, attributes and neighbourhood")
        keep_a, keep_b = set(ga) - set(excess_a), set(gb) - set(excess_b)
        if not any(n in keep_a for n in left_a) or not any(n in keep_b for n in left_b):
            return False
        ga, gb = ga.subgraph(keep_a), gb.subgraph(keep_b)
        for g, labels in ((ga, wl_a), (gb, wl_b)):
            nx.set_node_attributes(g, {n: labels[n] for n in g}, "wl")
        matcher = _BoundedMatcher(ga, gb, node_match=self._node_match, edge_match=_edge_match)
        try:
            found = matcher.is_isomorphic()
            reason = "the parts of the graphs no output reaches are wired differently"
        except _SearchBudget:
            found = False
            reason = f"too many interchangeable nodes are left to pair them within {_VF2_BUDGET:,} VF2 steps"
        if not found:
            for n in left_a:
                self.hints_a.setdefault(n, reason)
            for n in left_b:
                self.hints_b.setdefault(n, reason)
            return False
        for x, y in matcher.mapping.items():
            if x not in self.ab:
                self._link(x, y)
        self._drain()
        return True

    def _near(self) -> bool:
        """Pairs leftover nodes that differ only in attributes or types (same op, ports and paired
        producers, unique on both sides), so the difference is reported as such; True when any paired."""
        left_a, left_b = self._left(self.a), self._left(self.b)
        if not left_a or not left_b:
            return False
        if self._link_unique(left_a, left_b, self._loose_key):
            self._drain()
            return True
        return False

    def _loose_key(self, side: _Side, node: Node) -> tuple:
        pid = self.pid_a if side is self.a else self.pid_b
        producers = tuple(None if v is None else (pid.get(v.producer), v.index) for v in node.inputs)
        return (node.op, node.name if self.options.check_names else None, producers, len(node.outputs))

    def _residual_graph(self, side: _Side, left: list[Node]) -> nx.MultiDiGraph:
        """The unpaired nodes with their edges, and their paired neighbours as anchors labelled by pair id."""
        pid = self.pid_a if side is self.a else self.pid_b
        g = nx.MultiDiGraph()
        left_set = set(left)

        def add(node: Node) -> None:
            if node not in g:
                g.add_node(node, label=("r", side.signature(node)) if node in left_set else ("p", pid[node]), node=node)

        for node in left:
            add(node)
            for slot, value in enumerate(node.inputs):
                if value is not None:
                    add(value.producer)
                    g.add_edge(value.producer, node, label=("d", value.index, slot))
            for ctrl in node.control_inputs:
                add(ctrl)
                g.add_edge(ctrl, node, label=("c",))
            for user, slot, index in side.users(node):
                if user not in left_set:
                    add(user)
                    g.add_edge(node, user, label=("c",) if slot < 0 else ("d", index, slot))
        return g

    def _node_match(self, x: dict, y: dict) -> bool:
        if x["label"] != y["label"] or x["wl"] != y["wl"]:
            return False
        if x["label"][0] == "p":
            return True
        na, nb = x["node"], y["node"]
        return self._structure(na, nb) is None and self._values(na, nb, record=False)

    # ------------------------------------------------------------------ verification and result
    def _verify_edges(self) -> None:
        """Checks the graph outputs and every good pair's inputs and control inputs against the pairing."""
        for i, (va, vb) in enumerate(zip(self.a.graph.outputs, self.b.graph.outputs)):
            pa, pb = va.producer, vb.producer
            if pa in self.ab and pb in self.ba and self.ab[pa] is not pb:
                self.interface.append(
                    f"{self.a.prefix}graph output {i} is %{pa.name} in a and %{pb.name} in b, which do not correspond"
                )
        for na, nb in self.order:
            if na in self.bad:
                continue
            for slot, (ia, ib) in enumerate(zip(na.inputs, nb.inputs)):
                if ia is None or ib is None:
                    continue
                pa, pb = ia.producer, ib.producer
                if pa in self.ab and pb in self.ba and self.ab[pa] is not pb:
                    self.bad[na] = f"input {slot} reads %{pa.name} in a and %{pb.name} in b, which do not correspond"
                    break
            else:
                ca = [c for c in na.control_inputs if c in self.ab]
                if len(ca) == len(na.control_inputs) and all(c in self.ba for c in nb.control_inputs):
                    if {self.ab[c] for c in ca} != set(nb.control_inputs):
                        self.bad[na] = "control inputs do not correspond"

    def _bodies(self) -> None:
        for na, nb in self.order:
            if na in self.bad or not na.subgraphs:
                continue
            for key in sorted(na.subgraphs):
                sub = _Matcher(
                    na.subgraphs[key], nb.subgraphs[key], self.options,
                    f"{self.a.path(na) or '%' + na.name} %{na.name}{{{key}}}: ",
                    f"{self.b.path(nb) or '%' + nb.name} %{nb.name}{{{key}}}: ",
                ).run()  # fmt: skip
                self.interface.extend(sub.interface)
                self.extra_a.extend(sub.unmatched_a)
                self.extra_unlisted += sub.unlisted
                self.extra_b.extend(sub.unmatched_b)
                self.attrs.extend(sub.attrs)
                self.types.extend(sub.types)

    def _reported_leftovers(self) -> tuple[list[Node], list[Node]]:
        """The unpaired nodes worth reporting on each side (see the module NOTE on what is reported)."""
        left_a, left_b = self._left(self.a), self._left(self.b)
        if not left_a or not left_b:
            return left_a, left_b
        cone_a, cone_b = self._cone_keys(self.a, left_a), self._cone_keys(self.b, left_b)
        keep_a = _excess(left_a, cone_a, Counter(cone_b[n] for n in left_b))
        keep_b = _excess(left_b, cone_b, Counter(cone_a[n] for n in left_a))
        if keep_a or keep_b or self.bad or self.attrs or self.types or self.interface:
            return keep_a, keep_b
        return left_a, left_b

    def _cone_keys(self, side: _Side, left: list[Node]) -> dict[Node, int]:
        """A hash per unpaired node of its input cone: its signature and its producers' cone keys (a
        paired producer by its pair id), computed without recursion; a cycle is cut at the repeated node."""
        pid = self.pid_a if side is self.a else self.pid_b
        keys: dict[Node, int] = {}
        open_nodes: set[Node] = set()

        def ref(p: Node) -> int:
            if p in pid:
                return hash(("p", pid[p]))
            return keys.get(p, hash(("cycle", side.signature(p))))

        for root in left:
            stack = [(root, False)]
            while stack:
                node, expanded = stack.pop()
                if node in keys:
                    continue
                if not expanded:
                    open_nodes.add(node)
                    stack.append((node, True))
                    producers = [v.producer for v in node.inputs if v is not None] + list(node.control_inputs)
                    stack.extend((p, False) for p in producers if p not in pid and p not in keys and p not in open_nodes)
                    continue
                open_nodes.discard(node)
                inputs = tuple(None if v is None else (ref(v.producer), v.index) for v in node.inputs)
                keys[node] = hash((side.signature(node), inputs, tuple(sorted(ref(c) for c in node.control_inputs))))
        return keys

    def _result(self) -> GraphDiff:
        # Nearest to a graph output first: disagreeing pairs, then nodes without a counterpart.
        a, b = self.a, self.b
        bad = sorted((na for na in self.bad), key=lambda n: (a.depth(n), a.position[n]))
        unmatched_a: list[UnmatchedNode] = []
        unmatched_b: list[UnmatchedNode] = []
        for na in bad:
            nb, reason = self.ab[na], self.bad[na]
            ra, rb = a.ref(na), b.ref(nb)
            unmatched_a.append(UnmatchedNode(ra, reason, rb))
            unmatched_b.append(UnmatchedNode(rb, reason, ra))
        left_a, left_b = self._reported_leftovers()
        unlisted = len(self._left(a)) - len(left_a) + len(self._left(b)) - len(left_b)
        sides = (
            (a, b, unmatched_a, self.hints_a, self.counterpart_a, left_a),
            (b, a, unmatched_b, self.hints_b, self.counterpart_b, left_b),
        )
        for side, other, out, hints, counterparts, leftovers in sides:
            left = sorted(leftovers, key=lambda n: (side.depth(n), side.position[n]))
            for n in left:
                reason = hints.get(n, "no node of the other graph corresponds to it")
                counterpart = counterparts.get(n)
                out.append(UnmatchedNode(side.ref(n), reason, None if counterpart is None else other.ref(counterpart)))
        bad_pairs = len(self.bad)
        return GraphDiff(
            tuple(unmatched_a + self.extra_a),
            tuple(unmatched_b + self.extra_b),
            tuple(self.attrs),
            tuple(self.types),
            tuple(self.interface),
            matched=len(self.order) - bad_pairs,
            unlisted=unlisted + self.extra_unlisted,
        )


def _type(t) -> str:
    return "?" if t is None else str(t)


class _SearchBudget(Exception):
    """VF2 ran out of steps."""


class _BoundedMatcher(MultiDiGraphMatcher):
    """VF2 that gives up after ``_VF2_BUDGET`` candidate pairs: its search is exponential at worst,
    and a comparison must end (the nodes left are then reported unmatched, saying so)."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.steps = 0

    def semantic_feasibility(self, g1_node, g2_node) -> bool:
        self.steps += 1
        if self.steps > _VF2_BUDGET:
            raise _SearchBudget
        return super().semantic_feasibility(g1_node, g2_node)


def _excess(nodes: list[Node], labels: dict[Node, int], other: Counter) -> list[Node]:
    """The nodes (in order) left over once each label is matched as often as ``other`` holds it."""
    budget = Counter(other)
    out = []
    for n in nodes:
        if budget[labels[n]] > 0:
            budget[labels[n]] -= 1
        else:
            out.append(n)
    return out


def _edge_match(x: dict, y: dict) -> bool:
    return sorted(d["label"] for d in x.values()) == sorted(d["label"] for d in y.values())


def _wl_labels(g: nx.MultiDiGraph) -> dict[Node, int]:
    """Weisfeiler-Lehman refinement of the node labels over in- and out-edges, ``_WL_ROUNDS`` rounds."""
    labels = {n: hash(d["label"]) for n, d in g.nodes(data=True)}
    anchors = {n for n, d in g.nodes(data=True) if d["label"][0] == "p"}  # fixed by the pairing: never refined
    for _ in range(_WL_ROUNDS):
        labels = {
            n: labels[n] if n in anchors else hash((
                labels[n],
                tuple(sorted((hash(d["label"]), labels[p]) for p, _, d in g.in_edges(n, data=True))),
                tuple(sorted((hash(d["label"]), labels[s]) for _, s, d in g.out_edges(n, data=True))),
            ))
            for n in g.nodes
        }  # fmt: skip
    return labels
