"""Structural comparison of IR graphs in schedule order.

Two graphs are equal when their nodes, in order, have the same names, ops, attributes (by value), input
references, control inputs, output types and bodies, and their inputs and outputs refer to the same
values. Types compare by parameters, so graphs built in different contexts can be equal.
"""

from __future__ import annotations

from .graph import Graph, Value
from .types import ElementType, ListType, TensorType, TupleType, Type

__all__ = ["first_difference", "graphs_equal", "types_equal"]


def graphs_equal(a: Graph, b: Graph) -> bool:
    return first_difference(a, b) is None


def types_equal(a: Type | None, b: Type | None) -> bool:
    if a is None or b is None:
        return a is b
    if a.context is b.context:
        return a is b
    if type(a) is not type(b):
        return False
    if isinstance(a, ElementType):
        return a.dtype is b.dtype  # type: ignore[attr-defined]
    if isinstance(a, TensorType):
        return types_equal(a.element, b.element) and a.shape == b.shape and a.format == b.format  # type: ignore[attr-defined]
    if isinstance(a, ListType):
        return types_equal(a.element, b.element)  # type: ignore[attr-defined]
    if isinstance(a, TupleType):
        return len(a.elements) == len(b.elements) and all(types_equal(x, y) for x, y in zip(a.elements, b.elements))  # type: ignore[attr-defined]
    return False


def _ref(v: Value | None) -> str | None:
    return None if v is None else v.ref


def first_difference(a: Graph, b: Graph, path: str = "") -> str | None:
    """A sentence naming the first difference, or None when the graphs are equal."""
    where = path or a.name
    if a.name != b.name:
        return f"{where}: graph names differ ({a.name!r} vs {b.name!r})"
    if len(a.nodes) != len(b.nodes):
        return f"{where}: {len(a.nodes)} nodes vs {len(b.nodes)}"
    for na, nb in zip(a.nodes, b.nodes):
        at = f"{where}/{na.name}"
        if na.name != nb.name or na.op != nb.op:
            return f"{where}: node {na.name!r} ({na.op}) vs {nb.name!r} ({nb.op})"
        if [_ref(v) for v in na.inputs] != [_ref(v) for v in nb.inputs]:
            return f"{at}: inputs {[_ref(v) for v in na.inputs]} vs {[_ref(v) for v in nb.inputs]}"
        if [c.name for c in na.control_inputs] != [c.name for c in nb.control_inputs]:
            return f"{at}: control inputs differ"
        if len(na.outputs) != len(nb.outputs):
            return f"{at}: {len(na.outputs)} outputs vs {len(nb.outputs)}"
        for va, vb in zip(na.outputs, nb.outputs):
            if not types_equal(va.type, vb.type):
                return f"{at}: output {va.index} type {va.type} vs {vb.type}"
        attrs_a, attrs_b = dict(na.attrs.items()), dict(nb.attrs.items())
        if sorted(attrs_a) != sorted(attrs_b):
            return f"{at}: attribute names {sorted(attrs_a)} vs {sorted(attrs_b)}"
        for key in sorted(attrs_a):
            if attrs_a[key] != attrs_b[key]:
                return f"{at}: attribute {key!r} {attrs_a[key]!r} vs {attrs_b[key]!r}"
        if sorted(na.subgraphs) != sorted(nb.subgraphs):
            return f"{at}: bodies {sorted(na.subgraphs)} vs {sorted(nb.subgraphs)}"
        for key in sorted(na.subgraphs):
            diff = first_difference(na.subgraphs[key], nb.subgraphs[key], f"{at}[{key}]")
            if diff:
                return diff
    if [v.ref for v in a.inputs] != [v.ref for v in b.inputs]:
        return f"{where}: graph inputs differ"
    if [v.ref for v in a.outputs] != [v.ref for v in b.outputs]:
        return f"{where}: graph outputs {[v.ref for v in a.outputs]} vs {[v.ref for v in b.outputs]}"
    attrs_a, attrs_b = dict(a.attrs.items()), dict(b.attrs.items())
    if attrs_a != attrs_b:
        return f"{where}: graph attributes differ"
    return None
