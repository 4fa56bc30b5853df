"""Serialization of the IR: GE-IR compatible protobuf models (binary and text).

The schema (``ge_ir.proto``, package ``ge.proto``) is wire-compatible with GE's ``ge_ir.proto``;
attribute values travel through an :class:`AttrSerializerRegistry` of stateless serializers keyed
by type id, so a new attribute type is one ``registry.register(type_id, serializer)`` call.
"""

from __future__ import annotations

from .attr_serializers import (
    AttrSerializer,
    AttrSerializerRegistry,
    ListSerializer,
    SerdeContext,
    ValueSerializer,
    default_registry,
    default_serializer_registry,
)
from .ge import (
    ModelContents,
    from_bytes,
    from_text,
    graph_from_proto,
    graph_to_proto,
    model_from_bytes,
    model_from_proto,
    model_from_text,
    model_to_proto,
    to_bytes,
    to_text,
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
