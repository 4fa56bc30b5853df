"""The edge between the ``onnx`` dialect and the ``onnx`` package's protobuf messages.

ONNX's own inference and reference kernels speak ``NodeProto`` / ``TypeProto`` / ``TensorProto``; the IR
speaks :class:`~scopefusion.ir.opdef.InputInfo`, typed attribute payloads and numpy arrays. This
module converts between the two and nothing else. ``onnx`` is imported inside the functions, so importing
the dialect costs nothing until an op definition is built.

Attribute kinds: ONNX ``INT``/``FLOAT``/``STRING``/``INTS``/``FLOATS``/``STRINGS``/``TENSOR``/``GRAPH``
map to the IR's ``INT``/``FLOAT``/``STR``/``LIST_INT``/``LIST_FLOAT``/``LIST_STR``/``TENSOR``/``GRAPH``;
``TENSORS``/``GRAPHS`` to the list kinds; a sparse tensor is held dense (``TENSOR``); a type proto as a
``TENSOR_DESC``. ONNX strings are bytes: the IR holds them decoded as UTF-8 with ``surrogateescape``, so
any byte string survives the round trip.
"""

from __future__ import annotations

from typing import Any, Iterable, Sequence

import numpy as np

from ...dtypes import DType, from_onnx
from ...ir import attrs as A
from ...ir.attrs import AttrType
from ...ir.opdef import InputInfo
from .schema_table import data_type_code

__all__ = [
    "ATTR_TYPES",
    "attr_payload",
    "attribute_proto",
    "dtype_of_type_str",
    "input_type_proto",
    "node_proto",
    "tensor_proto",
    "type_proto_result",
    "wrapper_of",
]

# ONNX AttributeProto.AttributeType names -> IR attribute type ids.
ATTR_TYPES: dict[str, AttrType] = {
    "INT": A.INT,
    "FLOAT": A.FLOAT,
    "STRING": A.STR,
    "INTS": A.LIST_INT,
    "FLOATS": A.LIST_FLOAT,
    "STRINGS": A.LIST_STR,
    "TENSOR": A.TENSOR,
    "TENSORS": A.LIST_TENSOR,
    "GRAPH": A.GRAPH,
    "GRAPHS": A.LIST_GRAPH,
    "SPARSE_TENSOR": A.TENSOR,
    "SPARSE_TENSORS": A.LIST_TENSOR,
    "TYPE_PROTO": A.TENSOR_DESC,
    "TYPE_PROTOS": A.LIST_TENSOR_DESC,
}

# Sequence / optional wrappers of an input's TypeProto, decided from the schema's type strings.
TENSOR, SEQUENCE, OPTIONAL, OPTIONAL_SEQUENCE = "tensor", "seq", "optional", "optional_seq"


def _decode(b: bytes) -> str:
    return b.decode("utf-8", "surrogateescape")


def _encode(s: str) -> bytes:
    return s.encode("utf-8", "surrogateescape")


def dtype_of_type_str(type_str: str) -> DType | None:
    """The element dtype of an ONNX type string (``tensor(float)``, ``seq(tensor(int64))``), or None."""
    found = _TYPE_STR_DTYPES.get(type_str, _UNKNOWN)
    if found is not _UNKNOWN:
        return found  # type: ignore[return-value]
    inner = type_str
    while "(" in inner:
        inner = inner[inner.index("(") + 1 : inner.rindex(")")]
    code = data_type_code(inner.upper())
    found = _TYPE_STR_DTYPES[type_str] = None if code is None else from_onnx(code)
    return found


_UNKNOWN = object()
_TYPE_STR_DTYPES: dict[str, DType | None] = {}  # NOTE: a pure cache of dtype_of_type_str


def wrapper_of(type_strs: Iterable[str]) -> str:
    """How an input of these allowed types is wrapped: a plain tensor unless every type says otherwise."""
    kinds = set()
    for t in type_strs:
        if t.startswith("optional(seq("):
            kinds.add(OPTIONAL_SEQUENCE)
        elif t.startswith("optional("):
            kinds.add(OPTIONAL)
        elif t.startswith("seq("):
            kinds.add(SEQUENCE)
        else:
            kinds.add(TENSOR)
    return kinds.pop() if len(kinds) == 1 else TENSOR


# ----------------------------------------------------------------------------- attributes
def attr_payload(proto: Any) -> Any:
    """The IR payload of an ``AttributeProto`` (what an IR attribute of the mapped kind holds).

    Graph attributes have no payload here: the frontend builds bodies into IR graphs itself.
    """
    import onnx
    from onnx import numpy_helper

    T = onnx.AttributeProto
    kind = proto.type
    if kind == T.INT:
        return int(proto.i)
    if kind == T.FLOAT:
        return float(proto.f)
    if kind == T.STRING:
        return _decode(proto.s)
    if kind == T.INTS:
        return tuple(int(v) for v in proto.ints)
    if kind == T.FLOATS:
        return tuple(float(v) for v in proto.floats)
    if kind == T.STRINGS:
        return tuple(_decode(v) for v in proto.strings)
    if kind == T.TENSOR:
        return numpy_helper.to_array(proto.t)
    if kind == T.TENSORS:
        return tuple(numpy_helper.to_array(t) for t in proto.tensors)
    if kind == T.SPARSE_TENSOR:
        return _dense(proto.sparse_tensor)
    raise ValueError(f"attribute {proto.name!r} of kind {T.AttributeType.Name(kind)} has no plain payload")


def _dense(sparse: Any) -> np.ndarray:
    from onnx import numpy_helper

    values = numpy_helper.to_array(sparse.values)
    indices = numpy_helper.to_array(sparse.indices).astype(np.int64)
    dims = tuple(sparse.dims)
    out = np.zeros(dims, values.dtype)
    if indices.ndim == 1:  # linearized indices
        out.reshape(-1)[indices] = values
    else:
        out[tuple(indices.T)] = values
    return out


def attribute_proto(name: str, onnx_kind: str, payload: Any) -> Any:
    """An ``AttributeProto`` of ONNX kind ``onnx_kind`` (``"INTS"``...) from an IR payload."""
    import onnx
    from onnx import helper

    T = onnx.AttributeProto
    if onnx_kind == "INT":
        value: Any = payload.onnx if isinstance(payload, DType) else int(payload)
    elif onnx_kind == "FLOAT":
        value = float(payload)
    elif onnx_kind == "STRING":
        value = _encode(payload) if isinstance(payload, str) else bytes(payload)
    elif onnx_kind == "INTS":
        value = [int(v) for v in payload]
    elif onnx_kind == "FLOATS":
        value = [float(v) for v in payload]
    elif onnx_kind == "STRINGS":
        value = [_encode(v) if isinstance(v, str) else bytes(v) for v in payload]
    elif onnx_kind in ("TENSOR", "SPARSE_TENSOR"):
        # A sparse attribute is held dense in the IR and given to ONNX dense (``Constant`` accepts both).
        return helper.make_attribute(name, tensor_proto(np.asarray(payload), ""), attr_type=T.TENSOR)
    elif onnx_kind in ("TENSORS", "SPARSE_TENSORS"):
        return helper.make_attribute(name, [tensor_proto(np.asarray(p), "") for p in payload], attr_type=T.TENSORS)
    elif onnx_kind == "TYPE_PROTO":
        return helper.make_attribute(name, _tensor_type_proto(payload.dtype, _shape_of(payload)), attr_type=T.TYPE_PROTO)
    else:
        raise ValueError(f"attribute {name!r}: ONNX kind {onnx_kind} cannot be given to ONNX from the IR")
    return helper.make_attribute(name, value, attr_type=T.AttributeType.Value(onnx_kind))


def _shape_of(tensor_type: Any) -> tuple[int, ...] | None:
    return None if tensor_type.rank is None else tuple(tensor_type.shape)


def node_proto(
    op_type: str,
    present: Sequence[bool],
    num_outputs: int,
    attrs: dict[str, Any],
    attr_kinds: dict[str, str],
    domain: str = "",
) -> Any:
    """A one-node ``NodeProto``: inputs ``i0..`` (``""`` where absent), outputs ``o0..``, ONNX attributes.

    ``attrs`` maps names to IR payloads (None or a missing name: unset); only names in ``attr_kinds``
    (the schema's attributes with their ONNX kinds) are written.
    """
    from onnx import helper

    inputs = [f"i{i}" if here else "" for i, here in enumerate(present)]
    while inputs and inputs[-1] == "":
        inputs.pop()
    node = helper.make_node(op_type, inputs, [f"o{i}" for i in range(num_outputs)], domain=domain or None)
    for name in sorted(attr_kinds):
        payload = attrs.get(name)
        if payload is None or attr_kinds[name] in ("GRAPH", "GRAPHS"):
            continue
        node.attribute.append(attribute_proto(name, attr_kinds[name], payload))
    return node


# ----------------------------------------------------------------------------- types and tensors
def _tensor_type_proto(dtype: DType | None, shape: tuple[int, ...] | None) -> Any:
    import onnx

    t = onnx.TypeProto()
    t.tensor_type.elem_type = 0 if dtype is None or dtype.onnx is None else dtype.onnx
    if shape is not None:
        dims = t.tensor_type.shape.dim
        t.tensor_type.shape.SetInParent()
        for d in shape:
            dim = dims.add()
            if d >= 0:
                dim.dim_value = d
    return t


def input_type_proto(info: InputInfo, wrapper: str = TENSOR) -> Any:
    """The ``TypeProto`` ONNX inference sees for an IR input (unknown dims left unset)."""
    from onnx import helper

    t = _tensor_type_proto(info.dtype, info.shape)
    if wrapper == SEQUENCE:
        # A sequence travels in the IR as its element dtype with an unknown shape.
        return helper.make_sequence_type_proto(_tensor_type_proto(info.dtype, None))
    if wrapper == OPTIONAL:
        return helper.make_optional_type_proto(t)
    if wrapper == OPTIONAL_SEQUENCE:
        return helper.make_optional_type_proto(helper.make_sequence_type_proto(_tensor_type_proto(info.dtype, None)))
    return t


def type_proto_result(t: Any) -> tuple[tuple[int, ...] | None, DType | None]:
    """``(shape, dtype)`` of an inferred ``TypeProto``: unknown or symbolic dims are -1; a sequence or
    optional value gives its element dtype and, for a sequence, an unknown shape."""
    kind = t.WhichOneof("value")
    if kind == "sequence_type":
        _, dtype = type_proto_result(t.sequence_type.elem_type)
        return None, dtype
    if kind == "optional_type":
        return type_proto_result(t.optional_type.elem_type)
    if kind != "tensor_type":
        return None, None
    tt = t.tensor_type
    dtype = from_onnx(tt.elem_type) if tt.elem_type else None
    if not tt.HasField("shape"):
        return None, dtype
    return tuple(int(d.dim_value) if d.HasField("dim_value") else -1 for d in tt.shape.dim), dtype


def tensor_proto(array: np.ndarray, name: str) -> Any:
    from onnx import numpy_helper

    array = np.asarray(array)
    if array.dtype.kind in "SU":
        array = array.astype(object)
    return numpy_helper.from_array(array, name)
