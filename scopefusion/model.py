"""The result of ``convert``: the fused IR graph, its shape profiles and memory plans, and the report."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from os import PathLike
from typing import TYPE_CHECKING, Any

from .errors import SerdeError

if TYPE_CHECKING:  # pragma: no cover
    from .ir.graph import Graph
    from .ir_builder.profiles import Profile
    from .ir_builder.shape_inference import InferenceResult
    from .parser.source_graph import SourceGraph

__all__ = ["Model", "SAVE_FORMATS"]

SAVE_FORMATS = ("ge", "ge-text", "onnx")


@dataclass
class Model:
    """A converted model. ``graph`` is the main graph (the model's own shapes); ``profiles`` one per input-shape set."""

    graph: "Graph"
    profiles: list["Profile"]
    source: "SourceGraph"
    fusion_run: Any
    inference: "InferenceResult"
    dropped_attrs: dict[str, list[str]] = field(default_factory=dict)
    timings: dict[str, float] = field(default_factory=dict)

    # ------------------------------------------------------------------ counts
    def fusion_counts(self) -> dict[str, int]:
        """Fused ops per rule (pass name), sorted by rule."""
        counts = Counter(a.pass_name for a in self.fusion_run.accepted)
        return dict(sorted(counts.items()))

    def refused(self) -> dict[str, list[str]]:
        out: dict[str, list[str]] = {}
        for r in self.fusion_run.refused:
            out.setdefault(r.pass_name, []).append(f"{r.name}: {r.reason}")
        return dict(sorted(out.items()))

    def op_counts(self) -> dict[str, int]:
        """IR ops by qualified name (``tf.Conv2D``, ``onnx.MatMul``, ``fused.LayerNorm``); graph inputs and constants too."""
        counts = Counter(n.op for n in self.graph.nodes)
        return dict(sorted(counts.items()))

    def uninferred_ops(self) -> list[str]:
        names: Counter = Counter()
        for profile in self.profiles:
            names.update(profile.inference.uninferred)
        names.update(self.inference.uninferred)
        return sorted(names)

    def report(self) -> dict[str, Any]:
        """The JSON report: fusions, refusals, every pass that ran (source, what it replaced, scopes matched,
        fusions accepted and refused, error, time), warnings, op counts, un-inferred ops, profiles, timings."""
        return {
            "model": self.source.path,
            "framework": self.source.framework,
            "fusions": self.fusion_counts(),
            "refused": self.refused(),
            "ops": self.op_counts(),
            "uninferred_ops": self.uninferred_ops(),
            "profiles": [p.to_dict() for p in self.profiles],
            "passes": [r.to_dict() for r in self.fusion_run.passes],
            "fusion_warnings": self.fusion_run.warnings(),
            "dropped_attrs": {k: v for k, v in sorted(self.dropped_attrs.items())},
            "timings_s": dict(self.timings),
        }

    # ------------------------------------------------------------------ output
    def to_bytes(self, format: str = "ge") -> bytes:
        if format == "ge":
            from .serde.model_io import model_to_bytes

            return model_to_bytes(self)
        if format == "ge-text":
            from .serde.model_io import model_to_text

            return model_to_text(self).encode("utf-8")
        if format == "onnx":
            from .serde.onnx_export import model_to_onnx_bytes

            return model_to_onnx_bytes(self)
        raise SerdeError(f"unknown output format {format!r}; use one of {', '.join(SAVE_FORMATS)}")

    def save(self, path: str | PathLike, format: str = "ge") -> None:
        """Writes the model; the file appears whole or not at all (written aside, then renamed)."""
        from .files import write_atomic

        write_atomic(path, self.to_bytes(format))

    def __repr__(self) -> str:
        return f"Model({self.source.path!r}, {len(self.graph.nodes)} nodes, {len(self.profiles)} profile(s))"
