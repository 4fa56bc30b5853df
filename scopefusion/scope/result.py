"""What a pass hands over: :class:`ScopesResult` (what to fuse) and :class:`FusionScopesResult` (how).

A ``FusionScopesResult`` describes one fused op (one-to-one) or, with type :data:`SCOPE_TO_MULTI_NODES`,
a small set of inner nodes (many-to-many) that replaces the claimed nodes:

* ``insert_inputs(node, index_map)``: position ``k`` of ``index_map`` is input ``k`` of the claimed node
  ``node``; the value is the fused op's input port, or :data:`FUSION_DISABLE_INDEX` for an edge that stays
  inside the fusion. ``insert_outputs`` does the same for the claimed node's outputs and the fused op's
  output ports. ``node`` is the node's full name or a ``/``-separated tail of it (``"batchnorm/mul_1"``).
* ``drop_input(node, slot)``: an edge entering the fusion whose value the fused op does not need (the rule
  has proven it); it disappears without a port.
* ``add_inner_node(name, type)`` (many-to-many) returns an :class:`InnerNodeInfo`; its inputs are
  ``(inner node, output index)`` or ``(INPUT_FROM_FUSION_SCOPE, fused input port)``, its outputs
  ``(inner node, input slot)`` or ``(OUTPUT_TO_FUSION_SCOPE, fused output port)``; ``-1`` marks a control edge.

NOTE: CANN silently ignores a second ``insert_inputs`` for one name and lets a rule continue after an
invalid call; here every such problem is recorded on the result and the result is refused with that
reason when the pass manager validates it (see :mod:`.plan`), never applied.
"""

from __future__ import annotations

from typing import Any, Iterable, Sequence

from ..errors import FusionError
from ..parser.source_graph import SourceNode
from ..records import Record
from .tree import Scope

__all__ = [
    "FUSION_DISABLE_INDEX",
    "INPUT_FROM_FUSION_SCOPE",
    "OUTPUT_TO_FUSION_SCOPE",
    "SCOPE_INVALID_TYPE",
    "SCOPE_TO_MULTI_NODES",
    "FusionScopesResult",
    "InnerNodeInfo",
    "ScopesResult",
]

FUSION_DISABLE_INDEX = 99999
SCOPE_TO_MULTI_NODES = "ScopeToMultiNodes"
SCOPE_INVALID_TYPE = "ScopeInvalidType"
INPUT_FROM_FUSION_SCOPE = "InputFromFusionScope"
OUTPUT_TO_FUSION_SCOPE = "OutputToFusionScope"


class ScopesResult(Record):
    """One fusion candidate chosen by ``last_match_scopes_and_ops``: whole scopes plus loose nodes.

    Attributes:
        scopes: scopes whose every node (subtree) the fusion claims.
        nodes: names of further nodes outside those scopes that it claims.
        captures: anything the pass wants to hand to ``generate_fusion_result`` (a dataflow match,
            parameters read from constants...).
        refusal: set when the pass already knows it refuses this candidate: the result is refused
            with this reason (one sentence) and ``generate_fusion_result`` is not called.
        name: the fusion's name when the pass chooses it (default: the first scope's name, else the
            last node's).
    """

    _fields = ("scopes", "nodes", "captures", "refusal", "name")

    def __init__(
        self,
        scopes: list[Scope] | None = None,
        nodes: list[str] | None = None,
        captures: dict[str, Any] | None = None,
        refusal: str | None = None,
        name: str = "",
    ) -> None:
        self.scopes = [] if scopes is None else scopes
        self.nodes = [] if nodes is None else nodes
        self.captures = {} if captures is None else captures
        self.refusal = refusal
        self.name = name
        self.__post_init__()

    @classmethod
    def of_node_names(cls, nodes: list[str], captures: dict[str, Any]) -> ScopesResult:
        """``ScopesResult(nodes=nodes, captures=captures)`` for a new list of node names (``str``) that the
        caller hands over, such as :func:`~.passes.claimed_nodes` makes: made without the checks and the copy
        that :meth:`__post_init__` gives nodes of any kind, which would find nothing to convert or refuse."""
        made = cls.__new__(cls)
        made.scopes = []
        made.nodes = nodes
        made.captures = captures
        made.refusal = None
        made.name = ""
        return made

    def __post_init__(self) -> None:
        self.scopes = list(self.scopes)
        self.nodes = [n.name if isinstance(n, SourceNode) else n for n in self.nodes]
        for scope in self.scopes:
            if not isinstance(scope, Scope):
                raise FusionError(f"ScopesResult.scopes holds {scope!r}; expected Scope objects from the scope tree")
        for name in self.nodes:
            if not isinstance(name, str):
                raise FusionError(f"ScopesResult.nodes holds {name!r}; expected node names or SourceNode objects")


class InnerNodeInfo:
    """One inner node of a many-to-many fusion (CANN's InnerNodeInfo)."""

    __slots__ = ("name", "op_type", "inputs", "outputs", "attrs", "_owner")

    def __init__(self, name: str, type: str, owner: FusionScopesResult) -> None:
        self.name = name
        self.op_type = type
        self.inputs: list[tuple[str, int]] = []
        self.outputs: list[tuple[str, int]] = []
        self.attrs: dict[str, Any] = {}
        self._owner = owner

    def insert_input(self, src: str, peer_out_index: int) -> InnerNodeInfo:
        """Next input: output ``peer_out_index`` of inner node ``src``, or fused input port
        ``peer_out_index`` when ``src`` is :data:`INPUT_FROM_FUSION_SCOPE`; ``-1`` = control edge."""
        if not isinstance(src, str) or not src or not _is_index(peer_out_index, allow_control=True):
            self._owner._problem(f"inner node {self.name!r}: insert_input({src!r}, {peer_out_index!r}) needs a name and an index >= -1")
        self.inputs.append((src, peer_out_index))
        return self

    def insert_output(self, dst: str, peer_in_index: int) -> InnerNodeInfo:
        """Next output: input slot ``peer_in_index`` of inner node ``dst``, or fused output port
        ``peer_in_index`` when ``dst`` is :data:`OUTPUT_TO_FUSION_SCOPE`; ``-1`` = control edge."""
        if not isinstance(dst, str) or not dst or not _is_index(peer_in_index, allow_control=True):
            self._owner._problem(f"inner node {self.name!r}: insert_output({dst!r}, {peer_in_index!r}) needs a name and an index >= -1")
        self.outputs.append((dst, peer_in_index))
        return self

    @property
    def type(self) -> str:
        """The inner node's op type (CANN's name for :attr:`op_type`)."""
        return self.op_type

    @type.setter
    def type(self, value: str) -> None:
        self.op_type = value

    def set_attr(self, name: str, value: Any) -> InnerNodeInfo:
        self.attrs[name] = value
        return self

    def full_name(self, fusion_name: str) -> str:
        return f"{fusion_name.rstrip('/')}/{self.name}"

    def __repr__(self) -> str:
        return f"InnerNodeInfo({self.name!r}, {self.op_type!r})"


def _is_index(value: Any, *, allow_control: bool = False) -> bool:
    if isinstance(value, bool) or not isinstance(value, int):
        return False
    return value >= (-1 if allow_control else 0)


def _all_plain_indexes(values: list[Any]) -> bool:
    """True when every value is a plain ``int`` >= 0 (the usual index map; others go through _is_index)."""
    for value in values:
        if value.__class__ is not int or value < 0:
            return False
    return True


class FusionScopesResult:
    """How one candidate is fused; see the module docstring.

    ``scopes`` and ``nodes`` are set by the pass framework from the :class:`ScopesResult`; the rule sets
    ``name``, ``type``, ``description``, ``attrs`` and the index maps.
    """

    def __init__(
        self,
        name: str = "",
        type: str = "",
        description: str = "",
        *,
        scopes: Iterable[Scope] = (),
        nodes: Iterable[str] = (),
        captures: dict[str, Any] | None = None,
    ) -> None:
        self.name = name
        self.op_type = type
        self.description = description
        self.attrs: dict[str, Any] = {}
        self.scopes: tuple[Scope, ...] = tuple(scopes)
        self.nodes: tuple[str, ...] = tuple(nodes)
        self.captures: dict[str, Any] = dict(captures or {})
        self._inputs: dict[str, list[int]] = {}
        self._outputs: dict[str, list[int]] = {}
        self._dropped: set[tuple[str, int]] = set()
        self._inner: list[InnerNodeInfo] = []
        self.problems: list[str] = []
        self.pass_name = ""

    # ------------------------------------------------------------------ index maps
    def insert_inputs(self, node_name: str, index_map: Sequence[int]) -> FusionScopesResult:
        """Maps the inputs of claimed node ``node_name`` to fused input ports; see the module docstring."""
        self._insert(self._inputs, "insert_inputs", node_name, index_map)
        return self

    def insert_outputs(self, node_name: str, index_map: Sequence[int]) -> FusionScopesResult:
        """Maps the outputs of claimed node ``node_name`` to fused output ports."""
        self._insert(self._outputs, "insert_outputs", node_name, index_map)
        return self

    def drop_input(self, node_name: str, slot: int) -> FusionScopesResult:
        """Input ``slot`` of claimed node ``node_name`` enters the fusion without a port: the rule has proven
        the fused op does not need its value (a reshape target computed from a dynamic dimension that the
        fused op derives itself). The edge disappears as an absorbed constant's does."""
        if not isinstance(node_name, str) or not node_name or not _is_index(slot):
            self._problem(f"drop_input({node_name!r}, {slot!r}) needs a claimed node's full name and an input slot")
            return self
        self._dropped.add((node_name, slot))
        return self

    @property
    def dropped_inputs(self) -> frozenset[tuple[str, int]]:
        """The ``(claimed node, input slot)`` edges given to :meth:`drop_input`."""
        return frozenset(self._dropped)

    def _insert(self, into: dict[str, list[int]], what: str, name: str, index_map: Sequence[int]) -> None:
        if not isinstance(name, str) or not name:
            self._problem(f"{what} needs a node name, got {name!r}")
            return
        values = list(index_map) if isinstance(index_map, (list, tuple)) else None
        if values is None or not (_all_plain_indexes(values) or all(_is_index(v) for v in values)):
            self._problem(f"{what}({name!r}, {index_map!r}): an index map is a list of ports >= 0 or FUSION_DISABLE_INDEX")
            return
        if name in into:
            self._problem(f"{what}({name!r}) was called twice; map each inner node once")
            return
        into[name] = values

    @property
    def type(self) -> str:
        """The fused op type (CANN's name for :attr:`op_type`)."""
        return self.op_type

    @type.setter
    def type(self, value: str) -> None:
        self.op_type = value

    @property
    def inputs(self) -> dict[str, list[int]]:
        """A copy of the input index maps, by inner node name."""
        return {k: list(v) for k, v in self._inputs.items()}

    @property
    def outputs(self) -> dict[str, list[int]]:
        """A copy of the output index maps, by inner node name."""
        return {k: list(v) for k, v in self._outputs.items()}

    # ------------------------------------------------------------------ inner nodes
    def add_inner_node(self, name: str, type: str) -> InnerNodeInfo:
        """Adds an inner node (many-to-many); its full name is ``<fusion name>/<name>``."""
        if not isinstance(name, str) or not name or not isinstance(type, str) or not type:
            self._problem(f"add_inner_node({name!r}, {type!r}) needs a non-empty name and type")
        info = InnerNodeInfo(name, type, self)
        self._inner.append(info)
        return info

    @property
    def inner_nodes(self) -> tuple[InnerNodeInfo, ...]:
        return tuple(self._inner)

    def recent_inner_node(self) -> InnerNodeInfo | None:
        """The inner node added last (CANN's MutableRecentInnerNode)."""
        return self._inner[-1] if self._inner else None

    def inner_node(self, index: int) -> InnerNodeInfo | None:
        """The ``index``-th inner node, or None (CANN's MutableInnerNode)."""
        return self._inner[index] if 0 <= index < len(self._inner) else None

    def check_inner_nodes_info(self) -> str | None:
        """CANN's CheckInnerNodesInfo: ``None`` if consistent, else why not.

        Fails when two inner nodes share a name, or when the number of inner inputs from the fused
        scope (outputs to it) differs from the number of mapped ports in ``insert_inputs``
        (``insert_outputs``).
        """
        names: set[str] = set()
        for info in self._inner:
            if info.name in names:
                return f"two inner nodes are named {info.name!r}"
            names.add(info.name)
        from_scope = sum(1 for info in self._inner for src, _ in info.inputs if src == INPUT_FROM_FUSION_SCOPE)
        mapped_in = sum(1 for m in self._inputs.values() for v in m if v != FUSION_DISABLE_INDEX)
        if from_scope != mapped_in:
            return (
                f"inner nodes read {from_scope} input(s) from the fused scope but insert_inputs maps "
                f"{mapped_in} port(s)"
            )
        to_scope = sum(1 for info in self._inner for dst, _ in info.outputs if dst == OUTPUT_TO_FUSION_SCOPE)
        mapped_out = sum(1 for m in self._outputs.values() for v in m if v != FUSION_DISABLE_INDEX)
        if to_scope != mapped_out:
            return (
                f"inner nodes write {to_scope} output(s) to the fused scope but insert_outputs maps "
                f"{mapped_out} port(s)"
            )
        return None

    # ------------------------------------------------------------------ refusal
    def invalidate(self, reason: str) -> None:
        """Marks the result invalid (CANN's ``SetType(kScopeInvalidType)``) with the reason to report."""
        self.op_type = SCOPE_INVALID_TYPE
        self._problem(reason)

    def _problem(self, text: str) -> None:
        self.problems.append(text)

    def __repr__(self) -> str:
        return f"FusionScopesResult({self.name!r}, {self.op_type!r})"
