"""IR graphs to ONNX ``GraphProto`` (the graph half of :mod:`.onnx_export`).

* ``ge.Data`` → a graph input named by ``_input_name``; in a body, a ``ge.Data`` with ``_outer_name`` is
  no input but a reference to that tensor of an enclosing graph (ONNX's outer-scope read).
* ``ge.Const`` → an initializer of the graph it is in.
* ``onnx`` → the default domain, ``onnx:<domain>`` → ``<domain>``; attributes through the op's ONNX schema
  (attributes equal to the schema default are left out); ``fused`` → through the fused exporters
  (:mod:`.onnx_fused`), else domain ``scopefusion``; any other dialect (``tf``) → the domain of its name,
  attributes by IR kind (:mod:`.onnx_attrs`).
* Bodies (``node.subgraphs``) → ``GRAPH`` attributes by key, keys ``name:0``, ``name:1``… → one ``GRAPHS``
  attribute ``name``; written recursively, after the enclosing graph's names are taken.

NOTE: names. Every tensor name is unique in the whole model (ONNX forbids a body from redefining a name it
can see; unique everywhere is simpler and still keeps the source names). Per graph, in this order: inputs
take their input names, outputs the graph's ``_output_names``, then every value with an original tensor
name (``value.meta["tensor_name"]``) takes it, then the rest take the IR value name (``node`` /
``node:i``). A taken name gets ``_1``, ``_2``… An output whose value is an input, a constant, or a value
that is already another output gets an ``Identity``. So an ONNX-born model keeps its tensor names and its
input and output names.

NOTE: layouts. Lowering a graph without bodies, the writer keeps a :class:`~.onnx_lowering.layout.LayoutTracker`:
channels-last ops and the layout-agnostic ops after them work on channels-first forms, and a value's own
(channels-last) name is written, by a Transpose, only before a node that reads it or for a graph output. The
channels-first forms get value infos of their own (the clean-up reads their shapes, then leaves them out). An
identity or an op with a neutral constant operand (a zero bias) is written as nothing there: its output takes its
input's name (for a graph output, TF's final Identity, the node computing its input, which nothing else reads,
writes the output's name).

NOTE: what ONNX cannot hold is kept as attributes of the non-standard ops that have it: a TF control input
as ``_control_inputs`` (node names), a TF1 loop back edge (``NextIteration`` → ``Merge``, a cycle ONNX does
not allow) as an empty input slot plus ``_back_edges`` (``"slot:tensor"``). Fusion provenance
(``_fusion_rule``, ``_original_nodes``) goes to the node's ``doc_string``.
"""

from __future__ import annotations

from typing import Any, Mapping, cast

from ..errors import SerdeError
from ..ir.attrs import LIST_STR, AttrValue
from ..ir.graph import CONST_OP, DATA_OP, Graph, Node, Value
from ..ir.types import TensorType
from .onnx_attrs import (
    attribute_proto,
    body_groups,
    is_schema_default,
    onnx_elem_type,
    type_into,
)
from .onnx_fold import fold_constants
from .onnx_fused import FusedEmitter, FusedExporterRegistry, Unmapped
from .onnx_lowering import LoweringEmitter, LoweringRegistry
from .onnx_lowering.layout import CANDIDATES, ChannelsFirstType, LayoutTracker, PassThrough
from .onnx_lowering.misc import write_nothing
from .onnx_lowering.registry import PlainOp, PlainWritten
from .onnx_lowering.tensor_lists import holds_list
from .onnx_node import Initializer, append_initializers, append_nodes
from .onnx_node import Node as OnnxNode
from .onnx_proto import AttributeProto, GraphProto, TypeProto, ValueInfoProto, get_schema, make_node

__all__ = ["FALLBACK_DOMAIN", "GraphWriter", "IOShapes", "ValueType", "append_value_infos"]

FALLBACK_DOMAIN = "scopefusion"
PROVENANCE_ATTRS = ("_fusion_rule", "_original_nodes")
_SOURCE_OPS = (DATA_OP, CONST_OP)


class _Names:
    """Model-wide unique names: ``base``, else ``base_1``, ``base_2``… (deterministic)."""

    def __init__(self) -> None:
        self.taken: set[str] = set()
        self._next: dict[str, int] = {}

    def claim(self, base: str) -> str:
        base = base or "t"
        if base not in self.taken:
            self.taken.add(base)
            return base
        n = self._next.get(base, 1)
        while f"{base}_{n}" in self.taken:
            n += 1
        self._next[base] = n + 1
        name = f"{base}_{n}"
        self.taken.add(name)
        return name


class _Scope:
    """The names one graph gives its values, and the tensor names an enclosed body may read."""

    # NOTE: a plain class, not a dataclass: making a dataclass costs a third of a millisecond at import.
    __slots__ = ("graph", "parent", "writer", "names", "visible", "initializers", "folded", "output_ids", "has_bodies",
                 "layout", "scalars", "written")

    def __init__(self, graph: Graph, parent: "_Scope | None", writer: "GraphWriter") -> None:
        self.graph = graph
        self.parent = parent
        self.writer = writer  # which holds no scope: no reference cycle, nothing left for the collector
        # Keyed by the IR values themselves: a value hashes by identity, looked up without an id() call.
        self.names: dict[Value, str] = {}  # value -> ONNX name
        self.visible: dict[str, str] = {}  # source tensor / IR value name -> ONNX name
        self.initializers: list[Initializer] = []  # made by fused exporters
        self.folded: dict[Value, Any] = {}  # value -> array, tf values computed from constants
        self.output_ids: set[Value] = set(graph.outputs)  # the graph's outputs
        self.has_bodies = True  # whether a node of the graph has a body (known once its values are named)
        self.layout: LayoutTracker | None = None  # the channels-first forms of its values, when tracked
        self.scalars: dict[tuple[str, bytes], str] = {}  # its scalar initializers by (dtype, bytes), made by emitters
        self.written: list[OnnxNode] = []  # its nodes written so far

    def write_body(self, graph: Graph) -> GraphProto:
        """Writes ``graph``, a body of a node of this graph (which may read this graph's tensors by name)."""
        return self.writer.write(graph, parent=self)

    def resolve(self, name: str) -> str | None:
        scope: _Scope | None = self
        while scope is not None:
            found = scope.visible.get(name)
            if found is not None:
                return found
            scope = scope.parent
        return None


class GraphWriter:
    """Writes IR graphs of one model as ONNX graphs; collects the domains the model must import.

    Args:
        opset: the default-domain opset of the export.
        exporters: the fused-op exporters.
        domain_versions: versions of custom domains (``onnx:<domain>`` dialects) from the source model.
        lowerings: the ``tf`` op lowerings; None writes ``tf`` ops in domain ``tf`` (a structural export).
        track_layout: when lowering, hold values channels first where the ops allow (the default), instead of
            writing every channels-last op between two Transposes (:mod:`.onnx_lowering.layout`).
        known_values: the values shape inference knows of the main graph's values, by ``id(value)``: folding
            takes them instead of computing them again (:func:`.onnx_fold.fold_constants`).
    """

    def __init__(self, opset: int, exporters: FusedExporterRegistry, domain_versions: Mapping[str, int] | None = None,
                 lowerings: LoweringRegistry | None = None, track_layout: bool = True,
                 known_values: Mapping[int, Any] | None = None) -> None:
        self.opset = opset
        self.known_values = known_values
        self.track_layout = track_layout
        self.exporters = exporters
        self.lowerings = lowerings
        self.unlowered: list[tuple[str, str, str]] = []  # (tf op type, node, why it has no ONNX form)
        self.domain_versions = dict(domain_versions or {})
        self.domains: dict[str, int] = {"": opset}
        self.unmapped: list[tuple[str, str, str]] = []  # (graph, fused node, why it went to the fallback domain)
        self._tensors = _Names()
        self._nodes = _Names()
        self._schemas: dict[tuple[str, str], Any] = {}
        self.left_out: list[str] = []  # initializers write_nodes left out as unread (``leave_out_unread``), by name
        # The shape each graph input and output written says (None for an unknown dim), or None when its type has
        # none, by tensor name (unique in the model): the clean-up reads them here instead of from the messages.
        self.io_shapes: dict[str, list[int | None] | None] = {}

    # ------------------------------------------------------------------ graphs
    def write(self, graph: Graph, *, dim_params: Mapping[str, tuple[str, ...]] | None = None,
              parent: _Scope | None = None, into: GraphProto | None = None) -> GraphProto:
        """The ``GraphProto`` of ``graph``; ``dim_params`` names unknown input dims, by input node name.
        With ``into`` (an empty ``GraphProto``, such as a new model's ``graph``), written there and returned."""
        proto, nodes, value_infos, initializers = self.write_nodes(graph, dim_params=dim_params, parent=parent,
                                                                   into=into)
        append_nodes(proto, nodes)
        append_initializers(proto, initializers)
        append_value_infos(proto, value_infos)
        return proto

    def write_nodes(self, graph: Graph, *, dim_params: Mapping[str, tuple[str, ...]] | None = None,
                    parent: _Scope | None = None,
                    into: GraphProto | None = None,
                    leave_out_unread: bool = False,
                    ) -> tuple[GraphProto, list[OnnxNode], list[ValueType], list[Initializer]]:
        """As :meth:`write`, with the nodes, the value infos and the initializers left out of the ``GraphProto``
        and returned (in order): the nodes as :class:`~.onnx_node.Node` objects, the value infos as (tensor name,
        IR type) of a type ONNX can say, the initializers as :class:`~.onnx_node.Initializer` objects; for the
        clean-up to rewrite before they are written (:func:`.append_nodes`, :func:`.append_value_infos`,
        :func:`.append_initializers`).

        ``leave_out_unread`` (for the clean-up, which removes unread initializers): in a graph without bodies, a
        constant or folded value no node written reads is no initializer (a weight read through an ``Identity``
        whose lowering made its own rearranged copy, a parameter a fused exporter folded into another); its name
        goes to :attr:`left_out` (see :class:`~.onnx_optimize.GraphIndex` on why the result is the same)."""
        scope = _Scope(graph, parent, self)
        nodes: list[OnnxNode] = []
        scope.written = nodes
        proto = into if into is not None else GraphProto()
        proto.name = graph.name
        outputs = self._name_values(scope, proto, dim_params or {})
        # The values computed so far (a Data or Const node's value counts as defined wherever it is: see _node).
        defined: set[Value] = set(graph.inputs)
        folded_nodes = self._fold(scope)
        tracker: LayoutTracker | None = None
        if self.track_layout and self.lowerings is not None and len(self.lowerings) and not scope.has_bodies:
            tracker = scope.layout = LayoutTracker(self._tensors.claim, self._nodes.claim, scope.output_ids)
        produced: list[Value] = []
        value_infos: list[ValueType] = []
        # The initializers, in order, as (name, its Const node or None, its folded array or None): made only once
        # the nodes are written, when it is known which of them a node reads.
        constants: list[tuple[str, Node | None, Any]] = []
        names = scope.names
        for node in graph.nodes:
            op = node.op
            if op == DATA_OP:
                continue
            if op == CONST_OP:
                constants.append((names[node.outputs[0]], node, None))
                continue
            if node in folded_nodes:
                for value in node.outputs:
                    if value in names:
                        for user, _ in value._uses:  # the uses themselves, not the copy Value.uses makes
                            if user not in folded_nodes:  # needed by a node that is written
                                constants.append((names[value], None, scope.folded[value]))
                                break
                    defined.add(value)
                continue
            protos = self._node(node, scope, defined)
            if tracker is not None and tracker.pending and tracker.may_read_pending(node):
                produced.extend(tracker.materialize_reads(protos))
            nodes.extend(protos)
            written = protos[0].output if len(protos) == 1 else {name for p in protos for name in p.output}
            for value in node.outputs:
                defined.add(value)
                if names.get(value) in written:
                    produced.append(value)
        add_output, io_shapes = proto.output.add, self.io_shapes
        for value, name in outputs:
            if tracker is not None and value in tracker.pending:  # a graph output is read channels last
                nodes.append(tracker.materialize(value))
                produced.append(value)
            source = scope.names[value]
            if source != name:
                nodes.append(OnnxNode.make("Identity", [source], [name], self._nodes.claim(f"{name}/Identity")))
            io_shapes[name] = _value_info_into(add_output(), name, value.type)
        out_names = {name for _, name in outputs}
        # A body may read any tensor of its graph by name: then every constant stays.
        read = _names_read(nodes, out_names) if leave_out_unread and not scope.has_bodies else None
        initializers = self._initializers(constants, scope.initializers, read)
        lowering = self.lowerings is not None
        for value in produced:
            name = names[value]
            t = value.type
            if (name not in out_names and isinstance(t, TensorType) and onnx_elem_type(t.dtype) != 0
                    and not (lowering and holds_list(value))):
                value_infos.append((name, t))
        if tracker is not None:
            value_infos.extend(tracker.infos)
        return proto, nodes, value_infos, initializers

    def _initializers(self, constants: list[tuple[str, Node | None, Any]], made: list[Initializer],
                      read: set[str] | None) -> list[Initializer]:
        """The graph's initializers: its ``constants`` (see :meth:`write_nodes`), then those the emitters ``made``;
        with ``read``, the names some node reads, only those read (the others' names go to :attr:`left_out`)."""
        if read is not None:
            # Most constants of a TF graph are read only through the identities and reshapes folded away.
            self.left_out.extend([name for name, _, _ in constants if name not in read])
            constants = [c for c in constants if c[0] in read]
            self.left_out.extend([t.name for t in made if t.name not in read])
            made = [t for t in made if t.name in read]
        out = [Initializer.of_array(name, const.attrs.as_tensor("value") if const is not None else array)
               for name, const, array in constants]
        out.extend(made)
        return out

    def _fold(self, scope: _Scope) -> set[Node]:
        """Folds the graph's constant ``tf`` values (when lowering); returns the nodes folded whole (an IR node
        hashes by identity, so the set holds the nodes themselves, tested without an id() call)."""
        if self.lowerings is None or not len(self.lowerings):
            return set()  # folding serves the lowering; a structural export keeps every tf node
        graph = scope.graph
        known = self.known_values if scope.parent is None else None  # inference's, of the main graph's values
        computed: list[Node] = []  # the nodes whose every output is folded
        folded = scope.folded = fold_constants(graph, known, computed)
        if not folded:
            return set()
        outputs = scope.output_ids
        if outputs.isdisjoint(folded):  # the common case: no graph output is folded, every node computed is whole
            return set(computed)
        return {n for n in computed if outputs.isdisjoint(n.outputs)}

    def _name_values(self, scope: _Scope, proto: GraphProto, dim_params: Mapping[str, tuple[str, ...]]) -> list[tuple[Value, str]]:
        """Names every value of the graph (see the module NOTE); returns the graph outputs as (value, name)."""
        graph, names, claim = scope.graph, scope.names, self._tensors.claim
        listed = set(graph.inputs)
        data = list(graph.inputs) + [n.outputs[0] for n in graph.nodes if n.op == DATA_OP and n.outputs[0] not in listed]
        for value in data:
            node = value.producer
            outer = node.attrs.get("_outer_name")
            if outer is not None:
                found = scope.parent.resolve(outer) if scope.parent is not None else None
                if found is None:
                    raise SerdeError(
                        f"graph {graph.name!r}: input {node.name!r} reads tensor {outer!r} of an enclosing graph, "
                        "which none of them defines; the body does not belong to this model"
                    )
                names[value] = found
                scope.visible[outer] = found
                continue
            base = node.attrs.get("_input_name") or value.meta.get("tensor_name") or node.name
            input_name = names[value] = claim(base)
            self.io_shapes[input_name] = _value_info_into(proto.input.add(), input_name, value.type,
                                                          dim_params.get(node.name, ()))
        declared = graph.attrs.get("_output_names")
        if declared is None or len(declared) != len(graph.outputs):
            declared = [v.meta.get("tensor_name") or v.name for v in graph.outputs]
        outputs = []
        for value, wanted in zip(graph.outputs, declared):
            if value not in names and value.producer.op not in (DATA_OP, CONST_OP):
                names[value] = claim(wanted)
                outputs.append((value, names[value]))
            else:
                outputs.append((value, "" if names.get(value) == wanted else claim(wanted)))
        bodies = False
        taken = self._tensors.taken
        unnamed: list[Value] = []  # the values left without a name, in order
        for node in graph.nodes:
            if node.subgraphs:
                bodies = True
            for value in node.outputs:
                if value in names:
                    continue
                tensor = value.meta.get("tensor_name")
                if not tensor:
                    unnamed.append(value)
                    continue
                if tensor in taken:
                    tensor = claim(tensor)
                else:  # what claim does with a free name, without its call: most tensor names are free
                    taken.add(tensor)
                names[value] = tensor
        scope.has_bodies = bodies
        outputs_ = scope.output_ids
        if not bodies:  # no body reads this graph's tensors by name: the rest is only named, in the same order
            for value in unnamed:
                if value.producer.op == CONST_OP or value in outputs_ or value._uses:
                    names[value] = claim(value.name)
            return [(v, name or names[v]) for v, name in outputs]
        visible = scope.visible
        for node in graph.nodes:
            # A node's values are named here once and for all: what a body may read of them is noted at once.
            op = node.op
            const = op == CONST_OP
            for value in node.outputs:
                name = names.get(value)
                if name is None:
                    if not (const or value in outputs_ or value._uses):
                        continue
                    value_name = value.name
                    name = names[value] = claim(value_name)
                else:
                    value_name = value.name
                visible.setdefault(value_name, name)
                tensor = value.meta.get("tensor_name")
                if tensor:
                    visible[tensor] = name
            if op == DATA_OP and node.attrs.get("_input_name"):
                visible[node.attrs.get("_input_name")] = names[node.outputs[0]]
        return [(v, name or names[v]) for v, name in outputs]

    # ------------------------------------------------------------------ nodes
    def _node(self, node: Node, scope: _Scope, defined: set[Value]) -> list[OnnxNode]:
        dialect = node._dialect
        inputs: list[str] = []
        back_edges: list[str] = []  # stays empty but for a TF1 loop's Merge
        names = scope.names
        for value in node.inputs:
            if value in defined:  # the common case first (None is no key)
                inputs.append(names[value])
            elif value is None:
                inputs.append("")
            elif value.producer.op in _SOURCE_OPS:  # defined before any node runs
                inputs.append(names[value])
            else:
                slot = len(inputs)
                if dialect == "onnx" or dialect.startswith("onnx:"):
                    raise SerdeError(f"{_where(node, scope)}: input {slot} reads {value.ref}, which is computed later; ONNX graphs are acyclic")
                back_edges.append(f"{slot}:{names[value]}")
                inputs.append("")
        if dialect == "tf" and self.lowerings is not None:  # the common cases first: a TF model's nodes are tf or fused
            emitted, reason = self._lower(node, scope, inputs, bool(back_edges))
            if emitted is not None:
                return emitted
            self.unlowered.append((node.op_type, node.name, reason))
            return self._structural(node, scope, inputs, back_edges, "tf", False, reason)
        if dialect == "fused":
            emitted, reason = self._fused(node, scope, inputs)
            if emitted is not None:
                return emitted
            self.unmapped.append((scope.graph.name, node.name, reason))
            return self._structural(node, scope, inputs, back_edges, FALLBACK_DOMAIN, False, reason)
        standard = dialect == "onnx" or dialect.startswith("onnx:")
        if dialect == "onnx":
            domain = ""
        elif standard:
            domain = dialect[len("onnx:"):]
        else:
            domain = dialect or FALLBACK_DOMAIN
        return self._structural(node, scope, inputs, back_edges, domain, standard, "")

    def _structural(self, node: Node, scope: _Scope, inputs: list[str], back_edges: list[str], domain: str,
                    standard: bool, reason: str) -> list[OnnxNode]:
        """``node`` as one ONNX node of its own op type in ``domain`` (``standard``: a default- or ``ai.onnx*``-domain
        op), with its attributes; ``reason`` why it has no standard form, for its doc string."""
        outputs = self._output_names(node, scope, domain)
        while inputs and not inputs[-1]:
            inputs.pop()
        if not inputs and not outputs:
            # ONNX wants an input or an output on every node; a TF NoOp has neither, only control inputs.
            outputs = [self._tensors.claim(f"{node.name}:control")]
        proto = make_node(node.op_type, inputs, outputs, name=self._nodes.claim(node.name), domain=domain or None)
        where = _where(node, scope)
        attributes = self._attributes(node, scope, domain, where)
        if not standard:
            # What ONNX edges cannot hold, kept for the reader (see the module NOTE).
            extra = {"_control_inputs": tuple(c.name for c in node.control_inputs), "_back_edges": tuple(back_edges)}
            attributes += [attribute_proto(k, AttrValue(LIST_STR, v), where) for k, v in extra.items() if v and k not in node.attrs]
            attributes.sort(key=lambda a: a.name)
        proto.attribute.extend(attributes)
        doc = _provenance(node)
        if reason:
            doc = f"no standard ONNX form: {reason}" + (f"; {doc}" if doc else "")
        if doc:
            proto.doc_string = doc
        self.domains.setdefault(domain, self.domain_versions.get(domain, 1))
        return [OnnxNode.of(proto)]

    def _output_names(self, node: Node, scope: _Scope, domain: str) -> list[str]:
        """Each output's name; an unused, unnamed output an ONNX schema calls optional is left out (``""``)."""
        schema = self._schema(node.op_type, domain) if domain == "" or domain.startswith("ai.onnx") else None
        names = []
        for i, value in enumerate(node.outputs):
            name = scope.names.get(value)
            if name is None:
                optional = schema is not None and _optional_output(schema, i)
                name = "" if optional else self._tensors.claim(value.name)
                if name:
                    scope.names[value] = name
            names.append(name)
        while names and not names[-1]:
            names.pop()
        return names

    def _attributes(self, node: Node, scope: _Scope, domain: str, where: str) -> list[AttributeProto]:
        schema = self._schema(node.op_type, domain) if domain == "" or domain.startswith("ai.onnx") else None
        bodies = body_groups(node.subgraphs, where)
        out = []
        for name, value in sorted(node.attrs.items()):
            if name in PROVENANCE_ATTRS or name in bodies:
                continue
            spec = schema.attributes.get(name) if schema is not None else None
            if spec is not None and is_schema_default(value, spec):
                continue
            kind = AttributeProto.AttributeType.Value(spec.kind) if spec is not None else None
            out.append(attribute_proto(name, value, where, schema_kind=kind, write_body=lambda g: self.write(g, parent=scope)))
        for name, body in sorted(bodies.items()):
            attr = AttributeProto(name=name)
            if isinstance(body, list):
                attr.type = AttributeProto.GRAPHS
                attr.graphs.extend(self.write(g, parent=scope) for g in body)
            else:
                attr.type = AttributeProto.GRAPH
                attr.g.CopyFrom(self.write(body, parent=scope))
            out.append(attr)
        out.sort(key=lambda a: a.name)
        return out

    def _schema(self, op_type: str, domain: str) -> Any:
        key = (op_type, domain)
        if key not in self._schemas:
            version = self.opset if domain == "" else self.domain_versions.get(domain, 1)
            self._schemas[key] = get_schema(op_type, version, domain)
        return self._schemas[key]

    # ------------------------------------------------------------------ fused ops
    def _lower(self, node: Node, scope: _Scope, inputs: list[str],
               back_edge: bool) -> tuple[list[OnnxNode] | None, str]:
        """The nodes of a ``tf`` op's ONNX form, or None and the reason it has none."""
        lowering = self.lowerings.get(node.op_type) if self.lowerings is not None else None
        if lowering is None:
            return None, f"no ONNX lowering is registered for tf op {node.op_type!r}"
        if back_edge:
            return None, "it reads the back edge of a TF1 loop the exporter could not rebuild as a While"
        if lowering is write_nothing and not node.outputs:  # a NoOp: what its emitter would write, without one
            return [], ""
        return self._emit(node, scope, inputs, lowering, scope.folded)

    def _fused(self, node: Node, scope: _Scope, inputs: list[str]) -> tuple[list[OnnxNode] | None, str]:
        """The nodes of a fused op's ONNX form, or None and the reason to write it in the fallback domain."""
        exporter = self.exporters.get(node.op_type)
        if exporter is None:
            return None, f"no exporter is registered for fused op {node.op_type!r}"
        return self._emit(node, scope, inputs, exporter, None)

    def _emit(self, node: Node, scope: _Scope, inputs: list[str], exporter: Any,
              folded: dict[Value, Any] | None) -> tuple[list[OnnxNode] | None, str]:
        """Runs ``exporter`` on a fused emitter (``folded`` None) or a lowering emitter. Where the layout is
        tracked and the node can run on its inputs' channels-first forms, first on those (and when it declines
        there, as it is; see :mod:`.onnx_lowering.layout`)."""
        graph_outputs = scope.output_ids
        outputs, used = [], []
        names = scope.names
        for value in node.outputs:
            name = names.get(value)
            used.append(bool(value._uses) or value in graph_outputs)
            if name is None:
                name = names[value] = self._tensors.claim(value.name)
            outputs.append(name)
        tracker = scope.layout
        plan: PassThrough | None = None
        if tracker is not None and node._op_type in CANDIDATES:
            if tracker.first:
                plan = tracker.pass_through(node, inputs, folded)
            if plan is None:
                same = tracker.same_value(node, folded)
                if same is not None and same in names:  # it gives its input back: named so, nothing written
                    out = node.outputs[0]
                    if out not in graph_outputs:
                        names[out] = names[same]
                        return [], ""
                    if _rename_output(scope.written, names[same], names[out]):  # its producer writes the output
                        names[same] = names[out]
                        return [], ""
        own = outputs
        if plan is not None and plan.alias is not None:  # it gives held inputs back: nothing to write
            for k, name in zip(plan.held, plan.alias):
                tracker.hold(node.outputs[k], name, own[k], alias=True)  # type: ignore[union-attr]
            return [], ""
        emitter: FusedEmitter | PlainWritten | None = None
        if plan is not None:
            if plan.held:
                outputs = list(own)
                for k in plan.held:
                    outputs[k] = self._tensors.claim(f"{own[k]}/channels_first")
            emitter, _ = self._run_exporter(node, scope, exporter, folded, plan.inputs, outputs, used, plan)
            if emitter is None:
                plan, outputs = None, own  # declined on the channels-first forms: as it is
        if emitter is None:
            emitter, reason = self._run_exporter(node, scope, exporter, folded, inputs, outputs, used, None)
            if emitter is None:
                return None, reason
        emitted = emitter.nodes
        written = emitted[0].output if len(emitted) == 1 else {o for n in emitted for o in n.output}
        held = emitter.held
        if len(outputs) == 1 and held is None:  # the common case, without a comprehension
            missing = [outputs[0]] if used[0] and outputs[0] not in written else []
        else:
            skip = {k for k, _ in held} if held is not None else ()
            missing = [name for k, (name, u) in enumerate(zip(outputs, used)) if u and name not in written and k not in skip]
        if missing:
            raise SerdeError(f"{_where(node, scope)}: its ONNX exporter did not write output {missing[0]!r}; the exporter is incomplete")
        doc = _provenance(node)
        if doc:
            mine = set(outputs)
            if held is not None:
                mine.update(name for _, name in held)
            for proto in emitted:
                if not mine.isdisjoint(proto.output):  # it writes one of the node's outputs
                    proto.doc_string = doc
        if emitter.domains:
            for domain, version in emitter.domains.items():
                self.domains.setdefault(domain, version)
        scope.initializers.extend(emitter.initializers)
        if emitter.scalars_made is not None:
            scope.scalars.update(emitter.scalars_made)
        if tracker is not None and (plan is not None or held is not None or emitter.noted is not None):
            self._track(node, tracker, emitter, plan, outputs, own)
        return emitted, ""

    def _run_exporter(self, node: Node, scope: _Scope, exporter: Any, folded: dict[Value, Any] | None,
                      inputs: list[str], outputs: list[str], used: list[bool],
                      plan: PassThrough | None) -> tuple["FusedEmitter | PlainWritten | None", str]:
        """Runs ``exporter`` on a new emitter of ``node`` (a fused one when ``folded`` is None, else a lowering one,
        on the channels-first forms of ``plan``; arguments by position, see FusedEmitter.__init__'s NOTE); returns the
        emitter, or None and the reason it declined. A :class:`PlainOp`'s one node is written without an emitter."""
        emitter: FusedEmitter
        if type(exporter) is PlainOp and outputs:
            written = exporter.write(node, inputs, outputs[0], self.opset, self._nodes.claim, plan)
            if written is not None:
                return written, ""
        if folded is None:
            emitter = FusedEmitter(node, self.opset, inputs, outputs, used, self._tensors.claim, self._nodes.claim,
                                   scope.layout, scope.scalars,
                                   scope.folded if self.lowerings is not None and len(self.lowerings) else None,
                                   scope.written, scope.output_ids)
        else:
            emitter = LoweringEmitter(node, self.opset, inputs, outputs, used, self._tensors.claim, self._nodes.claim,
                                      folded, scope.write_body, scope.names,
                                      plan.overrides if plan is not None else None, scope.layout, scope.scalars,
                                      scope.written, scope.output_ids)
        if plan is not None:
            emitter.initializers.extend(plan.initializers)
        try:
            exporter(emitter)
        except Unmapped as e:
            return None, str(e)
        except SerdeError:
            raise
        except Exception as e:  # an exporter bug must name the node, not surface as a bare traceback
            detail = " ".join(str(e).split())
            raise SerdeError(f"{_where(node, scope)}: its ONNX exporter failed ({type(e).__name__}: {detail}); report this with the model") from None
        return emitter, ""

    @staticmethod
    def _track(node: Node, tracker: LayoutTracker, emitter: "FusedEmitter | PlainWritten", plan: PassThrough | None,
               outputs: list[str], own: list[str]) -> None:
        """Records in ``tracker`` what ``node``'s ONNX form holds channels first: the outputs of a node lowered on
        channels-first forms (``plan``), those it left held (``outputs`` the names the emitter wrote, ``own`` the
        outputs' own names), and the channels-first forms of its inputs it wrote."""
        if plan is not None:
            for k in plan.held:
                tracker.hold(node.outputs[k], outputs[k], own[k])
        if emitter.noted is not None:
            for i, name in emitter.noted:
                tracker.note(node.inputs[i], name)  # type: ignore[arg-type]
        if emitter.held is not None:
            for k, name in emitter.held:
                tracker.hold(node.outputs[k], name, own[k])


def _rename_output(nodes: list[OnnxNode], old: str, new: str) -> bool:
    """Renames output ``old`` of the last of ``nodes`` that writes it to ``new``; False when none does."""
    for node in reversed(nodes):
        output = node.output
        if old in output:
            output[output.index(old)] = new
            return True
    return False


def _names_read(nodes: list[OnnxNode], outputs: set[str]) -> set[str]:
    """The tensor names ``nodes`` read (their bodies included) and the graph ``outputs``."""
    return outputs.union(*[n.input if n.body_reads is None else n.input + n.body_reads for n in nodes])


def _where(node: Node, scope: _Scope) -> str:
    """Where a node is, for a message."""
    return f"node {node.name!r} ({node.op}) in graph {scope.graph.name!r}"


def _provenance(node: Node) -> str:
    rule = node.attrs.get("_fusion_rule")
    if not rule:
        return ""
    original = node.attrs.get("_original_nodes") or ()
    return f"fused by {rule}" + (f" from {', '.join(original)}" if original else "")


def _optional_output(schema: Any, index: int) -> bool:
    formal = schema.outputs[min(index, len(schema.outputs) - 1)] if schema.outputs else None
    return formal is not None and formal.option == "Optional"


# A value info not yet written: tensor name, a type ONNX can say (a value's channels-first form has a light type of
# its own, read as a TensorType's dtype, rank and shape).
ValueType = tuple[str, "TensorType | ChannelsFirstType"]
IOShapes = Mapping[str, "list[int | None] | None"]  # GraphWriter.io_shapes, read only


def append_value_infos(graph: GraphProto, infos: list[ValueType]) -> None:
    """Appends the value infos ``infos`` to ``graph``, each written in place.

    Many tensors share a type (types are interned): each distinct type is written once and copied into the
    others, the same fields as writing it again, in less time."""
    add = graph.value_info.add
    written: dict[TensorType | ChannelsFirstType, TypeProto] = {}
    for name, t in infos:
        info = add()
        info.name = name
        found = written.get(t)
        if found is None:
            type_into(info.type, cast(TensorType, t))  # it reads the dtype, rank and shape
            written[t] = info.type
        else:
            info.type.CopyFrom(found)


def _value_info_into(info: ValueInfoProto, name: str, t: Any, dim_params: tuple[str, ...] = ()) -> list[int | None] | None:
    """Fills the empty ``info`` (such as ``graph.input.add()``): named ``name``, of type ``t``, without a type when
    the IR has none ONNX can say (unknown, a TF resource). Returns the shape the type says, None for an unknown
    dim (what reading it back gives), or None when it says none."""
    info.name = name
    if not _typed(t):
        return None
    type_into(info.type, t, dim_params)
    return None if t.rank is None else [d if d >= 0 else None for d in t.shape]


def _typed(t: Any) -> bool:
    return isinstance(t, TensorType) and onnx_elem_type(t.dtype) != 0
