"""A small ONNX model with GELU scopes, and a user rules file that fuses them, for the plugin and CLI tests.

The rules file does not depend on the builtin rules: ``TestGelu`` fuses every ``.../gelu/`` scope whose
subtree holds one Erf into ``Gelu``; ``TestGeluAgain`` matches the same scopes and runs after it, so its
results are refused (the nodes are already claimed). Both are general (on by default).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

HIDDEN = 16

RULES = '''
from scopefusion.scope import FUSION_DISABLE_INDEX, NodeOpTypeFeature, ScopeFeature, ScopePattern, scope_rule

GELU_SCOPE = ScopePattern("gelu", NodeOpTypeFeature("Erf", 1), ScopeFeature("", 0, suffix="gelu"))


@scope_rule(GELU_SCOPE, name="TestGelu", type="Gelu", general=True)
def test_gelu(scope, result, graph):
    result.attrs["approximate"] = "none"
    result.insert_inputs("Div", [0, FUSION_DISABLE_INDEX])
    result.insert_outputs("Mul_1", [0])


@scope_rule(GELU_SCOPE, name="TestGeluAgain", type="Gelu", general=True)
def test_gelu_again(scope, result, graph):
    result.attrs["approximate"] = "none"
    result.insert_inputs("Div", [0, FUSION_DISABLE_INDEX])
    result.insert_outputs("Mul_1", [0])


FUSION_RULES = [test_gelu, test_gelu_again]
'''


def _const(name: str, value: float) -> onnx.NodeProto:
    return helper.make_node(
        "Constant", [], [f"{name}_output_0"], name=name, value=numpy_helper.from_array(np.array(value, np.float32))
    )


def gelu_mlp(
    blocks: int = 2,
    *,
    seed: int = 0,
    weight_shift: float = 0.0,
    extra_relu: bool = False,
    prefix: str = "",
) -> bytes:
    """``blocks`` times ``MatMul`` then an exact GELU under ``/block_N/gelu/``, input ``x`` [batch, 16].

    ``weight_shift`` is added to the last block's weight; ``extra_relu`` appends a Relu; ``prefix``
    renames every node (not the graph input or output).
    """
    rng = np.random.default_rng(seed)
    nodes, inits = [], []
    h = "x"
    for b in range(blocks):
        p = f"/{prefix}block_{b}"
        w = rng.standard_normal((HIDDEN, HIDDEN)).astype(np.float32) / 4
        if b == blocks - 1:
            w = w + np.float32(weight_shift)
        inits.append(numpy_helper.from_array(w, f"{prefix}block_{b}.dense.weight"))
        nodes.append(helper.make_node("MatMul", [h, f"{prefix}block_{b}.dense.weight"], [f"{p}/dense/MatMul_output_0"], name=f"{p}/dense/MatMul"))
        m = f"{p}/dense/MatMul_output_0"
        g = f"{p}/gelu"
        nodes += [
            _const(f"{g}/Constant", np.sqrt(2.0)),
            helper.make_node("Div", [m, f"{g}/Constant_output_0"], [f"{g}/Div_output_0"], name=f"{g}/Div"),
            helper.make_node("Erf", [f"{g}/Div_output_0"], [f"{g}/Erf_output_0"], name=f"{g}/Erf"),
            _const(f"{g}/Constant_1", 1.0),
            helper.make_node("Add", [f"{g}/Erf_output_0", f"{g}/Constant_1_output_0"], [f"{g}/Add_output_0"], name=f"{g}/Add"),
            _const(f"{g}/Constant_2", 0.5),
            helper.make_node("Mul", [m, f"{g}/Constant_2_output_0"], [f"{g}/Mul_output_0"], name=f"{g}/Mul"),
            helper.make_node("Mul", [f"{g}/Mul_output_0", f"{g}/Add_output_0"], [f"{g}/Mul_1_output_0"], name=f"{g}/Mul_1"),
        ]
        h = f"{g}/Mul_1_output_0"
    if extra_relu:
        nodes.append(helper.make_node("Relu", [h], ["/head/Relu_output_0"], name=f"/{prefix}head/Relu"))
        h = "/head/Relu_output_0"
    nodes.append(helper.make_node("Identity", [h], ["y"], name=f"/{prefix}output/Identity"))
    graph = helper.make_graph(
        nodes,
        "gelu_mlp",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", HIDDEN])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", HIDDEN])],
        inits,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], producer_name="scopefusion-tests")
    model.ir_version = 8
    onnx.checker.check_model(model)
    return model.SerializeToString()


def write_model(path: Path, **options) -> Path:
    path.write_bytes(gelu_mlp(**options))
    return path


def write_rules(path: Path) -> Path:
    path.write_text(RULES)
    return path
