"""A body as its enclosing op runs it: a copy whose arguments take the types of the op's operands.

The builder infers each function body alone, from its signature: an argument whose dtype the signature
gives as ``variant`` (a TensorList) or whose shape it leaves out (a weight read inside a loop) has no
type, and neither has anything computed from it, so the lowering cannot write the body (an op's ONNX form
often depends on its inputs' ranks). :func:`typed_body` copies the body, gives each argument the type of
the operand bound to it and infers the copy again, node by node (the model's own graph is left as it is).
A list element read (``TensorListGetItem``, ``TensorArrayReadV3``) whose op cannot say its shape takes the
shape the list's other ops tell (:func:`~.tensor_lists.list_element_type`).
"""

from __future__ import annotations

from typing import Sequence

import numpy as np

from ...errors import ScopeFusionError
from ...ir.graph import CONST_OP, DATA_OP, Graph, Node
from ...ir.inference import infer_node
from ...ir.types import TensorType, Type
from .tensor_lists import list_element_type

__all__ = ["infer_again", "typed_body"]

_ELEMENT_READS = frozenset({"TensorListGetItem", "TensorArrayReadV3", "TensorListPopBack"})


def typed_body(body: Graph, types: Sequence[Type | None], elements: Sequence[TensorType | None] = (),
               declared: Sequence[np.ndarray | None] = ()) -> Graph:
    """A copy of ``body`` whose argument ``k`` (by its ``index``) has ``types[k]`` (when given) and, when it
    is a list, elements of type ``elements[k]`` and the element shape ``declared[k]`` it was made with;
    inferred again."""
    copy = body.clone()
    for node in copy.nodes:
        if node.op != DATA_OP or node.attrs.get("_outer_name") is not None:
            continue
        index = node.attrs.get("index")
        if index is None:
            continue
        k = int(index)
        if k < len(types) and types[k] is not None:
            node.outputs[0].type = _best(node.outputs[0].type, types[k])
        if k < len(elements) and elements[k] is not None:
            node.outputs[0].meta["list_element"] = elements[k]
        if k < len(declared) and declared[k] is not None:
            node.outputs[0].meta["list_declared_shape"] = declared[k]
    infer_again(copy.nodes)
    return copy


def infer_again(nodes: Sequence[Node]) -> None:
    """Infers ``nodes`` again, in order, keeping what the first inference knew (:func:`_best`);
    a node whose inference fails keeps its types."""
    for node in nodes:
        if node.op in (DATA_OP, CONST_OP) or node.opdef is None:
            continue
        if any(v is not None and v.type is None for v in node.inputs):
            continue  # keeps what the builder found
        before = [v.type for v in node.outputs]
        try:
            infer_node(node)
        except (ScopeFusionError, ValueError, TypeError, KeyError, IndexError):
            for value, t in zip(node.outputs, before):
                value.type = t
            continue
        for value, t in zip(node.outputs, before):
            value.type = _best(t, value.type)
        if node.op_type in _ELEMENT_READS:
            _element_from_list(node)


def _best(old: Type | None, new: Type | None) -> Type | None:
    """What both inferences know: the builder folded shape computations this one does not (its known dims
    stand), this one knows the arguments' types (its rank and dims fill the unknown ones)."""
    if not isinstance(old, TensorType) or old.rank is None:
        return new if new is not None else old
    if not isinstance(new, TensorType) or new.rank is None or new.rank != old.rank or new.dtype != old.dtype:
        return old
    return old.with_shape(tuple(a if a >= 0 else b for a, b in zip(old.shape, new.shape)))


def _element_from_list(node: Node) -> None:
    index = 1 if node.op_type == "TensorListPopBack" else 0
    value = node.outputs[index]
    t = value.type
    if isinstance(t, TensorType) and t.rank is not None:
        return
    source = node.inputs[2] if node.op_type == "TensorArrayReadV3" else node.inputs[0]
    element = list_element_type(source) if source is not None else None
    if element is not None:
        value.type = element
