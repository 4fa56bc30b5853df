"""``verify``: run the source model (TensorFlow or onnxruntime) and the converted, fused IR on the same
seeded inputs, for every shape profile, and compare every output.

``runtime`` says what runs the converted model: ``"reference"`` (default) the IR's reference executor;
``"onnxruntime"`` its ONNX export (made in memory, at the default opset) in onnxruntime's CPU provider.

Inputs are drawn per profile: floats from a standard normal, booleans at random, integers in a valid
range — an integer input that indexes a constant table (token ids into an embedding, through Gather /
GatherV2 / ResourceGather, possibly behind Identity / Cast / Reshape / ExpandDims) is drawn below the
table's first dimension; other integers are 0 or 1 (masks, segment ids). Unknown dims are drawn as 2.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from os import PathLike
from typing import Any, Mapping

import numpy as np

from .errors import VerifyError
from .ir.graph import CONST_OP, Graph, Value
from .ir.types import TensorType
from .ir_builder.profiles import input_name

__all__ = ["OutputComparison", "RUNTIMES", "VerifyReport", "make_inputs", "verify"]

RUNTIMES = ("reference", "onnxruntime")

_PASS_THROUGH = {"Identity", "Cast", "Reshape", "ExpandDims", "Squeeze", "Unsqueeze", "Flatten"}
_GATHERS = {"Gather", "GatherV2", "ResourceGather", "GatherElements"}
UNKNOWN_DIM_DRAW = 2


@dataclass
class OutputComparison:
    name: str
    shape: tuple[int, ...]
    max_abs: float
    max_rel: float
    ok: bool

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "shape": list(self.shape), "max_abs": self.max_abs, "max_rel": self.max_rel, "ok": self.ok}


@dataclass
class ProfileCheck:
    profile: int
    inputs: dict[str, tuple[int, ...]]
    outputs: list[OutputComparison]

    @property
    def ok(self) -> bool:
        return all(o.ok for o in self.outputs)


@dataclass
class VerifyReport:
    model: str
    checks: list[ProfileCheck]
    rtol: float
    atol: float
    seconds: float = 0.0
    fusions: dict[str, int] = field(default_factory=dict)
    # What the conversion's fusion passes must say: a pass that raised, a replacement that fused less.
    fusion_warnings: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return all(c.ok for c in self.checks)

    @property
    def max_abs(self) -> float:
        return max((o.max_abs for c in self.checks for o in c.outputs), default=0.0)

    def to_dict(self) -> dict[str, Any]:
        return {
            "model": self.model,
            "ok": self.ok,
            "rtol": self.rtol,
            "atol": self.atol,
            "max_abs": self.max_abs,
            "seconds": self.seconds,
            "fusions": self.fusions,
            "fusion_warnings": list(self.fusion_warnings),
            "profiles": [
                {"profile": c.profile, "inputs": {k: list(v) for k, v in c.inputs.items()}, "ok": c.ok,
                 "outputs": [o.to_dict() for o in c.outputs]}
                for c in self.checks
            ],
        }  # fmt: skip


def verify(
    path: str | PathLike,
    *,
    inputs: Mapping[str, np.ndarray] | None = None,
    seed: int = 0,
    rtol: float = 1e-4,
    atol: float = 1e-5,
    checked: bool = True,
    runtime: str = "reference",
    **convert_options: Any,
) -> VerifyReport:
    """Converts ``path`` (``convert_options`` as for :func:`~scopefusion.convert.convert`) and compares it with
    the source framework on every shape profile (or on ``inputs`` alone when given); ``runtime`` runs the
    converted model (see the module docstring)."""
    from .convert import convert

    if runtime not in RUNTIMES:
        raise VerifyError(f"runtime {runtime!r} is not one of {', '.join(RUNTIMES)}")
    start = time.perf_counter()
    model = convert(path, **convert_options)
    try:
        return _run_and_compare(path, model, inputs, seed, rtol, atol, checked, start, runtime)
    except MemoryError:
        raise VerifyError(
            f"{path}: running the model ran out of memory (its tensors are larger than this machine can hold); "
            "verify it on smaller --input-shape profiles"
        ) from None


def _run_and_compare(
    path, model, inputs, seed: int, rtol: float, atol: float, checked: bool, start: float, runtime: str
) -> VerifyReport:
    from .runtime.executor import Executor
    from .runtime.source_runner import source_runner

    executor = Executor(model, checked=checked)
    onnx_run = _onnxruntime_runner(model) if runtime == "onnxruntime" else None
    runner = source_runner(model.source)
    checks = []
    profiles = [executor.select_profile(inputs)] if inputs is not None else model.profiles
    for i, profile in enumerate(profiles):
        feeds = dict(inputs) if inputs is not None else make_inputs(profile.graph, seed + i)
        if onnx_run is not None:
            got, index = onnx_run(feeds), (model.profiles.index(profile) if profile in model.profiles else 0)
        else:
            result = executor.run(feeds)
            got, index = result.outputs, result.profile
        theirs = runner.run(feeds)
        outputs = []
        for name, expected in theirs.items():
            if name not in got:
                raise VerifyError(f"{path}: the source model has output {name!r} but the converted model has {sorted(got)}")
            outputs.append(_compare(name, got[name], expected, rtol, atol))
        checks.append(ProfileCheck(index, {k: tuple(np.shape(v)) for k, v in feeds.items()}, outputs))
    report = VerifyReport(str(path), checks, rtol, atol, round(time.perf_counter() - start, 3), model.fusion_counts(),
                          model.fusion_run.warnings())  # fmt: skip
    return report


def _onnxruntime_runner(model: Any) -> Any:
    """A function running ``model``'s in-memory ONNX export in onnxruntime (CPU): feeds → outputs by name."""
    import onnxruntime as ort

    from .serde.onnx_export import model_to_onnx_bytes

    options = ort.SessionOptions()
    options.log_severity_level = 3
    try:
        session = ort.InferenceSession(model_to_onnx_bytes(model), options, providers=["CPUExecutionProvider"])
    except Exception as e:  # onnxruntime raises its own exception types
        detail = " ".join(str(e).split())
        raise VerifyError(f"onnxruntime cannot load the ONNX export of {model.source.path!r}: {detail}") from None
    names = [i.name for i in session.get_inputs()]
    outputs = [o.name for o in session.get_outputs()]

    def run(feeds: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        missing = [n for n in names if n not in feeds]
        if missing:
            raise VerifyError(f"no value for the ONNX export's inputs {', '.join(missing)}")
        try:
            values = session.run(outputs, {n: np.asarray(feeds[n]) for n in names})
        except Exception as e:
            detail = " ".join(str(e).split())
            raise VerifyError(f"onnxruntime failed running the ONNX export of {model.source.path!r}: {detail}") from None
        return dict(zip(outputs, values))

    return run


def _compare(name: str, got: Any, expected: Any, rtol: float, atol: float) -> OutputComparison:
    got_a, exp_a = np.asarray(got), np.asarray(expected)
    if got_a.shape != exp_a.shape:
        return OutputComparison(name, tuple(exp_a.shape), float("inf"), float("inf"), False)
    if exp_a.dtype.kind in "OSU" or got_a.dtype.kind in "OSU":
        same = bool(np.array_equal(got_a, exp_a))
        return OutputComparison(name, tuple(exp_a.shape), 0.0 if same else float("inf"), 0.0 if same else float("inf"), same)
    g, e = got_a.astype(np.float64), exp_a.astype(np.float64)
    diff = np.abs(g - e)
    max_abs = float(diff.max()) if diff.size else 0.0
    rel = diff / np.maximum(np.abs(e), np.finfo(np.float64).tiny)
    max_rel = float(rel.max()) if rel.size else 0.0
    ok = bool(np.allclose(g, e, rtol=rtol, atol=atol, equal_nan=True))
    return OutputComparison(name, tuple(exp_a.shape), max_abs, max_rel, ok)


def make_inputs(graph: Graph, seed: int) -> dict[str, np.ndarray]:
    """Seeded inputs for ``graph``'s inputs (see the module docstring)."""
    rng = np.random.default_rng(seed)
    out: dict[str, np.ndarray] = {}
    for value in graph.inputs:
        name = input_name(value)
        t = value.type
        if not isinstance(t, TensorType):
            raise VerifyError(f"input {name!r} has no known type; pass its value with --input {name}=file.npy")
        shape = (UNKNOWN_DIM_DRAW,) if t.rank is None else tuple(d if d >= 0 else UNKNOWN_DIM_DRAW for d in t.shape)
        dtype = t.dtype.numpy
        if dtype.kind == "b":
            out[name] = rng.integers(0, 2, shape).astype(np.bool_)
        elif dtype.kind in "iu":
            high = _index_bound(value) or 2
            out[name] = rng.integers(0, high, shape).astype(dtype)
        elif dtype.kind in "fc":
            out[name] = rng.standard_normal(shape).astype(dtype)
        else:
            raise VerifyError(f"input {name!r} has dtype {t.dtype.name}, which verify cannot draw; pass it with --input")
    return out


def _index_bound(value: Value, depth: int = 0) -> int | None:
    """The size of the constant table an integer input indexes, if it does."""
    if depth > 6:
        return None
    bounds = []
    for user, slot in value.uses:
        if user.op_type in _GATHERS and slot == 1:
            table = user.inputs[0]
            while table is not None and table.producer.op_type in ("Identity", "ReadVariableOp") and table.producer.inputs:
                table = table.producer.inputs[0]
            if table is not None and table.producer.op == CONST_OP:
                axis = user.attrs.get("axis", 0) or 0
                data = table.producer.attrs.get("value")
                bounds.append(int(data.shape[axis]))
        elif user.op_type in _PASS_THROUGH and slot == 0:
            for out in user.outputs:
                found = _index_bound(out, depth + 1)
                if found:
                    bounds.append(found)
    return min(bounds) if bounds else None
