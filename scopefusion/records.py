"""Plain value classes that compare, hash and print as dataclasses do, without the cost of making one.

``@dataclass`` writes each method it adds (``__init__``, ``__repr__``, ``__eq__``, ``__hash__``, and for a
frozen class ``__setattr__`` and ``__delattr__``) as source text and compiles it when the class is made:
about a third of a millisecond per class, which a fresh process pays on its first conversion for each of
the few dozen classes a conversion uses. A :class:`Record` writes its own ``__init__`` and names its fields
in ``_fields``; the base adds, made once for every record class:

- ``__repr__``: ``Name(field=value!r, ...)`` over the fields not in ``_not_shown``, as a dataclass's;
- ``__eq__``: equal when ``other`` is of the same class and the fields not in ``_not_compared`` are equal
  (compared as tuples, as a dataclass's), else ``NotImplemented``;
- ``__hash__``: None (unhashable), as a dataclass's with ``eq`` and not ``frozen``.

:class:`FrozenRecord` hashes the compared fields' tuple, as a frozen dataclass does. It does not refuse
assignments: nothing assigns to its instances' fields once made.
"""

from __future__ import annotations

from typing import Any, ClassVar

__all__ = ["FrozenRecord", "Record"]


class Record:
    """A value class: see the module docstring."""

    _fields: ClassVar[tuple[str, ...]] = ()  # the fields, in the order __init__ takes them
    _not_shown: ClassVar[frozenset[str]] = frozenset()  # fields __repr__ leaves out
    _not_compared: ClassVar[frozenset[str]] = frozenset()  # fields __eq__ and __hash__ leave out
    _shown: ClassVar[tuple[str, ...]] = ()
    _compared: ClassVar[tuple[str, ...]] = ()

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        cls._shown = tuple(name for name in cls._fields if name not in cls._not_shown)
        cls._compared = tuple(name for name in cls._fields if name not in cls._not_compared)

    def _compared_values(self) -> tuple[Any, ...]:
        return tuple([getattr(self, name) for name in self._compared])

    def __repr__(self) -> str:
        shown = ", ".join(f"{name}={getattr(self, name)!r}" for name in self._shown)
        return f"{self.__class__.__qualname__}({shown})"

    def __eq__(self, other: object) -> bool:
        if other.__class__ is self.__class__:
            return self._compared_values() == other._compared_values()  # type: ignore[attr-defined]
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]


class FrozenRecord(Record):
    """A :class:`Record` hashed by its compared fields."""

    def __hash__(self) -> int:  # type: ignore[override]
        return hash(self._compared_values())
