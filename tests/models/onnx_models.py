"""ONNX model builders (``onnx.helper``), small and deterministic.

Each builder returns a checked ``onnx.ModelProto``; ``save`` writes one to disk. Node names follow
PyTorch's exporter (``/encoder/layers.0/self_attn/MatMul``) where a test needs scope paths.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

__all__ = [
    "OPSET",
    "attention_block",
    "control_flow",
    "external_data",
    "local_function",
    "messy_names",
    "save",
]

OPSET = 17


def _model(graph: onnx.GraphProto, functions=(), opsets=None, check: bool = True) -> onnx.ModelProto:
    imports = [helper.make_opsetid("", OPSET)] + list(opsets or [])
    model = helper.make_model(graph, opset_imports=imports, functions=list(functions), producer_name="scopefusion-tests")
    model.ir_version = 8
    if check:
        onnx.checker.check_model(model)
    return model


def save(model: onnx.ModelProto, path: Path) -> Path:
    path.write_bytes(model.SerializeToString())
    return path


def _init(name: str, array: np.ndarray) -> TensorProto:
    return numpy_helper.from_array(array, name)


def attention_block(hidden: int = 16, seq: int = 4) -> onnx.ModelProto:
    """A self-attention + LayerNorm block named like a PyTorch export; weights as (large) initializers."""
    rng = np.random.default_rng(0)
    w = {k: rng.standard_normal((hidden, hidden)).astype(np.float32) for k in ("q", "k", "v", "o")}
    p = "/encoder/layers.0/self_attn"
    inits = [
        _init("encoder.layers.0.self_attn.q_proj.weight", w["q"]),
        _init("encoder.layers.0.self_attn.k_proj.weight", w["k"]),
        _init("encoder.layers.0.self_attn.v_proj.weight", w["v"]),
        _init("encoder.layers.0.self_attn.out_proj.weight", w["o"]),
        _init("encoder.layers.0.norm.weight", np.ones(hidden, np.float32)),
        _init("encoder.layers.0.norm.bias", np.zeros(hidden, np.float32)),
        _init("scale", np.array(1.0 / np.sqrt(hidden), np.float32)),
    ]
    nodes = [
        helper.make_node("MatMul", ["x", "encoder.layers.0.self_attn.q_proj.weight"], [f"{p}/q_proj/MatMul_output_0"], name=f"{p}/q_proj/MatMul"),
        helper.make_node("MatMul", ["x", "encoder.layers.0.self_attn.k_proj.weight"], [f"{p}/k_proj/MatMul_output_0"], name=f"{p}/k_proj/MatMul"),
        helper.make_node("MatMul", ["x", "encoder.layers.0.self_attn.v_proj.weight"], [f"{p}/v_proj/MatMul_output_0"], name=f"{p}/v_proj/MatMul"),
        helper.make_node("Transpose", [f"{p}/k_proj/MatMul_output_0"], [f"{p}/Transpose_output_0"], name=f"{p}/Transpose", perm=[0, 2, 1]),
        helper.make_node("MatMul", [f"{p}/q_proj/MatMul_output_0", f"{p}/Transpose_output_0"], [f"{p}/MatMul_output_0"], name=f"{p}/MatMul"),
        helper.make_node("Mul", [f"{p}/MatMul_output_0", "scale"], [f"{p}/Mul_output_0"], name=f"{p}/Mul"),
        helper.make_node("Softmax", [f"{p}/Mul_output_0"], [f"{p}/Softmax_output_0"], name=f"{p}/Softmax", axis=-1),
        helper.make_node("MatMul", [f"{p}/Softmax_output_0", f"{p}/v_proj/MatMul_output_0"], [f"{p}/MatMul_1_output_0"], name=f"{p}/MatMul_1"),
        helper.make_node("MatMul", [f"{p}/MatMul_1_output_0", "encoder.layers.0.self_attn.out_proj.weight"], [f"{p}/out_proj/MatMul_output_0"], name=f"{p}/out_proj/MatMul"),
        helper.make_node("Add", ["x", f"{p}/out_proj/MatMul_output_0"], ["/encoder/layers.0/Add_output_0"], name="/encoder/layers.0/Add"),
        helper.make_node(
            "LayerNormalization",
            ["/encoder/layers.0/Add_output_0", "encoder.layers.0.norm.weight", "encoder.layers.0.norm.bias"],
            ["y"],
            name="/encoder/layers.0/norm/LayerNormalization",
            axis=-1,
            epsilon=1e-5,
        ),
    ]
    graph = helper.make_graph(
        nodes,
        "attention_block",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", seq, hidden])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", seq, hidden])],
        inits,
        value_info=[helper.make_tensor_value_info(f"{p}/Softmax_output_0", TensorProto.FLOAT, ["batch", seq, seq])],
    )
    return _model(graph)


def control_flow() -> onnx.ModelProto:
    """``If`` with branches reading an outer tensor, a ``Loop`` with a body and a ``Scan``.

    Inputs: ``x`` float[3], ``cond`` bool[], ``trip`` int64[]. Outputs: ``if_out``, ``loop_out``, ``scan_out``.
    """
    offset = _init("offset", np.array([1.0, 2.0, 3.0], np.float32))
    # If: then adds the outer "shifted" tensor, else multiplies by it.
    shifted = helper.make_node("Add", ["x", "offset"], ["shifted"], name="/pre/Add")
    then_g = helper.make_graph(
        [helper.make_node("Add", ["x", "shifted"], ["then_out"], name="then/Add")],
        "then_branch", [], [helper.make_tensor_value_info("then_out", TensorProto.FLOAT, [3])],
    )
    else_g = helper.make_graph(
        [helper.make_node("Mul", ["x", "shifted"], ["else_out"], name="else/Mul")],
        "else_branch", [], [helper.make_tensor_value_info("else_out", TensorProto.FLOAT, [3])],
    )
    if_node = helper.make_node("If", ["cond"], ["if_out"], name="/block/If", then_branch=then_g, else_branch=else_g)
    # Loop: acc = acc + shifted, trip times; the body reads the outer "shifted".
    body = helper.make_graph(
        [
            helper.make_node("Identity", ["cond_in"], ["cond_out"], name="body/Identity"),
            helper.make_node("Add", ["acc_in", "shifted"], ["acc_out"], name="body/Add"),
        ],
        "loop_body",
        [
            helper.make_tensor_value_info("iter", TensorProto.INT64, []),
            helper.make_tensor_value_info("cond_in", TensorProto.BOOL, []),
            helper.make_tensor_value_info("acc_in", TensorProto.FLOAT, [3]),
        ],
        [
            helper.make_tensor_value_info("cond_out", TensorProto.BOOL, []),
            helper.make_tensor_value_info("acc_out", TensorProto.FLOAT, [3]),
        ],
    )
    loop_node = helper.make_node("Loop", ["trip", "", "x"], ["loop_out"], name="/block/Loop", body=body)
    # Scan over the rows of a [2, 3] tensor, summing them.
    scan_body = helper.make_graph(
        [
            helper.make_node("Add", ["sum_in", "row"], ["sum_out"], name="scan/Add"),
            helper.make_node("Identity", ["sum_out"], ["row_out"], name="scan/Identity"),
        ],
        "scan_body",
        [
            helper.make_tensor_value_info("sum_in", TensorProto.FLOAT, [3]),
            helper.make_tensor_value_info("row", TensorProto.FLOAT, [3]),
        ],
        [
            helper.make_tensor_value_info("sum_out", TensorProto.FLOAT, [3]),
            helper.make_tensor_value_info("row_out", TensorProto.FLOAT, [3]),
        ],
    )
    stack = helper.make_node("Concat", ["x_row", "x_row"], ["rows"], name="/scan_in/Concat", axis=0)
    unsq = helper.make_node("Unsqueeze", ["x", "axes"], ["x_row"], name="/scan_in/Unsqueeze")
    scan_node = helper.make_node("Scan", ["x", "rows"], ["scan_out", "scan_rows"], name="/block/Scan", body=scan_body, num_scan_inputs=1)
    graph = helper.make_graph(
        [shifted, if_node, loop_node, unsq, stack, scan_node],
        "control_flow",
        [
            helper.make_tensor_value_info("x", TensorProto.FLOAT, [3]),
            helper.make_tensor_value_info("cond", TensorProto.BOOL, []),
            helper.make_tensor_value_info("trip", TensorProto.INT64, []),
        ],
        [
            helper.make_tensor_value_info("if_out", TensorProto.FLOAT, [3]),
            helper.make_tensor_value_info("loop_out", TensorProto.FLOAT, [3]),
            helper.make_tensor_value_info("scan_out", TensorProto.FLOAT, [3]),
        ],
        [offset, _init("axes", np.array([0], np.int64))],
    )
    return _model(graph)


def local_function() -> onnx.ModelProto:
    """A model-local function ``custom::ScaledRelu(X) = Relu(X) * alpha`` (``alpha`` a function attribute)."""
    alpha = helper.make_attribute_ref("alpha", onnx.AttributeProto.FLOAT)
    const = helper.make_node("Constant", [], ["a"], name="c")
    const.attribute.append(onnx.AttributeProto(name="value_float", ref_attr_name="alpha", type=onnx.AttributeProto.FLOAT))
    del alpha
    function = helper.make_function(
        "custom",
        "ScaledRelu",
        ["X"],
        ["Y"],
        [const, helper.make_node("Relu", ["X"], ["r"], name="relu"), helper.make_node("Mul", ["r", "a"], ["Y"], name="mul")],
        [helper.make_opsetid("", OPSET)],
        attributes=["alpha"],
    )
    graph = helper.make_graph(
        [
            helper.make_node("ScaledRelu", ["x"], ["h"], name="/act/ScaledRelu", domain="custom", alpha=0.5),
            helper.make_node("Neg", ["h"], ["y"], name="/head/Neg"),
        ],
        "with_function",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 2])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 2])],
    )
    return _model(graph, functions=[function], opsets=[helper.make_opsetid("custom", 1)])


def messy_names() -> onnx.ModelProto:
    """Nodes with empty, repeated and tensor-clashing names, an omitted optional input and a Constant."""
    nodes = [
        helper.make_node("Relu", ["x"], ["a"], name=""),
        helper.make_node("Relu", ["a"], ["b"], name="dup"),
        helper.make_node("Relu", ["b"], ["c"], name="dup"),
        helper.make_node("Constant", [], ["maxv"], name="", value=numpy_helper.from_array(np.array(6.0, np.float32))),
        helper.make_node("Clip", ["c", "", "maxv"], ["d"], name="x"),
        helper.make_node("Relu", ["d"], ["y"], name=""),
    ]
    graph = helper.make_graph(
        nodes,
        "messy",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])],
    )
    return _model(graph)


def external_data(directory: Path, location: str = "weights.bin", size: int = 64) -> Path:
    """A MatMul model whose weight lives in ``location`` beside ``model.onnx``; returns the model path."""
    weight = np.arange(size * size, dtype=np.float32).reshape(size, size) / 100.0
    tensor = numpy_helper.from_array(weight, "w")
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "w"], ["y"], name="/fc/MatMul")],
        "external",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, size])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, size])],
        [tensor],
    )
    model = _model(graph)
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / "model.onnx"
    onnx.save_model(model, str(path), save_as_external_data=True, all_tensors_to_one_file=True,
                    location=location, size_threshold=0)
    return path
