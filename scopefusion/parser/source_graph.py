"""The framework-neutral graph a frontend produces: :class:`SourceGraph` of :class:`SourceNode`.

A ``SourceGraph`` is what a model file says, decoded into Python objects, before any fusion:

* ``nodes``: every node in topological order (data and control edges; TF1 ``NextIteration`` back
  edges do not count). Each node has a unique ``name`` that keeps its scope path
  (``bert/encoder/layer_0/attention/...`` or ``/encoder/layers.0/self_attn/...``).
* a node's data inputs are ``(producer node name, producer output index)`` pairs, in input-slot
  order; control inputs are producer names.
* constants carry their value as a numpy array (``SourceNode.value``), ideally a read-only view
  of the file's bytes.
* graph inputs and outputs; the function library (TF) or model-local functions (ONNX); bodies of
  control-flow nodes as nested ``SourceGraph`` objects in ``SourceNode.subgraphs``.

The edges also live in two adjacency maps of plain dicts, built in one pass while loading:
``graph.out_edges[producer][consumer]`` and ``graph.in_edges[consumer][producer]`` are the same
``{consumer input slot: producer output index}`` dict (slot and index ``-1`` for a control edge), with
consumers and producers in first-edge order. Read these dicts, never change them: one with a single entry
is shared by every edge with that slot and index, in every graph. ``graph.nx`` makes a ``networkx.MultiDiGraph`` of them on
demand (key = slot, attribute ``index``), for analysis and tests; converting never needs it.

ONNX graph inputs and initializers are not nodes in ONNX; the ONNX frontend makes one synthetic node
per graph input (op type :data:`INPUT_OP`) and per initializer (op type :data:`INITIALIZER_OP`, with
``value`` set), named after the tensor, so every data input has a producer node.

A tensor that an ONNX subgraph (an ``If`` branch, a ``Loop`` body) reads from an enclosing graph gets a
synthetic node of op type :data:`OUTER_SCOPE_OP` in the subgraph, named after the tensor; the node
owning the subgraph has that tensor's producer among its ``control_inputs``, so order and reachability
in the enclosing graph see the implicit dependency.

An omitted optional ONNX input that comes before a given one (``Resize(X, "", "", sizes)``) is the
input :data:`ABSENT_INPUT` (``("", -1)``), which keeps the slots of the later inputs; it has no edge.
Trailing omitted inputs are dropped.
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, AbstractSet, Any, Iterable, Iterator, Mapping, NoReturn

import numpy as np

from ..dtypes import DType
from ..errors import ParseError
from ..records import FrozenRecord

if TYPE_CHECKING:
    import networkx

__all__ = [
    "ABSENT_INPUT",
    "BACK_EDGE_OPS",
    "CONTROL_SLOT",
    "FRAMEWORK_ONNX",
    "FRAMEWORK_TENSORFLOW",
    "MERGE_OPS",
    "NO_INPUTS",
    "FunctionRef",
    "OUTER_SCOPE_OP",
    "INITIALIZER_OP",
    "INPUT_OP",
    "GraphInput",
    "GraphOutput",
    "SourceGraph",
    "SourceNode",
    "is_back_edge_op_pair",
]

CONTROL_SLOT = -1
INPUT_OP = "Input"
INITIALIZER_OP = "Initializer"
OUTER_SCOPE_OP = "OuterScope"
ABSENT_INPUT = ("", -1)

#: ``SourceGraph.framework`` of a TensorFlow model and of an ONNX model.
FRAMEWORK_TENSORFLOW = "tensorflow"
FRAMEWORK_ONNX = "onnx"

#: A TF1 loop's back edge runs from one of these producers into a Merge: it is no data dependency for
#: ordering, cycle checks or building.
BACK_EDGE_OPS = frozenset({"NextIteration", "NextIterationV2", "RefNextIteration"})
MERGE_OPS = frozenset({"Merge", "RefMerge"})


#: The ``{slot: index}`` dict of a producer's only edge into a consumer, one per (slot, index) for the small
#: ones, shared by all graphs: most edges are the only one between their two nodes, and one dict per edge would
#: make the edge maps the largest part of a graph in memory.
_ONE_EDGE: dict[tuple[int, int], dict[int, int]] = {}
_SHARED_BELOW = 64  # slots and output indexes below this share their dict
_CONTROL_EDGE = (CONTROL_SLOT, CONTROL_SLOT)


def _one_edge(slot: int, index: int) -> dict[int, int]:
    """``{slot: index}``, shared when both are small (see _ONE_EDGE): read it, never change it."""
    if not (-1 <= slot < _SHARED_BELOW and -1 <= index < _SHARED_BELOW):
        return {slot: index}
    keyed = _ONE_EDGE.get((slot, index))
    if keyed is None:
        keyed = _ONE_EDGE[(slot, index)] = {slot: index}
    return keyed


class _UnchangeableEmptyList(list):
    """An empty list that refuses to grow (a ``TypeError``): :data:`NO_INPUTS`."""

    __slots__ = ()

    def _refuse(self, *args: Any, **kwargs: Any) -> NoReturn:
        raise TypeError("this empty list is shared by many nodes and must not change; assign a new list instead")

    append = extend = insert = __setitem__ = __iadd__ = __imul__ = _refuse


#: The ``inputs`` and ``control_inputs`` of the TF decoders' nodes that have none (constants; nearly every node
#: has no control input), and their ``output_names`` until they are named: one list equal to ``[]``, shared and
#: unchangeable, instead of one empty list per node for the garbage collector to walk.
NO_INPUTS: list[Any] = _UnchangeableEmptyList()


def _index_by_type(nodes: Iterable[SourceNode]) -> tuple[dict[str, list[SourceNode]], dict[str, int]]:
    """The nodes by op type, in the order given, and the index of each type's first node."""
    by_type: dict[str, list[SourceNode]] = {}
    firsts: dict[str, int] = {}
    for i, node in enumerate(nodes):
        bucket = by_type.get(node.op_type)
        if bucket is None:
            by_type[node.op_type] = [node]
            firsts[node.op_type] = i
        else:
            bucket.append(node)
    return by_type, firsts


def is_back_edge_op_pair(producer_op: str, consumer_op: str) -> bool:
    """True when an edge from a ``producer_op`` node into a ``consumer_op`` node is a TF1 loop back edge."""
    return producer_op in BACK_EDGE_OPS and consumer_op in MERGE_OPS


@dataclass(eq=False, slots=True)
class SourceNode:
    """One framework node.

    Attributes:
        name: unique name within its graph, scope path kept.
        op_type: framework op type (``"MatMul"``, ``"LayerNormalization"``...).
        inputs: data inputs as ``(producer name, output index)``, in slot order.
        control_inputs: names of control-dependency producers. (The TF decoders give a node without data
            or control inputs the shared :data:`NO_INPUTS`: assign a new list, never change it.)
        attrs: decoded attributes: Python scalars, str, bytes, tuples, numpy arrays, ``DType``,
            shapes as tuples (``None`` for unknown rank, ``-1`` for unknown dims), function names
            (TF ``func`` attrs as ``FunctionRef``), nested ``SourceGraph`` for ONNX graph attrs. Nodes with
            the same attributes may share one dict (see :mod:`.tf_node_decoder`): read it, never change it.
        domain: ONNX op domain (``""`` for the default domain); empty for TF.
        value: the constant's value for Const / Initializer / ONNX Constant nodes, else None.
        subgraphs: control-flow bodies by attribute name (``"body"``, ``"cond"``, ``"then_branch"``...);
            a list-valued attribute gives ``"branches:0"``, ``"branches:1"``...
        frame: TF1 control-flow frame name for Enter nodes (``frame_name`` attr), else None.
        output_names: ONNX tensor names of the outputs (TF: ``"name:i"``), one per output.
        device: the TF device string, kept for information.
        synthetic: True for nodes the frontend made (ONNX inputs, initializers and outer-scope reads;
            TF function arguments; the ``NoOp`` standing for an inlined call that has control consumers).
    """

    name: str
    op_type: str
    inputs: list[tuple[str, int]] = field(default_factory=list)
    control_inputs: list[str] = field(default_factory=list)
    attrs: dict[str, Any] = field(default_factory=dict)
    domain: str = ""
    value: np.ndarray | None = None
    subgraphs: dict[str, "SourceGraph"] = field(default_factory=dict)
    frame: str | None = None
    output_names: list[str] = field(default_factory=list)
    device: str = ""
    synthetic: bool = False

    @property
    def is_constant(self) -> bool:
        return self.value is not None

    def __repr__(self) -> str:
        return f"SourceNode({self.name!r}, {self.op_type!r})"


class FunctionRef(FrozenRecord):
    """A TF ``func`` attribute: the function's name and its own attributes."""

    _fields = ("name", "attrs")

    def __init__(self, name: str, attrs: tuple[tuple[str, Any], ...] = ()) -> None:
        self.name = name
        self.attrs = attrs


class GraphInput(FrozenRecord):
    """A graph input: its user-facing name, the node that produces it, and its declared type.

    ``shape`` is a tuple with ``-1`` for unknown dims, or None for unknown rank.
    """

    _fields = ("name", "node", "dtype", "shape", "index")

    def __init__(self, name: str, node: str, dtype: DType | None, shape: tuple[int, ...] | None, index: int = 0) -> None:
        self.name = name
        self.node = node
        self.dtype = dtype
        self.shape = shape
        self.index = index


class GraphOutput(FrozenRecord):
    """A graph output: its user-facing name and the producing node's output."""

    _fields = ("name", "node", "index")

    def __init__(self, name: str, node: str, index: int = 0) -> None:
        self.name = name
        self.node = node
        self.index = index


class SourceGraph:
    """A decoded framework graph; see the module docstring."""

    def __init__(
        self,
        nodes: Iterable[SourceNode],
        *,
        inputs: Iterable[GraphInput] = (),
        outputs: Iterable[GraphOutput] = (),
        functions: dict[str, "SourceGraph"] | None = None,
        framework: str = "",
        path: str = "",
        name: str = "",
        opset_imports: dict[str, int] | None = None,
        metadata: dict[str, Any] | None = None,
        back_edge_ops: frozenset[str] = BACK_EDGE_OPS,
        sort: bool = True,
    ) -> None:
        """Builds the graph and puts ``nodes`` in topological order.

        Raises:
            ParseError: a duplicate node name, an input naming a missing node, or a data cycle
                (edges from ``back_edge_ops`` producers are exempt), naming ``path`` and the node.
        """
        self.framework = framework
        self.path = path
        self.name = name
        self.inputs: list[GraphInput] = list(inputs)
        self.outputs: list[GraphOutput] = list(outputs)
        self.functions: dict[str, SourceGraph] = dict(functions or {})
        self.opset_imports: dict[str, int] = dict(opset_imports or {})
        self.metadata: dict[str, Any] = dict(metadata or {})
        node_list = list(nodes)
        by_name: dict[str, SourceNode] = {node.name: node for node in node_list}
        if len(by_name) != len(node_list):
            self._raise_duplicate(node_list)
        self._by_name = by_name
        #: Every node by name (read it, do not change it).
        self.by_name: dict[str, SourceNode] = by_name
        out_edges: dict[str, dict[str, dict[int, int]]] = {name: {} for name in by_name}
        in_edges: dict[str, dict[str, dict[int, int]]] = {}
        # Each node's place in the file, given in the pass below once its inputs are read: a producer without one
        # yet comes later in the file than its consumer (or is the consumer itself).
        position: dict[str, int] = {}
        # The nodes of each op type in file order, and the index of the first: the one index later stages read.
        by_type, firsts = _index_by_type(node_list)
        in_order = True  # whether every counted edge's producer comes earlier in the file than its consumer
        shared_edge = _ONE_EDGE.get  # _one_edge's answer when it has made it before (most edges), without a call
        control_edge = _one_edge(CONTROL_SLOT, CONTROL_SLOT)
        for i, node in enumerate(node_list):
            consumer = node.name
            producers: dict[str, dict[int, int]] = {}
            in_edges[consumer] = producers
            data_inputs = node.inputs
            if data_inputs:  # (a constant has none, and nearly every node no control input: their loops are skipped)
                slot = -1  # counted by hand: cheaper than enumerate's pairs
                for producer, index in data_inputs:
                    slot += 1
                    if index == -1 and not producer:
                        continue  # ABSENT_INPUT: an omitted optional input
                    keyed = producers.get(producer)
                    if keyed is None:
                        consumers = out_edges.get(producer)
                        if consumers is None:
                            raise ParseError(
                                f"{self._where()}: node {node.name!r} ({node.op_type}) input {slot} names "
                                f"{producer!r}:{index}, but no node has that name; the graph is incomplete"
                            )
                        producers[producer] = consumers[consumer] = shared_edge((slot, index)) or _one_edge(slot, index)
                        if in_order and producer not in position and (
                                node.op_type != "Merge" or by_name[producer].op_type not in back_edge_ops):
                            in_order = False
                    else:  # a second edge from the producer: its own dict (the first may be shared)
                        producers[producer] = out_edges[producer][consumer] = {**keyed, slot: index}
            controls = node.control_inputs
            if controls:
                for producer in controls:
                    keyed = producers.get(producer)
                    if keyed is None:
                        consumers = out_edges.get(producer)
                        if consumers is None:
                            raise ParseError(
                                f"{self._where()}: node {node.name!r} ({node.op_type}) has a control input "
                                f"^{producer}, but no node has that name; the graph is incomplete"
                            )
                        producers[producer] = consumers[consumer] = control_edge
                        if in_order and producer not in position and (
                                node.op_type != "Merge" or by_name[producer].op_type not in back_edge_ops):
                            in_order = False
                    else:
                        producers[producer] = out_edges[producer][consumer] = {**keyed, CONTROL_SLOT: CONTROL_SLOT}
            position[consumer] = i
        for out in self.outputs:
            if out.node not in by_name:
                raise ParseError(
                    f"{self._where()}: graph output {out.name!r} names node {out.node!r}, which does not exist"
                )
        #: ``producer -> consumer -> {consumer input slot: producer output index}`` (see the module docstring).
        self.out_edges = out_edges
        #: ``consumer -> producer -> the same dict as in out_edges``.
        self.in_edges = in_edges
        #: True when every edge, data or control, runs from an earlier to a later node of ``nodes`` (the
        #: graph was sorted and has no loop back edge), so no check of the order is needed.
        self.edges_run_forward = False
        # Edges out of these (TF1 loop back edges into a Merge) do not count for the order.
        exempt = {n.name for op in back_edge_ops if op in by_type for n in by_type[op]}
        self.nodes: list[SourceNode]
        if sort:
            self.nodes = self._toposort(node_list, exempt, position, in_order)
        else:  # kept as given: the positions above are their order, and the check above says if edges run forward
            self.nodes = node_list
            self._order = position
            self.edges_run_forward = in_order and not exempt
        # Whether out_edges (made in file order) lists the nodes in the order of ``nodes``.
        self._nodes_in_file_order = self.nodes is node_list
        self._out_edges_by_position: list[dict[str, dict[int, int]]] | None = None
        # The op-type index of the file order: the index of ``nodes`` too, unless sorting changed the order.
        self._file_by_type = by_type
        self._by_type: dict[str, list[SourceNode]] | None = by_type if self._nodes_in_file_order else None
        self._first_of_type: dict[str, int] | None = firsts if self._nodes_in_file_order else None

    def _raise_duplicate(self, node_list: list[SourceNode]) -> None:
        seen: dict[str, SourceNode] = {}
        for node in node_list:
            first = seen.setdefault(node.name, node)
            if first is not node:
                raise ParseError(
                    f"{self._where()}: two nodes are named {node.name!r} (op types "
                    f"{first.op_type} and {node.op_type}); node names must be unique, "
                    "re-export the model with unique names"
                )

    # ------------------------------------------------------------------ queries
    @property
    def is_onnx(self) -> bool:
        """Whether the graph was read from an ONNX model (else TensorFlow, or written by hand)."""
        return self.framework == FRAMEWORK_ONNX

    def node(self, name: str) -> SourceNode:
        try:
            return self._by_name[name]
        except KeyError:
            raise KeyError(f"no node named {name!r} in {self._where()}") from None

    def get(self, name: str) -> SourceNode | None:
        return self._by_name.get(name)

    def __contains__(self, name: object) -> bool:
        return name in self._by_name

    def __len__(self) -> int:
        return len(self.nodes)

    def __iter__(self) -> Iterator[SourceNode]:
        return iter(self.nodes)

    def consumers(self, name: str) -> list[tuple[str, int, int]]:
        """``(consumer name, consumer slot, producer output index)`` for every edge leaving ``name``.

        Control edges have slot and index ``-1``. Order: consumers in topological order, then slot.
        """
        order = self._order
        edges = [(v, slot, index) for v, keyed in self.out_edges[name].items() for slot, index in keyed.items()]
        edges.sort(key=lambda e: (order[e[0]], e[1]))
        return edges

    def producers(self, name: str) -> list[str]:
        """Distinct producer names of ``name`` (data and control)."""
        node = self.node(name)
        seen = dict.fromkeys(p for p, _ in node.inputs if p)
        seen.update(dict.fromkeys(node.control_inputs))
        return list(seen)

    @property
    def positions(self) -> Mapping[str, int]:
        """Every node's index in :attr:`nodes`, by name (read-only; do not modify). The table is the one the
        constructor made while ordering the nodes, so readers (the scope tree) share it instead of making
        another graph-sized one."""
        return self._order

    @property
    def out_edges_by_position(self) -> list[dict[str, dict[int, int]]]:
        """:attr:`out_edges` of every node by its index in :attr:`nodes` (``out_edges_by_position[i]`` is
        ``out_edges[nodes[i].name]``, the same dict; read it, do not change it), listed on first use. A reader
        that knows a node's index reads its consumers here instead of in the graph-sized table by name."""
        listed = self._out_edges_by_position
        if listed is None:
            out_edges = self.out_edges
            if self._nodes_in_file_order:  # out_edges lists the nodes in file order: the same order
                listed = list(out_edges.values())
            else:
                listed = [out_edges[node.name] for node in self.nodes]
            self._out_edges_by_position = listed
        return listed

    def op_types(self) -> dict[str, int]:
        counts: dict[str, int] = {}
        for node in self.nodes:
            counts[node.op_type] = counts.get(node.op_type, 0) + 1
        return counts

    @property
    def nodes_by_type(self) -> Mapping[str, list[SourceNode]]:
        """Every node by op type, each type's nodes in the order of :attr:`nodes`, the types in the order of
        their first node (read it, do not change it). The constructor lists them in file
        order, which is the order of ``nodes`` unless sorting changed it (then they are listed on first use),
        so later stages (graph inputs, the scope graph's index) find nodes by type without a pass of their own."""
        by_type = self._by_type
        if by_type is None:
            by_type, self._first_of_type = _index_by_type(self.nodes)
            self._by_type = by_type
        return by_type

    @property
    def first_of_type(self) -> Mapping[str, int]:
        """The index in :attr:`nodes` of the first node of each op type present (read it, do not change it)."""
        if self._first_of_type is None:
            self.nodes_by_type  # noqa: B018 (lists the nodes and their first indexes)
        assert self._first_of_type is not None
        return self._first_of_type

    @property
    def file_nodes_by_type(self) -> Mapping[str, list[SourceNode]]:
        """:attr:`nodes_by_type` in the order the constructor was given the nodes (the file's), whether or not
        sorting changed it (read it, do not change it)."""
        return self._file_by_type

    @property
    def op_types_present(self) -> AbstractSet[str]:
        """The op types of the graph's nodes, as a read-only set view."""
        return self._file_by_type.keys()

    def _where(self) -> str:
        return self.path or self.name or "<graph>"

    @property
    def nx(self) -> networkx.MultiDiGraph:
        """The edges as a ``networkx.MultiDiGraph`` (key = consumer slot, attribute ``index``), made on
        each call from :attr:`in_edges`, in the order the nodes were given; for analysis and tests."""
        import networkx as nx

        g = nx.MultiDiGraph()
        g.add_nodes_from(self._by_name)
        for consumer, producers in self.in_edges.items():
            for producer, keyed in producers.items():
                for slot, index in keyed.items():
                    g.add_edge(producer, consumer, key=slot, index=index)
        return g

    # ------------------------------------------------------------------ ordering
    def _toposort(self, node_list: list[SourceNode], exempt: set[str], position: dict[str, int],
                  in_order: bool) -> list[SourceNode]:
        """The nodes in topological order, ties broken by file order (the smallest position first), so the
        result is deterministic and close to the source; a file already in order (``in_order``) keeps it.
        ``exempt``: the producers of back edges; ``position``: each node's place in ``node_list``."""
        by_name = self._by_name
        in_edges = self.in_edges
        self.edges_run_forward = not exempt

        def counts(producer: str, consumer: str) -> bool:
            return producer not in exempt or by_name[consumer].op_type != "Merge"

        if in_order:
            self._order = position
            return node_list
        if exempt:  # counts() spelled out: only a Merge's edges from exempt producers do not count
            waiting = {
                node.name: sum(1 for p in in_edges[node.name] if p not in exempt) if node.op_type == "Merge"
                else len(in_edges[node.name])
                for node in node_list
            }
        else:  # every producer counts (in_edges holds the nodes in list order)
            waiting = {name: len(producers) for name, producers in in_edges.items()}
        ready = [i for i, node in enumerate(node_list) if not waiting[node.name]]
        heapq.heapify(ready)
        out_edges = self.out_edges
        ordered: list[SourceNode] = []
        while ready:
            node = node_list[heapq.heappop(ready)]
            ordered.append(node)
            back_edges = bool(exempt) and node.name in exempt  # its edges into a Merge do not count
            for consumer in out_edges[node.name]:
                if back_edges and by_name[consumer].op_type == "Merge":
                    continue
                left = waiting[consumer] - 1
                waiting[consumer] = left
                if not left:
                    heapq.heappush(ready, position[consumer])
        if len(ordered) < len(node_list):
            self._raise_cycle(counts if exempt else None)
        self._order = {n.name: i for i, n in enumerate(ordered)}
        return ordered

    def _raise_cycle(self, counts: Any) -> None:
        import networkx as nx

        dag = nx.DiGraph()
        dag.add_nodes_from(self._by_name)
        for consumer, producers in self.in_edges.items():
            dag.add_edges_from((p, consumer) for p in producers if counts is None or counts(p, consumer))
        cycle = nx.find_cycle(dag)
        path = " -> ".join([u for u, *_ in cycle] + [cycle[0][0]])
        raise ParseError(
            f"{self._where()}: the graph has a data cycle ({path}); only TF1 NextIteration back edges may "
            "form loops, fix the model's edges"
        )

    @property
    def _order(self) -> dict[str, int]:
        order = self.__dict__.get("_order_map")
        if order is None:
            order = {n.name: i for i, n in enumerate(self.nodes)}
            self.__dict__["_order_map"] = order
        return order

    @_order.setter
    def _order(self, value: dict[str, int]) -> None:
        self.__dict__["_order_map"] = value

    def __repr__(self) -> str:
        return f"SourceGraph({self._where()!r}, {len(self.nodes)} nodes, framework={self.framework!r})"
