"""Session fixtures for the model zoo (``tests/e2e/zoo.py``): each model built once, shared by xdist workers.

The TF models not already in ``tests/conftest.py`` are built here through its ``model_store``; the
PyTorch exports are committed under ``testdata/`` (``testdata/make_torch_onnx.py`` regenerates them).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.e2e import zoo


def _built(store, name: str) -> Path:
    return zoo.model_file(store, name)


def _testdata(name: str) -> Path:
    return zoo.model_file(None, name)


@pytest.fixture(scope="session")
def tf_resnet50_pb(model_store) -> Path:
    """Keras ResNet50 (weights=None) at 64x64, frozen (input ``input_0`` [?, 64, 64, 3]); ~100 MB of weights."""
    return _built(model_store, "resnet50")


@pytest.fixture(scope="session")
def tf_efficientnet_pb(model_store) -> Path:
    """Keras EfficientNetB0 (weights=None) at 64x64, frozen (input ``image`` [?, 64, 64, 3])."""
    return _built(model_store, "efficientnet_b0")


@pytest.fixture(scope="session")
def keras_transformer_pb(model_store) -> Path:
    """A 4-layer Keras transformer encoder (MultiHeadAttention, LayerNormalization, Dense gelu), frozen
    (input ``tokens`` int32 [?, 16])."""
    return _built(model_store, "keras_transformer")


@pytest.fixture(scope="session")
def keras_lstm_pb(model_store) -> Path:
    """Keras LSTM (unroll=False, a TF2 While loop) + Dense, frozen (input ``sequence`` [?, 6, 5])."""
    return _built(model_store, "keras_lstm")


@pytest.fixture(scope="session")
def keras_gru_pb(model_store) -> Path:
    """Keras GRU (unroll=False, a TF2 While loop) + Dense, frozen (input ``sequence`` [?, 6, 5])."""
    return _built(model_store, "keras_gru")


@pytest.fixture(scope="session")
def tf_data_dependent_pb(model_store) -> Path:
    """A tf.function with unknown batch: non_max_suppression, boolean_mask, reshapes to computed shapes."""
    return _built(model_store, "tf_data_dependent")


@pytest.fixture(scope="session")
def torch_encoder_opset14_onnx() -> Path:
    """PyTorch ``nn.TransformerEncoder`` (2 layers, d_model 32) exported at opset 14, dynamic batch."""
    return _testdata("torch_encoder_opset14")


@pytest.fixture(scope="session")
def torch_encoder_opset17_onnx() -> Path:
    """The same encoder exported at opset 17 (LayerNormalization as one op)."""
    return _testdata("torch_encoder_opset17")


@pytest.fixture(scope="session")
def torch_rnn_opset14_onnx() -> Path:
    """PyTorch ``nn.LSTM`` → ``nn.GRU`` → Linear exported at opset 14 (ONNX LSTM and GRU ops), dynamic batch."""
    return _testdata("torch_rnn_opset14")


@pytest.fixture(scope="session")
def tf_bert_dynamic_pb(model_store) -> Path:
    """google-research-style TF1 BERT (4 layers): the batch read at run time into Pack reshape targets, input_mask."""
    return _built(model_store, "tf1_bert_dynamic_batch")


@pytest.fixture(scope="session")
def keras_padding_mask_pb(model_store) -> Path:
    """Keras 3 encoder (2 blocks), MultiHeadAttention with a padding attention_mask (inputs tokens, padding_mask)."""
    return _built(model_store, "keras_padding_mask")


@pytest.fixture(scope="session")
def keras_causal_mask_pb(model_store) -> Path:
    """Keras 3 encoder (2 blocks), MultiHeadAttention with use_causal_mask=True (input tokens)."""
    return _built(model_store, "keras_causal_mask")


@pytest.fixture(scope="session")
def keras_activation_cnn_pb(model_store) -> Path:
    """Keras Conv2D / BatchNormalization / swish / hard_swish / Dense (input image [?, 8, 8, 3])."""
    return _built(model_store, "keras_activation_cnn")


@pytest.fixture(scope="session")
def tf2onnx_bert_onnx() -> Path:
    """tf2onnx 1.17's export of the dynamic-batch TF1 BERT (opset 17)."""
    return _testdata("tf2onnx_bert")


@pytest.fixture(scope="session")
def tf2onnx_keras_encoder_onnx() -> Path:
    """tf2onnx 1.17's export of the padding-masked Keras encoder (opset 17)."""
    return _testdata("tf2onnx_keras_encoder")


@pytest.fixture(scope="session")
def tf2onnx_keras_cnn_onnx() -> Path:
    """tf2onnx 1.17's export of the Keras CNN with BatchNormalization, swish and hard_swish (opset 17)."""
    return _testdata("tf2onnx_keras_cnn")


@pytest.fixture(scope="session")
def torch_encoder_padding_opset17_onnx() -> Path:
    """PyTorch ``nn.TransformerEncoder`` called with ``src_key_padding_mask``, exported at opset 17."""
    return _testdata("torch_encoder_padding_opset17")
