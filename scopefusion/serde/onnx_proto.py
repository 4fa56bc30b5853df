"""The ONNX messages the exporter writes and the small constructors it builds them with, without the onnx package.

The messages are scopefusion's own (:mod:`scopefusion.parser.proto.onnx_model_pb2`): the same names, fields
and field numbers as the onnx package's, so a model serializes to the same bytes. The constructors make
what their namesakes in ``onnx.helper`` and ``onnx.numpy_helper`` make, for the values the exporter gives
them; a value outside those (a packed 4-bit array, an attribute of an unusual kind, a typed tensor of a
float8 type) goes to the onnx package's own function, imported then, and its result is read back as
scopefusion's message, errors included. Schemas of ONNX's default domain, the newest opset and IR version
come from the generated schema table (:mod:`scopefusion.dialects.onnx.schema_table`); ONNX's shape
inference (:func:`infer_shapes`) is the onnx package's, run on a copy of the model as its own messages.
tests/serde/test_onnx_proto.py checks each constructor against its namesake.
"""

from __future__ import annotations

import numbers
import sys
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np

from ..dialects.onnx.schema_table import SchemaView, latest_ir_version, latest_opset, min_ir_version, schema_at
from ..parser.onnx_tensors import NUMPY_TYPES, onnx_numpy_dtype
from ..parser.proto import onnx_model_pb2
from ..parser.proto.onnx_model_pb2 import (
    AttributeProto,
    FunctionProto,
    GraphProto,
    ModelProto,
    NodeProto,
    OperatorSetIdProto,
    SparseTensorProto,
    TensorProto,
    TypeProto,
    ValueInfoProto,
)

__all__ = [
    "AttributeProto",
    "FunctionProto",
    "GraphProto",
    "ModelProto",
    "NodeProto",
    "OperatorSetIdProto",
    "SparseTensorProto",
    "TensorProto",
    "TypeProto",
    "ValueInfoProto",
    "from_array",
    "from_onnx",
    "get_attribute_value",
    "get_schema",
    "infer_shapes",
    "ir_version",
    "make_attribute",
    "make_node",
    "make_opsetid",
    "make_tensor",
    "make_tensor_value_info",
    "min_ir_version_for",
    "np_dtype_to_tensor_dtype",
    "onnx_errors",
    "opset_version",
    "tensor_dtype_to_np_dtype",
    "to_array",
    "to_onnx",
]

_A = AttributeProto
_LITTLE = sys.byteorder == "little"
# Element types stored packed (several per byte) or as strings: never a plain raw-bytes view.
_NOT_PLAIN = frozenset((TensorProto.STRING, TensorProto.INT4, TensorProto.UINT4, TensorProto.FLOAT4E2M1,
                        TensorProto.INT2, TensorProto.UINT2, TensorProto.FLOAT6E2M3, TensorProto.FLOAT6E3M2))
# The typed field each plain element type's values go to (make_tensor without raw), and their numpy type there.
_TYPED_FIELDS: dict[int, tuple[str, str]] = {
    TensorProto.FLOAT: ("float_data", "float32"),
    TensorProto.DOUBLE: ("double_data", "float64"),
    TensorProto.INT64: ("int64_data", "int64"),
    TensorProto.INT32: ("int32_data", "int32"),
    TensorProto.INT16: ("int32_data", "int16"),
    TensorProto.INT8: ("int32_data", "int8"),
    TensorProto.UINT16: ("int32_data", "uint16"),
    TensorProto.UINT8: ("int32_data", "uint8"),
    TensorProto.UINT32: ("uint64_data", "uint32"),
    TensorProto.UINT64: ("uint64_data", "uint64"),
}


# ----------------------------------------------------------------------------- versions and schemas
def ir_version() -> int:
    """The newest IR version (``onnx.IR_VERSION`` of the onnx the schema table comes from)."""
    return latest_ir_version()


def opset_version() -> int:
    """The newest opset of ONNX's default domain (``onnx.defs.onnx_opset_version()``)."""
    return latest_opset()


def min_ir_version_for(opsets: Iterable[OperatorSetIdProto]) -> int:
    """``onnx.helper.find_min_ir_version_for(opsets, ignore_unknown=True)``."""
    return min_ir_version((o.domain, o.version) for o in opsets)


def get_schema(op_type: str, version: int, domain: str) -> SchemaView | None:
    """The schema ``onnx.defs.get_schema(op_type, version, domain)`` finds, as a
    :class:`~scopefusion.dialects.onnx.schema_table.SchemaView`, or None where it raises ``SchemaError``.
    The default domain's come from the schema table, another ONNX domain's (``ai.onnx.ml``...) from the
    onnx package; other domains have none."""
    if domain == "":
        return schema_at(op_type, version)
    if not domain.startswith("ai.onnx."):
        return None
    from onnx import defs

    from ..dialects.onnx.schema_table import schema_view

    try:
        return schema_view(defs.get_schema(op_type, version, domain))
    except defs.SchemaError:
        return None


# ----------------------------------------------------------------------------- messages
def make_opsetid(domain: str, version: int) -> OperatorSetIdProto:
    """``onnx.helper.make_opsetid``."""
    opset = OperatorSetIdProto()
    opset.domain = domain
    opset.version = version
    return opset


def make_node(op_type: str, inputs: Sequence[str], outputs: Sequence[str], name: str | None = None,
              doc_string: str | None = None, domain: str | None = None, **attrs: Any) -> NodeProto:
    """``onnx.helper.make_node`` (attributes in name order, None ones left out)."""
    node = NodeProto()
    node.op_type = op_type
    node.input.extend(inputs)
    node.output.extend(outputs)
    if name:
        node.name = name
    if doc_string:
        node.doc_string = doc_string
    if domain is not None:
        node.domain = domain
    if attrs:
        node.attribute.extend(make_attribute(k, v) for k, v in sorted(attrs.items()) if v is not None)
    return node


def make_tensor_value_info(name: str, elem_type: int, shape: Sequence[str | int | None] | None) -> ValueInfoProto:
    """``onnx.helper.make_tensor_value_info``: a tensor of ``elem_type``; each dim an int, a name or None
    (unknown); ``shape`` None for an unknown rank."""
    info = ValueInfoProto()
    info.name = name
    tensor = info.type.tensor_type
    tensor.elem_type = elem_type
    if shape is not None:
        dims = tensor.shape
        dims.SetInParent()
        for d in shape:
            dim = dims.dim.add()
            if d is None:
                pass
            elif isinstance(d, int):
                dim.dim_value = d
            elif isinstance(d, str):
                dim.dim_param = d
            else:
                raise ValueError(f"Invalid item in shape: {d}. Needs to be of int or str.")
    return info


def make_attribute(name: str, value: Any) -> AttributeProto:
    """``onnx.helper.make_attribute(name, value)``, the kind inferred from the value."""
    a = AttributeProto()
    a.name = name
    if isinstance(value, numbers.Integral):
        a.i, a.type = int(value), _A.INT
    elif isinstance(value, numbers.Real):
        a.f, a.type = float(value), _A.FLOAT
    elif isinstance(value, (str, bytes)):
        a.s, a.type = (value.encode("utf-8") if isinstance(value, str) else value), _A.STRING
    elif isinstance(value, TensorProto):
        a.t.CopyFrom(value)
        a.type = _A.TENSOR
    elif isinstance(value, SparseTensorProto):
        a.sparse_tensor.CopyFrom(value)
        a.type = _A.SPARSE_TENSOR
    elif isinstance(value, GraphProto):
        a.g.CopyFrom(value)
        a.type = _A.GRAPH
    elif isinstance(value, TypeProto):
        a.tp.CopyFrom(value)
        a.type = _A.TYPE_PROTO
    elif isinstance(value, Iterable) and not _foreign(value):
        items = list(value)
        if not items or any(_foreign(v) for v in items):
            return _onnx_make_attribute(name, value)
        if all(isinstance(v, numbers.Integral) for v in items):
            a.ints.extend(int(v) for v in items)
            a.type = _A.INTS
        elif all(isinstance(v, numbers.Real) for v in items):
            a.floats.extend(float(v) for v in items)
            a.type = _A.FLOATS
        elif all(isinstance(v, (str, bytes)) for v in items):
            a.strings.extend(v.encode("utf-8") if isinstance(v, str) else v for v in items)
            a.type = _A.STRINGS
        else:
            for cls, field, code in _MESSAGE_LISTS:
                if all(isinstance(v, cls) for v in items):
                    getattr(a, field).extend(items)
                    a.type = code
                    break
            else:
                return _onnx_make_attribute(name, value)
    else:
        return _onnx_make_attribute(name, value)
    return a


_MESSAGE_LISTS = (
    (TensorProto, "tensors", _A.TENSORS),
    (SparseTensorProto, "sparse_tensors", _A.SPARSE_TENSORS),
    (GraphProto, "graphs", _A.GRAPHS),
    (TypeProto, "type_protos", _A.TYPE_PROTOS),
)


def _onnx_make_attribute(name: str, value: Any) -> AttributeProto:
    """The onnx package's ``make_attribute`` (its errors too), for a value the native one does not classify."""
    from onnx import helper

    if isinstance(value, Iterable) and not isinstance(value, (str, bytes)) and not _foreign(value):
        value = [to_onnx(v) if _own_message(v) else v for v in value]
    return from_onnx(helper.make_attribute(name, to_onnx(value) if _own_message(value) else value))


def get_attribute_value(attr: AttributeProto) -> Any:
    """``onnx.helper.get_attribute_value``: the attribute's value (lists as lists, strings as bytes)."""
    if attr.ref_attr_name:
        raise ValueError(f"Cannot get value of reference attribute: {attr}")
    kind = attr.type
    field = _VALUE_FIELDS.get(kind)
    if field is not None:
        value = getattr(attr, field)
        return list(value) if kind in _LIST_KINDS else value
    if kind == _A.UNDEFINED:
        return None
    raise ValueError(f"Unsupported ONNX attribute: {attr}")


_VALUE_FIELDS = {
    _A.FLOAT: "f", _A.INT: "i", _A.STRING: "s", _A.TENSOR: "t", _A.SPARSE_TENSOR: "sparse_tensor", _A.GRAPH: "g",
    _A.TYPE_PROTO: "tp", _A.FLOATS: "floats", _A.INTS: "ints", _A.STRINGS: "strings", _A.TENSORS: "tensors",
    _A.SPARSE_TENSORS: "sparse_tensors", _A.GRAPHS: "graphs", _A.TYPE_PROTOS: "type_protos",
}  # fmt: skip
_LIST_KINDS = frozenset((_A.FLOATS, _A.INTS, _A.STRINGS, _A.TENSORS, _A.SPARSE_TENSORS, _A.GRAPHS, _A.TYPE_PROTOS))


# ----------------------------------------------------------------------------- tensors
def tensor_dtype_to_np_dtype(code: int) -> np.dtype:
    """``onnx.helper.tensor_dtype_to_np_dtype`` (KeyError for a code ONNX does not define)."""
    found = onnx_numpy_dtype(code)
    if found is None:
        raise KeyError(code)
    return found


_CODES: dict[np.dtype, int] = {}  # NOTE: a pure cache: numpy dtype -> ONNX element type, the plain numpy ones
_ML_CODES: dict[np.dtype, int] = {}  # the same for ml_dtypes' types, filled when one is first asked for


def np_dtype_to_tensor_dtype(np_dtype: np.dtype) -> int:
    """``onnx.helper.np_dtype_to_tensor_dtype`` (ValueError for a dtype ONNX has no element type for)."""
    if not _CODES:
        _CODES.update({np.dtype(name): code for code, name in NUMPY_TYPES.items() if not name.startswith("ml_dtypes.")})
    found = _CODES.get(np_dtype) if isinstance(np_dtype, np.dtype) else None
    if found is None and isinstance(np_dtype, np.dtype) and np_dtype.type.__module__.startswith("ml_dtypes"):
        if not _ML_CODES:
            _ML_CODES.update({onnx_numpy_dtype(code): code for code, name in NUMPY_TYPES.items()  # type: ignore[misc]
                              if name.startswith("ml_dtypes.")})
        found = _ML_CODES.get(np_dtype)
    if found is not None:
        return found
    if np.issubdtype(np_dtype, np.str_):
        return TensorProto.STRING
    raise ValueError(f"Unable to convert type {np_dtype!r} into TensorProto element type.")


def from_array(array: np.ndarray, name: str | None = None) -> TensorProto:
    """``onnx.numpy_helper.from_array``: strings as ``string_data``, numbers as their little-endian raw bytes
    (packed sub-byte types through the onnx package)."""
    tensor = TensorProto()
    if array.dtype == object or np.issubdtype(array.dtype, np.str_):
        items = array.flatten()
        if not all(isinstance(e, (str, bytes)) for e in items):
            return _onnx_from_array(array, name)
        tensor.dims.extend(array.shape)
        if name:
            tensor.name = name
        tensor.data_type = TensorProto.STRING
        tensor.string_data.extend(e.encode("utf-8") if isinstance(e, str) else e for e in items)
        return tensor
    code = np_dtype_to_tensor_dtype(array.dtype)
    if code in _NOT_PLAIN:
        return _onnx_from_array(array, name)
    tensor.dims.extend(array.shape)
    if name:
        tensor.name = name
    little = array.dtype.byteorder == "<" or (array.dtype.byteorder in "=|" and _LITTLE)
    tensor.raw_data = array.tobytes() if little else array.astype(array.dtype.newbyteorder("<")).tobytes()
    tensor.data_type = code
    return tensor


def _onnx_from_array(array: np.ndarray, name: str | None) -> TensorProto:
    from onnx import numpy_helper

    return from_onnx(numpy_helper.from_array(array, name))


def to_array(tensor: TensorProto) -> np.ndarray:
    """``onnx.numpy_helper.to_array`` of a tensor without external data (a read-only view of ``raw_data``
    for a plain element type; the rest through the onnx package)."""
    code = tensor.data_type
    if (_LITTLE and code not in _NOT_PLAIN and tensor.HasField("raw_data") and not tensor.HasField("segment")
            and tensor.data_location != TensorProto.EXTERNAL):
        dtype = onnx_numpy_dtype(code)
        if dtype is not None:
            return np.frombuffer(tensor.raw_data, dtype=dtype).reshape(tuple(tensor.dims))
    from onnx import numpy_helper

    return numpy_helper.to_array(to_onnx(tensor))


def make_tensor(name: str, data_type: int, dims: Sequence[int], vals: Any, raw: bool = False) -> TensorProto:
    """``onnx.helper.make_tensor``: ``vals`` in the typed field of ``data_type`` (raw bytes when ``raw``)."""
    typed = _TYPED_FIELDS.get(data_type)
    if (typed is None and data_type != TensorProto.BOOL) or (raw and not isinstance(vals, bytes)):
        from onnx import helper

        return from_onnx(helper.make_tensor(name, data_type, dims, vals, raw))
    tensor = TensorProto()
    tensor.data_type = data_type
    tensor.name = name
    tensor.dims.extend(dims)
    count = int(np.prod(dims, dtype=np.int64))
    if raw:
        size = count * tensor_dtype_to_np_dtype(data_type).itemsize
        if len(vals) != size:
            raise ValueError(f"Raw data size does not match tensor's size. Expected {size} bytes, but got {len(vals)} bytes.")
        tensor.raw_data = vals
        return tensor
    field, numpy_type = typed if typed is not None else ("int32_data", "bool")
    values = np.asarray(vals, dtype=numpy_type).flatten()
    if len(values) != count:
        raise ValueError(f"Number of values ({len(values)}) does not match tensor dimensions requiring {count} elements.")
    getattr(tensor, field).extend(values.astype(np.uint8) if numpy_type == "bool" else values)
    return tensor


# ----------------------------------------------------------------------------- the onnx package
def to_onnx(message: Any) -> Any:
    """``message`` (one of these messages) as the onnx package's message of the same name (imports onnx)."""
    import onnx

    return getattr(onnx, type(message).__name__).FromString(message.SerializeToString())


def from_onnx(message: Any) -> Any:
    """The onnx package's ``message`` as this module's message of the same name; one of ours as it is."""
    if _own_message(message):
        return message
    return getattr(onnx_model_pb2, type(message).__name__).FromString(message.SerializeToString())


def _own_message(value: Any) -> bool:
    return getattr(getattr(value, "DESCRIPTOR", None), "file", None) is onnx_model_pb2.DESCRIPTOR


def _foreign(value: Any) -> bool:
    """True for a message of another protobuf package (the onnx package's)."""
    return hasattr(value, "DESCRIPTOR") and hasattr(value, "SerializeToString") and not _own_message(value)


def onnx_errors() -> tuple[type[BaseException], ...]:
    """The onnx package's checker and inference errors, when it is loaded (else none can have been raised)."""
    onnx = sys.modules.get("onnx")
    if onnx is None:
        return ()
    return (onnx.checker.ValidationError, onnx.shape_inference.InferenceError)


def infer_shapes(model: ModelProto, data_prop: bool = False, own: bool = True) -> Any:
    """ONNX's shape inference (``onnx.shape_inference.infer_shapes``, imports onnx) of ``model``, or None
    when it fails. The model it returns is this module's message, or with ``own=False`` the onnx package's as
    inference gives it (the same fields, for reading only: not converted)."""
    import onnx

    try:
        inferred = onnx.shape_inference.infer_shapes(model.SerializeToString(), data_prop=data_prop)
    except (onnx.shape_inference.InferenceError, onnx.checker.ValidationError, RuntimeError, ValueError):
        return None
    return from_onnx(inferred) if own else inferred
