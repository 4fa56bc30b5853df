"""Golden files: the GE text form with the printed form as comments, read back and compared structurally."""

from __future__ import annotations

import pytest

from scopefusion import pytest_plugin
from scopefusion.errors import SerdeError
from scopefusion.ir_builder import format_graph
from scopefusion.testing import assert_matches_golden, golden_text, graph_diff, read_golden, write_golden
from scopefusion.testing.golden import UPDATE_OPTION
from tests.testing.ir_graphs import build, index_of, replace, transformer


@pytest.fixture(scope="module")
def spec():
    return transformer(3)


def test_a_golden_file_reads_back_to_an_equal_graph(spec, tmp_path):
    graph = build(spec)
    path = tmp_path / "g.golden.txt"
    assert write_golden(path, graph) is True
    assert write_golden(path, graph) is False  # unchanged text is not rewritten
    text = path.read_text()
    assert text.startswith("# scopefusion golden graph.") and text == golden_text(graph)
    printed = [line[2:] for line in text.splitlines() if line.startswith("# ") and "=" in line]
    assert printed[0] in format_graph(graph)
    assert graph_diff(read_golden(path), graph, check_names=True).equal


def test_assert_matches_golden_compares_structurally_and_updates(spec, tmp_path):
    path = tmp_path / "g.golden.txt"
    graph = build(spec)
    with pytest.raises(AssertionError, match=f"golden file .* does not exist; run pytest {UPDATE_OPTION}"):
        assert_matches_golden(graph, path)
    assert_matches_golden(graph, path, update=True)
    assert_matches_golden(build(spec, order_seed=4, names=lambda i, op: f"v{i}"), path)  # other order and names
    with pytest.raises(AssertionError):
        assert_matches_golden(build(spec, names=lambda i, op: f"v{i}"), path, check_names=True)
    changed = build(spec, edit=replace([index_of(spec, "t.Softmax", 1)], attrs={"axis": 0}))
    with pytest.raises(AssertionError) as info:
        assert_matches_golden(changed, path)
    message = str(info.value)
    assert message.startswith(f"the graph (a) differs from golden file {path} (b)")
    assert "axis" in message and "attribute differences (1)" in message
    assert_matches_golden(changed, path, ignore_attrs=["axis"])


def test_a_broken_golden_file_names_itself(tmp_path):
    path = tmp_path / "bad.golden.txt"
    path.write_text("graph { op { name: \n")
    with pytest.raises(SerdeError, match="golden file .*bad.golden.txt"):
        read_golden(path)
    with pytest.raises(SerdeError, match="cannot read golden file"):
        read_golden(tmp_path / "missing.golden.txt")


def test_the_plugin_option_is_the_golden_option():
    assert pytest_plugin.UPDATE_OPTION == UPDATE_OPTION
