"""Writing a converted model imports what that write needs: writing GE does not load the GE reader, and
writing ONNX loads only the lowering families of the model's op types (no TF1 frame rebuilding, control
flow or TensorList lowerings for a model without them)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
BERT_TINY = REPO / "testdata" / "bert_tiny.pb"

_SCRIPT = """
import json, sys
from scopefusion.convert import convert
model = convert(sys.argv[1])
model.save(sys.argv[2] + "/out.ge", "ge")
after_ge = sorted(sys.modules)
model.save(sys.argv[2] + "/out.onnx", "onnx")
print(json.dumps([after_ge, sorted(sys.modules)]))
"""


def test_saving_imports_only_what_the_model_needs(tmp_path):
    result = subprocess.run([sys.executable, "-c", _SCRIPT, str(BERT_TINY), str(tmp_path)], capture_output=True,
                            text=True, timeout=300, cwd=REPO)
    assert result.returncode == 0, result.stderr
    after_ge, after_onnx = (set(names) for names in json.loads(result.stdout))
    assert "scopefusion.serde.ge" in after_ge
    assert "scopefusion.serde.ge_read" not in after_ge
    lowering = "scopefusion.serde.onnx_lowering."
    families = {name[len(lowering):] for name in after_onnx if name.startswith(lowering)}
    assert {"nn", "elementwise"} <= families  # the BERT's MatMul and Add
    assert not families & {"tf1_frames", "tf1_conds", "control", "bodies", "loop_scans", "random_ops", "resize",
                            "detection", "space_batch", "conv_transpose"}, families
    assert (tmp_path / "out.onnx").stat().st_size > 0
