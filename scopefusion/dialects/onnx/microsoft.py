"""onnxruntime's contrib ops (domain ``com.microsoft``, dialect ``onnx:com.microsoft``) and its own
extensions of the default domain (SimplifiedLayerNormalization...), as its transformer optimizer emits
them: Attention, MultiHeadAttention, GroupQueryAttention, SkipLayerNormalization,
EmbedLayerNormalization, FastGelu, BiasGelu, FusedMatMul, RotaryEmbedding...

The declarations come from onnxruntime's registered schemas (read like ONNX's, :mod:`.schemas`); the
ops kept are those with a CPU kernel and no graph attribute. Inference and kernels are onnxruntime's own:
a one-node model whose inputs carry the node's input types (value-dependent inputs with known data as
initializers) is loaded into an ``InferenceSession``, whose graph resolution infers the outputs; its
output ``NodeArg`` s give dtypes and dims, and a ``Shape`` node after each output tells an unknown rank
from a scalar. The reference kernel runs the same one-node model on numpy inputs. Sessions and answers
are cached by the serialized model, so a repeated node costs one lookup.

``onnxruntime`` is imported inside the functions, as ``onnx`` is.
"""

from __future__ import annotations

from collections import OrderedDict
from typing import TYPE_CHECKING, Any, Sequence

import numpy as np

from ...errors import InferenceError
from ...ir.opdef import InferContext, OpDef
from . import MICROSOFT_DIALECT
from .protos import attr_payload, dtype_of_type_str, input_type_proto, node_proto, tensor_proto
from .schema_table import NO_DEFAULT, AttrView, ConstraintView, ParamView, SchemaView, first_paragraph

if TYPE_CHECKING:  # pragma: no cover
    from .schemas import OnnxOp

__all__ = ["MICROSOFT_DIALECT", "microsoft_definitions", "onnxruntime_extensions"]

MICROSOFT_DOMAIN = "com.microsoft"
_NOT_OPS = frozenset({"MemcpyFromHost", "MemcpyToHost"})
_CACHE_SIZE = 512

# NOTE: pure caches keyed by serialized one-node models: inferred types, and loaded sessions.
_INFERRED: "OrderedDict[bytes, list[tuple[tuple[int, ...] | None, Any]]]" = OrderedDict()
_SESSIONS: "OrderedDict[bytes, Any]" = OrderedDict()


# ----------------------------------------------------------------------------- schemas
def _view(schema: Any) -> SchemaView:
    """An onnxruntime schema as the view :func:`~.schemas.opdef_from_schema` reads."""
    import onnx

    attrs = {}
    for name, a in schema.attributes.items():
        raw = getattr(a, "_default_value", b"")
        default = onnx.AttributeProto.FromString(raw) if raw else None
        # onnxruntime's binding leaves some kinds unnamed (TYPE_PROTO): name them by ONNX's enum
        kind = onnx.AttributeProto.AttributeType.Name(int(a.type))
        held = (attr_payload(default),) if default is not None and default.type else NO_DEFAULT
        attrs[name] = AttrView(kind, bool(a.required), held)
    return SchemaView(
        name=schema.name,
        domain=schema.domain,
        since_version=schema.since_version,
        doc=first_paragraph(schema.doc),
        inputs=tuple(ParamView(p.name, p.option.name, p.typeStr) for p in schema.inputs),
        outputs=tuple(ParamView(p.name, p.option.name, p.typeStr) for p in schema.outputs),
        attributes=attrs,
        type_constraints=tuple(ConstraintView(c.type_param_str, tuple(c.allowed_type_strs)) for c in schema.type_constraints),
        deprecated=bool(schema.deprecated),
    )


def _cpu_schemas(domains: set[str]) -> list[Any]:
    from onnxruntime.capi import onnxruntime_pybind11_state as ort_c

    cpu = {(k.domain, k.op_name) for k in ort_c.get_all_opkernel_def() if k.provider == "CPUExecutionProvider"}
    latest: dict[tuple[str, str], Any] = {}
    for s in ort_c.get_all_operator_schema():
        domain = "" if s.domain == "ai.onnx" else s.domain
        if domain not in domains or (s.domain, s.name) not in cpu and (domain, s.name) not in cpu or s.name in _NOT_OPS:
            continue
        if any(a.type.name in ("GRAPH", "GRAPHS") for a in s.attributes.values()):
            continue
        key = (domain, s.name)
        if key not in latest or s.since_version > latest[key].since_version:
            latest[key] = s
    return [latest[k] for k in sorted(latest)]


def microsoft_definitions() -> list[OpDef]:
    """The ``onnx:com.microsoft`` op definitions (see the module docstring)."""
    from .schemas import opdef_from_schema

    return [
        opdef_from_schema(_view(s), s.since_version, MICROSOFT_DIALECT, attach=attach)
        for s in _cpu_schemas({MICROSOFT_DOMAIN})
        if not s.deprecated
    ]


def onnxruntime_extensions() -> list[OpDef]:
    """onnxruntime's own ops of the default domain, which no ONNX opset defines (dialect ``onnx``)."""
    from onnx import defs

    from .schemas import DIALECT, opdef_from_schema

    onnx_names = {s.name for s in defs.get_all_schemas_with_history()}
    return [
        opdef_from_schema(_view(s), s.since_version, DIALECT, attach=attach)
        for s in _cpu_schemas({""})
        if s.name not in onnx_names and not s.deprecated
    ]


# ----------------------------------------------------------------------------- one-node models
def attach(opdef: OpDef, op: "OnnxOp") -> None:
    def infer_dtype(ctx: InferContext) -> None:
        for i, (_, dtype) in enumerate(_inferred(ctx, op)):
            ctx.set_output_dtype(i, dtype)

    def infer_shape(ctx: InferContext) -> None:
        for i, (shape, _) in enumerate(_inferred(ctx, op)):
            ctx.set_output_shape(i, shape)

    opdef.set_infer_dtype(infer_dtype).set_infer_shape(infer_shape)
    opdef.set_reference(lambda inputs, attrs: run_onnxruntime(op, inputs, attrs))


def _model(op: "OnnxOp", node: Any, inputs: list[Any], initializers: list[Any], outputs: list[str], extra_nodes: Sequence[Any] = ()) -> bytes:
    import onnx
    from onnx import helper

    graph = helper.make_graph(
        [node, *extra_nodes], op.op_type, inputs, [helper.make_value_info(name, onnx.TypeProto()) for name in outputs], initializers
    )
    opsets = [helper.make_opsetid("", 17)] + ([helper.make_opsetid(op.domain, op.opset)] if op.domain else [])
    model = helper.make_model(graph, opset_imports=opsets)
    model.ir_version = 8
    return model.SerializeToString()


def _session(model: bytes) -> Any:
    found = _SESSIONS.get(model)
    if found is not None:
        _SESSIONS.move_to_end(model)
        return found
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    options.intra_op_num_threads = 1
    options.log_severity_level = 3
    session = ort.InferenceSession(model, options, providers=["CPUExecutionProvider"])
    _SESSIONS[model] = session
    if len(_SESSIONS) > _CACHE_SIZE:
        _SESSIONS.popitem(last=False)
    return session


def _inferred(ctx: InferContext, op: "OnnxOp") -> list[tuple[tuple[int, ...] | None, Any]]:
    cached = ctx.__dict__.get("_ort_inferred")
    if cached is not None:
        return cached
    from onnx import helper

    present = [ctx.has_input(i) for i in range(ctx.num_inputs)]
    inputs, inits = [], []
    for i, here in enumerate(present):
        if not here:
            continue
        info = ctx.input(i)
        if info.dtype is None or info.dtype.onnx is None:
            raise InferenceError(ctx.describe(f"input {i} has no ONNX element type; onnxruntime's inference needs it"))
        if info.data is not None:
            inits.append(tensor_proto(info.data, f"i{i}"))
        else:
            inputs.append(helper.make_value_info(f"i{i}", input_type_proto(info)))
    attrs = {name: ctx.attr(name) for name in op.attr_kinds}
    node = node_proto(op.op_type, present, ctx.num_outputs, attrs, op.attr_kinds, op.domain)
    ranks = [helper.make_node("Shape", [f"o{i}"], [f"rank{i}"]) for i in range(ctx.num_outputs)]
    outputs = [f"o{i}" for i in range(ctx.num_outputs)] + [f"rank{i}" for i in range(ctx.num_outputs)]
    model = _model(op, node, inputs, inits, outputs, ranks)
    result = _INFERRED.get(model)
    if result is None:
        try:
            args = {a.name: a for a in _session(model).get_outputs()}
        except Exception as e:  # onnxruntime raises its own Fail / InvalidGraph / NotImplemented types
            reason = " ".join(str(e).split())
            raise InferenceError(ctx.describe(f"onnxruntime rejects the node: {reason}")) from None
        result = []
        for i in range(ctx.num_outputs):
            out, rank = args[f"o{i}"], args[f"rank{i}"]
            dtype = dtype_of_type_str(out.type)
            if rank.shape and isinstance(rank.shape[0], int):
                shape: tuple[int, ...] | None = tuple(d if isinstance(d, int) and d >= 0 else -1 for d in out.shape)
            else:
                shape = None  # the rank is unknown
            result.append((shape, dtype))
        _INFERRED[model] = result
        if len(_INFERRED) > _CACHE_SIZE:
            _INFERRED.popitem(last=False)
    ctx.__dict__["_ort_inferred"] = result
    return result


def run_onnxruntime(op: "OnnxOp", inputs: Sequence[np.ndarray | None], attrs: dict[str, Any]) -> list[np.ndarray]:
    """Runs the op in onnxruntime on numpy inputs (None: an omitted optional input).

    Returns ``attrs["_num_outputs"]`` outputs when given (the node's output count; callers that know it
    should pass it), else every declared output, or the required ones when the op cannot make them all.
    """
    from onnx import helper

    from ...dtypes import from_numpy

    arrays = list(inputs)
    while arrays and arrays[-1] is None:
        arrays.pop()
    graph_inputs, feeds = [], {}
    for i, array in enumerate(arrays):
        if array is None:
            continue
        array = np.asarray(array)
        dtype = from_numpy(array.dtype)
        if dtype is None or dtype.onnx is None:
            raise ValueError(f"{op.op_type}: input {i} of numpy dtype {array.dtype} has no ONNX element type")
        graph_inputs.append(helper.make_tensor_value_info(f"i{i}", dtype.onnx, list(array.shape)))
        feeds[f"i{i}"] = array
    given = attrs.get("_num_outputs")
    counts = [int(given)] if given is not None else [len(op.output_types), op.required_outputs]
    for k, n_out in enumerate(counts):
        node = node_proto(op.op_type, [a is not None for a in arrays], n_out, attrs, op.attr_kinds, op.domain)
        model = _model(op, node, graph_inputs, [], [f"o{i}" for i in range(n_out)])
        try:
            session = _session(model)
        except Exception:
            # Some optional outputs exist only under some attributes (MultiHeadAttention's qk): without
            # attrs["_num_outputs"], fall back to the required outputs.
            if k + 1 < len(counts):
                continue
            raise
        return [np.asarray(o) for o in session.run(None, feeds)]
    raise AssertionError("unreachable")
