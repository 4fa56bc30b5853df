"""A converted model (its main graph) to an ONNX ``ModelProto``: ``Model.save(path, format="onnx")``.

What goes where (details in :mod:`.onnx_graph`, :mod:`.onnx_attrs`, :mod:`.onnx_fused`):

* ``ge.Data`` → graph inputs named by ``_input_name``; ``ge.Const`` → initializers; ``onnx`` / ``onnx:<domain>``
  ops → ONNX nodes of that domain with their attributes and bodies; ``fused`` ops → standard ONNX ops through
  the fused exporters (:mod:`.onnx_fused_ops`), else domain ``scopefusion``; ``tf`` ops → domain ``tf`` (a
  structural export, for viewing: ONNX runtimes do not run it).
* Graph outputs are named by ``_output_names``, other tensors keep their source names, so an ONNX-born model
  keeps its input, output and tensor names. An ONNX-born model's local functions are written back.
* Only the main graph is exported (shape profiles are not). Input and output types come from it; where it
  leaves one incomplete (unknown dtype or rank, which ONNX forbids on a model's inputs and outputs) the
  shape profiles complete it when they agree on a rank, then ONNX's shape inference of the exported model;
  unknown dims are left unset, or named by the source's ``dim_param``.
* Custom domains (``tf``, ``scopefusion``, a source's own) are imported at version 1 unless the source
  says otherwise. Output bytes are deterministic: same model, same bytes.
* The model is built with scopefusion's own messages (:mod:`.onnx_proto`), the onnx package's bytes:
  writing it (``Model.save``, :func:`model_to_onnx_bytes`) imports the onnx package only when ONNX's shape
  inference must complete a type. :func:`model_to_onnx` and :func:`graph_to_onnx` return the onnx
  package's ``ModelProto`` (and import it).

NOTE: opset policy. An ONNX-born model is exported at its own default-domain opset, never raised: raising
it would mean converting every other op (``onnx.version_converter`` misses ops and attributes), for the
sake of a few fused ops. Instead each fused exporter writes the standard op when the export opset has it
and otherwise an exact decomposition into older standard ops (GELU through Erf, LayerNorm through
ReduceMean...); only when neither exists does the fused op go to domain ``scopefusion``. A model with no
default-domain opset of its own (TF-born) is exported at ``opset`` (default :data:`DEFAULT_EXPORT_OPSET`,
which has LayerNormalization, Gelu and Attention).
"""

from __future__ import annotations

from collections import Counter
from typing import TYPE_CHECKING, Any, Iterable, Mapping

from .. import __version__
from ..collector import call_collector_paused
from ..dialects.onnx.schema_table import table_onnx_version
from ..errors import ScopeFusionError, SerdeError
from ..ir.graph import DATA_OP, Graph
from ..ir.types import TensorType
from .onnx_attrs import type_proto
from .onnx_fused import FusedExporterRegistry, fused_exporters_for
from .onnx_graph import FALLBACK_DOMAIN, GraphWriter, append_value_infos
from .onnx_lowering import LoweringRegistry, default_lowerings
from .onnx_lowering.registry import FRAME_MARKERS
from .onnx_node import append_initializers, append_nodes
from .onnx_optimize import optimize_nodes
from .onnx_proto import (
    AttributeProto,
    FunctionProto,
    GraphProto,
    ModelProto,
    TypeProto,
    from_onnx,
    infer_shapes,
    ir_version,
    make_opsetid,
    min_ir_version_for,
    onnx_errors,
    opset_version,
    to_onnx,
)
from .weight_stream import DeferredWeights, ModelBytes, call_deferring, frame

if TYPE_CHECKING:  # pragma: no cover
    import onnx

    from ..model import Model

__all__ = [
    "DEFAULT_EXPORT_OPSET",
    "ONNX_TARGETS",
    "FALLBACK_DOMAIN",
    "graph_to_onnx",
    "model_to_onnx",
    "model_to_onnx_bytes",
    "model_to_onnx_model_bytes",
    "onnx_summary",
    "unlowered_message",
]

DEFAULT_EXPORT_OPSET = 23
# NOTE: "onnxruntime" may use com.microsoft contrib ops where onnxruntime runs them measurably faster on CPU. Measured
# on the zoo's Keras transformer export (batch 4, 16 tokens, 2 threads, median of 300 interleaved runs):
# com.microsoft.Gelu 0.181 ms against Gelu-20 0.181 ms; com.microsoft.MultiHeadAttention 0.223 ms against
# Attention-23 0.185 ms. No contrib op is faster, so both targets write the standard form today.
ONNX_TARGETS = ("standard", "onnxruntime")
PRODUCER = "scopefusion"
# The largest message protobuf serializes or parses (2 GiB - 1 bytes).
MAX_PROTOBUF_BYTES = (1 << 31) - 1


def model_to_onnx_bytes(model: "Model", **options: Any) -> bytes:
    """The serialized ONNX model of ``model``; keywords as :func:`model_to_onnx`. Deterministic."""
    return model_to_onnx_model_bytes(model, **options)[0].tobytes()


def model_to_onnx_model_bytes(model: "Model", **options: Any) -> tuple[ModelBytes, ModelProto]:
    """The serialized ONNX model as pieces that stream the large tensors from their arrays
    (:mod:`.weight_stream`; the same bytes as :func:`model_to_onnx_bytes`), and the model without those
    tensors' data (for :func:`onnx_summary`), as scopefusion's own message (:mod:`.onnx_proto`): writing
    a model does not import the onnx package."""
    weights = DeferredWeights()
    # Built with the collector paused and large arrays deferred into ``weights``.
    skeleton = call_deferring(weights, call_collector_paused, lambda: _model_proto(model, **options))
    try:
        serialized = skeleton.SerializeToString(deterministic=True)
    except ValueError as e:  # protobuf's 2 GiB limit, reached by the graph itself
        raise _too_large(model, str(e)) from None
    data = frame(serialized, skeleton.DESCRIPTOR, weights)
    if len(data) > MAX_PROTOBUF_BYTES:
        raise _too_large(model, f"{len(data):,} bytes, more than protobuf's {MAX_PROTOBUF_BYTES:,}")
    return data, skeleton


def _too_large(model: "Model", why: str) -> SerdeError:
    return SerdeError(
        f"the ONNX model of {model.source.path or model.graph.name!r} cannot be serialized ({why}); "
        "a model over 2 GiB needs external data, which this exporter does not write"
    )


def model_to_onnx(
    model: "Model",
    *,
    opset: int | None = None,
    exporters: FusedExporterRegistry | None = None,
    lowerings: LoweringRegistry | None = None,
    keep_tf_ops: bool = False,
    optimize: bool = True,
    target: str = "standard",
) -> "onnx.ModelProto":
    """The ONNX ``ModelProto`` of ``model``'s main graph, as the onnx package's message (imports onnx).

    Args:
        model: a converted model.
        opset: the default-domain opset for a model without one of its own (TF-born); an ONNX-born model
            is exported at its own opset (see the module NOTE), and another value is an error.
        exporters: fused-op exporters (default: the builtin ones and those the graph's declared fused ops
            carry, :func:`fused_exporters_for`).
        lowerings: ``tf`` op lowerings (default: :func:`~.onnx_lowering.default_lowerings`).
        keep_tf_ops: write ``tf`` ops without a lowering in domain ``tf`` instead of failing (the file
            will not run in onnxruntime).
        optimize: clean the lowered graph up (identities, transposes, constants; :mod:`.onnx_optimize`).
        target: ``"standard"`` (default-domain ops only) or ``"onnxruntime"`` (may use ``com.microsoft``
            contrib ops where onnxruntime runs them faster; see :data:`ONNX_TARGETS`).

    Raises:
        SerdeError: something in the IR has no ONNX form; the message names it.
    """
    return to_onnx(_model_proto(model, opset=opset, exporters=exporters, lowerings=lowerings, keep_tf_ops=keep_tf_ops,
                                optimize=optimize, target=target))


def _model_proto(
    model: "Model",
    *,
    opset: int | None = None,
    exporters: FusedExporterRegistry | None = None,
    lowerings: LoweringRegistry | None = None,
    keep_tf_ops: bool = False,
    optimize: bool = True,
    target: str = "standard",
) -> ModelProto:
    """:func:`model_to_onnx`'s model as scopefusion's own message."""
    if target not in ONNX_TARGETS:
        raise SerdeError(f"ONNX target {target!r} is not one of {', '.join(ONNX_TARGETS)}")
    source = model.source
    own = _own_opset(source.opset_imports) if source.is_onnx else None
    if own is not None and opset is not None and opset != own:
        raise SerdeError(
            f"{source.path or 'the model'} is an ONNX model at opset {own} and is exported at that opset; "
            f"convert the source to opset {opset} first instead of asking the exporter for it"
        )
    versions = {d: v for d, v in source.opset_imports.items() if d not in ("", "ai.onnx")}
    functions = []
    if source.is_onnx and source.functions:
        from .onnx_functions import function_protos

        functions = _guard(lambda: function_protos(source.functions), "the model's local functions")
        for f in functions:
            versions.setdefault(f.domain, 1)
    proto = _graph_model(
        model.graph,
        opset=own if own is not None else opset,
        exporters=exporters,
        domain_versions=versions,
        dim_params=_dim_params(model),
        functions=functions,
        graph_name=(source.name if source.is_onnx and source.name else None),
        profiles=(p.graph for p in model.profiles),  # read only when the main graph's types fall short
        lowerings=lowerings,
        keep_tf_ops=keep_tf_ops,
        optimize=optimize and source.framework != "onnx",
        known_values=model.inference.known_values if model.inference.describes(model.graph) else None,
    )
    if source.is_onnx:
        meta = source.metadata
        proto.ir_version = max(proto.ir_version, int(meta.get("ir_version", 0)))
        proto.model_version = int(meta.get("model_version", 0))
        for key, value in sorted(dict(meta.get("metadata_props", {})).items()):
            proto.metadata_props.add(key=key, value=value)
    return proto


def graph_to_onnx(
    graph: Graph,
    *,
    opset: int | None = None,
    exporters: FusedExporterRegistry | None = None,
    domain_versions: Mapping[str, int] | None = None,
    dim_params: Mapping[str, tuple[str, ...]] | None = None,
    functions: "Iterable[onnx.FunctionProto | FunctionProto]" = (),
    graph_name: str | None = None,
    profiles: Iterable[Graph] = (),
    lowerings: LoweringRegistry | None = None,
    keep_tf_ops: bool = False,
    optimize: bool = False,
) -> "onnx.ModelProto":
    """An ONNX ``ModelProto`` of one IR graph (what :func:`model_to_onnx` does without a ``Model``), as the
    onnx package's message (imports onnx).

    Args:
        graph: the main graph.
        opset: the default-domain opset (default :data:`DEFAULT_EXPORT_OPSET`).
        exporters: fused-op exporters (default: the builtin ones and those the graph's declared fused ops
            carry, :func:`fused_exporters_for`).
        domain_versions: versions of custom domains (default 1).
        dim_params: names for unknown input dims, by input node name.
        functions: model-local functions to include.
        graph_name: the ONNX graph's name (default: the IR graph's).
        profiles: inferred copies of ``graph`` whose input and output types may complete the graph's own.
        lowerings: ``tf`` op lowerings (default: :func:`~.onnx_lowering.default_lowerings`).
        keep_tf_ops: write ``tf`` ops without a lowering in domain ``tf`` instead of failing.
        optimize: clean the graph up after writing it (:mod:`.onnx_optimize`).

    Raises:
        SerdeError: something in the graph has no ONNX form; the message names it.
    """
    return to_onnx(_graph_model(graph, opset=opset, exporters=exporters, domain_versions=domain_versions,
                                dim_params=dim_params, functions=[from_onnx(f) for f in functions], graph_name=graph_name,
                                profiles=profiles, lowerings=lowerings, keep_tf_ops=keep_tf_ops, optimize=optimize))


def _graph_model(
    graph: Graph,
    *,
    opset: int | None = None,
    exporters: FusedExporterRegistry | None = None,
    domain_versions: Mapping[str, int] | None = None,
    dim_params: Mapping[str, tuple[str, ...]] | None = None,
    functions: Iterable[FunctionProto] = (),
    graph_name: str | None = None,
    profiles: Iterable[Graph] = (),
    lowerings: LoweringRegistry | None = None,
    keep_tf_ops: bool = False,
    optimize: bool = False,
    known_values: Mapping[int, Any] | None = None,
) -> ModelProto:
    """:func:`graph_to_onnx`'s model as scopefusion's own message; ``known_values`` as :class:`.GraphWriter`'s."""
    opset = DEFAULT_EXPORT_OPSET if opset is None else opset
    latest = opset_version()
    if not isinstance(opset, int) or not 1 <= opset <= latest:
        raise SerdeError(f"ONNX opset {opset!r} is not one the installed onnx {table_onnx_version()} knows (1..{latest}); pick one in that range")
    if not 17 <= opset and _has_tf_ops(graph):
        raise SerdeError(f"ONNX opset {opset} is below 17, the lowest a TensorFlow model is exported at; pick 17..{latest}")
    writer = GraphWriter(opset, exporters if exporters is not None else fused_exporters_for(graph.registry),
                         domain_versions, lowerings=lowerings if lowerings is not None else default_lowerings(),
                         known_values=known_values)
    if writer.lowerings is not None and len(writer.lowerings):
        graph = _functional_loops(graph)
    # The graph is written in place into the model (helper.make_model would copy it, weights and all).
    proto = ModelProto()
    proto.ir_version = ir_version()
    body, nodes, value_infos, initializers = _guard(
        lambda: writer.write_nodes(graph, dim_params=dim_params, into=proto.graph, leave_out_unread=optimize),
        f"graph {graph.name!r}")
    if writer.unlowered and not keep_tf_ops:
        raise SerdeError(unlowered_message(writer.unlowered))
    if optimize:
        _guard(lambda: optimize_nodes(body, nodes, opset, value_infos, initializers, left_out=writer.left_out,
                                      io_shapes=writer.io_shapes, written=True),
               f"graph {graph.name!r} (clean-up)")
    else:
        append_nodes(body, nodes)
        append_initializers(body, initializers)
        append_value_infos(body, value_infos)
    if graph_name:
        body.name = graph_name
    functions = list(functions)
    imports = [make_opsetid(d, v) for d, v in sorted(writer.domains.items())]
    known = {d for d, _ in writer.domains.items()}
    for f in functions:
        if f.domain not in known:
            imports.append(make_opsetid(f.domain, (domain_versions or {}).get(f.domain, 1)))
            known.add(f.domain)
    proto.opset_import.extend(imports)
    proto.functions.extend(functions)
    proto.producer_name = PRODUCER
    proto.producer_version = __version__
    proto.ir_version = max(min_ir_version_for(imports), 8 if functions else 3)
    _complete_io_types(proto, graph, profiles, writer.io_shapes)
    return proto


# ----------------------------------------------------------------------------- summary
NOT_RUNNABLE = "the file has nodes in domain 'tf', which onnxruntime and other ONNX runtimes will not run"


def onnx_summary(data: "bytes | ModelProto | onnx.ModelProto") -> dict[str, Any]:
    """The report's ``onnx`` field: opset, nodes per domain (bodies included), Transpose count, node count;
    ``warning`` in words when a node is in domain ``tf``. ``data`` is the serialized model or its message
    (scopefusion's own or the onnx package's)."""
    proto = ModelProto.FromString(data) if isinstance(data, bytes) else data
    domains: Counter = Counter()
    transposes = 0
    nodes = 0

    def walk(graph: GraphProto) -> None:
        nonlocal transposes, nodes
        for node in graph.node:
            nodes += 1
            domains[node.domain or "ai.onnx"] += 1
            transposes += node.op_type == "Transpose" and node.domain in ("", "ai.onnx")
            for attr in node.attribute:
                for body in [attr.g] if attr.type == AttributeProto.GRAPH else list(attr.graphs):
                    walk(body)

    walk(proto.graph)
    opset = next((o.version for o in proto.opset_import if o.domain in ("", "ai.onnx")), None)
    summary: dict[str, Any] = {"opset": opset, "domains": dict(sorted(domains.items())), "transposes": transposes,
                               "nodes": nodes}
    if "tf" in domains:
        summary["warning"] = NOT_RUNNABLE
    return summary


# ----------------------------------------------------------------------------- helpers
def unlowered_message(unlowered: list[tuple[str, str, str]]) -> str:
    """One sentence naming each TF op type without an ONNX form, its count, and one reason."""
    counts = Counter(op for op, _, _ in unlowered)
    reasons: dict[str, str] = {}
    for op, node, why in unlowered:
        reasons.setdefault(op, f"{node!r}: {why}")
    parts = [f"tf.{op} x{n} ({reasons[op]})" for op, n in sorted(counts.items())]
    return (
        f"{sum(counts.values())} TensorFlow op(s) have no ONNX lowering: {'; '.join(parts)}; pass --keep-tf-ops "
        "(keep_tf_ops=True) to write them in domain 'tf', which onnxruntime cannot run"
    )


def _has_tf_ops(graph: Graph) -> bool:
    return any(n.dialect == "tf" for n in graph.nodes)


def _own_opset(imports: Mapping[str, int]) -> int | None:
    version = imports.get("", imports.get("ai.onnx"))
    return int(version) if version is not None else None


def _dim_params(model: "Model") -> dict[str, tuple[str, ...]]:
    """Names for unknown input dims (ONNX ``dim_param``), by input node name: the source's own (ONNX), else
    (TensorFlow, which names none) ``<input>_dim<i>`` for each unknown dim, so every one stays symbolic."""
    out = {}
    for node in model.graph.nodes:
        if node.op != DATA_OP:
            continue
        source = model.source.get(node.name)
        params = source.attrs.get("dim_params") if source is not None else None
        if params:
            out[node.name] = tuple(params)
        elif not model.source.is_onnx:
            t = node.outputs[0].type
            if isinstance(t, TensorType) and t.rank is not None and -1 in t.shape:
                stem = node.name.split(":")[0].replace("/", "_")
                out[node.name] = tuple(f"{stem}_dim{i}" if d < 0 else "" for i, d in enumerate(t.shape))
    return out


def _functional_loops(graph: Graph) -> Graph:
    """``graph`` with its TF1 loop frames as While nodes and v1 conds as If nodes (a copy; the model's graph
    stays), or ``graph`` itself when it has neither (then :mod:`.onnx_lowering.tf1_frames` is not imported)."""
    if FRAME_MARKERS.isdisjoint([node.op for node in graph.nodes]):  # a list made faster than any() steps a generator
        return graph
    from .onnx_lowering.tf1_frames import functional_loops

    return functional_loops(graph)


def _guard(fn, what: str):
    """Runs ``fn``; an error from the ``onnx`` package becomes a one-sentence SerdeError naming ``what``."""
    try:
        return fn()
    except ScopeFusionError:
        raise
    except Exception as e:
        if not isinstance(e, (ValueError, TypeError, KeyError) + onnx_errors()):
            raise
        detail = " ".join(str(e).split())
        raise SerdeError(f"cannot write {what} as ONNX ({type(e).__name__}: {detail}); report this with the model") from None


def _complete(t: TypeProto) -> bool:
    kind = t.WhichOneof("value")
    return kind == "tensor_type" and t.tensor_type.elem_type != 0 and t.tensor_type.HasField("shape")


def _complete_io_types(proto: ModelProto, graph: Graph, profiles: Iterable[Graph],
                       written: Mapping[str, object] | None = None) -> None:
    """Completes the main graph's input and output types (see the module docstring), or raises. The
    profiles are read only for a type the main graph leaves incomplete. ``written`` is the writer's
    :attr:`~.GraphWriter.io_shapes`: a type written with a shape is complete (its dtype has an ONNX code)."""
    written = written if written is not None else {}
    if written and None not in written.values():
        return  # every input and output (of each graph written) has a shape, so a complete type: none to read back
    pending = []
    read: list[Graph] | None = None
    for kind, infos, values in (("input", proto.graph.input, graph.inputs), ("output", proto.graph.output, graph.outputs)):
        values = [v for v in values if v.producer.attrs.get("_outer_name") is None] if kind == "input" else values
        for index, (info, _value) in enumerate(zip(infos, values)):
            if written.get(info.name) is not None or _complete(info.type):
                continue
            if read is None:
                read = list(profiles)
            guess = _from_profiles(kind, index, read)
            if guess is not None:
                info.type.CopyFrom(type_proto(guess))
            if not _complete(info.type):
                pending.append((kind, info))
    if not pending:
        return
    inferred: dict[str, TypeProto] = {}
    result = infer_shapes(proto)
    if result is not None:
        for info in list(result.graph.output) + list(result.graph.value_info):
            inferred[info.name] = info.type
    for kind, info in pending:
        found = inferred.get(info.name)
        if found is None or not _complete(found):
            raise SerdeError(
                f"graph {kind} {info.name!r} has an unknown dtype or rank, which ONNX does not allow for a model's "
                f"{kind}s, and neither the shape profiles nor ONNX's shape inference find it; convert with "
                "input shapes (--input-shape) so inference can resolve it"
            )
        info.type.CopyFrom(found)


def _from_profiles(kind: str, index: int, profiles: list[Graph]) -> TensorType | None:
    """A type for input/output ``index`` from the profiles when they agree on its dtype and rank (dims unknown)."""
    types = []
    for g in profiles:
        values = g.inputs if kind == "input" else g.outputs
        t = values[index].type if index < len(values) else None
        if isinstance(t, TensorType) and t.rank is not None:
            types.append(t)
    if not types or len({t.rank for t in types}) != 1 or len({t.dtype for t in types}) != 1:
        return None
    return types[0].with_shape([-1] * len(types[0].shape))
