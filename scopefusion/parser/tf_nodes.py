"""One TensorFlow ``NodeDef`` into a :class:`SourceNode`, and the small helpers around it."""

from __future__ import annotations

from typing import Iterable, Sequence

import numpy as np

from ..errors import ParseError
from .op_signatures import OpSignatures
from .source_graph import NO_INPUTS, SourceNode
from .tf_attrs import ContentViews, decode_attrs
from .tf_tensors import TensorDecodeError

__all__ = [
    "CONST_OPS",
    "ENTER_OPS",
    "assign_output_names",
    "decode_node_def",
    "parse_graph_input",
    "parse_tensor_name",
]

CONST_OPS = frozenset({"Const", "HostConst"})
_new = object.__new__
ENTER_OPS = frozenset({"Enter", "RefEnter"})


def parse_tensor_name(text: str) -> tuple[str, int]:
    """``"node:3"`` -> ``("node", 3)``; ``"node"`` -> ``("node", 0)``."""
    name, sep, index = text.rpartition(":")
    if sep and index.isdigit():
        return name, int(index)
    return text, 0


def parse_graph_input(text: str) -> tuple[str, int] | str:
    """A GraphDef input string: ``(producer, index)`` for data, the producer name for ``"^control"``."""
    if text.startswith("^"):
        return text[1:]
    return parse_tensor_name(text)


def decode_node_def(
    node_def,
    where: str,
    content_views: ContentViews | None = None,
    *,
    resolve_inputs: bool = True,
) -> SourceNode:
    """Decodes name, op, attributes (constants included), device and, with ``resolve_inputs``, the inputs.

    Function bodies resolve their inputs themselves (``resolve_inputs=False``).

    Raises:
        ParseError: a node without a name or op type, or an attribute that cannot be decoded.
    """
    name = node_def.name
    op = node_def.op
    if not name:
        raise ParseError(f"{where}: a node ({op or 'no op type'}) has an empty name; every node needs a unique name")
    if not op:
        raise ParseError(f"{where}: node {name!r} has no op type; the model is incomplete or corrupt")
    try:
        attrs = decode_attrs(node_def.attr, content_views)
    except TensorDecodeError as exc:
        raise ParseError(f"{where}: node {name!r} ({op}) has an unreadable tensor attribute: {exc}") from None
    value = frame = None
    if op in CONST_OPS:
        value = attrs.get("value")
        if not isinstance(value, np.ndarray):
            found = "no 'value' attribute" if value is None else f"a 'value' attribute of {type(value).__name__}"
            raise ParseError(
                f"{where}: constant node {name!r} ({op}) has {found}; expected a tensor, so the model is incomplete or corrupt"
            )
    elif op in ENTER_OPS:
        frame_name = attrs.get("frame_name")
        if isinstance(frame_name, str):
            frame = frame_name
    if resolve_inputs:
        inputs, controls = split_inputs(node_def.input)
        return framework_node(name, op, inputs or NO_INPUTS, controls or NO_INPUTS, attrs, value, frame, node_def.device)
    return framework_node(name, op, [], [], attrs, value, frame, node_def.device)  # lists the caller fills


def split_inputs(texts: Iterable[str]) -> tuple[list[tuple[str, int]], list[str]]:
    """``(data inputs as (producer, index), control producers)`` of a NodeDef's input strings, each parsed as
    :func:`parse_graph_input` parses it (written out: a node has several inputs and there are many nodes)."""
    inputs: list[tuple[str, int]] = []
    controls: list[str] = []
    for text in texts:
        if text[:1] == "^":
            controls.append(text[1:])
        elif ":" in text:
            producer, _, index = text.rpartition(":")
            inputs.append((producer, int(index)) if index.isdigit() else (text, 0))
        else:
            inputs.append((text, 0))
    return inputs, controls


def framework_node(name: str, op: str, inputs: list[tuple[str, int]], controls: list[str], attrs: dict,
                   value: np.ndarray | None, frame: str | None, device: str) -> SourceNode:
    """The SourceNode of a decoded NodeDef: ``SourceNode(...)`` with these fields and the rest at their defaults,
    spelled out (fields set in their order), as there are many nodes. The one-pass decoder of
    :mod:`.tf_node_decoder` spells this out again in its loop, to save a call per node: keep the two alike."""
    node = _new(SourceNode)
    node.name = name
    node.op_type = op
    node.inputs = inputs
    node.control_inputs = controls
    node.attrs = attrs
    node.domain = ""
    node.value = value
    node.subgraphs = {}
    node.frame = frame
    node.output_names = NO_INPUTS  # named by assign_output_names, which gives each node its own list
    node.device = device
    node.synthetic = False
    return node


def assign_output_names(nodes: Sequence[SourceNode], signatures: OpSignatures, consumed: Iterable[tuple[str, int]] = ()) -> None:
    """Sets ``output_names`` (``"name:i"``) on every node from its op signature.

    For an op the table does not know, the count is one past the highest output index any consumer
    (or ``consumed``, e.g. graph outputs) reads, at least one.
    """
    unknown: list[SourceNode] = []  # nodes of ops the table does not know: counted from their consumers
    builtin = signatures.builtin_fixed_counts  # most ops' counts, found there without a call
    fixed: dict[str, int | None] = {}  # op type -> its output count when the attributes do not decide it
    num_outputs = signatures.num_outputs
    for node in nodes:
        if node.output_names:
            continue
        op_type = node.op_type
        count = builtin.get(op_type)
        if count is None:
            count = fixed.get(op_type)
        if count is None:
            count = num_outputs(op_type, node.attrs)
            if count is None:
                unknown.append(node)
                continue
            if signatures.fixed_count(op_type) == count:
                fixed[op_type] = count
        name = node.name
        node.output_names = [name + ":0"] if count == 1 else [f"{name}:{i}" for i in range(count)]
    if not unknown:
        return
    highest: dict[str, int] = {}
    for node in nodes:
        for producer, index in node.inputs:
            if index > highest.get(producer, -1):
                highest[producer] = index
    for producer, index in consumed:
        if index > highest.get(producer, -1):
            highest[producer] = index
    for node in unknown:
        name = node.name
        node.output_names = [f"{name}:{i}" for i in range(highest.get(name, 0) + 1)]
