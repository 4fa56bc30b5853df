"""Shape and dtype inference of ``onnx`` dialect ops through ONNX's own per-node inference.

For a node, the IR inputs become ``TypeProto``s (unknown dims left unset, an unknown rank without a
shape), value-dependent inputs with known data become ``TensorProto``s, the attributes a ``NodeProto``;
``onnx.shape_inference.infer_node_outputs`` does the rest. Its answer maps back: a symbolic or missing
dim is -1, a missing shape an unknown rank. Ops with data-dependent outputs (NonZero, Unique, Compress,
NonMaxSuppression) thus get -1 dims, as ONNX gives them. The common ops (shape arithmetic, elementwise,
MatMul) are answered without protobuf messages by :mod:`.native`, whenever its answer is certain to be ONNX's.

A node ONNX rejects (incompatible shapes, a bad attribute) is an :class:`~scopefusion.errors.InferenceError`
naming the node, its inputs and ONNX's reason. An input with no dtype cannot be given to ONNX (its element
type is part of every check) and is an error too.

NOTE: one ONNX call answers dtypes and shapes; the dtype hook (which the core runs first) makes it, sets
both and keeps the answer on the context, so the shape hook has nothing left to do.

NOTE: answers are remembered per op definition instance (so per registry) in a bounded :class:`AnswerCache`,
keyed by everything ONNX's answer depends on: which inputs are present, each input's dtype and shape,
the value of value-dependent inputs, the output count and the attributes. A node whose attributes or
input values cannot be keyed exactly and cheaply (tensors, graphs, large or object arrays) is not cached.
"""

from __future__ import annotations

from collections import OrderedDict
from typing import TYPE_CHECKING, Any

import numpy as np

from ...errors import InferenceError
from ...ir.opdef import InferContext, OpDef
from .native import native_answer
from .protos import dtype_of_type_str, input_type_proto, node_proto, tensor_proto, type_proto_result

if TYPE_CHECKING:  # pragma: no cover
    from .schemas import OnnxOp

__all__ = ["AnswerCache", "answer_cache", "attach", "constant_value", "node_attrs"]

# Ops whose schema has no inference function but whose output 0 has input 0's shape and dtype.
_SAME_AS_INPUT = frozenset({"GroupNormalization", "MeanVarianceNormalization"})

_CACHE = "_onnx_inferred"
_ANSWERS = "_onnx_answers"

Answer = list[tuple[tuple[int, ...] | None, Any]]

# Largest value-dependent input (in elements) whose bytes go into a cache key.
_MAX_KEYED_ELEMENTS = 64


class AnswerCache:
    """ONNX inference answers of one op definition, least recently used dropped past ``capacity``."""

    def __init__(self, owner: OpDef, capacity: int = 256):
        self.owner = owner
        self.capacity = capacity
        self.hits = 0
        self.misses = 0
        self._answers: OrderedDict[tuple, Answer] = OrderedDict()

    def __len__(self) -> int:
        return len(self._answers)

    def get(self, key: tuple) -> Answer | None:
        answer = self._answers.get(key)
        if answer is None:
            self.misses += 1
            return None
        self.hits += 1
        self._answers.move_to_end(key)
        return answer

    def put(self, key: tuple, answer: Answer) -> None:
        self._answers[key] = answer
        if len(self._answers) > self.capacity:
            self._answers.popitem(last=False)


def attach(opdef: OpDef, op: "OnnxOp") -> None:
    """Sets ``opdef``'s dtype and shape hooks to ONNX inference (Constant: its attribute's value).

    Each definition the hooks run for (a registry's copy included) gets its own :class:`AnswerCache`,
    see :func:`answer_cache`.
    """
    if op.op_type == "Constant" and op.domain == "":
        opdef.set_infer_dtype(_constant_dtype).set_infer_shape(_constant_shape)
        return

    def infer_dtype(ctx: InferContext) -> None:
        # The one answer gives the shapes too: set here, the shape hook then has nothing left to do.
        answer = native_answer(ctx, op)
        if answer is None:
            answer = _onnx_answer(ctx, op, answer_cache(ctx.opdef))
        ctx.__dict__[_CACHE] = answer
        ctx.set_outputs(answer)

    def infer_shape(ctx: InferContext) -> None:
        if _CACHE in ctx.__dict__:
            return
        for i, (shape, _) in enumerate(_inferred(ctx, op)):
            ctx.set_output_shape(i, shape)

    opdef.set_infer_dtype(infer_dtype).set_infer_shape(infer_shape)


def answer_cache(opdef: OpDef) -> AnswerCache:
    """The inference answers remembered for ``opdef``; a copy of a definition (``OpDef.copy`` shares the
    attributes) gets a new, empty one, so a cache lives as long as its registry."""
    answers = opdef.__dict__.get(_ANSWERS)
    if answers is None or answers.owner is not opdef:
        answers = AnswerCache(opdef)
        setattr(opdef, _ANSWERS, answers)
    return answers


def node_attrs(ctx: InferContext, op: "OnnxOp") -> dict[str, Any]:
    """The node's schema attributes as payloads (None where unset)."""
    return {name: ctx.attr(name) for name in op.attr_kinds}


def _inferred(ctx: InferContext, op: "OnnxOp") -> Answer:
    cached = ctx.__dict__.get(_CACHE)
    if cached is None:
        cached = native_answer(ctx, op)
        if cached is None:
            cached = _onnx_answer(ctx, op, answer_cache(ctx.opdef))
        setattr(ctx, _CACHE, cached)
    return cached


def _onnx_answer(ctx: InferContext, op: "OnnxOp", answers: AnswerCache | None) -> Answer:
    key = _answer_key(ctx, op) if answers is not None else None
    if key is None or answers is None:
        return _run_onnx(ctx, op)
    cached = answers.get(key)
    if cached is None:
        cached = _run_onnx(ctx, op)
        answers.put(key, cached)
    return cached


def _answer_key(ctx: InferContext, op: "OnnxOp") -> tuple | None:
    """Everything ONNX's answer for the node depends on, or None when part of it cannot be keyed exactly."""
    inputs: list[Any] = []
    for i in range(ctx.num_inputs):
        if not ctx.has_input(i):
            inputs.append(None)
            continue
        info = ctx.input(i)
        if info.dtype is None or info.dtype.onnx is None:
            return None  # _run_onnx reports it
        data: Any = None
        if info.data is not None:
            array = np.asarray(info.data)
            if array.dtype.kind not in "biuf" or array.size > _MAX_KEYED_ELEMENTS:
                return None
            data = (array.dtype.str, array.shape, array.tobytes())
        shape = None if info.shape is None else tuple(int(d) for d in info.shape)
        inputs.append((info.dtype.name, shape, data))
    attrs = []
    for name, value in sorted(node_attrs(ctx, op).items()):
        frozen = _frozen(value)
        if frozen is _UNKEYABLE:
            return None
        attrs.append((name, frozen))
    return (op.op_type, op.domain, op.opset, ctx.num_outputs, tuple(inputs), tuple(attrs))


_UNKEYABLE = object()


def _frozen(value: Any) -> Any:
    """A hashable stand-in equal only for equal values (type included, floats by their bits); else _UNKEYABLE."""
    if value is None or isinstance(value, (bool, int, str, bytes)):
        return (type(value).__name__, value)
    if isinstance(value, float):
        return ("float", value.hex())
    if isinstance(value, (list, tuple)):
        items = tuple(_frozen(v) for v in value)
        if any(v is _UNKEYABLE for v in items):
            return _UNKEYABLE
        return (type(value).__name__, items)
    return _UNKEYABLE


def _run_onnx(ctx: InferContext, op: "OnnxOp") -> list[tuple[tuple[int, ...] | None, Any]]:
    import onnx
    from onnx import helper, shape_inference

    present = [ctx.has_input(i) for i in range(ctx.num_inputs)]
    types: dict[str, Any] = {}
    data: dict[str, Any] = {}
    for i, here in enumerate(present):
        if not here:
            continue
        info = ctx.input(i)
        if info.dtype is None:
            raise InferenceError(
                ctx.describe(f"input {i} has no dtype (its producer was not inferred); ONNX inference needs every input's element type")
            )
        if info.dtype.onnx is None:
            raise InferenceError(ctx.describe(f"input {i} is {info.dtype.name}, which ONNX has no element type for"))
        types[f"i{i}"] = input_type_proto(info, op.wrapper(i))
        if info.data is not None:
            data[f"i{i}"] = tensor_proto(info.data, f"i{i}")
    node = node_proto(op.op_type, present, ctx.num_outputs, node_attrs(ctx, op), op.attr_kinds, op.domain)
    try:
        schema = op.onnx_schema()
        answer = shape_inference.infer_node_outputs(
            schema, node, types, data, opset_imports=[helper.make_opsetid(op.domain, op.opset)]
        )
    except (onnx.shape_inference.InferenceError, RuntimeError, ValueError) as e:
        reason = " ".join(str(e).split())
        raise InferenceError(ctx.describe(f"ONNX opset {op.opset} inference rejects the node: {reason}")) from None
    if not schema.has_type_and_shape_inference_function:
        answer.update(_function_inference(schema, node, [types.get(name) for name in node.input]))
    out = []
    for i in range(ctx.num_outputs):
        t = answer.get(f"o{i}")
        shape, dtype = type_proto_result(t) if t is not None else (None, None)
        if dtype is None:
            dtype = _dtype_from_constraints(ctx, op, i)
        if op.op_type in _SAME_AS_INPUT and i == 0 and present and present[0] and ctx.input(0).shape is not None:
            shape = ctx.input(0).shape
        out.append((shape, dtype))
    return out


def _function_inference(schema: Any, node: Any, types: list[Any]) -> dict[str, Any]:
    """Output types through the op's function body, for schemas (LessOrEqual-12...) with no inference
    function of their own; empty when the body cannot be had or inferred (dtypes then come from the
    schema's constraints)."""
    import onnx
    from onnx import shape_inference

    try:
        if schema.has_function:
            function = schema.function_body
        elif schema.has_context_dependent_function and all(t is not None for t in types):
            function = onnx.FunctionProto()
            function.ParseFromString(
                schema.get_context_dependent_function(node.SerializeToString(), [t.SerializeToString() for t in types])
            )
        else:
            return {}
        if any(t is None for t in types):
            return {}
        found = shape_inference.infer_function_output_types(function, types, list(node.attribute))
    except (onnx.shape_inference.InferenceError, RuntimeError, ValueError):
        return {}
    return {name: t for name, t in zip(node.output, found)}


def _dtype_from_constraints(ctx: InferContext, op: "OnnxOp", output: int) -> Any:
    """An output dtype ONNX left unset: a single allowed type, or the dtype of an input of its type."""
    type_str = op.output_types[op.formal_output(output)]
    allowed = op.allowed(type_str)
    if len(allowed) == 1:
        return dtype_of_type_str(allowed[0])
    for i in range(ctx.num_inputs):
        if ctx.has_input(i) and op.input_types[op.formal_input(i)] == type_str:
            return ctx.input(i).dtype
    return None


# ----------------------------------------------------------------------------- Constant
_CONSTANT_ATTRS = ("value", "value_float", "value_floats", "value_int", "value_ints", "value_string", "value_strings", "sparse_value")


def constant_value(attrs: dict[str, Any]) -> np.ndarray:
    """The value of an ONNX ``Constant`` from whichever of its attributes is set."""
    given = [k for k in _CONSTANT_ATTRS if attrs.get(k) is not None]
    if len(given) != 1:
        raise ValueError(f"Constant needs exactly one of {', '.join(_CONSTANT_ATTRS)}; found {given or 'none'}")
    key = given[0]
    payload = attrs[key]
    if key in ("value", "sparse_value"):
        return np.asarray(payload)
    if key == "value_float":
        return np.array(payload, np.float32)
    if key == "value_floats":
        return np.array(payload, np.float32).reshape(-1)
    if key == "value_int":
        return np.array(payload, np.int64)
    if key == "value_ints":
        return np.array(payload, np.int64).reshape(-1)
    if key == "value_string":
        return np.array(payload, object)
    return np.array(list(payload), object).reshape(-1)


def _constant_attrs(ctx: InferContext) -> dict[str, Any]:
    return {k: ctx.attr(k) for k in _CONSTANT_ATTRS if k in ctx.opdef.attrs}


def _constant_dtype(ctx: InferContext) -> None:
    from ...dtypes import from_numpy

    try:
        value = constant_value(_constant_attrs(ctx))
    except ValueError as e:
        raise InferenceError(ctx.describe(str(e))) from None
    ctx.set_output_dtype(0, from_numpy(value.dtype))


def _constant_shape(ctx: InferContext) -> None:
    ctx.set_output_shape(0, constant_value(_constant_attrs(ctx)).shape)
