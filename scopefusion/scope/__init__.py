"""The scope layer: CANN's scope-fusion model over a :class:`~scopefusion.parser.SourceGraph`.

``ScopeGraph.build(source)`` makes the scope tree from node names; passes (:class:`ScopeBasePass`,
or the function forms :func:`scope_rule` / :func:`dataflow_rule`) match :class:`ScopePattern` features
and :class:`DataflowPattern` dataflow; a :class:`PassRegistry` says which passes run, and a
:class:`PassManager` runs them and validates every :class:`FusionScopesResult` into a
:class:`FusionPlan` of :class:`AcceptedFusion` (or a :class:`Refusal` with its reason). Nothing here
knows the IR.
"""

from __future__ import annotations

from ._validate import Refused
from .accepted import AcceptedFusion, FusedInput, FusedOutput, PatternCheck, Refusal, ResolvedInnerNode
from .dataflow import COMMUTATIVE_OPS, ConstPattern, DataflowPattern, Match, Matches, NearMiss, OpBuilder, Var
from .features import NodeAttrFeature, NodeOpTypeFeature, ScopeFeature, ScopePattern
from .graph import ScopeGraph
from .manager import Explanation, PassManager, PassReport, RunReport
from .matching import match_all_batches, match_one_batch
from .op_types import FUSED_DIALECT, KnownOpTypes
from .passes import (
    DataflowRulePass,
    FunctionScopePass,
    PassOutcome,
    ScopeBasePass,
    claimed_nodes,
    dataflow_rule,
    map_ports,
    reads_op_type_counts,
    scope_rule,
)
from .plan import FusionPlan
from .registry import BUILTIN, ENTRY_POINT_GROUP, DeclaredOp, PassRegistry, RegisteredPass, Replacement
from .result import (
    FUSION_DISABLE_INDEX,
    INPUT_FROM_FUSION_SCOPE,
    OUTPUT_TO_FUSION_SCOPE,
    SCOPE_INVALID_TYPE,
    SCOPE_TO_MULTI_NODES,
    FusionScopesResult,
    InnerNodeInfo,
    ScopesResult,
)
from .tree import ROOT_NAME, Scope, ScopeTree, trim_scope_index

__all__ = [
    "AcceptedFusion",
    "BUILTIN",
    "COMMUTATIVE_OPS",
    "ConstPattern",
    "DataflowPattern",
    "DataflowRulePass",
    "DeclaredOp",
    "ENTRY_POINT_GROUP",
    "Explanation",
    "FUSED_DIALECT",
    "FUSION_DISABLE_INDEX",
    "FunctionScopePass",
    "FusedInput",
    "FusedOutput",
    "FusionPlan",
    "FusionScopesResult",
    "INPUT_FROM_FUSION_SCOPE",
    "InnerNodeInfo",
    "KnownOpTypes",
    "Match",
    "Matches",
    "NearMiss",
    "NodeAttrFeature",
    "NodeOpTypeFeature",
    "OUTPUT_TO_FUSION_SCOPE",
    "OpBuilder",
    "PassManager",
    "PassOutcome",
    "PassRegistry",
    "PassReport",
    "PatternCheck",
    "ROOT_NAME",
    "Refusal",
    "Refused",
    "RegisteredPass",
    "reads_op_type_counts",
    "Replacement",
    "ResolvedInnerNode",
    "RunReport",
    "SCOPE_INVALID_TYPE",
    "SCOPE_TO_MULTI_NODES",
    "Scope",
    "ScopeBasePass",
    "ScopeFeature",
    "ScopeGraph",
    "ScopePattern",
    "ScopeTree",
    "ScopesResult",
    "claimed_nodes",
    "Var",
    "dataflow_rule",
    "map_ports",
    "match_all_batches",
    "match_one_batch",
    "scope_rule",
    "trim_scope_index",
]
