"""Numerical equivalence of fused ops with the subgraphs they replace, checked against the source framework.

``fusion_errors(path, "LayerNorm")`` converts the model, and for every accepted fusion of that type:

1. runs the source framework once on seeded random inputs and fetches, for each fusion, the tensors that
   feed its input ports (``fusion.inputs[port].producer:index``) and the tensors its output ports stand for
   (``fusion.outputs[port].inner_node:index``): TensorFlow for ``.pb`` / ``.pbtxt`` (the GraphDef imported
   into a fresh ``tf.Graph``), onnxruntime for ``.onnx`` (the tensors exposed as extra graph outputs);
2. runs the fused op's numpy ``reference`` kernel (its OpDef in the converted model's registry) on the fetched
   inputs with the IR node's attributes;
3. returns the max abs error per fusion (a fused output whose shape differs counts as ``inf``).

Constant producers (a weight feeding a fused port) are read from the source graph, not fetched. Inputs are
drawn per graph input: floats standard normal, integers in ``[0, int_high)`` (token ids stay valid for any
vocabulary of ``int_high`` or more), booleans fair; an unknown dim is ``unknown_dim`` unless
``input_shapes`` gives it. ``feeds`` overrides any input by name.

Typical use in a rule's tests::

    errors = fusion_errors(path, "LayerNorm")
    assert len(errors) == 8 and max(errors.values()) <= 1e-5
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence

import numpy as np

__all__ = ["EquivalenceReport", "check_fusions", "fusion_errors", "run_source"]

Tensor = tuple[str, int]


@dataclass
class EquivalenceReport:
    """The outcome of :func:`check_fusions`: the converted model, the fusions checked and their errors."""

    model: Any
    fused_type: str
    errors: dict[str, float] = field(default_factory=dict)

    @property
    def max_error(self) -> float:
        return max(self.errors.values(), default=0.0)

    def __len__(self) -> int:
        return len(self.errors)


def fusion_errors(
    path: str | os.PathLike,
    fused_type: str,
    *,
    model: Any = None,
    input_shapes: Mapping[str, Sequence[int]] | None = None,
    enable: Iterable[str] = (),
    disable: Iterable[str] = (),
    feeds: Mapping[str, np.ndarray] | None = None,
    seed: int = 0,
    int_high: int = 2,
    unknown_dim: int = 2,
) -> dict[str, float]:
    """Max abs error of each accepted fusion of ``fused_type`` (by fusion name); see the module docstring.

    ``model`` is a model already converted from ``path`` (converted here when None).
    """
    return check_fusions(
        path,
        fused_type,
        model=model,
        input_shapes=input_shapes,
        enable=enable,
        disable=disable,
        feeds=feeds,
        seed=seed,
        int_high=int_high,
        unknown_dim=unknown_dim,
    ).errors


def check_fusions(
    path: str | os.PathLike,
    fused_type: str,
    *,
    model: Any = None,
    input_shapes: Mapping[str, Sequence[int]] | None = None,
    enable: Iterable[str] = (),
    disable: Iterable[str] = (),
    feeds: Mapping[str, np.ndarray] | None = None,
    seed: int = 0,
    int_high: int = 2,
    unknown_dim: int = 2,
) -> EquivalenceReport:
    """Like :func:`fusion_errors`, returning the converted model along with the errors."""
    from scopefusion.convert import convert

    path = Path(path)
    if model is None:
        model = convert(path, input_shapes=input_shapes, enable=enable, disable=disable)
    report = EquivalenceReport(model, fused_type)
    fusions = [f for f in model.fusion_run.accepted if f.type == fused_type]
    if not fusions:
        return report
    source = model.source
    wanted: dict[Tensor, None] = {}
    for fusion in fusions:
        for item in fusion.inputs:
            if _constant(source, item.producer) is None:
                wanted[(item.producer, item.index)] = None
        for out in fusion.outputs:
            wanted[(out.inner_node, out.index)] = None
    inputs = make_inputs(source, input_shapes, feeds, seed=seed, int_high=int_high, unknown_dim=unknown_dim)
    values = run_source(path, source, inputs, list(wanted))
    registry = model.graph.registry
    opdef = registry.lookup(f"fused.{fused_type}")
    if opdef is None or opdef.reference is None:
        raise AssertionError(f"fused.{fused_type} has no definition with a reference kernel in the converted model")
    for fusion in fusions:
        node = _ir_node(model.graph, fusion)
        attrs = {k: v.value for k, v in node.get_all_attrs().items()}
        args: list[np.ndarray | None] = []
        for item in sorted(fusion.inputs, key=lambda i: i.port):
            const = _constant(source, item.producer)
            args.append(np.asarray(const) if const is not None else values[(item.producer, item.index)])
        got = opdef.reference(args, attrs)
        error = 0.0
        for out in fusion.outputs:
            want = np.asarray(values[(out.inner_node, out.index)])
            have = np.asarray(got[out.port])
            if have.shape != want.shape:
                error = float("inf")
                break
            if want.size:
                error = max(error, float(np.max(np.abs(have.astype(np.float64) - want.astype(np.float64)))))
        report.errors[fusion.name] = error
    return report


# ------------------------------------------------------------------------------------------ inputs
def make_inputs(
    source: Any,
    input_shapes: Mapping[str, Sequence[int]] | None = None,
    feeds: Mapping[str, np.ndarray] | None = None,
    *,
    seed: int = 0,
    int_high: int = 2,
    unknown_dim: int = 2,
) -> dict[str, np.ndarray]:
    """Seeded random values for every graph input of ``source`` (a SourceGraph), by input name."""
    rng = np.random.default_rng(seed)
    shapes = dict(input_shapes or {})
    feeds = dict(feeds or {})
    out: dict[str, np.ndarray] = {}
    for graph_input in source.inputs:
        name = graph_input.name
        if name in feeds:
            out[name] = np.asarray(feeds[name])
            continue
        if name in shapes:
            shape = tuple(int(d) for d in shapes[name])
        elif graph_input.shape is None:
            raise ValueError(f"graph input {name!r} has an unknown rank; give its shape in input_shapes")
        else:
            shape = tuple(unknown_dim if d is None or d < 0 else int(d) for d in graph_input.shape)
        dtype = np.dtype(graph_input.dtype.numpy) if graph_input.dtype is not None else np.dtype(np.float32)
        if dtype.kind == "f":
            out[name] = rng.standard_normal(shape).astype(dtype)
        elif dtype.kind in "iu":
            out[name] = rng.integers(0, int_high, shape).astype(dtype)
        elif dtype.kind == "b":
            out[name] = rng.integers(0, 2, shape).astype(bool)
        else:
            raise ValueError(f"graph input {name!r} has dtype {dtype}; give its value in feeds")
    return out


# ------------------------------------------------------------------------------------------ source runs
def run_source(path: str | os.PathLike, source: Any, inputs: Mapping[str, np.ndarray], tensors: Sequence[Tensor]) -> dict[Tensor, np.ndarray]:
    """Runs the source model at ``path`` on ``inputs`` once; returns the value of each ``(node, index)``."""
    path = Path(path)
    if source.framework == "onnx":
        return _run_onnx(path, source, inputs, tensors)
    if path.suffix in (".pb", ".pbtxt"):
        return _run_tf_graphdef(path, source, inputs, tensors)
    raise ValueError(f"{path}: the harness runs frozen GraphDefs (.pb, .pbtxt) and ONNX files only")


def _run_tf_graphdef(path: Path, source: Any, inputs: Mapping[str, np.ndarray], tensors: Sequence[Tensor]) -> dict[Tensor, np.ndarray]:
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    import tensorflow as tf

    graph_def = tf.compat.v1.GraphDef()
    if path.suffix == ".pbtxt":
        from google.protobuf import text_format

        text_format.Parse(path.read_text(), graph_def)
    else:
        graph_def.ParseFromString(path.read_bytes())
    graph = tf.Graph()
    with graph.as_default():
        tf.graph_util.import_graph_def(graph_def, name="")
    feed = {}
    for graph_input in source.inputs:
        feed[graph.get_tensor_by_name(f"{graph_input.node}:0")] = inputs[graph_input.name]
    fetches = [graph.get_tensor_by_name(f"{node}:{index}") for node, index in tensors]
    # Grappler off: its remapper rewrites some subgraphs into fused kernels (a layer norm over a positive
    # axis came out with another epsilon) and can drop fetched nodes; the graph is run as written.
    config = tf.compat.v1.ConfigProto(intra_op_parallelism_threads=1, inter_op_parallelism_threads=1)
    config.graph_options.rewrite_options.disable_meta_optimizer = True
    config.graph_options.optimizer_options.opt_level = tf.compat.v1.OptimizerOptions.L0
    with tf.compat.v1.Session(graph=graph, config=config) as session:
        values = session.run(fetches, feed_dict=feed)
    return {tensor: np.asarray(value) for tensor, value in zip(tensors, values)}


def _run_onnx(path: Path, source: Any, inputs: Mapping[str, np.ndarray], tensors: Sequence[Tensor]) -> dict[Tensor, np.ndarray]:
    import onnx
    import onnxruntime as ort

    model = onnx.load(str(path))
    names = []
    for node_name, index in tensors:
        node = source.node(node_name)
        if index >= len(node.output_names):
            raise ValueError(f"{path}: node {node_name!r} has no output {index}")
        names.append(node.output_names[index])
    present = {o.name for o in model.graph.output}
    for name in dict.fromkeys(names):
        if name not in present:
            model.graph.output.append(onnx.ValueInfoProto(name=name))
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    options.intra_op_num_threads = 1
    session = ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])
    feed = {graph_input.name: inputs[graph_input.name] for graph_input in source.inputs}
    values = session.run(names, feed)
    return {tensor: np.asarray(value) for tensor, value in zip(tensors, values)}


# ------------------------------------------------------------------------------------------ helpers
def _constant(source: Any, name: str) -> np.ndarray | None:
    """The value of a constant producer (through Identity reads), else None."""
    for _ in range(16):
        node = source.get(name)
        if node is None:
            return None
        if node.value is not None:
            return np.asarray(node.value)
        if node.op_type == "Identity" and len(node.inputs) == 1:
            name = node.inputs[0][0]
            continue
        return None
    return None


def _ir_node(graph: Any, fusion: Any) -> Any:
    op = f"fused.{fusion.type}"
    node = graph.get_node(fusion.name)
    if node is not None and node.op == op:
        return node
    for candidate in graph.nodes:
        if candidate.op != op:
            continue
        original = candidate.get_all_attrs().get("_original_nodes")
        if original is not None and tuple(original.value) == tuple(fusion.claimed):
            return candidate
    raise AssertionError(f"no {op} node stands for fusion {fusion.name!r} in the converted graph")
