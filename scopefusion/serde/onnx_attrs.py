"""IR attribute values to ONNX ``AttributeProto`` (the attribute half of :mod:`.onnx_export`).

Two ways to pick the ONNX attribute kind:

* **by schema** — an op of a domain ONNX knows (the default domain) has a schema at the export opset, and
  its attribute kinds decide (``Cast``'s ``to`` is an ``INT`` whatever the IR holds: a ``DType`` becomes its
  ONNX enum value);
* **by IR type id** — every other op (``tf``, ``scopefusion``, custom domains, attributes a schema does not
  declare) gets the kind its IR type id has in :data:`KIND_OF_TYPE`.

NOTE: IR attribute kinds that ONNX lacks. A ``bool`` is an ``INT`` 0/1 (ONNX's own convention); a dtype is
an ``INT`` holding the ONNX ``TensorProto.DataType`` value, or a ``STRING`` holding the IR dtype name when
ONNX has no such type (TF's ``qint8``, ``resource``); a list of lists (a TF ``list(shape)``) is ``TENSORS``,
one 1-D tensor per inner list (int64, or float64 for floats), so ragged lists survive. A function reference
(``NAMED_ATTRS``, TF's ``func``) has no ONNX form: where the IR holds its body (``node.subgraphs``) the body
is written as a ``GRAPH`` instead; otherwise it is a :class:`~scopefusion.errors.SerdeError`.

Graph attributes are not written here: the caller passes a ``write_body`` callable that turns an IR graph
into a ``GraphProto`` (it owns naming and outer-scope references); :func:`body_groups` tells which of a node's
bodies make which attribute.
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Any, Callable, Mapping, cast

import numpy as np

from ..dialects.onnx.schema_table import AttrView
from ..dtypes import DType
from ..errors import SerdeError
from ..ir import attrs as A
from ..ir.attrs import AttrType, AttrValue, values_equal
from ..ir.types import TensorType
from .onnx_proto import (
    AttributeProto,
    GraphProto,
    TensorProto,
    TypeProto,
    from_array,
    np_dtype_to_tensor_dtype,
    to_array,
)
from .weight_stream import active_weights, defer_array

if TYPE_CHECKING:  # pragma: no cover
    from ..ir.graph import Graph

__all__ = ["KIND_OF_TYPE", "attribute_proto", "body_groups", "initializer_array", "is_schema_default", "onnx_elem_type", "tensor_into", "tensor_proto", "type_proto"]

_K = AttributeProto


# IR attribute type id -> the ONNX attribute kind it takes when no schema says otherwise.
KIND_OF_TYPE: dict[AttrType, int] = {
    A.INT: _K.INT,
    A.FLOAT: _K.FLOAT,
    A.BOOL: _K.INT,
    A.STR: _K.STRING,
    A.BYTES: _K.STRING,
    A.DTYPE: _K.INT,
    A.TENSOR: _K.TENSOR,
    A.TENSOR_DESC: _K.TYPE_PROTO,
    A.GRAPH: _K.GRAPH,
    A.LIST_INT: _K.INTS,
    A.LIST_FLOAT: _K.FLOATS,
    A.LIST_BOOL: _K.INTS,
    A.LIST_STR: _K.STRINGS,
    A.LIST_BYTES: _K.STRINGS,
    A.LIST_DTYPE: _K.INTS,
    A.LIST_TENSOR: _K.TENSORS,
    A.LIST_TENSOR_DESC: _K.TYPE_PROTOS,
    A.LIST_GRAPH: _K.GRAPHS,
    A.LIST_LIST_INT: _K.TENSORS,
    A.LIST_LIST_FLOAT: _K.TENSORS,
}

WriteBody = Callable[[Any], GraphProto]


def attribute_proto(
    name: str,
    value: AttrValue,
    where: str,
    *,
    schema_kind: int | None = None,
    write_body: WriteBody | None = None,
) -> AttributeProto:
    """The ``AttributeProto`` of one IR attribute value.

    Args:
        name: the attribute name.
        value: the IR value.
        where: the node, for messages (``"node 'a' (onnx.Cast)"``).
        schema_kind: the kind the op's ONNX schema declares, or None to choose by IR type id.
        write_body: turns an IR graph into a ``GraphProto`` (needed for graph attributes).

    Raises:
        SerdeError: the value has no ONNX form, or does not fit the schema's kind.
    """
    kind = schema_kind if schema_kind is not None else KIND_OF_TYPE.get(value.type_id)
    if kind is None:
        hint = "a function reference whose body is not in the IR" if value.type_id in (A.NAMED_ATTRS, A.LIST_NAMED_ATTRS) else "this kind"
        raise SerdeError(
            f"{where}: attribute {name!r} is {value.type_id.name} ({hint}), which has no ONNX attribute form; "
            "drop the attribute or give the op a body before exporting to ONNX"
        )
    out = AttributeProto(name=name, type=cast("AttributeProto.AttributeType", kind))
    try:
        _fill(out, kind, value.value, write_body)
    except SerdeError:
        raise
    except (TypeError, ValueError, OverflowError) as e:
        expected = AttributeProto.AttributeType.Name(kind)
        raise SerdeError(
            f"{where}: attribute {name!r} ({value.type_id.name}) cannot be written as ONNX {expected} ({' '.join(str(e).split())}); "
            "fix the attribute's value or kind"
        ) from None
    return out


def _fill(out: AttributeProto, kind: int, payload: Any, write_body: WriteBody | None) -> None:
    if kind in (_K.INT, _K.INTS) and _foreign_dtypes(payload):
        # A dtype ONNX lacks: every dtype of the attribute as its IR name instead.
        kind = out.type = _K.STRING if kind == _K.INT else _K.STRINGS
        payload = payload.name if isinstance(payload, DType) else tuple(v.name for v in payload)
    if kind == _K.INT:
        out.i = _int(payload)
    elif kind == _K.FLOAT:
        out.f = _float(payload)
    elif kind == _K.STRING:
        out.s = _bytes(payload)
    elif kind == _K.INTS:
        _seq(payload)
        out.ints.extend(_int(v) for v in payload)
    elif kind == _K.FLOATS:
        _seq(payload)
        out.floats.extend(_float(v) for v in payload)
    elif kind == _K.STRINGS:
        _seq(payload)
        out.strings.extend(_bytes(v) for v in payload)
    elif kind in (_K.TENSOR, _K.SPARSE_TENSOR):
        # The IR holds sparse tensors dense; ONNX accepts a dense TENSOR wherever the IR got one from.
        out.type = _K.TENSOR
        out.t.CopyFrom(tensor_proto(_array(payload), ""))
    elif kind in (_K.TENSORS, _K.SPARSE_TENSORS):
        _seq(payload)
        out.type = _K.TENSORS
        out.tensors.extend(tensor_proto(_ragged(v), "") for v in payload)
    elif kind == _K.TYPE_PROTO:
        out.tp.CopyFrom(type_proto(_tensor_type(payload)))
    elif kind == _K.TYPE_PROTOS:
        _seq(payload)
        out.type_protos.extend(type_proto(_tensor_type(v)) for v in payload)
    elif kind in (_K.GRAPH, _K.GRAPHS):
        if write_body is None:
            raise SerdeError(f"graph attribute {out.name!r} needs a body writer; this is a bug in the ONNX exporter")
        if kind == _K.GRAPH:
            out.g.CopyFrom(write_body(payload))
        else:
            _seq(payload)
            out.graphs.extend(write_body(g) for g in payload)
    else:
        raise ValueError(f"ONNX kind {AttributeProto.AttributeType.Name(kind)} is not written by scopefusion")


def _foreign_dtypes(payload: Any) -> bool:
    items = payload if isinstance(payload, tuple) else (payload,)
    return any(isinstance(v, DType) and v.onnx is None for v in items)


def _seq(payload: Any) -> None:
    if not isinstance(payload, (tuple, list)):
        raise TypeError(f"expected a list, found {type(payload).__name__}")


def _int(v: Any) -> int:
    if isinstance(v, DType) and v.onnx is not None:
        return v.onnx
    if isinstance(v, (bool, np.bool_)):
        return int(v)
    if not isinstance(v, (int, np.integer)):
        raise TypeError(f"expected an int, found {type(v).__name__} {v!r}")
    return int(v)


def _float(v: Any) -> float:
    if isinstance(v, (bool, np.bool_)) or not isinstance(v, (int, float, np.integer, np.floating)):
        raise TypeError(f"expected a float, found {type(v).__name__} {v!r}")
    return float(v)


def _bytes(v: Any) -> bytes:
    if isinstance(v, str):
        return v.encode("utf-8", "surrogateescape")
    if isinstance(v, (bytes, bytearray, memoryview)):
        return bytes(v)
    raise TypeError(f"expected a string, found {type(v).__name__} {v!r}")


def _array(v: Any) -> np.ndarray:
    if not isinstance(v, np.ndarray):
        raise TypeError(f"expected a tensor, found {type(v).__name__}")
    return v


def _ragged(v: Any) -> np.ndarray:
    """A tensor, or one inner list of a list of lists as a 1-D tensor (int64, float64 for floats)."""
    if isinstance(v, np.ndarray):
        return v
    if isinstance(v, tuple):
        floats = any(isinstance(x, (float, np.floating)) for x in v)
        return np.asarray(v, dtype=np.float64 if floats else np.int64).reshape(-1)
    raise TypeError(f"expected a tensor or a list, found {type(v).__name__}")


def _tensor_type(v: Any) -> TensorType:
    if not isinstance(v, TensorType):
        raise TypeError(f"expected a tensor type, found {type(v).__name__}")
    return v


def tensor_proto(array: np.ndarray, name: str) -> TensorProto:
    """``array`` as a ``TensorProto`` named ``name`` (str arrays as ONNX strings)."""
    array = np.asarray(array)
    if array.dtype.kind in "SU":
        array = array.astype(object)
    if _raw_code(array) is not None:
        tensor = TensorProto()
        tensor_into(array, name, tensor)
        return tensor
    try:
        return from_array(array, name)
    except (TypeError, ValueError, KeyError) as e:
        raise SerdeError(f"tensor {name or '(attribute)'!r} of numpy dtype {array.dtype} has no ONNX form ({e})") from None


def tensor_into(array: np.ndarray, name: str, target: TensorProto) -> None:
    """Fills the empty ``target`` as :func:`tensor_proto` makes it, writing a plain numeric array's bytes
    straight into it instead of into a message that is then copied; while a writer streams the model, a
    large array's bytes are left out (:mod:`.weight_stream`)."""
    array = np.asarray(array)
    code = _raw_code(array)
    if code is None:
        target.CopyFrom(tensor_proto(array, name))
        return
    target.dims.extend(array.shape)
    if name:
        target.name = name
    if array.dtype.byteorder == ">" or (sys.byteorder == "big" and array.dtype.byteorder == "="):
        array = array.astype(array.dtype.newbyteorder("<"))
    marker = defer_array(array)
    target.raw_data = marker if marker is not None else array.tobytes()
    target.data_type = code


def initializer_array(tensor: TensorProto) -> np.ndarray:
    """The values of an initializer, also one whose bytes a streaming writer left out."""
    weights = active_weights()
    if weights is not None and tensor.data_location != TensorProto.EXTERNAL and tensor.HasField("raw_data"):
        found = weights.array(tensor.raw_data)
        if found is not None:
            return found
    return to_array(tensor)


def _raw_code(array: np.ndarray) -> int | None:
    """The ONNX element type of an array ``from_array`` writes as its raw bytes, else None."""
    dtype = array.dtype
    try:
        return _RAW_CODES[dtype]
    except KeyError:
        pass
    if dtype.kind in "OSU":
        code = None
    else:
        try:
            code = np_dtype_to_tensor_dtype(dtype)
        except (TypeError, ValueError, KeyError):
            code = None
    _RAW_CODES[dtype] = code = None if code in _PACKED else code
    return code


_RAW_CODES: dict[np.dtype, int | None] = {}  # by numpy dtype, found once


# Element types from_array packs (sub-byte and 6-bit codes): written through tensor_proto.
_PACKED = frozenset((TensorProto.INT4, TensorProto.UINT4, TensorProto.FLOAT4E2M1, TensorProto.UINT2, TensorProto.INT2,
                     TensorProto.FLOAT6E2M3, TensorProto.FLOAT6E3M2))


def type_proto(t: TensorType | None, dim_params: tuple[str, ...] = ()) -> TypeProto:
    """The ``TypeProto`` of an IR tensor type: unknown dims unset (or named by ``dim_params``), unknown
    rank without a shape, unknown or ONNX-less dtype as ``UNDEFINED``."""
    out = TypeProto()
    type_into(out, t, dim_params)
    return out


def type_into(target: TypeProto, t: TensorType | None, dim_params: tuple[str, ...] = ()) -> None:
    """Fills the empty ``target`` as :func:`type_proto` makes it."""
    tensor = target.tensor_type
    tensor.elem_type = onnx_elem_type(t.dtype) if t is not None else 0
    if t is not None and t.rank is not None:
        shape = tensor.shape
        shape.SetInParent()
        add = shape.dim.add
        for i, d in enumerate(t.shape):
            if d >= 0:
                add().dim_value = d
            elif i < len(dim_params) and dim_params[i]:
                add().dim_param = dim_params[i]
            else:
                add()


def onnx_elem_type(dtype: DType | None) -> int:
    """The ONNX element type of an IR dtype; quantized TF types as their integer carrier; 0 when none."""
    if dtype is None:
        return 0
    if dtype.onnx is not None:
        return dtype.onnx
    from ..dtypes import from_numpy

    carrier = from_numpy(dtype.numpy) if dtype.numpy.kind != "O" else None
    return carrier.onnx if carrier is not None and carrier.onnx is not None else 0


def is_schema_default(value: AttrValue, schema_attr: AttrView) -> bool:
    """True when ``value`` equals the schema attribute's default (so writing it changes nothing)."""
    if not schema_attr.default:
        return False
    expected = schema_attr.default[0]
    payload = value.value
    if isinstance(payload, DType):
        payload = payload.onnx
    if isinstance(payload, float) or isinstance(expected, float):
        return isinstance(payload, (int, float)) and np.float32(payload) == np.float32(expected)
    return values_equal(payload, expected)


def body_groups(subgraphs: Mapping[str, "Graph"], where: str) -> dict[str, "Graph | list[Graph]"]:
    """A node's bodies (``node.subgraphs``) as its attributes: ``key`` → a graph (``GRAPH``), ``key:0``,
    ``key:1``… → a list of graphs (``GRAPHS``); ``where`` names the node in the error."""
    out: dict[str, Any] = {}
    lists: dict[str, dict[int, Graph]] = {}
    for key, body in subgraphs.items():
        base, sep, index = key.rpartition(":")
        if sep and index.isdigit():
            lists.setdefault(base, {})[int(index)] = body
        else:
            out[key] = body
    for base, items in lists.items():
        if base in out or sorted(items) != list(range(len(items))):
            raise SerdeError(
                f"{where}: bodies {', '.join(f'{base}:{i}' for i in sorted(items))} do not form one list "
                f"{base}:0..{len(items) - 1}; fix the node's subgraph keys"
            )
        out[base] = [items[i] for i in range(len(items))]
    return out
