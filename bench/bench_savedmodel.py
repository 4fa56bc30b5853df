#!/usr/bin/env python3
"""SavedModel conversion time and peak memory: the native loader against the frozen ``.pb`` and against
``--savedmodel-loader tensorflow``.

Models: the model zoo written as SavedModels by ``tests/models/saved_models.py`` (Keras applications, the
Keras transformer and RNNs, the data-dependent tf.function, TF1 SavedModels), and the same models frozen
to ``.pb`` by the zoo's builders, into a work directory (built once, reused; nothing committed). Each
measurement runs in a fresh interpreter: ``convert(path)`` (default passes, the model's own shapes) and
``Model.to_bytes("ge")``; the time is the median of ``--repeat`` runs, the peak memory the process's
resident-set high-water mark (``VmHWM``), TensorFlow's import included for the tensorflow loader.

Goals: native <= 1.5x the frozen ``.pb``; the speed-up over the tensorflow loader is reported.

Usage: python bench/bench_savedmodel.py [--models keras_lstm,tf1_bert] [--repeat 3] [--workdir DIR]
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
sys.path.insert(0, str(REPO))

PB_GOAL = 1.5

_MEASURE = r"""
import json, sys, time
path, loader = sys.argv[1], sys.argv[2]
from scopefusion.convert import convert
start = time.perf_counter()
options = {"savedmodel_loader": loader} if loader != "-" else {}
model = convert(path, **options)
model.to_bytes("ge")
elapsed = time.perf_counter() - start
with open("/proc/self/status") as status:
    peak_kb = next(int(line.split()[1]) for line in status if line.startswith("VmHWM:"))
print(json.dumps({"seconds": elapsed, "load": model.timings["load"], "peak_mb": peak_kb / 1024,
                  "tensorflow": "tensorflow" in sys.modules}))
"""


def _build(names: list[str], workdir: Path) -> None:
    from tests.models.saved_models import SAVED_ZOO, write_saved_model

    for name in names:
        saved, frozen = workdir / f"{name}_savedmodel", workdir / f"{name}.pb"
        if not (saved / "saved_model.pb").is_file():
            print(f"building {name} (SavedModel)", file=sys.stderr, flush=True)
            write_saved_model(name, saved)
        if not frozen.is_file():
            print(f"building {name} (.pb)", file=sys.stderr, flush=True)
            frozen.write_bytes(SAVED_ZOO[name]())


def _measure(path: Path, loader: str, repeat: int) -> dict:
    runs = []
    env = dict(os.environ, PYTHONPATH=str(REPO), TF_CPP_MIN_LOG_LEVEL="3")
    for _ in range(repeat):
        out = subprocess.run([sys.executable, "-c", _MEASURE, str(path), loader], capture_output=True, text=True, env=env)
        if out.returncode != 0:
            raise SystemExit(f"measuring {path} ({loader}) failed:\n{out.stderr[-2000:]}")
        runs.append(json.loads(out.stdout.strip().splitlines()[-1]))
    return {
        "seconds": statistics.median(r["seconds"] for r in runs),
        "load": statistics.median(r["load"] for r in runs),
        "peak_mb": max(r["peak_mb"] for r in runs),
        "tensorflow": any(r["tensorflow"] for r in runs),
    }


def main(argv: list[str] | None = None) -> int:
    from tests.models.saved_models import SAVED_ZOO

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default=",".join(SAVED_ZOO), help="comma-separated zoo model names")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--workdir", type=Path, default=Path(tempfile.gettempdir()) / "scopefusion_bench_savedmodel")
    args = parser.parse_args(argv)
    names = [n for n in args.models.split(",") if n]
    unknown = sorted(set(names) - set(SAVED_ZOO))
    if unknown:
        raise SystemExit(f"unknown models {', '.join(unknown)}; known: {', '.join(SAVED_ZOO)}")
    args.workdir.mkdir(parents=True, exist_ok=True)
    _build(names, args.workdir)
    header = ("model", ".pb s", "native s", "native/.pb", "tf s", "speed-up", ".pb load s", "native load s",
              "tf load s", "peak MB .pb", "peak MB native", "peak MB tf", "TF imported (native)")
    rows = []
    failed = False
    for name in names:
        pb = _measure(args.workdir / f"{name}.pb", "-", args.repeat)
        native = _measure(args.workdir / f"{name}_savedmodel", "native", args.repeat)
        reference = _measure(args.workdir / f"{name}_savedmodel", "tensorflow", 1)
        ratio = native["seconds"] / pb["seconds"]
        failed |= ratio > PB_GOAL or native["tensorflow"]
        rows.append((name, f"{pb['seconds']:.2f}", f"{native['seconds']:.2f}", f"{ratio:.2f}x",
                     f"{reference['seconds']:.2f}", f"{reference['seconds'] / native['seconds']:.1f}x",
                     f"{pb['load']:.2f}", f"{native['load']:.2f}", f"{reference['load']:.2f}", f"{pb['peak_mb']:.0f}",
                     f"{native['peak_mb']:.0f}", f"{reference['peak_mb']:.0f}", str(native["tensorflow"])))
        print(f"measured {name}", file=sys.stderr, flush=True)
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
    print(" | ".join(h.ljust(w) for h, w in zip(header, widths)))
    print("-|-".join("-" * w for w in widths))
    for row in rows:
        print(" | ".join(c.ljust(w) for c, w in zip(row, widths)))
    print(f"goal: native <= {PB_GOAL}x the frozen .pb, without importing TensorFlow: {'missed' if failed else 'met'}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
