"""Whole models through the ``onnx`` dialect: our inferred types against ONNX's own inference
(``data_prop=True``) and against onnxruntime's actual tensors, value by value.

For static input shapes (one shape profile) every dim ONNX knows we must know too, equal; and every dim
we know must equal the tensor onnxruntime computes. Folded values must equal onnxruntime's values. Models
with dynamic dims (``batch``, ``seq``) must stay consistent with both, and their precision is recorded.
Exported models dropped into ``testdata/*.onnx`` run through the same checks.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import onnx_driver
import onnx_models
import onnxruntime as ort
import pytest

TESTDATA = Path(__file__).resolve().parents[3] / "testdata"


def _testdata_models() -> dict[str, object]:
    return {f"testdata/{p.name}": (lambda p=p: onnx.load(str(p))) for p in sorted(TESTDATA.glob("*.onnx"))}


STATIC_MODELS = {**onnx_models.MODELS, **_testdata_models()}


def _static_shapes(model: onnx.ModelProto) -> dict[str, tuple[int, ...]]:
    """A shape profile for a model with symbolic dims: batch 2, every other symbolic dim 8."""
    shapes = {}
    inits = {t.name for t in model.graph.initializer}
    for vi in model.graph.input:
        if vi.name in inits:
            continue
        dims = vi.type.tensor_type.shape.dim
        shapes[vi.name] = tuple(d.dim_value if d.HasField("dim_value") else (2 if i == 0 else 8) for i, d in enumerate(dims))
    return shapes


def _with_static_inputs(model: onnx.ModelProto, shapes: dict[str, tuple[int, ...]]) -> onnx.ModelProto:
    out = onnx.ModelProto()
    out.CopyFrom(model)
    for vi in out.graph.input:
        if vi.name in shapes:
            for d, n in zip(vi.type.tensor_type.shape.dim, shapes[vi.name]):
                d.Clear()
                d.dim_value = n
    return out


def _ort_values(model: onnx.ModelProto, built: onnx_driver.Built, feeds: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Every main-graph tensor onnxruntime computes, made a graph output (optimizations off)."""
    m = onnx.ModelProto()
    m.CopyFrom(model)
    have = {o.name for o in m.graph.output}
    for node in m.graph.node:
        for name in node.output:
            if name and name not in have and name in built.values:
                _, dtype = built.type_of(name)
                vi = m.graph.output.add()
                vi.name = name
                vi.type.tensor_type.elem_type = dtype.onnx
                have.add(name)
    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    session = ort.InferenceSession(m.SerializeToString(), options, providers=["CPUExecutionProvider"])
    names = [o.name for o in session.get_outputs()]
    return dict(zip(names, session.run(names, feeds)))


def _compare_with_onnx(built: onnx_driver.Built, theirs: dict) -> tuple[int, int, list[str]]:
    """(dims we know, dims ONNX knows, problems): a problem is a dim ONNX knows that we do not, or differ."""
    ours_known = theirs_known = 0
    problems = []
    for name, (their_shape, their_dtype) in theirs.items():
        if name not in built.values:
            continue
        shape, dtype = built.type_of(name)
        if their_dtype is not None and dtype is not their_dtype:
            problems.append(f"{name}: dtype {dtype} vs ONNX {their_dtype}")
        ours_known += 0 if shape is None else sum(d >= 0 for d in shape)
        if their_shape is None:
            continue
        theirs_known += sum(d >= 0 for d in their_shape)
        if shape is None or len(shape) != len(their_shape):
            problems.append(f"{name}: shape {shape} vs ONNX {their_shape}")
        elif any(t >= 0 and o != t for o, t in zip(shape, their_shape)):
            problems.append(f"{name}: shape {shape} vs ONNX {their_shape}")
    return ours_known, theirs_known, problems


def _compare_with_ort(built: onnx_driver.Built, actual: dict[str, np.ndarray]) -> list[str]:
    problems = []
    for name, array in actual.items():
        shape, dtype = built.type_of(name)
        if dtype.numpy != array.dtype and not (dtype.name == "string" and array.dtype == object):
            problems.append(f"{name}: dtype {dtype} vs onnxruntime {array.dtype}")
        if shape is not None and (len(shape) != array.ndim or any(d >= 0 and d != a for d, a in zip(shape, array.shape))):
            problems.append(f"{name}: shape {shape} vs onnxruntime {array.shape}")
        known = built.known_value(name)
        if known is not None and not np.array_equal(np.asarray(known), array):
            problems.append(f"{name}: folded value {known!r} vs onnxruntime {array!r}")
    return problems


@pytest.mark.parametrize("name", sorted(STATIC_MODELS))
def test_static_shapes_at_least_as_precise_as_onnx_and_equal_to_onnxruntime(name):
    model = STATIC_MODELS[name]()
    shapes = _static_shapes(model)
    model = _with_static_inputs(model, shapes)
    built = onnx_driver.build(model)
    ours, theirs, problems = _compare_with_onnx(built, onnx_driver.onnx_types(model))
    assert not problems, problems
    assert ours >= theirs
    actual = _ort_values(model, built, onnx_models.feeds_for(model, shapes))
    assert len(actual) >= len(model.graph.output)
    assert not _compare_with_ort(built, actual)
    # with static inputs, every main-graph value is static except data-dependent ones (an If's branches
    # may differ in shape, and which one runs depends on data)
    data_dependent = {"NonZero", "Compress", "Unique", "If"}
    for value_name, value in built.values.items():
        if value.producer.op_type not in data_dependent and not any(
            v is not None and v.producer.op_type in data_dependent for v in value.producer.inputs
        ):
            assert value.type.is_static, f"{value_name}: {value.type}"


def test_static_precision_figures():
    """Totals over the generated models: ONNX knows no dim we miss, and we know strictly more."""
    ours_total = theirs_total = 0
    for name in onnx_models.MODELS:
        model = onnx_models.MODELS[name]()
        built = onnx_driver.build(model)
        ours, theirs, problems = _compare_with_onnx(built, onnx_driver.onnx_types(model))
        assert not problems
        ours_total, theirs_total = ours_total + ours, theirs_total + theirs
    assert ours_total > theirs_total


@pytest.mark.parametrize(
    "make",
    [
        lambda: onnx_models.transformer_block(14, "batch", "seq"),
        lambda: onnx_models.transformer_block(18, "batch", "seq"),
        lambda: onnx_models.cnn(13, "N"),
        lambda: onnx_models.ort_optimized_bert("batch", "seq"),
    ],
    ids=["bert14", "bert18", "cnn", "bert_onnxruntime_optimized"],
)
def test_dynamic_dims_stay_consistent_with_onnx_and_onnxruntime(make):
    model = make()
    built = onnx_driver.build(model)
    theirs = onnx_driver.onnx_types(model)
    for name, (their_shape, their_dtype) in theirs.items():
        shape, dtype = built.type_of(name)
        assert their_dtype is None or dtype is their_dtype, name
        if shape is not None and their_shape is not None:
            assert len(shape) == len(their_shape), name
            # where both know a dim they agree (ONNX may know more: it propagates symbolic shape data)
            assert all(o == t for o, t in zip(shape, their_shape) if o >= 0 and t >= 0), (name, shape, their_shape)
    shapes = _static_shapes(model)
    actual = _ort_values(model, built, onnx_models.feeds_for(model, shapes))
    assert not _compare_with_ort(built, actual)
    # the batch dim is unknown at build time, so the graph output is dynamic
    out_shape, _ = built.type_of(model.graph.output[0].name)
    assert out_shape is not None and out_shape[0] == -1


def test_control_flow_types_follow_the_bodies():
    built = onnx_driver.build(onnx_models.control_flow())
    assert built.type_of("if_same") == ((2, 3), built.type_of("x")[1])
    assert built.type_of("if_mixed")[0] == (2, -1)  # (2, 6) or (2, 3)
    assert built.type_of("loop_0")[0] == (2, 3)
    assert built.type_of("loop_1")[0] == (3, 2, 3)  # fixed trip count: M=3, condition passed through
    assert built.type_of("scan_0")[0] == (3,)
    assert built.type_of("scan_1")[0] == (2, 3)


def test_data_dependent_outputs_have_unknown_dims():
    built = onnx_driver.build(onnx_models.data_dependent())
    assert built.type_of("nonzero")[0] == (2, -1)
    assert built.type_of("compress")[0] == (-1, 5)
    assert built.type_of("unique")[0] == (-1,)
    assert built.type_of("topk_0")[0] == (4, 2)
    assert built.type_of("filled")[0] == (4, 5)
    assert built.known_value("filled") is not None  # Shape folds, then ConstantOfShape


def _execute_with_reference_kernels(built: onnx_driver.Built, feeds: dict[str, np.ndarray]) -> dict[int, np.ndarray]:
    values: dict[int, np.ndarray] = {}
    for node in built.graph.nodes:
        if node.op == "ge.Data":
            values[id(node.outputs[0])] = feeds[node.name]
        elif node.op == "ge.Const":
            values[id(node.outputs[0])] = node.attrs.as_tensor("value")
        else:
            attrs = {k: v.value for k, v in node.attrs.items()}
            outs = node.opdef.reference([None if v is None else values[id(v)] for v in node.inputs], attrs)
            for value, array in zip(node.outputs, outs):
                values[id(value)] = array
    return values


@pytest.mark.parametrize("name", ["bert_opset14", "bert_opset17", "cnn_opset11", "cnn_opset15", "data_dependent", "bert_onnxruntime_optimized"])
def test_reference_kernels_compute_what_onnxruntime_computes(name):
    model = onnx_models.MODELS[name]()
    built = onnx_driver.build(model)
    feeds = onnx_models.feeds_for(model)
    ours = _execute_with_reference_kernels(built, feeds)
    actual = _ort_values(model, built, feeds)
    for out in model.graph.output:
        np.testing.assert_allclose(ours[id(built.values[out.name])], actual[out.name], rtol=1e-4, atol=1e-5, err_msg=out.name)


def _execute_in_arena(built: onnx_driver.Built, plan, feeds: dict[str, np.ndarray]) -> dict[int, np.ndarray]:
    """Runs the graph with every planned tensor living at its offset in one arena (a forwarded value is a
    view of its owner's bytes): a wrong plan overwrites a live tensor and shows up as a wrong number."""
    arena = np.zeros(plan.arena_bytes, np.uint8)
    values: dict[int, np.ndarray] = {}
    for node in built.graph.nodes:
        if node.op == "ge.Data":
            values[id(node.outputs[0])] = feeds[node.name]
            continue
        if node.op == "ge.Const":
            values[id(node.outputs[0])] = node.attrs.as_tensor("value")
            continue
        attrs = {k: v.value for k, v in node.attrs.items()}
        outs = node.opdef.reference([None if v is None else values[id(v)] for v in node.inputs], attrs)
        for value, array in zip(node.outputs, outs):
            offset = plan.offset(value)
            if offset is None:  # dynamic: allocated at run time
                values[id(value)] = array
                continue
            t = value.type
            view = arena[offset : offset + t.nbytes].view(t.dtype.numpy).reshape(t.shape)
            view[...] = array
            values[id(value)] = view
    return values


@pytest.mark.parametrize("name", ["bert_opset14", "bert_opset18", "cnn_opset13", "data_dependent", "bert_onnxruntime_optimized"])
def test_memory_plan_of_onnx_models_runs_right_and_packs_tight(name):
    from scopefusion.ir_builder.memory_plan import plan_memory

    model = onnx_models.MODELS[name]()
    built = onnx_driver.build(model)
    plan = plan_memory(built.graph)
    plan.validate()
    assert plan.ratio <= 1.05, plan.ratio
    if name in ("bert_opset14", "bert_opset18"):  # q/k/v head splits and the context merge alias their MatMul/Add outputs
        assert len(plan.forwards) >= 4
    feeds = onnx_models.feeds_for(model)
    ours = _execute_in_arena(built, plan, feeds)
    actual = _ort_values(model, built, feeds)
    for out in model.graph.output:
        np.testing.assert_allclose(ours[id(built.values[out.name])], actual[out.name], rtol=1e-4, atol=1e-5, err_msg=out.name)
