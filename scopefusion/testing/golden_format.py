"""What a golden file holds, below its comment lines: a GE ``ModelDef`` in protobuf text, one op per line,
each weight summarised.

* A weight (a tensor of more than :data:`INLINE_ELEMENTS` elements: a ``ge.Const``'s value, or a tensor
  attribute a fused op absorbed, ``query_weight`` say) is written as a one-element string tensor
  ``"weight f32[768,768] sha256:<hex>"``: its dtype, shape and the SHA-256 of the serialized tensor, not
  its bytes. Smaller tensors (scalars, short shape vectors) keep their values, which a reviewer wants to
  see. :func:`golden_model` with ``keep_weights=True`` keeps every weight's bytes.
* Ops carry no ``input_desc``: an input's type is its producer's output type, which the reader takes.
* Each op is one line (``op { ... }``), so a golden is about the size of the printed graph and a change
  to one op is a one-line change in review.

Comparing a graph with a golden summarises the graph's weights the same way first
(:func:`summarise_weights` on its ``ModelDef``), so a changed weight is an attribute difference of that
weight, named in the failure.
"""

from __future__ import annotations

import hashlib
from typing import Iterator

import numpy as np
from google.protobuf import text_format

from ..errors import SerdeError
from ..serde import ge_ir_pb2 as pb

__all__ = ["INLINE_ELEMENTS", "SUMMARY_PREFIX", "golden_model", "has_summaries", "parse_golden", "summarise_weights",
           "to_golden_text"]  # fmt: skip

INLINE_ELEMENTS = 8
SUMMARY_PREFIX = "weight "


def golden_model(graph, *, keep_weights: bool = False) -> pb.ModelDef:
    """The ``ModelDef`` a golden file of ``graph`` holds (see the module docstring)."""
    from ..serde.ge import model_to_proto

    model = model_to_proto(graph)
    for graph_def in model.graph:
        for op in graph_def.op:
            del op.input_desc[:]
    if not keep_weights:
        summarise_weights(model)
    return model


def _tensors(model: pb.ModelDef) -> Iterator[tuple[str, pb.TensorDef]]:
    """Every tensor attribute of every op of ``model`` (lists and named attributes included), with where it is."""
    for graph_def in model.graph:
        for op in graph_def.op:
            stack = [(f"op {op.name!r} attribute {key!r}", attr) for key, attr in sorted(op.attr.items())]
            while stack:
                where, attr = stack.pop()
                kind = attr.WhichOneof("value")
                if kind == "t":
                    yield where, attr.t
                elif kind == "list":
                    for tensor in attr.list.t:
                        yield where, tensor
                    for named in attr.list.na:
                        stack.extend((f"{where}.{k}", a) for k, a in sorted(named.attr.items()))
                elif kind == "func":
                    stack.extend((f"{where}.{k}", a) for k, a in sorted(attr.func.attr.items()))


def _elements(tensor: pb.TensorDef) -> int:
    count = 1
    for dim in tensor.desc.shape.dim:
        count *= max(int(dim), 0)
    return count


def summarise_weights(model: pb.ModelDef) -> int:
    """Replaces, in place, every weight of ``model`` by its summary; returns how many it replaced."""
    from ..serde.tensors import array_to_tensor_def, dtype_from_ge

    count = 0
    for where, tensor in _tensors(model):
        if _elements(tensor) <= INLINE_ELEMENTS:
            continue
        digest = hashlib.sha256(tensor.SerializeToString(deterministic=True)).hexdigest()
        dtype = dtype_from_ge(tensor.desc.dtype, where)
        shape = ",".join(str(int(d)) for d in tensor.desc.shape.dim)
        summary = np.empty((), dtype=object)
        summary[()] = f"{SUMMARY_PREFIX}{dtype.short}[{shape}] sha256:{digest}"
        tensor.Clear()
        array_to_tensor_def(summary, tensor, where)
        count += 1
    return count


def has_summaries(model: pb.ModelDef) -> bool:
    """True when some weight of ``model`` is a summary (its bytes are not there)."""
    from ..serde.tensors import array_from_tensor_def

    for where, tensor in _tensors(model):
        if _elements(tensor) == 1 and tensor.desc.dtype == pb.DT_STRING:
            value = array_from_tensor_def(tensor, where).reshape(-1)[0]
            text = value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value)
            if text.startswith(SUMMARY_PREFIX) and " sha256:" in text:
                return True
    return False


def to_golden_text(model: pb.ModelDef) -> str:
    """Protobuf text of ``model`` with one line per op (protobuf's text parser reads it back)."""
    head = pb.ModelDef()
    head.CopyFrom(model)
    del head.graph[:]
    lines = [text_format.MessageToString(head, as_one_line=True)] if head.ByteSize() else []
    for graph_def in model.graph:
        shell = pb.GraphDef()
        shell.CopyFrom(graph_def)
        del shell.op[:]
        lines.append("graph { " + text_format.MessageToString(shell, as_one_line=True))
        lines.extend("  op { " + text_format.MessageToString(op, as_one_line=True) + " }" for op in graph_def.op)
        lines.append("}")
    return "\n".join(lines) + "\n"


def parse_golden(text: str) -> pb.ModelDef:
    """The ``ModelDef`` of a golden file's text; SerdeError when it is not one."""
    model = pb.ModelDef()
    try:
        text_format.Parse(text, model)
    except (text_format.ParseError, UnicodeError, ValueError) as e:
        raise SerdeError(f"cannot parse the text as a GE ModelDef ({e}); fix the text at that position") from None
    return model
