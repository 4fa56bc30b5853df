"""TensorFlow's function library: ``FunctionDef`` bodies as :class:`SourceGraph`, calls inlined.

A function body becomes a ``SourceGraph`` whose input arguments are synthetic :data:`INPUT_OP` nodes
named after the arguments, whose outputs are the function's output arguments, and whose body tensor
names ``node:output_arg:index`` are resolved to flat output indices with :mod:`.op_signatures`.

Calls (``PartitionedCall``, ``StatefulPartitionedCall``, or a node whose op type is a library function)
are inlined: the callee's nodes are copied under the call node's name (``call/inner/node``), its
arguments rewired to the call's inputs, and the call's consumers rewired to the callee's returns.
Functional control flow (``While``, ``If``, ``Case``...) stays one node; every function-valued
attribute puts the callee's graph in ``SourceNode.subgraphs`` under the attribute name (list attributes
as ``"branches:0"``, ``"branches:1"``...).
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

from ..budgets import MAX_CALL_DEPTH, current_budgets
from ..dtypes import DType
from ..errors import ParseError
from .op_signatures import OpSignatures, OutputArg
from .source_graph import FRAMEWORK_TENSORFLOW, INPUT_OP, GraphInput, GraphOutput, SourceGraph, SourceNode
from .tf_attrs import ContentViews, decode_attrs
from .tf_nodes import assign_output_names, decode_node_def
from .tf_tensors import TensorDecodeError, shape_of, tf_dtype
from .values import AttrPlaceholder, FunctionRef

__all__ = ["CALL_OPS", "FunctionLibrary"]

CALL_OPS = frozenset({"PartitionedCall", "StatefulPartitionedCall"})
_MAX_CHAIN = 10_000


def _output_args(op_def) -> tuple[OutputArg, ...]:
    return tuple(OutputArg(a.name, a.number_attr, a.type_list_attr) for a in op_def.output_arg)


class FunctionLibrary:
    """The functions of one GraphDef, converted on demand and memoised.

    Args:
        functions: the ``FunctionDef`` messages.
        where: the model path, for error messages.
        content_views: cut tensor contents by ``(function index, node index)`` (see :mod:`.wire`).
        inline: whether calls are inlined (else they stay nodes with the callee in ``subgraphs["f"]``).
    """

    def __init__(
        self,
        functions: Sequence[Any],
        where: str,
        content_views: Mapping[tuple[int, int], ContentViews] | None = None,
        inline: bool = True,
    ) -> None:
        self.where = where
        self.inline_calls = inline
        self._defs: dict[str, tuple[int, Any]] = {}
        for index, fdef in enumerate(functions):
            name = fdef.signature.name
            if not name:
                raise ParseError(f"{where}: function {index} of the library has no name; the library is corrupt")
            if name in self._defs:
                raise ParseError(f"{where}: the function library defines {name!r} twice; function names must be unique")
            self._defs[name] = (index, fdef)
        self.signatures = OpSignatures({name: _output_args(f.signature) for name, (_, f) in self._defs.items()})
        self._views = content_views or {}
        self._graphs: dict[str, SourceGraph] = {}
        self._building: list[str] = []
        # Inlining budget: nodes made by inlining so far, and each function's node count once inlined.
        self.max_inlined_nodes = current_budgets().max_inlined_nodes
        self.inlined_nodes = 0
        self._sizes: dict[str, int] = {}

    def __contains__(self, name: object) -> bool:
        return name in self._defs

    def __len__(self) -> int:
        return len(self._defs)

    def graphs(self) -> dict[str, SourceGraph]:
        """Every function as a SourceGraph, by name, in library order."""
        return {name: self.graph(name) for name in self._defs}

    # ------------------------------------------------------------------------------------ one function
    def graph(self, name: str) -> SourceGraph:
        """The body of function ``name`` as a SourceGraph (built once).

        Raises:
            ParseError: unknown function, recursion, or an invalid body.
        """
        found = self._graphs.get(name)
        if found is not None:
            return found
        if name not in self._defs:
            raise ParseError(f"{self.where}: no function named {name!r} in the function library")
        if name in self._building:
            chain = " -> ".join(self._building + [name])
            raise ParseError(f"{self.where}: function {name!r} calls itself ({chain}); recursive functions cannot be inlined")
        if len(self._building) >= MAX_CALL_DEPTH:
            raise ParseError(
                f"{self.where}: function calls nest more than {MAX_CALL_DEPTH} deep "
                f"({self._building[0]} -> ... -> {name}); the function library is too deep to inline"
            )
        self._building.append(name)
        try:
            graph = self._build(name)
        finally:
            self._building.pop()
        self._graphs[name] = graph
        return graph

    def _build(self, fname: str) -> SourceGraph:
        findex, fdef = self._defs[fname]
        where = f"{self.where}: function {fname!r}"
        sig = fdef.signature
        nodes: list[SourceNode] = []
        inputs: list[GraphInput] = []
        for i, arg in enumerate(sig.input_arg):
            arg_attrs = fdef.arg_attr[i].attr if i in fdef.arg_attr else {}
            shapes = arg_attrs["_output_shapes"].list.shape if "_output_shapes" in arg_attrs else []
            shape = shape_of(shapes[0]) if len(shapes) == 1 else None
            dtype = tf_dtype(arg.type) if arg.type else AttrPlaceholder(arg.type_attr or arg.type_list_attr)
            attrs = {"index": i, "T": dtype, "_output_shapes": (shape,)} if shapes else {"index": i, "T": dtype}
            nodes.append(SourceNode(arg.name, INPUT_OP, attrs=attrs, synthetic=True, output_names=[arg.name]))
            inputs.append(GraphInput(arg.name, arg.name, dtype if isinstance(dtype, DType) else None, shape, i))

        body: list[tuple[SourceNode, Any]] = []
        by_name: dict[str, SourceNode] = {}
        for nindex, node_def in enumerate(fdef.node_def):
            node = decode_node_def(node_def, where, self._views.get((findex, nindex)), resolve_inputs=False)
            body.append((node, node_def))
            by_name[node.name] = node

        def resolve(text: str, user: SourceNode | str) -> tuple[str, int]:
            """The flat ``(producer, index)`` that ``text`` names; ``user`` (a node, or the words for an output)
            reads it, for the messages."""
            if ":" not in text:
                return text, 0
            parts = text.split(":")
            if len(parts) == 2 and parts[1].isdigit():
                return parts[0], int(parts[1])
            if len(parts) == 3 and parts[2].isdigit():
                producer, out_arg, index = parts[0], parts[1], int(parts[2])
                node = by_name.get(producer)
                if node is None:
                    raise ParseError(f"{where}: {_reader(user)} reads {text!r}, but the body has no node {producer!r}")
                try:
                    flat = self.signatures.output_index(node.op_type, node.attrs, out_arg, index)
                except IndexError as exc:
                    raise ParseError(f"{where}: {_reader(user)} reads {text!r}, but {exc}") from None
                if flat is None:
                    flat = self._guess_index(node, out_arg, index, fdef, where)
                return producer, flat
            raise ParseError(f"{where}: {_reader(user)} reads {text!r}, which is not a tensor name (node:output_arg:index)")

        for node, node_def in body:
            for text in node_def.input:
                if text[:1] == "^":
                    node.control_inputs.append(text[1:])
                else:
                    node.inputs.append(resolve(text, node))
            nodes.append(node)

        outputs: list[GraphOutput] = []
        for arg in sig.output_arg:
            if arg.name not in fdef.ret:
                raise ParseError(f"{where}: output argument {arg.name!r} has no return value; the function is incomplete")
            producer, index = resolve(fdef.ret[arg.name], f"output {arg.name!r}")
            outputs.append(GraphOutput(arg.name, producer, index))
        control_outputs = [fdef.control_ret[k] for k in sorted(fdef.control_ret)]

        try:
            fattrs = decode_attrs(fdef.attr)
        except TensorDecodeError as exc:
            raise ParseError(f"{where}: a function attribute is unreadable: {exc}") from None
        nodes, tensor_map = self.expand(nodes, where)
        outputs = [GraphOutput(o.name, *self.follow(tensor_map, (o.node, o.index))) for o in outputs]
        control_outputs = [self.follow_control(tensor_map, name) for name in control_outputs]
        assign_output_names(nodes, self.signatures, ((o.node, o.index) for o in outputs))
        return SourceGraph(
            nodes,
            inputs=inputs,
            outputs=outputs,
            framework=FRAMEWORK_TENSORFLOW,
            path=self.where,
            name=fname,
            metadata={"attrs": fattrs, "control_outputs": control_outputs},
        )

    def _guess_index(self, node: SourceNode, out_arg: str, index: int, fdef, where: str) -> int:
        # NOTE: an op the signature table does not know (a custom op, or one newer than the table) is read
        # as having a single output argument when every reference to the node names the same argument;
        # anything else is ambiguous and refused.
        names = set()
        prefix = node.name + ":"
        for other in fdef.node_def:
            for text in other.input:
                if text.startswith(prefix) and text.count(":") == 2:
                    names.add(text.split(":")[1])
        for text in fdef.ret.values():
            if text.startswith(prefix) and text.count(":") == 2:
                names.add(text.split(":")[1])
        if names == {out_arg}:
            return index
        raise ParseError(
            f"{where}: node {node.name!r} has op type {node.op_type}, which the op signature table does not know, and "
            f"its outputs are read through several arguments ({', '.join(sorted(names))}); regenerate "
            "scopefusion/parser/tf_op_signatures.json with tools/gen_op_signatures.py in an environment that has the op"
        )

    # ------------------------------------------------------------------------------------ calls
    def call_target(self, node: SourceNode) -> FunctionRef | None:
        """The function a call node calls when it is to be inlined, else None."""
        if not self.inline_calls or not self._defs:
            return None
        if node.op_type in CALL_OPS:
            ref = node.attrs.get("f")
            if isinstance(ref, FunctionRef) and ref.name in self._defs:
                return ref
            return None
        if node.op_type in self._defs:
            return FunctionRef(node.op_type, tuple(sorted(node.attrs.items())))
        return None

    def expand(self, nodes: list[SourceNode], where: str) -> tuple[list[SourceNode], dict[tuple[str, int], tuple[str, int]]]:
        """Inlines the calls among ``nodes`` and attaches the bodies of function-valued attributes.

        Returns the new node list and a map from each inlined call's ``(name, output index)`` to the tensor
        that now stands for it (for the caller's graph outputs).
        """
        if not self.attach_subgraphs(nodes):  # no call to inline
            return nodes, {}
        taken = {n.name for n in nodes}
        tensor_map: dict[tuple[str, int], tuple[str, int]] = {}
        call_sinks: dict[str, list[str]] = {}
        out: list[SourceNode] = []
        for node in nodes:
            ref = self.call_target(node)
            if ref is None:
                out.append(node)
                continue
            out.extend(self._instantiate(node, ref, taken, tensor_map, call_sinks, where))
        controlled = {c for n in out for c in n.control_inputs if c in call_sinks}
        for call in sorted(controlled):
            # Something waits for the call as a whole: a NoOp under the call's name waits for the body.
            sinks = [self.follow_control(tensor_map, s) for s in call_sinks[call]]
            out.append(SourceNode(call, "NoOp", control_inputs=list(dict.fromkeys(sinks)), synthetic=True))
        for node in out:
            if any(p in call_sinks for p, _ in node.inputs):
                node.inputs = [self.follow(tensor_map, t) for t in node.inputs]
        return out, tensor_map

    def follow(self, tensor_map: dict, tensor: tuple[str, int]) -> tuple[str, int]:
        """The tensor that stands for ``tensor`` after inlining (``tensor`` itself when not inlined)."""
        for _ in range(_MAX_CHAIN):
            nxt = tensor_map.get(tensor)
            if nxt is None:
                return tensor
            tensor = nxt
        raise ParseError(f"{self.where}: inlined calls forward tensor {tensor[0]}:{tensor[1]} to each other in a loop")

    def follow_control(self, tensor_map: dict, name: str) -> str:
        return self.follow(tensor_map, (name, 0))[0] if (name, 0) in tensor_map else name

    def inlined_size(self, name: str) -> int:
        """How many nodes inlining one call of function ``name`` makes (its calls inlined too), counted
        from the FunctionDefs without building anything. A recursive call counts as one node (building
        it is refused with its own message)."""
        sizes = self._sizes
        if name in sizes:
            return sizes[name]
        # Depth-first over the call graph with an explicit stack, so a deep library cannot exhaust Python's.
        visiting: set[str] = set()
        stack: list[tuple[str, list[str]]] = [(name, self._callees(name))]
        visiting.add(name)
        while stack:
            fname, pending = stack[-1]
            while pending and (pending[-1] in sizes or pending[-1] in visiting):
                pending.pop()
            if pending:
                callee = pending.pop()
                visiting.add(callee)
                stack.append((callee, self._callees(callee)))
                continue
            stack.pop()
            visiting.discard(fname)
            total = 0
            for called in self._call_list(fname):
                total += 1 if called is None or called not in sizes else sizes[called]
            sizes[fname] = min(total, 1 << 62)
        return sizes[name]

    def _call_list(self, fname: str) -> list[str | None]:
        """Per body node of ``fname``: the library function it calls when inlined, else None."""
        _, fdef = self._defs[fname]
        out: list[str | None] = []
        for node_def in fdef.node_def:
            callee = None
            if self.inline_calls:
                if node_def.op in CALL_OPS and "f" in node_def.attr:
                    target = node_def.attr["f"].func.name
                    callee = target if target in self._defs else None
                elif node_def.op in self._defs:
                    callee = node_def.op
            out.append(callee)
        return out

    def _callees(self, fname: str) -> list[str]:
        return list(dict.fromkeys(c for c in self._call_list(fname) if c is not None))

    def _charge(self, call: SourceNode, ref: FunctionRef, where: str) -> None:
        size = self.inlined_size(ref.name)
        total = self.inlined_nodes + size
        if total > self.max_inlined_nodes:
            raise ParseError(
                f"{where}: inlining call node {call.name!r} (function {ref.name!r}, {size:,} nodes once its own calls "
                f"are inlined) would make {total:,} inlined nodes, over the limit of {self.max_inlined_nodes:,}; "
                "raise it with --max-inlined-nodes (max_inlined_nodes=) if the model is trusted"
            )
        self.inlined_nodes = total

    def _instantiate(self, call: SourceNode, ref: FunctionRef, taken: set[str], tensor_map: dict, call_sinks: dict,
                     where: str) -> list[SourceNode]:
        self._charge(call, ref, where)
        body = self.graph(ref.name)
        if len(call.inputs) != len(body.inputs):
            raise ParseError(
                f"{where}: call node {call.name!r} ({call.op_type}) passes {len(call.inputs)} inputs to function "
                f"{ref.name!r}, which takes {len(body.inputs)}; the graph is inconsistent"
            )
        args = {inp.node: call.inputs[i] for i, inp in enumerate(body.inputs)}
        values = dict(ref.attrs)
        rename: dict[str, str] = {}
        for node in body.nodes:
            if node.name in args:
                continue
            new = f"{call.name}/{node.name}"
            if new in taken:
                k = 1
                while f"{new}_{k}" in taken:
                    k += 1
                new = f"{new}_{k}"
            taken.add(new)
            rename[node.name] = new
        made: list[SourceNode] = []
        for node in body.nodes:
            if node.name in args:
                continue
            inputs = [args[p] if p in args else (rename[p], i) for p, i in node.inputs]
            controls = [args[p][0] if p in args else rename[p] for p in node.control_inputs]
            if not node.inputs and not node.control_inputs:
                controls = list(call.control_inputs)
            attrs = {k: _substitute(v, values) for k, v in node.attrs.items()}
            new = rename[node.name]
            made.append(SourceNode(
                name=new, op_type=node.op_type, inputs=inputs, control_inputs=controls, attrs=attrs,
                domain=node.domain, value=node.value, subgraphs=dict(node.subgraphs), frame=node.frame,
                output_names=[f"{new}:{i}" for i in range(len(node.output_names))],
                device=node.device or call.device, synthetic=node.synthetic,
            ))
        sinks = []
        for k, out in enumerate(body.outputs):
            target = args[out.node] if out.node in args else (rename[out.node], out.index)
            tensor_map[(call.name, k)] = target
            sinks.append(target[0])
        for name in body.metadata.get("control_outputs", ()):
            sinks.append(args[name][0] if name in args else rename[name])
        call_sinks[call.name] = sinks
        return made

    # ------------------------------------------------------------------------------------ bodies
    def attach_subgraphs(self, nodes: Sequence[SourceNode]) -> bool:
        """Puts the graph of every library function a node's attributes name into ``node.subgraphs``;
        returns whether any of ``nodes`` is a call to inline (see :meth:`call_target`)."""
        if not self._defs:
            return False
        calls = False
        # The op types of the nodes call_target may inline: any other node's answer is None, asked of no node.
        call_ops = (CALL_OPS | self._defs.keys()) if self.inline_calls else frozenset()
        for node in nodes:
            if node.op_type in call_ops and self.call_target(node) is not None:
                calls = True
                continue
            for attr, value in node.attrs.items():
                if isinstance(value, FunctionRef):
                    if value.name in self._defs:
                        node.subgraphs[attr] = self.graph(value.name)
                elif isinstance(value, tuple) and value and isinstance(value[0], FunctionRef):
                    for i, ref in enumerate(value):
                        if isinstance(ref, FunctionRef) and ref.name in self._defs:
                            node.subgraphs[f"{attr}:{i}"] = self.graph(ref.name)
        return calls


def _reader(user: SourceNode | str) -> str:
    """Who reads a tensor, in a message: a body node, or the words given (an output argument)."""
    return f"node {user.name!r} ({user.op_type})" if isinstance(user, SourceNode) else user


def _substitute(value: Any, values: Mapping[str, Any]) -> Any:
    if isinstance(value, AttrPlaceholder) and value.name in values:
        return values[value.name]
    return value
