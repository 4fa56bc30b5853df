"""The pytest plugin, run inside pytester sessions: it is loaded through its ``pytest11`` entry point
(the inner sessions have no conftest), caches conversions, and checks and rewrites golden files."""

from __future__ import annotations

import importlib.metadata
from pathlib import Path

import pytest

from scopefusion.pytest_plugin import ModelCache
from tests.testing.small_models import write_model, write_rules

# NOTE: here rather than in tests/testing/conftest.py: pytest refuses ``pytest_plugins`` in a conftest
# below the rootdir's once the session is configured (as under `make test`), but takes it in a module.
pytest_plugins = ["pytester"]

# Plugins the inner sessions do without (hypothesis re-imports itself in every in-process run).
QUIET = ("-p", "no:cacheprovider", "-p", "no:xdist", "-p", "no:hypothesispytest")

INNER = '''
from pathlib import Path

MODEL = Path({model!r})
RULES = Path({rules!r})


def test_conversions_are_cached(convert_model):
    first = convert_model(MODEL, rules=[RULES])
    assert convert_model(MODEL, rules=[RULES]) is first
    other = convert_model(MODEL, rules=[RULES], input_shapes={{"x": [2, 16]}})
    assert other is not first and convert_model(MODEL, rules=(RULES,), input_shapes={{"x": (2, 16)}}) is not first
    assert convert_model.conversions >= 2 and first.fusion_counts() == {{"TestGelu": 2}}


def test_graph_matches_golden(convert_model, assert_matches_golden):
    assert_matches_golden(convert_model(MODEL, rules=[RULES]).graph, "mlp.golden.txt")
'''


def test_the_plugin_is_registered_as_a_pytest11_entry_point():
    points = {ep.name: ep.value for ep in importlib.metadata.entry_points(group="pytest11")}
    assert points.get("scopefusion") == "scopefusion.pytest_plugin"


@pytest.fixture
def inner(pytester: pytest.Pytester, tmp_path_factory) -> tuple[pytest.Pytester, Path]:
    files = tmp_path_factory.mktemp("plugin")
    model = write_model(files / "mlp.onnx")
    rules = write_rules(files / "rules.py")
    pytester.makepyfile(test_inner=INNER.format(model=str(model), rules=str(rules)))
    # pytester drops the modules an inner run imports; importing them here keeps each run quick.
    from scopefusion.convert import convert
    from scopefusion.testing import golden_text

    golden_text(convert(model, rules=[rules]))
    return pytester, model


def test_golden_files_are_written_checked_and_report_the_difference(inner):
    pytester, model = inner
    golden = pytester.path / "mlp.golden.txt"

    result = pytester.runpytest(*QUIET)
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(["*golden file *mlp.golden.txt does not exist; run pytest --scopefusion-update-golden*"])
    assert not golden.exists()

    result = pytester.runpytest(*QUIET, "--scopefusion-update-golden")
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines(["*scopefusion: 1 golden file(s) rewritten*", f"*{golden}"])
    text = golden.read_text()
    assert text.startswith("# scopefusion golden graph.") and "fused.Gelu" in text

    result = pytester.runpytest(*QUIET)
    result.assert_outcomes(passed=2)
    assert golden.read_text() == text

    write_model(model, weight_shift=0.5)  # the model changes under the golden file
    result = pytester.runpytest(*QUIET)
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines([
        "*the graph (a) differs from golden file *mlp.golden.txt (b)*",
        "*graphs differ: 1 attribute difference*",
        "*%block_1.dense.weight  value  *",
        "*%block_1.dense.weight value: 1 of 1 elements differ, first at ??: b'weight f32?16,16? sha256:*' vs b'weight f32?16,16? sha256:*'",
    ])  # fmt: skip
    assert "Traceback" not in result.stdout.str()

    result = pytester.runpytest(*QUIET, "--scopefusion-update-golden")
    result.assert_outcomes(passed=2)
    assert golden.read_text() != text


def test_the_cache_keys_on_the_file_and_the_options(tmp_path):
    calls = []
    cache = ModelCache(lambda path, **options: calls.append((path, options)) or object())
    model = write_model(tmp_path / "m.onnx")
    first = cache(model, enable=["A"], input_shapes=[{"x": [1, 16]}])
    assert cache(model, enable=("A",), input_shapes=({"x": (1, 16)},)) is first
    assert cache(model, enable=["B"]) is not first and len(cache) == 2
    write_model(model, weight_shift=1.0)  # same path, new content
    assert cache(model, enable=["A"], input_shapes=[{"x": [1, 16]}]) is not first
    assert cache.conversions == len(calls) == 3
    cache.clear()
    assert len(cache) == 0
