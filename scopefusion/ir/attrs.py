"""Typed attribute values with copy semantics (after seed 000's GE AnyValue).

Every :class:`AttrValue` carries a type id (an :class:`AttrType`); code compares type ids by identity
(``value.type_id is LIST_INT``), never by switching over an enum. Values are immutable: scalars and
strings as they are, lists as tuples, tensors as read-only numpy arrays, named attributes as a frozen
mapping. The one mutable payload, a subgraph, is cloned when an attribute map is copied.

:class:`Attributes` is the attribute map an op, a graph or a tensor descriptor owns.
``get_all_attrs()`` returns a copy: setting an attribute afterwards does not show in the copy, and
editing the copy does not reach the owner. Read-only arrays are shared by both, never copied.
"""

from __future__ import annotations

import math
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Callable, Iterator, Mapping, cast

import numpy as np

from .. import dtypes as _dt
from ..dtypes import DType
from .types import TensorType, Type

if TYPE_CHECKING:  # pragma: no cover
    from .graph import Graph

__all__ = [
    "AttrType",
    "AttrValue",
    "Attributes",
    "NamedAttrs",
    "BOOL",
    "BYTES",
    "DTYPE",
    "FLOAT",
    "GRAPH",
    "INT",
    "LIST_BOOL",
    "LIST_BYTES",
    "LIST_DTYPE",
    "LIST_FLOAT",
    "LIST_GRAPH",
    "LIST_INT",
    "LIST_LIST_FLOAT",
    "LIST_LIST_INT",
    "LIST_NAMED_ATTRS",
    "LIST_STR",
    "LIST_TENSOR",
    "LIST_TENSOR_DESC",
    "NAMED_ATTRS",
    "STR",
    "TENSOR",
    "TENSOR_DESC",
    "BUILTIN_ATTR_TYPES",
    "frozen_array",
]

_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1


class AttrType:
    """A type id for attribute values: a name, a coercion that checks and freezes a payload, and a copier.

    Compared by identity. ``coerce(payload)`` returns the canonical immutable payload or raises
    ``TypeError``/``ValueError`` with what it found; ``copy(payload)`` returns the payload a copied
    attribute map holds (the payload itself for immutable ones).
    """

    __slots__ = ("name", "coerce", "copy")

    def __init__(self, name: str, coerce: Callable[[Any], Any], copy: Callable[[Any], Any] | None = None) -> None:
        self.name = name
        self.coerce = coerce
        self.copy = copy or _same

    def __repr__(self) -> str:
        return f"AttrType({self.name})"


def _same(x: Any) -> Any:
    return x


def frozen_array(array: Any) -> np.ndarray:
    """A read-only array: the array itself when already read-only, else a read-only copy."""
    if isinstance(array, np.ndarray):
        if not array.flags.writeable:
            return array
        out = array.copy()
    else:
        out = np.array(array)
    out.flags.writeable = False
    return out


# ----------------------------------------------------------------------------- coercions
def _int(x: Any) -> int:
    if isinstance(x, (bool, np.bool_)) or not isinstance(x, (int, np.integer)):
        raise TypeError(f"expected an int, found {type(x).__name__} {x!r}")
    x = int(x)
    if not _INT64_MIN <= x <= _INT64_MAX:
        raise ValueError(f"int {x} does not fit in int64")
    return int(x)


def _float(x: Any) -> float:
    if isinstance(x, (bool, np.bool_)) or not isinstance(x, (int, float, np.integer, np.floating)):
        raise TypeError(f"expected a float, found {type(x).__name__} {x!r}")
    return float(x)


def _bool(x: Any) -> bool:
    if not isinstance(x, (bool, np.bool_)):
        raise TypeError(f"expected a bool, found {type(x).__name__} {x!r}")
    return bool(x)


def _str(x: Any) -> str:
    if not isinstance(x, str):
        raise TypeError(f"expected a str, found {type(x).__name__} {x!r}")
    return x


def _bytes(x: Any) -> bytes:
    if not isinstance(x, (bytes, bytearray, memoryview)):
        raise TypeError(f"expected bytes, found {type(x).__name__}")
    return bytes(x)


def _dtype(x: Any) -> DType:
    if not isinstance(x, DType):
        raise TypeError(f"expected a scopefusion.dtypes.DType, found {type(x).__name__} {x!r}")
    return x


def _tensor(x: Any) -> np.ndarray:
    if not isinstance(x, np.ndarray):
        raise TypeError(f"expected a numpy array, found {type(x).__name__}")
    if _dt.from_numpy(x.dtype) is None:
        raise TypeError(f"numpy dtype {x.dtype} has no IR element type")
    return frozen_array(x)


# Numpy dtypes found to have an IR element type (a dtype that has one keeps it): see tensor_attr.
_TENSOR_DTYPES: set[np.dtype[Any]] = set()


def tensor_attr(array: np.ndarray) -> "AttrValue | None":
    """``AttrValue(TENSOR, array)`` for a numpy array, or None where that raises (a dtype with no IR element
    type); the dtype check is remembered per numpy dtype, as a model's constants share a few."""
    dtype = array.dtype
    if dtype not in _TENSOR_DTYPES:
        if _dt.from_numpy(dtype) is None:
            return None
        _TENSOR_DTYPES.add(dtype)
    return AttrValue._trusted(TENSOR, array if not array.flags.writeable else frozen_array(array))


def _tensor_desc(x: Any) -> TensorType:
    if not isinstance(x, TensorType):
        raise TypeError(f"expected an IR TensorType, found {type(x).__name__}")
    return x


def _graph(x: Any) -> "Graph":
    from .graph import Graph

    if not isinstance(x, Graph):
        raise TypeError(f"expected an IR Graph, found {type(x).__name__}")
    return x


def _clone_graph(g: "Graph") -> "Graph":
    return g.clone()


def _named(x: Any) -> "NamedAttrs":
    if not isinstance(x, NamedAttrs):
        raise TypeError(f"expected NamedAttrs, found {type(x).__name__}")
    return x


def _list_of(item: Callable[[Any], Any]) -> Callable[[Any], tuple[Any, ...]]:
    def coerce(xs: Any) -> tuple[Any, ...]:
        if isinstance(xs, (str, bytes, np.ndarray)) or not hasattr(xs, "__iter__"):
            raise TypeError(f"expected a list or tuple, found {type(xs).__name__}")
        out = []
        for i, x in enumerate(xs):
            try:
                out.append(item(x))
            except (TypeError, ValueError) as e:
                raise type(e)(f"item {i}: {e}") from None
        return tuple(out)

    return coerce


def _list_copy(item_copy: Callable[[Any], Any]) -> Callable[[tuple[Any, ...]], tuple[Any, ...]]:
    return lambda xs: tuple(item_copy(x) for x in xs)


INT = AttrType("int", _int)
FLOAT = AttrType("float", _float)
BOOL = AttrType("bool", _bool)
STR = AttrType("str", _str)
BYTES = AttrType("bytes", _bytes)
DTYPE = AttrType("dtype", _dtype)
TENSOR = AttrType("tensor", _tensor)
TENSOR_DESC = AttrType("tensor_desc", _tensor_desc)
NAMED_ATTRS = AttrType("named_attrs", _named)
GRAPH = AttrType("graph", _graph, _clone_graph)
LIST_INT = AttrType("list_int", _list_of(_int))
LIST_FLOAT = AttrType("list_float", _list_of(_float))
LIST_BOOL = AttrType("list_bool", _list_of(_bool))
LIST_STR = AttrType("list_str", _list_of(_str))
LIST_BYTES = AttrType("list_bytes", _list_of(_bytes))
LIST_DTYPE = AttrType("list_dtype", _list_of(_dtype))
LIST_TENSOR = AttrType("list_tensor", _list_of(_tensor))
LIST_TENSOR_DESC = AttrType("list_tensor_desc", _list_of(_tensor_desc))
LIST_NAMED_ATTRS = AttrType("list_named_attrs", _list_of(_named))
LIST_GRAPH = AttrType("list_graph", _list_of(_graph), _list_copy(_clone_graph))
LIST_LIST_INT = AttrType("list_list_int", _list_of(_list_of(_int)))
LIST_LIST_FLOAT = AttrType("list_list_float", _list_of(_list_of(_float)))

BUILTIN_ATTR_TYPES: tuple[AttrType, ...] = (
    INT, FLOAT, BOOL, STR, BYTES, DTYPE, TENSOR, TENSOR_DESC, NAMED_ATTRS, GRAPH,
    LIST_INT, LIST_FLOAT, LIST_BOOL, LIST_STR, LIST_BYTES, LIST_DTYPE, LIST_TENSOR, LIST_TENSOR_DESC,
    LIST_NAMED_ATTRS, LIST_GRAPH, LIST_LIST_INT, LIST_LIST_FLOAT,
)  # fmt: skip


class AttrValue:
    """An immutable attribute value: ``type_id`` (an :class:`AttrType`) and a canonical ``value``."""

    __slots__ = ("type_id", "value")
    type_id: AttrType
    value: Any

    def __init__(self, type_id: AttrType, value: Any) -> None:
        if not isinstance(type_id, AttrType):
            raise TypeError(f"AttrValue needs an AttrType as type id, found {type(type_id).__name__}")
        object.__setattr__(self, "type_id", type_id)
        object.__setattr__(self, "value", type_id.coerce(value))

    @classmethod
    def _trusted(cls, type_id: AttrType, value: Any) -> "AttrValue":
        """``AttrValue(type_id, value)`` for a value its type id's coercion would return as it is, made
        without the coercion: its fields go through their slots' own setters (below the class)."""
        out = _new_object(cls)
        _set_type_id(out, type_id)
        _set_value(out, value)
        return out

    def __setattr__(self, key: str, value: Any) -> None:
        raise AttributeError("AttrValue is immutable; set a new value on its owner")

    @classmethod
    def of(cls, x: Any) -> "AttrValue":
        """The attribute value of a plain Python value, its type id inferred.

        Empty lists are ambiguous: give the type id (``AttrValue(LIST_INT, ())``).
        """
        if isinstance(x, AttrValue):
            return x
        return cls(infer_attr_type(x), x)

    def copy(self) -> "AttrValue":
        """This value as a copied attribute map holds it: shared when immutable, cloned graphs otherwise."""
        if self.type_id.copy is _same:
            return self
        return AttrValue._trusted(self.type_id, self.type_id.copy(self.value))

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, AttrValue):
            return NotImplemented
        return self.type_id is other.type_id and values_equal(self.value, other.value)

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"AttrValue({self.type_id.name}, {self.value!r})"


# The setters of AttrValue's slots: object.__setattr__ on one of them comes to the same, at twice the cost.
_new_object = object.__new__
_set_type_id = AttrValue.__dict__["type_id"].__set__
_set_value = AttrValue.__dict__["value"].__set__


def infer_attr_type(x: Any) -> AttrType:
    """The builtin type id a plain Python value would have."""
    from .graph import Graph

    if isinstance(x, (bool, np.bool_)):
        return BOOL
    if isinstance(x, (int, np.integer)):
        return INT
    if isinstance(x, (float, np.floating)):
        return FLOAT
    if isinstance(x, str):
        return STR
    if isinstance(x, (bytes, bytearray)):
        return BYTES
    if isinstance(x, DType):
        return DTYPE
    if isinstance(x, np.ndarray):
        return TENSOR
    if isinstance(x, TensorType):
        return TENSOR_DESC
    if isinstance(x, NamedAttrs):
        return NAMED_ATTRS
    if isinstance(x, Graph):
        return GRAPH
    if isinstance(x, (list, tuple)):
        if not x:
            raise TypeError("an empty list has no inferable attribute type; give it, e.g. AttrValue(LIST_INT, ())")
        first = x[0]
        if isinstance(first, (list, tuple)):
            inner = {infer_attr_type(v) for row in x for v in row} or {INT}
            return LIST_LIST_FLOAT if FLOAT in inner else LIST_LIST_INT
        kinds = {infer_attr_type(v) for v in x}
        if kinds == {INT, FLOAT}:
            return LIST_FLOAT
        if len(kinds) != 1:
            raise TypeError(f"a list mixes attribute kinds {sorted(k.name for k in kinds)}; use one kind")
        return _LIST_OF[kinds.pop()]
    raise TypeError(f"no attribute type for a {type(x).__name__}")


_LIST_OF = {
    INT: LIST_INT, FLOAT: LIST_FLOAT, BOOL: LIST_BOOL, STR: LIST_STR, BYTES: LIST_BYTES, DTYPE: LIST_DTYPE,
    TENSOR: LIST_TENSOR, TENSOR_DESC: LIST_TENSOR_DESC, NAMED_ATTRS: LIST_NAMED_ATTRS, GRAPH: LIST_GRAPH,
}  # fmt: skip


def values_equal(a: Any, b: Any) -> bool:
    """Exact equality of attribute payloads: arrays by dtype, shape and bits; floats with NaN == NaN."""
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        if not (isinstance(a, np.ndarray) and isinstance(b, np.ndarray)):
            return False
        if a.dtype != b.dtype or a.shape != b.shape:
            return False
        if a.dtype == object:
            return all(x == y for x, y in zip(a.ravel().tolist(), b.ravel().tolist()))
        return a.tobytes() == b.tobytes()
    if isinstance(a, float) and isinstance(b, float):
        return a == b or (math.isnan(a) and math.isnan(b))
    if isinstance(a, tuple) and isinstance(b, tuple):
        return len(a) == len(b) and all(values_equal(x, y) for x, y in zip(a, b))
    from .graph import Graph

    if isinstance(a, Graph) and isinstance(b, Graph):
        from .compare import graphs_equal

        return graphs_equal(a, b)
    if isinstance(a, Type) and isinstance(b, Type):
        # Types of one context compare by identity; across contexts by parameters (as graphs do).
        from .compare import types_equal

        return types_equal(a, b)
    return type(a) is type(b) and a == b


class NamedAttrs:
    """GE's ``NamedAttrs``: a name and a frozen map of attribute values (attributes may nest)."""

    __slots__ = ("name", "attrs")
    name: str
    attrs: MappingProxyType[str, AttrValue]

    def __init__(self, name: str, attrs: Mapping[str, Any] | None = None) -> None:
        object.__setattr__(self, "name", _str(name))
        items = {str(k): AttrValue.of(v) for k, v in sorted((attrs or {}).items())}
        object.__setattr__(self, "attrs", MappingProxyType(items))

    def __setattr__(self, key: str, value: Any) -> None:
        raise AttributeError("NamedAttrs is immutable")

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, NamedAttrs):
            return NotImplemented
        return self.name == other.name and dict(self.attrs) == dict(other.attrs)

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"NamedAttrs({self.name!r}, {dict(self.attrs)!r})"


class Attributes:
    """An owner's attribute map with typed setters and getters and a copying ``get_all_attrs``."""

    __slots__ = ("_attrs", "_owner")

    def __init__(self, owner: str = "", attrs: Mapping[str, Any] | None = None) -> None:
        # NOTE: a node's map keeps the node here (no object of its own per node) and spells its owner only for
        # a message; any other owner is its description.
        self._owner: Any = owner
        self._attrs: dict[str, AttrValue] = {}
        for name, value in (attrs or {}).items():
            self.set_attr(name, value)

    @property
    def owner(self) -> str:
        """Whose attributes these are, as messages name it (``node 'x' (tf.Relu)``)."""
        owner = self._owner
        if type(owner) is str:
            return owner
        return f"node {owner.name!r} ({owner._dialect}.{owner._op_type})"

    def set_attr(self, name: str, value: Any, type_id: AttrType | None = None) -> None:
        """Sets ``name``; ``value`` is an :class:`AttrValue` or a payload (its type id given or inferred)."""
        if not isinstance(name, str) or not name:
            raise ValueError(f"{self.owner}: attribute names are non-empty strings, found {name!r}")
        if isinstance(value, AttrValue):
            if type_id is not None and value.type_id is not type_id:
                raise TypeError(f"{self.owner}: attribute {name!r} is {value.type_id.name}, expected {type_id.name}")
            self._attrs[name] = value
            return
        try:
            self._attrs[name] = AttrValue(type_id, value) if type_id is not None else AttrValue.of(value)
        except (TypeError, ValueError) as e:
            raise type(e)(f"{self.owner}: attribute {name!r}: {e}") from None

    def get_attr(self, name: str) -> AttrValue:
        try:
            return self._attrs[name]
        except KeyError:
            raise KeyError(f"{self.owner} has no attribute {name!r}; it has {sorted(self._attrs) or 'none'}") from None

    def get(self, name: str, default: Any = None) -> Any:
        """The payload of ``name``, or ``default`` when unset."""
        value = self._attrs.get(name)
        return default if value is None else value.value

    def has_attr(self, name: str) -> bool:
        return name in self._attrs

    def del_attr(self, name: str) -> None:
        self._attrs.pop(name, None)

    def get_all_attrs(self) -> dict[str, AttrValue]:
        """A copy of every attribute (copy semantics; immutable payloads are shared)."""
        return {name: value.copy() for name, value in self._attrs.items()}

    def names(self) -> list[str]:
        return list(self._attrs)

    def items(self) -> Iterator[tuple[str, AttrValue]]:
        """A live view for reading; do not keep it across mutations."""
        return iter(self._attrs.items())

    def __len__(self) -> int:
        return len(self._attrs)

    def __contains__(self, name: object) -> bool:
        return name in self._attrs

    def _typed(self, name: str, type_id: AttrType) -> Any:
        value = self.get_attr(name)
        if value.type_id is not type_id:
            raise TypeError(f"{self.owner}: attribute {name!r} is {value.type_id.name}, not {type_id.name}")
        return value.value

    def as_int(self, name: str) -> int:
        return cast(int, self._typed(name, INT))

    def as_float(self, name: str) -> float:
        return cast(float, self._typed(name, FLOAT))

    def as_bool(self, name: str) -> bool:
        return cast(bool, self._typed(name, BOOL))

    def as_str(self, name: str) -> str:
        return cast(str, self._typed(name, STR))

    def as_ints(self, name: str) -> tuple[int, ...]:
        return cast("tuple[int, ...]", self._typed(name, LIST_INT))

    def as_floats(self, name: str) -> tuple[float, ...]:
        return cast("tuple[float, ...]", self._typed(name, LIST_FLOAT))

    def as_tensor(self, name: str) -> np.ndarray:
        return cast(np.ndarray, self._typed(name, TENSOR))

    def as_dtype(self, name: str) -> DType:
        return cast(DType, self._typed(name, DTYPE))

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Attributes):
            return NotImplemented
        return self._attrs == other._attrs

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"Attributes({self.owner}: {sorted(self._attrs)})"
