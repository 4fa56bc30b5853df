"""Freezing a SavedModel's variables into constants without TensorFlow (the ``native`` loader).

TensorFlow 2 (object-based) SavedModels: a signature's outputs come from one call node of the meta
graph (``StatefulPartitionedCall``) to the signature's wrapper function, passed the signature's inputs
and the captured variable handles. The frozen graph is that wrapper's body, as TensorFlow's own
freezing makes it: its arguments become a ``Placeholder`` per signature input and a ``Const`` per
captured variable (named after the arguments), its calls are inlined under the call's name
(``StatefulPartitionedCall/...``), and every use of a frozen variable is rewritten the way TensorFlow
rewrites it: ``ReadVariableOp`` becomes ``Identity``, ``ResourceGather`` becomes ``GatherV2`` (with an
axis constant ``<name>/axis``), ``ResourceGatherNd`` becomes ``GatherNd``; a variable passed into a
call, ``While``, ``If`` or ``Case`` turns the callee's argument into a tensor of the variable's type.
Functional control flow keeps its bodies.

TensorFlow 1 SavedModels: the meta graph, pruned to what the signature's outputs need; each
``VariableV2`` / ``VarHandleOp`` becomes a ``Const`` of the same name.

Variable values come from the checkpoint (:mod:`.tensor_bundle`) as views of the mapped data shards;
which key holds which variable comes from :mod:`.savedmodel_variables`. What cannot be frozen this way
(a lookup table or asset, a variable assigned inside the signature, a variable without a checkpoint
key) is a :class:`~scopefusion.errors.ModelLoadError` that names it and points at the TensorFlow loader.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any, Iterable

import numpy as np

from ..errors import ModelLoadError
from .proto import tf_framework_pb2 as tfpb
from .source_graph import INPUT_OP, GraphInput, GraphOutput, SourceGraph, SourceNode
from .tensor_bundle import CORRUPT_HINT, FALLBACK_HINT, TensorBundle
from .tf_functions import CALL_OPS, FunctionLibrary
from .tf_graphdef import graph_from_graph_def
from .tf_nodes import decode_node_def, parse_tensor_name
from .tf_tensors import shape_of, tf_dtype

__all__ = ["freeze_tf1", "freeze_tf2"]

_WHILE_OPS = frozenset({"While", "StatelessWhile"})
_IF_OPS = frozenset({"If", "StatelessIf"})
_CASE_OPS = frozenset({"Case", "StatelessCase"})
_CONTROL_FLOW_OPS = _WHILE_OPS | _IF_OPS
_TF1_CONTROL_FLOW_OPS = frozenset({"Enter", "Exit", "Switch", "Merge", "NextIteration", "LoopCond", "RefEnter",
                                   "RefExit", "RefSwitch", "RefMerge", "RefNextIteration"})
_PASS_THROUGH_OPS = frozenset({"Identity", "Enter", "Exit", "NextIteration", "Switch", "_SwitchN", "Merge"})
_VARIABLE_OPS = frozenset({"VariableV2", "VarHandleOp", "Variable"})
_RESOURCE = 20
_STRING = 7


@dataclass
class _Value:
    """A frozen variable: its dtype enum, shape, and value (a view of the checkpoint for numbers)."""

    dtype: int
    shape: tuple[int, ...]
    array: np.ndarray
    view: tuple[object, int, int] | None = None


def _checkpoint(directory: str) -> TensorBundle:
    return TensorBundle(os.path.join(directory, "variables", "variables"))


def _read_variable(bundle: TensorBundle, key: str, dtype: int, shape: tuple[int, ...] | None, what: str) -> _Value:
    entry = bundle.entry(key)
    if dtype and entry.dtype != dtype:
        raise ModelLoadError(
            f"{bundle.index_path}: tensor {key!r} (for {what}) has dtype {tf_dtype(entry.dtype)}, but the SavedModel "
            f"declares {tf_dtype(dtype)}; {CORRUPT_HINT}"
        )
    known = shape if shape is not None and all(d >= 0 for d in shape) else None
    array = bundle.tensor(key, expected_shape=known)
    view = bundle.content_view(key) if entry.dtype != _STRING and array.size else None
    return _Value(entry.dtype, tuple(array.shape), array, view)


# ------------------------------------------------------------------------------------------ rewriting uses
class _Container:
    """The nodes of a function body or of the meta graph, and how their tensors are referred to."""

    def __init__(self, nodes: Any, is_function: bool, name: str) -> None:
        self.nodes = nodes
        self.is_function = is_function
        self.name = name
        self._index: dict[str, list[tuple[Any, int, int]]] | None = None

    def refs(self, node: str, out_arg: str, index: int) -> set[str]:
        if self.is_function:
            return {f"{node}:{out_arg}:{index}"}
        return {node, f"{node}:0"} if index == 0 else {f"{node}:{index}"}

    def uses(self, producer: str) -> list[tuple[Any, int, int]]:
        """``(consumer, data slot, position in its input list)`` of every data input read from ``producer``."""
        if self._index is None:
            index: dict[str, list[tuple[Any, int, int]]] = {}
            for node in self.nodes:
                slot = 0
                for position, text in enumerate(node.input):
                    if text.startswith("^"):
                        continue
                    index.setdefault(text.split(":")[0], []).append((node, slot, position))
                    slot += 1
            self._index = index
        return self._index.setdefault(producer, [])

    def consumers(self, refs: set[str]) -> list[tuple[Any, int]]:
        found = []
        for producer in sorted({r.split(":")[0] for r in refs}):
            for node, slot, position in self.uses(producer):
                if node.input[position] in refs:
                    found.append((node, slot))
        return found


def _set_type(attr_value, index: int, dtype: int) -> None:
    if attr_value.HasField("list"):
        if index < len(attr_value.list.type):
            attr_value.list.type[index] = dtype
    elif index == 0:
        attr_value.type = dtype


def _unknown_shape(shape_proto) -> None:
    del shape_proto.dim[:]
    shape_proto.unknown_rank = True


class _Freezer:
    """Rewrites the uses of frozen variables in a function library (and the meta graph), in place."""

    def __init__(self, functions: dict[str, Any], where: str) -> None:
        self.functions = functions
        self.where = where
        self._done: set[tuple[str, int]] = set()
        self._containers: dict[str, _Container] = {}

    def freeze_argument(self, fname: str, index: int, value: _Value, what: str) -> None:
        if (fname, index) in self._done:
            return
        self._done.add((fname, index))
        fdef = self.functions.get(fname)
        if fdef is None or index >= len(fdef.signature.input_arg):
            raise ModelLoadError(f"{self.where}: {what} is passed to function {fname!r}, which the library lacks; {CORRUPT_HINT}")
        arg = fdef.signature.input_arg[index]
        arg.type = value.dtype
        if index in fdef.arg_attr and "_output_shapes" in fdef.arg_attr[index].attr:
            for shape in fdef.arg_attr[index].attr["_output_shapes"].list.shape:
                _unknown_shape(shape)
        if "_input_shapes" in fdef.attr and index < len(fdef.attr["_input_shapes"].list.shape):
            _unknown_shape(fdef.attr["_input_shapes"].list.shape[index])
        container = self._containers.get(fname)
        if container is None:
            container = self._containers[fname] = _Container(fdef.node_def, True, fname)
        self.propagate(container, {arg.name}, value, what)

    def propagate(self, container: _Container, refs: set[str], value: _Value, what: str) -> None:
        """Rewrites every consumer of the tensor named by ``refs`` (a frozen variable) in ``container``."""
        for node, slot in container.consumers(refs):
            self._rewrite(container, node, slot, value, what)

    def _rewrite(self, container: _Container, node, slot: int, value: _Value, what: str) -> None:
        op = node.op
        where = f"{self.where}: node {node.name!r} ({op})" + (f" of function {container.name!r}" if container.is_function else "")
        if op == "ReadVariableOp":
            dtype = node.attr["dtype"]
            keep = node.attr["_class"] if "_class" in node.attr else None
            node.op = "Identity"
            node.attr.clear()
            node.attr["T"].CopyFrom(dtype)
            if keep is not None:
                node.attr["_class"].CopyFrom(keep)
            if container.is_function:
                self._rename_output(container, node.name, "value", "output")
        elif op == "ResourceGather":
            self._gather(container, node, where)
        elif op == "ResourceGatherNd":
            dtype, indices = node.attr["dtype"], node.attr["Tindices"]
            keep = node.attr["_class"] if "_class" in node.attr else None
            node.op = "GatherNd"
            node.attr.clear()
            node.attr["Tparams"].CopyFrom(dtype)
            node.attr["Tindices"].CopyFrom(indices)
            if keep is not None:
                node.attr["_class"].CopyFrom(keep)
        elif op in _PASS_THROUGH_OPS:
            if "T" in node.attr:
                _set_type(node.attr["T"], 0, value.dtype)
            node.attr.pop("_output_shapes", None)
            out_arg = "output"
            self.propagate(container, container.refs(node.name, out_arg, 0), value, what)
        elif op in CALL_OPS:
            _set_type(node.attr["Tin"], slot, value.dtype)
            self.freeze_argument(node.attr["f"].func.name, slot, value, what)
        elif op in _WHILE_OPS:
            _set_type(node.attr["T"], slot, value.dtype)
            shapes = node.attr["output_shapes"].list.shape if "output_shapes" in node.attr else []
            if slot < len(shapes):
                shapes[slot].Clear()
                for d in value.shape:
                    shapes[slot].dim.add().size = d
            body = node.attr["body"].func.name
            self.freeze_argument(body, slot, value, what)
            self.freeze_argument(node.attr["cond"].func.name, slot, value, what)
            body_def = self.functions.get(body)
            if body_def is not None and slot < len(body_def.signature.output_arg):
                body_def.signature.output_arg[slot].type = value.dtype
        elif op in _IF_OPS or op in _CASE_OPS:
            if slot == 0:
                raise ModelLoadError(f"{where} branches on {what}, which the native loader cannot freeze; {FALLBACK_HINT}")
            _set_type(node.attr["Tin"], slot - 1, value.dtype)
            if op in _IF_OPS:
                branches = [node.attr["then_branch"].func.name, node.attr["else_branch"].func.name]
            else:
                branches = [f.name for f in node.attr["branches"].list.func]
            for branch in branches:
                self.freeze_argument(branch, slot - 1, value, what)
        elif op.startswith(("Assign", "ResourceApply", "ResourceScatter", "ResourceStridedSliceAssign")):
            raise ModelLoadError(
                f"{where} assigns {what} inside the signature, so its value is not a constant; {FALLBACK_HINT}"
            )
        else:
            raise ModelLoadError(f"{where} uses {what} in a way the native loader cannot freeze; {FALLBACK_HINT}")

    def _gather(self, container: _Container, node, where: str) -> None:
        if "batch_dims" in node.attr and node.attr["batch_dims"].i != 0:
            raise ModelLoadError(f"{where} gathers with batch_dims={node.attr['batch_dims'].i}, which freezing does not support; {FALLBACK_HINT}")
        dtype, indices = node.attr["dtype"], node.attr["Tindices"]
        keep = node.attr["_class"] if "_class" in node.attr else None
        axis_name = f"{node.name}/axis"
        if not any(n.name == axis_name for n in container.nodes):
            axis = container.nodes.add()
            axis.name = axis_name
            axis.op = "Const"
            axis.attr["dtype"].CopyFrom(indices)
            tensor = axis.attr["value"].tensor
            tensor.dtype = indices.type
            if indices.type == 9:
                tensor.int64_val.append(0)
            else:
                tensor.int_val.append(0)
        data = [i for i in node.input if not i.startswith("^")]
        controls = [i for i in node.input if i.startswith("^")]
        node.op = "GatherV2"
        node.attr.clear()
        node.attr["Tparams"].CopyFrom(dtype)
        node.attr["Tindices"].CopyFrom(indices)
        node.attr["Taxis"].CopyFrom(indices)
        if keep is not None:
            node.attr["_class"].CopyFrom(keep)
        del node.input[:]
        node.input.extend(data[:2] + [f"{axis_name}:output:0" if container.is_function else axis_name] + controls)
        container.uses(axis_name).append((node, 2, 2))

    def _rename_output(self, container: _Container, node_name: str, old: str, new: str) -> None:
        prefix = f"{node_name}:{old}:"
        for other, _, position in container.uses(node_name):
            text = other.input[position]
            if text.startswith(prefix):
                other.input[position] = f"{node_name}:{new}:{text[len(prefix):]}"
        fdef = self.functions.get(container.name)
        if fdef is not None:
            for key, text in list(fdef.ret.items()):
                if text.startswith(prefix):
                    fdef.ret[key] = f"{node_name}:{new}:{text[len(prefix):]}"


# ------------------------------------------------------------------------------------------ preparing
def _restore_node_defs(meta, *, keep_lowering: bool) -> None:
    """Makes the meta graph's NodeDefs what TensorFlow has after importing them, in place.

    Attributes equal to their op's default are stripped from a SavedModel and come back from the op
    list the meta graph carries; the ``_output_shapes`` hints are dropped. Unless ``keep_lowering``,
    ``While`` / ``If`` are marked ``_lower_using_switch_merge=false``, as TensorFlow's freezing marks
    them when it keeps functional control flow.
    """
    defaults: dict[str, list[Any]] = {}
    for op_def in meta.meta_info_def.stripped_op_list.op:
        found = [a for a in op_def.attr if a.HasField("default_value")]
        if found:
            defaults[op_def.name] = found

    def fix(node_defs: Iterable[Any]) -> None:
        for node in node_defs:
            attrs = node.attr
            if "_output_shapes" in attrs:
                del attrs["_output_shapes"]
            for attr_def in defaults.get(node.op, ()):
                if attr_def.name not in attrs:
                    attrs[attr_def.name].CopyFrom(attr_def.default_value)
            if not keep_lowering and node.op in _CONTROL_FLOW_OPS:
                attrs["_lower_using_switch_merge"].b = False

    fix(meta.graph_def.node)
    for function in meta.graph_def.library.function:
        fix(function.node_def)


def _prune_called_functions(meta, functions: dict[str, Any], root: str) -> None:
    """Drops the dead nodes of every function that ``root`` calls (transitively), in place.

    TensorFlow prunes a function body when it instantiates it for inlining: a node stays when a return
    value, a control return, a stateful op or a TF1 control-flow op depends on it. Tracing leaves such
    dead nodes behind (Keras traces an RNN cell once outside its loop, for shapes).
    """
    stateful = {op.name for op in meta.meta_info_def.stripped_op_list.op if op.is_stateful}
    stateful.update(_TF1_CONTROL_FLOW_OPS)
    called: set[str] = set()
    stack = [root]
    while stack:
        fdef = functions.get(stack.pop())
        if fdef is None:
            continue
        for node in fdef.node_def:
            if node.op in CALL_OPS and "f" in node.attr and node.attr["f"].func.name not in called:
                called.add(node.attr["f"].func.name)
                stack.append(node.attr["f"].func.name)
    for name in called:
        fdef = functions.get(name)
        if fdef is None:
            continue
        by_name = {n.name: n for n in fdef.node_def}
        seeds = [t.split(":")[0] for t in fdef.ret.values()] + list(fdef.control_ret.values())
        seeds += [n.name for n in fdef.node_def if n.op in stateful or n.op in functions]
        live: set[str] = set()
        while seeds:
            current = seeds.pop()
            if current in live or current not in by_name:
                continue
            live.add(current)
            seeds.extend(t.lstrip("^").split(":")[0] for t in by_name[current].input)
        if len(live) < len(fdef.node_def):
            kept = [n for n in fdef.node_def if n.name in live]
            del fdef.node_def[:]
            fdef.node_def.extend(kept)


# ------------------------------------------------------------------------------------------ TensorFlow 2
def freeze_tf2(directory: str, meta, signature: str, sig, *, inline_functions: bool) -> SourceGraph:
    """The signature of a TF2 SavedModel with its variables frozen (see the module docstring)."""
    from .savedmodel_variables import (
        checkpoint_object_graph,
        object_checkpoint_key,
        restore_wiring,
    )

    where = directory
    _restore_node_defs(meta, keep_lowering=False)
    graph_def = meta.graph_def
    by_name = {n.name: n for n in graph_def.node}
    out_tensors = {key: parse_tensor_name(sig.outputs[key].name) for key in sorted(sig.outputs)}
    callers = sorted({node for node, _ in out_tensors.values()})
    if len(callers) != 1 or callers[0] not in by_name or by_name[callers[0]].op not in CALL_OPS:
        raise ModelLoadError(
            f"{where}: the outputs of signature {signature!r} come from {', '.join(callers) or 'nothing'}, not from one "
            f"call of a function, which the native loader expects of a TensorFlow 2 SavedModel; {FALLBACK_HINT}"
        )
    call = by_name[callers[0]]
    wrapper = call.attr["f"].func.name
    functions = {f.signature.name: f for f in graph_def.library.function}
    wdef = functions.get(wrapper)
    data_inputs = [t for t in call.input if not t.startswith("^")]
    if wdef is None or len(data_inputs) != len(wdef.signature.input_arg):
        raise ModelLoadError(f"{where}: the function {wrapper!r} of signature {signature!r} is missing or takes other inputs; {CORRUPT_HINT}")
    input_keys = {parse_tensor_name(sig.inputs[key].name)[0]: key for key in sig.inputs}
    concrete = meta.object_graph_def.concrete_functions.get(wrapper)
    bound = list(concrete.bound_inputs) if concrete is not None else []
    first_capture = len(data_inputs) - len(bound)
    objects = meta.object_graph_def.nodes

    bundle: TensorBundle | None = None
    object_graph: Any = None
    wiring: dict[str, list[str]] | None = None
    freezer = _Freezer(functions, where)
    replacements: dict[str, SourceNode] = {}
    graph_inputs: dict[str, tuple[str, Any, Any]] = {}
    for index, (text, arg) in enumerate(zip(data_inputs, wdef.signature.input_arg)):
        producer = parse_tensor_name(text)[0]
        if producer in input_keys:
            key = input_keys[producer]
            info = sig.inputs[key]
            dtype = tf_dtype(info.dtype or arg.type)
            shape = shape_of(info.tensor_shape) if info.HasField("tensor_shape") else None
            attrs: dict[str, Any] = {"dtype": dtype, "shape": shape}
            replacements[arg.name] = SourceNode(arg.name, "Placeholder", attrs=attrs, output_names=[f"{arg.name}:0"])
            graph_inputs[key] = (arg.name, dtype, shape)
            continue
        node_def = by_name.get(producer)
        obj_id = bound[index - first_capture] if index >= first_capture else -1
        obj = objects[obj_id] if 0 <= obj_id < len(objects) else None
        kind = obj.WhichOneof("kind") if obj is not None else None
        what = f"variable {producer!r}"
        if kind == "variable" or (node_def is not None and node_def.op in _VARIABLE_OPS):
            if bundle is None:
                bundle = _checkpoint(directory)
                object_graph = checkpoint_object_graph(bundle)
                wiring = restore_wiring(graph_def, where, meta.saver_def.restore_op_name)
            assert wiring is not None
            by_object = object_checkpoint_key(object_graph, obj_id) if kind == "variable" else None
            by_restore = wiring.get(producer, [])
            if by_object and by_restore and by_object not in by_restore:
                _check_same_tensor(bundle, by_object, by_restore[0], what, where)
            key = by_object or (by_restore[0] if by_restore else None)
            if not key:
                raise ModelLoadError(
                    f"{where}: {what} captured by signature {signature!r} has no checkpoint key in the object graph or "
                    f"the restore function; {FALLBACK_HINT}"
                )
            declared = obj.variable if obj is not None and kind == "variable" else None
            if declared is not None:
                dtype_code, shape_proto = declared.dtype, declared.shape
            elif node_def is not None:
                dtype_code, shape_proto = node_def.attr["dtype"].type, node_def.attr["shape"].shape
            else:
                dtype_code, shape_proto = 0, None
            value = _read_variable(bundle, key, dtype_code, shape_of(shape_proto) if shape_proto is not None else None, what)
        elif kind in ("resource", "asset") or (node_def is not None and arg.type == _RESOURCE):
            raise ModelLoadError(
                f"{where}: signature {signature!r} captures {producer!r} ({node_def.op if node_def is not None else kind}), "
                f"a lookup table, asset or other resource that the native loader cannot freeze; {FALLBACK_HINT}"
            )
        elif node_def is not None and node_def.op == "Const":
            constant = decode_node_def(node_def, where)
            assert constant.value is not None
            value = _Value(node_def.attr["dtype"].type, tuple(constant.value.shape), constant.value)
        else:
            raise ModelLoadError(
                f"{where}: signature {signature!r} captures {producer!r}, which is neither a variable nor a constant; "
                f"{FALLBACK_HINT}"
            )
        if arg.type == _RESOURCE:
            freezer.freeze_argument(wrapper, index, value, what)
        replacements[arg.name] = _const_node(arg.name, value)

    if inline_functions:
        _prune_called_functions(meta, functions, wrapper)
    library = FunctionLibrary(list(functions.values()), where, None, inline_functions)
    body = library.graph(wrapper)
    nodes = [replacements.get(n.name, n) if n.op_type == INPUT_OP else n for n in body.nodes]
    inputs = [GraphInput(key, graph_inputs[key][0], _known(graph_inputs[key][1]), graph_inputs[key][2], i)
              for i, key in enumerate(sorted(graph_inputs))]
    outputs = []
    for key, (_, position) in out_tensors.items():
        if position >= len(body.outputs):
            raise ModelLoadError(f"{where}: signature output {key!r} reads output {position} of {wrapper!r}, which has {len(body.outputs)}")
        out = body.outputs[position]
        outputs.append(GraphOutput(key, out.node, out.index))
    return SourceGraph(
        nodes,
        inputs=inputs,
        outputs=outputs,
        functions=_bodies(nodes),
        framework="tensorflow",
        path=where,
        name=signature,
        metadata={"producer": graph_def.versions.producer, "min_consumer": graph_def.versions.min_consumer},
    )


def _check_same_tensor(bundle: TensorBundle, by_object: str, by_restore: str, what: str, where: str) -> None:
    # NOTE: Keras 3 exports track each variable twice (``variables/N`` and ``_all_variables/M``); the
    # object graph and the restore function may then name different keys for one variable, which is
    # consistent exactly when both keys hold the same tensor (same dtype, shape, size and checksum).
    a, b = bundle.entry(by_object), bundle.entry(by_restore)
    same = (a.dtype, a.size, a.crc32c, list(a.shape.dim)) == (b.dtype, b.size, b.crc32c, list(b.shape.dim))
    if not same:
        raise ModelLoadError(
            f"{where}: {what} is checkpoint tensor {by_object!r} by the object graph but {by_restore!r} by the restore "
            f"function, and the two differ; the SavedModel is inconsistent; {CORRUPT_HINT}"
        )


def _known(dtype):
    from ..dtypes import DType

    return dtype if isinstance(dtype, DType) else None


def _const_node(name: str, value: _Value) -> SourceNode:
    dtype = tf_dtype(value.dtype)
    return SourceNode(name, "Const", attrs={"dtype": dtype, "value": value.array}, value=value.array,
                      output_names=[f"{name}:0"])


def _bodies(nodes: Iterable[SourceNode]) -> dict[str, SourceGraph]:
    found: dict[str, SourceGraph] = {}
    stack = list(nodes)
    while stack:
        node = stack.pop()
        for graph in node.subgraphs.values():
            if graph.name not in found:
                found[graph.name] = graph
                stack.extend(graph.nodes)
    return dict(sorted(found.items()))


# ------------------------------------------------------------------------------------------ TensorFlow 1
def freeze_tf1(directory: str, meta, signature: str, sig, *, inline_functions: bool) -> SourceGraph:
    """The signature of a TF1 SavedModel, pruned to its outputs, variables frozen (see the module docstring)."""
    from .savedmodel_variables import restore_wiring

    where = directory
    _restore_node_defs(meta, keep_lowering=True)
    graph_def = meta.graph_def
    by_name = {n.name: n for n in graph_def.node}
    input_names = [(key, sig.inputs[key].name) for key in sorted(sig.inputs)]
    output_names = [(key, sig.outputs[key].name) for key in sorted(sig.outputs)]
    for key, tensor in input_names + output_names:
        if parse_tensor_name(tensor)[0] not in by_name:
            raise ModelLoadError(f"{where}: signature {signature!r} names tensor {tensor!r} for {key!r}, but the graph has no such node")
    keep = _reachable(by_name, (parse_tensor_name(t)[0] for _, t in output_names))
    for _, tensor in input_names:
        keep.add(parse_tensor_name(tensor)[0])
    frozen = tfpb.GraphDef()
    frozen.versions.CopyFrom(graph_def.versions)
    frozen.library.CopyFrom(graph_def.library)
    kept = [n for n in graph_def.node if n.name in keep]
    for node in kept:
        frozen.node.add().CopyFrom(node)
    variables = [n for n in frozen.node if n.op in _VARIABLE_OPS]
    node_views: dict[int, dict[str, Any]] = {}
    views: dict[str, tuple[object, int, int]] = {}
    if variables:
        bundle = _checkpoint(directory)
        wiring = restore_wiring(graph_def, where, meta.saver_def.restore_op_name)
        functions = {f.signature.name: f for f in frozen.library.function}
        freezer = _Freezer(functions, where)
        container = _Container(frozen.node, False, "")
        for node in variables:
            what = f"variable {node.name!r}"
            restored = wiring.get(node.name)
            key = restored[0] if restored else None
            if key is None:
                raise ModelLoadError(f"{where}: {what} is not restored by the SavedModel's saver, so it has no value; {FALLBACK_HINT}")
            value = _read_variable(bundle, key, node.attr["dtype"].type, shape_of(node.attr["shape"].shape) if "shape" in node.attr else None, what)
            if node.op == "VarHandleOp":
                freezer.propagate(container, container.refs(node.name, "", 0), value, what)
            else:
                for consumer, _ in container.consumers(container.refs(node.name, "", 0)):
                    if consumer.op.startswith("Assign") or consumer.op.startswith("Apply") or consumer.op.startswith("Scatter"):
                        raise ModelLoadError(f"{where}: node {consumer.name!r} ({consumer.op}) assigns {what} inside the signature; {FALLBACK_HINT}")
            view = _to_const(node, value)
            if view is not None:
                views[node.name] = view
        node_views = {i: {"value": views[n.name]} for i, n in enumerate(frozen.node) if n.name in views}
    return graph_from_graph_def(
        frozen,
        where,
        node_views,
        None,
        inputs=input_names,
        outputs=output_names,
        inline_functions=inline_functions,
        name=signature,
    )


def _to_const(node, value: _Value) -> tuple[object, int, int] | None:
    """Turns a variable's NodeDef into a Const; returns the checkpoint view its value is to be read from."""
    name = node.name
    device = node.device
    node.Clear()
    node.name = name
    node.op = "Const"
    node.device = device
    node.attr["dtype"].type = value.dtype
    tensor = node.attr["value"].tensor
    tensor.dtype = value.dtype
    for d in value.shape:
        tensor.tensor_shape.dim.add().size = d
    if value.dtype == _STRING:
        tensor.string_val.extend(value.array.reshape(-1).tolist())
        return None
    if value.view is not None:
        return value.view
    if value.array.size:
        tensor.tensor_content = value.array.tobytes()
    return None


def _reachable(by_name: dict[str, Any], roots: Iterable[str]) -> set[str]:
    seen: set[str] = set()
    stack = list(roots)
    while stack:
        name = stack.pop()
        if name in seen or name not in by_name:
            continue
        seen.add(name)
        for text in by_name[name].input:
            stack.append(parse_tensor_name(text.lstrip("^"))[0])
    return seen

