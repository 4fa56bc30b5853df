from scopefusion.parser.proto import tf_framework_pb2 as _tf_framework_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class BundleHeaderProto(_message.Message):
    __slots__ = ("num_shards", "endianness", "version")
    class Endianness(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
        __slots__ = ()
        LITTLE: _ClassVar[BundleHeaderProto.Endianness]
        BIG: _ClassVar[BundleHeaderProto.Endianness]
    LITTLE: BundleHeaderProto.Endianness
    BIG: BundleHeaderProto.Endianness
    NUM_SHARDS_FIELD_NUMBER: _ClassVar[int]
    ENDIANNESS_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    num_shards: int
    endianness: BundleHeaderProto.Endianness
    version: _tf_framework_pb2.VersionDef
    def __init__(self, num_shards: _Optional[int] = ..., endianness: _Optional[_Union[BundleHeaderProto.Endianness, str]] = ..., version: _Optional[_Union[_tf_framework_pb2.VersionDef, _Mapping]] = ...) -> None: ...

class BundleEntryProto(_message.Message):
    __slots__ = ("dtype", "shape", "shard_id", "offset", "size", "crc32c", "slices")
    DTYPE_FIELD_NUMBER: _ClassVar[int]
    SHAPE_FIELD_NUMBER: _ClassVar[int]
    SHARD_ID_FIELD_NUMBER: _ClassVar[int]
    OFFSET_FIELD_NUMBER: _ClassVar[int]
    SIZE_FIELD_NUMBER: _ClassVar[int]
    CRC32C_FIELD_NUMBER: _ClassVar[int]
    SLICES_FIELD_NUMBER: _ClassVar[int]
    dtype: _tf_framework_pb2.DataType
    shape: _tf_framework_pb2.TensorShapeProto
    shard_id: int
    offset: int
    size: int
    crc32c: int
    slices: _containers.RepeatedCompositeFieldContainer[TensorSliceProto]
    def __init__(self, dtype: _Optional[_Union[_tf_framework_pb2.DataType, str]] = ..., shape: _Optional[_Union[_tf_framework_pb2.TensorShapeProto, _Mapping]] = ..., shard_id: _Optional[int] = ..., offset: _Optional[int] = ..., size: _Optional[int] = ..., crc32c: _Optional[int] = ..., slices: _Optional[_Iterable[_Union[TensorSliceProto, _Mapping]]] = ...) -> None: ...

class TensorSliceProto(_message.Message):
    __slots__ = ("extent",)
    class Extent(_message.Message):
        __slots__ = ("start", "length")
        START_FIELD_NUMBER: _ClassVar[int]
        LENGTH_FIELD_NUMBER: _ClassVar[int]
        start: int
        length: int
        def __init__(self, start: _Optional[int] = ..., length: _Optional[int] = ...) -> None: ...
    EXTENT_FIELD_NUMBER: _ClassVar[int]
    extent: _containers.RepeatedCompositeFieldContainer[TensorSliceProto.Extent]
    def __init__(self, extent: _Optional[_Iterable[_Union[TensorSliceProto.Extent, _Mapping]]] = ...) -> None: ...

class TrackableObjectGraph(_message.Message):
    __slots__ = ("nodes",)
    class TrackableObject(_message.Message):
        __slots__ = ("children", "attributes")
        class ObjectReference(_message.Message):
            __slots__ = ("node_id", "local_name")
            NODE_ID_FIELD_NUMBER: _ClassVar[int]
            LOCAL_NAME_FIELD_NUMBER: _ClassVar[int]
            node_id: int
            local_name: str
            def __init__(self, node_id: _Optional[int] = ..., local_name: _Optional[str] = ...) -> None: ...
        class SerializedTensor(_message.Message):
            __slots__ = ("name", "full_name", "checkpoint_key")
            NAME_FIELD_NUMBER: _ClassVar[int]
            FULL_NAME_FIELD_NUMBER: _ClassVar[int]
            CHECKPOINT_KEY_FIELD_NUMBER: _ClassVar[int]
            name: str
            full_name: str
            checkpoint_key: str
            def __init__(self, name: _Optional[str] = ..., full_name: _Optional[str] = ..., checkpoint_key: _Optional[str] = ...) -> None: ...
        CHILDREN_FIELD_NUMBER: _ClassVar[int]
        ATTRIBUTES_FIELD_NUMBER: _ClassVar[int]
        children: _containers.RepeatedCompositeFieldContainer[TrackableObjectGraph.TrackableObject.ObjectReference]
        attributes: _containers.RepeatedCompositeFieldContainer[TrackableObjectGraph.TrackableObject.SerializedTensor]
        def __init__(self, children: _Optional[_Iterable[_Union[TrackableObjectGraph.TrackableObject.ObjectReference, _Mapping]]] = ..., attributes: _Optional[_Iterable[_Union[TrackableObjectGraph.TrackableObject.SerializedTensor, _Mapping]]] = ...) -> None: ...
    NODES_FIELD_NUMBER: _ClassVar[int]
    nodes: _containers.RepeatedCompositeFieldContainer[TrackableObjectGraph.TrackableObject]
    def __init__(self, nodes: _Optional[_Iterable[_Union[TrackableObjectGraph.TrackableObject, _Mapping]]] = ...) -> None: ...

class SaverDef(_message.Message):
    __slots__ = ("filename_tensor_name", "save_tensor_name", "restore_op_name", "max_to_keep", "sharded")
    FILENAME_TENSOR_NAME_FIELD_NUMBER: _ClassVar[int]
    SAVE_TENSOR_NAME_FIELD_NUMBER: _ClassVar[int]
    RESTORE_OP_NAME_FIELD_NUMBER: _ClassVar[int]
    MAX_TO_KEEP_FIELD_NUMBER: _ClassVar[int]
    SHARDED_FIELD_NUMBER: _ClassVar[int]
    filename_tensor_name: str
    save_tensor_name: str
    restore_op_name: str
    max_to_keep: int
    sharded: bool
    def __init__(self, filename_tensor_name: _Optional[str] = ..., save_tensor_name: _Optional[str] = ..., restore_op_name: _Optional[str] = ..., max_to_keep: _Optional[int] = ..., sharded: _Optional[bool] = ...) -> None: ...
