"""Scalar element types, shared by the frontends and the IR.

Each :class:`DType` is a frozen, process-wide constant (equal dtypes are one object)
naming its GE ``DataType`` enum value, its numpy dtype, and where they exist its
TensorFlow and ONNX enum values. Only GE data types that numpy (with ``ml_dtypes``)
can hold have a :class:`DType`.

NOTE: ``ml_dtypes`` (bfloat16, float8, int4...) is imported when one of its types first needs its numpy
dtype (``DType.numpy``, or ``from_numpy`` of a dtype not found otherwise), not with this module: a
model of float32 and int32 tensors does not pay for it.
"""

from __future__ import annotations

from typing import Iterator, NamedTuple

import numpy as np
from numpy.typing import DTypeLike

__all__ = [
    "DType",
    "all_dtypes",
    "from_ge",
    "from_numpy",
    "from_onnx",
    "from_tf",
    "by_name",
]


class _MlType(NamedTuple):
    """An ``ml_dtypes`` scalar type named by its attribute; ``ml_dtypes`` is imported when one is first needed."""

    attr: str
    floating: bool  # else an integer type


class DType:
    """One scalar element type; compare with ``is`` or ``==`` (identity)."""

    __slots__ = ("name", "ge", "_numpy", "_ml", "tf", "onnx", "short")
    name: str
    ge: int
    _numpy: np.dtype | None  # None until ml_dtypes is loaded, for its types
    _ml: _MlType | None
    tf: int | None
    onnx: int | None
    short: str

    def __init__(
        self, name: str, ge: int, numpy_dtype: DTypeLike | _MlType, tf: int | None, onnx: int | None, short: str
    ):
        object.__setattr__(self, "name", name)
        object.__setattr__(self, "ge", ge)
        ml = numpy_dtype if isinstance(numpy_dtype, _MlType) else None
        object.__setattr__(self, "_ml", ml)
        object.__setattr__(self, "_numpy", None if ml is not None else np.dtype(numpy_dtype))
        object.__setattr__(self, "tf", tf)
        object.__setattr__(self, "onnx", onnx)
        object.__setattr__(self, "short", short)

    def __setattr__(self, key, value):
        raise AttributeError(f"DType {self.name} is immutable")

    def __repr__(self) -> str:
        return f"DType({self.name})"

    def __str__(self) -> str:
        return self.short

    def __reduce__(self):
        return (by_name, (self.name,))

    @property
    def numpy(self) -> np.dtype:
        """The numpy dtype that holds this type's elements."""
        found = self._numpy
        return found if found is not None else _load_ml_dtypes()[self.name]

    @property
    def itemsize(self) -> int:
        """Bytes per element as numpy stores it (sub-byte types use one byte)."""
        return self.numpy.itemsize

    @property
    def is_floating(self) -> bool:
        if self._ml is not None:
            return self._ml.floating
        return self.numpy.kind in "fc"

    @property
    def is_integer(self) -> bool:
        if self._ml is not None:
            return not self._ml.floating
        return self.numpy.kind in "iu"


# name, GE enum, numpy dtype, TF DataType enum, ONNX TensorProto enum, short text form.
# Quantized GE types (QINT8...) are stored as their integer carrier; they map back to GE by name.
_TABLE = (
    ("float32", 1, np.float32, 1, 1, "f32"),
    ("float16", 2, np.float16, 19, 10, "f16"),
    ("int8", 3, np.int8, 6, 3, "i8"),
    ("uint8", 4, np.uint8, 4, 2, "u8"),
    ("int16", 5, np.int16, 5, 5, "i16"),
    ("uint16", 6, np.uint16, 17, 4, "u16"),
    ("int32", 7, np.int32, 3, 6, "i32"),
    ("int64", 8, np.int64, 9, 7, "i64"),
    ("uint32", 9, np.uint32, 22, 12, "u32"),
    ("uint64", 10, np.uint64, 23, 13, "u64"),
    ("bool", 11, np.bool_, 10, 9, "bool"),
    ("float64", 12, np.float64, 2, 11, "f64"),
    ("string", 13, np.object_, 7, 8, "str"),
    ("complex64", 16, np.complex64, 8, 14, "c64"),
    ("complex128", 17, np.complex128, 18, 15, "c128"),
    ("qint8", 18, np.int8, 11, None, "qi8"),
    ("qint16", 19, np.int16, 15, None, "qi16"),
    ("qint32", 20, np.int32, 13, None, "qi32"),
    ("quint8", 21, np.uint8, 12, None, "qu8"),
    ("quint16", 22, np.uint16, 16, None, "qu16"),
    ("bfloat16", 27, _MlType("bfloat16", True), 14, 16, "bf16"),
    ("int4", 28, _MlType("int4", False), 29, 22, "i4"),
    ("uint1", 29, _MlType("uint1", False), None, None, "u1"),
    ("int2", 30, _MlType("int2", False), 31, 26, "i2"),
    ("uint2", 31, _MlType("uint2", False), 32, 25, "u2"),
    ("complex32", 32, _MlType("complex32", True), None, None, "c32"),
    ("float8_e5m2", 34, _MlType("float8_e5m2", True), 24, 19, "f8e5m2"),
    ("float8_e4m3fn", 35, _MlType("float8_e4m3fn", True), 25, 17, "f8e4m3fn"),
    ("float8_e8m0", 36, _MlType("float8_e8m0fnu", True), None, 24, "f8e8m0"),
    ("float6_e3m2", 37, _MlType("float6_e3m2fn", True), None, None, "f6e3m2"),
    ("float6_e2m3", 38, _MlType("float6_e2m3fn", True), None, None, "f6e2m3"),
    ("float4_e2m1", 39, _MlType("float4_e2m1fn", True), None, 23, "f4e2m1"),
)

_BY_NAME: dict[str, DType] = {}
_BY_GE: dict[int, DType] = {}
_BY_TF: dict[int, DType] = {}
_BY_ONNX: dict[int, DType] = {}
_BY_NUMPY: dict[np.dtype, DType] = {}

for _row in _TABLE:
    _dt = DType(*_row)
    _BY_NAME[_dt.name] = _dt
    _BY_GE[_dt.ge] = _dt
    if _dt.tf is not None:
        _BY_TF[_dt.tf] = _dt
    if _dt.onnx is not None:
        _BY_ONNX[_dt.onnx] = _dt
    # The first (unquantized) dtype of a numpy dtype is its canonical DType (ml_dtypes' types: once loaded).
    if _dt._numpy is not None:
        _BY_NUMPY.setdefault(_dt._numpy, _dt)
del _row, _dt
_ML_NUMPY: dict[str, np.dtype] = {}  # NOTE: a pure cache: DType name -> numpy dtype, for ml_dtypes' types


def _load_ml_dtypes() -> dict[str, np.dtype]:
    """Imports ``ml_dtypes`` and gives its types their numpy dtypes (once); their numpy dtypes by name."""
    if _ML_NUMPY:
        return _ML_NUMPY
    import ml_dtypes

    for dt in _BY_GE.values():
        if dt._ml is not None:
            numpy_dtype = np.dtype(getattr(ml_dtypes, dt._ml.attr))
            object.__setattr__(dt, "_numpy", numpy_dtype)
            _BY_NUMPY.setdefault(numpy_dtype, dt)
            _ML_NUMPY[dt.name] = numpy_dtype
    return _ML_NUMPY


# TF reference dtypes (DT_FLOAT_REF = 101...) read as their value dtype.
for _code, _dt in list(_BY_TF.items()):
    _BY_TF[_code + 100] = _dt
del _code, _dt

FLOAT32 = _BY_NAME["float32"]
FLOAT16 = _BY_NAME["float16"]
FLOAT64 = _BY_NAME["float64"]
BFLOAT16 = _BY_NAME["bfloat16"]
INT8 = _BY_NAME["int8"]
INT16 = _BY_NAME["int16"]
INT32 = _BY_NAME["int32"]
INT64 = _BY_NAME["int64"]
UINT8 = _BY_NAME["uint8"]
BOOL = _BY_NAME["bool"]
STRING = _BY_NAME["string"]

__all__ += ["FLOAT32", "FLOAT16", "FLOAT64", "BFLOAT16", "INT8", "INT16", "INT32", "INT64", "UINT8", "BOOL", "STRING"]

# NOTE: handle types. TF's DT_RESOURCE and DT_VARIANT (GE DT_RESOURCE 23, DT_VARIANT 26) type the outputs of
# ops that make tensor arrays, tensor lists and variables. They hold no elements numpy can compute on, so
# they stay out of the lookup tables (``all_dtypes``, ``from_ge``, ``from_tf``, ``from_numpy``); these
# constants and ``by_name`` are the only ways to reach them.
RESOURCE = DType("resource", 23, np.object_, 20, None, "resource")
VARIANT = DType("variant", 26, np.object_, 21, None, "variant")
_BY_NAME["resource"] = RESOURCE
_BY_NAME["variant"] = VARIANT

__all__ += ["RESOURCE", "VARIANT"]


def all_dtypes() -> Iterator[DType]:
    """Every known dtype, in GE enum order."""
    return iter(sorted(_BY_GE.values(), key=lambda d: d.ge))


def by_name(name: str) -> DType:
    try:
        return _BY_NAME[name]
    except KeyError:
        raise KeyError(f"unknown dtype name {name!r}; known: {', '.join(sorted(_BY_NAME))}") from None


def from_ge(code: int) -> DType | None:
    """The dtype of a GE ``DataType`` enum value, or None when numpy cannot hold it."""
    return _BY_GE.get(code)


def from_tf(code: int) -> DType | None:
    """The dtype of a TensorFlow ``DataType`` enum value (``*_REF`` included), or None."""
    return _BY_TF.get(code)


def from_onnx(code: int) -> DType | None:
    """The dtype of an ONNX ``TensorProto.DataType`` value, or None."""
    return _BY_ONNX.get(code)


def from_numpy(dtype) -> DType | None:
    """The canonical dtype of a numpy dtype (bytes/str/object arrays read as string), or None."""
    dtype = np.dtype(dtype)
    if dtype.kind in "SUO":
        return STRING
    found = _BY_NUMPY.get(dtype)
    if found is None and not _ML_NUMPY:
        _load_ml_dtypes()
        found = _BY_NUMPY.get(dtype)
    return found
