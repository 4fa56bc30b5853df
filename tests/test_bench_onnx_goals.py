"""The ONNX export bench's goal summary names each model that misses a goal."""

import importlib.util
from pathlib import Path

BENCH = Path(__file__).resolve().parent.parent / "bench" / "bench_onnx_export.py"


def _bench():
    spec = importlib.util.spec_from_file_location("bench_onnx_export", BENCH)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _row(model, speedup, ours_ms, theirs_ms, ours_t=1, theirs_t=1, opt_ms=None):
    row = {"model": model, "speedup": speedup, "ours_ms": ours_ms, "tf2onnx_ms": theirs_ms,
           "ours_transposes": ours_t, "tf2onnx_transposes": theirs_t}
    if opt_ms is not None:
        row["tf2onnx_opt_ms"] = opt_ms
    return row


def test_goals_name_each_miss_and_count_only_models_both_convert():
    bench = _bench()
    rows = [
        _row("small_convnet", 12.5, 0.012, 0.015),
        _row("resnet50", 42.0, 3.4, 3.3, ours_t=2, theirs_t=1),
        _row("tf1_bert", 26.0, 0.050, 0.081, opt_ms=0.045),
        {"model": "keras_transformer", "tf2onnx": "failed", "ours_ms": 0.1},
    ]
    speed, latency, transposes = bench.goals(rows)
    assert speed.startswith("- export >= 25x faster than tf2onnx (range 12.5-42.0x): 2 of 3 models, missed by small_convnet")
    assert "resnet50 (3.400 > 3.300 ms)" in latency and "tf1_bert (0.050 > 0.045 ms)" in latency
    assert "1 of 3 models" in latency and "small_convnet" not in latency
    assert transposes == "- Transpose count <= tf2onnx's: 2 of 3 models, missed by resnet50 (2 > 1)"


def test_goals_met_when_every_model_meets_them():
    bench = _bench()
    speed, latency, transposes = bench.goals([_row("mobilenet_v2", 30.0, 0.2, 0.24)])
    assert speed.endswith("1 of 1 models, met") and latency.endswith("met") and transposes.endswith("met")


def test_the_table_gives_export_times_in_ms_with_three_digits():
    bench = _bench()
    row = {"model": "small_convnet", "ours_export_s": 0.001984, "tf2onnx_export_s": 0.03371, "speedup": 16.99}
    big = {"model": "resnet50", "ours_export_s": 0.14659, "tf2onnx_export_s": 6.8615, "speedup": 46.8}
    lines = bench.table([row, big, {"model": "keras_transformer", "ours_export_s": 0.0164}]).splitlines()
    assert "export ms" in lines[0]
    assert lines[2].startswith("| small_convnet | 1.98 / 33.7 (17.0x) |")
    assert lines[3].startswith("| resnet50 | 147 / 6,862 (46.8x) |")
    assert lines[4].startswith("| keras_transformer | 16.4 / - (-) |")


def test_the_transformers_optimizer_runs_its_fusions_alone_where_torch_is_missing(monkeypatch):
    import onnxruntime.transformers.optimizer as optimizer

    bench = _bench()
    calls = []

    class Optimized:
        class model:
            @staticmethod
            def SerializeToString():
                return b"optimized"

    def optimize_model(path, **options):
        calls.append(options.get("opt_level"))
        if options.get("opt_level") is None:
            raise ModuleNotFoundError("No module named 'torch'", name="torch")
        return Optimized

    monkeypatch.setattr(optimizer, "optimize_model", optimize_model)
    data, note = bench.transformers_optimized(b"model")
    assert (data, calls) == (b"optimized", [None, 0]) and "torch" in note
    rows = [{"model": "tf1_bert", "ours_export_s": 0.007, "tf2onnx_opt_note": note}]
    assert bench.table(rows).splitlines()[-1] == f"- tf1_bert: transformers optimizer: {note}"


def test_the_transformers_optimizer_reraises_other_missing_modules(monkeypatch):
    import onnxruntime.transformers.optimizer as optimizer
    import pytest

    def optimize_model(path, **options):
        raise ModuleNotFoundError("No module named 'sympy'", name="sympy")

    monkeypatch.setattr(optimizer, "optimize_model", optimize_model)
    with pytest.raises(ModuleNotFoundError):
        _bench().transformers_optimized(b"model")


def test_the_runtime_node_count_is_that_of_the_graph_onnxruntime_runs():
    from onnx import TensorProto, helper

    bench = _bench()
    graph = helper.make_graph(
        [helper.make_node("Identity", ["x"], ["i"]), helper.make_node("Relu", ["i"], ["y"])], "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4])])
    data = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]).SerializeToString()
    assert bench.counts(data) == (2, 0)
    assert bench.runtime_nodes(data) == 1  # onnxruntime removes the Identity when it loads the model
    row = {"model": "m", "ours_export_s": 0.002, "ours_nodes": 2, "ours_runtime_nodes": 1, "tf2onnx_runtime_nodes": 3}
    header, _, line = bench.table([row]).splitlines()
    assert "nodes onnxruntime runs (ours / tf2onnx)" in header and "| 2 / - | 1 / 3 |" in line
