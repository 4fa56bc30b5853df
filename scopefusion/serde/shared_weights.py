"""Shape profiles share one copy of the weights in a GE model file.

NOTE: the layout. A profile is a top-level graph over the same constants as the main graph
(``ModelDef.graph[0]``), as GE's own multi-shape models are. A profile's ``Const`` op whose value equals
the main graph's ``Const`` of the same name keeps its tensor descriptor but no data, and carries the
reserved attribute ``_weight_from`` (a string: the main graph's name); reading fills the data back from
that op, so every reader (``inspect``, ``diff``, :func:`scopefusion.serde.ge.model_from_bytes`) gets
complete graphs. A model whose weights would still pass protobuf's 2 GiB limit is refused before
anything is written (:func:`check_model_size`).
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from ..errors import SerdeError
from ..ir.graph import CONST_OP, Graph

__all__ = [
    "MAX_MODEL_BYTES", "SHARED_WEIGHT_ATTR", "check_model_size", "restore_shared_weights", "shared_constants",
]

SHARED_WEIGHT_ATTR = "_weight_from"
# protobuf cannot serialize or parse a message of 2 GiB or more; the graph structure needs some room too.
MAX_MODEL_BYTES = (2 << 30) - (64 << 20)


def _const_values(graph: Graph) -> dict[str, np.ndarray]:
    return {n.name: n.attrs.as_tensor("value") for n in graph.nodes if n.op == CONST_OP and "value" in n.attrs}


def _same(a: np.ndarray, b: np.ndarray) -> bool:
    if a is b:
        return True
    if a.shape != b.shape or a.dtype != b.dtype:
        return False
    if a.dtype == object:
        return bool(np.array_equal(a, b))
    return a.tobytes() == b.tobytes() if a.nbytes <= (1 << 16) else bool(np.array_equal(a, b, equal_nan=True))


def shared_constants(graphs: Sequence[Graph]) -> list[set[str]]:
    """Per top-level graph after the first: the names of its constants equal to the main graph's."""
    main = _const_values(graphs[0])
    out = []
    for graph in graphs[1:]:
        mine = _const_values(graph)
        out.append({name for name, value in mine.items() if name in main and _same(value, main[name])})
    return out


def check_model_size(graphs: Sequence[Graph], shared: Sequence[set[str]] | None = None) -> None:
    """Refuses (SerdeError) a model whose constants, after sharing, pass :data:`MAX_MODEL_BYTES`;
    ``shared``: :func:`shared_constants` of ``graphs``, when known."""
    if shared is None:
        shared = shared_constants(graphs)
    total = 0
    for i, graph in enumerate(graphs):
        skip = shared[i - 1] if i else set()
        total += sum(v.nbytes for name, v in _const_values(graph).items() if name not in skip)
        total += _body_bytes(graph)
    if total > MAX_MODEL_BYTES:
        raise SerdeError(
            f"the model's weights take {total:,} bytes, more than a GE protobuf file can hold "
            f"({MAX_MODEL_BYTES:,} bytes with room for the graphs); write --format onnx, or split the model"
        )


def _body_bytes(graph: Graph) -> int:
    total = 0
    for node in graph.nodes:
        for body in node.subgraphs.values():
            total += sum(v.nbytes for v in _const_values(body).values()) + _body_bytes(body)
    return total


def restore_shared_weights(model) -> None:
    """Fills the data of every shared ``Const`` of ``model`` (a ``ModelDef``) back from the graph it names."""
    graphs = {g.name: g for g in model.graph}
    index: dict[str, dict[str, Any]] = {}
    for graph_def in model.graph:
        for op_def in graph_def.op:
            if SHARED_WEIGHT_ATTR not in op_def.attr:
                continue
            attr = op_def.attr[SHARED_WEIGHT_ATTR]
            where = f"graph {graph_def.name!r} op {op_def.name!r}"
            if attr.WhichOneof("value") != "s":
                raise SerdeError(f"{where}: reserved attribute {SHARED_WEIGHT_ATTR!r} must be a graph name")
            source_name = attr.s.decode("utf-8", "surrogateescape")
            source = graphs.get(source_name)
            if source is None or source is graph_def:
                raise SerdeError(f"{where}: shares the weight of graph {source_name!r}, which the model does not hold")
            ops = index.get(source_name)
            if ops is None:
                ops = index[source_name] = {o.name: o for o in source.op if o.type == "Const"}
            origin = ops.get(op_def.name)
            if origin is None or "value" not in origin.attr:
                raise SerdeError(
                    f"{where}: shares the weight of {source_name!r} op {op_def.name!r}, which is not a Const"
                )
            op_def.attr["value"].t.data = origin.attr["value"].t.data
            del op_def.attr[SHARED_WEIGHT_ATTR]
