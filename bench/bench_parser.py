#!/usr/bin/env python3
"""Parser speed and memory against the protobuf floor, on a Keras ResNet50 and a BERT-base encoder.

The models are built from code (ResNet50 with weights=None; a BERT-base encoder written as a TF1 graph
with 12 layers, hidden 768, vocab 30522) and frozen into ``.pb`` files in a temporary directory (~100 MB
and ~440 MB; nothing is committed). Each measurement runs in a fresh interpreter that never imports
TensorFlow:

* floor: ``open(path).read()`` + ``GraphDef.ParseFromString`` (our generated class, upb);
* load: ``scopefusion.parser.load(path)`` to a complete SourceGraph.

Time is the median wall time over ``--repeat`` runs; memory is the peak RSS (``VmHWM``, reset with
``/proc/self/clear_refs`` right before the measured call; ``ru_maxrss`` is not used because Linux keeps it
across ``exec`` from the parent) above the RSS the interpreter had right before the call (after imports). Goals: load time <= 3x the
floor, load peak memory above baseline <= 1.5x the file size.

Usage: python bench/bench_parser.py [--models resnet50,bert] [--repeat 3] [--workdir DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
TIME_GOAL = 3.0
MEMORY_GOAL = 1.5

_MEASURE = r"""
import json, os, sys, time
mode, path = sys.argv[1], sys.argv[2]
from scopefusion.parser import load
from scopefusion.parser.proto import tf_framework_pb2

def status(key):
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(key + ":"):
                return int(line.split()[1]) * 1024

try:  # reset the peak-RSS mark to the current RSS (Linux >= 4.0), so imports do not count
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")
except OSError:
    pass
baseline = status("VmRSS")
start = time.perf_counter()
if mode == "floor":
    with open(path, "rb") as f:
        data = f.read()
    graph = tf_framework_pb2.GraphDef()
    graph.ParseFromString(data)
    count = len(graph.node)
else:
    graph = load(path)
    count = len(graph.nodes)
elapsed = time.perf_counter() - start
peak = status("VmHWM")
print(json.dumps({"seconds": elapsed, "peak_above_baseline": peak - baseline, "nodes": count,
                  "tensorflow_imported": "tensorflow" in sys.modules}))
"""


_BUILD = r"""
import sys
from pathlib import Path
from tests.models import tf_models
name, path = sys.argv[1], Path(sys.argv[2])
if name == "resnet50":
    data = tf_models.keras_resnet50(224)
else:
    data = tf_models.bert_encoder_tf1(num_layers=12, hidden=768, heads=12, intermediate=3072, vocab=30522, seq=128,
                                      max_position=512)
path.write_bytes(data)
"""


def build(name: str, workdir: Path) -> Path:
    """Builds and freezes a model with TensorFlow in a child process (so this one stays small)."""
    if name not in ("resnet50", "bert"):
        raise SystemExit(f"unknown model {name!r}; expected resnet50 or bert")
    path = workdir / f"{name}.pb"
    if not path.exists():
        env = dict(os.environ, PYTHONPATH=str(REPO), TF_CPP_MIN_LOG_LEVEL="2")
        result = subprocess.run([sys.executable, "-c", _BUILD, name, str(path)], capture_output=True, text=True, env=env)
        if result.returncode != 0:
            raise SystemExit(f"building {name} failed:\n{result.stderr}")
    return path


def measure(mode: str, path: Path) -> dict:
    env = dict(os.environ, PYTHONPATH=str(REPO))
    result = subprocess.run([sys.executable, "-c", _MEASURE, mode, str(path)], capture_output=True, text=True, env=env)
    if result.returncode != 0:
        raise SystemExit(f"{mode} on {path} failed:\n{result.stderr}")
    return json.loads(result.stdout.strip().splitlines()[-1])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default="resnet50,bert")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--workdir", type=Path, default=None, help="reuse built models here (default: a temp dir)")
    args = parser.parse_args(argv)
    temp = None
    if args.workdir is None:
        temp = tempfile.TemporaryDirectory(prefix="bench_parser_")
        workdir = Path(temp.name)
    else:
        workdir = args.workdir
        workdir.mkdir(parents=True, exist_ok=True)
    failed = False
    try:
        paths = {name: build(name, workdir) for name in args.models.split(",")}
        print(f"{'model':10} {'file MB':>8} {'nodes':>6} {'floor s':>8} {'load s':>8} {'time x':>7} "
              f"{'floor mem MB':>12} {'load mem MB':>11} {'mem/file':>8}")
        for name, path in paths.items():
            size = path.stat().st_size
            runs = {mode: [measure(mode, path) for _ in range(args.repeat)] for mode in ("floor", "load")}
            assert not any(r["tensorflow_imported"] for r in runs["load"]), "load imported TensorFlow"
            floor = statistics.median(r["seconds"] for r in runs["floor"])
            load = statistics.median(r["seconds"] for r in runs["load"])
            floor_mem = max(r["peak_above_baseline"] for r in runs["floor"])
            load_mem = max(r["peak_above_baseline"] for r in runs["load"])
            time_ratio = load / floor
            mem_ratio = load_mem / size
            failed |= time_ratio > TIME_GOAL or mem_ratio > MEMORY_GOAL
            print(f"{name:10} {size / 1e6:8.1f} {runs['load'][0]['nodes']:6d} {floor:8.3f} {load:8.3f} "
                  f"{time_ratio:7.2f} {floor_mem / 1e6:12.1f} {load_mem / 1e6:11.1f} {mem_ratio:8.3f}")
        print(f"goals: load time <= {TIME_GOAL}x floor, load peak memory above baseline <= {MEMORY_GOAL}x file size: "
              f"{'missed' if failed else 'met'}")
    finally:
        if temp is not None:
            temp.cleanup()
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
