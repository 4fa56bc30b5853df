"""Reference kernels and build-time folds of ``onnx`` dialect ops, through ``onnx.reference``.

``reference(inputs, attrs) -> list[np.ndarray]`` runs ONNX's reference implementation of the op on
numpy arrays (None for an omitted optional input): the implementation class of the op type and opset
(``onnx.reference.ops.load_op``, cached per op type and opset) instantiated on a one-node ``NodeProto``,
or — for ops ONNX implements only as a function (Gelu, GroupNormalization...) — a ``ReferenceEvaluator``
on a one-node model. It returns every output the implementation computes (trailing optional outputs
included); a variadic Split needs its output count, from ``num_outputs``, the ``split`` input or the
private attribute ``_num_outputs``.

Folds (``fold(inputs: list[InputInfo | None], attrs) -> list[np.ndarray] | None``):

* Shape and Size from static input shapes alone (Shape's ``start`` / ``end`` honoured);
* Constant from its attribute, with no inputs;
* Dropout as the identity when ``training_mode`` is absent or constant false;
* random ops never (their reference kernels still run at run time).

The shape-arithmetic ops (Unsqueeze, Concat, Gather, Reshape...) run as the same numpy calls directly
(:mod:`.native_kernels`) when their inputs are the usual ones.

Ops with bodies (If, Loop, Scan, SequenceMap) get no kernel here: the runtime executes bodies itself.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable, Sequence, cast

import numpy as np

from ...ir.opdef import InputInfo, OpDef
from .infer import constant_value
from .native_kernels import native_outputs
from .protos import node_proto

if TYPE_CHECKING:  # pragma: no cover
    from .schemas import OnnxOp

__all__ = ["INSTANCES_LIMIT", "NONDETERMINISTIC", "REUSABLE", "attach", "run_reference"]

NONDETERMINISTIC = frozenset(
    {"Bernoulli", "Multinomial", "RandomNormal", "RandomNormalLike", "RandomUniform", "RandomUniformLike"}
)

# NOTE: a pure cache of onnx.reference implementation classes, (op type, opset) -> class or None
# (None: the op runs through a one-node ReferenceEvaluator). Entries never change once made.
_CLASSES: dict[tuple[str, int], Any] = {}

# NOTE: instances of the implementation classes of these ops keep nothing between runs, so one instance
# per node description (op, opset, inputs present, output count, attributes) serves every node alike;
# they are remembered, up to INSTANCES_LIMIT (the table starts afresh when full). Only attributes keyed
# exactly (ints, strs, bytes, floats by their bits, and tuples of these) are; others make an instance each.
REUSABLE = frozenset(
    {"Add", "And", "Cast", "Concat", "Div", "Equal", "Expand", "Gather", "Greater", "Identity", "Less", "Max",
     "Min", "Mod", "Mul", "Neg", "Not", "Or", "Range", "ReduceProd", "Reshape", "Shape", "Slice", "Squeeze",
     "Sub", "Transpose", "Unsqueeze", "Where"}
)  # fmt: skip
INSTANCES_LIMIT = 1024
_INSTANCES: dict[tuple[Any, ...], Any] = {}


def attach(opdef: OpDef, op: "OnnxOp") -> None:
    """Sets ``opdef``'s reference kernel and, where one applies, its fold."""
    if op.op_type == "Constant":
        opdef.set_reference(lambda inputs, attrs: [constant_value(attrs)])
        opdef.set_fold(lambda inputs, attrs: [constant_value(attrs)])
        return
    if op.op_type == "BatchNormalization" and op.opset < 14:
        opdef.set_reference(lambda inputs, attrs: _batch_norm_9(op, inputs, attrs))
    elif op.op_type == "OneHot":
        opdef.set_reference(_one_hot)
    else:
        opdef.set_reference(lambda inputs, attrs: run_reference(op, inputs, attrs))
    fold = _FOLDS.get(op.op_type)
    if fold is not None:
        opdef.set_fold(fold)
    elif op.op_type in NONDETERMINISTIC:
        opdef.set_fold(_never)


def _never(inputs: Sequence[InputInfo | None], attrs: dict[str, Any]) -> None:
    return None


def _static(info: InputInfo | None) -> tuple[int, ...] | None:
    if info is None or info.shape is None or any(d < 0 for d in info.shape):
        return None
    return tuple(info.shape)


def _fold_shape(inputs: Sequence[InputInfo | None], attrs: dict[str, Any]) -> list[np.ndarray] | None:
    shape = _static(inputs[0]) if inputs else None
    if shape is None:
        return None
    start = attrs.get("start") or 0
    end = attrs.get("end")
    return [np.array(shape[start:end], np.int64)]


def _fold_size(inputs: Sequence[InputInfo | None], attrs: dict[str, Any]) -> list[np.ndarray] | None:
    shape = _static(inputs[0]) if inputs else None
    return None if shape is None else [np.array(int(np.prod(shape, dtype=np.int64)), np.int64)]


def _fold_dropout(inputs: Sequence[InputInfo | None], attrs: dict[str, Any]) -> list[np.ndarray] | None:
    x = inputs[0] if inputs else None
    if x is None or x.data is None:
        return None
    training = inputs[2] if len(inputs) > 2 else None
    if training is not None and (training.data is None or bool(np.asarray(training.data).reshape(-1)[0])):
        return None
    return [np.asarray(x.data), np.ones(np.shape(x.data), np.bool_)]


_FOLDS: dict[str, Callable[..., Any]] = {"Shape": _fold_shape, "Size": _fold_size, "Dropout": _fold_dropout}


def _batch_norm_9(op: "OnnxOp", inputs: Sequence[np.ndarray | None], attrs: dict[str, Any]) -> list[np.ndarray]:
    """BatchNormalization before opset 14 in inference mode (one output).

    NOTE: onnx.reference's BatchNormalization-9 always computes training-mode statistics (it loads the
    ``momentum`` default and takes a set momentum to mean training), unlike onnxruntime and the spec, where
    a node with one output normalizes with the given mean and variance. Several outputs mean training.
    """
    if int(attrs.get("_num_outputs") or 1) > 1:
        return run_reference(op, inputs, attrs)
    x, scale, bias, mean, var = (np.asarray(a) for a in inputs[:5])
    shape = (-1,) + (1,) * (x.ndim - 2)
    eps = attrs.get("epsilon")
    eps = 1e-5 if eps is None else eps
    y = scale.reshape(shape) * (x - mean.reshape(shape)) / np.sqrt(var.reshape(shape) + eps) + bias.reshape(shape)
    return [y.astype(x.dtype)]


def _one_hot(inputs: Sequence[np.ndarray | None], attrs: dict[str, Any]) -> list[np.ndarray]:
    """OneHot(indices, depth, values): ``values[1]`` where the index (negative ones counted from ``depth``)
    meets the position along the new ``axis``, ``values[0]`` elsewhere.

    NOTE: onnx.reference's OneHot fails with a TypeError on a depth given as a 1-element tensor, which the
    spec allows and tf2onnx writes.
    """
    indices, depth_value, values = (np.asarray(a) for a in inputs[:3])
    depth = int(depth_value.reshape(-1)[0])
    axis = int(attrs.get("axis", -1) if attrs.get("axis") is not None else -1)
    axis = axis + indices.ndim + 1 if axis < 0 else axis
    wrapped = np.where(indices < 0, indices + depth, indices).astype(np.int64)
    hot = np.expand_dims(wrapped, axis) == np.arange(depth).reshape((-1,) + (1,) * (indices.ndim - axis))
    return [np.where(hot, values.reshape(-1)[1], values.reshape(-1)[0]).astype(values.dtype)]


# ----------------------------------------------------------------------------- running onnx.reference
def _num_outputs(op: "OnnxOp", inputs: Sequence[Any], attrs: dict[str, Any]) -> int:
    given = attrs.get("_num_outputs")
    if given is not None:
        return int(given)
    schema = op.schema
    if op.op_type == "Split":
        if attrs.get("num_outputs") is not None:
            return int(attrs["num_outputs"])
        if len(inputs) > 1 and inputs[1] is not None:
            return int(np.asarray(inputs[1]).size)
        if attrs.get("split") is not None:
            return len(attrs["split"])
        raise ValueError("Split with neither a split input nor num_outputs needs its output count in attrs['_num_outputs']")
    last = schema.outputs[-1] if schema.outputs else None
    if last is not None and last.option == "Variadic":
        raise ValueError(f"{op.op_type} has variadic outputs; give their count in attrs['_num_outputs']")
    return len(schema.outputs)


def _op_class(op: "OnnxOp") -> Any:
    key = (op.op_type, op.opset)
    if key not in _CLASSES:
        from onnx.reference.ops import load_op

        try:
            _CLASSES[key] = load_op(op.domain, op.op_type, op.opset)
        except Exception:  # a function-only op: run it through a ReferenceEvaluator instead
            _CLASSES[key] = None
    return _CLASSES[key]


def _run_params(opset: int, domain: str) -> dict[str, Any]:
    from onnx.reference import ReferenceEvaluator

    return {
        "log": lambda pattern, *args: None,
        "opsets": {domain: opset},
        "verbose": 0,
        "new_ops": None,
        "existing_functions": {},
        "evaluator_cls": ReferenceEvaluator,
    }


def run_reference(op: "OnnxOp", inputs: Sequence[np.ndarray | None], attrs: dict[str, Any]) -> list[np.ndarray]:
    """Runs ONNX's reference implementation of ``op`` (see the module docstring)."""
    arrays = list(inputs)
    while arrays and arrays[-1] is None:
        arrays.pop()
    native = native_outputs(op.op_type, op.domain, op.opset, arrays, attrs)
    if native is not None:
        return native
    n_out = _num_outputs(op, arrays, attrs)
    present = tuple(a is not None for a in arrays)
    key = _instance_key(op, present, n_out, attrs) if op.op_type in REUSABLE else None
    instance = _INSTANCES.get(key) if key is not None else None
    if instance is not None:
        return [np.asarray(o) for o in instance.run(*arrays)]
    node = node_proto(op.op_type, present, n_out, attrs, op.attr_kinds, op.domain)
    cls = _op_class(op)
    if cls is not None:
        instance = cls(node, _run_params(op.opset, op.domain))
        outputs = instance.run(*arrays)
        if key is not None:
            if len(_INSTANCES) >= INSTANCES_LIMIT:
                _INSTANCES.clear()
            _INSTANCES[key] = instance
    else:
        outputs = _run_function(op, node, arrays)
    return [np.asarray(o) for o in outputs]


def _instance_key(op: "OnnxOp", present: tuple[bool, ...], n_out: int, attrs: dict[str, Any]) -> tuple[Any, ...] | None:
    """What the one-node ``NodeProto`` of :func:`run_reference` is made of, or None when an attribute
    cannot be keyed exactly (see the NOTE on ``REUSABLE``)."""
    keyed = []
    for name in sorted(op.attr_kinds):
        payload = attrs.get(name)
        if payload is None:
            continue
        value = _exact(payload)
        if value is None:
            return None
        keyed.append((name, value))
    return (op.op_type, op.domain, op.opset, present, n_out, tuple(keyed))


def _exact(payload: Any) -> Any:
    kind = type(payload)
    if kind is int or kind is str or kind is bytes or kind is bool:
        return (kind, payload)
    if kind is float:
        return (kind, payload.hex())
    if kind is tuple:
        items = [_exact(v) for v in payload]
        return None if any(v is None for v in items) else (kind, tuple(items))
    return None


def _run_function(op: "OnnxOp", node: Any, arrays: Sequence[np.ndarray | None]) -> list[Any]:
    from onnx import helper
    from onnx.reference import ReferenceEvaluator

    from ...dtypes import from_numpy

    graph_inputs = []
    feeds = {}
    for name, array in zip(node.input, arrays):
        if array is None:
            continue
        dtype = from_numpy(np.asarray(array).dtype)
        elem = dtype.onnx if dtype is not None and dtype.onnx is not None else 0
        graph_inputs.append(helper.make_tensor_value_info(name, elem, list(np.shape(array))))
        feeds[name] = np.asarray(array)
    outputs = [helper.make_tensor_value_info(o, 0, None) for o in node.output]
    graph = helper.make_graph([node], op.op_type, graph_inputs, outputs)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid(op.domain, op.opset)])
    return cast("list[Any]", ReferenceEvaluator(model).run(None, feeds))
