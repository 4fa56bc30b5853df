"""Building the typed IR from a fusion plan, and the analyses the build runs (inference over graphs,
shape profiles, the memory plan).

The IR core itself is :mod:`scopefusion.ir` and the op definitions are :mod:`scopefusion.dialects`; the
names below are re-exported from there so code written against ``scopefusion.ir_builder`` keeps working.
"""

from __future__ import annotations

from ..ir import (
    CONST_OP,
    DATA_OP,
    UNKNOWN_DIM,
    UNKNOWN_RANK,
    Attributes,
    AttrType,
    AttrValue,
    ElementType,
    FollowType,
    Graph,
    GraphError,
    InferContext,
    InputInfo,
    IRContext,
    ListType,
    NamedAttrs,
    Node,
    OpDef,
    OpRegistry,
    ParamType,
    TensorType,
    TupleType,
    Type,
    Value,
    first_difference,
    format_graph,
    graphs_equal,
    infer_node,
)
from ..ir import core_ops as builtin_ops

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
