"""IR types, interned by an :class:`IRContext` (after seed 004's type system).

A type class (``ElementType``, ``TensorType``, ``ListType``, ``TupleType``) is registered in a context;
a type instance is made only through the context, which interns it: equal parameters give the same
object. So type equality is identity (``is``), hashing is by identity, and both cost O(1).

NOTE: interning key. Each class turns its constructor arguments into a hashable, canonical key
(``_key``); the context keeps one dict from ``(class, key)`` to the instance. A lookup of an existing
type is one tuple build and one dict hit, whatever the size of the context.
"""

from __future__ import annotations

import operator
from math import prod
from typing import Any, ClassVar, Iterable, NoReturn

import numpy as np

from ..dtypes import DType, from_numpy

__all__ = [
    "UNKNOWN_DIM",
    "UNKNOWN_RANK",
    "ElementType",
    "IRContext",
    "ListType",
    "TensorType",
    "TupleType",
    "Type",
]

UNKNOWN_DIM = -1
_NO_TYPE: Any = object()
_INT = frozenset({int})
UNKNOWN_RANK = -2

# Layout names that GE's TensorDescriptor.layout carries; "ND" is the neutral one.
FORMATS = frozenset(
    {"ND", "NCHW", "NHWC", "HWCN", "CHWN", "NCDHW", "NDHWC", "DHWCN", "NC1HWC0", "FRACTAL_Z", "FRACTAL_NZ", "NC", "NCL", "RESERVED"}
)


class Type:
    """Base of every IR type. Instances are immutable and unique per context."""

    __slots__ = ("_context", "__weakref__")
    _context: IRContext
    type_name: ClassVar[str] = "type"

    def __init__(self, context: "IRContext") -> None:
        object.__setattr__(self, "_context", context)

    def __setattr__(self, key: str, value: Any) -> None:
        raise AttributeError(f"{type(self).__name__} is immutable; make a new type through its IRContext")

    def __delattr__(self, key: str) -> None:
        raise AttributeError(f"{type(self).__name__} is immutable")

    # Identity equality and hashing are object's defaults; stated here for the reader.
    __eq__ = object.__eq__
    __hash__ = object.__hash__

    @property
    def context(self) -> "IRContext":
        return self._context

    def __copy__(self) -> "Type":
        return self

    def __deepcopy__(self, memo: dict[int, Any]) -> "Type":
        return self

    def __reduce__(self) -> NoReturn:
        raise TypeError("IR types are bound to their IRContext; serialize the graph instead of pickling a type")

    @classmethod
    def _key(cls, *args: Any, **kwargs: Any) -> tuple[Any, ...]:
        """The canonical, hashable parameters of an instance; every concrete type class defines it."""
        raise TypeError(f"type class {cls.__qualname__} defines no _key, so its instances cannot be interned")

    def isa(self, cls: type) -> bool:
        return isinstance(self, cls)


class ElementType(Type):
    """A scalar element type: one per :class:`~scopefusion.dtypes.DType` in a context."""

    __slots__ = ("dtype",)
    dtype: DType
    type_name = "element"

    def __init__(self, context: "IRContext", dtype: DType) -> None:
        super().__init__(context)
        object.__setattr__(self, "dtype", dtype)

    @classmethod
    def _key(cls, dtype: DType) -> tuple[Any, ...]:
        if not isinstance(dtype, DType):
            raise TypeError(f"ElementType needs a scopefusion.dtypes.DType, found {type(dtype).__name__} {dtype!r}")
        return (dtype,)

    @property
    def name(self) -> str:
        return self.dtype.name

    @property
    def ge_enum(self) -> int:
        return self.dtype.ge

    @property
    def numpy(self) -> np.dtype[Any]:
        return self.dtype.numpy

    def __repr__(self) -> str:
        return f"ElementType({self.dtype.name})"

    def __str__(self) -> str:
        return self.dtype.short


def _dim(dim: Any, shape: Iterable[Any]) -> int:
    """One dim as an int: Python and numpy integers are dims; floats, bools and anything else are not."""
    if isinstance(dim, (bool, np.bool_)):
        raise TypeError(f"shape {tuple(shape)!r}: dim {dim!r} is a bool; dims are integers")
    try:
        return operator.index(dim)
    except TypeError:
        raise TypeError(f"shape {tuple(shape)!r}: dim {dim!r} is a {type(dim).__name__}; dims are integers") from None


class TensorType(Type):
    """``TensorType(element, shape, format)``.

    ``shape`` is a tuple of dims, ``-1`` for an unknown dim; an unknown rank is the one-element
    shape ``(-2,)`` (GE's convention), exposed as ``rank is None``.

    NOTE: ``dtype``, ``rank``, ``is_static``, ``num_elements`` and ``nbytes`` are computed once when the
    type is made (an interned type is made once per context) and read as plain attributes.
    """

    __slots__ = ("element", "shape", "format", "dtype", "rank", "is_static", "num_elements", "nbytes")
    element: ElementType
    shape: tuple[int, ...]
    format: str
    dtype: DType
    rank: int | None
    is_static: bool
    num_elements: int | None
    nbytes: int | None
    type_name = "tensor"

    def __init__(self, context: "IRContext", element: ElementType, shape: tuple[int, ...], format: str) -> None:
        # Each field goes through its slot's own setter, as object.__setattr__ would set it, at a fraction
        # of the cost: a conversion makes every type of its graph anew in its own context.
        _set_context(self, context)
        rank = None if shape == (UNKNOWN_RANK,) else len(shape)
        is_static = rank is not None and (not shape or min(shape) >= 0)
        dtype = element.dtype
        _set_element(self, element)
        _set_shape(self, shape)
        _set_format(self, format)
        _set_dtype(self, dtype)
        _set_rank(self, rank)
        _set_is_static(self, is_static)
        if is_static:
            num_elements = prod(shape)
            _set_num_elements(self, num_elements)
            _set_nbytes(self, num_elements * dtype.itemsize)
        else:
            _set_num_elements(self, None)
            _set_nbytes(self, None)

    @classmethod
    def _key(cls, element: ElementType, shape: Iterable[int] | None, format: str = "ND") -> tuple[Any, ...]:
        if not isinstance(element, ElementType):
            raise TypeError(f"TensorType needs an ElementType, found {type(element).__name__} {element!r}")
        if shape is None:
            dims: tuple[int, ...] = (UNKNOWN_RANK,)
        else:
            dims = tuple(_dim(d, shape) for d in shape)
            if UNKNOWN_RANK in dims and dims != (UNKNOWN_RANK,):
                raise ValueError(f"shape {dims}: -2 (unknown rank) must be the only dim")
            if any(d < UNKNOWN_RANK for d in dims):
                raise ValueError(f"shape {dims}: dims must be >= 0, -1 (unknown dim) or a lone -2 (unknown rank)")
        if format not in FORMATS:
            raise ValueError(f"unknown tensor format {format!r}; known: {', '.join(sorted(FORMATS))}")
        return (element, dims, format)

    def with_shape(self, shape: Iterable[int] | None) -> "TensorType":
        return self._context.tensor(self.element, shape, self.format)

    def __repr__(self) -> str:
        return f"TensorType({self})"

    def __str__(self) -> str:
        if self.rank is None:
            dims = "*"
        else:
            dims = ",".join("?" if d == UNKNOWN_DIM else str(d) for d in self.shape)
        fmt = "" if self.format == "ND" else f" {self.format}"
        return f"{self.element}[{dims}]{fmt}"


# The setters of the slots of a TensorType (see TensorType.__init__).
_set_context = Type.__dict__["_context"].__set__
(_set_element, _set_shape, _set_format, _set_dtype, _set_rank, _set_is_static, _set_num_elements, _set_nbytes) = (
    TensorType.__dict__[name].__set__
    for name in ("element", "shape", "format", "dtype", "rank", "is_static", "num_elements", "nbytes")
)


class ListType(Type):
    """A homogeneous list of ``element`` (any IR type, nesting allowed)."""

    __slots__ = ("element",)
    element: Type
    type_name = "list"

    def __init__(self, context: "IRContext", element: Type) -> None:
        super().__init__(context)
        object.__setattr__(self, "element", element)

    @classmethod
    def _key(cls, element: Type) -> tuple[Any, ...]:
        if not isinstance(element, Type):
            raise TypeError(f"ListType needs an IR type, found {type(element).__name__}")
        return (element,)

    def __repr__(self) -> str:
        return f"ListType({self})"

    def __str__(self) -> str:
        return f"list<{self.element}>"


class TupleType(Type):
    """A fixed-length tuple of IR types (nesting allowed)."""

    __slots__ = ("elements",)
    elements: tuple[Type, ...]
    type_name = "tuple"

    def __init__(self, context: "IRContext", elements: tuple[Type, ...]) -> None:
        super().__init__(context)
        object.__setattr__(self, "elements", elements)

    @classmethod
    def _key(cls, elements: Iterable[Type]) -> tuple[Any, ...]:
        elems = tuple(elements)
        for e in elems:
            if not isinstance(e, Type):
                raise TypeError(f"TupleType needs IR types, found {type(e).__name__}")
        return (elems,)

    def __repr__(self) -> str:
        return f"TupleType({self})"

    def __str__(self) -> str:
        return "tuple<" + ", ".join(str(e) for e in self.elements) + ">"


class IRContext:
    """Owns the registered type classes and interns their instances.

    A context is an ordinary object: make a fresh one per test (the conversions of one thread share one). The
    builtin classes are registered by the constructor; ``register_type_class`` adds more and refuses duplicates.
    """

    __slots__ = ("_classes", "_interned", "_elements", "_arrays", "memo")

    def __init__(self) -> None:
        self._classes: dict[str, type[Type]] = {}
        self._interned: dict[tuple[Any, ...], Type] = {}
        self._elements: dict[DType, ElementType] = {}
        self._arrays: dict[tuple[np.dtype[Any], tuple[int, ...]], TensorType | None] = {}  # see array_type
        #: Answers other modules compute from single types, each table under its module's name: a type never
        #: changes, so an answer holds as long as the context (which the conversions of a thread share).
        self.memo: dict[str, dict[Any, Any]] = {}
        for cls in (ElementType, TensorType, ListType, TupleType):
            self.register_type_class(cls)

    def register_type_class(self, cls: type[Type]) -> None:
        """Registers a :class:`Type` subclass by its ``type_name``; a second class of one name is refused."""
        if not (isinstance(cls, type) and issubclass(cls, Type)):
            raise TypeError(f"register_type_class needs a Type subclass, found {cls!r}")
        known = self._classes.get(cls.type_name)
        if known is not None:
            raise ValueError(f"type class name {cls.type_name!r} is already registered (by {known.__qualname__})")
        self._classes[cls.type_name] = cls

    @property
    def type_classes(self) -> dict[str, type[Type]]:
        return dict(self._classes)

    def get(self, cls: type[Type], *args: Any, **kwargs: Any) -> Type:
        """The unique instance of ``cls`` with these parameters, made on first use."""
        raw = (cls, args) if not kwargs else None
        if raw is not None:
            try:
                found = self._interned.get(raw)
            except TypeError:  # unhashable arguments (a list shape): canonicalize below
                raw = None
            else:
                if found is not None:
                    return found
        if self._classes.get(cls.type_name) is not cls:
            raise ValueError(f"type class {cls.__qualname__} is not registered in this IRContext")
        key = (cls, cls._key(*args, **kwargs))
        found = self._interned.get(key)
        if found is None:
            found = cls(self, *key[1])
            self._interned[key] = found
        if raw is not None and raw != key:
            # NOTE: the arguments as given also key the instance, so the next identical call is one
            # dict hit. Only hashable argument tuples that canonicalized without error get here.
            self._interned[raw] = found
        return found

    # Shorthands for the builtin classes. ``element`` and ``tensor`` are the hot paths.
    def element(self, dtype: DType) -> ElementType:
        found = self._elements.get(dtype)
        if found is None:
            found = self.get(ElementType, dtype)  # type: ignore[assignment]
            self._elements[dtype] = found  # type: ignore[assignment]
        return found  # type: ignore[return-value]

    def tensor(self, element: ElementType | DType, shape: Iterable[int] | None, format: str = "ND") -> TensorType:
        if isinstance(element, DType):
            element = self.element(element)
        if type(shape) is tuple and format == "ND":
            # Fast path: an existing static-or-unknown-dim ND tensor type is one dict hit. A float dim
            # compares equal to an int one, so the hit counts only when the dims sum to an int.
            key = (TensorType, (element, shape, "ND"))
            found = self._interned.get(key)
            if found is not None:
                if type(sum(shape, 0)) is int:
                    return found  # type: ignore[return-value]
                TensorType._key(element, shape)  # refuses float and bool dims
            elif type(element) is ElementType and set(map(type, shape)) <= _INT and (not shape or min(shape) >= UNKNOWN_DIM):
                # A new type of plain int dims, each known or -1: these arguments are its canonical key.
                made = TensorType(self, element, shape, "ND")
                self._interned[key] = made
                return made
        elif type(shape) is tuple:  # the raw-argument cache in get() would accept equal float dims
            TensorType._key(element, shape, format)
        return self.get(TensorType, element, shape, format)  # type: ignore[return-value]

    def array_type(self, array: np.ndarray) -> TensorType | None:
        """The ``ND`` tensor type of a numpy array's dtype and shape, or None when its dtype has no IR element
        type; remembered by (numpy dtype, shape), as constants repeat them."""
        key = (array.dtype, array.shape)
        found = self._arrays.get(key, _NO_TYPE)
        if found is _NO_TYPE:
            dtype = from_numpy(array.dtype)
            found = self._arrays[key] = self.tensor(dtype, array.shape) if dtype is not None else None
        return found  # type: ignore[no-any-return]

    def list_of(self, element: Type) -> ListType:
        return self.get(ListType, element)  # type: ignore[return-value]

    def tuple_of(self, elements: Iterable[Type]) -> TupleType:
        return self.get(TupleType, tuple(elements))  # type: ignore[return-value]

    def interned_count(self) -> int:
        """The entries this context keeps to find its types again (at least one per type made): what it keeps
        alive grows with it."""
        return len(self._interned) + len(self._arrays)

    def __len__(self) -> int:
        """The number of distinct types made in this context."""
        return len(set(map(id, self._interned.values())))

    def __repr__(self) -> str:
        return f"IRContext({len(self._interned)} types, classes={sorted(self._classes)})"
