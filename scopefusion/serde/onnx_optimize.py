"""Clean-up of a lowered ONNX graph, in place: what lowering op by op leaves behind.

In this order, to a fixed point:

* ``Identity`` nodes go: their readers read the input instead (one that writes a graph output renames
  its producer's output instead, when that is free to rename).
* Transposes move and cancel (:mod:`.onnx_transposes`): ``Transpose(Transpose(x))`` composes (and
  vanishes when the result is the identity); a transpose moves below the layout-agnostic op it feeds
  (element-wise ops, reductions, Pad, Concat, Softmax) when that does not add transposes; a transpose,
  reshape, squeeze, unsqueeze or cast of an initializer is folded into a new initializer.
* A ``Reshape`` whose target is computed from ``Shape`` but resolves to a constant gets it
  (:mod:`.onnx_shapes`).
* ``x + 0``, ``x - 0``, ``x · 1`` and ``x / 1`` with small constants go (a zero bias, an identity rescaling of the input).
* A node computing what an earlier node computes (same op, inputs, attributes) is replaced by it.
* Nodes whose outputs nobody reads, and unread initializers, are removed (in bodies too).
* Once all that has settled: spatial means become global pools, zero pads fold into the next ``Conv``
  (:mod:`.onnx_fuse_ops`). A spatial mean or zero pad no pass would rewrite before becomes a global pool or
  folds into its ``Conv`` first (``early_*`` there): the same graph, without the round of every pass after it.

Only the main graph is rewritten; a tensor a body (``Loop`` / ``If`` subgraph) reads by name keeps its
name and its producer. Value infos of tensors that no longer exist are dropped.

NOTE: speed. The passes work on :class:`~.onnx_node.Node`, the plain-Python node the emitters write
(:func:`optimize_nodes` takes them as written; :func:`optimize_graph` reads a ``GraphProto``'s once):
reading and rewriting protobuf messages node by node cost more than the rewrites themselves. The nodes
become ``NodeProto`` messages once, at the end. Initializers stay the graph's own ``TensorProto`` messages
(never copied); new ones are appended as they are made. The producers and readers of :class:`GraphIndex` are
made once and kept current by the sweeps that remove or rewire nodes (rebuilt only after the transposes'
sweep that turns transposes into reshapes), and a sweep is not run when the graph has none of the op types
it rewrites or nothing changed since it last found nothing. The value infos of the channels-first forms the writer held
(:class:`~.onnx_lowering.layout.ChannelsFirstType`) give the passes their shapes and are not written: the file
keeps the value infos of the values the IR names.
"""

from __future__ import annotations

import math
from collections import defaultdict
from itertools import chain
from typing import Callable

import numpy as np

from .onnx_attrs import initializer_array
from .onnx_fuse_ops import FUSED_OP_TYPES, early_global_pools, early_pads_into_convs, fuse_for_runtime
from .onnx_graph import IOShapes, ValueType, append_value_infos
from .onnx_lowering.layout import ChannelsFirstType
from .onnx_node import Initializer, Node, append_initializers, append_nodes
from .onnx_order import toposort
from .onnx_proto import (
    AttributeProto,
    GraphProto,
    ModelProto,
    NodeProto,
    from_onnx,
    infer_shapes,
    ir_version,
    make_opsetid,
    make_tensor_value_info,
    tensor_dtype_to_np_dtype,
)
from .onnx_prune import all_nodes, drop_stale_value_info, every_node_read, live_nodes, prune_body
from .onnx_shapes import constant_reshapes, shapes_for_transposes, shapes_from_types
from .onnx_transposes import push_transposes

__all__ = ["GraphIndex", "Node", "optimize_graph", "optimize_nodes", "toposort"]

_IDENTITY_SWEEP, _DUPLICATES_SWEEP, _DEAD_SWEEP = 0, 1, 6  # the numbers of those sweeps in optimize_nodes
_FOLDABLE = frozenset({"Transpose", "Reshape", "Squeeze", "Unsqueeze", "Cast", "Identity"})
_NEUTRAL = {"Add": (0, True), "Sub": (0, False), "Mul": (1, True), "Div": (1, False)}  # value, either side
# The op types the sweeps of optimize_nodes (by number) rewrite: a graph without any of them gives them nothing
# to find. The others (duplicates, transposes, dead nodes) may find something whatever the op types; duplicates
# only in a graph with two nodes of one op type.
_REWRITES: dict[int, frozenset[str]] = {_IDENTITY_SWEEP: frozenset({"Identity"}), 3: frozenset({"Reshape"}),
                                        4: frozenset(_NEUTRAL), 5: _FOLDABLE}
_EARLY = frozenset({"ReduceMean", "ReduceMax", "Pad"})  # what the early_* rewrites of onnx_fuse_ops rewrite
MAX_FOLD_ELEMENTS = 1 << 26
_CACHED_ELEMENTS = 4096


class GraphIndex:
    """The nodes (:class:`Node`), producers, readers and initializers of one ``GraphProto``; the nodes go back
    into the graph with :meth:`write_back`. ``left_out`` names initializers the writer left out as no node reads
    them (:meth:`.GraphWriter.write_nodes`): the index acts as if it held them until the first sweep of unread
    ones (:func:`_remove_dead`), which reports their removal, and a fresh name made before it avoids theirs; so
    the clean-up takes the same steps and makes the same names. ``io_shapes``: :attr:`.GraphWriter.io_shapes`."""

    def __init__(self, graph: GraphProto, nodes: list[Node] | None = None,
                 value_infos: "list[ValueType] | None" = None, initializers: list[Initializer] | None = None,
                 left_out: "list[str] | tuple[str, ...]" = (), io_shapes: "IOShapes | None" = None) -> None:
        self.graph = graph
        self.left_out: list[str] | None = list(left_out) if left_out else None  # until the first unread sweep
        # The initializers, in order: the graph's own, then ``initializers`` (not yet in the graph), then new ones.
        self._in_graph = [Initializer.of_proto(t) for t in graph.initializer]
        self.inits: list[Initializer] = self._in_graph + list(initializers or ())
        self.nodes: list[Node] = [Node.of(n) for n in graph.node] if nodes is None else nodes
        self.value_infos = value_infos  # those not yet in the graph (written at the end), or None
        self._arrays: dict[str, np.ndarray] = {}  # small initializers' values, read once
        self.neutral: dict[tuple[Initializer, int], bool] = {}  # (initializer, n): it is small and all n
        self.outputs = {o.name for o in graph.output}
        self.inputs = {i.name for i in graph.input}
        self.pinned = {name for node in self.nodes if node.body_reads is not None for name in node.body_reads}
        self.initializers: dict[str, Initializer] = {t.name: t for t in self.inits}
        # Known tensor shapes, None for an unknown dim. No pass changes a shape's list in place (each records a
        # new one): tensors of one type share one list (types are interned, many tensors share one).
        self.shapes: dict[str, list[int | None]] = {}
        by_type: dict[object, list[int | None]] = {}
        for name, t in value_infos or ():
            found = by_type.get(t)
            if found is None:
                if t.rank is None:
                    continue
                dims = t.shape
                found = by_type[t] = list(dims) if not dims or min(dims) >= 0 else [d if d >= 0 else None for d in dims]
            self.shapes[name] = found
        written = io_shapes if io_shapes is not None else {}
        for infos in (graph.value_info, graph.input, graph.output):
            for info in infos:
                if info.name in written:  # what reading the message's shape gives, without reading it
                    shape = written[info.name]
                    if shape is not None:
                        self.shapes[info.name] = shape
                    continue
                t = info.type.tensor_type
                if info.type.HasField("tensor_type") and t.HasField("shape"):
                    self.shapes[info.name] = [d.dim_value if d.WhichOneof("value") == "dim_value" else None
                                              for d in t.shape.dim]
        shapes = self.shapes
        for init in self.inits:
            array = init.array
            shapes[init.name] = list(array.shape if array is not None else init.dims)
        # Tensors whose shapes inference has seen, or that a pass derived from one it has seen: running
        # inference again would not complete them.
        self.settled: set[str] = set()
        self._taken_names: set[str] | None = None  # every name in use, made on the first fresh name
        self.only_unread_removed = False  # the last sweep of dead nodes removed initializers only, index alike
        # Whether each tensor has one producer and no node reads what a later one writes (a writer's nodes, which the
        # passes keep so): then a node is dead only when nothing reads what it writes (see onnx_prune.every_node_read).
        self.acyclic = False
        self.rebuild()

    def infer_shapes(self, opset: int) -> None:
        """Completes :attr:`shapes` with ONNX's shape inference (data propagation on: shape vectors computed
        from ``Shape`` are followed), run on a copy of the graph without its large weights."""
        model = ModelProto(ir_version=ir_version())  # helper.make_model's, built in place
        model.opset_import.append(make_opsetid("", opset))
        light = model.graph
        append_nodes(light, self.nodes)
        light.input.extend(self.graph.input)
        light.output.extend(self.graph.output)
        light.value_info.extend(self.graph.value_info)
        if self.value_infos:
            append_value_infos(light, self.value_infos)
        for t in self.inits:
            if math.prod(t.dims) <= 64:  # np.prod's value (dims are small non-negative ints), without numpy's call
                t.write_into(light.initializer.add())  # what appending t.to_proto() gives, without the copy
            else:
                light.input.append(make_tensor_value_info(t.name, t.data_type, list(t.dims)))
        self.settled = set(self.inputs) | set(self.initializers)
        self.settled.update(name for node in self.nodes for name in node.output)
        try:
            inferred = infer_shapes(model, data_prop=True, own=False)  # its shapes are only read
        except Exception:  # inference is only a hint here
            return
        if inferred is None:
            return
        shapes = self.shapes
        for info in inferred.graph.value_info:
            old = shapes.get(info.name)
            if old is not None and None not in old:
                continue  # known whole already: no inferred shape has fewer unknown dims
            t = info.type.tensor_type
            if info.type.HasField("tensor_type") and t.HasField("shape"):
                # A nonzero dim_value is set: HasField is asked only of a zero (0 when set, else None).
                known = [d.dim_value or (0 if d.HasField("dim_value") else None) for d in t.shape.dim]
                if old is None or known.count(None) < old.count(None):
                    shapes[info.name] = known

    def derive_shape(self, name: str, shape: list[int | None], source: str) -> None:
        """Records the shape of new tensor ``name``, computed from that of ``source``."""
        self.shapes[name] = shape
        if source in self.settled:
            self.settled.add(name)

    def write_back(self) -> None:
        """Replaces the graph's nodes by :attr:`nodes` and its initializers by :attr:`inits`."""
        del self.graph.node[:]
        append_nodes(self.graph, self.nodes)
        if not self._in_graph:  # the export's case: every initializer is still to be written
            append_initializers(self.graph, self.inits)
            self._in_graph = list(self.inits)
            return
        kept = set(self.inits)  # initializers hash by identity
        initializers = self.graph.initializer
        for k in reversed(range(len(self._in_graph))):  # in place: no copy of the weights
            if self._in_graph[k] not in kept:
                del initializers[k]
        in_graph = set(self._in_graph)
        append_initializers(self.graph, [t for t in self.inits if t not in in_graph])
        self._in_graph = list(self.inits)

    def rebuild(self) -> None:
        # _index, inlined; an absent slot ("") is indexed too, then dropped: the same maps, fewer tests.
        nodes = self.nodes
        producer: dict[str, Node] = {name: node for node in nodes for name in node.output}
        readers: dict[str, list[Node]] = defaultdict(list)
        get = readers.get  # found lists are appended to, new names set: no default-factory call per read
        for node in nodes:
            for name in node.input:
                found = get(name)
                if found is None:
                    readers[name] = [node]
                else:
                    found.append(node)
        producer.pop("", None)
        readers.pop("", None)
        self.producer = producer
        self.readers = readers

    def constant(self, name: str) -> np.ndarray | None:
        """The value of initializer ``name`` (None when it is none); small values are read once and shared,
        so callers must not modify the array."""
        found = self._arrays.get(name)
        if found is not None:
            return found
        t = self.initializers.get(name)
        if t is None:
            return None
        if t.array is not None:
            return t.array
        array = initializer_array(t.proto)  # type: ignore[arg-type]
        if array.size <= _CACHED_ELEMENTS:
            self._arrays[name] = array
        return array

    def add_initializer(self, array: np.ndarray, name: str) -> str:
        added = Initializer.of_array(name, array)
        self.inits.append(added)
        self.initializers[name] = added
        return name

    def fresh(self, base: str) -> str:
        taken = self._taken_names
        if taken is None:
            taken = self._taken()
        n = 1
        name = f"{base}_1"
        while name in taken:
            n += 1
            name = f"{base}_{n}"
        taken.add(name)
        return name

    def fresh_names(self) -> None:
        """Takes every name in use now for :meth:`fresh` to avoid: those of nodes dropped next stay taken."""
        self._taken()

    def _taken(self) -> set[str]:
        if self._taken_names is not None:
            return self._taken_names
        names = set(self.initializers) | self.inputs | self.outputs
        if self.left_out:
            names.update(self.left_out)
        nodes = self.nodes
        # Gathered a field at a time (the same names as a loop adding each node's, in fewer Python steps).
        names.update(chain.from_iterable([node.input for node in nodes]))
        names.update(chain.from_iterable([node.output for node in nodes]))
        names.update([node.name for node in nodes])
        update, add = names.update, names.add
        for node in all_nodes([n for n in self.nodes if n.body_reads is not None]):  # and their bodies' nodes
            update(node.input)
            update(node.output)
            add(node.name)
        self._taken_names = names
        return names

    def free(self, name: str) -> bool:
        """True when ``name`` is an ordinary intermediate: no graph output or input, not read by a body."""
        return name not in self.outputs and name not in self.inputs and name not in self.pinned

    def set_input(self, node: Node, slot: int, name: str) -> None:
        """Makes ``node`` read ``name`` at ``slot``, keeping the readers index current."""
        old = node.input[slot]
        if old == name:
            return
        node.input[slot] = name
        if old and old not in node.input:
            self.readers[old] = _without(self.readers[old], node)
        if name and node not in self.readers[name]:  # a Node has no __eq__: ``in`` tests identity
            self.readers[name].append(node)

    def set_inputs(self, node: Node, names: list[str]) -> None:
        """Makes ``node`` read ``names`` (a new list), keeping the readers index current."""
        old = node.input
        node.input = names
        readers = self.readers
        for name in old:
            if name and name not in names:
                found = readers.get(name)
                if found:
                    readers[name] = _without(found, node)
        for name in names:
            if name and name not in old:
                readers[name].append(node)

    def drop_nodes(self, kept: list[Node], dropped: list[Node]) -> None:
        """Keeps only the nodes ``kept`` (in that order), ``dropped`` being the others: what :meth:`rebuild`
        would index of ``kept`` without rebuilding it (the entries of the nodes dropped go)."""
        self.nodes = kept
        producer, readers = self.producer, self.readers
        for node in dropped:
            for name in node.output:
                if name and producer.get(name) is node:
                    del producer[name]
            for name in node.input:
                found = readers.get(name) if name else None
                if found:
                    readers[name] = _without(found, node)

    def set_output(self, node: Node, k: int, name: str) -> None:
        """Renames ``node``'s output ``k`` to ``name``, keeping the producers index current."""
        old = node.output[k]
        node.output[k] = name
        if self.producer.get(old) is node:
            del self.producer[old]
        self.producer[name] = node

    def add_node(self, node: NodeProto | Node) -> Node:
        """Appends ``node`` (out of order: the caller restores it with :func:`toposort`); returns it as a :class:`Node`."""
        added = node if isinstance(node, Node) else Node.of(node)
        self.nodes.append(added)
        self._index(added)
        return added

    def _index(self, node: Node) -> None:
        for name in node.output:
            if name:
                self.producer[name] = node
        for name in node.input:
            if name:
                self.readers[name].append(node)

    def replace_uses(self, old: str, new: str) -> None:
        """Every reader of ``old`` reads ``new`` instead (the readers index follows)."""
        moved = self.readers.pop(old, [])
        for node in moved:
            for k, name in enumerate(node.input):
                if name == old:
                    node.input[k] = new
        known = self.readers[new]
        known.extend([n for n in moved if n not in known])  # ``in`` tests identity (see set_input)


def optimize_graph(graph: GraphProto, opset: int = 23) -> None:
    """Runs the clean-up (see the module docstring) on ``graph`` in place (scopefusion's message or the onnx
    package's)."""
    own = from_onnx(graph)
    nodes = [Node.of(n) for n in own.node]
    del own.node[:]
    optimize_nodes(own, nodes, opset)
    if own is not graph:
        graph.ParseFromString(own.SerializeToString())


def optimize_nodes(graph: GraphProto, nodes: list[Node], opset: int = 23,
                   value_infos: "list[ValueType] | None" = None, initializers: list[Initializer] | None = None,
                   left_out: "list[str] | tuple[str, ...]" = (), io_shapes: "IOShapes | None" = None,
                   written: bool = False) -> None:
    """Runs the clean-up on ``graph`` whose nodes are ``nodes`` (not yet in the graph, which has none), whose
    value infos are ``graph.value_info`` and then ``value_infos``, and whose initializers are
    ``graph.initializer`` and then ``initializers`` (those two not yet in the graph), less the unread ones
    ``left_out`` names (see :class:`GraphIndex`, also for ``io_shapes``); writes what is left into the graph.
    ``written``: the nodes are a writer's (:meth:`.GraphWriter.write_nodes`), so each tensor has one producer and
    no node reads what a later one writes (see :func:`.onnx_prune.every_node_read`)."""
    index = GraphIndex(graph, nodes, value_infos, initializers, left_out, io_shapes)
    index.acyclic = written
    shapes_from_types(index)
    # A pass that changed nothing changes nothing again until another pass changes something: ``state`` counts
    # the changes, ``idle[k]`` is the count at which pass k last changed nothing (then it is not run again).
    state = 0
    idle: dict[int, int] = {}
    # NOTE: ``dead_free`` is the count at which the graph last held no dead node and no unread initializer, as a
    # sweep of dead nodes leaves it; removing identities keeps that (an Identity the sweep kept is reachable, so
    # a free one has a reader, which reads its input instead; one writing a graph output gives its name to its
    # input's producer; each initializer read stays read), any other change ends it. Until then the next sweep
    # of dead nodes would find nothing: it counts as run and idle.
    dead_free = -1
    # The op types in the graph at count ``typed_at`` (every change of the graph counts one).
    types: set[str] = set()
    typed_at = -1

    skips_types = _skips_absent_types()
    if not skips_types or not _EARLY.isdisjoint(_op_types(index)):
        early_pads_into_convs(index)
        early_global_pools(index)  # its new nodes in order

    def run(k: int, sweep: Callable[[GraphIndex], bool]) -> bool:
        nonlocal state, dead_free, types, typed_at
        if idle.get(k) == state or (k == _DEAD_SWEEP and _dead_free(dead_free, state)):
            idle[k] = state
            return False
        rewrites = _REWRITES.get(k) if skips_types else None
        if rewrites is not None or (k == _DUPLICATES_SWEEP and skips_types):
            if typed_at != state:
                types, typed_at = _op_types(index), state
            if rewrites.isdisjoint(types) if rewrites is not None else len(types) == len(index.nodes):
                idle[k] = state  # it would find none of its op types, or (duplicates) no two nodes of one type
                return False
        found = sweep(index)
        if found:
            state += 1
        if k == _DEAD_SWEEP or (found and k == _IDENTITY_SWEEP and dead_free == state - 1):
            dead_free = state
        if not found:
            idle[k] = state
        return found

    rounds = 0
    while rounds < 100:
        rounds += 1
        changed = run(_IDENTITY_SWEEP, _remove_identities)
        changed |= run(_DUPLICATES_SWEEP, _merge_duplicates)
        if run(2, push_transposes):
            toposort(index)  # the sweep keeps the index current; only the order of the nodes it added is restored
            changed = True
        changed |= run(3, constant_reshapes)
        changed |= run(4, _remove_neutral_ops)
        changed |= run(5, _fold_initializer_ops)
        if run(_DEAD_SWEEP, _remove_dead):
            if not changed and index.only_unread_removed and rounds < 100:
                # The next round would find nothing either: it would see what this one saw less unread
                # initializers, which no pass reads, through the same index. It counts, each pass left idle.
                rounds += 1
                idle.update(dict.fromkeys(range(7), state))
            else:
                changed = True
        if not changed:
            if shapes_for_transposes(index, opset):
                state += 1  # new shapes: every pass may find more
            if push_transposes(index, to_reshapes=True):
                state += 1
                index.rebuild()
                continue
            if typed_at != state:
                types, typed_at = _op_types(index), state
            count = len(index.nodes)
            if (skips_types and FUSED_OP_TYPES.isdisjoint(types)) or not fuse_for_runtime(index):
                break
            state += 1
            if len(index.nodes) != count:  # new nodes come last (a rewrite only reads what its node's inputs read)
                toposort(index)
    index.write_back()
    present = {name for node in index.nodes for name in node.output}
    drop_stale_value_info(graph, present=present)
    if value_infos:
        # A channels-first form's type is there for the passes' shapes only: not written (see the module NOTE).
        append_value_infos(graph, [(name, t) for name, t in value_infos
                                   if name in present and type(t) is not ChannelsFirstType])
    if all(node.body_reads is None for node in index.nodes):
        return  # no bodies to prune
    for node, proto in zip(index.nodes, graph.node):
        if node.body_reads is not None:
            for attr in proto.attribute:
                for body in ([attr.g] if attr.type == AttributeProto.GRAPH else list(attr.graphs)):
                    prune_body(body)


def _op_types(index: GraphIndex) -> set[str]:
    return {node.op_type for node in index.nodes}


def _skips_absent_types() -> bool:
    """True: a sweep is not run when the graph has none of the op types it rewrites (:data:`_REWRITES`), nor that of
    duplicates without two nodes of one op type. A function of its own so that a test can turn the skip off."""
    return True


def _dead_free(dead_free: int, state: int) -> bool:
    """True when the graph holds no dead node and no unread initializer (see the NOTE in :func:`optimize_nodes`).
    A function of its own so that a test can turn the skip off and compare the output of every sweep run."""
    return dead_free == state


def _remove_identities(index: GraphIndex) -> bool:
    """Removes identities (see the module docstring); the index follows each removal."""
    changed = False
    keep = []
    for node in list(index.nodes):
        if node.op_type != "Identity" or node.domain not in ("", "ai.onnx"):
            keep.append(node)
            continue
        x, y = node.input[0], node.output[0]
        if index.free(y):
            index.replace_uses(y, x)
            index.readers[x] = _without(index.readers.get(x, []), node)
            if index.producer.get(y) is node:
                del index.producer[y]
            changed = True
            continue
        producer = index.producer.get(x)
        if (producer is not None and index.free(x) and y not in index.inputs and y not in index.pinned
                and all(r is node for r in index.readers.get(x, []))):
            for k, name in enumerate(producer.output):
                if name == x:
                    index.set_output(producer, k, y)
            index.readers.pop(x, None)
            changed = True
            continue
        keep.append(node)
    if changed:
        index.nodes = keep
    return changed


_RANDOM = {"RandomNormal", "RandomUniform", "RandomNormalLike", "RandomUniformLike", "Multinomial", "Bernoulli",
           "Dropout"}


def _merge_duplicates(index: GraphIndex) -> bool:
    """A default-domain node computing what an earlier one computes (same op, inputs and attributes; no body,
    nothing random) is read no more: its readers read the earlier node's outputs (it dies unread)."""
    # The nodes alike so far, by (op type, output count, inputs...): the first one alone, more in a list.
    seen: dict[tuple, "Node | list[Node]"] = {}
    changed = False
    for node in index.nodes:
        if node.domain not in ("", "ai.onnx") or node.op_type in _RANDOM or node.body_reads is not None:
            continue
        # Nodes alike but for their attributes are rare: their attributes are compared only then.
        alike = (node.op_type, len(node.output), *node.input)
        found = seen.get(alike)
        if found is None:
            seen[alike] = node
            continue
        if isinstance(found, list):
            group = found
        else:
            group = seen[alike] = [found]
        key = node.attr_key()
        first = next((g for g in group if g.attr_key() == key), None)
        if first is None:
            group.append(node)
            continue
        if not all(index.free(name) for name in node.output if name):
            continue
        if any(name and not kept for name, kept in zip(node.output, first.output)):
            continue  # an output the earlier node leaves out
        for name, kept in zip(node.output, first.output):
            if name and (index.readers.get(name) or name in index.pinned):
                index.replace_uses(name, kept)
                changed = True
    return changed


def _remove_neutral_ops(index: GraphIndex) -> bool:
    """``x + 0``, ``x - 0``, ``x · 1``, ``x / 1`` (a small constant of that value everywhere, which does not
    broadcast ``x`` to a larger shape) become ``Identity`` (removed by the identity sweep)."""
    changed = False
    for node in index.nodes:
        spec = _NEUTRAL.get(node.op_type)
        if spec is None or node.domain not in ("", "ai.onnx") or len(node.input) != 2:
            continue
        neutral, either = spec
        for data, const in ((0, 1), (1, 0)) if either else ((0, 1),):
            t = index.initializers.get(node.input[const])
            if t is None or node.input[data] in index.initializers:
                continue
            key = (t, neutral)  # the initializer itself (kept alive here), so the answer is its own
            holds = index.neutral.get(key)
            if holds is None:
                holds = index.neutral[key] = _holds_only(index, t, neutral)
            if not holds:
                continue
            shape = index.shapes.get(node.input[data])
            dims = list(t.dims)
            if dims and (shape is None or len(dims) > len(shape)
                         or any(c != 1 and c != d for c, d in zip(dims[::-1], shape[::-1]))):
                continue  # it could broadcast x to a larger shape
            constant = node.input[const]
            node.op_type = "Identity"
            node.input = [node.input[data]]
            if constant not in node.input:
                index.readers[constant] = _without(index.readers.get(constant, []), node)
            changed = True
            break
    return changed


def _holds_only(index: GraphIndex, t: Initializer, neutral: int) -> bool:
    """True when initializer ``t`` is small and holds ``neutral`` everywhere (a number array)."""
    if math.prod(t.dims) > _CACHED_ELEMENTS:
        return False
    value = index.constant(t.name)
    if value is None or value.dtype.kind not in "iuf":
        return False
    # The first element decides most cases at once (a number's Python value is exact, so it compares alike).
    if value.size and value.item(0) != neutral:
        return False
    return np.count_nonzero(value if neutral == 0 else value != neutral) == 0


def _fold_initializer_ops(index: GraphIndex) -> bool:
    """Replaces nodes that rearrange or cast initializers only by their result (a new initializer of the
    output's name); the index follows."""
    folded: list[Node] = []
    keep = []
    constant = index.constant
    for node in list(index.nodes):
        if node.op_type in _FOLDABLE and node.domain in ("", "ai.onnx") and len(node.output) == 1:
            values = []
            for name in node.input:
                value = constant(name) if name else None
                if value is None:
                    break  # not every input is an initializer: the node stays
                values.append(value)
            else:
                values = values if values and values[0].size <= MAX_FOLD_ELEMENTS else []
            if len(values) == len(node.input) and values:
                out = _fold(node, values)
                if out is not None and index.free(node.output[0]):
                    index.add_initializer(out, node.output[0])
                    folded.append(node)
                    continue
        keep.append(node)
    if folded:
        index.drop_nodes(keep, folded)
    return bool(folded)


def _fold(node: Node, values: list) -> np.ndarray | None:
    x = values[0]
    op = node.op_type
    if op == "Transpose":
        return np.transpose(x, node.attr("perm"))
    if op == "Identity":
        return x
    if op == "Cast":
        to = node.attr("to")
        if to is None:
            raise KeyError("to")
        return x.astype(tensor_dtype_to_np_dtype(to))
    if op == "Reshape":
        shape = [int(d) for d in values[1]]
        if not node.attr("allowzero", 0):
            shape = [x.shape[i] if d == 0 else d for i, d in enumerate(shape)]
        return x.reshape(shape)
    if op == "Unsqueeze" and len(values) == 2:
        out = x
        rank = x.ndim + len(values[1])
        for axis in sorted(int(a) % rank for a in values[1]):
            out = np.expand_dims(out, axis)
        return out
    if op == "Squeeze":
        if len(values) == 2:
            return np.squeeze(x, tuple(int(a) % x.ndim for a in values[1]))
        return np.squeeze(x)
    return None


def _remove_dead(index: GraphIndex) -> bool:
    """Drops nodes no graph output (or body) depends on, then unread initializers; one walk up from the outputs
    (none when every node is live, told without it: :func:`.onnx_prune.every_node_read`)."""
    if index.acyclic and every_node_read(index):
        read = set(index.outputs)  # what the walk gathers when every node is live: what they all read
        read.update(chain.from_iterable([n.input if n.body_reads is None else n.input + n.body_reads
                                         for n in index.nodes]))
        changed = nodes_removed = False
    else:
        read, live = live_nodes(index)
        changed = nodes_removed = len(live) != len(index.nodes)
        if changed:
            index.drop_nodes([n for n in index.nodes if n in live], [n for n in index.nodes if n not in live])
    initializers = index.inits
    if len(index.initializers) != len(initializers) or not read.issuperset(index.initializers):
        # Some initializer is unread (when the index holds every one's name, no two alike, all are read).
        kept = []
        for t in initializers:
            if t.name in read:
                kept.append(t)
            else:
                index.initializers.pop(t.name, None)
                index._arrays.pop(t.name, None)
        if len(kept) != len(initializers):
            index.inits = kept
            changed = True
    if index.left_out is not None:  # the unread initializers the writer left out would go now
        index.left_out = None
        changed = True
    # Initializers alone removed leave the index as it was: no pass reads an unread initializer.
    index.only_unread_removed = changed and not nodes_removed
    return changed


def _without(readers: list[Node], node: Node) -> list[Node]:
    """A new list of ``readers`` less ``node``; most often ``node`` is the only one, found without a scan."""
    if len(readers) == 1 and readers[0] is node:
        return []
    return [r for r in readers if r is not node]
