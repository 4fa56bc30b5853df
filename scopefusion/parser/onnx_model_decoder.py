"""A binary ONNX ModelProto decoded in Python, so that converting an ONNX model does not import protobuf.

:func:`decode_model` reads the stripped model bytes that :func:`.wire.strip` leaves with the messages of
``proto/onnx_model.proto``, declared here for :mod:`.message_decoder` (whose docstring says what it leaves
to protobuf, and how the messages differ from protobuf's), with that schema's semantics: every singular
field has presence, enums are closed, string fields must be UTF-8. The enum values are class attributes
(``AttributeProto.FLOAT``, ``TensorProto.EXTERNAL``), as on protobuf's classes. tests/parser/
test_onnx_model_decoder.py checks the declarations against the generated protobuf module.
"""

from __future__ import annotations

from .message_decoder import (
    BYTES,
    DOUBLE,
    ENUM,
    FLOAT,
    INT32,
    INT64,
    MESSAGE,
    STRING,
    UINT64,
    DecodedMessage,
    decode_or_none,
    field,
    finish,
    message_class,
)

__all__ = ["AttributeProto", "ModelProto", "TensorProto", "decode_model"]

_ATTRIBUTEPROTO_ATTRIBUTETYPE = frozenset({0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14})
_TENSORPROTO_DATALOCATION = frozenset({0, 1})

AttributeProto = message_class("AttributeProto", explicit_presence=True)
ValueInfoProto = message_class("ValueInfoProto", explicit_presence=True)
NodeProto = message_class("NodeProto", explicit_presence=True)
IntIntListEntryProto = message_class("IntIntListEntryProto", explicit_presence=True)
NodeDeviceConfigurationProto = message_class("NodeDeviceConfigurationProto", explicit_presence=True)
ShardingSpecProto = message_class("ShardingSpecProto", explicit_presence=True)
ShardedDimProto = message_class("ShardedDimProto", explicit_presence=True)
SimpleShardedDimProto = message_class("SimpleShardedDimProto", oneof=("dim", ["dim_value", "dim_param"]), explicit_presence=True)
TrainingInfoProto = message_class("TrainingInfoProto", explicit_presence=True)
ModelProto = message_class("ModelProto", explicit_presence=True)
DeviceConfigurationProto = message_class("DeviceConfigurationProto", explicit_presence=True)
StringStringEntryProto = message_class("StringStringEntryProto", explicit_presence=True)
TensorAnnotation = message_class("TensorAnnotation", explicit_presence=True)
GraphProto = message_class("GraphProto", explicit_presence=True)
TensorProto_Segment = message_class("Segment", explicit_presence=True)
TensorProto = message_class("TensorProto", explicit_presence=True)
SparseTensorProto = message_class("SparseTensorProto", explicit_presence=True)
TensorShapeProto_Dimension = message_class("Dimension", oneof=("value", ["dim_value", "dim_param"]), explicit_presence=True)
TensorShapeProto = message_class("TensorShapeProto", explicit_presence=True)
TypeProto_Tensor = message_class("Tensor", explicit_presence=True)
TypeProto_Sequence = message_class("Sequence", explicit_presence=True)
TypeProto_Map = message_class("Map", explicit_presence=True)
TypeProto_Optional = message_class("Optional", explicit_presence=True)
TypeProto_SparseTensor = message_class("SparseTensor", explicit_presence=True)
TypeProto_Opaque = message_class("Opaque", explicit_presence=True)
TypeProto = message_class("TypeProto", oneof=("value", ["tensor_type", "sequence_type", "map_type", "opaque_type", "sparse_tensor_type", "optional_type"]), explicit_presence=True)
OperatorSetIdProto = message_class("OperatorSetIdProto", explicit_presence=True)
FunctionProto = message_class("FunctionProto", explicit_presence=True)

AttributeProto._fields.update({
    1: field("name", STRING), 2: field("f", FLOAT), 3: field("i", INT64), 4: field("s", BYTES),
    5: field("t", MESSAGE, False, TensorProto), 6: field("g", MESSAGE, False, GraphProto),
    7: field("floats", FLOAT, True), 8: field("ints", INT64, True), 9: field("strings", BYTES, True),
    10: field("tensors", MESSAGE, True, TensorProto), 11: field("graphs", MESSAGE, True, GraphProto),
    13: field("doc_string", STRING), 14: field("tp", MESSAGE, False, TypeProto),
    15: field("type_protos", MESSAGE, True, TypeProto), 20: field("type", ENUM, False, _ATTRIBUTEPROTO_ATTRIBUTETYPE),
    21: field("ref_attr_name", STRING), 22: field("sparse_tensor", MESSAGE, False, SparseTensorProto),
    23: field("sparse_tensors", MESSAGE, True, SparseTensorProto),
})
ValueInfoProto._fields.update({
    1: field("name", STRING), 2: field("type", MESSAGE, False, TypeProto), 3: field("doc_string", STRING),
    4: field("metadata_props", MESSAGE, True, StringStringEntryProto),
})
NodeProto._fields.update({
    1: field("input", STRING, True), 2: field("output", STRING, True), 3: field("name", STRING),
    4: field("op_type", STRING), 5: field("attribute", MESSAGE, True, AttributeProto), 6: field("doc_string", STRING),
    7: field("domain", STRING), 8: field("overload", STRING),
    9: field("metadata_props", MESSAGE, True, StringStringEntryProto),
    10: field("device_configurations", MESSAGE, True, NodeDeviceConfigurationProto),
})
IntIntListEntryProto._fields.update({
    1: field("key", INT64), 2: field("value", INT64, True),
})
NodeDeviceConfigurationProto._fields.update({
    1: field("configuration_id", STRING), 2: field("sharding_spec", MESSAGE, True, ShardingSpecProto),
    3: field("pipeline_stage", INT32),
})
ShardingSpecProto._fields.update({
    1: field("tensor_name", STRING), 2: field("device", INT64, True),
    3: field("index_to_device_group_map", MESSAGE, True, IntIntListEntryProto),
    4: field("sharded_dim", MESSAGE, True, ShardedDimProto),
})
ShardedDimProto._fields.update({
    1: field("axis", INT64), 2: field("simple_sharding", MESSAGE, True, SimpleShardedDimProto),
})
SimpleShardedDimProto._fields.update({
    1: field("dim_value", INT64), 2: field("dim_param", STRING), 3: field("num_shards", INT64),
})
TrainingInfoProto._fields.update({
    1: field("initialization", MESSAGE, False, GraphProto), 2: field("algorithm", MESSAGE, False, GraphProto),
    3: field("initialization_binding", MESSAGE, True, StringStringEntryProto),
    4: field("update_binding", MESSAGE, True, StringStringEntryProto),
})
ModelProto._fields.update({
    1: field("ir_version", INT64), 2: field("producer_name", STRING), 3: field("producer_version", STRING),
    4: field("domain", STRING), 5: field("model_version", INT64), 6: field("doc_string", STRING),
    7: field("graph", MESSAGE, False, GraphProto), 8: field("opset_import", MESSAGE, True, OperatorSetIdProto),
    14: field("metadata_props", MESSAGE, True, StringStringEntryProto),
    20: field("training_info", MESSAGE, True, TrainingInfoProto),
    25: field("functions", MESSAGE, True, FunctionProto),
    26: field("configuration", MESSAGE, True, DeviceConfigurationProto),
})
DeviceConfigurationProto._fields.update({
    1: field("name", STRING), 2: field("num_devices", INT32), 3: field("device", STRING, True),
})
StringStringEntryProto._fields.update({
    1: field("key", STRING), 2: field("value", STRING),
})
TensorAnnotation._fields.update({
    1: field("tensor_name", STRING), 2: field("quant_parameter_tensor_names", MESSAGE, True, StringStringEntryProto),
})
GraphProto._fields.update({
    1: field("node", MESSAGE, True, NodeProto), 2: field("name", STRING),
    5: field("initializer", MESSAGE, True, TensorProto), 10: field("doc_string", STRING),
    11: field("input", MESSAGE, True, ValueInfoProto), 12: field("output", MESSAGE, True, ValueInfoProto),
    13: field("value_info", MESSAGE, True, ValueInfoProto),
    14: field("quantization_annotation", MESSAGE, True, TensorAnnotation),
    15: field("sparse_initializer", MESSAGE, True, SparseTensorProto),
    16: field("metadata_props", MESSAGE, True, StringStringEntryProto),
})
TensorProto_Segment._fields.update({
    1: field("begin", INT64), 2: field("end", INT64),
})
TensorProto._fields.update({
    1: field("dims", INT64, True), 2: field("data_type", INT32),
    3: field("segment", MESSAGE, False, TensorProto_Segment), 4: field("float_data", FLOAT, True),
    5: field("int32_data", INT32, True), 6: field("string_data", BYTES, True), 7: field("int64_data", INT64, True),
    8: field("name", STRING), 9: field("raw_data", BYTES), 10: field("double_data", DOUBLE, True),
    11: field("uint64_data", UINT64, True), 12: field("doc_string", STRING),
    13: field("external_data", MESSAGE, True, StringStringEntryProto),
    14: field("data_location", ENUM, False, _TENSORPROTO_DATALOCATION),
    16: field("metadata_props", MESSAGE, True, StringStringEntryProto),
})
SparseTensorProto._fields.update({
    1: field("values", MESSAGE, False, TensorProto), 2: field("indices", MESSAGE, False, TensorProto),
    3: field("dims", INT64, True),
})
TensorShapeProto_Dimension._fields.update({
    1: field("dim_value", INT64), 2: field("dim_param", STRING), 3: field("denotation", STRING),
})
TensorShapeProto._fields.update({
    1: field("dim", MESSAGE, True, TensorShapeProto_Dimension),
})
TypeProto_Tensor._fields.update({
    1: field("elem_type", INT32), 2: field("shape", MESSAGE, False, TensorShapeProto),
})
TypeProto_Sequence._fields.update({
    1: field("elem_type", MESSAGE, False, TypeProto),
})
TypeProto_Map._fields.update({
    1: field("key_type", INT32), 2: field("value_type", MESSAGE, False, TypeProto),
})
TypeProto_Optional._fields.update({
    1: field("elem_type", MESSAGE, False, TypeProto),
})
TypeProto_SparseTensor._fields.update({
    1: field("elem_type", INT32), 2: field("shape", MESSAGE, False, TensorShapeProto),
})
TypeProto_Opaque._fields.update({
    1: field("domain", STRING), 2: field("name", STRING),
})
TypeProto._fields.update({
    1: field("tensor_type", MESSAGE, False, TypeProto_Tensor),
    4: field("sequence_type", MESSAGE, False, TypeProto_Sequence),
    5: field("map_type", MESSAGE, False, TypeProto_Map), 7: field("opaque_type", MESSAGE, False, TypeProto_Opaque),
    8: field("sparse_tensor_type", MESSAGE, False, TypeProto_SparseTensor),
    9: field("optional_type", MESSAGE, False, TypeProto_Optional), 6: field("denotation", STRING),
})
OperatorSetIdProto._fields.update({
    1: field("domain", STRING), 2: field("version", INT64),
})
FunctionProto._fields.update({
    1: field("name", STRING), 4: field("input", STRING, True), 5: field("output", STRING, True),
    6: field("attribute", STRING, True), 7: field("node", MESSAGE, True, NodeProto), 8: field("doc_string", STRING),
    9: field("opset_import", MESSAGE, True, OperatorSetIdProto), 10: field("domain", STRING),
    11: field("attribute_proto", MESSAGE, True, AttributeProto),
    12: field("value_info", MESSAGE, True, ValueInfoProto), 13: field("overload", STRING),
    14: field("metadata_props", MESSAGE, True, StringStringEntryProto),
})

finish(
    AttributeProto, ValueInfoProto, NodeProto, IntIntListEntryProto, NodeDeviceConfigurationProto, ShardingSpecProto,
    ShardedDimProto, SimpleShardedDimProto, TrainingInfoProto, ModelProto, DeviceConfigurationProto,
    StringStringEntryProto, TensorAnnotation, GraphProto, TensorProto_Segment, TensorProto, SparseTensorProto,
    TensorShapeProto_Dimension, TensorShapeProto, TypeProto_Tensor, TypeProto_Sequence, TypeProto_Map,
    TypeProto_Optional, TypeProto_SparseTensor, TypeProto_Opaque, TypeProto, OperatorSetIdProto, FunctionProto,
)
# AttributeProto enum AttributeType
for _name, _value in {
    "UNDEFINED": 0, "FLOAT": 1, "INT": 2, "STRING": 3, "TENSOR": 4, "GRAPH": 5, "FLOATS": 6, "INTS": 7, "STRINGS": 8,
    "TENSORS": 9, "GRAPHS": 10, "SPARSE_TENSOR": 11, "SPARSE_TENSORS": 12, "TYPE_PROTO": 13, "TYPE_PROTOS": 14,
}.items():
    setattr(AttributeProto, _name, _value)
# TensorProto enum DataType
for _name, _value in {
    "UNDEFINED": 0, "FLOAT": 1, "UINT8": 2, "INT8": 3, "UINT16": 4, "INT16": 5, "INT32": 6, "INT64": 7, "STRING": 8,
    "BOOL": 9, "FLOAT16": 10, "DOUBLE": 11, "UINT32": 12, "UINT64": 13, "COMPLEX64": 14, "COMPLEX128": 15,
    "BFLOAT16": 16, "FLOAT8E4M3FN": 17, "FLOAT8E4M3FNUZ": 18, "FLOAT8E5M2": 19, "FLOAT8E5M2FNUZ": 20, "UINT4": 21,
    "INT4": 22, "FLOAT4E2M1": 23, "FLOAT8E8M0": 24, "UINT2": 25, "INT2": 26, "FLOAT6E2M3": 27, "FLOAT6E3M2": 28,
}.items():
    setattr(TensorProto, _name, _value)
# TensorProto enum DataLocation
for _name, _value in {"DEFAULT": 0, "EXTERNAL": 1}.items():
    setattr(TensorProto, _name, _value)


def decode_model(data: bytes) -> DecodedMessage | None:
    """The ModelProto in ``data``, or None when protobuf must parse it."""
    return decode_or_none(ModelProto, data)
