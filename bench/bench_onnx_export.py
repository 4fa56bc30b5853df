#!/usr/bin/env python3
"""ONNX export of the TensorFlow zoo models: scopefusion against tf2onnx.

Per model (frozen GraphDefs built from code into a work directory, nothing committed):

* export time: scopefusion's ``convert`` + ONNX export of the file (default opset 23), against tf2onnx's
  in-process ``tf2onnx.convert.from_graph_def`` of the same frozen graph (opset 17, its default optimizers);
  each after one untimed warm-up call, the best of at least ``--repeat`` runs, more for fast exports (up to
  200 within a second);
* onnxruntime CPU latency (2 intra-op threads, default graph optimizations, median of at least ``--runs``
  runs, more until ``--latency-seconds`` (3 s) have passed, up to 2000) of each export on the zoo's profile inputs, and for the
  transformer models of tf2onnx's export after onnxruntime's transformers optimizer
  (``optimize_model(model_type="bert")``); each export is timed in blocks with only its own session alive
  (5 warm-up runs per block), the exports of one model taking turns over 10 rounds, so the machine's load
  weighs on them alike;
* node and Transpose counts of each export, and the nodes onnxruntime runs of it (its graph after the
  session's default optimizations, as the timed sessions run it: folding a Conv's scale into its weights,
  a Pad into its Conv, and the like); max error against TensorFlow (abs, rel where values exceed 1).

tf2onnx is an optional bench dependency (``pip install -e .[bench]``); where it is missing or fails on a
model, the table says so with the exception, and the scopefusion columns are still measured.

Goals: our latency <= tf2onnx's on every model both convert (<= tf2onnx + transformers optimizer on the
transformers), CNN Transpose counts <= tf2onnx's, export >= 25x faster. After the table, a "Goals:" summary
says for each goal how many of the models both exporters convert meet it, naming each model that misses it
(the Transpose count is checked on every model, CNNs included).

Usage: python bench/bench_onnx_export.py [--models a,b] [--repeat 3] [--runs 30] [--latency-seconds 3]
                                         [--workdir DIR] [--json OUT]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable

import numpy as np

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from tests.e2e import zoo  # noqa: E402
from tests.models import tf_models  # noqa: E402

TRANSFORMERS = {"keras_transformer", "tf1_bert"}
SPEEDUP_GOAL = 25.0


def _mobilenet_v3() -> bytes:
    import keras

    keras.utils.set_random_seed(0)
    model = keras.applications.MobileNetV3Small(weights=None, input_shape=(32, 32, 3), alpha=0.75, classes=10,
                                                include_preprocessing=False)
    return tf_models._freeze_keras(model, [(None, 32, 32, 3)])


def _rnn_stack() -> bytes:
    from tests.fusion_rules.test_dynamic_rnn import keras_stack

    return keras_stack()


def models() -> dict[str, tuple[Callable[[], bytes], dict[str, list[int]]]]:
    out: dict[str, tuple[Callable[[], bytes], dict[str, list[int]]]] = {}
    for m in zoo.ZOO:
        if m.builder is not None:
            out[m.name] = (m.builder, {k: list(v) for k, v in m.input_shapes.items()})
    out["small_convnet"] = (tf_models.keras_small_convnet, {"input_0": [1, 8, 8, 3]})
    out["mobilenet_v3_small"] = (_mobilenet_v3, {"input_0": [1, 32, 32, 3]})
    out["rnn_stack"] = (_rnn_stack, {"sequence": [2, 6, 5]})
    return out


def best_of(repeat: int, fn: Callable[[], Any], min_seconds: float = 1.0, max_runs: int = 200) -> tuple[float, Any]:
    """The best time of ``fn`` and its last result: one untimed warm-up call, then at least ``repeat`` timed
    calls, more (up to ``max_runs``) until ``min_seconds`` have passed, as ``timeit`` does for fast code.
    Both exporters are timed this way."""
    result = fn()
    best, runs, began = float("inf"), 0, time.perf_counter()
    while runs < repeat or (time.perf_counter() - began < min_seconds and runs < max_runs):
        start = time.perf_counter()
        result = fn()
        best = min(best, time.perf_counter() - start)
        runs += 1
    return best, result


def latencies_ms(models: list[tuple[bytes, dict[str, np.ndarray]]], runs: int, seconds_each: float = 3.0,
                 max_runs: int = 2000, rounds: int = 10) -> list[float]:
    """The median latency of each model (bytes, feeds) in ms.

    The models are timed in blocks, one session alive at a time, as a deployment runs one: a second
    session's intra-op threads spin after each run and take the core the first one's threads need (on two
    cores, alternating two live sessions doubles both medians). The blocks alternate over ``rounds``
    rounds, so a change in the machine's load weighs on every model alike. Each block makes its session,
    runs it 5 times untimed, then times at least ``runs / rounds`` runs, more (up to ``max_runs / rounds``)
    until its share of ``seconds_each`` has passed, so a fast model gets enough runs for its median to settle
    and a slow one (ResNet50, ~6 ms a run) gets enough rounds for a passing load to weigh on both exports."""
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.intra_op_num_threads = 2
    options.inter_op_num_threads = 1
    options.log_severity_level = 3
    times: list[list[float]] = [[] for _ in models]
    block_runs = max(1, -(-runs // rounds))
    block_seconds = seconds_each / rounds
    for _ in range(rounds):
        for k, (data, feeds) in enumerate(models):
            session = ort.InferenceSession(data, options, providers=["CPUExecutionProvider"])
            inputs = {i.name: feeds[i.name] for i in session.get_inputs()}
            for _ in range(5):
                session.run(None, inputs)
            began, done = time.perf_counter(), 0
            while done < block_runs or (time.perf_counter() - began < block_seconds and done < max_runs // rounds):
                start = time.perf_counter()
                session.run(None, inputs)
                times[k].append(time.perf_counter() - start)
                done += 1
            del session
    return [1000 * statistics.median(t) for t in times]


def run_outputs(data: bytes, feeds: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.log_severity_level = 3
    session = ort.InferenceSession(data, options, providers=["CPUExecutionProvider"])
    names = [i.name for i in session.get_inputs()]
    values = session.run(None, {n: feeds[n] for n in names})
    return dict(zip([o.name for o in session.get_outputs()], values))


def max_error(got: dict[str, np.ndarray], expected: dict[str, np.ndarray], suffix: str = "") -> float:
    worst = 0.0
    for name, value in expected.items():
        mine = got.get(name + suffix)
        if mine is None or np.shape(mine) != np.shape(value):
            return float("inf")
        a, b = np.asarray(mine, np.float64), np.asarray(value, np.float64)
        if a.size:
            worst = max(worst, float((np.abs(a - b) / np.maximum(1.0, np.abs(b))).max()))
    return worst


def counts(data: bytes) -> tuple[int, int]:
    import onnx

    proto = onnx.load_from_string(data)
    return len(proto.graph.node), sum(n.op_type == "Transpose" for n in proto.graph.node)


def runtime_nodes(data: bytes) -> int:
    """How many nodes onnxruntime runs of the model ``data``: those of the graph its CPU session makes with
    the default graph optimizations (the timed sessions' settings), written out and counted."""
    import onnx
    import onnxruntime as ort

    with tempfile.TemporaryDirectory() as tmp:
        options = ort.SessionOptions()
        options.intra_op_num_threads = 2
        options.log_severity_level = 3
        options.optimized_model_filepath = str(Path(tmp) / "optimized.onnx")
        ort.InferenceSession(data, options, providers=["CPUExecutionProvider"])
        return len(onnx.load(options.optimized_model_filepath, load_external_data=False).graph.node)


def tf2onnx_export(path: Path, repeat: int) -> tuple[float, bytes]:
    import tensorflow as tf
    import tf2onnx

    from tests.models.frozen_saved_model import frozen_outputs

    def once() -> bytes:
        graph_def = tf.compat.v1.GraphDef.FromString(path.read_bytes())
        inputs = [f"{n.name}:0" for n in graph_def.node if n.op == "Placeholder"]
        outputs = [f"{o}:0" for o in frozen_outputs(graph_def)]
        proto, _ = tf2onnx.convert.from_graph_def(graph_def, input_names=inputs, output_names=outputs, opset=17)
        return proto.SerializeToString()

    return best_of(repeat, once)


def transformers_optimized(data: bytes) -> tuple[bytes, str | None]:
    """tf2onnx's export after onnxruntime's transformers optimizer, and a note when it ran without its
    onnxruntime pre-pass: that pass imports torch only to read its version, so where torch is not installed
    the optimizer's Python fusions run alone (the timed session still applies onnxruntime's own graph
    optimizations)."""
    from onnxruntime.transformers.optimizer import optimize_model

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "model.onnx"
        path.write_bytes(data)
        try:
            optimized = optimize_model(str(path), model_type="bert", num_heads=0, hidden_size=0)
        except ModuleNotFoundError as e:
            if e.name != "torch":
                raise
            optimized = optimize_model(str(path), model_type="bert", num_heads=0, hidden_size=0, opt_level=0)
            return optimized.model.SerializeToString(), "its onnxruntime pre-pass needs torch (not installed): fusions only"
        return optimized.model.SerializeToString(), None


def measure(name: str, path: Path, shapes: dict[str, list[int]], repeat: int, runs: int,
            latency_seconds: float = 3.0) -> dict[str, Any]:
    from scopefusion.convert import convert
    from scopefusion.runtime.source_runner import source_runner
    from scopefusion.serde.onnx_export import model_to_onnx_bytes
    from scopefusion.verify import make_inputs

    row: dict[str, Any] = {"model": name}
    seconds, data = best_of(repeat, lambda: model_to_onnx_bytes(convert(path)))
    model = convert(path, input_shapes=[shapes])
    feeds = make_inputs(model.profiles[0].graph, 0)
    expected = source_runner(model.source).run(feeds)
    row["ours_export_s"] = seconds
    row["ours_nodes"], row["ours_transposes"] = counts(data)
    row["ours_runtime_nodes"] = runtime_nodes(data)
    row["ours_error"] = max_error(run_outputs(data, feeds), expected)
    runnable: list[tuple[bytes, dict[str, np.ndarray]]] = [(data, feeds)]
    try:
        theirs_s, theirs = tf2onnx_export(path, repeat)
    except Exception as e:  # tf2onnx missing or failing: say how
        row["tf2onnx"] = f"{type(e).__name__}: {' '.join(str(e).split())[:200]}"
        row["ours_ms"] = latencies_ms(runnable, runs, latency_seconds)[0]
        return row
    row["tf2onnx_export_s"] = theirs_s
    row["speedup"] = theirs_s / seconds
    row["tf2onnx_nodes"], row["tf2onnx_transposes"] = counts(theirs)
    their_feeds = {f"{k}:0": v for k, v in feeds.items()}
    try:
        row["tf2onnx_error"] = max_error(run_outputs(theirs, their_feeds), expected, ":0")
        row["tf2onnx_runtime_nodes"] = runtime_nodes(theirs)
        runnable.append((theirs, their_feeds))
    except Exception as e:
        row["tf2onnx"] = f"onnxruntime refused tf2onnx's export: {type(e).__name__}: {' '.join(str(e).split())[:200]}"
    if name in TRANSFORMERS and len(runnable) == 2:
        try:
            optimized, note = transformers_optimized(theirs)
            runnable.append((optimized, their_feeds))
            if note is not None:
                row["tf2onnx_opt_note"] = note
        except Exception as e:
            row["tf2onnx_opt"] = f"{type(e).__name__}: {' '.join(str(e).split())[:200]}"
    for key, ms in zip(("ours_ms", "tf2onnx_ms", "tf2onnx_opt_ms"), latencies_ms(runnable, runs, latency_seconds)):
        row[key] = ms
    return row


def _ms(seconds: float | None) -> str:
    """Seconds as ms with three significant digits (at least one decimal below 100 ms), or "-"."""
    if seconds is None:
        return "-"
    ms = 1000 * seconds
    return f"{ms:,.0f}" if ms >= 100 else f"{ms:.3g}" if ms >= 1 else f"{ms:.2f}"


def table(rows: list[dict[str, Any]]) -> str:
    head = ("| model | export ms (ours / tf2onnx, x) | ORT ms (ours / tf2onnx / +opt) | nodes (ours / tf2onnx) "
            "| nodes onnxruntime runs (ours / tf2onnx) | Transposes (ours / tf2onnx) | max error (ours / tf2onnx) |")
    lines = [head, "|" + "---|" * 7]

    def f(row: dict[str, Any], key: str, fmt: str) -> str:
        return format(row[key], fmt) if key in row else "-"

    for r in rows:
        speed = f"{r['speedup']:.1f}x" if "speedup" in r else "-"
        lines.append(
            f"| {r['model']} | {_ms(r.get('ours_export_s'))} / {_ms(r.get('tf2onnx_export_s'))} ({speed}) "
            f"| {f(r, 'ours_ms', '.3f')} / {f(r, 'tf2onnx_ms', '.3f')} / {f(r, 'tf2onnx_opt_ms', '.3f')} "
            f"| {f(r, 'ours_nodes', 'd')} / {f(r, 'tf2onnx_nodes', 'd')} "
            f"| {f(r, 'ours_runtime_nodes', 'd')} / {f(r, 'tf2onnx_runtime_nodes', 'd')} "
            f"| {f(r, 'ours_transposes', 'd')} / {f(r, 'tf2onnx_transposes', 'd')} "
            f"| {f(r, 'ours_error', '.2g')} / {f(r, 'tf2onnx_error', '.2g')} |"
        )
    notes = [f"- {r['model']}: tf2onnx: {r['tf2onnx']}" for r in rows if "tf2onnx" in r]
    notes += [f"- {r['model']}: transformers optimizer: {r['tf2onnx_opt']}" for r in rows if "tf2onnx_opt" in r]
    notes += [f"- {r['model']}: transformers optimizer: {r['tf2onnx_opt_note']}" for r in rows if "tf2onnx_opt_note" in r]
    return "\n".join(lines + ([""] + notes if notes else []))


def goals(rows: list[dict[str, Any]]) -> list[str]:
    """One line per goal: how many of the models both exporters convert meet it, and which miss it."""
    both = [r for r in rows if "speedup" in r]

    def line(what: str, missed: list[str]) -> str:
        verdict = "met" if not missed else "missed by " + ", ".join(missed)
        return f"- {what}: {len(both) - len(missed)} of {len(both)} models, {verdict}"

    slow = [f"{r['model']} ({r['speedup']:.1f}x)" for r in both if r["speedup"] < SPEEDUP_GOAL]
    lagging = []
    for r in both:
        bound = min(r.get("tf2onnx_ms", float("inf")), r.get("tf2onnx_opt_ms", float("inf")))
        if r["model"] not in TRANSFORMERS:
            bound = r.get("tf2onnx_ms", float("inf"))
        if r.get("ours_ms", float("inf")) > bound:
            lagging.append(f"{r['model']} ({r['ours_ms']:.3f} > {bound:.3f} ms)")
    transposes = [f"{r['model']} ({r['ours_transposes']} > {r['tf2onnx_transposes']})"
                  for r in both if r["ours_transposes"] > r["tf2onnx_transposes"]]
    ratios = [r["speedup"] for r in both]
    spread = f" (range {min(ratios):.1f}-{max(ratios):.1f}x)" if ratios else ""
    return [
        line(f"export >= {SPEEDUP_GOAL:.0f}x faster than tf2onnx{spread}", slow),
        line("onnxruntime latency <= tf2onnx's (+ transformers optimizer on the transformers)", lagging),
        line("Transpose count <= tf2onnx's", transposes),
    ]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--models", default="", help="comma-separated names (default: all)")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--runs", type=int, default=30)
    parser.add_argument("--latency-seconds", type=float, default=3.0,
                        help="onnxruntime time per export, over 10 rounds (default 3)")
    parser.add_argument("--workdir", type=Path, default=None)
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args(argv)
    known = models()
    wanted = [m for m in args.models.split(",") if m] or list(known)
    unknown = [m for m in wanted if m not in known]
    if unknown:
        parser.error(f"unknown models {unknown}; pick from {sorted(known)}")
    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="bench_onnx_"))
    workdir.mkdir(parents=True, exist_ok=True)
    rows = []
    for name in wanted:
        build, shapes = known[name]
        path = workdir / f"{name}.pb"
        if not path.exists():
            path.write_bytes(build())
        row = measure(name, path, shapes, args.repeat, args.runs, args.latency_seconds)
        rows.append(row)
        print(json.dumps(row), file=sys.stderr, flush=True)
    print(table(rows))
    print("\n".join(["", "Goals:", *goals(rows)]))
    if args.json:
        args.json.write_text(json.dumps(rows, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
