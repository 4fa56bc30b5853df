"""The model zoo: the models ``convert`` must handle, each with one static shape profile.

Shared by the end-to-end tests (``tests/e2e``) and ``bench/model_zoo_report.py``. A model is either built
from code (``builder`` returns frozen GraphDef bytes; the tests get it through the session fixture named
``fixture``) or a committed file under ``testdata/`` (the PyTorch exports of ``testdata/make_torch_onnx.py``, the
tf2onnx exports of ``testdata/make_tf2onnx.py``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Mapping, Sequence

from tests.models import exporter_models, more_models, tf_models

__all__ = ["BY_NAME", "TESTDATA", "ZOO", "ZooModel", "model_file"]

TESTDATA = Path(__file__).resolve().parents[2] / "testdata"


@dataclass(frozen=True)
class ZooModel:
    """One zoo model.

    Attributes:
        name: the id used by test parameters and the report.
        fixture: the session fixture that gives the model's path in the tests.
        input_shapes: the static profile converted: every input, every dim fixed.
        builder: builds the frozen GraphDef bytes; None for a committed ``testdata`` file.
        testdata: the file name under ``testdata/`` when there is no builder.
        unknown_batch: the model's own inputs leave the batch dim unknown.
        data_dependent: some outputs' shapes depend on input data, so the profile keeps them dynamic.
    """

    name: str
    fixture: str
    input_shapes: Mapping[str, Sequence[int]]
    builder: Callable[[], bytes] | None = None
    testdata: str | None = None
    unknown_batch: bool = True
    data_dependent: bool = False
    file_name: str = field(init=False)

    def __post_init__(self) -> None:
        if (self.builder is None) == (self.testdata is None):
            raise ValueError(f"zoo model {self.name}: give exactly one of builder and testdata")
        object.__setattr__(self, "file_name", self.testdata or f"zoo_{self.name}.pb")


def _bert_shapes(batch: int, seq: int = 8) -> dict[str, list[int]]:
    return {name: [batch, seq] for name in ("input_ids", "input_mask", "token_type_ids")}


ZOO: tuple[ZooModel, ...] = (
    ZooModel("resnet50", "tf_resnet50_pb", {"input_0": [1, 64, 64, 3]}, lambda: tf_models.keras_resnet50(64)),
    ZooModel("mobilenet_v2", "tf_mobilenet_pb", {"input_0": [2, 32, 32, 3]}, tf_models.keras_mobilenet_v2),
    ZooModel("efficientnet_b0", "tf_efficientnet_pb", {"image": [2, 64, 64, 3]}, more_models.keras_efficientnet_b0),
    ZooModel("keras_transformer", "keras_transformer_pb", {"tokens": [2, 16]}, more_models.keras_transformer_encoder),
    ZooModel("tf1_bert", "tf_bert_pb", _bert_shapes(2), tf_models.bert_encoder_tf1),
    ZooModel("keras_lstm", "keras_lstm_pb", {"sequence": [2, 6, 5]}, more_models.keras_lstm),
    ZooModel("keras_gru", "keras_gru_pb", {"sequence": [2, 6, 5]}, more_models.keras_gru),
    ZooModel("tf1_dynamic_rnn", "tf_rnn_pb", {"x": [2, 5, 3]}, tf_models.tf1_dynamic_rnn, unknown_batch=False),
    ZooModel(
        "tf_data_dependent",
        "tf_data_dependent_pb",
        {"boxes": [10, 4], "scores": [10], "feats": [10, 8]},
        more_models.tf_function_data_dependent,
        data_dependent=True,
    ),
    *(
        ZooModel(f"torch_encoder_opset{opset}", f"torch_encoder_opset{opset}_onnx", {"input_ids": [2, 16]},
                 testdata=f"torch_encoder_opset{opset}.onnx")
        for opset in (14, 17)
    ),
    ZooModel("torch_rnn_opset14", "torch_rnn_opset14_onnx", {"sequence": [2, 6, 5]}, testdata="torch_rnn_opset14.onnx"),
    # Attention as exporters write it (testdata/make_tf2onnx.py and make_torch_onnx.py write the ONNX files)
    ZooModel("tf1_bert_dynamic_batch", "tf_bert_dynamic_pb", _bert_shapes(2),
             lambda: exporter_models.bert_dynamic_batch_tf1(num_layers=4)),
    ZooModel("keras_padding_mask", "keras_padding_mask_pb", {"tokens": [2, 8], "padding_mask": [2, 8]},
             lambda: exporter_models.keras_masked_encoder("padding")),
    ZooModel("keras_causal_mask", "keras_causal_mask_pb", {"tokens": [2, 8]},
             lambda: exporter_models.keras_masked_encoder("causal")),
    ZooModel("keras_activation_cnn", "keras_activation_cnn_pb", {"image": [2, 8, 8, 3]}, exporter_models.keras_activation_cnn),
    ZooModel("tf2onnx_bert", "tf2onnx_bert_onnx", _bert_shapes(2), testdata="tf2onnx_bert.onnx"),
    ZooModel("tf2onnx_keras_encoder", "tf2onnx_keras_encoder_onnx", {"tokens": [2, 8], "padding_mask": [2, 8]},
             testdata="tf2onnx_keras_encoder.onnx"),
    ZooModel("tf2onnx_keras_cnn", "tf2onnx_keras_cnn_onnx", {"image": [2, 8, 8, 3]}, testdata="tf2onnx_keras_cnn.onnx"),
    ZooModel("torch_encoder_padding_opset17", "torch_encoder_padding_opset17_onnx",
             {"input_ids": [2, 16], "padding_mask": [2, 16]}, testdata="torch_encoder_padding_opset17.onnx"),
)  # fmt: skip

BY_NAME: dict[str, ZooModel] = {m.name: m for m in ZOO}


def model_file(store, name: str) -> Path:
    """Zoo model ``name``'s file: built once per session through the test ``model_store`` (TF models), or
    committed under ``testdata/`` (exports, regenerated by the scripts there)."""
    model = BY_NAME[name]
    if model.builder is not None:
        return store.file(model.file_name, model.builder)
    path = TESTDATA / model.file_name
    if not path.is_file():
        raise FileNotFoundError(f"{path} is missing; run testdata/make_torch_onnx.py or make_tf2onnx.py (see their docstrings)")
    return path
