"""Running the source model in its own framework, for ``verify``.

* frozen / text GraphDef: TensorFlow imports the file and runs it in a session, fed at the placeholders;
* SavedModel: TensorFlow loads it and calls the signature (TF2), or loads it into a session (TF1);
* ONNX: onnxruntime on the CPU.

Outputs are keyed by the same names the converted model uses (the SourceGraph's output names).
TensorFlow and onnxruntime are imported only here, when a run is asked for.
"""

from __future__ import annotations

import abc
import os
from typing import TYPE_CHECKING, Mapping

import numpy as np

from ..errors import VerifyError

if TYPE_CHECKING:  # pragma: no cover
    from ..parser.source_graph import SourceGraph

__all__ = ["SourceRunner", "source_runner"]


class SourceRunner(abc.ABC):
    """Runs the source model on named inputs; outputs keyed by the converted model's output names."""

    @abc.abstractmethod
    def run(self, inputs: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        """The source model's outputs on ``inputs``."""


def source_runner(source: "SourceGraph") -> SourceRunner:
    path = source.path
    if source.is_onnx:
        return _OnnxRunner(source)
    if os.path.isdir(path):
        return _SavedModelRunner(source)
    return _GraphDefRunner(source)


def _feeds_by_input(source: "SourceGraph", inputs: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
    missing = [i.name for i in source.inputs if i.name not in inputs]
    if missing:
        raise VerifyError(f"{source.path}: no value for inputs {', '.join(missing)}")
    return {i.name: np.asarray(inputs[i.name]) for i in source.inputs}


class _OnnxRunner(SourceRunner):
    def __init__(self, source: "SourceGraph") -> None:
        import onnxruntime as ort

        self.source = source
        options = ort.SessionOptions()
        options.log_severity_level = 3
        options.intra_op_num_threads = 1
        self.session = ort.InferenceSession(source.path, options, providers=["CPUExecutionProvider"])

    def run(self, inputs: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        feeds = _feeds_by_input(self.source, inputs)
        names = [o.name for o in self.session.get_outputs()]
        values = self.session.run(names, feeds)
        return dict(zip(names, values))


class _GraphDefRunner(SourceRunner):
    def __init__(self, source: "SourceGraph") -> None:
        import tensorflow as tf
        from google.protobuf import text_format

        self.source = source
        graph_def = tf.compat.v1.GraphDef()
        with open(source.path, "rb") as f:
            data = f.read()
        try:
            graph_def.ParseFromString(data)
        except Exception:
            text_format.Parse(data.decode("utf-8"), graph_def)
        self.graph = tf.Graph()
        with self.graph.as_default():
            tf.graph_util.import_graph_def(graph_def, name="")
        self.session = tf.compat.v1.Session(graph=self.graph)

    def run(self, inputs: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        feeds = _feeds_by_input(self.source, inputs)
        feed_dict = {f"{i.node}:0": feeds[i.name] for i in self.source.inputs}
        fetches = [f"{o.node}:{o.index}" for o in self.source.outputs]
        values = self.session.run(fetches, feed_dict)
        return {o.name: np.asarray(v) for o, v in zip(self.source.outputs, values)}


class _SavedModelRunner(SourceRunner):
    def __init__(self, source: "SourceGraph") -> None:
        import tensorflow as tf

        self.tf = tf
        self.source = source
        meta = source.metadata
        self.signature = meta.get("signature", "serving_default")
        tags = list(meta.get("tags") or ["serve"])
        self.kind = meta.get("saved_model_kind", "tf2")
        if self.kind == "tf1":
            self.graph = tf.Graph()
            self.session = tf.compat.v1.Session(graph=self.graph)
            with self.graph.as_default():
                meta_graph = tf.compat.v1.saved_model.loader.load(self.session, tags, source.path)
            self.sig = meta_graph.signature_def[self.signature]
        else:
            self.loaded = tf.saved_model.load(source.path, tags=tags)
            self.fn = self.loaded.signatures[self.signature]

    def run(self, inputs: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        feeds = _feeds_by_input(self.source, inputs)
        if self.kind == "tf1":
            feed_dict = {self.sig.inputs[k].name: v for k, v in feeds.items()}
            keys = [o.name for o in self.source.outputs]
            values = self.session.run([self.sig.outputs[k].name for k in keys], feed_dict)
            return {k: np.asarray(v) for k, v in zip(keys, values)}
        out = self.fn(**{k: self.tf.constant(v) for k, v in feeds.items()})
        return {k: np.asarray(v.numpy()) for k, v in out.items()}
