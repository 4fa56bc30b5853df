"""The lowering registry: TF op type → lowering function; an ordinary object, fresh per use."""

from __future__ import annotations

from typing import TYPE_CHECKING, Callable, Iterable

from ...errors import SerdeError

if TYPE_CHECKING:  # pragma: no cover
    from .emitter import LoweringEmitter

__all__ = ["Lowering", "LoweringRegistry", "default_lowerings"]

Lowering = Callable[["LoweringEmitter"], None]


class LoweringRegistry:
    """Lowerings by ``tf`` op type (``"Conv2D"``, no dialect)."""

    def __init__(self, lowerings: Iterable[tuple[str, Lowering]] = ()) -> None:
        self._lowerings: dict[str, Lowering] = {}
        for op_type, fn in lowerings:
            self.register(op_type, fn)

    def register(self, op_type: str, lowering: Lowering, *, replace: bool = False) -> None:
        """Maps TF op type ``op_type`` to ``lowering``.

        Raises:
            SerdeError: the type has a lowering already and ``replace`` is False, or the name has a dialect.
        """
        if not op_type or "." in op_type:
            raise SerdeError(f"tf op type {op_type!r}: give the plain type (\"Conv2D\"), without the dialect")
        if op_type in self._lowerings and not replace:
            raise SerdeError(f"tf op type {op_type!r} has an ONNX lowering already; pass replace=True to replace it")
        self._lowerings[op_type] = lowering

    def get(self, op_type: str) -> Lowering | None:
        return self._lowerings.get(op_type)

    def types(self) -> list[str]:
        return sorted(self._lowerings)

    def __contains__(self, op_type: object) -> bool:
        return op_type in self._lowerings

    def __len__(self) -> int:
        return len(self._lowerings)


_BUILTIN: dict[str, Lowering] = {}  # the builtin lowerings, gathered once (each registry gets its own copy)


def default_lowerings() -> LoweringRegistry:
    """A fresh registry holding every builtin lowering."""
    if not _BUILTIN:
        _BUILTIN.update(_builtin_lowerings()._lowerings)
    registry = LoweringRegistry()
    registry._lowerings = dict(_BUILTIN)
    return registry


def _builtin_lowerings() -> LoweringRegistry:
    from . import (
        array,
        compositions,
        control,
        conv_transpose,
        detection,
        elementwise,
        misc,
        nn,
        random_ops,
        reduce,
        resize,
        shapes,
        slicing,
        space_batch,
        tensor_lists,
    )

    registry = LoweringRegistry()
    for family in (elementwise, compositions, nn, conv_transpose, resize, detection, array, space_batch, slicing, shapes,
                   reduce, control, tensor_lists, misc, random_ops):
        for op_type, fn in family.LOWERINGS:
            registry.register(op_type, fn)
    return registry
