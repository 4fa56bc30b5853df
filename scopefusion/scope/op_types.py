"""Which op types a fusion result may name: the fused dialect's types, and for the inner nodes of a
many-to-many fusion also the source framework's ops.

The scope layer knows nothing of the IR, so :class:`KnownOpTypes` is built from plain names, or from any
op registry whose definitions carry ``name`` and ``dialect`` (:meth:`KnownOpTypes.from_op_registry`).
An unknown type is refused with the nearest known names, so a typo reads as one.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Callable, Iterable, Protocol

from ..parser.source_graph import SourceGraph

__all__ = ["FUSED_DIALECT", "KnownOpTypes", "OpDefinitionLike", "framework_dialect"]

FUSED_DIALECT = "fused"
_SUGGESTIONS = 3


class OpDefinitionLike(Protocol):
    """What :meth:`KnownOpTypes.from_op_registry` reads of an op definition."""

    @property
    def name(self) -> str: ...

    @property
    def dialect(self) -> str: ...


def framework_dialect(source: SourceGraph) -> str:
    """The dialect a source graph's own ops are built into (``onnx`` or ``tf``)."""
    return "onnx" if source.is_onnx else "tf"


class KnownOpTypes:
    """The fused op types a rule may produce, and the framework op types an inner node may have.

    Args:
        fused: the fused dialect's op types (unqualified: ``"LayerNorm"``).
        framework: the source framework's op types (unqualified), allowed for inner nodes only.
    """

    def __init__(self, fused: Iterable[str], framework: Iterable[str] = ()) -> None:
        self.fused = frozenset(fused)
        self.framework = frozenset(framework)

    @classmethod
    def from_op_registry(cls, ops: Iterable[OpDefinitionLike], dialect: str = "") -> KnownOpTypes:
        """The fused types of an op registry, and the types of its ``dialect`` (the framework's).

        A tuple (of ``(name, dialect)`` tuples, as :class:`~.manager.PassManager` keeps the names
        ``scopefusion.dialects.op_names`` gives) is read once per process: an equal tuple gives the same
        (unchangeable) object again, and the very tuple of the last call gives it without being read (the
        default op registries of one kind share one tuple of names: ``scopefusion.dialects.op_name_tuple``)."""
        if cls is KnownOpTypes and type(ops) is tuple and ops and isinstance(ops[0], tuple):
            for last_ops, last_dialect, last_known in _last_known_from_names:
                if last_ops is ops and last_dialect == dialect:
                    return last_known
            try:
                known = _known_from_names(ops, dialect)
            except TypeError:  # unhashable definitions
                pass
            else:
                _last_known_from_names[:] = [(ops, dialect, known)]
                return known
        return cls._from_defs(ops, dialect)

    @classmethod
    def _from_defs(cls, ops: Iterable[OpDefinitionLike], dialect: str) -> KnownOpTypes:
        defs = list(ops)
        return cls(
            (d.name for d in defs if d.dialect == FUSED_DIALECT),
            (d.name for d in defs if dialect and d.dialect == dialect),
        )

    @classmethod
    def from_predicate(cls, known: Callable[[str], bool]) -> _PredicateOpTypes:
        """A check that asks ``known(op_type)`` (no suggestions)."""
        return _PredicateOpTypes(known)

    def fused_refusal(self, op_type: str) -> str | None:
        """Why a fusion result of ``op_type`` is refused, or None when the type is known."""
        if op_type in self.fused:
            return None
        return f"unknown fused op type {op_type!r}; {self._nearest(op_type, self.fused)}"

    def inner_refusal(self, name: str, op_type: str) -> str | None:
        """Why an inner node ``name`` of ``op_type`` is refused, or None when the type is known."""
        if op_type in self.fused or op_type in self.framework:
            return None
        return (
            f"inner node {name!r} has type {op_type!r}, which is neither a fused op type nor an op of the "
            f"model's framework; {self._nearest(op_type, self.fused | self.framework)}"
        )

    @staticmethod
    def _nearest(op_type: str, names: frozenset[str]) -> str:
        if not names:
            return "no op types are defined; give the pass manager an op registry with the fused dialect"
        import difflib  # only to suggest names for a mistyped one

        near = difflib.get_close_matches(op_type, sorted(names), n=_SUGGESTIONS, cutoff=0.0)
        shown = " or ".join(repr(n) for n in near)
        return f"did you mean {shown}? Fix result.type, or define the op in the conversion's op registry"


# NOTE: a pure cache: (names, dialect, _known_from_names(names, dialect)) of the last tuple read (a tuple never changes)
_last_known_from_names: list[tuple[tuple[OpDefinitionLike, ...], str, KnownOpTypes]] = []


@lru_cache(maxsize=8)
def _known_from_names(names: tuple[OpDefinitionLike, ...], dialect: str) -> KnownOpTypes:
    return KnownOpTypes._from_defs(names, dialect)


class _PredicateOpTypes(KnownOpTypes):
    """The check of a plain predicate (``PassManager(known_types=...)``)."""

    def __init__(self, known: Callable[[str], bool]) -> None:
        super().__init__(())
        self._known = known

    def fused_refusal(self, op_type: str) -> str | None:
        if self._known(op_type):
            return None
        return f"fused op type {op_type!r} is not a known op type; register the op or fix the type"

    def inner_refusal(self, name: str, op_type: str) -> str | None:
        if self._known(op_type):
            return None
        return f"inner node {name!r} has type {op_type!r}, which is not a known op type"
