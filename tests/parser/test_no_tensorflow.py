"""Reading .pb, .pbtxt and .onnx files never imports TensorFlow."""

from __future__ import annotations

import subprocess
import sys
import textwrap


def test_graph_def_text_graph_def_and_onnx_load_without_importing_tensorflow(tf_bert_pb, tf_bert_pbtxt, onnx_control_flow, tf2_calls_pb):
    script = textwrap.dedent(f"""
        import sys
        from scopefusion.parser import load
        sizes = [len(load(p)) for p in {[str(tf_bert_pb), str(tf_bert_pbtxt), str(onnx_control_flow), str(tf2_calls_pb)]!r}]
        leaked = sorted(m for m in sys.modules if m == "tensorflow" or m.startswith(("tensorflow.", "keras", "tf_keras")))
        print(sizes, leaked)
        sys.exit(1 if leaked or not all(sizes) else 0)
    """)
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.strip().endswith("[]")


def test_the_check_itself_sees_tensorflow_when_it_is_imported():
    script = "import sys, tensorflow; print('tensorflow' in sys.modules)"
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert result.stdout.strip() == "True"
