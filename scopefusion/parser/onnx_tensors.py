"""ONNX ``TensorProto`` to numpy: raw data as zero-copy views, external data read safely.

``raw_data`` that :mod:`.wire` cut out of the mmap'd model, and external data in a file beside the model
(itself mmap'd), become read-only ``np.frombuffer`` views. Typed fields (``float_data``...) and packed
sub-byte types (int4, float4...) are decoded by ``onnx.numpy_helper`` (a copy; the ``onnx`` package is
imported for such a tensor only). An external ``location``
must stay inside the model's directory: an absolute path, ``..`` or a symlink that leaves it is refused.
"""

from __future__ import annotations

import mmap
import os
from typing import Any

import numpy as np

from ..errors import ModelLoadError, ParseError
from .message_decoder import DecodedMessage
from .onnx_model_decoder import TensorProto

__all__ = ["NUMPY_TYPES", "ExternalData", "onnx_numpy_dtype", "sparse_to_numpy", "tensor_to_numpy"]

_PACKED = {TensorProto.INT4, TensorProto.UINT4, TensorProto.FLOAT4E2M1, TensorProto.INT2, TensorProto.UINT2}
_EXTERNAL = TensorProto.EXTERNAL

# The numpy type of each ONNX element type, by TensorProto.DataType code, as the onnx package maps them
# (``onnx.helper.tensor_dtype_to_np_dtype``, checked by tests/parser/test_onnx_proto.py): a numpy type
# name, or ``ml_dtypes.<name>`` for the types of the ml_dtypes package (imported when first needed).
NUMPY_TYPES: dict[int, str] = {
    1: "float32", 2: "uint8", 3: "int8", 4: "uint16", 5: "int16", 6: "int32", 7: "int64", 8: "object",
    9: "bool", 10: "float16", 11: "float64", 12: "uint32", 13: "uint64", 14: "complex64", 15: "complex128",
    16: "ml_dtypes.bfloat16", 17: "ml_dtypes.float8_e4m3fn", 18: "ml_dtypes.float8_e4m3fnuz",
    19: "ml_dtypes.float8_e5m2", 20: "ml_dtypes.float8_e5m2fnuz", 21: "ml_dtypes.uint4", 22: "ml_dtypes.int4",
    23: "ml_dtypes.float4_e2m1fn", 24: "ml_dtypes.float8_e8m0fnu", 25: "ml_dtypes.uint2", 26: "ml_dtypes.int2",
    27: "ml_dtypes.float6_e2m3fn", 28: "ml_dtypes.float6_e3m2fn",
}  # fmt: skip
_NUMPY_DTYPES: dict[int, np.dtype] = {}  # NOTE: a pure cache of NUMPY_TYPES as numpy dtypes
_OBJECT = np.dtype(object)
_MAX_ELEMENTS = 1 << 40
_MAX_DENSE = 1 << 28


def onnx_numpy_dtype(code: int) -> np.dtype | None:
    """The numpy dtype of an ONNX element type code, or None for a code ONNX does not define."""
    found = _NUMPY_DTYPES.get(code)
    if found is not None:
        return found
    name = NUMPY_TYPES.get(code)
    if name is None:
        return None
    if name.startswith("ml_dtypes."):
        import ml_dtypes

        found = np.dtype(getattr(ml_dtypes, name.split(".", 1)[1]))
    else:
        found = np.dtype(name)
    _NUMPY_DTYPES[code] = found
    return found


class ExternalData:
    """Reads external tensor data relative to a model directory; each file is mmap'd once."""

    def __init__(self, base_dir: str, where: str) -> None:
        self.base_dir = os.path.realpath(base_dir)
        self.where = where
        self._maps: dict[str, Any] = {}

    def resolve(self, location: str, tensor: str) -> str:
        if not location:
            raise ModelLoadError(f"{self.where}: tensor {tensor!r} has external data without a location; the model is corrupt")
        if os.path.isabs(location) or location.startswith(("/", "\\")) or os.path.splitdrive(location)[0]:
            raise ModelLoadError(
                f"{self.where}: tensor {tensor!r} keeps its data at the absolute path {location!r}; external data "
                "must lie inside the model's directory, move the file beside the model"
            )
        full = os.path.realpath(os.path.join(self.base_dir, location))
        if os.path.commonpath([full, self.base_dir]) != self.base_dir:
            raise ModelLoadError(
                f"{self.where}: tensor {tensor!r} keeps its data at {location!r}, which leaves the model's directory "
                f"{self.base_dir}; external data must lie inside it"
            )
        return full

    def buffer(self, full: str, tensor: str):
        found = self._maps.get(full)
        if found is not None:
            return found
        if not os.path.isfile(full):
            raise ModelLoadError(f"{self.where}: tensor {tensor!r} keeps its data in {full}, which does not exist; copy it beside the model")
        with open(full, "rb") as f:
            size = os.fstat(f.fileno()).st_size
            data: Any = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) if size else b""
        self._maps[full] = data
        return data

    def view(self, tensor: Any, dtype: np.dtype, count: int, shape: tuple[int, ...]) -> np.ndarray:
        info = {e.key: e.value for e in tensor.external_data}
        full = self.resolve(info.get("location", ""), tensor.name)
        buf = self.buffer(full, tensor.name)
        try:
            offset = int(info.get("offset", "0"))
            length = int(info["length"]) if "length" in info else None
        except ValueError:
            raise ModelLoadError(f"{self.where}: tensor {tensor.name!r} has a non-numeric external offset or length") from None
        if length is None:
            length = len(buf) - offset
        if offset < 0 or length < 0 or offset + length > len(buf):
            raise ModelLoadError(
                f"{self.where}: tensor {tensor.name!r} reads bytes {offset}..{offset + length} of {full}, which has "
                f"{len(buf)} bytes; the external data file is truncated or belongs to another model"
            )
        if length != count * dtype.itemsize:
            raise ModelLoadError(
                f"{self.where}: tensor {tensor.name!r} of shape {list(shape)} needs {count * dtype.itemsize} bytes, its "
                f"external data holds {length}"
            )
        return _read_only(np.frombuffer(buf, dtype=dtype, count=count, offset=offset).reshape(shape))


def _read_only(array: np.ndarray) -> np.ndarray:
    array.flags.writeable = False
    return array


def tensor_to_numpy(
    tensor: Any,
    where: str,
    raw_view: tuple[Any, int, int] | None = None,
    external: ExternalData | None = None,
) -> np.ndarray:
    """Decodes an ONNX tensor (a ``TensorProto`` of :mod:`.proto.onnx_model_pb2` or of the onnx package);
    ``raw_view`` is ``(buffer, offset, length)`` of a cut ``raw_data``.

    Raises:
        ParseError: an unknown dtype or data that does not fit the dims.
        ModelLoadError: external data that is missing, outside the model directory, or too short.
    """
    name = tensor.name or "<unnamed>"
    data_type = tensor.data_type
    dtype = onnx_numpy_dtype(data_type)
    if dtype is None:
        raise ParseError(f"{where}: tensor {name!r} has unknown ONNX data type {data_type}; expected a TensorProto.DataType value")
    shape = tuple(tensor.dims)  # Python ints
    if shape and min(shape) < 0:
        raise ParseError(f"{where}: tensor {name!r} has negative dims {list(shape)}")
    count = 1
    for d in shape:
        count *= d
    if count > _MAX_ELEMENTS:
        raise ParseError(f"{where}: tensor {name!r} claims {count} elements")
    packed = data_type in _PACKED
    if tensor.data_location == _EXTERNAL:
        if external is None:
            raise ModelLoadError(f"{where}: tensor {name!r} has external data, which this model cannot have")
        if packed:
            raise ParseError(f"{where}: tensor {name!r} keeps packed sub-byte data externally, which is not supported")
        return external.view(tensor, dtype, count, shape)
    if (raw_view is not None or tensor.raw_data) and not packed and dtype != _OBJECT:
        if raw_view is not None:
            buffer, offset, length = raw_view
        else:
            buffer = tensor.raw_data
            offset, length = 0, len(buffer)
        if length != count * dtype.itemsize:
            raise ParseError(
                f"{where}: tensor {name!r} of shape {list(shape)} and type {dtype} needs {count * dtype.itemsize} bytes "
                f"of raw_data, found {length}"
            )
        return _read_only(np.frombuffer(buffer, dtype=dtype, count=count, offset=offset).reshape(shape))
    if data_type == TensorProto.STRING:
        # Strings stay bytes, as TensorFlow's string tensors do (numpy_helper would decode them).
        if len(tensor.string_data) != count:
            raise ParseError(f"{where}: tensor {name!r} holds {len(tensor.string_data)} strings, its dims {list(shape)} need {count}")
        array = np.empty(count, dtype=object)
        array[:] = list(tensor.string_data)
        return _read_only(array.reshape(shape))
    if raw_view is not None:
        buffer, offset, length = raw_view
        tensor = _copy_with_raw(tensor, bytes(memoryview(buffer)[offset:offset + length]))
    try:
        array = _typed_to_array(tensor)
    except Exception as exc:  # onnx raises assorted errors on inconsistent tensors
        raise ParseError(f"{where}: tensor {name!r} cannot be decoded ({type(exc).__name__}: {exc})") from None
    if array.shape != shape or array.size != count:
        raise ParseError(f"{where}: tensor {name!r} holds {array.size} values, its dims {list(shape)} need {count}")
    return _read_only(np.ascontiguousarray(array))


def _copy_with_raw(tensor: Any, raw: bytes) -> Any:
    if isinstance(tensor, DecodedMessage):  # a protobuf message of the same tensor, to be set
        from .proto import onnx_model_pb2

        copy = onnx_model_pb2.TensorProto.FromString(tensor.SerializeToString())
    else:
        copy = type(tensor)()
        copy.CopyFrom(tensor)
    copy.raw_data = raw
    return copy


def _typed_to_array(tensor: Any) -> np.ndarray:
    """``onnx.numpy_helper.to_array`` of the tensor, given as the onnx package's message (same bytes)."""
    import onnx
    from onnx import numpy_helper

    if not isinstance(tensor, onnx.TensorProto):
        tensor = onnx.TensorProto.FromString(tensor.SerializeToString())
    return numpy_helper.to_array(tensor)


def sparse_to_numpy(sparse, where: str, external: ExternalData | None = None) -> np.ndarray:
    """A ``SparseTensorProto`` as a dense read-only array."""
    values = tensor_to_numpy(sparse.values, where, None, external)
    indices = tensor_to_numpy(sparse.indices, where, None, external)
    shape = tuple(int(d) for d in sparse.dims)
    name = sparse.values.name or "<unnamed>"
    if any(d < 0 for d in shape) or int(np.prod(shape, dtype=np.float64)) > _MAX_DENSE:
        raise ParseError(f"{where}: sparse tensor {name!r} has dims {list(shape)}, negative or too large to densify")
    dense = np.zeros(shape, dtype=values.dtype)
    flat = dense.reshape(-1)
    n = values.shape[0] if values.ndim else 0
    try:
        if indices.ndim == 1:
            flat[indices.astype(np.int64)] = values
        elif indices.ndim == 2 and indices.shape == (n, len(shape)):
            flat[np.ravel_multi_index(tuple(indices.T.astype(np.int64)), shape)] = values
        else:
            raise ValueError(f"indices of shape {indices.shape}")
    except (ValueError, IndexError) as exc:
        raise ParseError(f"{where}: sparse tensor {name!r} has indices that do not fit dims {list(shape)} ({exc})") from None
    return _read_only(dense)
