"""docs/writing_rules.md: every ```python block runs, in order, in one namespace."""

from __future__ import annotations

import re
from pathlib import Path

DOC = Path(__file__).resolve().parents[2] / "docs" / "writing_rules.md"
BLOCK = re.compile(r"^```python(?P<info>[^\n]*)\n(?P<code>.*?)^```$", re.MULTILINE | re.DOTALL)


def blocks() -> list[tuple[str, str]]:
    return [(m["info"].strip(), m["code"]) for m in BLOCK.finditer(DOC.read_text())]


def test_the_guide_has_examples_of_every_part():
    infos = [info for info, _ in blocks()]
    assert len(infos) >= 10 and "file=my_rules.py" in infos
    text = DOC.read_text()
    for needle in ("ScopeBasePass", "scope_rule", "dataflow_rule", "load_rules_file", "load_entry_points",
                   "scopefusion.fusion_rules", "replacements", "explain(", "define_fused_op", "set_reference",
                   "set_onnx_export", "FUSED_OPS", '"LayerNormFusion"', "builtin_would_fuse", "error_at"):
        assert needle in text
    # The replacement example names a real builtin.
    from scopefusion.fusion_rules import BUILTIN_RULES

    assert "LayerNormFusion" in {rule.pass_name for rule in BUILTIN_RULES} and "ScopeLayerNormPass" not in text


def test_the_python_examples_run(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    namespace: dict = {"__name__": "writing_rules_doc"}
    for number, (info, code) in enumerate(blocks()):
        if info.startswith("file="):
            (tmp_path / info[len("file="):]).write_text(code)
            continue
        assert info == "", f"block {number} has an unknown info string {info!r}"
        exec(compile(code, f"{DOC.name}[block {number}]", "exec"), namespace)
    printed = capsys.readouterr().out
    assert "ScopeGeluPass: matched, but the result was refused" in printed
