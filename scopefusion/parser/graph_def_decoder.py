"""A binary GraphDef decoded in Python, so that converting a frozen graph does not import protobuf.

:func:`decode_graph_def` reads the stripped GraphDef bytes that :func:`.wire.strip` leaves with the
messages of ``proto/tf_framework.proto`` that a GraphDef holds, declared here for :mod:`.message_decoder`
(whose docstring says what it leaves to protobuf, and how the messages differ from protobuf's). Resource
and variant tensors are left to protobuf too: their values are their messages' serialization.
"""

from __future__ import annotations

from typing import Any

from .message_decoder import (
    BOOL,
    BYTES,
    DOUBLE,
    FLOAT,
    INT32,
    INT64,
    MAP,
    MAX_CACHED_ENTRY,
    MAX_DEPTH,
    MESSAGE,
    STRING,
    UINT32,
    UINT64,
    DecodedMessage,
    NeedsProtobuf,
    decode,
    decode_or_none,
    field,
    finish,
    map_entry,
    message_class,
    varint,
)

__all__ = ["decode_graph_def"]


# The messages of tf_framework.proto that a GraphDef holds (ResourceHandleProto and VariantTensorDataProto
# are left to protobuf: their tensors' values are their serialization).
Dim = message_class("Dim", {1: field("size", INT64), 2: field("name", STRING)})
TensorShapeProto = message_class("TensorShapeProto", {2: field("dim", MESSAGE, True, Dim), 3: field("unknown_rank", BOOL)})
TensorProto = message_class("TensorProto", {
    1: field("dtype", INT32), 2: field("tensor_shape", MESSAGE, False, TensorShapeProto), 3: field("version_number", INT32),
    4: field("tensor_content", BYTES), 5: field("float_val", FLOAT, True), 6: field("double_val", DOUBLE, True),
    7: field("int_val", INT32, True), 8: field("string_val", BYTES, True), 9: field("scomplex_val", FLOAT, True),
    10: field("int64_val", INT64, True), 11: field("bool_val", BOOL, True), 12: field("dcomplex_val", DOUBLE, True),
    13: field("half_val", INT32, True), 16: field("uint32_val", UINT32, True), 17: field("uint64_val", UINT64, True),
    18: field("float8_val", BYTES),
}, refused=frozenset({14, 15}))  # resource_handle_val, variant_val
NameAttrList = message_class("NameAttrList", {1: field("name", STRING)})  # field 2 (attr) is added below
ListValue = message_class("ListValue", {
    2: field("s", BYTES, True), 3: field("i", INT64, True), 4: field("f", FLOAT, True), 5: field("b", BOOL, True),
    6: field("type", INT32, True), 7: field("shape", MESSAGE, True, TensorShapeProto),
    8: field("tensor", MESSAGE, True, TensorProto), 9: field("func", MESSAGE, True, NameAttrList),
})
_ATTR_VALUE_MEMBERS = ["list", "s", "i", "f", "b", "type", "shape", "tensor", "placeholder", "func"]
AttrValue = message_class("AttrValue", {
    1: field("list", MESSAGE, False, ListValue), 2: field("s", BYTES), 3: field("i", INT64), 4: field("f", FLOAT),
    5: field("b", BOOL), 6: field("type", INT32), 7: field("shape", MESSAGE, False, TensorShapeProto),
    8: field("tensor", MESSAGE, False, TensorProto), 9: field("placeholder", STRING),
    10: field("func", MESSAGE, False, NameAttrList),
}, ("value", _ATTR_VALUE_MEMBERS))
NameAttrList._fields[2] = field("attr", MAP, False, (STRING, AttrValue))
DebugInfo = message_class("ExperimentalDebugInfo", {
    1: field("original_node_names", STRING, True), 2: field("original_func_names", STRING, True),
})
_ATTR_MAP = (STRING, AttrValue)
NodeDef = message_class("NodeDef", {
    1: field("name", STRING), 2: field("op", STRING), 3: field("input", STRING, True), 4: field("device", STRING),
    5: field("attr", MAP, False, (STRING, AttrValue)), 6: field("experimental_debug_info", MESSAGE, False, DebugInfo),
})
DtypeAndShape = message_class("DtypeAndShape", {1: field("dtype", INT32), 2: field("shape", MESSAGE, False, TensorShapeProto)})
ArgDef = message_class("ArgDef", {
    1: field("name", STRING), 2: field("description", STRING), 3: field("type", INT32), 4: field("type_attr", STRING),
    5: field("number_attr", STRING), 6: field("type_list_attr", STRING), 7: field("handle_data", MESSAGE, True, DtypeAndShape),
    16: field("is_ref", BOOL),
})
AttrDef = message_class("AttrDef", {
    1: field("name", STRING), 2: field("type", STRING), 3: field("default_value", MESSAGE, False, AttrValue),
    4: field("description", STRING), 5: field("has_minimum", BOOL), 6: field("minimum", INT64),
    7: field("allowed_values", MESSAGE, False, AttrValue),
})
OpDef = message_class("OpDef", {
    1: field("name", STRING), 2: field("input_arg", MESSAGE, True, ArgDef), 3: field("output_arg", MESSAGE, True, ArgDef),
    4: field("attr", MESSAGE, True, AttrDef), 5: field("summary", STRING), 6: field("description", STRING),
    16: field("is_aggregate", BOOL), 17: field("is_stateful", BOOL), 18: field("is_commutative", BOOL),
    19: field("allows_uninitialized_input", BOOL), 20: field("control_output", STRING, True),
})
ArgAttrs = message_class("ArgAttrs", {1: field("attr", MAP, False, (STRING, AttrValue))})
FunctionDef = message_class("FunctionDef", {
    1: field("signature", MESSAGE, False, OpDef), 3: field("node_def", MESSAGE, True, NodeDef),
    4: field("ret", MAP, False, (STRING, STRING)), 5: field("attr", MAP, False, (STRING, AttrValue)),
    6: field("control_ret", MAP, False, (STRING, STRING)), 7: field("arg_attr", MAP, False, (UINT32, ArgAttrs)),
    8: field("resource_arg_unique_id", MAP, False, (UINT32, UINT32)),
})
GradientDef = message_class("GradientDef", {1: field("function_name", STRING), 2: field("gradient_func", STRING)})
FunctionDefLibrary = message_class("FunctionDefLibrary", {
    1: field("function", MESSAGE, True, FunctionDef), 2: field("gradient", MESSAGE, True, GradientDef),
})
VersionDef = message_class("VersionDef", {
    1: field("producer", INT32), 2: field("min_consumer", INT32), 3: field("bad_consumers", INT32, True),
})
GraphDef = message_class("GraphDef", {
    1: field("node", MESSAGE, True, NodeDef), 2: field("library", MESSAGE, False, FunctionDefLibrary),
    3: field("version", INT32), 4: field("versions", MESSAGE, False, VersionDef),
})
finish(Dim, TensorShapeProto, TensorProto, NameAttrList, ListValue, AttrValue, DebugInfo, NodeDef, DtypeAndShape, ArgDef,
       AttrDef, OpDef, ArgAttrs, FunctionDef, GradientDef, FunctionDefLibrary, VersionDef, GraphDef)
AttrValue._entry_cache = {}  # attributes repeat across a model's nodes: see message_decoder.MAX_CACHED_ENTRY
# A function's argument attributes and argument definitions repeat across its functions (a loop's body and
# condition take the same arguments): each distinct encoding is decoded once, as attributes are.
ArgAttrs._entry_cache = {}


def _shared_decoder(cls: Any) -> Any:
    """:func:`.decode` of ``cls`` that decodes each distinct encoding of at most ``MAX_CACHED_ENTRY`` bytes once
    per process (at each depth) and gives the same message for it again, as map entries are shared (see
    ``message_decoder.MAX_CACHED_ENTRY``): equal bytes decode to equal messages, and nothing writes one."""
    decoded: dict[tuple[int, bytes], Any] = {}

    def decode_shared(data: bytes, pos: int, end: int, depth: int) -> Any:
        if end - pos > MAX_CACHED_ENTRY:
            return decode(cls, data, pos, end, depth)
        key = (depth, data[pos:end])
        found = decoded.get(key)
        if found is None:
            found = decode(cls, data, pos, end, depth)
            if len(decoded) >= _MAX_SHARED:
                decoded.clear()
            decoded[key] = found
        return found

    return decode_shared


_MAX_SHARED = 4096
ArgDef._fast = _shared_decoder(ArgDef)


def decode_graph_def(data: bytes) -> DecodedMessage | None:
    """The GraphDef in ``data``, or None when protobuf must parse it."""
    return decode_or_none(GraphDef, data)


_NODE_TAGS = frozenset({0x0A, 0x12, 0x1A, 0x22, 0x2A})  # NodeDef's fields 1 to 5, each of wire type 2
_NODE_STRINGS = {0x0A: "name", 0x12: "op", 0x22: "device"}  # tags of NodeDef's string fields 1, 2 and 4


def _decode_node_def(data: bytes, pos: int, end: int, depth: int) -> Any:
    """:func:`.decode` of a NodeDef whose fields are all among name, op, input, device and attr (as nearly
    every node's are), decoded as :func:`.decode` decodes them; any other node goes to :func:`.decode`."""
    start = pos
    values: dict[str, Any] = {"_raw": data[pos:end]}
    inputs: list[str] | None = None
    attr: dict[str, Any] | None = None
    strings = _NODE_STRINGS
    entries = AttrValue._entry_cache
    while pos < end:
        tag = data[pos]
        if tag not in _NODE_TAGS or pos + 1 >= end:
            return decode(NodeDef, data, start, end, depth)
        length = data[pos + 1]
        if length < 0x80:
            pos += 2
        else:
            length, pos = varint(data, pos + 1, end)
        field_start, pos = pos, pos + length
        if pos > end:
            raise NeedsProtobuf
        if tag == 0x2A:
            if attr is None:
                attr = values["attr"] = {}
            known = entries.get(data[field_start:pos]) if length <= MAX_CACHED_ENTRY else None
            if known is None or known[0] in attr:
                map_entry(attr, _ATTR_MAP, data, field_start, pos, depth)
            else:
                attr[known[0]] = known[1]
            continue
        try:
            text = data[field_start:pos].decode("utf-8")
        except UnicodeDecodeError:
            raise NeedsProtobuf from None
        if tag == 0x1A:
            if inputs is None:
                inputs = values["input"] = [text]
            else:
                inputs.append(text)
        else:
            values[strings[tag]] = text
    node = NodeDef.__new__(NodeDef)
    node.__dict__.update(values)
    return node


NodeDef._fast = _decode_node_def

_GRAPH_MESSAGES = {0x12: ("library", FunctionDefLibrary), 0x22: ("versions", VersionDef)}  # GraphDef's fields 2 and 4


def _decode_graph_def(data: bytes, pos: int, end: int, depth: int) -> Any:
    """:func:`.decode` of a GraphDef whose fields are all among node, library and versions (as every writer's
    are), its loop over the nodes written for them alone; any other GraphDef goes to :func:`.decode`."""
    if depth > MAX_DEPTH:
        raise NeedsProtobuf
    start = pos
    values: dict[str, Any] = {"_raw": data if pos == 0 and end == len(data) else data[pos:end]}
    nodes: list[Any] = []
    node_def = _decode_node_def
    while pos < end:
        tag = data[pos]
        if pos + 1 >= end or (tag != 0x0A and tag not in _GRAPH_MESSAGES):
            return decode(GraphDef, data, start, end, depth)
        length = data[pos + 1]
        if length < 0x80:
            pos += 2
        else:
            length, pos = varint(data, pos + 1, end)
        field_start, pos = pos, pos + length
        if pos > end:
            raise NeedsProtobuf
        if tag == 0x0A:
            if not nodes:
                values["node"] = nodes  # where decode puts it: at the first node
            nodes.append(node_def(data, field_start, pos, depth + 1))
            continue
        name, cls = _GRAPH_MESSAGES[tag]
        if name in values:
            raise NeedsProtobuf  # a message given twice: protobuf merges the two
        values[name] = decode(cls, data, field_start, pos, depth + 1)
    graph = GraphDef.__new__(GraphDef)
    graph.__dict__.update(values)
    return graph


GraphDef._fast = _decode_graph_def
