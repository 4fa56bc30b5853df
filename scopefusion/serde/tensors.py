"""Tensors and types in GE's wire form: numpy arrays ⇄ ``TensorDef``, IR types ⇄ ``TensorDescriptor``.

Tensor data is GE's raw form (a large tensor's left out of the message while a writer streams it,
:mod:`scopefusion.serde.weight_stream`): C order, little-endian, with three special layouts:

* sub-byte types are packed, the first element in the lowest bits of a byte: 4-bit types
  (int4, float4_e2m1) two per byte, 2-bit types (int2, uint2) four per byte, uint1 eight per byte;
  6-bit floats keep one byte per element;
* bool is one byte per element (0 or 1; any non-zero byte reads as true);
* strings use GE's ``StringHead`` layout: one ``(int64 offset, int64 length)`` head per element,
  then each element's bytes followed by a NUL, offsets counted from the start of the data. String
  tensors read back as numpy object arrays of ``bytes`` (str elements are written as UTF-8).

A value's type becomes a descriptor: a :class:`TensorType` sets ``dtype``, ``shape`` (``-1`` unknown
dim, the lone ``-2`` unknown rank) and ``layout`` (the format). An unknown type (``None``) is a
descriptor with ``DT_UNDEFINED``. Any other IR type (element, list, tuple) is a ``DT_UNDEFINED``
descriptor carrying its structure in the reserved descriptor attribute ``_ir_type``.
"""

from __future__ import annotations

import sys
import weakref
from typing import cast

import numpy as np

from .. import dtypes as _dt
from ..dtypes import DType
from ..errors import SerdeError
from ..ir.types import ElementType, IRContext, ListType, TensorType, TupleType, Type
from . import ge_ir_pb2 as pb
from .weight_stream import defer_array

__all__ = [
    "IR_TYPE_ATTR",
    "array_from_tensor_def",
    "array_to_tensor_def",
    "dtype_from_ge",
    "tensor_desc_bytes",
    "tensor_type_from_desc",
    "tensor_type_to_desc",
    "value_type_from_desc",
    "value_type_to_desc",
]

IR_TYPE_ATTR = "_ir_type"

# Bits per element of the packed sub-byte types, by dtype name.
_PACKED_BITS = {"int4": 4, "float4_e2m1": 4, "int2": 2, "uint2": 2, "uint1": 1}
_HEAD = np.dtype([("offset", "<i8"), ("length", "<i8")])
_LIST_VT = pb.AttrDef.ListValue


# NOTE: handle types (dtypes.RESOURCE, dtypes.VARIANT, where defined) type values but hold no numpy
# elements, so ``dtypes.from_ge`` leaves them out; a descriptor may still carry them.
_HANDLE_DTYPES = {d.ge: d for d in (getattr(_dt, "RESOURCE", None), getattr(_dt, "VARIANT", None)) if d is not None}


def dtype_from_ge(code: int, where: str) -> DType:
    """The dtype of a GE ``DataType`` value; SerdeError when the IR has none for it."""
    dtype = _dt.from_ge(code) or _HANDLE_DTYPES.get(code)
    if dtype is None:
        known = pb.DataType.Name(code) if code in pb.DataType.values() else f"unknown value {code}"
        raise SerdeError(
            f"{where}: GE data type {known} has no IR element type; "
            "the model uses a data type scopefusion cannot hold"
        )
    return dtype


# ----------------------------------------------------------------------------- tensor data
def array_to_tensor_def(array: np.ndarray, tensor_def: pb.TensorDef, where: str) -> None:
    """Writes ``array`` (its dtype an IR dtype) into ``tensor_def``: descriptor and raw data."""
    dtype = _dt.from_numpy(array.dtype)
    if dtype is None:
        raise SerdeError(f"{where}: numpy dtype {array.dtype} has no GE data type; convert the tensor first")
    desc = tensor_def.desc
    desc.dtype = cast("pb.DataType", dtype.ge)
    desc.shape.dim.extend(array.shape)
    desc.layout = "ND"
    marker = defer_array(array) if _plain(dtype) else None
    tensor_def.data = marker if marker is not None else _encode(array, dtype, where)


def array_from_tensor_def(tensor_def: pb.TensorDef, where: str) -> np.ndarray:
    """The read-only array a ``TensorDef`` holds."""
    desc = tensor_def.desc
    dtype = dtype_from_ge(desc.dtype, where)
    if dtype.ge in _HANDLE_DTYPES:
        raise SerdeError(f"{where}: a constant tensor of handle type {dtype.name} has no data the IR can hold")
    shape = tuple(desc.shape.dim)
    if any(d < 0 for d in shape):
        raise SerdeError(f"{where}: a constant tensor has shape {list(shape)}, expected static dims (>= 0)")
    count = 1
    for d in shape:
        count *= d
    array = _decode(bytes(tensor_def.data), dtype, count, shape, where)
    array.flags.writeable = False
    return array


def _plain(dtype: DType) -> bool:
    """Whether the data of ``dtype`` is written as the array's own C-order bytes (bool is written as 0 or 1)."""
    return dtype.numpy.kind != "O" and dtype.name not in _PACKED_BITS and dtype.name != "bool"


def _encode(array: np.ndarray, dtype: DType, where: str) -> bytes:
    if dtype.numpy.kind == "O":
        return _encode_strings(array, where)
    flat = np.ascontiguousarray(array).reshape(-1)
    if dtype.name == "bool":
        return flat.astype(np.uint8).tobytes()
    bits = _PACKED_BITS.get(dtype.name)
    if bits is not None:
        return _pack(flat.view(np.uint8), bits)
    if sys.byteorder != "little" and flat.dtype.itemsize > 1:  # pragma: no cover - big-endian hosts
        flat = flat.byteswap()
    return flat.tobytes()


def _decode(data: bytes, dtype: DType, count: int, shape: tuple[int, ...], where: str) -> np.ndarray:
    if dtype.numpy.kind == "O":
        return _decode_strings(data, count, where).reshape(shape)
    bits = _PACKED_BITS.get(dtype.name)
    if bits is not None:
        expected = (count * bits + 7) // 8
    else:
        expected = count * dtype.itemsize
    if len(data) != expected:
        raise SerdeError(
            f"{where}: tensor data has {len(data)} bytes, expected {expected} for {dtype.name}{list(shape)}; "
            "the model is truncated or corrupt"
        )
    if dtype.name == "bool":
        return (np.frombuffer(data, np.uint8) != 0).reshape(shape)
    if bits is not None:
        return _unpack(data, bits, count).view(dtype.numpy).reshape(shape)
    flat = np.frombuffer(data, dtype.numpy, count)
    if sys.byteorder != "little" and flat.dtype.itemsize > 1:  # pragma: no cover - big-endian hosts
        flat = flat.byteswap()
    return flat.reshape(shape)


def _pack(codes: np.ndarray, bits: int) -> bytes:
    per_byte = 8 // bits
    codes = codes & ((1 << bits) - 1)
    pad = (-len(codes)) % per_byte
    if pad:
        codes = np.concatenate([codes, np.zeros(pad, np.uint8)])
    groups = codes.reshape(-1, per_byte).astype(np.uint8)
    shifts = np.arange(per_byte, dtype=np.uint8) * bits
    return np.bitwise_or.reduce(groups << shifts, axis=1).astype(np.uint8).tobytes()


def _unpack(data: bytes, bits: int, count: int) -> np.ndarray:
    per_byte = 8 // bits
    raw = np.frombuffer(data, np.uint8)
    shifts = np.arange(per_byte, dtype=np.uint8) * bits
    codes = (raw[:, None] >> shifts) & ((1 << bits) - 1)
    return np.ascontiguousarray(codes.reshape(-1)[:count].astype(np.uint8))


def _encode_strings(array: np.ndarray, where: str) -> bytes:
    items = []
    for item in array.reshape(-1).tolist():
        if isinstance(item, str):
            item = item.encode("utf-8", "surrogateescape")
        elif not isinstance(item, (bytes, bytearray)):
            raise SerdeError(f"{where}: a string tensor holds a {type(item).__name__}, expected str or bytes")
        items.append(bytes(item))
    heads = np.zeros(len(items), _HEAD)
    offset = len(items) * _HEAD.itemsize
    for i, item in enumerate(items):
        heads[i] = (offset, len(item))
        offset += len(item) + 1
    return heads.tobytes() + b"".join(item + b"\0" for item in items)


def _decode_strings(data: bytes, count: int, where: str) -> np.ndarray:
    head_bytes = count * _HEAD.itemsize
    if len(data) < head_bytes:
        raise SerdeError(
            f"{where}: string tensor data has {len(data)} bytes, too few for {count} string heads; "
            "the model is truncated or corrupt"
        )
    heads = np.frombuffer(data, _HEAD, count)
    out = np.empty(count, dtype=object)
    for i, (offset, length) in enumerate(heads.tolist()):
        if offset < head_bytes or length < 0 or offset + length > len(data):
            raise SerdeError(
                f"{where}: string {i} of a string tensor lies at bytes [{offset}, {offset + length}) "
                f"outside its {len(data)}-byte data; the model is corrupt"
            )
        out[i] = data[offset : offset + length]
    return out


# ----------------------------------------------------------------------------- types
def tensor_type_to_desc(t: TensorType, desc: pb.TensorDescriptor) -> None:
    """Sets ``desc``'s dtype, shape and layout from a tensor type."""
    desc.MergeFromString(tensor_desc_bytes(t))


def tensor_desc_bytes(t: TensorType) -> bytes:
    """The serialized descriptor of a tensor type (dtype, shape, layout); kept per type, which is immutable."""
    data = _DESC_BYTES.get(t)
    if data is None:
        desc = pb.TensorDescriptor()
        desc.dtype = cast("pb.DataType", t.dtype.ge)
        desc.shape.dim.extend(t.shape)
        desc.layout = t.format
        data = _DESC_BYTES[t] = desc.SerializeToString()
    return data


# NOTE: a model writes a descriptor per input and output of every op, mostly of a few types; merging the
# serialized descriptor of an (interned, immutable) type is about twice as fast as setting its fields.
_DESC_BYTES: "weakref.WeakKeyDictionary[TensorType, bytes]" = weakref.WeakKeyDictionary()


def tensor_type_from_desc(desc: pb.TensorDescriptor, context: IRContext, where: str) -> TensorType:
    """The tensor type a descriptor describes (layout ``""`` reads as ``ND``)."""
    dtype = dtype_from_ge(desc.dtype, where)
    try:
        return context.tensor(dtype, tuple(desc.shape.dim), desc.layout or "ND")
    except ValueError as e:
        raise SerdeError(f"{where}: invalid tensor descriptor ({e})") from None


def value_type_to_desc(t: Type | None, desc: pb.TensorDescriptor, where: str) -> None:
    """Describes a value's type (any IR type, or None for unknown) in a descriptor."""
    if t is None:
        return
    if isinstance(t, TensorType):
        tensor_type_to_desc(t, desc)
        return
    _structure_to_named(t, desc.attr[IR_TYPE_ATTR].func, where)


def value_type_from_desc(desc: pb.TensorDescriptor, context: IRContext, where: str) -> Type | None:
    """The value type a descriptor describes: a tensor type, a structured type, or None."""
    if IR_TYPE_ATTR in desc.attr:
        attr = desc.attr[IR_TYPE_ATTR]
        if attr.WhichOneof("value") != "func":
            raise SerdeError(f"{where}: descriptor attribute {IR_TYPE_ATTR!r} must hold named attributes (func)")
        return _structure_from_named(attr.func, context, where)
    if desc.dtype == pb.DT_UNDEFINED:
        return None
    return tensor_type_from_desc(desc, context, where)


# A structured type is a NamedAttrs tree: name = type kind, attrs = its parameters.
def _structure_to_named(t: Type, named: pb.NamedAttrs, where: str) -> None:
    if isinstance(t, TensorType):
        named.name = "tensor"
        tensor_type_to_desc(t, named.attr["type"].td)
    elif isinstance(t, ElementType):
        named.name = "element"
        named.attr["dtype"].dt = t.dtype.ge
    elif isinstance(t, ListType):
        named.name = "list"
        _structure_to_named(t.element, named.attr["element"].func, where)
    elif isinstance(t, TupleType):
        named.name = "tuple"
        elements = named.attr["elements"].list
        elements.val_type = _LIST_VT.VT_LIST_NAMED_ATTRS
        for element in t.elements:
            _structure_to_named(element, elements.na.add(), where)
    else:
        raise SerdeError(
            f"{where}: value type {t} ({type(t).__name__}) has no GE form; "
            "only tensor, element, list and tuple types can be serialized"
        )


def _structure_from_named(named: pb.NamedAttrs, context: IRContext, where: str) -> Type:
    kind = named.name

    def field(key: str, case: str):
        attr = named.attr.get(key)
        if attr is None or attr.WhichOneof("value") != case:
            raise SerdeError(f"{where}: structured type {kind!r} needs attribute {key!r} of case {case!r}")
        return getattr(attr, case)

    if kind == "tensor":
        return tensor_type_from_desc(field("type", "td"), context, where)
    if kind == "element":
        return context.element(dtype_from_ge(field("dtype", "dt"), where))
    if kind == "list":
        return context.list_of(_structure_from_named(field("element", "func"), context, where))
    if kind == "tuple":
        return context.tuple_of(_structure_from_named(na, context, where) for na in field("elements", "list").na)
    raise SerdeError(f"{where}: unknown structured type kind {kind!r}; expected tensor, element, list or tuple")
