#!/usr/bin/env python3
"""``verify`` on every model of the model zoo, with every builtin fusion rule enabled: max abs error and time.

Each model (``tests/e2e/zoo.py``; TF models built from code into the work directory, PyTorch ONNX exports
from ``testdata/``) is verified on its static profile: converted with all builtin passes on (general and
non-general), run by the reference executor in checked mode and by its own framework (TensorFlow or
onnxruntime) on the same seeded inputs. Printed as a Markdown table: fusions applied, max abs error over
all outputs, verdict, and the wall time of ``verify`` (conversion, both runs, comparison).

Usage: python bench/verify_zoo.py [--models tf1_bert,keras_lstm] [--workdir DIR]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench"))
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

from model_zoo_report import model_path  # noqa: E402

from tests.e2e.zoo import BY_NAME, ZOO  # noqa: E402


def builtin_pass_names() -> list[str]:
    from scopefusion.convert import fusion_setup

    registry, _ = fusion_setup(entry_points=False)
    return [p.name for p in registry.passes() if p.is_builtin]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--models", default=",".join(m.name for m in ZOO))
    parser.add_argument("--workdir", type=Path, default=None)
    args = parser.parse_args(argv)
    temp = None
    if args.workdir is None:
        temp = tempfile.TemporaryDirectory(prefix="sf-verify-")
        workdir = Path(temp.name)
    else:
        workdir = args.workdir
        workdir.mkdir(parents=True, exist_ok=True)
    from scopefusion.errors import ScopeFusionError
    from scopefusion.verify import verify

    passes = builtin_pass_names()
    print(f"builtin passes enabled: {', '.join(passes)}\n")
    print("| model | fusions | max abs error | result | verify s |")
    print("|---|---|---|---|---|")
    ok = True
    try:
        for name in args.models.split(","):
            model = BY_NAME[name]
            path = model_path(model, workdir)
            start = time.perf_counter()
            try:
                report = verify(path, input_shapes=dict(model.input_shapes), enable=passes)
            except ScopeFusionError as e:
                ok = False
                print(f"| {name} | - | - | error: {e} | {time.perf_counter() - start:.1f} |")
                continue
            seconds = time.perf_counter() - start
            fusions = ", ".join(f"{k} {v}" for k, v in report.fusions.items()) or "none"
            ok &= report.ok
            print(f"| {name} | {fusions} | {report.max_abs:.2e} | {'match' if report.ok else 'MISMATCH'} | {seconds:.1f} |")
    finally:
        if temp is not None:
            temp.cleanup()
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
