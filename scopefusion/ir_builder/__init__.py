"""The typed IR: types, attributes, op definitions, graphs; and (later) building it from a ScopeGraph."""

from __future__ import annotations

from .attrs import AttrType, AttrValue, Attributes, NamedAttrs
from .compare import first_difference, graphs_equal
from .inference import infer_node
from .graph import CONST_OP, DATA_OP, Graph, GraphError, Node, Value, builtin_ops
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
    "builtin_ops",
    "first_difference",
    "infer_node",
    "format_graph",
    "graphs_equal",
]
