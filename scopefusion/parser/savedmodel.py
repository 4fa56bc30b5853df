"""SavedModel directories into a :class:`SourceGraph`: one signature, variables frozen into constants.

The tag sets and signatures are read from ``saved_model.pb`` with our own protos, so a missing
signature is reported (with the ones there are) without TensorFlow. Two loaders freeze the variables:

* ``native`` (the default): the checkpoint is read and the signature frozen and inlined without
  TensorFlow, as :mod:`.savedmodel_freeze` describes; node names are those TensorFlow's own freezing
  gives (``StatefulPartitionedCall/...``).
* ``tensorflow``: TensorFlow, imported here, lazily, and nowhere else in the parser, freezes it:

* TensorFlow 2 SavedModels (``tf.saved_model.save``, Keras 3 ``model.export``): the signature's concrete
  function goes through ``convert_variables_to_constants_v2``; functional control flow stays as
  ``While`` / ``If`` nodes unless ``lower_control_flow=True``.
* TensorFlow 1 SavedModels (``tf.compat.v1.saved_model.Builder``, ``simple_save``): the meta graph is
  loaded into a session and frozen from it.

The frozen GraphDef then goes through the same path as a ``.pb`` file. Graph inputs and outputs are
named by the signature's keys.
"""

from __future__ import annotations

import os
from typing import Any, Callable, Sequence

from google.protobuf import message as _message
from google.protobuf import text_format

from ..errors import ModelLoadError, ScopeFusionError
from .proto import tf_saved_model_pb2 as smpb
from .source_graph import SourceGraph
from .tf_graphdef import graph_from_graph_def, parse_graph_def_buffer
from .tf_nodes import parse_tensor_name

__all__ = [
    "DEFAULT_SIGNATURE",
    "DEFAULT_TAGS",
    "SAVEDMODEL_LOADERS",
    "load_saved_model",
    "read_saved_model_proto",
    "select_meta_graph",
]

SAVEDMODEL_LOADERS = ("native", "tensorflow")
DEFAULT_SIGNATURE = "serving_default"
DEFAULT_TAGS = ("serve",)
_INIT_OP_KEY = "__saved_model_init_op"


def read_saved_model_proto(directory: str):
    """Parses ``saved_model.pb`` (or ``saved_model.pbtxt``) of a SavedModel directory.

    Raises:
        ModelLoadError: neither file exists, or it is not a SavedModel.
    """
    binary = os.path.join(directory, "saved_model.pb")
    textual = os.path.join(directory, "saved_model.pbtxt")
    proto = smpb.SavedModel()
    if os.path.isfile(binary):
        with open(binary, "rb") as f:
            data = f.read()
        if not data:
            raise ModelLoadError(f"{binary}: the file is empty; re-export the SavedModel")
        try:
            proto.ParseFromString(data)
        except _message.DecodeError as exc:
            raise ModelLoadError(f"{binary}: not a valid SavedModel ({exc or 'protobuf decode error'}); the file is truncated or corrupt") from None
    elif os.path.isfile(textual):
        try:
            with open(textual, encoding="utf-8") as f:
                text_format.Parse(f.read(), proto, allow_unknown_field=True)
        except (text_format.ParseError, UnicodeDecodeError) as exc:
            raise ModelLoadError(f"{textual}: not a valid text SavedModel ({exc}); fix or re-export it") from None
    else:
        raise ModelLoadError(
            f"{directory}: the directory has no saved_model.pb or saved_model.pbtxt, so it is not a SavedModel; "
            "pass the directory that tf.saved_model.save or model.export wrote"
        )
    if not proto.meta_graphs:
        raise ModelLoadError(f"{directory}: the SavedModel holds no meta graph; the file is corrupt or another format")
    return proto


def select_meta_graph(proto, directory: str, tags: Sequence[str] | None):
    """The meta graph whose tag set equals ``tags`` (default: the only one, else the ``serve`` one)."""
    available = [tuple(sorted(m.meta_info_def.tags)) for m in proto.meta_graphs]
    if tags is None:
        if len(proto.meta_graphs) == 1:
            return proto.meta_graphs[0]
        wanted = tuple(sorted(DEFAULT_TAGS))
    else:
        wanted = tuple(sorted(set(tags)))
    for meta, tag_set in zip(proto.meta_graphs, available):
        if tag_set == wanted:
            return meta
    listed = "; ".join(",".join(t) or "(no tags)" for t in available)
    raise ModelLoadError(
        f"{directory}: the SavedModel has no meta graph tagged {','.join(wanted) or '(no tags)'}; its tag sets are "
        f"{listed}; pass tags= with one of them"
    )


def load_saved_model(
    directory: str,
    *,
    signature: str = DEFAULT_SIGNATURE,
    tags: Sequence[str] | None = None,
    inline_functions: bool = True,
    lower_control_flow: bool = False,
    loader: str = "native",
    step: Callable[[str], None] | None = None,
) -> SourceGraph:
    """Loads one signature of a SavedModel, variables frozen, as a SourceGraph.

    Args:
        loader: ``"native"`` (no TensorFlow) or ``"tensorflow"`` (TensorFlow's own loading and freezing).
        lower_control_flow: ``tensorflow`` loader only: lower ``While`` / ``If`` to TF1 control flow.
        step: called with what the loader starts next (``"reading saved_model.pb"``...), for a progress display.

    Raises:
        ModelLoadError: not a SavedModel, no such tag set or signature (the message lists those there
            are); native: a missing or corrupt checkpoint, or something it cannot freeze (the message
            names it); tensorflow: TensorFlow missing, or failing to load or freeze the signature.
        ParseError: the frozen graph is invalid.
    """
    if loader not in SAVEDMODEL_LOADERS:
        raise ModelLoadError(f"{directory}: unknown SavedModel loader {loader!r}; expected one of {', '.join(SAVEDMODEL_LOADERS)}")
    if loader == "native" and lower_control_flow:
        raise ModelLoadError(f"{directory}: lowering control flow needs TensorFlow; pass --savedmodel-loader tensorflow with it")
    if step is not None:
        step("reading saved_model.pb")
    proto = read_saved_model_proto(directory)
    meta = select_meta_graph(proto, directory, tags)
    signatures = sorted(k for k in meta.signature_def if k != _INIT_OP_KEY)
    if signature not in meta.signature_def or signature == _INIT_OP_KEY:
        raise ModelLoadError(
            f"{directory}: the SavedModel has no signature {signature!r}; its signatures are "
            f"{', '.join(repr(s) for s in signatures) or '(none)'}; pass signature= with one of them"
        )
    sig = meta.signature_def[signature]
    tag_list = list(meta.meta_info_def.tags)
    object_based = meta.HasField("object_graph_def") and len(meta.object_graph_def.nodes) > 0
    metadata = {
        "signature": signature,
        "tags": tuple(tag_list),
        "method_name": sig.method_name,
        "saved_model_kind": "tf2" if object_based else "tf1",
        "savedmodel_loader": loader,
    }
    if loader == "native":
        from .savedmodel_freeze import freeze_tf1, freeze_tf2

        freeze = freeze_tf2 if object_based else freeze_tf1
        if step is not None:
            step("reading the checkpoint and freezing the variables")
        graph = freeze(directory, meta, signature, sig, inline_functions=inline_functions)
        graph.metadata.update(metadata)
        return graph
    try:
        import tensorflow as tf  # noqa: F401  (imported here only: freezing needs TensorFlow)
    except ImportError:
        raise ModelLoadError(
            f"{directory}: freezing a SavedModel's variables needs TensorFlow, which is not installed; "
            "pip install 'scopefusion[tf]' or pass a frozen GraphDef"
        ) from None
    if step is not None:
        step("TensorFlow loads and freezes the signature")
    try:
        if object_based:
            graph_def_bytes, inputs, outputs = _freeze_tf2(directory, tag_list, signature, lower_control_flow)
        else:
            graph_def_bytes, inputs, outputs = _freeze_tf1(directory, tag_list, sig)
    except ScopeFusionError:
        raise
    except Exception as exc:  # TensorFlow raises many kinds of errors on a broken SavedModel
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
        raise ModelLoadError(
            f"{directory}: TensorFlow could not load and freeze signature {signature!r} "
            f"({type(exc).__name__}: {first}); check that the SavedModel loads with tf.saved_model.load"
        ) from exc
    if step is not None:
        step("reading the frozen graph")
    graph_def, node_views, func_views = parse_graph_def_buffer(graph_def_bytes, directory)
    return graph_from_graph_def(
        graph_def,
        directory,
        node_views,
        func_views,
        inputs=inputs,
        outputs=outputs,
        inline_functions=inline_functions,
        name=signature,
        metadata=metadata,
    )


def _freeze_tf2(directory: str, tags: list[str], signature: str, lower_control_flow: bool):
    import tensorflow as tf
    from tensorflow.python.framework.convert_to_constants import convert_variables_to_constants_v2

    loaded = tf.saved_model.load(directory, tags=tags or None)
    function = loaded.signatures[signature]
    frozen = convert_variables_to_constants_v2(function, lower_control_flow=lower_control_flow)
    # The frozen function's placeholders and outputs follow the flattened structures of the signature:
    # positional args, then keyword args by sorted key; a dict of outputs by sorted key.
    keys = _input_keys(function.structured_input_signature)
    placeholders = [t for t in frozen.inputs if t.dtype != tf.resource]
    if len(keys) != len(placeholders):
        keys = [t.op.name for t in placeholders]
    inputs = [(key, t.name) for key, t in zip(keys, placeholders)]
    structured = function.structured_outputs
    if isinstance(structured, dict):
        out_keys = sorted(structured)
    else:
        out_keys = [f"output_{i}" for i in range(len(tf.nest.flatten(structured)))]
    if len(out_keys) != len(frozen.outputs):
        out_keys = [t.name for t in frozen.outputs]
    outputs = [(key, t.name) for key, t in zip(out_keys, frozen.outputs)]
    graph_def = frozen.graph.as_graph_def()
    return graph_def.SerializeToString(), inputs, outputs


def _input_keys(structured_input_signature: Any) -> list[str]:
    """Signature input keys in the order the concrete function's placeholders follow (sorted kwargs)."""
    if not structured_input_signature:
        return []
    args, kwargs = structured_input_signature
    keys = [getattr(spec, "name", None) or f"input_{i}" for i, spec in enumerate(args)]
    keys.extend(sorted(kwargs))
    return keys


def _freeze_tf1(directory: str, tags: list[str], sig):
    import tensorflow as tf
    from tensorflow.python.framework.convert_to_constants import convert_variables_to_constants_from_session_graph

    graph = tf.Graph()
    with tf.compat.v1.Session(graph=graph) as session:
        tf.compat.v1.saved_model.loader.load(session, tags, directory)
        graph_def = graph.as_graph_def()
        input_names = [(key, sig.inputs[key].name) for key in sorted(sig.inputs)]
        output_names = [(key, sig.outputs[key].name) for key in sorted(sig.outputs)]
        output_nodes = list(dict.fromkeys(parse_tensor_name(t)[0] for _, t in output_names))
        frozen = convert_variables_to_constants_from_session_graph(session, graph_def, output_nodes)
    # Inputs that no output depends on were pruned; keep them, as the signature declares them.
    present = {n.name for n in frozen.node}
    originals = {n.name: n for n in graph_def.node}
    for _, tensor in input_names:
        node = parse_tensor_name(tensor)[0]
        if node not in present and node in originals:
            frozen.node.add().CopyFrom(originals[node])
            present.add(node)
    return frozen.SerializeToString(), input_names, output_names
