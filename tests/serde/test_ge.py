"""IR graphs ⇄ GE ModelDef: op layout, bodies, model API, GE-written models, errors."""

from __future__ import annotations

import numpy as np
import pytest

from scopefusion import dtypes as D
from scopefusion.errors import SerdeError
from scopefusion.ir import attrs as A
from scopefusion.ir.attrs import AttrValue
from scopefusion.ir_builder import (
    CONST_OP,
    DATA_OP,
    Graph,
    IRContext,
    OpRegistry,
    builtin_ops,
    first_difference,
    format_graph,
)
from scopefusion.serde import (
    from_bytes,
    from_text,
    graph_from_proto,
    graph_to_proto,
    model_from_bytes,
    model_from_proto,
    model_from_text,
    model_to_proto,
    to_bytes,
    to_text,
)
from scopefusion.serde import ge_ir_pb2 as pb

VT = pb.AttrDef.ListValue


def _sample(ctx: IRContext | None = None) -> Graph:
    """main(x, y): MatMul(x, w) -> If(then, else) with a control edge and an absent optional input."""
    ctx = ctx if ctx is not None else IRContext()
    g = Graph("main", ctx)
    x = g.add_input("x", ctx.tensor(D.FLOAT32, (1, -1)))
    y = g.add_input("y", ctx.tensor(D.INT64, None, "NCHW"))
    w = g.add_const(np.arange(8, dtype=np.float32).reshape(4, 2), "w")
    mm = g.add_node(
        "tf.MatMul", [x, w], name="mm", attrs={"transpose_a": False, "eps": 0.5},
        output_types=[ctx.tensor(D.FLOAT32, (1, 2))], allow_unknown=True,
    )  # fmt: skip
    then = Graph("branch", ctx)
    then.set_outputs([then.add_input("a", None)])
    other = Graph("branch", ctx)
    other.set_outputs([other.add_input("a", None)])
    cond = g.add_node(
        "ge.If", [y, None, mm.outputs[0]], name="if", control_inputs=[w.producer],
        subgraphs={"then_branch": then, "else_branch": other}, output_types=[None, ctx.list_of(ctx.element(D.BOOL))],
        allow_unknown=True,
    )  # fmt: skip
    g.set_outputs([cond.outputs[1], mm.outputs[0]])
    g.attrs.set_attr("producer", "scopefusion")
    return g


def _roundtrip(g: Graph) -> Graph:
    back = from_bytes(to_bytes(g))
    assert first_difference(g, back) is None
    return back


# ----------------------------------------------------------------------------- layout
def test_ops_are_written_in_schedule_order_with_ge_conventions():
    model = model_to_proto(_sample())
    main = model.graph[0]
    assert model.name == "main" and main.name == "main"
    assert [op.name for op in main.op] == ["x", "y", "w", "mm", "if"]
    assert [op.type for op in main.op] == ["Data", "Data", "Const", "MatMul", "If"]
    assert [op.id for op in main.op] == [0, 1, 2, 3, 4]
    assert list(main.input) == ["x:0", "y:0"] and list(main.output) == ["if:1", "mm:0"]
    x, _, w, mm, cond = main.op
    assert "_dialect" not in x.attr and x.attr["index"].i == 0
    assert w.attr["value"].t.desc.dtype == pb.DT_FLOAT
    assert mm.attr["_dialect"].s == b"tf" and list(mm.input) == ["x:0", "w:0"]
    assert [d.dtype for d in mm.input_desc] == [pb.DT_FLOAT, pb.DT_FLOAT]
    assert list(mm.input_desc[0].shape.dim) == [1, -1] and mm.input_desc[0].layout == "ND"
    assert list(mm.output_desc[0].shape.dim) == [1, 2]
    assert list(cond.input) == ["y:0", "", "mm:0", "w:-1"]
    assert len(cond.input_desc) == 3 and list(cond.input_desc[0].shape.dim) == [-2]
    assert cond.input_desc[0].layout == "NCHW" and cond.input_desc[1].dtype == pb.DT_UNDEFINED
    assert "_dialect" not in cond.attr
    assert [d.dtype for d in cond.output_desc] == [pb.DT_UNDEFINED, pb.DT_UNDEFINED]
    assert cond.output_desc[1].attr["_ir_type"].func.name == "list"


def test_bodies_are_flat_in_the_model_and_renamed_when_taken():
    model = model_to_proto(_sample())
    assert [g.name for g in model.graph] == ["main", "branch", "branch_1"]
    cond = model.graph[0].op[4]
    assert list(cond.subgraph_name) == ["branch", "branch_1"]
    assert list(cond.attr["_subgraph_keys"].list.s) == [b"then_branch", b"else_branch"]
    assert "_graph_name" not in model.graph[1].attr
    assert model.graph[2].attr["_graph_name"].s == b"branch"
    back = _roundtrip(_sample())
    assert [b.name for b in back.node("if").subgraphs.values()] == ["branch", "branch"]
    assert list(back.node("if").subgraphs) == ["then_branch", "else_branch"]


def test_nested_bodies_come_depth_first():
    ctx = IRContext()
    inner = Graph("inner", ctx)
    inner.add_input("i", None)
    outer = Graph("outer", ctx)
    outer.add_node("tf.While", [], name="w", subgraphs={"body": inner}, allow_unknown=True)
    g = Graph("main", ctx)
    g.add_node("tf.While", [], name="w", subgraphs={"body": outer}, allow_unknown=True)
    g.add_node("tf.While", [], name="v", subgraphs={"body": outer.clone()}, allow_unknown=True)
    model = model_to_proto(g)
    assert [d.name for d in model.graph] == ["main", "outer", "inner", "outer_1", "inner_1"]
    _roundtrip(g)


def test_round_trip_of_the_sample_keeps_every_fact():
    g = _sample()
    back = _roundtrip(g)
    assert format_graph(back) == format_graph(g)
    assert back.node("x").op == DATA_OP and back.node("w").op == CONST_OP
    assert back.node("if").dialect == "ge" and back.node("mm").dialect == "tf"
    assert back.node("if").inputs[1] is None
    assert [c.name for c in back.node("if").control_inputs] == ["w"]
    assert back.inputs[1].type.rank is None and back.inputs[1].type.format == "NCHW"


def test_writing_is_deterministic_and_stable_across_round_trips():
    first = to_bytes(_sample())
    assert to_bytes(_sample()) == first
    assert to_bytes(from_bytes(first)) == first
    text = to_text(_sample())
    assert to_text(from_text(text)) == text
    assert to_bytes(from_text(text)) == first


def test_empty_dialect_and_dotted_dialects_round_trip():
    ctx = IRContext()
    g = Graph("g", ctx)
    a = g.add_node("Plain", [], name="a", output_types=[None], allow_unknown=True)
    g.add_node("my.custom.Op", [a.outputs[0]], name="b", allow_unknown=True)
    model = model_to_proto(g)
    assert model.graph[0].op[0].attr["_dialect"].s == b""
    assert model.graph[0].op[1].attr["_dialect"].s == b"my.custom" and model.graph[0].op[1].type == "Op"
    back = _roundtrip(g)
    assert back.node("a").dialect == "" and back.node("b").dialect == "my.custom"


def test_registered_ops_are_rebuilt_with_their_definitions():
    ops = OpRegistry(builtin_ops())
    ops.define("Scale", "ge").input("x").output("y").attr("factor", A.FLOAT, default=2.0)
    ctx = IRContext()
    g = Graph("g", ctx, ops)
    x = g.add_input("x", ctx.tensor(D.FLOAT32, (2,)))
    g.add_node("ge.Scale", [x], name="s", output_types=[x.type])
    back = from_bytes(to_bytes(g), ops=ops)
    assert first_difference(g, back) is None
    assert back.node("s").opdef is ops.get("ge.Scale") and back.node("s").attrs.as_float("factor") == 2.0


def test_reading_into_the_writers_context_gives_identical_types():
    ctx = IRContext()
    g = _sample(ctx)
    back = from_bytes(to_bytes(g), context=ctx)
    assert back.node("mm").outputs[0].type is g.node("mm").outputs[0].type


# ----------------------------------------------------------------------------- model API
def test_model_keeps_extra_graphs_attrs_and_facts():
    ctx = IRContext()
    main, extra = _sample(ctx), Graph("profile_1", ctx)
    extra.set_outputs([extra.add_input("p", ctx.tensor(D.INT32, (3,)))])
    data = to_bytes([main, extra], name="net", attrs={"batch": [1, 8], "note": "x"}, version=3, custom_version="v1")
    model = model_from_bytes(data)
    assert [g.name for g in model.graphs] == ["main", "profile_1"] and model.main.name == "main"
    assert model.name == "net" and model.version == 3 and model.custom_version == "v1"
    assert model.attrs == {"batch": AttrValue(A.LIST_INT, (1, 8)), "note": AttrValue(A.STR, "x")}
    assert first_difference(model.graphs[1], extra) is None
    assert [g.name for g in pb.ModelDef.FromString(data).graph] == ["main", "profile_1", "branch", "branch_1"]
    text_model = model_from_text(to_text([main, extra], name="net"))
    assert [g.name for g in text_model.graphs] == ["main", "profile_1"]


def test_model_api_errors():
    g = _sample()
    with pytest.raises(SerdeError, match="needs at least one graph"):
        model_to_proto([])
    with pytest.raises(SerdeError, match="two top-level graphs of the model are named 'main'"):
        model_to_proto([g, _sample()])
    with pytest.raises(SerdeError, match="the version is a uint32"):
        model_to_proto(g, version=-1)
    with pytest.raises(SerdeError, match="model attribute 'k': no attribute type for a object"):
        model_to_proto(g, attrs={"k": object()})
    with pytest.raises(TypeError, match="needs bytes"):
        model_from_bytes("text")  # type: ignore[arg-type]


def test_standalone_graph_def_nests_its_bodies():
    g = _sample()
    graph_def = graph_to_proto(g)
    assert graph_def.name == "main" and graph_def.attr["_subgraphs"].list.val_type == VT.VT_LIST_GRAPH
    assert [b.name for b in graph_def.attr["_subgraphs"].list.g] == ["branch", "branch_1"]
    assert first_difference(g, graph_from_proto(graph_def)) is None
    plain = Graph("plain", IRContext())
    assert "_subgraphs" not in graph_to_proto(plain).attr


# ----------------------------------------------------------------------------- GE-written models
def _ge_model() -> pb.ModelDef:
    """A model as GE writes it: no dialect, ops out of schedule order, an untyped list, "^" control input."""
    model = pb.ModelDef(name="ge")
    g = model.graph.add(name="root")
    relu = g.op.add(name="relu", type="Relu", input=["data:0", "^const"])
    relu.output_desc.add(dtype=pb.DT_FLOAT16, layout="NCHW").shape.dim.extend([1, 3, 2, 2])
    relu.attr["axes"].list.i.extend([1, 2])
    data = g.op.add(name="data", type="Data")
    data.attr["index"].i = 0
    data.output_desc.add(dtype=pb.DT_FLOAT16, layout="NCHW").shape.dim.extend([1, 3, 2, 2])
    const = g.op.add(name="const", type="Const")
    const.attr["value"].t.desc.dtype = pb.DT_INT32
    const.attr["value"].t.data = b"\x05\x00\x00\x00"
    const.output_desc.add(dtype=pb.DT_INT32)
    g.input.append("data:0")
    g.output.append("relu:0")
    return model


def test_reads_a_ge_written_model():
    g = model_from_proto(_ge_model()).main
    assert [n.name for n in g.nodes] == ["data", "const", "relu"]
    relu = g.node("relu")
    assert relu.op == "ge.Relu" and [c.name for c in relu.control_inputs] == ["const"]
    assert relu.attrs.as_ints("axes") == (1, 2)
    assert str(relu.outputs[0].type) == "f16[1,3,2,2] NCHW"
    assert g.node("const").attrs.as_tensor("value").tolist() == 5
    assert g.inputs[0].producer.name == "data"
    again = from_bytes(to_bytes(g))
    assert first_difference(g, again) is None


def test_reads_repeated_fields_written_unpacked():
    # ListValue.i (field 3) as two unpacked varints, as a proto2 writer would put them.
    attr = b"\x0a\x07" + b"\x18\x01\x18\x02" + b"\xa0\x01\x02"
    assert pb.AttrDef.FromString(attr).list.i == [1, 2]
    from scopefusion.serde import SerdeContext

    assert SerdeContext().read_attr(pb.AttrDef.FromString(attr)) == AttrValue(A.LIST_INT, (1, 2))


# ----------------------------------------------------------------------------- errors
def test_truncated_bytes_are_a_serde_error():
    data = to_bytes(_sample())
    with pytest.raises(SerdeError, match=r"cannot decode \d+ bytes as a GE ModelDef"):
        from_bytes(data[: len(data) // 2])
    with pytest.raises(SerdeError, match="the model has no graph"):
        from_bytes(b"")
    with pytest.raises(SerdeError, match="cannot decode 3 bytes"):
        from_bytes(b"\xff\xff\xff")


def test_bad_text_is_a_serde_error():
    with pytest.raises(SerdeError, match="cannot parse the text as a GE ModelDef"):
        from_text("graph { nme: 1 }")


def _broken(edit) -> pb.ModelDef:
    model = model_to_proto(_sample())
    edit(model)
    return model


@pytest.mark.parametrize(
    "edit,message",
    [
        (lambda m: m.graph[0].op[3].input.__setitem__(0, "ghost:0"), r"op 'mm' \(MatMul\) input 0: reads op 'ghost', but the graph has no op"),
        (lambda m: m.graph[0].op[3].input.__setitem__(0, "x:4"), r"reads x:4, but op 'x' has 1 outputs"),
        (lambda m: m.graph[0].op[3].input.__setitem__(0, ":0"), r"reference ':0' is malformed"),
        (lambda m: m.graph[0].op[3].input.__setitem__(0, "x:-3"), r"reference 'x:-3' is malformed"),
        (lambda m: m.graph[0].op[3].input.__setitem__(0, "x:--1"), r"reads op 'x:--1', but the graph has no op"),
        (lambda m: m.graph[0].op[3].input.__setitem__(0, "x:\u00b2"), r"reads op 'x:\u00b2', but the graph has no op"),
        (lambda m: m.graph[0].output.append(""), r"graph 'main' output 2: reference '' is malformed"),
        (lambda m: m.graph[0].output.append("ghost:0"), r"graph 'main' output 2: reads ghost:0, but the graph has no op named 'ghost'"),
        (lambda m: m.graph[0].input.append("x:-1"), r"graph 'main' input 2: reference 'x:-1' is malformed"),
        (lambda m: m.graph[0].input.append("^x"), r"graph 'main' input 2: reference '\^x' is malformed"),
        (lambda m: m.graph[0].op[0].output_desc[0].__setattr__("dtype", 999), r"op 'x' \(Data\) output 0: GE data type unknown value 999"),
        (lambda m: m.graph[0].op[3].attr["eps"].Clear(), r"op 'mm' \(MatMul\) attribute 'eps': the AttrDef has no value set"),
        (lambda m: m.graph[0].op[3].__setattr__("name", "x"), r"two ops are named 'x'"),
        (lambda m: m.graph[0].op[3].__setattr__("name", ""), r"an op of type 'MatMul' has no name"),
        (lambda m: m.graph[0].op[3].__setattr__("type", "a.b"), r"op type 'a.b' must be a non-empty name without '.'"),
        (lambda m: m.graph[0].op[3].input.append("if:-1"), r"its ops form a cycle \(among \['if', 'mm'\]\)"),
        (lambda m: m.graph[0].op[4].subgraph_name.__setitem__(0, "nope"), r"names subgraph 'nope', but the model has no graph"),
        (lambda m: m.graph[0].op[4].subgraph_name.__setitem__(1, "branch"), r"op 'if' \(If\): names subgraph 'branch', which another op"),
        (lambda m: m.graph[2].__setattr__("name", "branch"), r"the model has two graphs named 'branch'"),
        (lambda m: m.graph[1].op.add(name="z", type="If", subgraph_name=["main"]), r"the main graph 'main' is named as a subgraph"),
        (lambda m: m.graph[0].op[4].attr["_subgraph_keys"].list.s.append(b"more"), r"3 body keys for 2 subgraph names"),
        (lambda m: m.graph[0].op[3].attr["_dialect"].__setattr__("i", 1), r"the reserved attribute must hold a string"),
        (lambda m: m.graph[2].attr["_graph_name"].__setattr__("i", 1), r"the reserved attribute must hold a string"),
        (lambda m: m.graph[0].op[2].attr["value"].t.__setattr__("data", b"\x00"), r"op 'w' \(Const\) attribute 'value': tensor data has 1 bytes"),
        (lambda m: m.graph[0].op[2].attr.__delitem__("value"), r"op 'w' \(Const\): cannot rebuild the op in the IR"),
        (lambda m: m.graph[0].op[2].output_desc[0].__setattr__("layout", "XYZ"), r"invalid tensor descriptor"),
    ],
)
def test_bad_models_raise_serde_errors_naming_the_place(edit, message):
    data = _broken(edit).SerializeToString()
    with pytest.raises(SerdeError, match=message):
        from_bytes(data)


def test_subgraph_cycles_outside_the_main_graph_are_reported():
    model = pb.ModelDef()
    model.graph.add(name="main")
    a, b = model.graph.add(name="a"), model.graph.add(name="b")
    a.op.add(name="x", type="While", subgraph_name=["b"])
    b.op.add(name="y", type="While", subgraph_name=["a"])
    with pytest.raises(SerdeError, match=r"has subgraphs \['a', 'b'\] that no reachable op owns"):
        model_from_proto(model)


def test_reserved_names_and_broken_graphs_are_refused_on_write():
    g = _sample()
    g.node("mm").set_attr("_dialect", "x")
    with pytest.raises(SerdeError, match="attribute name '_dialect' is reserved"):
        to_bytes(g)
    g = _sample()
    g.attrs.set_attr("_subgraphs", 1)
    with pytest.raises(SerdeError, match="attribute name '_subgraphs' is reserved"):
        to_bytes(g)
    g = _sample()
    g.nodes.reverse()
    with pytest.raises(SerdeError, match="whose producer is not an earlier op of the graph; run graph.verify"):
        to_bytes(g)
    g = _sample()
    stranger = Graph("other", g.context).add_input("s", None)
    g.outputs.append(stranger)
    with pytest.raises(SerdeError, match="graph 'main' output 2 reads s:0, whose producer is not an earlier op"):
        to_bytes(g)


def test_unknown_attribute_type_on_write_names_the_op():
    g = _sample()
    odd = A.AttrType("odd", lambda x: x)
    g.node("mm").attrs.set_attr("strange", AttrValue(odd, 1))
    with pytest.raises(SerdeError, match=r"graph 'main' op 'mm' \(tf.MatMul\) attribute 'strange': attribute type 'odd' has no serializer"):
        to_bytes(g)


def test_bytes_do_not_depend_on_attribute_insertion_order():
    def build(order):
        ctx = IRContext()
        g = Graph("g", ctx)
        node = g.add_node("tf.Op", [], name="n", allow_unknown=True)
        for key in order:
            node.set_attr(key, {"a": 1, "b": "x", "c": [1.5]}[key])
            g.attrs.set_attr(key, 1)
        return to_bytes(g, attrs={k: 2 for k in order})

    assert build("abc") == build("cba") == build("bac")


def test_written_bytes_are_protobufs_own_serialization_of_the_message():
    """The writer puts the wire bytes together itself: reading them and serializing again gives them back,
    with attribute names protobuf orders unlike plain sorting (a name before the longer names it begins)."""
    ctx = IRContext()
    g = _sample(ctx)
    node = g.add_node("tf.Op", [], name="keys", allow_unknown=True)
    values = {
        "T": D.FLOAT32, "Tshape": D.INT32, "Ts": 1, "TA": "x", "x_": [1, 2], "Z": 0.25, "a" * 130: True,
        "a" * 129: [0.5, -0.0], "é": b"\xff", "éa": [[1, 2], [3]], "t": np.arange(6, dtype=np.int8).reshape(2, 3),
    }  # fmt: skip
    for key, value in values.items():
        node.set_attr(key, value)
    node.set_attr("g", _sample(IRContext()), A.GRAPH)
    profile = g.clone()
    profile.name = "main_profile0"
    for data in (to_bytes(g), to_bytes([g, profile], attrs={"Tshape": 1, "T": 2}, version=3, custom_version="c")):
        assert pb.ModelDef.FromString(data).SerializeToString(deterministic=True) == data
    standalone = graph_to_proto(g)
    assert standalone.attr["_subgraphs"].list.val_type == VT.VT_LIST_GRAPH
    assert set(model_to_proto(g).graph[0].op[-1].attr) == values.keys() | {"g", "_dialect"}
    back = from_bytes(to_bytes(g))
    assert first_difference(g, back) is None


def test_equal_attribute_values_of_other_kinds_or_signs_are_written_apart():
    """The writer reuses the bytes of an equal plain value (same name, same type): 1 and True, or 0.0 and -0.0,
    are not the same value on the wire."""
    g = Graph("g", IRContext())
    for name, value in (("a", 0.0), ("b", -0.0), ("c", 1), ("d", True), ("e", [1, 2]), ("f", [True, False])):
        g.add_node("tf.Op", [], name=name, allow_unknown=True).set_attr("x", value)
    back = _roundtrip(g)
    written = {n.name: n.attrs.get_attr("x") for n in back.nodes}
    assert str(written["a"].value) == "0.0" and str(written["b"].value) == "-0.0"
    assert (written["c"].type_id, written["d"].type_id) == (A.INT, A.BOOL)
    assert (written["e"].type_id, written["f"].type_id) == (A.LIST_INT, A.LIST_BOOL)
