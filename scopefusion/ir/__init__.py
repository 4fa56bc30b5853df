"""The IR core: interned types, typed attributes, op definitions and their registry, graphs, the printer
and structural comparison.

It imports nothing of onnx, protobuf or TensorFlow, and nothing of the parser, the scope layer or serde;
op definitions per dialect live in :mod:`scopefusion.dialects`.
"""

from __future__ import annotations

from .attrs import Attributes, AttrType, AttrValue, NamedAttrs
from .compare import first_difference, graphs_equal
from .core_ops import CONST_OP, DATA_OP, core_ops
from .graph import Graph, GraphError, Node, Value
from .inference import infer_node
from .opdef import FollowType, InferContext, InputInfo, OpDef, OpRegistry, ParamType
from .printer import format_graph
from .types import UNKNOWN_DIM, UNKNOWN_RANK, ElementType, IRContext, ListType, TensorType, TupleType, Type

__all__ = [
    "CONST_OP",
    "DATA_OP",
    "AttrType",
    "AttrValue",
    "Attributes",
    "ElementType",
    "FollowType",
    "Graph",
    "GraphError",
    "IRContext",
    "InferContext",
    "InputInfo",
    "ListType",
    "NamedAttrs",
    "Node",
    "OpDef",
    "OpRegistry",
    "ParamType",
    "TensorType",
    "TupleType",
    "Type",
    "UNKNOWN_DIM",
    "UNKNOWN_RANK",
    "Value",
    "core_ops",
    "first_difference",
    "format_graph",
    "graphs_equal",
    "infer_node",
]
