"""Reference kernels: how one IR node computes its outputs.

* ``fused`` and ``onnx`` dialect ops (and ``ge`` ops) run the numpy ``reference`` declared with their op
  definition (ONNX ones through ``onnx.reference``).
* ``tf`` dialect ops run through TensorFlow's eager kernels (``execute`` with the node's attributes),
  TensorFlow imported on first use only.

A kernel returns one array per output. Outputs TensorFlow keeps opaque (resources, tensor lists) are
returned as TensorFlow objects and never enter the arena.
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from ..errors import VerifyError
from ..ir.attrs import DTYPE, LIST_DTYPE, NAMED_ATTRS, TENSOR
from ..ir.graph import Node

__all__ = ["is_opaque", "run_kernel"]


def is_opaque(x: Any) -> bool:
    """True for a run-time value that is not a numpy array (a TF resource or variant handle)."""
    return x is not None and not isinstance(x, (np.ndarray, np.generic, bool, int, float))


def run_kernel(node: Node, inputs: Sequence[Any]) -> list[Any]:
    """The outputs of ``node`` on ``inputs`` (arrays, None for absent optional inputs, opaque handles)."""
    if node.dialect == "tf":
        return _tf_kernel(node, inputs)
    opdef = node.opdef
    if opdef is None or opdef.reference is None:
        raise VerifyError(
            f"node {node.name!r} ({node.op}) has no reference kernel; the executor cannot run it "
            "(declare one with OpDef.set_reference)"
        )
    attrs = {k: v.value for k, v in node.attrs.items() if not k.startswith("_")}
    attrs["_num_outputs"] = len(node.outputs)  # kernels whose output count depends on the node (Split...)
    try:
        out = opdef.reference(list(inputs), attrs)
    except VerifyError:
        raise
    except Exception as e:
        raise VerifyError(f"node {node.name!r} ({node.op}): the reference kernel failed: {type(e).__name__}: {e}") from e
    return [o if is_opaque(o) else np.asarray(o) for o in out]


# ----------------------------------------------------------------------------- TensorFlow
class _TF:
    """TensorFlow's eager pieces, imported on first use."""

    _loaded: "_TF | None" = None

    def __init__(self) -> None:
        import tensorflow as tf
        from tensorflow.python.eager import context, execute
        from tensorflow.python.framework import op_def_registry

        self.tf = tf
        self.execute = execute.execute
        self.context = context.context()
        self.op_defs = op_def_registry

    @classmethod
    def get(cls) -> "_TF":
        if cls._loaded is None:
            cls._loaded = cls()
        return cls._loaded


def _tf_attr(value: Any, kind: Any, tf: Any) -> Any:
    if kind is DTYPE:
        return value.tf
    if kind is LIST_DTYPE:
        return [d.tf for d in value]
    if kind is TENSOR:
        return tf.make_tensor_proto(value)
    if isinstance(value, tuple):
        return [list(v) if isinstance(v, tuple) else v for v in value]
    return value


def _tf_kernel(node: Node, inputs: Sequence[Any]) -> list[Any]:
    t = _TF.get()
    op_def = t.op_defs.get(node.op_type)
    if op_def is None:
        raise VerifyError(f"node {node.name!r}: TensorFlow has no op {node.op_type!r}; the executor cannot run it")
    attrs: list[Any] = []
    for spec in op_def.attr:
        if spec.name not in node.attrs:
            continue
        value = node.attrs.get_attr(spec.name)
        if value.type_id is NAMED_ATTRS:
            raise VerifyError(f"node {node.name!r} ({node.op}) takes a function attribute; run it as control flow")
        attrs.extend((spec.name, _tf_attr(value.value, value.type_id, t.tf)))
    tensors = []
    for x in inputs:
        if x is None:
            raise VerifyError(f"node {node.name!r} ({node.op}) has an absent input, which TensorFlow ops do not take")
        tensors.append(x if is_opaque(x) else t.tf.constant(x))
    try:
        out = t.execute(node.op_type.encode(), len(node.outputs), tensors, tuple(attrs), t.context)
    except Exception as e:
        raise VerifyError(f"node {node.name!r} ({node.op}): TensorFlow's kernel failed: {type(e).__name__}: {e}") from e
    results = []
    for o in out:
        if o.dtype in (t.tf.resource, t.tf.variant):
            results.append(o)
        else:
            results.append(o.numpy())
    return results
