"""Wire compatibility with GE's ge_ir.proto, checked without our generated classes.

Expected bytes are built by a hand-written encoder from the field numbers of the published layout
(reference/ge_ir.md); a hand-written tag walk decodes what ``to_bytes`` writes.
"""

from __future__ import annotations

import numpy as np

from scopefusion import dtypes as D
from scopefusion.ir_builder import Graph, IRContext
from scopefusion.serde import ge_ir_pb2 as pb
from scopefusion.serde import to_bytes

VARINT, I64, LEN, I32 = 0, 1, 2, 5


def varint(n: int) -> bytes:
    n &= (1 << 64) - 1
    out = bytearray()
    while True:
        byte = n & 0x7F
        n >>= 7
        if n:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def tag(field: int, wire: int) -> bytes:
    return varint(field << 3 | wire)


def f_varint(field: int, n: int) -> bytes:
    return tag(field, VARINT) + varint(n)


def f_len(field: int, payload: bytes) -> bytes:
    return tag(field, LEN) + varint(len(payload)) + payload


def f_packed(field: int, values) -> bytes:
    return f_len(field, b"".join(varint(v) for v in values))


def walk(data: bytes) -> list[tuple[int, int, object]]:
    """Top-level ``(field, wire type, value)`` of a message: ints for varints, bytes for the rest."""
    out, i = [], 0
    while i < len(data):
        key, i = _read_varint(data, i)
        field, wire = key >> 3, key & 7
        if wire == VARINT:
            value, i = _read_varint(data, i)
        elif wire == LEN:
            n, i = _read_varint(data, i)
            value, i = data[i : i + n], i + n
        elif wire == I32:
            value, i = data[i : i + 4], i + 4
        elif wire == I64:
            value, i = data[i : i + 8], i + 8
        else:
            raise AssertionError(f"unexpected wire type {wire}")
        out.append((field, wire, value))
    return out


def _read_varint(data: bytes, i: int) -> tuple[int, int]:
    shift = result = 0
    while True:
        byte = data[i]
        i += 1
        result |= (byte & 0x7F) << shift
        shift += 7
        if not byte & 0x80:
            return result, i


def fields(data: bytes, number: int) -> list:
    return [v for f, _, v in walk(data) if f == number]


# ----------------------------------------------------------------------------- messages by hand
def test_attr_def_cases_have_ges_field_numbers():
    def enc(msg) -> bytes:
        return msg.SerializeToString(deterministic=True)

    assert enc(pb.AttrDef(s=b"ab")) == f_len(2, b"ab")
    assert enc(pb.AttrDef(i=-1)) == f_varint(3, -1)
    assert enc(pb.AttrDef(f=1.5)) == tag(4, I32) + np.float32(1.5).tobytes()
    assert enc(pb.AttrDef(b=True)) == f_varint(5, 1)
    assert enc(pb.AttrDef(bt=b"\x00")) == f_len(7, b"\x00")
    assert enc(pb.AttrDef(dt=27)) == f_varint(15, 27)
    assert enc(pb.AttrDef(expression=b"e")) == f_len(17, b"e")
    named = pb.AttrDef()
    named.func.name = "n"
    named.func.attr["k"].i = 2
    assert enc(named) == f_len(10, f_len(1, b"n") + f_len(2, f_len(1, b"k") + f_len(2, f_varint(3, 2))))
    lli = pb.AttrDef()
    lli.list_list_int.list_list_i.add().list_i.extend([1, 2])
    assert enc(lli) == f_len(14, f_len(1, f_packed(1, [1, 2])))
    llf = pb.AttrDef()
    llf.list_list_float.list_list_f.add().list_f.append(2.0)
    assert enc(llf) == f_len(16, f_len(1, f_len(1, np.float32(2.0).tobytes())))


def test_list_value_fields_and_val_type():
    lv = pb.AttrDef()
    lv.list.val_type = pb.AttrDef.ListValue.VT_LIST_DATA_TYPE
    lv.list.dt.extend([1, 27])
    assert lv.SerializeToString() == f_len(1, f_packed(12, [1, 27]) + f_varint(20, 10))
    numbers = {f.name: f.number for f in pb.AttrDef.ListValue.DESCRIPTOR.fields}
    assert numbers == {"s": 2, "i": 3, "f": 4, "b": 5, "bt": 7, "td": 8, "t": 9, "g": 10, "na": 11, "dt": 12, "val_type": 20}
    vt = pb.AttrDef.ListValue.ListValueType
    assert [vt.Name(i) for i in range(11)] == [
        "VT_LIST_NONE", "VT_LIST_STRING", "VT_LIST_INT", "VT_LIST_FLOAT", "VT_LIST_BOOL", "VT_LIST_BYTES",
        "VT_LIST_TENSOR_DESC", "VT_LIST_TENSOR", "VT_LIST_GRAPH", "VT_LIST_NAMED_ATTRS", "VT_LIST_DATA_TYPE",
    ]  # fmt: skip


def test_tensor_descriptor_fields():
    d = pb.TensorDescriptor(
        name="t", dtype=pb.DT_BF16, layout="NCHW", has_out_attr=True, size=10, weight_size=11, reuse_input=True,
        output_tensor=True, device_type="NPU", input_tensor=True, real_dim_cnt=16, reuse_input_index=17,
        data_offset=18, cmps_size=19, cmps_tab="c", cmps_tab_offset=21,
    )  # fmt: skip
    d.shape.dim.extend([2, -1])
    d.attr["a"].b = True
    expected = (
        f_len(1, b"t") + f_varint(2, 27) + f_len(3, f_packed(1, [2, -1])) + f_len(4, b"NCHW")
        + f_len(5, f_len(1, b"a") + f_len(2, f_varint(5, 1))) + f_varint(9, 1) + f_varint(10, 10) + f_varint(11, 11)
        + f_varint(12, 1) + f_varint(13, 1) + f_len(14, b"NPU") + f_varint(15, 1) + f_varint(16, 16) + f_varint(17, 17)
        + f_varint(18, 18) + f_varint(19, 19) + f_len(20, b"c") + f_varint(21, 21)
    )  # fmt: skip
    assert d.SerializeToString(deterministic=True) == expected
    t = pb.TensorDef(data=b"xy")
    t.desc.dtype = pb.DT_INT8
    assert t.SerializeToString() == f_len(1, f_varint(2, 3)) + f_len(2, b"xy")


def test_op_graph_and_model_fields():
    op = pb.OpDef(
        name="n", type="T", input=["a:0"], has_out_attr=True, id=21, stream_id=22, input_name=["x"], src_name=["s"],
        src_index=[25], dst_name=["d"], dst_index=[27], input_i=[28], output_i=[29], workspace=[30],
        workspace_bytes=[31], is_input_const=[True], subgraph_name=["sg"],
    )  # fmt: skip
    op.attr["k"].i = 1
    op.input_desc.add(dtype=pb.DT_FLOAT)
    op.output_desc.add(dtype=pb.DT_INT64)
    expected = (
        f_len(1, b"n") + f_len(2, b"T") + f_len(5, b"a:0") + f_len(10, f_len(1, b"k") + f_len(2, f_varint(3, 1)))
        + f_varint(20, 1) + f_varint(21, 21) + f_varint(22, 22) + f_len(23, b"x") + f_len(24, b"s") + f_packed(25, [25])
        + f_len(26, b"d") + f_packed(27, [27]) + f_packed(28, [28]) + f_packed(29, [29]) + f_packed(30, [30])
        + f_packed(31, [31]) + f_packed(32, [1]) + f_len(33, f_varint(2, 1)) + f_len(34, f_varint(2, 8))
        + f_len(35, b"sg")
    )  # fmt: skip
    assert op.SerializeToString(deterministic=True) == expected
    g = pb.GraphDef(name="g", input=["a:0"], output=["b:0"])
    g.op.add(name="a")
    g.attr["x"].s = b"y"
    assert g.SerializeToString(deterministic=True) == (
        f_len(1, b"g") + f_len(4, b"a:0") + f_len(5, b"b:0") + f_len(6, f_len(1, b"a"))
        + f_len(11, f_len(1, b"x") + f_len(2, f_len(2, b"y")))
    )  # fmt: skip
    m = pb.ModelDef(name="m", version=2, custom_version="c")
    m.graph.add(name="g")
    m.attr["z"].i = 0
    assert m.SerializeToString(deterministic=True) == (
        f_len(1, b"m") + f_varint(2, 2) + f_len(3, b"c") + f_len(7, f_len(1, b"g"))
        + f_len(11, f_len(1, b"z") + f_len(2, f_varint(3, 0)))
    )  # fmt: skip


def test_data_type_enum_matches_ge():
    expected = {
        "DT_UNDEFINED": 0, "DT_FLOAT": 1, "DT_FLOAT16": 2, "DT_INT8": 3, "DT_UINT8": 4, "DT_INT16": 5, "DT_UINT16": 6,
        "DT_INT32": 7, "DT_INT64": 8, "DT_UINT32": 9, "DT_UINT64": 10, "DT_BOOL": 11, "DT_DOUBLE": 12, "DT_STRING": 13,
        "DT_DUAL_SUB_INT8": 14, "DT_DUAL_SUB_UINT8": 15, "DT_COMPLEX64": 16, "DT_COMPLEX128": 17, "DT_QINT8": 18,
        "DT_QINT16": 19, "DT_QINT32": 20, "DT_QUINT8": 21, "DT_QUINT16": 22, "DT_RESOURCE": 23, "DT_STRING_REF": 24,
        "DT_DUAL": 25, "DT_VARIANT": 26, "DT_BF16": 27, "DT_INT4": 28, "DT_UINT1": 29, "DT_INT2": 30, "DT_UINT2": 31,
        "DT_COMPLEX32": 32, "DT_HIFLOAT8": 33, "DT_FLOAT8_E5M2": 34, "DT_FLOAT8_E4M3FN": 35, "DT_FLOAT8_E8M0": 36,
        "DT_FLOAT6_E3M2": 37, "DT_FLOAT6_E2M3": 38, "DT_FLOAT4_E2M1": 39, "DT_FLOAT4_E1M2": 40, "DT_HIFLOAT4": 41,
    }  # fmt: skip
    assert dict(pb.DataType.items()) == expected
    for dtype in D.all_dtypes():
        assert dtype.ge in expected.values()


def test_package_is_ges_and_owned_by_our_schema_alone():
    from google.protobuf import descriptor_pool

    assert pb.DESCRIPTOR.package == "ge.proto"
    assert pb.ModelDef.DESCRIPTOR.full_name == "ge.proto.ModelDef"
    pool = descriptor_pool.Default()
    for symbol in ("ge.proto.ModelDef", "ge.proto.AttrDef", "ge.proto.DataType"):
        assert pool.FindFileContainingSymbol(symbol).name == "scopefusion/serde/ge_ir.proto"


# ----------------------------------------------------------------------------- what to_bytes writes
def test_to_bytes_output_decodes_with_ges_field_numbers():
    ctx = IRContext()
    g = Graph("main", ctx)
    x = g.add_input("x", ctx.tensor(D.FLOAT32, (2, -1)))
    w = g.add_const(np.ones((2,), np.float32), "w")
    n = g.add_node("tf.Mul", [x, w], name="mul", control_inputs=[w.producer], output_types=[x.type],
                   attrs={"shape": ((1, 2), (3,))}, allow_unknown=True)  # fmt: skip
    g.set_outputs(n.outputs)
    model = to_bytes(g)
    graphs = fields(model, 7)  # ModelDef.graph
    assert len(graphs) == 1 and fields(graphs[0], 1) == [b"main"]
    assert fields(graphs[0], 4) == [b"x:0"] and fields(graphs[0], 5) == [b"mul:0"]
    ops = fields(graphs[0], 6)  # GraphDef.op
    assert [fields(op, 1) for op in ops] == [[b"x"], [b"w"], [b"mul"]]
    mul = ops[2]
    assert fields(mul, 2) == [b"Mul"]
    assert fields(mul, 5) == [b"x:0", b"w:0", b"w:-1"]  # OpDef.input, control edge last
    in_desc = fields(mul, 33)  # OpDef.input_desc
    assert len(in_desc) == 2 and fields(in_desc[0], 2) == [1]  # TensorDescriptor.dtype = DT_FLOAT
    assert fields(fields(in_desc[0], 3)[0], 1) == [varint(2) + varint(-1)]  # ShapeDef.dim, packed
    assert fields(in_desc[0], 4) == [b"ND"]
    assert len(fields(mul, 34)) == 1  # OpDef.output_desc
    attrs = {fields(e, 1)[0]: fields(e, 2)[0] for e in fields(mul, 10)}  # OpDef.attr map entries
    assert set(attrs) == {b"_dialect", b"shape"}
    assert fields(attrs[b"_dialect"], 2) == [b"tf"]
    rows = fields(fields(attrs[b"shape"], 14)[0], 1)  # AttrDef.list_list_int -> ListListInt.list_list_i
    assert [fields(r, 1) for r in rows] == [[varint(1) + varint(2)], [varint(3)]]
    const_value = {fields(e, 1)[0]: fields(e, 2)[0] for e in fields(ops[1], 10)}[b"value"]
    tensor = fields(const_value, 12)[0]  # AttrDef.t
    assert fields(tensor, 2) == [np.ones(2, np.float32).tobytes()]  # TensorDef.data
