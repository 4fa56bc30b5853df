"""The result of ``convert``: the fused IR graph, its shape profiles and memory plans, and the report."""

from __future__ import annotations

from collections import Counter
from os import PathLike
from typing import TYPE_CHECKING, Any, Callable

from .errors import SerdeError
from .records import Record

if TYPE_CHECKING:  # pragma: no cover
    from .ir.graph import Graph
    from .ir_builder.profiles import Profile
    from .ir_builder.shape_inference import InferenceResult
    from .parser.source_graph import SourceGraph
    from .serde.weight_stream import ModelBytes

__all__ = ["EXTENSION_FORMATS", "Model", "SAVE_FORMATS", "output_format"]

SAVE_FORMATS = ("ge", "ge-text", "onnx")
# File name endings that say the format, longest first.
EXTENSION_FORMATS = ((".ge.txt", "ge-text"), (".ge-text", "ge-text"), (".getxt", "ge-text"), (".pbtxt", "ge-text"),
                     (".onnx", "onnx"), (".ge", "ge"))


def output_format(path: "str | PathLike", requested: str | None = None) -> tuple[str, str]:
    """The format to write ``path`` in, and a note to tell the user ("" when there is nothing to say).

    The file name decides (``.onnx`` ONNX, ``.ge`` GE bytes, ``.ge.txt`` / ``.pbtxt`` GE text); ``requested``
    (``--format``) must agree with it; a name without a known ending takes ``requested``, else GE bytes.

    Raises:
        SerdeError: ``requested`` is not a format, or contradicts the file name.
    """
    if requested is not None and requested not in SAVE_FORMATS:
        raise SerdeError(f"--format {requested!r} is not one of {', '.join(SAVE_FORMATS)}")
    name = str(path).lower()
    implied = next((fmt for ending, fmt in EXTENSION_FORMATS if name.endswith(ending)), None)
    if implied is not None:
        if requested is not None and requested != implied:
            raise SerdeError(
                f"--format {requested} contradicts the output name {str(path)!r}, which says {implied}; "
                f"drop --format or name the file for {requested}"
            )
        return implied, ""
    if requested is not None:
        return requested, ""
    return "ge", (f"{str(path)!r} has no known ending (.onnx, .ge, .ge.txt, .pbtxt), so it is written as GE bytes; "
                  "give --format to choose")


class Model(Record):
    """A converted model. ``graph`` is the main graph (the model's own shapes); ``profiles`` one per input-shape set."""

    _fields = ("graph", "profiles", "source", "fusion_run", "inference", "dropped_attrs", "timings", "onnx_export")

    def __init__(
        self,
        graph: "Graph",
        profiles: list["Profile"],
        source: "SourceGraph",
        fusion_run: Any,
        inference: "InferenceResult",
        dropped_attrs: dict[str, list[str]] | None = None,
        timings: dict[str, float] | None = None,
        onnx_export: dict[str, Any] | None = None,
    ) -> None:
        self.graph = graph
        self.profiles = profiles
        self.source = source
        self.fusion_run = fusion_run
        self.inference = inference
        self.dropped_attrs = {} if dropped_attrs is None else dropped_attrs
        self.timings = {} if timings is None else timings
        self.onnx_export = onnx_export  # the last ONNX export's summary (report field "onnx")

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
            **({"onnx": dict(self.onnx_export)} if self.onnx_export is not None else {}),
        }

    # ------------------------------------------------------------------ output
    def to_bytes(self, format: str = "ge", **onnx_options: Any) -> bytes:
        """The model in ``format``; ``onnx_options`` go to :func:`~scopefusion.serde.onnx_export.model_to_onnx`
        (``opset``, ``keep_tf_ops``, ``target``). An ONNX export records its summary in the report (``onnx``).
        SerdeError when the format is unknown or the bytes do not fit in memory. :meth:`save` (or
        :meth:`serialize`) writes a file without holding the bytes."""
        return self._out_of_memory(format, lambda: self.serialize(format, **onnx_options).tobytes())

    def serialize(self, format: str = "ge", **onnx_options: Any) -> "ModelBytes":
        """The model in ``format`` as pieces to write: iterating gives the byte chunks, each large tensor
        streamed from its array (:mod:`scopefusion.serde.weight_stream`); ``tobytes()`` joins them (the same
        bytes as :meth:`to_bytes`). Arguments and errors as :meth:`to_bytes`."""
        return self._out_of_memory(format, lambda: self._render(format, **onnx_options))

    def _out_of_memory(self, format: str, write: Callable[[], Any]) -> Any:
        try:
            return write()
        except MemoryError:
            raise SerdeError(
                f"writing the model as {format} ran out of memory ({len(self.graph.nodes):,} nodes, "
                f"{len(self.profiles)} profile(s)); write fewer profiles or convert on a larger machine"
            ) from None

    def _render(self, format: str, **onnx_options: Any) -> "ModelBytes":
        from .serde.weight_stream import ModelBytes

        if format == "ge":
            from .serde.model_io import model_to_model_bytes

            return model_to_model_bytes(self)
        if format == "ge-text":
            from .serde.model_io import model_to_text

            return ModelBytes([model_to_text(self).encode("utf-8")])
        if format == "onnx":
            from .serde.onnx_export import model_to_onnx_model_bytes, onnx_summary

            data, skeleton = model_to_onnx_model_bytes(self, **onnx_options)
            self.onnx_export = onnx_summary(skeleton)
            return data
        raise SerdeError(f"unknown output format {format!r}; use one of {', '.join(SAVE_FORMATS)}")

    def save(self, path: str | PathLike, format: str | None = None, **onnx_options: Any) -> None:
        """Writes the model in ``format``, by default the one the file name says (:func:`output_format`);
        the file appears whole or not at all (written aside, then renamed). Large tensors go from their
        arrays to the file: the bytes are never held whole in memory."""
        from .files import write_atomic

        fmt, _ = output_format(path, format)
        write_atomic(path, self.serialize(fmt, **onnx_options))

    def __repr__(self) -> str:
        return f"Model({self.source.path!r}, {len(self.graph.nodes)} nodes, {len(self.profiles)} profile(s))"
