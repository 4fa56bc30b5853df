"""Running an exported ONNX model in onnxruntime against the source framework, for the ONNX export tests."""

from __future__ import annotations

from typing import Any, Iterable

import numpy as np
import onnx
import onnxruntime as ort

from scopefusion.runtime.source_runner import source_runner
from scopefusion.serde.onnx_export import model_to_onnx


def checked_export(model: Any, opset: int) -> onnx.ModelProto:
    """``model`` exported at ``opset``, after ``onnx.checker``'s full check and with every node in the default domain."""
    proto = model_to_onnx(model, opset=opset)
    onnx.checker.check_model(proto, full_check=True)
    assert {n.domain for n in proto.graph.node} == {""}
    return proto


def ort_outputs(proto: onnx.ModelProto, feeds: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """onnxruntime's outputs of ``proto`` on ``feeds``, by output name (CPU provider)."""
    session = ort.InferenceSession(proto.SerializeToString(), providers=["CPUExecutionProvider"])
    return dict(zip([o.name for o in session.get_outputs()], session.run(None, feeds)))


def assert_runs_like_source(model: Any, proto: onnx.ModelProto, feed_sets: Iterable[dict[str, np.ndarray]],
                            where: str, rtol: float, atol: float = 0.0) -> dict[str, np.ndarray]:
    """onnxruntime's outputs of ``proto`` have the source framework's names, dtypes, shapes and values (within
    ``rtol``/``atol``) on each of ``feed_sets``; returns the source's outputs on the last set."""
    runner = source_runner(model.source)
    theirs: dict[str, np.ndarray] = {}
    for feeds in feed_sets:
        ours = ort_outputs(proto, feeds)
        theirs = runner.run(feeds)
        assert sorted(ours) == sorted(theirs), where
        for key, expected in theirs.items():
            at = f"{where}: output {key}, inputs of shape {[v.shape for v in feeds.values()]}"
            assert ours[key].dtype == expected.dtype and ours[key].shape == expected.shape, at
            np.testing.assert_allclose(ours[key], expected, rtol=rtol, atol=atol, err_msg=at)
    return theirs
