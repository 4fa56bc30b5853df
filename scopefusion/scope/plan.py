"""``FusionPlan``: the fusions accepted so far, in order, and the ones refused with their reasons.

A plan belongs to one :class:`ScopeGraph`. :meth:`FusionPlan.submit` validates a
:class:`FusionScopesResult` against the graph *and every fusion accepted before it* (see
:mod:`._validate`), then either accepts it (recording which nodes it claims) or refuses it with a
one-sentence reason. Nothing is applied to the graph here: the IR builder reads the accepted fusions.
"""

from __future__ import annotations

from typing import Any, Callable, Iterable, Iterator, Mapping, Sequence

from ..parser.source_graph import GraphOutput, SourceNode
from ._order import ContractedOrder, Contraction
from ._validate import Refused, validate_result
from .accepted import AcceptedFusion, Refusal
from .graph import ScopeGraph
from .op_types import KnownOpTypes
from .result import OUTPUT_TO_FUSION_SCOPE, FusionScopesResult

__all__ = ["FusionPlan"]


class FusionPlan:
    """Accepted and refused fusions of one graph; see the module docstring.

    Args:
        graph: the scope graph the results refer to.
        known_types: the op types a result may name (:class:`KnownOpTypes`, or a predicate); an unknown
            type is refused. None accepts any non-empty type.
    """

    def __init__(
        self, graph: ScopeGraph, known_types: KnownOpTypes | Callable[[str], bool] | None = None
    ) -> None:
        self.graph = graph
        if known_types is not None and not isinstance(known_types, KnownOpTypes):
            known_types = KnownOpTypes.from_predicate(known_types)
        self.known_types: KnownOpTypes | None = known_types
        self.accepted: list[AcceptedFusion] = []
        self.refused: list[Refusal] = []
        self._names: dict[str, str] = {}
        self._by_name: dict[str, AcceptedFusion] = {}
        self._tensors: dict[tuple[str, int], tuple[str, int]] = {}
        self._graph_outputs: dict[str, list[GraphOutput]] = {}
        for out in graph.source.outputs:
            self._graph_outputs.setdefault(out.node, []).append(out)
        has_back_edges = bool(graph.nodes_by_type("NextIteration") or graph.nodes_by_type("NextIterationV2"))
        # The tree numbers the nodes in the source graph's order.
        self._order = ContractedOrder(graph.source, graph.tree.positions, has_back_edges, graph.source.edges_run_forward)

    def submit(self, result: FusionScopesResult) -> AcceptedFusion | Refusal:
        """Validates ``result`` and accepts or refuses it; returns what was recorded."""
        try:
            accepted, claimed, contraction = validate_result(result, self.graph, self, self.known_types)
        except Refused as refused:
            label = result.name if isinstance(result.name, str) else repr(result.name)
            refusal = Refusal(
                label,
                result.pass_name,
                refused.reason,
                tuple(s.name for s in result.scopes),
                tuple(result.nodes),
            )
            self.refused.append(refusal)
            return refusal
        self._order.contract(accepted.name, contraction)
        self.accepted.append(accepted)
        self._by_name[accepted.name] = accepted
        self._names[accepted.name] = accepted.name
        for inner in accepted.inner_nodes:
            self._names[inner.name] = accepted.name
        for out in accepted.outputs:
            self._tensors[(out.claimed_node, out.index)] = self._port_target(accepted, out.port)
        return accepted

    @staticmethod
    def _port_target(accepted: AcceptedFusion, port: int) -> tuple[str, int]:
        if not accepted.inner_nodes:
            return accepted.name, port
        for inner in accepted.inner_nodes:
            for j, (dst, index) in enumerate(inner.outputs):
                if dst == OUTPUT_TO_FUSION_SCOPE and index == port:
                    return inner.name, j
        raise AssertionError(f"validated fusion {accepted.name} has no inner node for output port {port}")

    # ------------------------------------------------------------------ queries
    def owner(self, node: str) -> str | None:
        """The name of the accepted fusion that claims ``node``, else None."""
        group = self._order.group_of(node)
        return None if group is None else group[0]

    def first_owned(self, nodes: Iterable[str], positions: Iterable[int] | None = None) -> tuple[str, str] | None:
        """The first of ``nodes`` that an accepted fusion claims, with that fusion's name, else None;
        ``positions``: the nodes' indexes in graph order, when the caller has them."""
        return self._order.first_claimed(nodes, positions)

    def name_user(self, name: str) -> str | None:
        """The accepted fusion whose name (or one of whose inner nodes' names) is ``name``, else None."""
        return self._names.get(name)

    def graph_outputs_at(self, node: str) -> Sequence[GraphOutput]:
        """The graph outputs that name an output of ``node``."""
        return self._graph_outputs.get(node, ())

    @property
    def graph_outputs_by_node(self) -> Mapping[str, Sequence[GraphOutput]]:
        """:meth:`graph_outputs_at` for every node that has some (read-only; do not modify)."""
        return self._graph_outputs

    def find_cycle(
        self, name: str, claimed: Sequence[str], unclaimed: Mapping[str, SourceNode] | None = None,
        consumers: Mapping[str, Mapping[str, object]] | None = None, positions: Mapping[str, int] | None = None,
        outside: tuple[Sequence[str], Sequence[str]] | None = None,
    ) -> tuple[list[str] | None, Contraction | None]:
        """Whether fusing ``claimed`` as ``name`` would close a cycle with the fusions accepted so far:
        ``(cycle, None)`` naming the cycle, or ``(None, contraction)`` to accept it with. ``unclaimed``,
        ``consumers`` and ``positions``: the claimed nodes, their ``out_edges`` entries and their indexes in
        graph order, by name, from a caller that found no claimed node owned (:meth:`first_owned`); ``outside``:
        the producers and consumers the claimed nodes have outside them, from such a caller, see
        :meth:`.ContractedOrder.find_cycle`."""
        return self._order.find_cycle(name, claimed, unclaimed, consumers, positions, outside)

    def get(self, name: str) -> AcceptedFusion | None:
        return self._by_name.get(name)

    def resolve_tensor(self, node: str, index: int) -> tuple[str, int]:
        """Where source tensor ``node:index`` comes from once every accepted fusion is applied.

        An output mapped to a fused port resolves to ``(fusion name, port)`` (many-to-many: the inner
        node's full name and output index); any other tensor resolves to itself.
        """
        return self._tensors.get((node, index), (node, index))

    def __iter__(self) -> Iterator[AcceptedFusion]:
        return iter(self.accepted)

    def __len__(self) -> int:
        return len(self.accepted)

    def to_dict(self) -> dict[str, Any]:
        return {
            "accepted": [a.to_dict() for a in self.accepted],
            "refused": [r.to_dict() for r in self.refused],
        }
