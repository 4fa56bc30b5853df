"""A stripped binary GraphDef's nodes decoded straight into :class:`SourceNode` objects, in one pass.

:func:`.graph_def_decoder.decode_graph_def` makes a ``NodeDef`` message of each node, which
:func:`.tf_nodes.decode_node_def` then turns into a ``SourceNode``: each node's fields are read twice and
an object is made per node only to be dropped. :func:`decode_graph_def_nodes` reads each node of the main
graph once: its name, op type, device and inputs as ``decode_node_def`` parses them, and each attribute
from the bytes of its map entry. A model's nodes share a few dozen distinct attributes (dtypes, strides,
paddings), so an attribute whose value is immutable (not a tensor, nor a function with attributes) is
decoded once per process for each distinct encoding, as :mod:`.tf_attrs` decodes it; any other is decoded
as ``decode_node_def`` decodes it, constants' tensors as views of the cut ``tensor_content``.

The answer is all or nothing: anything either step would treat apart (a field the fast decoders leave to
:func:`.message_decoder.decode` or to protobuf, a node without a name or op type, an attribute that cannot
be decoded, a constant without a tensor) gives None, and the caller takes those steps instead, which give
their result or their error. So the nodes are those ``decode_node_def`` makes of ``decode_graph_def``'s
messages, or the caller makes them so. The library of functions and the versions are decoded as
``decode_graph_def`` decodes them (function bodies are decoded by :mod:`.tf_functions`).

Given the GraphDef not stripped yet and a way to strip one field, the same walk strips the few large fields
as it meets them (see :func:`decode_graph_def_nodes`), so the fields of a model read whole are walked once,
not once to strip them and once to decode them.
"""

from __future__ import annotations

from operator import itemgetter
from typing import Any, Callable, Mapping

import numpy as np

from .graph_def_decoder import _ATTR_MAP, _GRAPH_MESSAGES, AttrValue, GraphDef, NodeDef
from .message_decoder import MAX_CACHED_ENTRY, decode, map_entry, skip_field, varint
from .node_cuts import cut_entry
from .source_graph import NO_INPUTS, SourceNode
from .tf_attrs import ContentViews, decode_attrs, is_immutable_attr
from .tf_nodes import CONST_OPS, ENTER_OPS
from .tf_tensors import tensor_to_numpy

__all__ = ["decode_graph_def_nodes"]

_NODE_TAGS = frozenset({0x0A, 0x12, 0x1A, 0x22, 0x2A})  # NodeDef's fields 1 to 5, each of wire type 2
_BY_NAME = itemgetter(0)
_new = object.__new__
# Map entry bytes -> (attribute name, decoded immutable value); bounded like message_decoder's entry cache.
_DECODED_ENTRIES: dict[bytes, tuple[str, Any]] = {}
_MAX_DECODED_ENTRIES = 4096


class _Fallback(Exception):
    """The nodes must be made by ``decode_graph_def`` and ``decode_node_def`` (see the module docstring)."""


#: ``strip_field(field number, occurrence, start, end)``: the bytes that stripping leaves of the GraphDef
#: field in ``data[start:end]`` and, for a node, its cut tensors by attribute name (see decode_graph_def_nodes).
StripField = Callable[[int, int, int, int], tuple[bytes, "ContentViews | None"]]


def decode_graph_def_nodes(
    data: bytes, node_views: Mapping[int, ContentViews], strip_field: StripField | None = None, threshold: int = 0
) -> tuple[Any, list[SourceNode]] | None:
    """``(GraphDef message without its nodes, the main graph's SourceNodes)`` of the stripped GraphDef in
    ``data`` (``node_views``: the cut tensors by node index, then attribute name), or None when the caller
    must decode the GraphDef and its nodes the general way (see the module docstring).

    With ``strip_field``, ``data`` is the GraphDef as the file holds it, not stripped yet: a node or library
    field of at least ``threshold`` bytes (the only fields :func:`.wire.strip` walks into: it copies a shorter
    one whole) is decoded from the bytes ``strip_field`` leaves of it, any other field from ``data`` itself,
    which are the bytes stripping would copy. So the nodes and the message are those of the stripped GraphDef,
    found in one walk over the fields instead of one to strip them and one to decode them."""
    try:
        return _decode(data, node_views, strip_field, threshold)
    except Exception:
        # _Fallback, the decoders' NeedsProtobuf (and IndexError, struct.error), a TensorDecodeError, a
        # WireError of strip_field, or anything else: the general way meets it again and reports it in its
        # own order.
        return None


def _decode(data: bytes, node_views: Mapping[int, ContentViews], strip_field: StripField | None,
            threshold: int) -> tuple[Any, list[SourceNode]] | None:
    """``graph_def_decoder._decode_graph_def`` over the whole of ``data``, each node decoded by _node (the
    large fields first stripped by ``strip_field``, when given)."""
    values: dict[str, Any] = {"_raw": data}
    nodes: list[SourceNode] = []
    shared: dict[bytes, dict[str, Any]] = {}  # _node's attribute dicts by their bytes (see _node)
    pos, end = 0, len(data)
    while pos < end:
        tag = data[pos]
        if pos + 1 >= end or (tag != 0x0A and tag not in _GRAPH_MESSAGES):
            return None
        length = data[pos + 1]
        if length < 0x80:
            pos += 2
        elif pos + 2 < end and data[pos + 2] < 0x80:  # a two-byte length (most nodes), read without a call
            length = (length & 0x7F) | (data[pos + 2] << 7)
            pos += 3
        else:
            length, pos = varint(data, pos + 1, end)
        field_start, pos = pos, pos + length
        if pos > end:
            return None
        if tag == 0x0A:
            if strip_field is not None and length >= threshold:
                stripped, views = strip_field(1, len(nodes), field_start, pos)
                nodes.append(_node(stripped, views, shared))
            else:
                views = node_views.get(len(nodes)) if node_views else None  # (none when read whole: cut as met)
                nodes.append(_node(data[field_start:pos], views, shared))
            continue
        name, cls = _GRAPH_MESSAGES[tag]
        if name in values:
            return None
        if strip_field is not None and tag == 0x12 and length >= threshold:  # the library (versions is never walked)
            stripped, _ = strip_field(2, 0, field_start, pos)
            values[name] = decode(cls, stripped, 0, len(stripped), 1)
        else:
            values[name] = decode(cls, data, field_start, pos, 1)
    if not nodes:
        return None
    graph = GraphDef.__new__(GraphDef)
    graph.__dict__.update(values)
    return graph, nodes


def _node(data: bytes, views: ContentViews | None, shared: dict[bytes, dict[str, Any]]) -> SourceNode:
    """The SourceNode ``decode_node_def`` makes of the NodeDef whose bytes are ``data``; raises _Fallback
    where ``graph_def_decoder._decode_node_def`` would leave the node to ``decode`` or ``decode_node_def``
    would raise (or another exception, on bytes that end inside a field: the caller falls back the same).

    The node's own bytes, not a range of the GraphDef's: positions within a node mostly stay below 256,
    integers Python keeps made, where positions in the file need a new integer for each step.

    The nodes of a graph that end in the same attributes (every ``Identity`` of one dtype, most ``Conv2D``)
    share one attribute dict: ``shared`` keeps the dict of each run of immutable attributes that ends a node
    (the bytes from the first attribute to the node's end, nothing else among them) by those bytes, and a
    node ending in the same bytes takes that dict without decoding them: they decode to the same attributes."""
    name = op = device = ""
    # Each input as split_inputs parses it, as it is met: most nodes have no control input (and constants no
    # input at all), which keep the shared NO_INPUTS.
    inputs: list[tuple[str, int]] = NO_INPUTS
    controls: list[str] = NO_INPUTS
    pairs: list[tuple[str, Any]] = []
    decoded_entries = _DECODED_ENTRIES
    attrs: dict[str, Any] | None = None
    run: bytes | None = None  # the bytes from the first attribute to the end, while they may be shared
    end = len(data)
    pos = 0
    # The layout writers give (name, op type, data inputs, then attributes, the lengths of most fields one
    # byte) is read here field after field, without the loop's dispatch on each tag; the loop below reads the
    # rest, if any, from where this stops, as it would have read the fields this read.
    if data[0] == 0x0A and data[1] < 0x80:
        pos = 2 + data[1]
        if pos > end:
            raise _Fallback
        name = data[2:pos].decode()  # (a decode error: the caller falls back, as for _Fallback)
        if data[pos] == 0x12 and data[pos + 1] < 0x80:  # (a node of a name alone is an error: the same)
            field_start = pos + 2
            pos = field_start + data[pos + 1]
            if pos > end:
                raise _Fallback
            op = data[field_start:pos].decode()
            # Data inputs: a control input ("^name"), an empty or a long one is left to the loop.
            while pos < end and data[pos] == 0x1A:
                length = data[pos + 1]
                if length == 0 or length >= 0x80 or data[pos + 2] == 0x5E:
                    break
                field_start = pos + 2
                pos = field_start + length
                if pos > end:
                    raise _Fallback
                text = data[field_start:pos].decode()
                if ":" in text:
                    producer, _, index = text.rpartition(":")
                    tensor = (producer, int(index)) if index.isdigit() else (text, 0)
                else:
                    tensor = (text, 0)
                if inputs is NO_INPUTS:
                    inputs = [tensor]
                else:
                    inputs.append(tensor)
            if pos < end and data[pos] == 0x2A:
                if op not in CONST_OPS:  # the first attribute of a node: its run may be a shared one
                    run = data[pos:]
                    attrs = shared.get(run)
                    if attrs is not None:
                        pos = end
                # The attributes (their lengths of one or two bytes), as the loop reads them.
                while pos < end and data[pos] == 0x2A:
                    length = data[pos + 1]
                    if length < 0x80:
                        field_start = pos + 2
                    elif data[pos + 2] < 0x80:
                        length = (length & 0x7F) | (data[pos + 2] << 7)
                        field_start = pos + 3
                    else:
                        break
                    pos = field_start + length
                    if pos > end:
                        raise _Fallback
                    entry = data[field_start:pos]
                    known = decoded_entries.get(entry)
                    if known is None:
                        known = _attr(data, field_start, pos, entry, views)
                        if run is not None and entry not in decoded_entries:  # a value that is not immutable
                            run = None
                    pairs.append(known)
    while pos < end:
        tag = data[pos]
        if tag not in _NODE_TAGS:
            pos = _skip_unknown(data, pos, end)
            run = None
            continue
        field = pos
        # (A tag that ends the node reads its length past the end: the field runs past it, refused below.)
        length = data[pos + 1]
        if length < 0x80:
            pos += 2
        elif pos + 2 < end and data[pos + 2] < 0x80:  # a two-byte length, as in _decode
            length = (length & 0x7F) | (data[pos + 2] << 7)
            pos += 3
        else:
            length, pos = varint(data, pos + 1, end)
        field_start, pos = pos, pos + length
        if pos > end:
            raise _Fallback
        if tag == 0x2A:
            if not pairs and op not in CONST_OPS:  # the first attribute (a constant's tensor is never shared)
                run = data[field:end]
                attrs = shared.get(run)
                if attrs is not None:
                    break
            entry = data[field_start:pos]
            known = decoded_entries.get(entry)
            if known is None:
                known = _attr(data, field_start, pos, entry, views)
                if run is not None and entry not in decoded_entries:  # a value that is not immutable
                    run = None
            pairs.append(known)
            continue
        run = None
        try:
            text = data[field_start:pos].decode()  # (UTF-8)
        except UnicodeDecodeError:
            raise _Fallback from None
        if tag == 0x1A:
            if text[:1] == "^":
                if controls is NO_INPUTS:
                    controls = [text[1:]]
                else:
                    controls.append(text[1:])
                continue
            if ":" in text:
                producer, _, index = text.rpartition(":")
                tensor = (producer, int(index)) if index.isdigit() else (text, 0)
            else:
                tensor = (text, 0)
            if inputs is NO_INPUTS:
                inputs = [tensor]
            else:
                inputs.append(tensor)
        elif tag == 0x0A:
            name = text
        elif tag == 0x12:
            op = text
        else:
            device = text
    if not name or not op:
        raise _Fallback  # decode_node_def's error
    # decode_attrs's order (by name); a name given twice is left to protobuf, as _decode_node_def leaves it.
    if attrs is None:
        if len(pairs) == 2:  # (a constant's dtype and value, most often) ordered without sort's calls of the key
            if pairs[0][0] > pairs[1][0]:
                pairs.reverse()
        elif len(pairs) > 2:
            pairs.sort(key=_BY_NAME)
        attrs = dict(pairs)
        if len(attrs) != len(pairs):
            raise _Fallback
        if run is not None:
            shared[run] = attrs
    value = frame = None
    if op in CONST_OPS:
        value = attrs.get("value")
        if not isinstance(value, np.ndarray):
            raise _Fallback  # decode_node_def's error
    elif op in ENTER_OPS:
        frame_name = attrs.get("frame_name")
        if isinstance(frame_name, str):
            frame = frame_name
    # framework_node(name, op, inputs, controls, attrs, value, frame, device) spelled out (a call per node).
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
    node.output_names = NO_INPUTS
    node.device = device
    node.synthetic = False
    return node


def _skip_unknown(data: bytes, pos: int, end: int) -> int:
    """The position after the field at ``pos`` when NodeDef's schema does not know its number (as
    ``experimental_type``): :func:`.message_decoder.decode` skips such a field (it gives the NodeDef of a
    node with one), so it is skipped as decode skips it. Any other field raises _Fallback."""
    tag = data[pos]
    if tag < 0x80:
        pos += 1
    else:
        tag, pos = varint(data, pos, end)
    number = tag >> 3
    if number in NodeDef._fields or number == 0 or number >= 1 << 29 or number in NodeDef._refused:
        raise _Fallback
    return skip_field(data, pos, end, tag & 7)


def _attr(data: bytes, pos: int, end: int, entry: bytes, views: ContentViews | None) -> tuple[str, Any]:
    """``(name, value)`` of the attribute map entry ``entry`` (``data[pos:end]``): its message as
    ``_decode_node_def`` finds it (from the shared entry table, else by ``map_entry``), decoded by
    ``decode_attrs``; an immutable value is remembered by its encoding."""
    if end - pos <= MAX_CACHED_ENTRY:
        known = AttrValue._entry_cache.get(entry)
    else:
        tensor = _tensor_apart(data, pos, end, views)
        if tensor is not None:
            return tensor
        known = None
    if known is None:
        into: dict[str, Any] = {}
        map_entry(into, _ATTR_MAP, data, pos, end, 1)
        ((name, message),) = into.items()
    else:
        name, message = known
    # WhichOneof("value") read without the call (the message is one of message_decoder's).
    if message._which == "tensor":  # as decode_attrs decodes a tensor (which it never remembers)
        return name, tensor_to_numpy(message.tensor, None if views is None else views.get(name))
    value = decode_attrs({name: message}, views)[name]
    if len(entry) <= MAX_CACHED_ENTRY and is_immutable_attr(message):
        if len(_DECODED_ENTRIES) >= _MAX_DECODED_ENTRIES:
            _DECODED_ENTRIES.clear()
        _DECODED_ENTRIES[entry] = (name, value)
    return name, value


def _tensor_apart(data: bytes, pos: int, end: int, views: ContentViews | None) -> tuple[str, Any] | None:
    """``_attr``'s answer for an entry too long for the shared entry table (``data[pos:end]``) when it holds a
    tensor whose only long field is its ``tensor_content`` (a constant of a few hundred values): the rest of the
    entry, short, is read from that table (decoded once per process, as short entries are), and the content,
    copied as decoding the whole entry copies it, is given to ``tensor_to_numpy`` as its cut content. Else
    None (``_attr`` decodes the entry)."""
    cut = cut_entry(data, pos, end, 1)
    if cut is None:
        return None
    rest, name, content, length = cut
    if len(rest) > MAX_CACHED_ENTRY or (views is not None and name in views):
        return None
    known = AttrValue._entry_cache.get(rest)
    if known is None:
        into: dict[str, Any] = {}
        map_entry(into, _ATTR_MAP, rest, 0, len(rest), 1)
        ((_, message),) = into.items()
    else:
        message = known[1]
    return name, tensor_to_numpy(message.tensor, (data[content:content + length], 0, length))
