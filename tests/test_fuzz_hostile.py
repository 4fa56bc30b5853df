"""Hostile models drawn by hypothesis (huge dims, splats, folding bombs, doubling and recursive function
libraries, contradicting shapes, deep scopes, odd names): converting and writing them gives a model or
one of our own errors, never anything else. ``bench/fuzz_hostile.py`` runs the same strategies at 10,000+
examples under a memory limit."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings

from scopefusion.errors import ScopeFusionError
from tests.models import hostile_strategies as hs

FUZZ = settings(max_examples=500, deadline=None, derandomize=True,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture,
                                       HealthCheck.data_too_large])


@pytest.fixture(scope="module")
def workdir(tmp_path_factory):
    return tmp_path_factory.mktemp("fuzz")


@pytest.fixture(autouse=True)
def cached_op_registry(monkeypatch):
    """Op definitions are built once per framework and opset for a whole test (building them dominates the
    conversion of a tiny model)."""
    from scopefusion import dialects

    original = dialects.default_op_registry
    built: dict = {}

    def cached(source=None, **kw):
        framework = source.framework if source is not None else None
        key = (framework, tuple(sorted(source.opset_imports.items())) if source is not None else ())
        if kw or key not in built:
            built[key] = original(source, **kw)
        return built[key]

    monkeypatch.setattr(dialects, "default_op_registry", cached)


def _only_ours(result) -> None:
    assert result is not None
    if isinstance(result, ScopeFusionError):
        message = str(result)
        assert message and "\n" not in message.strip() and "scopefusion bug" not in message, message


@FUZZ
@given(model=hs.tf_graphs())
def test_hostile_tf_graphs_give_a_model_or_our_error(model, workdir):
    _only_ours(hs.convert_hostile(*model, workdir))


@FUZZ
@given(model=hs.function_libraries())
def test_hostile_function_libraries_stay_within_the_inlining_budget(model, workdir):
    result = hs.convert_hostile(*model, workdir)
    _only_ours(result)
    if not isinstance(result, ScopeFusionError):
        assert len(result.graph.nodes) <= hs.FUZZ_BUDGETS["max_inlined_nodes"] + 10


@FUZZ
@given(model=hs.onnx_models())
def test_hostile_onnx_models_give_a_model_or_our_error(model, workdir):
    result = hs.convert_hostile(*model, workdir)
    _only_ours(result)
    if not isinstance(result, ScopeFusionError):
        assert result.inference.known_values is not None
        big = [v for v in result.profiles[0].inference.known_values.values() if v.nbytes > hs.FUZZ_BUDGETS["max_folded_bytes"]]
        assert big == []
