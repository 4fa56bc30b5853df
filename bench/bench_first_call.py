#!/usr/bin/env python3
"""First-call overhead of ``convert`` in CPU time: a fresh process's first conversion against its second.

For each model, ``--runs`` fresh interpreters (one more first, to fill the bytecode cache, not counted) each
import ``scopefusion.convert`` (the baseline), then time ``convert`` plus every profile's memory plan (as
``bench_convert.py`` does) twice with ``time.process_time`` and ``time.perf_counter``. The table gives the
medians of the first call, the second, and of their difference per process: the first-call overhead, imports
and first uses included. CPU time is less sensitive to a loaded machine than wall time; the process's CPU time
counts every thread, so the worker threads numpy's BLAS (OpenBLAS) starts when numpy is imported count in it
(they spin for a while, waiting for work, as numpy's import ends): the column "of the converting thread"
(``time.thread_time``) leaves them out. ``OPENBLAS_NUM_THREADS=1`` in the environment starts none.

Then, for the first model, the CPU time of what its first call imports, by group, imported group after group
in fresh processes: numpy, protobuf, the model format's generated messages, scopefusion's own modules, the
rest (a group's time includes the modules it pulls in that no earlier group did).

``--repo`` measures another checkout (e.g. an older commit exported with ``git archive``) with this script.

Usage: python bench/bench_first_call.py [--models bert_base,tf1_bert] [--runs 5] [--workdir DIR] [--repo DIR]
  Models: the TF zoo models in ``--workdir`` (built there by ``bench_convert.py``; default /tmp/sf17-zoo),
  ``bert_base`` (``bert.pb`` there) and the PyTorch encoders in ``testdata/``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent

SHAPES: dict[str, tuple[str, dict[str, list[int]]]] = {
    "bert_base": ("bert.pb", {"input_ids": [1, 128], "input_mask": [1, 128], "token_type_ids": [1, 128]}),
    "tf1_bert": ("zoo_tf1_bert.pb", {n: [2, 8] for n in ("input_ids", "input_mask", "token_type_ids")}),
    "resnet50": ("zoo_resnet50.pb", {"input_0": [1, 64, 64, 3]}),
    "mobilenet_v2": ("zoo_mobilenet_v2.pb", {"input_0": [2, 32, 32, 3]}),
    "torch_encoder_opset17": ("testdata/torch_encoder_opset17.onnx", {}),
    "torch_encoder_opset14": ("testdata/torch_encoder_opset14.onnx", {}),
}

_MEASURE = r"""
import json, sys, time
path, shapes = sys.argv[1], json.loads(sys.argv[2])
from scopefusion.convert import convert

def converted():
    made = convert(path, input_shapes=shapes or None)
    for profile in made.profiles:
        profile.memory_plan
    return made

cpu, own, wall = time.process_time(), time.thread_time(), time.perf_counter()
model = converted()
first_cpu, first_own, first_wall = time.process_time() - cpu, time.thread_time() - own, time.perf_counter() - wall
del model
cpu, own, wall = time.process_time(), time.thread_time(), time.perf_counter()
model = converted()
warm_cpu, warm_own, warm_wall = time.process_time() - cpu, time.thread_time() - own, time.perf_counter() - wall
print(json.dumps({"first_cpu": first_cpu, "warm_cpu": warm_cpu, "first_wall": first_wall, "warm_wall": warm_wall,
                  "first_own": first_own, "warm_own": warm_own,
                  "frameworks": [m for m in ("tensorflow", "onnx", "onnxruntime") if m in sys.modules]}))
"""

_BREAKDOWN = r"""
import importlib, json, sys, time
path, shapes = sys.argv[1], json.loads(sys.argv[2])
from scopefusion.convert import convert
before = set(sys.modules)
model = convert(path, input_shapes=shapes or None)  # to learn what a first conversion imports
imported = [m for m in sys.modules if m not in before]
print(json.dumps(imported))
"""

_TIMED_IMPORTS = r"""
import importlib, json, sys, time
groups = json.loads(sys.argv[1])
from scopefusion.convert import convert
out = {}
for label, names in groups:
    start = time.process_time()
    for name in names:
        try:
            importlib.import_module(name)
        except ImportError:
            pass
    out[label] = time.process_time() - start
print(json.dumps(out))
"""


def _env(repo: Path, workdir: Path) -> dict[str, str]:
    env = dict(os.environ, PYTHONPATH=str(repo), PYTHONPYCACHEPREFIX=str(workdir / "pycache"))
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    return env


def _run(script: str, args: list[str], env: dict[str, str]) -> object:
    # run in the measured checkout: ``python -c`` puts the working directory first on the path
    out = subprocess.run([sys.executable, "-c", script, *args], capture_output=True, text=True, env=env,
                         cwd=env["PYTHONPATH"])
    if out.returncode:
        raise SystemExit(f"the measuring process failed:\n{out.stderr[-3000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def _groups(imported: list[str]) -> list[tuple[str, list[str]]]:
    """Imported module names grouped by what pays for them, in import order."""
    order = {"numpy": [], "protobuf": [], "generated messages": [], "scopefusion": [], "other": []}
    for name in imported:
        top = name.split(".")[0]
        if top == "numpy":
            order["numpy"].append(name)
        elif top == "google":
            order["protobuf"].append(name)
        elif name.startswith("scopefusion.") and name.endswith("_pb2"):
            order["generated messages"].append(name)
        elif top == "scopefusion":
            order["scopefusion"].append(name)
        else:
            order["other"].append(name)
    return list(order.items())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--models", default="bert_base,tf1_bert,resnet50,mobilenet_v2,torch_encoder_opset17")
    parser.add_argument("--runs", type=int, default=5, help="fresh processes per model (default 5)")
    parser.add_argument("--workdir", type=Path, default=Path("/tmp/sf17-zoo"), help="where the zoo models are")
    parser.add_argument("--repo", type=Path, default=REPO, help="the checkout to measure (default: this one)")
    parser.add_argument("--no-breakdown", action="store_true", help="skip the import breakdown")
    args = parser.parse_args(argv)
    env = _env(args.repo, args.workdir)
    subprocess.run([sys.executable, "-m", "compileall", "-q", str(args.repo / "scopefusion")], env=env,
                   check=True, capture_output=True)
    print(f"first-call overhead of convert, {args.runs} fresh processes per model, medians (ms); repo {args.repo}")
    print("| model | first CPU | second CPU | first - second CPU | first - second CPU of the converting thread "
          "| first wall | second wall | first - second wall |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    first_model = None
    for name in filter(None, args.models.split(",")):
        if name not in SHAPES:
            parser.error(f"unknown model {name}; choose from {', '.join(SHAPES)}")
        file, shapes = SHAPES[name]
        path = (REPO / file) if file.startswith("testdata/") else (args.workdir / file)
        if not path.exists():
            print(f"| {name} | missing: {path} (build the zoo with bench/bench_convert.py --workdir) |")
            continue
        first_model = first_model or (path, shapes)
        rows = [_run(_MEASURE, [str(path), json.dumps(shapes)], env) for _ in range(args.runs + 1)][1:]

        def med(key: str, rows: list = rows) -> float:
            return statistics.median(r[key] for r in rows) * 1e3

        over_cpu = statistics.median(r["first_cpu"] - r["warm_cpu"] for r in rows) * 1e3
        over_own = statistics.median(r["first_own"] - r["warm_own"] for r in rows) * 1e3
        over_wall = statistics.median(r["first_wall"] - r["warm_wall"] for r in rows) * 1e3
        print(f"| {name} | {med('first_cpu'):.1f} | {med('warm_cpu'):.1f} | {over_cpu:.1f} | {over_own:.1f} "
              f"| {med('first_wall'):.1f} "
              f"| {med('warm_wall'):.1f} | {over_wall:.1f} |")
        if rows[0]["frameworks"]:
            print(f"  the conversion imported {', '.join(rows[0]['frameworks'])}")
    if first_model and not args.no_breakdown:
        path, shapes = first_model
        imported = _run(_BREAKDOWN, [str(path), json.dumps(shapes)], env)
        groups = _groups(imported)  # type: ignore[arg-type]
        runs = [_run(_TIMED_IMPORTS, [json.dumps(groups)], env) for _ in range(args.runs)]
        print(f"\nCPU time of the modules a first conversion of {path.name} imports (median ms, group after group):")
        for label, names in groups:
            cpu = statistics.median(r[label] for r in runs) * 1e3  # type: ignore[index]
            print(f"  {label}: {cpu:.1f} ({len(names)} modules)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
