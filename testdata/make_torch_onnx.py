"""Regenerates the PyTorch-exported ONNX models in ``testdata/`` (the model zoo).

Run from the repository root, in the project venv with PyTorch installed (PyTorch is needed only here,
never by the package or its tests)::

    .venv/bin/pip install torch==2.13.0
    .venv/bin/python testdata/make_torch_onnx.py          # writes into testdata/
    .venv/bin/python testdata/make_torch_onnx.py OUT_DIR  # or elsewhere

It writes, each well under 1 MB:

* ``torch_encoder_opset14.onnx`` and ``torch_encoder_opset17.onnx``: a small transformer encoder
  (token embedding + learned positions, ``torch.nn.TransformerEncoder`` with 2 post-norm layers,
  d_model 32, 4 heads, feed-forward 64 with erf GELU, ``batch_first``, a final LayerNorm and a Linear head).
  Input ``input_ids`` (int64 [batch, 16]), output ``logits`` (float32 [batch, 16, 10]). At opset 14 the
  exporter decomposes LayerNorm into ReduceMean/Sub/Pow/Sqrt/Div; at 17 it emits LayerNormalization.
* ``torch_encoder_padding_opset17.onnx``: the same encoder called with ``src_key_padding_mask``: inputs
  ``input_ids`` (int64 [batch, 16]) and ``padding_mask`` (bool [batch, 16], True where a token is padding),
  output ``logits``.
* ``torch_rnn_opset14.onnx``: an ``nn.LSTM`` then an ``nn.GRU`` (``batch_first``) and a Linear head,
  exported as the ONNX ``LSTM`` and ``GRU`` ops. Input ``sequence`` (float32 [batch, 6, 5]), output
  ``output`` (float32 [batch, 6, 3]).

The batch axis is dynamic (``dynamic_axes``); weights are seeded, so the files come out byte-identical on
each run. Each export is checked against the module with onnxruntime at a batch size it was not traced
at. The legacy TorchScript exporter (``dynamo=False``) is used: it targets opset 14 directly and names
nodes after the module path (``/encoder/layers.0/self_attn/MatMul``), which the scope-fusion rules read.
"""

from __future__ import annotations

import sys
import warnings
from pathlib import Path

import torch
from torch import nn

SEQ = 16
VOCAB = 100
D_MODEL = 32
HEADS = 4
FF = 64
LAYERS = 2
CLASSES = 10
ENCODER_OPSETS = (14, 17)

RNN_STEPS = 6
RNN_FEATURES = 5
RNN_OPSET = 14


class TinyEncoder(nn.Module):
    """Embedding + positions → ``nn.TransformerEncoder`` (gelu, batch_first, post-norm) → LayerNorm → Linear."""

    def __init__(self) -> None:
        super().__init__()
        self.embed = nn.Embedding(VOCAB, D_MODEL)
        self.position = nn.Parameter(torch.randn(1, SEQ, D_MODEL) * 0.02)
        layer = nn.TransformerEncoderLayer(
            D_MODEL, HEADS, dim_feedforward=FF, dropout=0.0, activation="gelu", batch_first=True
        )
        self.encoder = nn.TransformerEncoder(layer, LAYERS, enable_nested_tensor=False)
        for module in self.encoder.modules():  # the layers are deep copies of one: give each its own weights
            reset = getattr(module, "reset_parameters", None) or getattr(module, "_reset_parameters", None)
            if reset is not None:
                reset()
        self.norm = nn.LayerNorm(D_MODEL)
        self.head = nn.Linear(D_MODEL, CLASSES)

    def forward(self, input_ids: torch.Tensor) -> torch.Tensor:
        x = self.embed(input_ids) + self.position
        return self.head(self.norm(self.encoder(x)))


class TinyPaddedEncoder(TinyEncoder):
    """:class:`TinyEncoder` whose attention skips padding keys (``src_key_padding_mask``)."""

    def forward(self, input_ids: torch.Tensor, padding_mask: torch.Tensor) -> torch.Tensor:  # type: ignore[override]
        x = self.embed(input_ids) + self.position
        return self.head(self.norm(self.encoder(x, src_key_padding_mask=padding_mask)))


class TinyRNN(nn.Module):
    """``nn.LSTM`` (8 units) → ``nn.GRU`` (8 units) → Linear(3), all batch_first."""

    def __init__(self) -> None:
        super().__init__()
        self.lstm = nn.LSTM(RNN_FEATURES, 8, batch_first=True)
        self.gru = nn.GRU(8, 8, batch_first=True)
        self.head = nn.Linear(8, 3)

    def forward(self, sequence: torch.Tensor) -> torch.Tensor:
        x, _ = self.lstm(sequence)
        x, _ = self.gru(x)
        return self.head(x)


def _export(model: nn.Module, example: torch.Tensor | tuple[torch.Tensor, ...], path: Path, opset: int,
            input_name: str | list[str], output_name: str) -> None:
    # NOTE: no torch.no_grad() here. With gradients off, an eval-mode TransformerEncoderLayer takes its
    # fused fast path (aten::_transformer_encoder_layer_fwd), which has no ONNX export; with them on it
    # runs the plain modules, whose ops the exporter writes one by one under their module's scope.
    model.eval()
    names = [input_name] if isinstance(input_name, str) else input_name
    examples = example if isinstance(example, tuple) else (example,)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the legacy exporter's deprecation and tracer warnings
        torch.onnx.export(
            model,
            examples,
            str(path),
            input_names=names,
            output_names=[output_name],
            dynamic_axes={**{name: {0: "batch"} for name in names}, output_name: {0: "batch"}},
            opset_version=opset,
            dynamo=False,
            do_constant_folding=True,
        )


def _check(model: nn.Module, example: torch.Tensor | tuple[torch.Tensor, ...], path: Path) -> None:
    """The export computes what the module does (onnxruntime, at another batch size than traced)."""
    import numpy as np
    import onnxruntime

    examples = example if isinstance(example, tuple) else (example,)
    session = onnxruntime.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    feed = {i.name: e.numpy() for i, e in zip(session.get_inputs(), examples, strict=True)}
    expected = model(*examples).detach().numpy()
    np.testing.assert_allclose(session.run(None, feed)[0], expected, rtol=1e-4, atol=1e-5)


def _padding(batch: int) -> torch.Tensor:
    """True where a token is padding: row ``i`` keeps its first ``SEQ - 3 - i`` tokens."""
    lengths = torch.tensor([SEQ - 3 - i for i in range(batch)])
    return torch.arange(SEQ)[None, :] >= lengths[:, None]


def main(out_dir: Path) -> list[Path]:
    out_dir.mkdir(parents=True, exist_ok=True)
    written = []
    torch.manual_seed(0)
    encoder = TinyEncoder()
    ids = torch.randint(0, VOCAB, (2, SEQ), dtype=torch.int64)
    for opset in ENCODER_OPSETS:
        path = out_dir / f"torch_encoder_opset{opset}.onnx"
        _export(encoder, ids, path, opset, "input_ids", "logits")
        _check(encoder, torch.randint(0, VOCAB, (3, SEQ), dtype=torch.int64), path)
        written.append(path)
    torch.manual_seed(0)
    padded = TinyPaddedEncoder()
    path = out_dir / "torch_encoder_padding_opset17.onnx"
    _export(padded, (ids, _padding(2)), path, 17, ["input_ids", "padding_mask"], "logits")
    _check(padded, (torch.randint(0, VOCAB, (3, SEQ), dtype=torch.int64), _padding(3)), path)
    written.append(path)
    torch.manual_seed(0)
    rnn = TinyRNN()
    path = out_dir / f"torch_rnn_opset{RNN_OPSET}.onnx"
    _export(rnn, torch.randn(2, RNN_STEPS, RNN_FEATURES), path, RNN_OPSET, "sequence", "output")
    _check(rnn, torch.randn(3, RNN_STEPS, RNN_FEATURES), path)
    written.append(path)
    return written


if __name__ == "__main__":
    target = Path(sys.argv[1]) if len(sys.argv) > 1 else Path(__file__).resolve().parent
    for written_path in main(target):
        print(f"{written_path}: {written_path.stat().st_size} bytes")
