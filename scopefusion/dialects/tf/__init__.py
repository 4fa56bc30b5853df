"""The ``tf`` dialect: TensorFlow op definitions with shape and dtype inference and numpy folding kernels.

An op's type is the TensorFlow op name (``tf.Reshape``); every definition keeps the attributes a model
gives it (``open_attrs``) and declares the ones its inference reads, with TensorFlow's defaults. ``Const``
and ``Placeholder`` have no definition here: the IR builder turns them into ``ge.Const`` and ``ge.Data``.

Families, one module each: :mod:`.elementwise`, :mod:`.nn`, :mod:`.array` (reshaping), :mod:`.slicing`
(slices, joins, gathers), :mod:`.shapes` (Shape, Size...), :mod:`.reduce`, :mod:`.control` (frames,
functional loops and conditionals), :mod:`.lists` (TensorList, TensorArray), :mod:`.misc` (identities).
"""

from __future__ import annotations

from ...ir.opdef import OpDef
from . import array, control, elementwise, lists, misc, nn, reduce, shapes, slicing

__all__ = ["definitions"]

_FAMILIES = (elementwise, nn, array, slicing, shapes, reduce, control, lists, misc)


def definitions() -> list[OpDef]:
    """Every ``tf`` dialect op definition, fresh objects on each call; names are unique."""
    out: list[OpDef] = []
    seen: set[str] = set()
    for family in _FAMILIES:
        for op in family.definitions():
            if op.name in seen:
                raise ValueError(f"tf op {op.name} is defined twice (again in {family.__name__})")
            seen.add(op.name)
            out.append(op)
    return out
