"""Attribute value types the frontends produce besides Python scalars, tuples and numpy arrays."""

from __future__ import annotations

from dataclasses import dataclass

from .source_graph import FunctionRef

__all__ = ["AttrPlaceholder", "ForeignDType", "FunctionRef"]


@dataclass(frozen=True)
class AttrPlaceholder:
    """An attribute inside a function body whose value the caller supplies.

    TensorFlow: ``AttrValue.placeholder``; ONNX: ``AttributeProto.ref_attr_name``. ``name`` is the
    attribute of the enclosing function that holds the value.
    """

    name: str


@dataclass(frozen=True)
class ForeignDType:
    """A framework element type that :mod:`scopefusion.dtypes` has no ``DType`` for.

    For example TensorFlow's ``DT_RESOURCE`` and ``DT_VARIANT`` (variables, tensor lists) or
    ``DT_FLOAT8_E4M3FNUZ``. ``name`` is the framework's enum name, ``code`` its enum value.
    """

    framework: str
    code: int
    name: str

    def __str__(self) -> str:
        return self.name
