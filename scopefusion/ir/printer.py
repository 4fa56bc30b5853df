"""The stable, readable text form of an IR graph.

One line per node, in schedule order::

    graph main(%x: f32[1,4]) {
      %w = ge.Const() {value=tensor<f32[4,4]>:3f2a9c1e}
      %y = tf.MatMul(%x, %w) {transpose_a=false, transpose_b=false} : f32[1,4]
      return %y
    }

Attributes are sorted by name; small tensors print their values, larger ones their dtype, shape and
a content digest. The same graph always prints the same text.
"""

from __future__ import annotations

import json
from typing import Any, Iterable

import numpy as np

from .attrs import AttrValue, NamedAttrs
from .graph import Graph, Node, Value
from .types import Type

__all__ = ["format_graph", "format_value"]

_INLINE_ELEMENTS = 8


def format_graph(graph: Graph, indent: str = "") -> str:
    lines = []
    params = ", ".join(f"%{v.name}: {_type(v.type)}" for v in graph.inputs)
    lines.append(f"{indent}graph {graph.name}({params}) {{")
    for key, value in sorted(graph.attrs.items()):
        lines.append(f"{indent}  attr {key}={format_value(value)}")
    for node in graph.nodes:
        lines.extend(_node_lines(node, indent + "  "))
    lines.append(f"{indent}  return " + ", ".join(f"%{_ref(v)}" for v in graph.outputs))
    lines.append(f"{indent}}}")
    return "\n".join(lines)


def _ref(value: Value) -> str:
    return value.name


def _type(t: Type | None) -> str:
    return "?" if t is None else str(t)


def _node_lines(node: Node, indent: str) -> list[str]:
    if node.op == "ge.Data":
        return []
    results = ", ".join(f"%{v.name}" for v in node.outputs) or "()"
    args = [("%" + _ref(v)) if v is not None else "none" for v in node.inputs]
    args += [f"^{c.name}" for c in node.control_inputs]
    attrs = ", ".join(f"{k}={format_value(v)}" for k, v in sorted(node.attrs.items()))
    text = f"{indent}{results} = {node.op}({', '.join(args)})"
    if attrs:
        text += f" {{{attrs}}}"
    if node.op != "ge.Const":
        text += " : " + ", ".join(_type(v.type) for v in node.outputs)
    lines = [text]
    for key in sorted(node.subgraphs):
        lines.append(f"{indent}  body {key}:")
        lines.append(format_graph(node.subgraphs[key], indent + "    "))
    return lines


def format_value(value: AttrValue) -> str:
    return _payload(value.value)


def _payload(x: Any) -> str:
    if isinstance(x, bool):
        return "true" if x else "false"
    if isinstance(x, float):
        return repr(x)
    if isinstance(x, int):
        return str(x)
    if isinstance(x, str):
        return json.dumps(x)
    if isinstance(x, bytes):
        return "b" + json.dumps(x.decode("latin-1"))
    if isinstance(x, np.ndarray):
        return _tensor(x)
    if isinstance(x, tuple):
        return "[" + ", ".join(_payload(v) for v in x) + "]"
    if isinstance(x, NamedAttrs):
        inner = ", ".join(f"{k}={format_value(v)}" for k, v in x.attrs.items())
        return f"{x.name}{{{inner}}}"
    if isinstance(x, Graph):
        return f"graph<{x.name}>"
    return str(x)


def _tensor(a: np.ndarray) -> str:
    from .. import dtypes

    dt = dtypes.from_numpy(a.dtype)
    head = f"tensor<{dt.short if dt else a.dtype}[{','.join(map(str, a.shape))}]>"
    if a.size <= _INLINE_ELEMENTS:
        return head + "(" + ", ".join(_payload(v) for v in _plain(a.ravel().tolist())) + ")"
    import hashlib

    if a.dtype == object:
        digest = hashlib.sha1(repr(a.ravel().tolist()).encode()).hexdigest()[:8]
    else:
        digest = hashlib.sha1(np.ascontiguousarray(a).tobytes()).hexdigest()[:8]
    return f"{head}:{digest}"


def _plain(xs: Iterable[Any]) -> list[Any]:
    return [x if isinstance(x, (bool, int, float, str, bytes)) else str(x) for x in xs]
