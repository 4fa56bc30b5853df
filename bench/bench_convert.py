#!/usr/bin/env python3
"""End-to-end ``convert`` time against the raw protobuf parse of the same file, and CLI start-up time.

Models (built by ``bench/bench_parser.py``'s builders into a work directory, nothing committed): a Keras
ResNet50 (weights=None) and a BERT-base-sized TF1 encoder (12 layers, hidden 768), frozen GraphDefs. Each
measurement runs in a fresh interpreter:

* floor: ``open(path).read()`` + ``GraphDef.ParseFromString``;
* convert: ``scopefusion.convert.convert(path, input_shapes=...)`` (one static profile, default passes) and
  ``Model.to_bytes("ge")``, no TensorFlow imported;
* CLI start-up: ``scopefusion --help`` (console script), median over 5 runs.

Goals: convert <= 10x the floor; CLI start-up < 0.5 s without importing TensorFlow.

Usage: python bench/bench_convert.py [--models resnet50,bert] [--repeat 3] [--workdir DIR]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "bench"))

from bench_parser import build  # noqa: E402

TIME_GOAL = 10.0
STARTUP_GOAL = 0.5
SHAPES = {
    "resnet50": {"input_0": [1, 224, 224, 3]},
    "bert": {"input_ids": [1, 128], "input_mask": [1, 128], "token_type_ids": [1, 128]},
}

_MEASURE = r"""
import json, sys, time
mode, path, shapes = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
if mode == "floor":
    from scopefusion.parser.proto import tf_framework_pb2
    start = time.perf_counter()
    with open(path, "rb") as f:
        tf_framework_pb2.GraphDef().ParseFromString(f.read())
    stages = {}
else:
    from scopefusion.convert import convert
    start = time.perf_counter()
    model = convert(path, input_shapes=shapes or None)
    model.to_bytes("ge")
    stages = model.timings
elapsed = time.perf_counter() - start
print(json.dumps({"seconds": elapsed, "stages": stages, "tensorflow": "tensorflow" in sys.modules}))
"""


def measure(mode: str, path: Path, shapes: dict) -> dict:
    out = subprocess.run([sys.executable, "-c", _MEASURE, mode, str(path), json.dumps(shapes)], capture_output=True, text=True)
    if out.returncode:
        raise SystemExit(f"{mode} on {path} failed:\n{out.stderr}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def startup() -> float:
    exe = Path(sys.executable).parent / "scopefusion"
    times = []
    for _ in range(5):
        start = time.perf_counter()
        subprocess.run([str(exe), "--help"], capture_output=True, check=True)
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--models", default="resnet50,bert")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--workdir", type=Path, default=None)
    args = parser.parse_args(argv)
    temp = None
    if args.workdir is None:
        temp = tempfile.TemporaryDirectory(prefix="sf-bench-")
        workdir = Path(temp.name)
    else:
        workdir = args.workdir
        workdir.mkdir(parents=True, exist_ok=True)
    ok = True
    try:
        for name in args.models.split(","):
            path = build(name, workdir)
            floor = statistics.median(measure("floor", path, {})["seconds"] for _ in range(args.repeat))
            runs = [measure("convert", path, SHAPES.get(name, {})) for _ in range(args.repeat)]
            conv = statistics.median(r["seconds"] for r in runs)
            ratio = conv / floor
            ok &= ratio <= TIME_GOAL and not any(r["tensorflow"] for r in runs)
            print(f"{name}: file {path.stat().st_size / 1e6:.1f} MB, parse floor {floor:.3f} s, convert {conv:.3f} s, "
                  f"ratio {ratio:.2f}x (goal <= {TIME_GOAL:.0f}x), TensorFlow imported: {any(r['tensorflow'] for r in runs)}")
            print("  stages: " + ", ".join(f"{k} {v:.3f}s" for k, v in runs[-1]["stages"].items()))
        s = startup()
        ok &= s < STARTUP_GOAL
        print(f"CLI start-up (scopefusion --help): {s:.3f} s (goal < {STARTUP_GOAL} s)")
    finally:
        if temp is not None:
            temp.cleanup()
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
