"""Regenerates the ONNX files that tf2onnx writes from the test suite's TensorFlow models (``testdata/``).

Run from the repository root, in the project venv with tf2onnx installed (tf2onnx is needed only here,
never by the package or its tests)::

    .venv/bin/pip install tf2onnx==1.17.0
    .venv/bin/python testdata/make_tf2onnx.py          # writes into testdata/
    .venv/bin/python testdata/make_tf2onnx.py OUT_DIR  # or elsewhere

It writes, each well under 1 MB, at opset 17:

* ``tf2onnx_keras_encoder.onnx``: :func:`tests.models.exporter_models.keras_masked_encoder` (2 Keras 3 blocks,
  ``MultiHeadAttention`` with a padding ``attention_mask``, exact GELU). Inputs ``tokens`` and
  ``padding_mask`` (int32 [batch, 8]), output ``sequence`` (float32 [batch, 8, 32]).
* ``tf2onnx_bert.onnx``: :func:`tests.models.exporter_models.bert_dynamic_batch_tf1` (4 layers, the batch
  read at run time, ``input_mask``). Inputs ``input_ids``, ``input_mask``, ``token_type_ids`` (int32
  [batch, 8]), outputs ``pooled`` and ``sequence``.

* ``tf2onnx_keras_cnn.onnx``: :func:`tests.models.exporter_models.keras_activation_cnn` (Conv2D, BatchNormalization,
  swish, hard_swish, Dense). Input ``image`` (float32 [batch, 8, 8, 3]), output ``logits`` (float32 [batch, 4]).

tf2onnx 1.17 has no converter for TensorFlow's ``Erfc``, which Keras 3 writes for the exact GELU: this script
registers one that writes ``1 - Erf(x)``. Each file is checked against TensorFlow with onnxruntime on
random inputs whose masks really pad. The models are seeded, but tf2onnx names some nodes after Python
object ids, so a rerun writes the same graphs under partly different node names (the tests name only
nodes that keep TensorFlow's names).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

OPSET = 17
SEQ = 8


def _register_erfc() -> None:
    """``Erfc(x)`` → ``Sub(1, Erf(x))``: tf2onnx 1.17 has no handler of its own for it."""
    from tf2onnx.handler import tf_op

    @tf_op("Erfc")
    class Erfc:  # noqa: F841 - registered by the decorator
        @classmethod
        def version_9(cls, ctx, node, **kwargs):
            dtype = ctx.get_dtype(node.input[0])
            from tf2onnx import utils

            numpy_dtype = utils.map_onnx_to_numpy_type(dtype)
            erf = ctx.make_node("Erf", [node.input[0]], op_name_scope=node.name)
            one = ctx.make_const(utils.make_name(f"{node.name}/one"), np.array(1, numpy_dtype))
            node.type = "Sub"
            ctx.replace_inputs(node, [one.output[0], erf.output[0]])


def _graph_def(data: bytes):
    import tensorflow as tf

    graph_def = tf.compat.v1.GraphDef()
    graph_def.ParseFromString(data)
    return graph_def


def _outputs_of(graph_def) -> list[str]:
    """Tensors no node reads: the frozen graph's outputs."""
    read = {i.split(":")[0].lstrip("^") for n in graph_def.node for i in n.input}
    return [f"{n.name}:0" for n in graph_def.node if n.name not in read and n.op not in ("Const", "NoOp")]


def _convert(data: bytes, inputs: list[str], outputs: list[str], renames: dict[str, str], path: Path) -> None:
    import onnx
    import tf2onnx

    graph_def = _graph_def(data)
    model, _ = tf2onnx.convert.from_graph_def(
        graph_def, input_names=inputs, output_names=outputs, opset=OPSET, tensors_to_rename=renames
    )
    model.producer_version = tf2onnx.__version__
    onnx.checker.check_model(model)
    path.write_bytes(model.SerializeToString())


def _check(data: bytes, path: Path, feeds: dict[str, np.ndarray], fetches: dict[str, str]) -> None:
    """onnxruntime on ``path`` computes what TensorFlow computes on the GraphDef ``data``."""
    import onnxruntime
    import tensorflow as tf

    graph = tf.Graph()
    with graph.as_default():
        tf.graph_util.import_graph_def(_graph_def(data), name="")
    with tf.compat.v1.Session(graph=graph) as session:
        expected = session.run(list(fetches.values()), {f"{k}:0": v for k, v in feeds.items()})
    got = onnxruntime.InferenceSession(str(path), providers=["CPUExecutionProvider"]).run(list(fetches), feeds)
    for name, want, have in zip(fetches, expected, got, strict=True):
        np.testing.assert_allclose(have, want, rtol=1e-4, atol=1e-4, err_msg=f"{path.name}: output {name}")


def _padding_mask(rng: np.random.Generator, batch: int) -> np.ndarray:
    lengths = rng.integers(2, SEQ, batch)
    return (np.arange(SEQ)[None, :] < lengths[:, None]).astype(np.int32)


def main(out_dir: Path) -> list[Path]:
    from tests.models import exporter_models

    _register_erfc()
    out_dir.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(0)
    written = []

    keras = exporter_models.keras_masked_encoder("padding", num_layers=2, seq=SEQ)
    (keras_out,) = _outputs_of(_graph_def(keras))
    path = out_dir / "tf2onnx_keras_encoder.onnx"
    _convert(keras, ["tokens:0", "padding_mask:0"], [keras_out],
             {"tokens:0": "tokens", "padding_mask:0": "padding_mask", keras_out: "sequence"}, path)
    feeds = {"tokens": rng.integers(0, 100, (3, SEQ)).astype(np.int32), "padding_mask": _padding_mask(rng, 3)}
    _check(keras, path, feeds, {"sequence": keras_out})
    written.append(path)

    bert = exporter_models.bert_dynamic_batch_tf1(num_layers=4, seq=SEQ)
    names = ["input_ids", "input_mask", "token_type_ids"]
    outs = {"pooled": "bert/pooler/dense/Tanh:0", "sequence": "bert/encoder/sequence_output:0"}
    path = out_dir / "tf2onnx_bert.onnx"
    _convert(bert, [f"{n}:0" for n in names], list(outs.values()),
             {**{f"{n}:0": n for n in names}, **{v: k for k, v in outs.items()}}, path)
    feeds = {"input_ids": rng.integers(0, 100, (3, SEQ)).astype(np.int32), "input_mask": _padding_mask(rng, 3),
             "token_type_ids": rng.integers(0, 2, (3, SEQ)).astype(np.int32)}
    _check(bert, path, feeds, outs)
    written.append(path)

    cnn = exporter_models.keras_activation_cnn()
    (cnn_out,) = _outputs_of(_graph_def(cnn))
    path = out_dir / "tf2onnx_keras_cnn.onnx"
    _convert(cnn, ["image:0"], [cnn_out], {"image:0": "image", cnn_out: "logits"}, path)
    _check(cnn, path, {"image": rng.standard_normal((3, 8, 8, 3)).astype(np.float32)}, {"logits": cnn_out})
    written.append(path)
    return written


if __name__ == "__main__":
    target = Path(sys.argv[1]) if len(sys.argv) > 1 else Path(__file__).resolve().parent
    for written_path in main(target):
        print(f"{written_path}: {written_path.stat().st_size} bytes")
