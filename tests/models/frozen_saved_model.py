"""SavedModels built from frozen GraphDefs: the same graph behind a ``serving_default`` signature.

Every zoo model is built as a frozen GraphDef (``tests/e2e/zoo.py``); :func:`saved_model_from_frozen` wraps
one in a ``tf.function`` whose signature takes the graph's placeholders (by name) and returns its outputs
(the nodes nothing reads), and saves it, so the SavedModel loader sees the same computation. A graph with
TF1 loop frames (``Enter`` / ``Exit``) is saved the TF1 way instead (``simple_save`` of a session holding it),
as a TF1 program would be.
"""

from __future__ import annotations

from pathlib import Path

__all__ = ["frozen_outputs", "saved_model_from_frozen"]

_NOT_OUTPUTS = {"NoOp", "Const", "Placeholder", "Assert"}


def frozen_outputs(graph_def) -> list[str]:
    """Names of the nodes whose outputs nothing reads (the frozen graph's outputs), in graph order."""
    read = {i.lstrip("^").split(":")[0] for node in graph_def.node for i in node.input}
    return [n.name for n in graph_def.node if n.name not in read and n.op not in _NOT_OUTPUTS]


def saved_model_from_frozen(graph_def_bytes: bytes, path: Path) -> Path:
    """Writes the SavedModel of a frozen GraphDef at ``path`` (see the module docstring); returns ``path``."""
    import tensorflow as tf

    graph_def = tf.compat.v1.GraphDef.FromString(graph_def_bytes)
    placeholders = [n for n in graph_def.node if n.op == "Placeholder"]
    outputs = frozen_outputs(graph_def)
    if any(n.op in ("Enter", "Exit") for n in graph_def.node):
        with tf.Graph().as_default() as graph, tf.compat.v1.Session(graph=graph) as session:
            tf.compat.v1.import_graph_def(graph_def, name="")
            tf.compat.v1.saved_model.simple_save(
                session, str(path),
                inputs={p.name: graph.get_tensor_by_name(f"{p.name}:0") for p in placeholders},
                outputs={o.replace("/", "_"): graph.get_tensor_by_name(f"{o}:0") for o in outputs},
            )
        return path

    def imports() -> None:
        tf.compat.v1.import_graph_def(graph_def, name="")

    wrapped = tf.compat.v1.wrap_function(imports, [])
    graph = wrapped.graph
    pruned = wrapped.prune([graph.as_graph_element(f"{p.name}:0") for p in placeholders],
                           [graph.as_graph_element(f"{o}:0") for o in outputs])
    specs = []
    for p in placeholders:
        shape = tf.TensorShape(p.attr["shape"].shape) if "shape" in p.attr else None
        specs.append(tf.TensorSpec(shape, tf.as_dtype(p.attr["dtype"].type), name=p.name))

    module = tf.Module()

    @tf.function(input_signature=specs)
    def serve(*args):
        results = pruned(*args)
        return {name.replace("/", "_"): value for name, value in zip(outputs, results)}

    module.serve = serve
    # The frozen graph's custom gradients (Keras swish's IdentityN) capture constants the saver refuses.
    options = tf.saved_model.SaveOptions(experimental_custom_gradients=False)
    tf.saved_model.save(module, str(path), signatures={"serving_default": serve}, options=options)
    return path
