"""Constant folding of ``tf`` nodes before lowering: the values a TF graph computes from constants alone.

A frozen TF graph reads its weights through ``Identity`` (``ReadVariableOp``), reshapes and squeezes them,
and computes shape vectors from constants; the exported ONNX graph should hold the results as initializers
(so a Conv's filter can be rearranged at export time). A ``tf`` node is folded when every input is a
constant or folded, it has no bodies, it is not random, and its op's numpy ``reference`` kernel (the one
shape inference folds with) runs; the result is its outputs' arrays, by value (identity).
"""

from __future__ import annotations

from typing import Any, Mapping

import numpy as np

from ..dialects.tf.misc import identity_kernel
from ..ir.graph import CONST_OP, Graph, Node, Value
from ..ir.types import TensorType
from .onnx_lowering.emitter import constant_of

__all__ = ["MAX_FOLDED_ELEMENTS", "fold_constants"]

MAX_FOLDED_ELEMENTS = 1 << 26
_NEVER = frozenset({"RandomUniform", "RandomStandardNormal", "TruncatedNormal", "RandomUniformInt", "Print",
                    "Assert", "NoOp", "ControlTrigger"})


def fold_constants(graph: Graph, known: Mapping[int, Any] | None = None,
                   nodes: list[Node] | None = None) -> dict[Value, np.ndarray]:
    """The folded value of each ``tf`` node output computable from constants, by value (an IR value hashes by
    identity). ``known``: the values shape inference computed of the graph's values, by ``id(value)``
    (:attr:`~scopefusion.ir_builder.shape_inference.InferenceResult.known_values`, of the graph as it is): a node
    folded here whose outputs all have one of the type the value has takes them instead of running its kernel
    again (inference folds with the same kernels, on the same constants). ``nodes``, when given, gets the nodes
    folded, in order (each has every output folded)."""
    folded: dict[Value, np.ndarray] = {}
    # numpy's floating-point errors are ignored from the first kernel run on (see _fold_into), not around the
    # whole walk: most folds (weights read through an identity, values inference knows) run none.
    quiet: list[np.errstate] = []
    try:
        _fold_into(graph, folded, known, nodes if nodes is not None else [], quiet)
    finally:
        if quiet:
            quiet[0].__exit__(None, None, None)
    return folded


def _fold_into(graph: Graph, folded: dict[Value, np.ndarray], known: Mapping[int, Any] | None,
               nodes: list[Node], quiet: list[np.errstate]) -> None:
    """Folds ``graph``'s nodes into ``folded``; before the first kernel runs, enters numpy's error state ignoring
    every error and leaves it in ``quiet`` for the caller to exit."""
    for node in graph.nodes:
        # Node's private fields, read without its properties: this runs for every node of every export.
        if node._dialect != "tf":
            continue
        inputs = node.inputs
        first = inputs[0] if inputs else None
        # Most nodes read a computed tensor first: told without reading any constant (see _may_be_constant).
        if first is None or (first not in folded and first.producer.op != CONST_OP):
            continue
        if node._op_type in _NEVER or node.subgraphs or not node.outputs:
            continue
        opdef = node.opdef
        if opdef is None or opdef.reference is None:
            continue
        if opdef.reference is identity_kernel and len(inputs) == 1 and len(node.outputs) == 1:
            # A weight read through an identity (most folds): the constant's array, as the loop below takes it.
            array = constant_of(first, folded)
            out = node.outputs[0]
            array = _checked_array(array, out) if array is not None else None
            if array is not None:
                folded[out] = array
                nodes.append(node)
            continue
        arrays = []
        for value in inputs:
            array = constant_of(value, folded)
            if array is None:
                break
            arrays.append(array)
        else:
            if opdef.reference is identity_kernel and len(node.outputs) == 1:
                value = node.outputs[0]
                array = _checked_array(arrays[0], value)  # what _run gives, without building the kernel's attrs
                if array is not None:
                    folded[value] = array
                    nodes.append(node)
                continue
            outputs = _known(node.outputs, known) if known is not None else None
            if outputs is None:
                if not quiet:
                    quiet.append(np.errstate(all="ignore"))
                    quiet[0].__enter__()
                outputs = _run(node, arrays)
            if outputs is None or len(outputs) != len(node.outputs):
                continue
            for value, array in zip(node.outputs, outputs):
                folded[value] = array
            nodes.append(node)


def _may_be_constant(value: Value | None, folded: Mapping[Value, np.ndarray]) -> bool:
    """False when :func:`~.onnx_lowering.emitter.constant_of` gives None for ``value`` (it is absent, neither
    folded nor a constant's output), without reading a constant's array."""
    return value is not None and (value in folded or value.producer.op == CONST_OP)


def _known(values: list[Value], known: Mapping[int, Any]) -> list[np.ndarray] | None:
    """The arrays inference knows of ``values``, when it knows each as an array of the value's static type that
    :func:`_checked_array` would take as it is; else None."""
    arrays = []
    for value in values:
        array = known.get(id(value))
        t = value.type
        if (type(array) is not np.ndarray or not isinstance(t, TensorType) or t.rank != array.ndim
                or t.shape != array.shape or array.dtype.kind not in "biufc" or t.dtype.numpy != array.dtype
                or array.size > MAX_FOLDED_ELEMENTS):
            return None
        arrays.append(array)
    return arrays


def _run(node: Any, arrays: list[np.ndarray]) -> list[np.ndarray] | None:
    attrs = {k: v.value for k, v in node.attrs.items() if not k.startswith("_")}
    attrs["_num_outputs"] = len(node.outputs)
    try:  # numpy's floating-point errors are ignored (see fold_constants)
        out = node.opdef.reference(list(arrays), attrs)
    except Exception:  # a kernel that cannot run on these values leaves the node to the lowering
        return None
    return _checked(node, out)


def _checked(node: Any, out: Any) -> list[np.ndarray] | None:
    """A kernel's outputs ``out`` as the node's folded arrays (its outputs' dtypes), or None when one cannot be."""
    result = []
    for array, value in zip(out, node.outputs):
        checked = _checked_array(array, value)
        if checked is None:
            return None
        result.append(checked)
    return result


def _checked_array(array: Any, value: Any) -> np.ndarray | None:
    """One kernel output ``array`` as the folded array of IR value ``value`` (its dtype), or None when it cannot be."""
    if type(array) is not np.ndarray:  # an array is taken as it is (np.asarray would return it)
        if not isinstance(array, (np.ndarray, np.generic, bool, int, float)):
            return None
        array = np.asarray(array)
    if array.size > MAX_FOLDED_ELEMENTS or array.dtype.kind not in "biufc":
        return None
    dtype = getattr(value.type, "dtype", None)
    if dtype is not None:
        wanted = dtype.numpy
        if wanted.kind in "biufc" and array.dtype != wanted:
            with np.errstate(all="ignore"):  # a cast out of range (NaN to an int) warns nothing, as a kernel run here
                array = array.astype(wanted)
    return array
