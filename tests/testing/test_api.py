"""The public API of the testing helpers, the plugin and the report renderer is locked."""

from __future__ import annotations

import subprocess
import sys

import scopefusion.testing as testing
from scopefusion import cli_inspect, html_report, pytest_plugin
from scopefusion.cli import app

PUBLIC = {
    "scopefusion.testing": {
        "AttrDifference", "GraphDiff", "NAME_ATTRS", "NodeRef", "TypeDifference", "UnmatchedNode",
        "assert_graphs_equal", "assert_matches_golden", "fusion_counts", "golden_text", "graph_diff",
        "op_counts", "read_golden", "write_golden",
    },
    "scopefusion.pytest_plugin": {"ModelCache", "UPDATE_OPTION", "assert_matches_golden", "convert_model"},
    "scopefusion.html_report": {"ScopeNotes", "memory_svg", "render_html", "scope_notes"},
    "scopefusion.cli_inspect": {"diff", "inspect", "load_graph", "passes"},
}  # fmt: skip


def test_public_api_is_locked():
    for module in (testing, pytest_plugin, html_report, cli_inspect):
        assert set(module.__all__) == PUBLIC[module.__name__], module.__name__
        for name in module.__all__:
            assert getattr(module, name) is not None


def test_the_cli_has_the_commands_and_convert_has_html():
    from typer.main import get_command

    command = get_command(app)
    assert {"convert", "verify", "inspect", "diff", "passes"} <= set(command.commands)
    assert "--html" in {opt for p in command.commands["convert"].params for opt in p.opts}


def test_loading_the_plugin_imports_nothing_heavy():
    code = "import sys, scopefusion.pytest_plugin\nprint(sorted(m for m in sys.modules if m.split('.')[0] in ('numpy', 'onnx', 'tensorflow', 'networkx') or m.startswith('scopefusion.')))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "['scopefusion.errors', 'scopefusion.pytest_plugin']"
