#!/usr/bin/env python3
"""``convert`` per zoo model: time per source node, first-call overhead, write speed, CLI wall time, memory.

Models: the zoo of ``tests/e2e/zoo.py`` (TF1 BERT, Keras ResNet50, MobileNetV2, EfficientNetB0, a Keras
transformer encoder, the PyTorch encoders in ``testdata/``) and a BERT-base-sized TF1 encoder (12 layers,
hidden 768, built by ``bench/bench_parser.py``). TF models are built from code into the work directory by
a child process (a model already there is reused). Each model is measured in a fresh interpreter that
never imports TensorFlow, in this order:

* post-import baseline: RSS after ``from scopefusion.convert import convert``; the peak-RSS mark is reset
  there (``/proc/self/clear_refs``);
* first: the process's first ``convert`` (zoo static profile, default passes) with what it leaves to first
  use made at once (every profile and its memory plan: what a GE write reads), then the writes;
* write GE / ONNX: ``Model.save(path, format)``, the streaming path (weights go from the mapped model file
  or their arrays to the output file, :mod:`scopefusion.serde.weight_stream`), without its final ``fsync``,
  which is timed apart ("fsync" columns: the flush to the disk, bounded by the device); MB/s counts the
  model's weight bytes (the source constants) over the write without the fsync;
* peak: ``VmHWM`` above the baseline, over the first conversion and both writes (file-backed pages the
  process maps count in it, so weights read through the model file's mapping count too);
* then both saves again ("a second save": imports done, as for a process that writes many models), and the
  CPU time of each save (less sensitive to a loaded machine than the wall time);
* warm: a second ``convert`` of the same file in the same process, measured as ``first``; µs per node = warm / source nodes;
  first-call overhead = first - warm;
* raw parse: reading the file and ``ParseFromString`` of the framework's protobuf (GraphDef or ModelProto).

Then ``scopefusion convert MODEL -o OUT --input-shape ... -q`` is timed as a command (wall time), and, for
TF models where tf2onnx imports, tf2onnx's in-process ``from_graph_def`` of the same frozen graph in a child
process (TensorFlow imported before the clock starts; not on graphs over 200 MB, where it holds over 10 GB);
"tf2onnx x" is tf2onnx's time over our warm convert.
Each model is measured in ``--runs`` fresh processes (default 3) and the CLI run as many times; the table
shows the medians (the largest peak), so that one process slowed by the machine does not decide a goal;
tf2onnx runs once. Compare ratios from one run, the machine may be loaded. The children cache
bytecode as an installed package does (``PYTHONPYCACHEPREFIX`` in the work directory, compiled first).

Goals (ratios): warm <= 50 µs per node; first <= warm + 100 ms; CLI wall <= first + write GE (with its fsync)
+ 0.35 s;
write >= 1 GB/s on ResNet50 and the BERT-base encoder; peak <= 1.5x the file size on those two.

Usage: python bench/bench_convert.py [--quick] [--models tf1_bert,resnet50] [--workdir DIR] [--no-tf2onnx] [--runs N]
  --quick skips the large models (ResNet50 and the BERT-base encoder).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench"))
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

from bench_parser import build as build_large  # noqa: E402
from model_zoo_report import model_path  # noqa: E402

from tests.e2e.zoo import BY_NAME  # noqa: E402

PER_NODE_GOAL_US = 50.0
FIRST_CALL_GOAL_S = 0.1
CLI_GOAL_S = 0.35
WRITE_GOAL_MBPS = 1000.0
MEMORY_GOAL = 1.5
TF2ONNX_MAX_BYTES = 200e6  # tf2onnx is not run on larger graphs (the BERT-base encoder took > 10 GB and minutes)
BERT_BASE = "bert_base"
MODELS = (
    "tf1_bert", "resnet50", "mobilenet_v2", "efficientnet_b0", "keras_transformer",
    "torch_encoder_opset14", "torch_encoder_opset17", BERT_BASE,
)  # fmt: skip
LARGE = ("resnet50", BERT_BASE)
BERT_BASE_SHAPES = {"input_ids": [1, 128], "input_mask": [1, 128], "token_type_ids": [1, 128]}

_MEASURE = r"""
import json, os, sys, time
path, shapes, out_dir = sys.argv[1], json.loads(sys.argv[2]), sys.argv[3]

def status(key):
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(key + ":"):
                return int(line.split()[1]) * 1024

from scopefusion.convert import convert
try:
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")
except OSError:
    pass
baseline = status("VmRSS")

def converted():
    # convert plus what it leaves to first use (profiles, memory plans): all a GE write reads
    made = convert(path, input_shapes=shapes)
    for profile in made.profiles:
        profile.memory_plan
    return made

start = time.perf_counter()
model = converted()
first = time.perf_counter() - start
first_stages = dict(model.timings)
nodes = len(model.source.nodes)
weight_bytes = sum(n.value.nbytes for n in model.source.nodes if n.value is not None)
flushing = [0.0]
_fsync = os.fsync

def timed_fsync(fd):
    start = time.perf_counter()
    _fsync(fd)
    flushing[0] += time.perf_counter() - start

def save_both():
    writes = {}
    for fmt in ("ge", "onnx"):
        out = os.path.join(out_dir, "out." + fmt)
        flushing[0] = 0.0
        start, cpu = time.perf_counter(), time.process_time()
        model.save(out, fmt)
        seconds, cpu = time.perf_counter() - start, time.process_time() - cpu
        writes[fmt] = {"seconds": seconds - flushing[0], "fsync": flushing[0], "cpu": cpu, "bytes": os.path.getsize(out)}
        os.unlink(out)
    return writes

os.fsync = timed_fsync  # Model.save flushes the file to the disk before naming it: timed apart
writes = save_both()
peak = status("VmHWM") - baseline
writes_again = save_both()
os.fsync = _fsync
del model
start = time.perf_counter()
model = converted()
warm = time.perf_counter() - start
warm_stages = dict(model.timings)
framework = model.source.framework
del model
start = time.perf_counter()
with open(path, "rb") as f:
    raw = f.read()
if framework == "onnx":
    import onnx
    onnx.ModelProto().ParseFromString(raw)
else:
    from scopefusion.parser.proto import tf_framework_pb2 as pb
    pb.GraphDef().ParseFromString(raw)
parse = time.perf_counter() - start
print(json.dumps({"nodes": nodes, "weight_bytes": weight_bytes, "first": first, "warm": warm, "parse": parse,
                  "writes": writes, "writes_again": writes_again, "peak": peak, "first_stages": first_stages, "warm_stages": warm_stages,
                  "framework": framework, "tensorflow": "tensorflow" in sys.modules,
                  "onnxruntime": "onnxruntime" in sys.modules}))
"""

_TF2ONNX = r"""
import json, sys, time, os
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
path, shapes = sys.argv[1], json.loads(sys.argv[2])
try:
    import tensorflow as tf
    import tf2onnx
except Exception as e:
    print(json.dumps({"error": f"tf2onnx does not import: {type(e).__name__}: {e}"}))
    raise SystemExit(0)
graph_def = tf.compat.v1.GraphDef()
with open(path, "rb") as f:
    graph_def.ParseFromString(f.read())
consumed = {i.split(":")[0].lstrip("^") for n in graph_def.node for i in n.input}
inputs = [n.name + ":0" for n in graph_def.node if n.op == "Placeholder"]
outputs = [n.name + ":0" for n in graph_def.node if n.name not in consumed and n.op not in ("Const", "NoOp", "Placeholder")]
try:
    start = time.perf_counter()
    tf2onnx.convert.from_graph_def(graph_def, input_names=inputs, output_names=outputs, opset=17)
    seconds = time.perf_counter() - start
except Exception as e:
    print(json.dumps({"error": f"tf2onnx failed: {type(e).__name__}: {str(e).splitlines()[0][:160]}"}))
    raise SystemExit(0)
print(json.dumps({"seconds": seconds}))
"""


def _env() -> dict[str, str]:
    """The children's environment: this checkout first on the path, and bytecode cached (under the work
    directory, see :func:`compile_package`) as in an installed package."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")])))
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    env.setdefault("PYTHONPYCACHEPREFIX", _PYCACHE[0])
    return env


_PYCACHE = [""]


def compile_package(workdir: Path) -> None:
    """Fills the bytecode cache ``workdir/pycache`` (scopefusion and what a conversion imports, by
    converting a small TF and a small ONNX model once), so that no measurement pays for compiling."""
    _PYCACHE[0] = str(workdir / "pycache")
    subprocess.run([sys.executable, "-m", "compileall", "-q", str(REPO / "scopefusion")], env=_env(), check=True)
    code = (
        "import sys\nfrom scopefusion.convert import convert\n"
        "for path in sys.argv[1:]:\n    m = convert(path)\n    m.to_bytes('ge'); m.to_bytes('onnx')\n"
    )
    models = [str(REPO / "testdata" / "bert_tiny.pb"), str(REPO / "testdata" / "torch_encoder_opset17.onnx")]
    subprocess.run([sys.executable, "-c", code, *models], env=_env(), check=True, capture_output=True)


def _child(script: str, *args: str, required: bool = True) -> dict:
    out = subprocess.run([sys.executable, "-c", script, *args], capture_output=True, text=True, env=_env())
    lines = out.stdout.strip().splitlines()
    if out.returncode or not lines:
        if required:
            raise SystemExit(f"measuring {args[0]} failed:\n{out.stderr[-3000:]}")
        last = (out.stderr.strip().splitlines() or ["no message"])[-1][:160]
        return {"error": f"the process exited with code {out.returncode}: {last}"}
    return json.loads(lines[-1])


def model_file(name: str, workdir: Path) -> tuple[Path, dict]:
    if name == BERT_BASE:
        return build_large("bert", workdir), BERT_BASE_SHAPES
    zoo = BY_NAME[name]
    return model_path(zoo, workdir), {k: list(v) for k, v in zoo.input_shapes.items()}


def cli_wall(path: Path, shapes: dict, out_dir: Path) -> float:
    exe = shutil.which("scopefusion", path=str(Path(sys.executable).parent))
    command = [exe] if exe else [sys.executable, "-m", "scopefusion.cli"]
    shape = ";".join(f"{k}:{','.join(map(str, v))}" for k, v in shapes.items())
    args = [*command, "convert", str(path), "-o", str(out_dir / "cli.ge"), "--input-shape", shape, "-q"]
    start = time.perf_counter()
    out = subprocess.run(args, capture_output=True, text=True, env=_env())
    seconds = time.perf_counter() - start
    if out.returncode:
        raise SystemExit(f"scopefusion convert {path} failed:\n{out.stderr[-3000:]}")
    return seconds


def median_row(runs: list[dict]) -> dict:
    """One row from the rows of several fresh processes: the median of every timing (first, warm, parse, the
    writes' seconds, fsync and CPU), the largest peak; the rest (counts, stages of the median warm run) as the
    run whose warm time is the median has them."""
    ordered = sorted(runs, key=lambda r: r["warm"])
    row = json.loads(json.dumps(ordered[len(ordered) // 2]))
    for key in ("first", "warm", "parse"):
        row[key] = statistics.median(r[key] for r in runs)
    for writes in ("writes", "writes_again"):
        for fmt, fields in row[writes].items():
            for field in ("seconds", "fsync", "cpu"):
                fields[field] = statistics.median(r[writes][fmt][field] for r in runs)
    row["peak"] = max(r["peak"] for r in runs)
    row["first_call_runs"] = [r["first"] - r["warm"] for r in runs]
    return row


def measure(name: str, workdir: Path, tf2onnx: bool, runs: int = 3) -> dict:
    path, shapes = model_file(name, workdir)
    with tempfile.TemporaryDirectory(prefix="sf-bench-out-") as tmp:
        row = median_row([_child(_MEASURE, str(path), json.dumps(shapes), tmp) for _ in range(runs)])
        row["cli"] = statistics.median(cli_wall(path, shapes, Path(tmp)) for _ in range(runs))
    row["model"] = name
    row["file_bytes"] = path.stat().st_size
    if tf2onnx and row["framework"] != "onnx" and row["file_bytes"] > TF2ONNX_MAX_BYTES:
        row["tf2onnx"] = {"error": f"not run: tf2onnx held over 10 GB of memory on a {row['file_bytes'] / 1e6:.0f} MB graph"}
    elif tf2onnx and row["framework"] != "onnx":
        row["tf2onnx"] = _child(_TF2ONNX, str(path), json.dumps(shapes), required=False)
    return row


def _mbps(row: dict, fmt: str) -> float:
    return row["weight_bytes"] / 1e6 / max(row["writes"][fmt]["seconds"], 1e-9)


COLUMNS = (
    "model", "nodes", "file MB", "raw parse ms", "warm ms", "µs/node", "first ms", "first-call ms",
    "write GE ms", "GE MB/s", "fsync GE ms", "write ONNX ms", "ONNX MB/s", "fsync ONNX ms", "CLI wall s", "peak MB", "peak/file", "tf2onnx s", "tf2onnx x",
)  # fmt: skip


def cells(row: dict) -> list[str]:
    tf2 = row.get("tf2onnx")
    if tf2 is None:
        tf2_s = "n/a (ONNX input)" if row["framework"] == "onnx" else "not run (--no-tf2onnx)"
    else:
        error = tf2.get("error")
        tf2_s = f"{tf2['seconds']:.2f}" if error is None else "not run" if error.startswith("not run") else "error"
    tf2_x = f"{tf2['seconds'] / row['warm']:.1f}" if tf2 and "seconds" in tf2 else "-"
    return [
        row["model"], f"{row['nodes']:,}", f"{row['file_bytes'] / 1e6:.1f}", f"{row['parse'] * 1e3:.0f}",
        f"{row['warm'] * 1e3:.0f}", f"{row['warm'] / row['nodes'] * 1e6:.0f}", f"{row['first'] * 1e3:.0f}",
        f"{(row['first'] - row['warm']) * 1e3:.0f}",
        f"{row['writes']['ge']['seconds'] * 1e3:.0f}", f"{_mbps(row, 'ge'):.0f}", f"{row['writes']['ge']['fsync'] * 1e3:.0f}",
        f"{row['writes']['onnx']['seconds'] * 1e3:.0f}", f"{_mbps(row, 'onnx'):.0f}", f"{row['writes']['onnx']['fsync'] * 1e3:.0f}",
        f"{row['cli']:.2f}", f"{row['peak'] / 1e6:.0f}", f"{row['peak'] / row['file_bytes']:.2f}", tf2_s, tf2_x,
    ]  # fmt: skip


def goals(row: dict) -> list[str]:
    """The goals this row misses, one phrase each."""
    missed = []
    per_node = row["warm"] / row["nodes"] * 1e6
    if per_node > PER_NODE_GOAL_US:
        missed.append(f"{per_node:.0f} µs/node > {PER_NODE_GOAL_US:.0f}")
    if row["first"] - row["warm"] > FIRST_CALL_GOAL_S:
        missed.append(f"first-call overhead {(row['first'] - row['warm']) * 1e3:.0f} ms > {FIRST_CALL_GOAL_S * 1e3:.0f}")
    cli_extra = row["cli"] - row["first"] - row["writes"]["ge"]["seconds"] - row["writes"]["ge"]["fsync"]
    if cli_extra > CLI_GOAL_S:
        missed.append(f"CLI adds {cli_extra:.2f} s > {CLI_GOAL_S}")
    if row["model"] in LARGE:
        for fmt in ("ge", "onnx"):
            if _mbps(row, fmt) < WRITE_GOAL_MBPS:
                missed.append(f"write {fmt} {_mbps(row, fmt):.0f} MB/s < {WRITE_GOAL_MBPS:.0f}")
        if row["peak"] / row["file_bytes"] > MEMORY_GOAL:
            missed.append(f"peak {row['peak'] / row['file_bytes']:.2f}x file > {MEMORY_GOAL}")
    if row["tensorflow"] or row["onnxruntime"]:
        missed.append("convert imported " + " and ".join(m for m in ("tensorflow", "onnxruntime") if row[m]))
    return missed


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--models", default=",".join(MODELS), help="comma-separated: " + ", ".join(MODELS))
    parser.add_argument("--quick", action="store_true", help="skip the large models (" + ", ".join(LARGE) + ")")
    parser.add_argument("--workdir", type=Path, help="where built models are kept (default: a temporary directory)")
    parser.add_argument("--no-tf2onnx", action="store_true", help="do not time tf2onnx")
    parser.add_argument("--runs", type=int, default=3,
                        help="fresh processes per model (and CLI runs); the table shows their medians (default 3)")
    parser.add_argument("--json", type=Path, help="also write the rows as JSON here")
    args = parser.parse_args(argv)
    names = [n for n in args.models.split(",") if n and not (args.quick and n in LARGE)]
    unknown = [n for n in names if n not in BY_NAME and n != BERT_BASE]
    if unknown:
        parser.error(f"unknown model(s) {', '.join(unknown)}; choose from {', '.join(MODELS)}")
    with tempfile.TemporaryDirectory(prefix="sf-bench-") as tmp:
        workdir = args.workdir or Path(tmp)
        workdir.mkdir(parents=True, exist_ok=True)
        compile_package(workdir)
        rows = []
        for name in names:
            rows.append(measure(name, workdir, tf2onnx=not args.no_tf2onnx, runs=max(1, args.runs)))
            print(f"measured {name}", file=sys.stderr, flush=True)
    print("| " + " | ".join(COLUMNS) + " |")
    print("|---|" + "---:|" * (len(COLUMNS) - 1))
    for row in rows:
        print("| " + " | ".join(cells(row)) + " |")
    print()
    failed = False
    for row in rows:
        stages = ", ".join(f"{k} {v * 1e3:.0f}" for k, v in row["warm_stages"].items())
        print(f"{row['model']}: warm stages (ms) {stages}")
        print("  first-call ms per process: " + ", ".join(f"{s * 1e3:.0f}" for s in row["first_call_runs"]))
        again = row["writes_again"]
        print("  write: CPU time of the first saves " + ", ".join(
            f"{fmt.upper()} {row['writes'][fmt]['cpu'] * 1e3:.0f} ms" for fmt in ("ge", "onnx")) + "; a second save "
            + ", ".join(f"{fmt.upper()} {again[fmt]['seconds'] * 1e3:.0f} ms ({row['weight_bytes'] / 1e6 / max(again[fmt]['seconds'], 1e-9):.0f} "
                        f"MB/s, fsync {again[fmt]['fsync'] * 1e3:.0f} ms, CPU {again[fmt]['cpu'] * 1e3:.0f} ms)" for fmt in ("ge", "onnx")))
        tf2 = row.get("tf2onnx")
        if tf2 and "error" in tf2:
            print(f"  tf2onnx: {tf2['error']}")
        missed = goals(row)
        failed |= bool(missed)
        if missed:
            print("  goals missed: " + "; ".join(missed))
    if args.json:
        args.json.write_text(json.dumps(rows, indent=2) + "\n")
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
