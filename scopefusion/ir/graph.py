"""The IR graph: :class:`Graph` of :class:`Node` producing :class:`Value`.

* Every value has exactly one producer node and an output index. Graph inputs are the outputs of
  ``ge.Data`` nodes (attribute ``index``); constants are ``ge.Const`` nodes (attribute ``value``).
* A node registers itself as a use of each of its inputs when it is built; ``value.uses`` lists
  ``(node, slot)`` in insertion order, so visiting is deterministic. Rewire only through
  :meth:`Graph.replace_all_uses_with` and :meth:`Node.replace_input_with`.
* Node names are unique in a graph; :meth:`Graph.unique_name` makes deterministic fresh ones.
* Control-flow bodies are graphs held in ``node.subgraphs`` by name. The one allowed read of a later
  value is a TF1 loop back edge (``NextIteration`` → ``Merge``), whose value has ``meta["back_edge"]``.
* :meth:`Graph.verify` checks order, dangling values, names, uses and each op against its definition.
"""

from __future__ import annotations

from typing import Any, Iterable, Iterator, Mapping, NoReturn, Sequence

import numpy as np

from ..errors import ScopeFusionError
from .attrs import INT, Attributes, AttrType, AttrValue, _same, tensor_attr
from .core_ops import CONST_OP, DATA_OP, core_ops
from .opdef import OpDef, OpRegistry
from .types import IRContext, Type

__all__ = ["CONST_OP", "DATA_OP", "NO_VALUES", "Graph", "GraphError", "Node", "Value"]

_new = object.__new__
_CONST_DIALECT, _, _CONST_TYPE = CONST_OP.rpartition(".")



class _UnchangeableEmptyList(list[Any]):
    """An empty list that refuses to grow (a ``TypeError``): :data:`NO_VALUES`."""

    __slots__ = ()

    def _refuse(self, *args: Any, **kwargs: Any) -> NoReturn:
        raise TypeError("this empty list is shared by many nodes and must not change; assign a new list instead")

    append = extend = insert = __setitem__ = __iadd__ = __imul__ = _refuse


#: The ``inputs`` of the nodes a graph adds without any (constants, graph inputs): one list equal to ``[]``,
#: shared and unchangeable, instead of one empty list per node for the garbage collector to walk. Rewiring
#: (``replace_input_with``) only replaces existing slots, which such a node has none of.
NO_VALUES: list[Any] = _UnchangeableEmptyList()


class GraphError(ScopeFusionError):
    """An IR graph is malformed (found by building or by :meth:`Graph.verify`)."""


class Value:
    """One output of a node: its type and its uses."""

    __slots__ = ("producer", "index", "type", "_uses", "meta")

    def __init__(self, producer: "Node", index: int, type: Type | None) -> None:
        self.producer = producer
        self.index = index
        self.type = type
        self._uses: dict[tuple[Node, int], None] = {}
        self.meta: dict[str, Any] = {}

    @property
    def name(self) -> str:
        """``node`` for a single-output node's value, else ``node:index``."""
        p = self.producer
        return p.name if len(p.outputs) == 1 else f"{p.name}:{self.index}"

    @property
    def ref(self) -> str:
        """GE's ``op:index`` reference."""
        return f"{self.producer.name}:{self.index}"

    @property
    def uses(self) -> list[tuple["Node", int]]:
        """``(consumer, input slot)`` pairs in the order they were made."""
        return list(self._uses)

    @property
    def consumers(self) -> list["Node"]:
        return list(dict.fromkeys(n for n, _ in self._uses))

    @property
    def const_value(self) -> np.ndarray | None:
        """The value when the producer is a ``ge.Const``, else None."""
        p = self.producer
        return p.attrs.get("value") if p.op == CONST_OP else None

    def __repr__(self) -> str:
        return f"Value(%{self.name}: {self.type})"


class Node:
    """One op instance. Build through :meth:`Graph.add_node`."""

    __slots__ = (
        "graph", "name", "_dialect", "_op_type", "op", "inputs", "outputs", "attrs", "control_inputs", "subgraphs",
        "opdef", "meta",
    )  # fmt: skip
    op: str  # the qualified op name, ``dialect.OpType``; kept in step with ``dialect`` and ``op_type``

    def __init__(self, graph: "Graph", name: str, dialect: str, op_type: str) -> None:
        self.graph = graph
        self.name = name
        self._dialect = dialect
        self._op_type = op_type
        self.op = f"{dialect}.{op_type}" if dialect else op_type
        self.inputs: list[Value | None] = []
        self.outputs: list[Value] = []
        attrs = self.attrs = _new(Attributes)
        attrs._owner = self
        attrs._attrs = {}
        self.control_inputs: Sequence[Node] = ()  # the empty tuple (shared) until the node has control inputs
        self.subgraphs: dict[str, Graph] = {}
        self.opdef: OpDef | None = None
        self.meta: dict[str, Any] = {}

    @property
    def dialect(self) -> str:
        return self._dialect

    @dialect.setter
    def dialect(self, dialect: str) -> None:
        self._dialect = dialect
        self.op = f"{dialect}.{self._op_type}" if dialect else self._op_type

    @property
    def op_type(self) -> str:
        return self._op_type

    @op_type.setter
    def op_type(self, op_type: str) -> None:
        self._op_type = op_type
        self.op = f"{self._dialect}.{op_type}" if self._dialect else op_type

    # Attribute access, GE style.
    def set_attr(self, name: str, value: Any, type_id: AttrType | None = None) -> None:
        """Sets an attribute; a node with a definition accepts only declared names of the declared kind."""
        spec = self.opdef.attrs.get(name) if self.opdef is not None and not name.startswith("_") else None
        if self.opdef is not None and not name.startswith("_") and spec is None and not self.opdef.open_attrs:
            known = ", ".join(self.opdef.attrs) or "none"
            raise GraphError(f"node {self.name!r}: op {self.op} has no attribute {name!r} (declared: {known})")
        try:
            self.attrs.set_attr(name, value, type_id or (spec.type_id if spec is not None else None))
        except (TypeError, ValueError) as e:
            raise GraphError(str(e)) from None
        self.graph.edits += 1

    def get_all_attrs(self) -> dict[str, AttrValue]:
        return self.attrs.get_all_attrs()

    def replace_input_with(self, slot: int, new: Value | None) -> None:
        """Points input ``slot`` at ``new``, keeping every use list in step."""
        old = self.inputs[slot]
        if old is new:
            return
        if old is not None:
            old._uses.pop((self, slot), None)
        self.inputs[slot] = new
        if new is not None:
            new._uses[(self, slot)] = None
        self.graph.edits += 1

    def __repr__(self) -> str:
        return f"Node({self.name!r}, {self.op})"


class Graph:
    """An ordered graph of nodes; node order is a topological schedule (checked by :meth:`verify`)."""

    def __init__(self, name: str, context: IRContext, registry: OpRegistry | None = None) -> None:
        self.name = name
        self.context = context
        self.registry = registry if registry is not None else OpRegistry(core_ops())
        self.nodes: list[Node] = []
        self.inputs: list[Value] = []
        self.outputs: list[Value] = []
        self.attrs = Attributes(f"graph {name!r}")
        self._names: dict[str, Node] = {}
        self._next_suffix: dict[str, int] = {}
        # How many edits the graph's methods (adding, removing or rewiring a node, setting an attribute or the
        # outputs) have made: what was found of the graph (its inference) holds only for the count it saw.
        self.edits = 0

    # ------------------------------------------------------------------ names
    def unique_name(self, base: str) -> str:
        """``base`` when free, else ``base_1``, ``base_2``... (deterministic)."""
        if base not in self._names:
            return base
        n = self._next_suffix.get(base, 1)
        while f"{base}_{n}" in self._names:
            n += 1
        self._next_suffix[base] = n + 1
        return f"{base}_{n}"

    def node(self, name: str) -> Node:
        try:
            return self._names[name]
        except KeyError:
            raise KeyError(f"graph {self.name!r} has no node {name!r}") from None

    def get_node(self, name: str) -> Node | None:
        return self._names.get(name)

    def __contains__(self, name: object) -> bool:
        return name in self._names

    def __iter__(self) -> Iterator[Node]:
        return iter(self.nodes)

    def __len__(self) -> int:
        return len(self.nodes)

    # ------------------------------------------------------------------ building
    def add_node(
        self,
        op: str,
        inputs: Sequence[Value | None] = (),
        *,
        name: str | None = None,
        attrs: Mapping[str, Any] | None = None,
        num_outputs: int | None = None,
        output_types: Sequence[Type | None] | None = None,
        control_inputs: Iterable[Node] = (),
        subgraphs: Mapping[str, "Graph"] | None = None,
        allow_unknown: bool = False,
        unique: bool = False,
        attrs_of_declared_kinds: bool = False,
    ) -> Node:
        """Adds a node ``op`` (``"dialect.OpType"``) at the end of the schedule.

        The op must be registered unless ``allow_unknown`` (a framework op without a definition yet).
        A registered op's inputs, outputs and attributes are checked against its definition, and its
        optional attributes get their defaults. ``name`` defaults to the op type; with ``unique`` a
        taken name is made unique, otherwise a taken name is an error.

        ``attrs_of_declared_kinds``: the caller vouches that ``attrs`` maps non-empty ``str`` names to
        :class:`AttrValue` objects, each of its declared kind where the definition declares its name (as
        ``convert_attrs(..., declared_kinds_only=True)`` makes them). Where the definition accepts
        undeclared names too (``open_attrs``, a framework op) or there is none, or where every name is declared
        or private, each of them would be stored as it is: they are, without a look at each one.
        """
        dialect, _, op_type = op.rpartition(".")
        opdef = self.registry.lookup(op)
        if opdef is None and not allow_unknown:
            raise GraphError(f"graph {self.name!r}: op {op!r} is not registered (dialects: {sorted(self.registry.dialects())})")
        base = name or op_type
        if base in self._names:
            if not unique:
                raise GraphError(f"graph {self.name!r}: a node named {base!r} already exists ({self._names[base].op})")
            base = self.unique_name(base)
        stored: dict[str, AttrValue] = {}
        node = _bare_node(self, base, dialect, op_type, op if dialect else op_type, stored, opdef)
        if attrs and attrs_of_declared_kinds and "" not in attrs and (
                opdef is None or opdef.open_attrs or _declared_or_private(attrs, opdef.attrs)):
            stored.update(attrs)
        elif attrs:
            specs = opdef.attrs if opdef is not None else None
            open_attrs = opdef is not None and opdef.open_attrs
            for key, value in attrs.items():
                # An AttrValue of the declared kind (or under a private, open or undeclared-but-unchecked
                # name) is stored as set_attr would store it; anything else goes through set_attr's checks.
                if isinstance(value, AttrValue) and type(key) is str and key:
                    if specs is None or key[0] == "_":
                        stored[key] = value
                        continue
                    spec = specs.get(key)
                    if (open_attrs if spec is None else spec.type_id is value.type_id):
                        stored[key] = value
                        continue
                node.set_attr(key, value)
        n_out = num_outputs if num_outputs is not None else (len(output_types) if output_types is not None else None)
        if opdef is not None:
            try:
                if n_out is None:
                    n_out = len(opdef.outputs)
                counts = ("node", len(inputs), n_out)  # input and output counts the definition accepted
                bindings = opdef._bindings
                if counts not in bindings:
                    opdef._bound_inputs(counts[1])
                    opdef._bound_outputs(n_out)
                    bindings[counts] = True
                # set_attr has checked every declared name's kind: what is left is the defaults and the required.
                opdef.complete_attrs(stored, base)
            except ValueError as e:
                raise GraphError(f"graph {self.name!r}: {e}") from None
        if n_out is None:
            n_out = 1
        if output_types is None and n_out == 1:
            node.outputs = _one_output(node)
        elif output_types is None:
            node.outputs = [Value(node, i, None) for i in range(n_out)]
        else:
            types = list(output_types)
            if len(types) != n_out:
                raise GraphError(f"graph {self.name!r}: node {base!r} has {n_out} outputs but {len(types)} output types")
            node.outputs = [Value(node, i, t) for i, t in enumerate(types)]
        if inputs:
            for value in inputs:
                if value is not None and value.producer.graph is not self:
                    raise GraphError(
                        f"graph {self.name!r}: node {base!r} reads {value.ref} from graph "
                        f"{value.producer.graph.name!r}; pass outer values into a body through its Data inputs"
                    )
            node.inputs = list(inputs)
            slot = 0
            for value in inputs:
                if value is not None:
                    value._uses[(node, slot)] = None
                slot += 1
        else:
            node.inputs = NO_VALUES
        if control_inputs:
            node.control_inputs = list(control_inputs)
        if subgraphs:
            node.subgraphs = dict(subgraphs)
        self._names[base] = node
        self.nodes.append(node)
        self.edits += 1
        return node

    def _add_converted(self, op: str, dialect: str, op_type: str, opdef: OpDef | None, inputs: list[Value | None],
                       name: str, attrs: dict[str, AttrValue], num_outputs: int, controls: list[Node] | None = None,
                       kinds_vouched: bool = True) -> Node | None:
        """The node ``add_node(op, inputs, name=name, attrs=attrs, num_outputs=num_outputs, allow_unknown=True,
        attrs_of_declared_kinds=True, control_inputs=controls or ())`` would add, added without its general steps
        (most of a model's nodes come this way), or None, adding nothing, where those steps decide something: a
        taken or empty name, an empty or undeclared public attribute name on a definition that refuses such names,
        or input and output counts the definition has not accepted before. ``op`` is ``f"{dialect}.{op_type}"``,
        ``opdef`` what the registry gives for it; ``inputs`` are values of this graph (or None), which the node keeps
        (an empty list: :data:`NO_VALUES` instead), as it keeps ``attrs`` (the caller's vouch as for add_node, and a
        map nothing else holds) and ``controls`` (nodes of this graph, a list nothing else holds). Without
        ``kinds_vouched`` the caller vouches only for the values being AttrValues: a value whose kind contradicts
        its declared one (which add_node's checks refuse) also gives None."""
        if not name or name in self._names or "" in attrs:
            return None
        if not kinds_vouched and opdef is not None and not _of_declared_kinds(attrs, opdef):
            return None
        if opdef is not None:
            if ("node", len(inputs), num_outputs) not in opdef._bindings:
                return None
            if not _complete_as_given(opdef, attrs):
                if not (opdef.open_attrs or _declared_or_private(attrs, opdef.attrs)):
                    return None
                try:
                    opdef.complete_attrs(attrs, name)
                except ValueError as e:
                    raise GraphError(f"graph {self.name!r}: {e}") from None
        node = _bare_node(self, name, dialect, op_type, op if dialect else op_type, attrs, opdef)
        node.outputs = _one_output(node) if num_outputs == 1 else [Value(node, i, None) for i in range(num_outputs)]
        node.inputs = inputs if inputs else NO_VALUES
        slot = 0
        for value in inputs:
            if value is not None:
                value._uses[(node, slot)] = None
            slot += 1
        if controls:
            node.control_inputs = controls
        self._names[name] = node
        self.nodes.append(node)
        self.edits += 1
        return node

    def add_input(self, name: str, type: Type | None) -> Value:
        """Adds a graph input (a ``ge.Data`` node named ``name``) and returns its value."""
        # The index as the INT value set_attr would make of it; the one output made as add_node makes it, typed.
        node = self.add_node(DATA_OP, name=name, attrs={"index": AttrValue._trusted(INT, len(self.inputs))}, num_outputs=1)
        out = node.outputs[0]
        out.type = type
        self.inputs.append(out)
        return out

    def add_const(self, value: np.ndarray, name: str = "Const", *, unique: bool = True) -> Value:
        """Adds a ``ge.Const`` node holding ``value`` (kept read-only; a read-only array is not copied)."""
        array = np.asarray(value)
        typed = tensor_attr(array)
        if typed is None:  # set_attr's checks give the error naming the node
            node = self.add_node(CONST_OP, name=name, attrs={"value": array}, unique=unique)
            node.outputs[0].type = self.context.array_type(node.attrs.as_tensor("value"))
            return node.outputs[0]
        # add_node stores ``typed`` itself as "value" (or raises): its payload is the node's tensor.
        made = self._new_const(name, typed)
        if made is None:
            made = self.add_node(CONST_OP, name=name, attrs={"value": typed}, unique=unique)
        out = made.outputs[0]
        out.type = self.context.array_type(typed.value)
        return out

    def _new_const(self, name: str, typed: AttrValue) -> Node | None:
        """The ``ge.Const`` node ``add_node(CONST_OP, name=name, attrs={"value": typed})`` would add, added without
        its general steps (a model has many constants), or None, adding nothing, where those steps decide
        something: a taken or empty name, or a registry whose ``ge.Const`` is not a one-output definition
        with a tensor ``value`` whose arity (no input, one output) ``add_node`` has accepted already.
        ``typed`` is a ``TENSOR`` value, which add_node would store as it is."""
        if not name or name in self._names:
            return None
        opdef = self.registry.lookup(CONST_OP)
        if opdef is None:
            return None
        stored = {"value": typed}
        if not opdef._bindings.get(("const", typed.type_id)):  # see _const_as_given
            if len(opdef.outputs) != 1 or ("node", 0, 1) not in opdef._bindings:
                return None
            spec = opdef.attrs.get("value")
            if spec is None or spec.type_id is not typed.type_id:
                return None
            try:
                opdef.complete_attrs(stored, name)
            except ValueError as e:
                raise GraphError(f"graph {self.name!r}: {e}") from None
            _note_const_as_given(opdef, typed.type_id)
        node = _bare_node(self, name, _CONST_DIALECT, _CONST_TYPE, CONST_OP, stored, opdef)
        node.outputs = _one_output(node)
        node.inputs = NO_VALUES
        self._names[name] = node
        self.nodes.append(node)
        self.edits += 1
        return node

    def set_outputs(self, values: Iterable[Value]) -> None:
        self.outputs = list(values)
        self.edits += 1

    # ------------------------------------------------------------------ rewiring
    def replace_all_uses_with(self, old: Value, new: Value) -> None:
        """Makes every consumer of ``old`` (and the graph outputs) read ``new`` instead."""
        for node, slot in list(old._uses):
            node.replace_input_with(slot, new)
        self.outputs = [new if v is old else v for v in self.outputs]
        self.edits += 1

    def remove_node(self, node: Node) -> None:
        """Removes a node whose outputs have no uses and are not graph outputs."""
        for value in node.outputs:
            if value._uses or any(v is value for v in self.outputs):
                users = ", ".join(n.name for n in value.consumers) or "the graph outputs"
                raise GraphError(f"cannot remove {node.name!r}: its value {value.name} is still used by {users}")
        for other in self.nodes:
            if node in other.control_inputs:
                other.control_inputs = [c for c in other.control_inputs if c is not node]
        for slot in range(len(node.inputs)):
            node.replace_input_with(slot, None)
        self.nodes.remove(node)
        del self._names[node.name]
        self.edits += 1
        if node.op == DATA_OP:
            self.inputs = [v for v in self.inputs if v.producer is not node]

    def values(self) -> Iterator[Value]:
        for node in self.nodes:
            yield from node.outputs

    def clone(self) -> "Graph":
        """A structural copy (same names, attributes shared where immutable, bodies cloned).

        The source was checked when it was built, so nodes are copied without :meth:`add_node`'s checks;
        uses are made in schedule order, back edges last, as rebuilding node by node would make them.
        """
        other = Graph(self.name, self.context, self.registry)
        mapping: dict[int, Value] = {}
        nodes: dict[int, Node] = {}
        later: list[tuple[Node, int, Value]] = []  # back edges: inputs produced later in the schedule
        lookup = self.registry.lookup
        make = object.__new__
        for node in self.nodes:
            # Node.__init__ and Value.__init__ spelled out: every slot is set from the original.
            new = make(Node)
            new.graph = other
            new.name = node.name
            new._dialect = node._dialect
            new._op_type = node._op_type
            new.op = node.op
            new.opdef = lookup(node.op)
            attrs = new.attrs = make(Attributes)
            attrs._owner = new if node.attrs._owner is node else node.attrs._owner
            attrs._attrs = {k: v if v.type_id.copy is _same else v.copy() for k, v in node.attrs._attrs.items()}
            inputs: list[Value | None] = []
            new.inputs = inputs
            for slot, v in enumerate(node.inputs):
                mapped = None if v is None else mapping.get(id(v))
                if v is not None and mapped is None:
                    later.append((new, slot, v))
                inputs.append(mapped)
                if mapped is not None:
                    mapped._uses[(new, slot)] = None
            outputs: list[Value] = []
            new.outputs = outputs
            for v in node.outputs:
                out = make(Value)
                out.producer = new
                out.index = v.index
                out.type = v.type
                out._uses = {}
                out.meta = dict(v.meta)
                outputs.append(out)
                mapping[id(v)] = out
            new.control_inputs = [nodes[id(c)] for c in node.control_inputs] if node.control_inputs else ()
            new.subgraphs = {k: g.clone() for k, g in node.subgraphs.items()} if node.subgraphs else {}
            new.meta = dict(node.meta)
            nodes[id(node)] = new
            other._names[new.name] = new
            other.nodes.append(new)
        for new, slot, v in later:
            new.replace_input_with(slot, mapping[id(v)])
        other.inputs = [mapping[id(v)] for v in self.inputs]
        other.outputs = [mapping[id(v)] for v in self.outputs]
        other.attrs._attrs = {k: v.copy() for k, v in self.attrs._attrs.items()}
        return other

    # ------------------------------------------------------------------ checking
    def verify(self) -> None:
        """Raises :class:`GraphError` listing every problem found (order, dangling values, names, uses, op defs)."""
        problems = list(self._problems())
        if problems:
            shown = "; ".join(problems[:10]) + (f"; and {len(problems) - 10} more" if len(problems) > 10 else "")
            raise GraphError(f"graph {self.name!r} is malformed: {shown}")

    def _problems(self) -> Iterator[str]:
        seen: set[int] = set()
        names: set[str] = set()
        for node in self.nodes:
            if node.name in names:
                yield f"two nodes are named {node.name!r}"
            names.add(node.name)
            if self._names.get(node.name) is not node:
                yield f"node {node.name!r} is not registered under its name (rename through the graph)"
            if node.graph is not self:
                yield f"node {node.name!r} belongs to graph {node.graph.name!r}"
            for slot, value in enumerate(node.inputs):
                if value is None:
                    continue
                if value.producer.graph is not self or value.producer.name not in self._names:
                    yield f"node {node.name!r} input {slot} reads {value.ref}, whose producer is not in this graph"
                elif id(value.producer) not in seen and not value.meta.get("back_edge"):
                    yield f"node {node.name!r} input {slot} reads {value.ref}, which is scheduled later (not topological)"
                if (node, slot) not in value._uses:
                    yield f"node {node.name!r} input {slot} is missing from the uses of {value.ref}"
            for ctrl in node.control_inputs:
                if id(ctrl) not in seen:
                    yield f"node {node.name!r} has control input {ctrl.name!r} that is not scheduled before it"
            for value in node.outputs:
                for user, slot in value._uses:
                    if slot >= len(user.inputs) or user.inputs[slot] is not value:
                        yield f"value {value.ref} lists a stale use by {user.name!r} slot {slot}"
            if node.opdef is not None:
                try:
                    node.opdef.bind_inputs(len(node.inputs))
                    node.opdef.bind_outputs(len(node.outputs))
                    node.opdef.check_attrs(dict(node.attrs.items()), f"node {node.name!r}")
                except ValueError as e:
                    yield str(e)
            for key, body in node.subgraphs.items():
                for problem in body._problems():
                    yield f"in body {key!r} of {node.name!r}: {problem}"
            seen.add(id(node))
        for value in self.outputs:
            if id(value.producer) not in seen:
                yield f"graph output {value.ref} is produced by a node not in this graph"
        for i, value in enumerate(self.inputs):
            if value.producer.op != DATA_OP:
                yield f"graph input {i} ({value.ref}) is not produced by a {DATA_OP} node"

    def __repr__(self) -> str:
        return f"Graph({self.name!r}, {len(self.nodes)} nodes)"


def _declared_or_private(attrs: Mapping[str, Any], specs: Mapping[str, Any]) -> bool:
    """Whether every name of ``attrs`` is declared in ``specs`` or private (``_name``). :meth:`Graph.add_node`
    stores an attribute value of its declared kind, or under a private name, as it is; only an undeclared
    public name of a definition that does not accept such names needs its general path (which refuses it)."""
    if attrs.keys() <= specs.keys():
        return True
    return all(name[0] == "_" for name in attrs.keys() - specs.keys())


def _of_declared_kinds(attrs: Mapping[str, AttrValue], opdef: OpDef) -> bool:
    """Whether :meth:`Graph.add_node` stores each value of ``attrs`` as it is (the rule of its loop over them):
    under a private name, an undeclared one where ``opdef`` accepts such names, or a declared one of its kind."""
    specs = opdef.attrs
    open_attrs = opdef.open_attrs
    for name, value in attrs.items():
        if name[0] == "_":
            continue
        spec = specs.get(name)
        if not (open_attrs if spec is None else spec.type_id is value.type_id):
            return False
    return True


def _complete_as_given(opdef: OpDef, attrs: Mapping[str, Any]) -> bool:
    """Whether every name of ``attrs`` is declared by ``opdef`` or private, or ``opdef`` accepts undeclared
    names (``open_attrs``, a framework op), and every declared name is there: :meth:`Graph.add_node` then
    stores a vouched map as it is and ``complete_attrs`` adds nothing. Remembered with the definition's
    bindings by whether it is open and the tuple of names (a definition that changes forgets its bindings)."""
    open_attrs = opdef.open_attrs
    key = ("complete", open_attrs, tuple(attrs))
    found = opdef._bindings.get(key)
    if found is None:
        declared = opdef.attrs
        found = opdef._bindings[key] = (open_attrs or _declared_or_private(attrs, declared)) and (
            attrs.keys() >= declared.keys())
    return found


def _note_const_as_given(opdef: OpDef, type_id: AttrType) -> None:
    """Notes with ``opdef``'s bindings (a definition that changes forgets them) that :meth:`Graph._new_const`
    may add a constant whose value is of kind ``type_id`` at once: the definition has one output and a ``value``
    of that kind, ``add_node`` has accepted its arity, and ``{"value": ...}`` is its complete attribute map."""
    if _complete_as_given(opdef, {"value": None}):
        opdef._bindings[("const", type_id)] = True


def _bare_node(graph: Graph, name: str, dialect: str, op_type: str, op: str, attrs: dict[str, AttrValue],
               opdef: OpDef | None) -> Node:
    """A node of ``graph`` as ``Node.__init__`` makes it, without inputs or outputs yet, keeping ``attrs`` as its
    attribute map (the caller fills or has checked it): written out, as the graph adds one per node it builds."""
    node = _new(Node)
    node.graph = graph
    node.name = name
    node._dialect = dialect
    node._op_type = op_type
    node.op = op
    node_attrs = node.attrs = _new(Attributes)
    node_attrs._owner = node
    node_attrs._attrs = attrs
    node.control_inputs = ()
    node.subgraphs = {}
    node.opdef = opdef
    node.meta = {}
    return node


def _one_output(node: Node) -> list[Value]:
    """``[Value(node, 0, None)]``, ``Value.__init__`` spelled out: the usual single output of a new node."""
    out = _new(Value)
    out.producer = node
    out.index = 0
    out.type = None
    out._uses = {}
    out.meta = {}
    return [out]
