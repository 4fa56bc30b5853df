"""Which checkpoint tensor holds each variable of a SavedModel, found without TensorFlow.

Two independent sources say it, and where both exist they are cross-checked:

* the object graphs (TensorFlow 2): a signature's concrete function lists its captured inputs as node
  ids of the SavedModel's object graph (``bound_inputs``); those ids are also the node ids of the
  checkpoint's own object graph (the ``_CHECKPOINTABLE_OBJECT_GRAPH`` tensor), whose ``VARIABLE_VALUE``
  attribute names the variable's checkpoint key;
* the restore wiring (TensorFlow 1 and 2): the saver restores each variable by an ``Assign`` /
  ``AssignVariableOp`` whose value is output ``i`` of a ``RestoreV2`` node, whose ``tensor_names``
  constant names the key at ``i``. In TensorFlow 2 that wiring lives in the restore function, called
  from the meta graph with the variables' handles as inputs.
"""

from __future__ import annotations

from typing import Any, Iterable

import numpy as np
from google.protobuf import message as _message

from ..errors import ModelLoadError
from .proto import tf_checkpoint_pb2 as ckpb
from .tensor_bundle import CORRUPT_HINT, TensorBundle

__all__ = ["OBJECT_GRAPH_KEY", "checkpoint_object_graph", "object_checkpoint_key", "restore_wiring"]

OBJECT_GRAPH_KEY = "_CHECKPOINTABLE_OBJECT_GRAPH"
_VARIABLE_ATTRIBUTE = "VARIABLE_VALUE"
_ASSIGN_OPS = frozenset({"Assign", "AssignVariableOp"})
_PASS_THROUGH_OPS = frozenset({"Identity"})
_CALL_OPS = frozenset({"PartitionedCall", "StatefulPartitionedCall"})


def checkpoint_object_graph(bundle: TensorBundle):
    """The checkpoint's ``TrackableObjectGraph``, or None when the checkpoint has none (TF1 savers)."""
    if OBJECT_GRAPH_KEY not in bundle:
        return None
    value = bundle.tensor(OBJECT_GRAPH_KEY)
    graph = ckpb.TrackableObjectGraph()
    try:
        graph.ParseFromString(bytes(value.reshape(-1)[0]) if value.size == 1 else b"")
    except _message.DecodeError:
        raise ModelLoadError(
            f"{bundle.index_path}: the checkpoint's object graph ({OBJECT_GRAPH_KEY}) is not a valid record; {CORRUPT_HINT}"
        ) from None
    return graph


def object_checkpoint_key(object_graph, node_id: int) -> str | None:
    """The checkpoint key of the variable that is node ``node_id`` of the checkpoint's object graph."""
    if object_graph is None or not 0 <= node_id < len(object_graph.nodes):
        return None
    for attribute in object_graph.nodes[node_id].attributes:
        if attribute.name == _VARIABLE_ATTRIBUTE:
            return attribute.checkpoint_key
    return None


def _split(text: str) -> tuple[str, str, int]:
    """``node``, ``node:3`` (graph) or ``node:out:3`` (function body) as (node, output arg, index)."""
    parts = text.split(":")
    if len(parts) == 3:
        return parts[0], parts[1], int(parts[2]) if parts[2].isdigit() else 0
    if len(parts) == 2:
        return parts[0], "", int(parts[1]) if parts[1].isdigit() else 0
    return text, "", 0


def _string_list(node_def, where: str) -> list[str]:
    from .tf_attrs import (
        decode_attrs,  # the attribute decoder, for the tensor_names constant
    )

    value = decode_attrs(node_def.attr).get("value")
    if not isinstance(value, np.ndarray) or value.dtype != object:
        raise ModelLoadError(f"{where}: the restore op's tensor names ({node_def.name}) are not a string constant; {CORRUPT_HINT}")
    return [v.decode("utf-8", "replace") if isinstance(v, bytes) else str(v) for v in value.reshape(-1)]


def _assignments(nodes: Iterable[Any], where: str) -> dict[str, list[str]]:
    """``{assigned node or argument name: checkpoint keys}`` for the Assign(…, RestoreV2 output) in ``nodes``."""
    by_name = {n.name: n for n in nodes}
    keys: dict[str, list[str]] = {}
    decoded: dict[str, list[str]] = {}
    for node in by_name.values():
        if node.op not in _ASSIGN_OPS or len(node.input) < 2:
            continue
        source, _, index = _split(node.input[1])
        seen = 0
        while source in by_name and by_name[source].op in _PASS_THROUGH_OPS and seen < 64:
            source, _, index = _split(by_name[source].input[0])
            seen += 1
        restore = by_name.get(source)
        if restore is None or restore.op != "RestoreV2" or len(restore.input) < 2:
            continue
        names_node = by_name.get(_split(restore.input[1])[0])
        if names_node is None or names_node.op != "Const":
            continue
        names = decoded.get(names_node.name)
        if names is None:
            names = decoded[names_node.name] = _string_list(names_node, where)
        if not 0 <= index < len(names):
            raise ModelLoadError(
                f"{where}: {node.name} assigns output {index} of {restore.name}, which restores {len(names)} tensors; "
                f"{CORRUPT_HINT}"
            )
        keys.setdefault(_split(node.input[0])[0], []).append(names[index])
    return keys


def restore_wiring(graph_def, where: str, restore_op: str = "") -> dict[str, list[str]]:
    """``{variable node name in the meta graph: checkpoint keys restored into it}`` from the saver's
    restore ops (one variable can be restored from several keys when several saved objects share it).

    TF1: the ``Assign`` ops of the meta graph itself. TF2: the restore function's ``AssignVariableOp``
    on its arguments, mapped through each call of that function to the handles it is passed. With
    ``restore_op`` (the ``saver_def``'s ``restore_op_name``), only what that op runs counts.
    """
    nodes = list(graph_def.node)
    if restore_op:
        reached = _fan_in(nodes, restore_op.split(":")[0].lstrip("^"))
        if reached:
            nodes = [n for n in nodes if n.name in reached]
    keys = _assignments(nodes, where)
    functions = {f.signature.name: f for f in graph_def.library.function}
    by_function: dict[str, dict[str, list[str]]] = {}
    for node in nodes:
        if node.op not in _CALL_OPS or "f" not in node.attr:
            continue
        name = node.attr["f"].func.name
        fdef = functions.get(name)
        if fdef is None:
            continue
        if name not in by_function:
            if not any(n.op == "RestoreV2" for n in fdef.node_def):
                by_function[name] = {}
                continue
            by_function[name] = _assignments(fdef.node_def, f"{where}: function {name!r}")
        arg_keys = by_function[name]
        if not arg_keys:
            continue
        data_inputs = [i for i in node.input if not i.startswith("^")]
        for position, arg in enumerate(fdef.signature.input_arg):
            if arg.name in arg_keys and position < len(data_inputs):
                keys.setdefault(_split(data_inputs[position])[0], []).extend(arg_keys[arg.name])
    return {name: sorted(set(found)) for name, found in keys.items()}


def _fan_in(nodes: list[Any], root: str) -> set[str]:
    by_name = {n.name: n for n in nodes}
    seen: set[str] = set()
    stack = [root]
    while stack:
        name = stack.pop()
        if name in seen or name not in by_name:
            continue
        seen.add(name)
        stack.extend(_split(text.lstrip("^"))[0] for text in by_name[name].input)
    return seen
