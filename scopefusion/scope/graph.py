"""``ScopeGraph``: a SourceGraph together with its scope tree and an op-type index, built once."""

from __future__ import annotations

from typing import AbstractSet, Any, Iterable, Mapping, Sequence

from ..collector import call_collector_paused
from ..errors import FusionError
from ..parser.source_graph import SourceGraph, SourceNode
from .tree import Scope, ScopeTree

__all__ = ["PASS_THROUGH_OPS", "ScopeGraph"]

#: Ops that read a constant without changing it (frozen TF graphs read every weight through one).
PASS_THROUGH_OPS = frozenset({"Identity"})
_MAX_READS = 16


class ScopeGraph:
    """The scope tree of one :class:`SourceGraph` plus the indexes that rules share.

    Attributes:
        source: the SourceGraph, unchanged.
        tree: the :class:`ScopeTree` built from its node names (on first use, for a graph built with
            ``tree=False``).
        memo: answers that depend only on the graph, kept while a :class:`~.manager.PassManager` runs its
            passes so that passes asking the same question share one answer (a dataflow pattern's match or
            near miss at an anchor, per scope); the run drops it when it ends (:meth:`release_answers`).
    """

    def __init__(
        self, source: SourceGraph, tree: ScopeTree | None, by_type: Mapping[str, list[SourceNode]],
        firsts: Mapping[str, int] | None = None,
    ) -> None:
        self.source = source
        self._tree = tree
        self._positions = source.positions
        self._by_type = by_type
        self._firsts = firsts  # see first_positions
        self._succ = source.out_edges
        self._by_name = source.by_name
        self._chains: dict[str, list[SourceNode]] = {}
        self._consumers: dict[str, list[tuple[str, int, int]]] = {}
        self.memo: dict[Any, Any] = {}

    @classmethod
    def build(cls, source: SourceGraph, *, tree: bool = True) -> ScopeGraph:
        """Builds the scope tree in one pass over ``source.nodes`` (the op-type index is the source's); with
        ``tree`` False the tree is built on first use (a graph read only by dataflow, a loop body, may never need it).

        Python's cyclic collector is paused meanwhile, as for :meth:`.PassManager.run`: the tree's scopes
        all stay alive, and the collector's full passes over a large graph's objects would make building
        grow faster than the graph."""
        if not isinstance(source, SourceGraph):
            raise FusionError(f"ScopeGraph.build needs a SourceGraph, got {type(source).__name__}")
        return call_collector_paused(cls._build, source, tree)

    @classmethod
    def _build(cls, source: SourceGraph, tree: bool) -> ScopeGraph:
        # The op-type index is the source's, listed while its edges were (for a graph in file order), not
        # listed again here: both are read-only.
        scope_tree = ScopeTree.from_nodes(source.nodes, positions=source.positions) if tree else None
        return cls(source, scope_tree, source.nodes_by_type, source.first_of_type)

    @property
    def tree(self) -> ScopeTree:
        tree = self._tree
        if tree is None:
            tree = self._tree = ScopeTree.from_nodes(self.source.nodes, positions=self.source.positions)
        return tree

    @property
    def positions(self) -> Mapping[str, int]:
        """Every node's index in graph order (the source's :attr:`~.SourceGraph.positions`, which the tree
        shares; read-only)."""
        return self._positions

    # ------------------------------------------------------------------ nodes
    def node(self, name: str) -> SourceNode:
        found = self._by_name.get(name)
        return found if found is not None else self.source.node(name)  # the source's error when absent

    def get(self, name: str) -> SourceNode | None:
        return self._by_name.get(name)

    def nodes_by_type(self, op_type: str) -> Sequence[SourceNode]:
        """Every node of ``op_type``, in graph order (from the index; no scan)."""
        return self._by_type.get(op_type, ())

    def op_types(self) -> list[str]:
        """Op types present in the graph, in order of first appearance."""
        return list(self._by_type)

    @property
    def present_types(self) -> AbstractSet[str]:
        """The op types present in the graph, as a read-only set view (a membership test costs one look-up)."""
        return self._by_type.keys()

    def first_positions(self) -> Mapping[str, int]:
        """The index in graph order of the first node of each op type present (read-only; do not modify), as
        the pass over the nodes that listed them by type recorded it (else found from that index once)."""
        firsts = self._firsts
        if firsts is None:
            position = self._positions
            firsts = self._firsts = {t: position[nodes[0].name] for t, nodes in self._by_type.items() if nodes}
        return firsts

    def op_type_counts(self) -> frozenset[tuple[str, int]]:
        """``(op type, number of nodes of that type)`` for each op type present: everything that
        :attr:`present_types` and the sizes of :meth:`nodes_by_type` tell, as one hashable value (made once
        per run and kept in the memo), so that answers read from those alone can be kept per value."""
        counts: frozenset[tuple[str, int]] | None = self.memo.get("op type counts")
        if counts is None:
            counts = self.memo["op type counts"] = frozenset((t, len(nodes)) for t, nodes in self._by_type.items())
        return counts

    def present_type_set(self) -> frozenset[str]:
        """:attr:`present_types` as a frozenset, made once per run and kept in the memo, so that answers read
        from the op types alone can be kept per value (see :meth:`op_type_counts`)."""
        present: frozenset[str] | None = self.memo.get("op types present")
        if present is None:
            present = self.memo["op types present"] = frozenset(self._by_type)
        return present

    def constant_chain(self, name: str) -> list[SourceNode]:
        """``[name's node, ..., constant]``: the pass-through reads (``Identity`` with one data input and
        no control input) from node ``name`` down to a constant, or ``[]`` when it reads no constant."""
        return list(self.shared_constant_chain(name))

    def shared_constant_chain(self, name: str) -> list[SourceNode]:
        """:meth:`constant_chain`, found once per node and shared by every caller: do not modify it."""
        chain = self._chains.get(name)
        if chain is None:
            chain = self._chains[name] = self._constant_chain(name)
        return chain

    def _constant_chain(self, name: str) -> list[SourceNode]:
        chain: list[SourceNode] = []
        for _ in range(_MAX_READS):
            node = self.node(name)
            chain.append(node)
            if node.value is not None:
                return chain
            if node.op_type in PASS_THROUGH_OPS and len(node.inputs) == 1 and not node.control_inputs:
                name = node.inputs[0][0]
                continue
            return []
        return []

    def constant_source(self, name: str) -> SourceNode | None:
        """The constant that node ``name`` is or reads through pass-through ops, else None."""
        chain = self.shared_constant_chain(name)
        return chain[-1] if chain else None

    def op_types_by_steps(self, name: str, hops: int) -> list[frozenset[str]]:
        """``levels[k]``: the op types of the nodes exactly ``k`` data-input steps above node ``name``, for ``k``
        up to ``hops`` (fewer when the inputs run out first). Kept in the memo and extended on demand, so
        askers of other reaches share it."""
        nodes = self._by_name
        walk = self.memo.get(("walk by steps", name))
        if walk is None:
            walk = self.memo[("walk by steps", name)] = ([frozenset((nodes[name].op_type,))], [name])
        levels, frontier = walk  # frontier: the distinct nodes of the last level
        while len(levels) <= hops and frontier:
            following: dict[str, None] = {}
            for here in frontier:
                for producer, _ in nodes[here].inputs:
                    if producer:
                        following[producer] = None
            frontier[:] = following
            if frontier:
                levels.append(frozenset(nodes[n].op_type for n in frontier))
        return levels

    def position(self, name: str) -> int:
        """The node's index in graph order."""
        return self._positions[name]

    def consumers(self, name: str) -> list[tuple[str, int, int]]:
        """``(consumer, consumer slot, producer output index)`` for each edge leaving ``name``;
        control edges have slot and index ``-1``. In adjacency order (edge insertion order)."""
        return list(self.shared_consumers(name))

    def shared_consumers(self, name: str) -> list[tuple[str, int, int]]:
        """:meth:`consumers`, listed once per node and shared by every caller: do not modify it."""
        found = self._consumers.get(name)
        if found is None:
            found = self._consumers[name] = [
                (consumer, slot, index)
                for consumer, keyed in self._succ[name].items()
                for slot, index in keyed.items()
            ]
        return found

    def shared_consumers_of(self, names: Iterable[str]) -> dict[str, list[tuple[str, int, int]]]:
        """:meth:`shared_consumers` of each of ``names``, by name (the lists are shared: do not modify them)."""
        cache = self._consumers
        found = {}
        for name in names:
            listed = cache.get(name)
            found[name] = listed if listed is not None else self.shared_consumers(name)
        return found

    def release_answers(self) -> None:
        """Drops the answers kept for the passes of a run: the :attr:`memo`, the constant chains and the
        consumer lists, found again if asked again. A fusion plan keeps its graph as long as the converted
        model, and these with it, for nothing."""
        self.memo = {}
        self._chains = {}
        self._consumers = {}

    # ------------------------------------------------------------------ scopes
    def scope(self, name: str) -> Scope:
        """The scope called ``name``; FusionError if there is none."""
        return self.tree[name]

    def scopes(self) -> list[Scope]:
        return self.tree.all_scopes()

    def __repr__(self) -> str:
        return f"ScopeGraph({len(self.source.nodes)} nodes, {len(self.tree)} scopes)"
