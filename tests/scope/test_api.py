"""The scope layer's public API is locked; its modules follow the house style."""

from __future__ import annotations

import ast
from pathlib import Path

import scopefusion.scope as scope

PUBLIC = [
    "AcceptedFusion", "BUILTIN", "COMMUTATIVE_OPS", "ConstPattern", "DataflowPattern", "DataflowRulePass", "DeclaredOp",
    "ENTRY_POINT_GROUP", "Explanation", "FUSION_DISABLE_INDEX", "FunctionScopePass", "FusedInput", "FusedOutput",
    "FusionPlan", "FusionScopesResult", "INPUT_FROM_FUSION_SCOPE", "InnerNodeInfo", "Match", "Matches", "NearMiss",
    "NodeAttrFeature", "NodeOpTypeFeature", "OUTPUT_TO_FUSION_SCOPE", "OpBuilder", "PassManager", "PassOutcome",
    "PassRegistry", "PassReport", "PatternCheck", "ROOT_NAME", "Refusal", "Refused", "KnownOpTypes", "FUSED_DIALECT", "RegisteredPass", "Replacement",
    "ResolvedInnerNode", "RunReport", "SCOPE_INVALID_TYPE", "SCOPE_TO_MULTI_NODES", "Scope", "ScopeBasePass",
    "ScopeFeature", "ScopeGraph", "ScopePattern", "ScopeTree", "ScopesResult", "Var", "claimed_nodes", "dataflow_rule", "map_ports",
    "match_all_batches", "match_one_batch", "reads_op_type_counts", "scope_rule", "trim_scope_index",
]


def test_public_api_is_locked():
    assert sorted(scope.__all__) == sorted(PUBLIC)
    for name in PUBLIC:
        assert getattr(scope, name) is not None


def test_cann_constants():
    assert scope.FUSION_DISABLE_INDEX == 99999
    assert scope.SCOPE_TO_MULTI_NODES == "ScopeToMultiNodes"
    assert scope.SCOPE_INVALID_TYPE == "ScopeInvalidType"
    assert scope.INPUT_FROM_FUSION_SCOPE == "InputFromFusionScope"
    assert scope.OUTPUT_TO_FUSION_SCOPE == "OutputToFusionScope"
    assert scope.ENTRY_POINT_GROUP == "scopefusion.fusion_rules"


def test_modules_follow_the_house_style():
    package = Path(scope.__file__).parent
    for path in sorted(package.glob("*.py")):
        source = path.read_text()
        tree = ast.parse(source)
        assert len(source.splitlines()) < 700, path.name
        assert "from __future__ import annotations" in source, path.name
        names = {t.id for node in tree.body if isinstance(node, ast.Assign) for t in node.targets if isinstance(t, ast.Name)}
        assert "__all__" in names, path.name
        # The scope layer never imports the IR, TensorFlow or onnx.
        imported = {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
        imported |= {n.module or "" for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)}
        assert not any(m.startswith(("tensorflow", "onnx", "scopefusion.ir_builder", "..ir_builder")) for m in imported), path.name
        assert not any("ir_builder" in m or "fusion_rules" in m for m in imported), path.name
