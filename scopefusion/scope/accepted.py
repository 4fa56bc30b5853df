"""What an accepted fusion claims and how its ports connect: everything the IR builder needs.

An :class:`AcceptedFusion` is a validated :class:`~.result.FusionScopesResult` with every name resolved
against the source graph, so applying it needs no further lookups:

* ``claimed``: the source nodes it replaces, in graph order;
* ``kept``: nodes inside its scopes that it does *not* replace because they only produce a fused input
  (a weight and its ``Identity`` read, for instance); they stay in the graph and feed the fused op;
* ``inputs``: per fused input port, the producer ``(node, output index)`` outside the claimed set, and
  the claimed node input it was mapped from;
* ``outputs``: per fused output port, the claimed node output that it stands for and its consumers
  ``(node, input slot)`` outside the claimed set, plus the graph outputs that name it;
* ``absorbed``: constant producers whose edges into claimed nodes disappear because the fused op
  carries their value (its attributes), as CANN drops unmapped edges, and producers of inputs the rule
  dropped (``FusionScopesResult.drop_input``);
* ``control_inputs`` / ``control_outputs``: control edges that cross the boundary;
* ``inner_nodes``: for a many-to-many fusion, the inner nodes with full names and resolved inputs.

A producer or consumer named here may itself be claimed by another accepted fusion; the
:class:`~.plan.FusionPlan` resolves such a tensor with ``resolve_tensor``.
"""

from __future__ import annotations

from typing import Any

from ..records import FrozenRecord

__all__ = ["AcceptedFusion", "FusedInput", "FusedOutput", "PatternCheck", "Refusal", "ResolvedInnerNode"]


class FusedInput(FrozenRecord):
    """Fused input ``port`` reads ``producer``'s output ``index``; it was mapped from claimed node
    ``claimed_node``'s input ``claimed_slot``."""

    _fields = ("port", "producer", "index", "claimed_node", "claimed_slot")

    def __init__(self, port: int, producer: str, index: int, claimed_node: str, claimed_slot: int) -> None:
        self.port = port
        self.producer = producer
        self.index = index
        self.claimed_node = claimed_node
        self.claimed_slot = claimed_slot

    @property
    def inner_node(self) -> str:
        """Former name of :attr:`claimed_node`."""
        return self.claimed_node

    @property
    def inner_slot(self) -> int:
        """Former name of :attr:`claimed_slot`."""
        return self.claimed_slot

    def to_dict(self) -> dict[str, Any]:
        return {
            "port": self.port,
            "producer": self.producer,
            "index": self.index,
            "inner_node": self.claimed_node,
            "inner_slot": self.claimed_slot,
        }


class FusedOutput(FrozenRecord):
    """Fused output ``port`` stands for claimed node ``claimed_node``'s output ``index``."""

    _fields = ("port", "claimed_node", "index", "consumers", "graph_outputs")

    def __init__(self, port: int, claimed_node: str, index: int, consumers: tuple[tuple[str, int], ...] = (),
                 graph_outputs: tuple[str, ...] = ()) -> None:
        self.port = port
        self.claimed_node = claimed_node
        self.index = index
        self.consumers = consumers
        self.graph_outputs = graph_outputs

    @property
    def inner_node(self) -> str:
        """Former name of :attr:`claimed_node`."""
        return self.claimed_node

    def to_dict(self) -> dict[str, Any]:
        return {
            "port": self.port,
            "inner_node": self.claimed_node,
            "index": self.index,
            "consumers": [list(c) for c in self.consumers],
            "graph_outputs": list(self.graph_outputs),
        }


class ResolvedInnerNode(FrozenRecord):
    """A many-to-many inner node: ``inputs`` are ``(producer, output index)`` with the producer an inner
    node's full name or, for inputs from the fused scope, the real external producer; index ``-1`` is a
    control edge. ``outputs`` are ``(inner node full name or OutputToFusionScope, slot or port)``."""

    _fields = ("name", "op_type", "inputs", "outputs", "attrs")
    _not_compared = frozenset({"attrs"})

    def __init__(self, name: str, op_type: str, inputs: tuple[tuple[str, int], ...], outputs: tuple[tuple[str, int], ...],
                 attrs: dict[str, Any] | None = None) -> None:
        self.name = name
        self.op_type = op_type
        self.inputs = inputs
        self.outputs = outputs
        self.attrs = {} if attrs is None else attrs

    @property
    def type(self) -> str:
        """Former name of :attr:`op_type`."""
        return self.op_type

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "type": self.op_type,
            "inputs": [list(i) for i in self.inputs],
            "outputs": [list(o) for o in self.outputs],
            "attrs": sorted(self.attrs),
        }


class AcceptedFusion(FrozenRecord):
    """One validated fusion; see the module docstring."""

    _fields = ("name", "op_type", "pass_name", "description", "scopes", "claimed", "kept", "inputs", "outputs",
               "absorbed", "control_inputs", "control_outputs", "inner_nodes", "attrs", "captures")
    _not_compared = frozenset({"attrs", "captures"})
    _not_shown = frozenset({"captures"})

    def __init__(
        self,
        name: str,
        op_type: str,
        pass_name: str,
        description: str,
        scopes: tuple[str, ...],
        claimed: tuple[str, ...],
        kept: tuple[str, ...],
        inputs: tuple[FusedInput, ...],
        outputs: tuple[FusedOutput, ...],
        absorbed: tuple[str, ...],
        control_inputs: tuple[str, ...],
        control_outputs: tuple[str, ...],
        inner_nodes: tuple[ResolvedInnerNode, ...] = (),
        attrs: dict[str, Any] | None = None,
        captures: dict[str, Any] | None = None,
    ) -> None:
        self.name = name
        self.op_type = op_type
        self.pass_name = pass_name
        self.description = description
        self.scopes = scopes
        self.claimed = claimed
        self.kept = kept
        self.inputs = inputs
        self.outputs = outputs
        self.absorbed = absorbed
        self.control_inputs = control_inputs
        self.control_outputs = control_outputs
        self.inner_nodes = inner_nodes
        self.attrs = {} if attrs is None else attrs
        self.captures = {} if captures is None else captures

    @classmethod
    def assemble(cls, values: dict[str, Any]) -> AcceptedFusion:
        """``AcceptedFusion(**values)`` when ``values`` names every field, made without the field-by-field
        set-up (the validator makes one per accepted fusion; it gives every field)."""
        made = object.__new__(cls)
        made.__dict__.update(values)
        return made

    @property
    def type(self) -> str:
        """Former name of :attr:`op_type`."""
        return self.op_type

    @property
    def is_many_to_many(self) -> bool:
        return bool(self.inner_nodes)

    def to_dict(self) -> dict[str, Any]:
        """A JSON-serializable summary (attribute values are listed by name only)."""
        return {
            "name": self.name,
            "type": self.op_type,
            "pass": self.pass_name,
            "description": self.description,
            "scopes": list(self.scopes),
            "claimed": list(self.claimed),
            "kept": list(self.kept),
            "inputs": [i.to_dict() for i in self.inputs],
            "outputs": [o.to_dict() for o in self.outputs],
            "absorbed": list(self.absorbed),
            "control_inputs": list(self.control_inputs),
            "control_outputs": list(self.control_outputs),
            "inner_nodes": [n.to_dict() for n in self.inner_nodes],
            "attrs": sorted(self.attrs),
        }


class Refusal(FrozenRecord):
    """A fusion result that was not applied, and why (one sentence)."""

    _fields = ("name", "pass_name", "reason", "scopes", "nodes")

    def __init__(self, name: str, pass_name: str, reason: str, scopes: tuple[str, ...] = (),
                 nodes: tuple[str, ...] = ()) -> None:
        self.name = name
        self.pass_name = pass_name
        self.reason = reason
        self.scopes = scopes
        self.nodes = nodes


    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "pass": self.pass_name,
            "reason": self.reason,
            "scopes": list(self.scopes),
            "nodes": list(self.nodes),
        }

    def __str__(self) -> str:
        return f"{self.pass_name}: fusion {self.name!r} refused: {self.reason}"


class PatternCheck(FrozenRecord):
    """One pattern tried on one scope: where it sits in the pass and the first failing check (None on a match)."""

    _fields = ("where", "reason")

    def __init__(self, where: str, reason: str | None) -> None:
        self.where = where
        self.reason = reason

    @property
    def matched(self) -> bool:
        return self.reason is None

    def __str__(self) -> str:
        return f"{self.where}: {'matches' if self.reason is None else self.reason}"
