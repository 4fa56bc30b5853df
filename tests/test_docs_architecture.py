"""docs/architecture.md: its python block runs, and its layer table agrees with the layering test."""

from __future__ import annotations

import re
from pathlib import Path

DOC = Path(__file__).resolve().parent.parent / "docs" / "architecture.md"


def test_the_python_examples_run(capsys):
    blocks = re.findall(r"^```python\n(.*?)^```$", DOC.read_text(), re.MULTILINE | re.DOTALL)
    assert blocks
    namespace: dict = {"__name__": "architecture_doc"}
    for number, code in enumerate(blocks):
        exec(compile(code, f"{DOC.name}[block {number}]", "exec"), namespace)
    assert "unknown fused op type 'Swishh'" in capsys.readouterr().out


def test_every_layer_the_layering_test_knows_is_described():
    from tests.test_layering import ALLOWED

    text = DOC.read_text()
    for layer in ALLOWED:
        assert f"`{layer}/`" in text, layer
