"""Op parsers: how each framework node and each fused op becomes IR (after seed 003's op-parser registration).

An :class:`OpParserRegistry` maps ``(framework, op type)`` to a parser that turns one source node into IR
nodes; nodes with no registered parser are converted one to one into their framework's dialect
(``tf.Conv2D``, ``onnx.MatMul``), attributes typed through the op definition. For each fused op type a
*fused parser* reads the fused op's parameters (epsilon, axes, weights, activation...) from the claimed
source nodes and returns its attributes.

The registry is an ordinary object; :func:`default_op_parsers` makes one with the builtin parsers.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable

import numpy as np

from ..dtypes import DType
from ..errors import FusionError, ParseError
from ..ir.attrs import LIST_STR, STR, AttrValue
from ..ir.graph import Graph, GraphError, Node, Value
from ..ir.opdef import ParamType
from ..parser.source_graph import (
    ABSENT_INPUT,
    FRAMEWORK_ONNX,
    FRAMEWORK_TENSORFLOW,
    INITIALIZER_OP,
    INPUT_OP,
    OUTER_SCOPE_OP,
    SourceGraph,
    SourceNode,
    is_back_edge_op_pair,
)
from ..records import Record
from .attr_checks import check_source_attrs
from .source_attrs import convert_attrs
from .splat_consts import add_constant

if TYPE_CHECKING:  # pragma: no cover
    from ..parser.op_signatures import OpSignatures
    from ..scope.accepted import AcceptedFusion, ResolvedInnerNode

__all__ = ["BuildContext", "OpParserRegistry", "default_op_parsers", "dialect_of", "is_back_edge"]

NodeParser = Callable[["BuildContext", SourceNode], Node]
FusedParser = Callable[["AcceptedFusion", SourceGraph], dict[str, Any]]

INPUT_OPS = frozenset({"Placeholder", "_Arg", INPUT_OP})


def dialect_of(framework: str, domain: str = "") -> str:
    """``tf`` for TensorFlow; ``onnx`` for ONNX's default domain, ``onnx:<domain>`` for others."""
    if framework == FRAMEWORK_ONNX:
        return "onnx" if domain in ("", "ai.onnx") else f"onnx:{domain}"
    return "tf" if framework in (FRAMEWORK_TENSORFLOW, "tf", "") else framework


class BuildContext(Record):
    """What parsers see while one graph is built: the source, the IR graph, and the value map."""

    _fields = (
        "source", "graph", "parsers", "dropped_attrs", "build_body", "_values", "_nodes", "_fusions", "_back_edges",
        "_ops",
    )

    def __init__(
        self,
        source: SourceGraph,
        graph: Graph,
        parsers: "OpParserRegistry",
        dropped_attrs: dict[str, list[str]],
        build_body: Callable[[SourceGraph, str], Graph],
        _values: dict[tuple[str, int], Value] | None = None,
        _nodes: dict[str, Node] | None = None,
        _fusions: dict[str, list[Node]] | None = None,
        _back_edges: list[tuple[str, int, str, int]] | None = None,
        _ops: dict[tuple[str, str], tuple[str, Any, str, str]] | None = None,
    ) -> None:
        self.source = source
        self.graph = graph
        self.parsers = parsers
        self.dropped_attrs = dropped_attrs
        self.build_body = build_body
        self._values = {} if _values is None else _values
        self._nodes = {} if _nodes is None else _nodes
        self._fusions = {} if _fusions is None else _fusions
        self._back_edges = [] if _back_edges is None else _back_edges
        self._ops = {} if _ops is None else _ops  # (domain, op type) -> (op, its definition, op's dialect and type)

    def bind(self, source_name: str, index: int, value: Value) -> None:
        self._values[(source_name, index)] = value

    def value(self, source_name: str, index: int) -> Value:
        found = self._values.get((source_name, index))
        if found is None:
            node = self.source.get(source_name)
            what = f"{node.op_type} node" if node is not None else "node"
            raise ParseError(
                f"{self.source.path or self.source.name}: output {index} of {what} {source_name!r} is read but was "
                "never built (it has fewer outputs, or a fusion absorbed it); check the fusion's index maps"
            )
        return found

    def input_value(self, node: SourceNode, slot: int) -> Value | None:
        """The value feeding ``node``'s input ``slot``: None for an omitted optional input; a TF1 loop back
        edge (NextIteration → Merge), whose producer comes later, is connected when the producer is built."""
        producer, index = node.inputs[slot]
        found = self._values.get((producer, index))
        if found is not None:
            return found
        if (producer, index) == ABSENT_INPUT:
            return None
        if is_back_edge(self.source, producer, node):
            self._back_edges.append((producer, index, node.name, slot))
            return None
        return self.value(producer, index)

    def connect_back_edges(self) -> None:
        for producer, index, consumer, slot in self._back_edges:
            value = self.value(producer, index)
            value.meta["back_edge"] = True
            self.node_for(consumer).replace_input_with(slot, value)  # type: ignore[union-attr]
        self._back_edges.clear()

    def build_attr_body(self, body: SourceGraph) -> Graph:
        """The IR graph of a graph-valued attribute (a body held as an attribute, not as a subgraph)."""
        return self.build_body(body, body.name or "body")

    def node_for(self, source_name: str) -> Node | None:
        """The IR node standing for a source node (the fused node for a claimed one)."""
        return self._nodes.get(source_name)

    def record(self, fusion: "AcceptedFusion | str", nodes: list[Node]) -> None:
        name = fusion if isinstance(fusion, str) else fusion.name
        self._fusions[name] = nodes
        if not isinstance(fusion, str) and nodes:
            for claimed in fusion.claimed:
                self._nodes[claimed] = nodes[0]

    def emitted_for(self, fusion_name: str) -> list[Node]:
        return self._fusions.get(fusion_name, [])

    def emit(self, source: SourceNode, node: Node) -> Node:
        name = source.name
        self._nodes[name] = node
        names = source.output_names
        values = self._values
        for i, v in enumerate(node.outputs):
            values[(name, i)] = v
            if i < len(names) and names[i]:
                v.meta["tensor_name"] = names[i]
        return node


_BUILTIN_FIXED_OUTPUTS: dict[str, int | None] = {}  # see OpParserRegistry.__init__


class OpParserRegistry:
    """Parsers by framework op type and by fused op type; an ordinary object, fresh per use."""

    def __init__(self) -> None:
        self._node_parsers: dict[tuple[str, str], NodeParser] = {}
        self._fused_parsers: dict[str, FusedParser] = {}
        self._signatures: OpSignatures | None = None
        # TF op type -> its output count when attributes cannot change it: the builtin signature table's
        # answers, which never change, so every registry shares them (made once per process and op type).
        self._fixed_outputs: dict[str, int | None] = _BUILTIN_FIXED_OUTPUTS

    def register(self, framework: str, op_type: str, parser: NodeParser) -> None:
        key = (framework, op_type)
        if key in self._node_parsers:
            raise FusionError(f"an op parser for {framework} op {op_type!r} is already registered")
        self._node_parsers[key] = parser

    def register_fused(self, fused_type: str, parser: FusedParser) -> None:
        """Registers the parameter parser of fused op type ``fused_type`` (replacing none)."""
        if fused_type in self._fused_parsers:
            raise FusionError(f"a fused-op parser for {fused_type!r} is already registered")
        self._fused_parsers[fused_type] = parser

    def fused_types(self) -> list[str]:
        return sorted(self._fused_parsers)

    # ------------------------------------------------------------------ conversion
    def convert_node(self, ctx: BuildContext, node: SourceNode) -> Node:
        framework = ctx.source.framework
        parser = self._node_parsers.get((framework, node.op_type)) if self._node_parsers else None
        if parser is not None:
            return ctx.emit(node, parser(ctx, node))
        if node.value is not None or node.op_type == INITIALIZER_OP:
            value = add_constant(ctx.graph, _array(node), node.name)
            return ctx.emit(node, value.producer)
        if node.op_type in INPUT_OPS and not node.inputs:
            return ctx.emit(node, self._input(ctx, node))
        if node.op_type == OUTER_SCOPE_OP:
            # A body's read of an enclosing graph's tensor: an extra body input, typed from the enclosing
            # graph during inference and fed by name at run time.
            value = ctx.graph.add_input(node.name, None)
            value.producer.set_attr("_outer_name", node.output_names[0] if node.output_names else node.name, STR)
            return ctx.emit(node, value.producer)
        return ctx.emit(node, self.one_to_one(ctx, node))

    def _input(self, ctx: BuildContext, node: SourceNode) -> Node:
        declared = next((i for i in ctx.source.inputs if i.node == node.name), None)
        dtype = declared.dtype if declared is not None else node.attrs.get("dtype")
        shape = declared.shape if declared is not None else node.attrs.get("shape")
        t = ctx.graph.context.tensor(dtype, shape) if dtype is not None and isinstance(dtype, DType) else None
        value = ctx.graph.add_input(node.name, t)
        value.producer.set_attr("_input_name", declared.name if declared is not None else node.name, STR)
        return value.producer

    def one_to_one(self, ctx: BuildContext, node: SourceNode) -> Node:
        """The node in its framework's dialect, attributes typed, bodies built."""
        framework = ctx.source.framework
        graph = ctx.graph
        found = ctx._ops.get((node.domain, node.op_type))
        if found is None:
            op = f"{dialect_of(framework, node.domain)}.{node.op_type}"
            dialect, _, op_type = op.rpartition(".")
            found = ctx._ops[(node.domain, node.op_type)] = (op, graph.registry.lookup(op), dialect, op_type)
        op, opdef, dialect, op_type = found
        # Bodies go to node.subgraphs only (by attribute name), not a second time as GRAPH attributes.
        subgraphs = node.subgraphs
        plain = {k: v for k, v in node.attrs.items() if k not in subgraphs} if subgraphs else node.attrs
        attrs, dropped = convert_attrs(plain, opdef, graph_converter=ctx.build_attr_body, declared_kinds_only=True)
        if dropped or "N" in plain:  # what check_source_attrs checks (nothing else can fail it)
            check_source_attrs(node.name, op, plain, dropped, opdef, len(node.inputs))
        if dropped:
            ctx.dropped_attrs[node.name] = dropped
        built = ctx._values
        inputs = []
        slot = 0
        for edge in node.inputs:
            value = built.get(edge) if type(edge) is tuple else None
            inputs.append(value if value is not None else ctx.input_value(node, slot))
            slot += 1
        controls = [c for c in (ctx.node_for(n) for n in node.control_inputs) if c is not None] if node.control_inputs else None
        bodies = {key: ctx.build_body(body, f"{node.name}/{key}") for key, body in subgraphs.items()} if subgraphs else None
        # An op whose output count no attribute decides (most TF ops) has it in the table _num_outputs keeps.
        fixed = self._fixed_outputs.get(node.op_type) if framework == FRAMEWORK_TENSORFLOW else None
        n_out = fixed if fixed is not None else self._num_outputs(framework, node, opdef)
        if not bodies:
            made = graph._add_converted(op, dialect, op_type, opdef, inputs, node.name, attrs, n_out, controls)
            if made is not None:
                return made
        return graph.add_node(
            op,
            inputs,
            name=node.name,
            attrs=attrs,
            num_outputs=n_out,
            control_inputs=controls or (),
            subgraphs=bodies,
            allow_unknown=True,
            attrs_of_declared_kinds=True,  # convert_attrs above, declared kinds only, of a source node's names
        )

    def _num_outputs(self, framework: str, node: SourceNode, opdef) -> int:
        if node.output_names and framework == FRAMEWORK_ONNX:
            return len(node.output_names)
        if framework in (FRAMEWORK_TENSORFLOW, "tf"):
            if self._signatures is None:
                from ..parser.op_signatures import builtin_signatures

                self._signatures = builtin_signatures()
            fixed = self._fixed_outputs.get(node.op_type, -1)
            if fixed == -1:
                # An op whose every output argument is one tensor has that many outputs whatever its attributes
                # (the signature table answers once per process).
                fixed = self._fixed_outputs[node.op_type] = self._signatures.fixed_count(node.op_type)
            if fixed is not None:
                return fixed
            n = self._signatures.num_outputs(node.op_type, node.attrs)
            if n is not None:
                return n
        if opdef is not None and all(s.param is ParamType.REQUIRED for s in opdef.outputs):
            return len(opdef.outputs)
        return max(1, len(node.output_names))

    def convert_fused(
        self,
        ctx: BuildContext,
        fusion: "AcceptedFusion",
        inputs: list[Value | None],
        num_outputs: int,
        provenance: dict[str, Any],
        controls: list[Node],
    ) -> Node:
        """The fused op of a one-to-one fusion, its parameters read by the fused parser of its type."""
        attrs: dict[str, Any] = dict(fusion.attrs)
        parser = self._fused_parsers.get(fusion.op_type)
        if parser is not None:
            try:
                attrs.update(parser(fusion, ctx.source))
            except (KeyError, ValueError, TypeError, IndexError) as e:
                raise FusionError(
                    f"fusion {fusion.name!r} ({fusion.pass_name}) to {fusion.op_type}: its parameters cannot be read "
                    f"from the claimed nodes: {e}"
                ) from e
        names_given = "_original_nodes" in attrs
        attrs.update(provenance)
        if not names_given:
            # Set last below, where the update put it: the names need no conversion first.
            del attrs["_original_nodes"]
        op = f"fused.{fusion.op_type}"
        opdef = ctx.graph.registry.lookup(op)
        typed, dropped = convert_attrs(attrs, opdef)
        if dropped:
            ctx.dropped_attrs[fusion.name] = dropped
        typed["_original_nodes"] = _names_attr(provenance["_original_nodes"])
        graph = ctx.graph
        name = fusion.name if fusion.name not in graph else graph.unique_name(fusion.name)
        try:
            dialect, _, op_type = op.rpartition(".")
            made = graph._add_converted(op, dialect, op_type, opdef, inputs, name, typed, num_outputs,
                                        list(controls) if controls else None, kinds_vouched=False)
            if made is not None:
                return made
            return graph.add_node(
                op, inputs, name=name, attrs=typed, num_outputs=num_outputs, control_inputs=controls, allow_unknown=True
            )
        except (GraphError, ValueError, TypeError) as e:
            raise FusionError(_arity_message(fusion, name, op, len(inputs), num_outputs, e)) from None

    def convert_inner(
        self,
        ctx: BuildContext,
        fusion: "AcceptedFusion",
        inner: "ResolvedInnerNode",
        inputs: list[Value],
        num_outputs: int,
        provenance: dict[str, Any],
        controls: list[Node],
    ) -> Node:
        """One inner node of a many-to-many fusion: a fused op when one is defined, else a framework op."""
        registry = ctx.graph.registry
        candidates = [f"fused.{inner.op_type}", f"{dialect_of(ctx.source.framework)}.{inner.op_type}"]
        op = next((c for c in candidates if c in registry), candidates[0])
        if inner.op_type in ("Const", "Constant") and "value" in inner.attrs:
            value = ctx.graph.add_const(np.asarray(inner.attrs["value"]), inner.name, unique=False)
            value.producer.set_attr("_fusion_rule", provenance["_fusion_rule"], STR)
            return value.producer
        typed, dropped = convert_attrs(dict(inner.attrs) | {"_fusion_rule": provenance["_fusion_rule"]}, registry.lookup(op))
        if dropped:
            ctx.dropped_attrs[inner.name] = dropped
        typed["_original_nodes"] = _names_attr(provenance["_original_nodes"])
        try:
            return ctx.graph.add_node(
                op, inputs, name=inner.name, attrs=typed, num_outputs=num_outputs, control_inputs=controls,
                allow_unknown=True,
            )
        except (GraphError, ValueError, TypeError) as e:
            raise FusionError(_arity_message(fusion, inner.name, op, len(inputs), num_outputs, e)) from None


def _arity_message(fusion: "AcceptedFusion", node: str, op: str, n_in: int, n_out: int, error: Exception) -> str:
    return (
        f"rule {fusion.pass_name}: fusion {fusion.name!r} makes node {node!r} ({op}) with {n_in} input and {n_out} "
        f"output port(s), which its op definition does not accept ({error}); fix the rule's insert_inputs / "
        "insert_outputs"
    )


def is_back_edge(source: SourceGraph, producer: str, consumer: SourceNode) -> bool:
    """True for a TF1 loop back edge: a ``NextIteration`` feeding a ``Merge``."""
    p = source.get(producer)
    return p is not None and is_back_edge_op_pair(p.op_type, consumer.op_type)


def _names_attr(names: list[str]) -> AttrValue:
    """``AttrValue(LIST_STR, tuple(names))`` for the source node names a fused node stands for: when every
    name is a ``str`` (as node names are), the tuple that checking each item would give, without checking
    each item again (a fusion may claim a hundred nodes)."""
    items = tuple(names)
    if all(type(name) is str for name in items):
        return AttrValue._trusted(LIST_STR, items)
    return AttrValue(LIST_STR, items)


def _array(node: SourceNode) -> np.ndarray:
    value = node.value if node.value is not None else node.attrs.get("value")
    if value is None:
        raise ParseError(f"constant node {node.name!r} ({node.op_type}) has no value")
    return np.asarray(value)


def default_op_parsers() -> OpParserRegistry:
    """A registry with the builtin parsers (the fused-op parsers come with the fusion rules)."""
    return OpParserRegistry()
