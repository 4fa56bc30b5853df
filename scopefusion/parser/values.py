"""Attribute value types the frontends produce besides Python scalars, tuples and numpy arrays."""

from __future__ import annotations

from ..records import FrozenRecord
from .source_graph import FunctionRef

__all__ = ["AttrPlaceholder", "ForeignDType", "FunctionRef"]


class AttrPlaceholder(FrozenRecord):
    """An attribute inside a function body whose value the caller supplies.

    TensorFlow: ``AttrValue.placeholder``; ONNX: ``AttributeProto.ref_attr_name``. ``name`` is the
    attribute of the enclosing function that holds the value.
    """

    _fields = ("name",)

    def __init__(self, name: str) -> None:
        self.name = name


class ForeignDType(FrozenRecord):
    """A framework element type that :mod:`scopefusion.dtypes` has no ``DType`` for.

    For example TensorFlow's ``DT_RESOURCE`` and ``DT_VARIANT`` (variables, tensor lists) or
    ``DT_FLOAT8_E4M3FNUZ``. ``name`` is the framework's enum name, ``code`` its enum value.
    """

    _fields = ("framework", "code", "name")

    def __init__(self, framework: str, code: int, name: str) -> None:
        self.framework = framework
        self.code = code
        self.name = name

    def __str__(self) -> str:
        return self.name
