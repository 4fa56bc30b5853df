#!/usr/bin/env python3
"""The model zoo, measured: each model converted with its static profile, one table row each.

Models: ``tests/e2e/zoo.py`` (Keras ResNet50 / MobileNetV2 / EfficientNetB0, a Keras transformer encoder,
a TF1 BERT, Keras LSTM and GRU, a TF1 ``dynamic_rnn``, a data-dependent ``tf.function``, and the PyTorch
ONNX exports in ``testdata/``). TF models are built from code into the work directory first (TensorFlow
is imported for that only; a model already there is reused), then each is converted in this process.

Columns: IR nodes of the main graph; ops left uninferred (goal 0); dynamic tensors of the static profile
and of the main graph (the model's own shapes); the profile's arena bytes, its lower bound and their ratio
(goal <= 1.05); seconds for ``convert``. Printed as a Markdown table; ``--json`` writes the rows too.

Usage: python bench/model_zoo_report.py [--models resnet50,keras_lstm] [--workdir DIR] [--json FILE]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

from tests.e2e.zoo import BY_NAME, TESTDATA, ZOO, ZooModel  # noqa: E402

RATIO_GOAL = 1.05
COLUMNS = (
    "model", "nodes", "ops uninferred", "dynamic tensors", "dynamic (main)",
    "arena bytes", "lower bound", "ratio", "convert s",
)  # fmt: skip


def model_path(model: ZooModel, workdir: Path) -> Path:
    """The model's file, built into ``workdir`` when it is built from code and not there yet."""
    if model.builder is None:
        return TESTDATA / model.file_name
    path = workdir / model.file_name
    if not path.exists():
        start = time.perf_counter()
        data = model.builder()
        tmp = path.with_suffix(".tmp")
        tmp.write_bytes(data)
        tmp.replace(path)
        print(f"built {path.name} ({len(data):,} bytes) in {time.perf_counter() - start:.1f} s", file=sys.stderr)
    return path


def warm_up() -> None:
    """Imports what ``convert`` imports lazily and loads every op definition, so that the first row's
    time is not the package's import time."""
    from scopefusion import convert as _convert  # noqa: F401
    from scopefusion.dialects import default_op_registry
    from scopefusion.ir_builder import build, memory_plan, profiles, shape_inference  # noqa: F401
    from scopefusion.parser import load  # noqa: F401

    default_op_registry()


def measure(model: ZooModel, path: Path) -> dict:
    from scopefusion.convert import convert

    start = time.perf_counter()
    converted = convert(path, input_shapes=model.input_shapes)
    seconds = time.perf_counter() - start
    (profile,) = converted.profiles
    plan = profile.memory_plan
    plan.validate()
    return {
        "model": model.name,
        "nodes": len(converted.graph.nodes),
        "ops uninferred": len(converted.uninferred_ops()),
        "uninferred": converted.uninferred_ops(),
        "dynamic tensors": len(profile.inference.dynamic_values),
        "dynamic (main)": len(converted.inference.dynamic_values),
        "arena bytes": plan.arena_bytes,
        "lower bound": plan.lower_bound_bytes,
        "ratio": round(plan.ratio, 4),
        "convert s": round(seconds, 2),
    }


def table(rows: list[dict]) -> str:
    def cell(row: dict, column: str) -> str:
        value = row[column]
        return f"{value:,}" if isinstance(value, int) and column.endswith(("bytes", "bound")) else str(value)

    rule = "|" + "|".join("---" if c == "model" else "---:" for c in COLUMNS) + "|"
    lines = ["| " + " | ".join(COLUMNS) + " |", rule]
    lines += ["| " + " | ".join(cell(row, c) for c in COLUMNS) + " |" for row in rows]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--models", default=",".join(m.name for m in ZOO), help="comma-separated zoo names")
    parser.add_argument("--workdir", type=Path, help="where built models are kept (default: a temporary directory)")
    parser.add_argument("--json", type=Path, help="also write the rows as JSON here")
    args = parser.parse_args(argv)
    names = [n for n in args.models.split(",") if n]
    unknown = [n for n in names if n not in BY_NAME]
    if unknown:
        parser.error(f"unknown model(s) {', '.join(unknown)}; the zoo has {', '.join(BY_NAME)}")
    with tempfile.TemporaryDirectory(prefix="model-zoo-") as tmp:
        workdir = args.workdir or Path(tmp)
        workdir.mkdir(parents=True, exist_ok=True)
        paths = {name: model_path(BY_NAME[name], workdir) for name in names}
        warm_up()
        rows = [measure(BY_NAME[name], paths[name]) for name in names]
    print(table(rows))
    for row in rows:
        if row["uninferred"]:
            print(f"{row['model']}: uninferred {', '.join(row['uninferred'])}")
    static = [r for r in rows if not BY_NAME[r["model"]].data_dependent]
    print(
        f"\nuninferred ops: {sum(r['ops uninferred'] for r in rows)} (goal 0); "
        f"worst arena / lower bound: {max(r['ratio'] for r in rows):.4f} (goal <= {RATIO_GOAL}); "
        f"static profiles with dynamic tensors left: {sum(r['dynamic tensors'] > 0 for r in static)}"
    )
    if args.json:
        args.json.write_text(json.dumps(rows, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
