"""The exporter's own ONNX messages and constructors make what the onnx package makes, byte for byte, and
writing a converted model as ONNX does not import the onnx package."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import ml_dtypes
import numpy as np
import onnx
import pytest
from onnx import defs, helper, numpy_helper

from scopefusion.parser.onnx_tensors import NUMPY_TYPES
from scopefusion.serde import onnx_proto as P

TESTDATA = Path(__file__).resolve().parents[2] / "testdata"


def same(ours, theirs) -> None:
    assert type(ours).__module__ == P.TensorProto.__module__
    assert ours.SerializeToString() == theirs.SerializeToString()


def test_versions_are_the_installed_onnx_ones():
    assert P.ir_version() == onnx.IR_VERSION
    assert P.opset_version() == defs.onnx_opset_version()
    domains = ("", "ai.onnx", "ai.onnx.ml", "ai.onnx.training", "ai.onnx.preview", "ai.onnx.preview.training", "custom")
    for domain in domains:
        for version in range(0, P.opset_version() + 3):
            pairs = [helper.make_opsetid(domain, version)]
            assert P.min_ir_version_for([P.make_opsetid(domain, version)]) == helper.find_min_ir_version_for(pairs, True)
    assert P.min_ir_version_for([]) == helper.find_min_ir_version_for([], True)
    mixed = [("", 23), ("ai.onnx.ml", 5), ("tf", 1)]
    assert P.min_ir_version_for([P.make_opsetid(d, v) for d, v in mixed]) == helper.find_min_ir_version_for(
        [helper.make_opsetid(d, v) for d, v in mixed], True)


@pytest.mark.parametrize("opset", [11, 17, 23, defs.onnx_opset_version()])
def test_schemas_are_the_ones_onnx_defs_finds(opset):
    names = {s.name for s in defs.get_all_schemas_with_history() if s.domain == ""}
    for name in sorted(names | {"NoSuchOp"}):
        try:
            theirs = defs.get_schema(name, opset, "")
        except defs.SchemaError:
            theirs = None
        ours = P.get_schema(name, opset, "")
        if theirs is None:
            assert ours is None, name
            continue
        assert ours is not None and ours.since_version == theirs.since_version, name
        assert [p.option for p in ours.outputs] == [p.option.name for p in theirs.outputs]
        assert {k: a.kind for k, a in ours.attributes.items()} == {k: a.type.name for k, a in theirs.attributes.items()}
    assert P.get_schema("Relu", 13, "ai.onnx") is None  # onnx.defs knows the default domain only as ""
    assert P.get_schema("LinearRegressor", 1, "ai.onnx.ml").since_version == 1
    assert P.get_schema("Relu", 13, "custom") is None


def test_messages_and_value_infos():
    same(P.make_opsetid("custom", 3), helper.make_opsetid("custom", 3))
    for shape in (None, [], [1, "N", None], (2, 3)):
        same(P.make_tensor_value_info("x", onnx.TensorProto.FLOAT, shape),
             helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, shape))
    with pytest.raises(ValueError):
        P.make_tensor_value_info("x", 1, [1.5])
    attrs = {"perm": [0, 2, 1], "alpha": 0.5, "mode": "linear", "unset": None}
    same(P.make_node("Op", ["a", ""], ["b"], name="n", domain="d", doc_string="doc", **attrs),
         helper.make_node("Op", ["a", ""], ["b"], name="n", domain="d", doc_string="doc", **attrs))
    same(P.make_node("Op", ["a"], ["b"], domain=""), helper.make_node("Op", ["a"], ["b"], domain=""))


def _values():
    tensor = numpy_helper.from_array(np.arange(3, dtype=np.float32))
    body = helper.make_graph([helper.make_node("Identity", ["a"], ["b"])], "g", [], [])
    type_proto = helper.make_tensor_type_proto(onnx.TensorProto.INT64, [2, None])
    sparse = helper.make_sparse_tensor(tensor, numpy_helper.from_array(np.asarray([0, 2, 4], np.int64)), [5])
    return [
        3, True, np.int64(7), 1.5, np.float32(0.25), "s", b"b", [1, 2], (1.0, 2), ["a", b"b"], np.asarray([1, 2]),
        tensor, [tensor, tensor], body, [body], type_proto, [type_proto], sparse, [sparse],
    ]


@pytest.mark.parametrize("value", _values())
def test_attributes_as_make_attribute(value):
    theirs = helper.make_attribute("a", value)
    same(P.make_attribute("a", value), theirs)  # the onnx package's messages are read as ours
    own = P.from_onnx(value) if hasattr(value, "SerializeToString") else value
    if isinstance(value, list) and value and hasattr(value[0], "SerializeToString"):
        own = [P.from_onnx(v) for v in value]
    ours = P.make_attribute("a", own)
    same(ours, theirs)
    got, want = P.get_attribute_value(ours), helper.get_attribute_value(theirs)
    if isinstance(want, list):
        assert [getattr(v, "SerializeToString", lambda v=v: v)() for v in got] == \
            [getattr(v, "SerializeToString", lambda v=v: v)() for v in want]
    else:
        assert getattr(got, "SerializeToString", lambda: got)() == getattr(want, "SerializeToString", lambda: want)()


@pytest.mark.parametrize("value", [[], object(), [1, "a"], np.zeros((2, 2))])
def test_bad_attributes_fail_as_make_attribute(value):
    with pytest.raises(Exception) as theirs:
        helper.make_attribute("a", value)
    with pytest.raises(theirs.type):
        P.make_attribute("a", value)


def test_reference_attribute_has_no_value():
    attr = P.AttributeProto(name="a", ref_attr_name="b", type=P.AttributeProto.INT)
    with pytest.raises(ValueError):
        P.get_attribute_value(attr)
    assert P.get_attribute_value(P.AttributeProto(name="a")) is None


def test_element_types_both_ways():
    for code in NUMPY_TYPES:
        assert P.tensor_dtype_to_np_dtype(code) == helper.tensor_dtype_to_np_dtype(code)
        dtype = helper.tensor_dtype_to_np_dtype(code)
        assert P.np_dtype_to_tensor_dtype(dtype) == helper.np_dtype_to_tensor_dtype(dtype)
    assert P.np_dtype_to_tensor_dtype(np.dtype("<U3")) == helper.np_dtype_to_tensor_dtype(np.dtype("<U3"))
    for bad in (np.dtype(">f4"), np.dtype("datetime64[s]"), np.dtype([("a", "f4")])):
        with pytest.raises(ValueError):
            helper.np_dtype_to_tensor_dtype(bad)
        with pytest.raises(ValueError):
            P.np_dtype_to_tensor_dtype(bad)
    with pytest.raises(KeyError):
        P.tensor_dtype_to_np_dtype(999)


ARRAYS = [
    np.arange(6, dtype=np.float32).reshape(2, 3), np.asarray(3, np.int64), np.asarray([True, False]),
    np.arange(4, dtype=np.float16), np.asarray(["a", "bé"]).astype(object),
    np.asarray([b"x", "y"], dtype=object), np.asarray(["u", "v"]), np.zeros((0, 3), np.uint8),
    np.arange(4, dtype=np.float32).astype(ml_dtypes.bfloat16), np.arange(4).astype(ml_dtypes.int4),
    np.arange(3, dtype=np.complex64),
]  # fmt: skip


@pytest.mark.parametrize("array", ARRAYS, ids=lambda a: str(a.dtype))
def test_tensors_as_numpy_helper(array):
    theirs = numpy_helper.from_array(array, "w")
    ours = P.from_array(array, "w")
    same(ours, theirs)
    if array.dtype.kind not in "OU":
        read, want = P.to_array(ours), numpy_helper.to_array(theirs)
        assert read.dtype == want.dtype and read.shape == want.shape and read.tobytes() == want.tobytes()


def test_a_big_endian_array_fails_as_from_array():
    array = np.arange(4, dtype=">i4")
    with pytest.raises(ValueError):
        numpy_helper.from_array(array)
    with pytest.raises(ValueError):
        P.from_array(array)


@pytest.mark.parametrize(("code", "vals"), [
    (onnx.TensorProto.FLOAT, [1.5, 2]), (onnx.TensorProto.INT64, [0]), (onnx.TensorProto.INT32, [1, -2]),
    (onnx.TensorProto.BOOL, [True, False]), (onnx.TensorProto.INT8, [-3]), (onnx.TensorProto.UINT16, [9]),
    (onnx.TensorProto.DOUBLE, [0.1]), (onnx.TensorProto.UINT32, [7]), (onnx.TensorProto.UINT64, [2**40]),
    (onnx.TensorProto.FLOAT16, [1.0]), (onnx.TensorProto.STRING, ["a"]),
])  # fmt: skip
def test_typed_tensors_as_make_tensor(code, vals):
    same(P.make_tensor("t", code, [len(vals)], vals), helper.make_tensor("t", code, [len(vals)], vals))
    with pytest.raises(ValueError):
        helper.make_tensor("t", code, [len(vals) + 1], vals)
    with pytest.raises(ValueError):
        P.make_tensor("t", code, [len(vals) + 1], vals)


def test_raw_tensors_as_make_tensor():
    raw = np.arange(4, dtype=np.float32).tobytes()
    same(P.make_tensor("t", onnx.TensorProto.FLOAT, [2, 2], raw, raw=True),
         helper.make_tensor("t", onnx.TensorProto.FLOAT, [2, 2], raw, raw=True))
    with pytest.raises(ValueError):
        P.make_tensor("t", onnx.TensorProto.FLOAT, [3], raw, raw=True)


def test_shape_inference_runs_on_a_copy_and_reads_back():
    model = P.ModelProto(ir_version=P.ir_version())
    model.opset_import.append(P.make_opsetid("", 17))
    model.graph.node.append(P.make_node("Relu", ["x"], ["y"]))
    model.graph.input.append(P.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [2, 3]))
    model.graph.output.append(P.make_tensor_value_info("y", 0, None))
    inferred = P.infer_shapes(model)
    assert isinstance(inferred, P.ModelProto)
    assert [d.dim_value for d in inferred.graph.output[0].type.tensor_type.shape.dim] == [2, 3]
    assert P.to_onnx(model).SerializeToString() == model.SerializeToString()


def test_saving_a_converted_model_as_onnx_does_not_import_onnx(tf_mobilenet_pb, tf_bert_pb, tmp_path):
    # Keras MobileNetV2 and a TF1 BERT (frozen graphs), a PyTorch encoder (ONNX): every way to write ONNX.
    code = (
        "import sys\nfrom scopefusion.convert import convert\n"
        "from scopefusion.serde.onnx_export import model_to_onnx_bytes\n"
        "out = sys.argv[1]\n"
        "for i, model in enumerate(sys.argv[2:]):\n"
        "    m = convert(model)\n"
        "    m.save(f'{out}/m{i}.onnx')\n"
        "    assert m.to_bytes('onnx') == model_to_onnx_bytes(m) == open(f'{out}/m{i}.onnx', 'rb').read()\n"
        "    assert m.report()['onnx']['nodes'] > 0\n"
        "print('onnx' in sys.modules, sorted(m for m in sys.modules if m.startswith('onnx.'))[:3])"
    )
    models = [str(tf_mobilenet_pb), str(tf_bert_pb), str(TESTDATA / "torch_encoder_opset17.onnx")]
    out = subprocess.run([sys.executable, "-c", code, str(tmp_path), *models], capture_output=True, text=True, check=True)
    assert out.stdout.strip().splitlines()[-1] == "False []"
    for i in range(len(models)):  # the files are ONNX models the onnx package reads and checks
        onnx.checker.check_model(onnx.load(str(tmp_path / f"m{i}.onnx")))
