"""Serialization of the IR: GE-IR compatible protobuf models (binary and text).

The schema (``ge_ir.proto``, package ``ge.proto``) is wire-compatible with GE's ``ge_ir.proto``;
attribute values travel through an :class:`AttrSerializerRegistry` of stateless serializers keyed
by type id, so a new attribute type is one ``registry.register(type_id, serializer)`` call.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # pragma: no cover
    from .attr_serializers import (
        AttrSerializer,
        AttrSerializerRegistry,
        ListSerializer,
        SerdeContext,
        ValueSerializer,
        default_registry,
        default_serializer_registry,
    )
    from .ge import graph_to_proto, model_to_proto, to_bytes, to_text
    from .ge_read import (
        ModelContents,
        from_bytes,
        from_text,
        graph_from_proto,
        model_from_bytes,
        model_from_proto,
        model_from_text,
    )

__all__ = [
    "AttrSerializer",
    "AttrSerializerRegistry",
    "ListSerializer",
    "ModelContents",
    "SerdeContext",
    "ValueSerializer",
    "default_registry",
    "default_serializer_registry",
    "from_bytes",
    "from_text",
    "graph_from_proto",
    "graph_to_proto",
    "model_from_bytes",
    "model_from_proto",
    "model_from_text",
    "model_to_proto",
    "to_bytes",
    "to_text",
]

# The names above, imported on first use: writing ONNX imports this package without needing GE's messages,
# and writing GE does not load the reading side.
_MODULE_OF = {
    **dict.fromkeys(("AttrSerializer", "AttrSerializerRegistry", "ListSerializer", "SerdeContext", "ValueSerializer",
                     "default_registry", "default_serializer_registry"), "attr_serializers"),
    **dict.fromkeys(("graph_to_proto", "model_to_proto", "to_bytes", "to_text"), "ge"),
    **dict.fromkeys(("ModelContents", "from_bytes", "from_text", "graph_from_proto", "model_from_bytes",
                     "model_from_proto", "model_from_text"), "ge_read"),
}


def __getattr__(name: str) -> Any:
    module = _MODULE_OF.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    globals()[name] = value
    return value
