"""TF function library: function bodies as subgraphs, body tensor names resolved, calls inlined."""

from __future__ import annotations

import numpy as np
import pytest

from scopefusion import dtypes
from scopefusion.errors import ParseError
from scopefusion.parser import INPUT_OP, AttrPlaceholder, SourceGraph, load
from scopefusion.parser.proto import tf_framework_pb2 as tfpb

from . import tf_graph_util as tg


def test_functional_control_flow_nodes_keep_their_bodies_as_subgraphs(tf2_control_flow_pb):
    graph = load(tf2_control_flow_pb)
    ops = graph.op_types()
    assert ops["StatelessWhile"] == 1 and ops["StatelessIf"] == 1 and ops["StatelessCase"] == 1
    loop = graph.node("loop/while")
    assert sorted(loop.subgraphs) == ["body", "cond"]
    assert loop.subgraphs["body"] is graph.functions[loop.attrs["body"].name]
    body = loop.subgraphs["body"]
    assert isinstance(body, SourceGraph) and body.framework == "tensorflow"
    assert [n.op_type for n in body.nodes[: len(body.inputs)]] == [INPUT_OP] * len(body.inputs)
    assert all(n.synthetic for n in body if n.op_type == INPUT_OP)
    assert len(body.outputs) == len(loop.attrs["T"]) == len(loop.output_names)
    nested_if = next(n for n in body if n.op_type == "StatelessIf")
    assert sorted(nested_if.subgraphs) == ["else_branch", "then_branch"]
    assert nested_if.name == "loop/while/step/cond"
    case = graph.node("branch/switch_case/indexed_case")
    assert sorted(case.subgraphs) == ["branches:0", "branches:1", "branches:2"]
    assert [g.name for g in (case.subgraphs[f"branches:{i}"] for i in range(3))] == [r.name for r in case.attrs["branches"]]
    branch = graph.node("branch/cond")
    assert branch.subgraphs["then_branch"].outputs[0].node == "branch/cond/Identity"


@pytest.mark.parametrize("fixture", ["tf2_control_flow_pb", "tf2_calls_pb"])
def test_body_tensor_names_resolve_as_tensorflow_resolves_them(fixture, request):
    import tensorflow as tf
    from tensorflow.python.framework.function_def_to_graph import function_def_to_graph_def

    path = request.getfixturevalue(fixture)
    graph = load(path, inline_functions=False)
    graph_def = tf.compat.v1.GraphDef.FromString(path.read_bytes())
    library = graph_def.library
    assert len(library.function) == len(graph.functions) > 1
    # Nested calls resolve through the default graph's function library: register this model's own
    # library there, so the result does not depend on what earlier tests left in TensorFlow's state.
    scratch = tf.Graph()
    with scratch.as_default():
        tf.graph_util.import_graph_def(graph_def, name="")
        flat = {fdef.signature.name: function_def_to_graph_def(fdef)[1] for fdef in library.function}
    checked = 0
    for fdef in library.function:
        flat_names = flat[fdef.signature.name]
        body = graph.functions[fdef.signature.name]
        for nd in fdef.node_def:
            ours = body.node(nd.name)
            data = [i for i in nd.input if not i.startswith("^")]
            assert len(ours.inputs) == len(data)
            for text, (producer, index) in zip(data, ours.inputs):
                expected = flat_names.get(text, text)
                expected = expected if ":" in expected else f"{expected}:0"
                assert f"{producer}:{index}" == expected, (fdef.signature.name, nd.name, text)
                checked += 1
        for out in body.outputs:
            expected = flat_names.get(fdef.ret[out.name], fdef.ret[out.name])
            assert f"{out.node}:{out.index}" == (expected if ":" in expected else f"{expected}:0")
    assert checked > 10


def test_calls_are_inlined_under_the_call_node_name(tf2_calls_pb):
    graph = load(tf2_calls_pb)
    ops = graph.op_types()
    assert "PartitionedCall" not in ops and "StatefulPartitionedCall" not in ops
    assert "block/PartitionedCall/PartitionedCall/inner_scope/Relu" in graph
    assert graph.node("block/PartitionedCall/joined").inputs == [
        ("block/PartitionedCall/PartitionedCall/Identity", 0),
        ("block/PartitionedCall/PartitionedCall/Identity_1", 0),
        ("block/PartitionedCall/joined/axis", 0),
    ]
    assert graph.node("block/PartitionedCall/PartitionedCall/inner_scope/mul").inputs[0] == ("x", 0)
    assert graph.node("Sum").inputs[0] == ("block/PartitionedCall/Identity", 0)
    not_inlined = load(tf2_calls_pb, inline_functions=False)
    call = not_inlined.node("block/PartitionedCall")
    assert call.subgraphs["f"] is not_inlined.functions[call.attrs["f"].name]


@pytest.mark.parametrize("fixture, feeds", [
    ("tf2_calls_pb", {"x": np.array([1.0, -2.0, 3.0, 0.5], np.float32)}),
    ("tf_rnn_pb", {"x": np.linspace(-1, 1, 30, dtype=np.float32).reshape(2, 5, 3)}),
])
def test_the_inlined_graph_computes_what_the_original_computes(fixture, feeds, request):
    import tensorflow as tf

    path = request.getfixturevalue(fixture)
    graph = load(path)
    fetches = [f"{o.node}:{o.index}" for o in graph.outputs]
    expected = tg.run_tf(tf.compat.v1.GraphDef.FromString(path.read_bytes()), feeds, fetches)
    actual = tg.run_tf(tg.to_tf_graph_def(graph), feeds, fetches)
    for a, e in zip(actual, expected):
        np.testing.assert_allclose(a, e, rtol=1e-6)


def test_placeholders_in_a_polymorphic_body_take_the_call_attributes(tmp_path):
    body = tg.function(
        "Scale", ["a"], {"out": "mul:z:0"},
        [tg.const("two", 2.0), tg.node("mul", "Mul", ["a", "two:output:0"], T=tg.placeholder_attr("T"))],
    )
    path = tg.write(tmp_path / "poly.pb", [
        tg.node("x", "Placeholder", dtype=tg.type_attr()),
        tg.node("call", "PartitionedCall", ["x"], f=tg.func_attr("Scale", T=tg.type_attr(tfpb.DT_HALF))),
        tg.node("y", "Identity", ["call"]),
    ], [body])
    graph = load(path)
    assert graph.node("call/mul").attrs["T"] is dtypes.FLOAT16
    assert graph.node("call/mul").inputs == [("x", 0), ("call/two", 0)]
    assert graph.node("y").inputs == [("call/mul", 0)]
    assert graph.functions["Scale"].node("mul").attrs["T"] == AttrPlaceholder("T")


def test_a_direct_call_and_a_control_dependency_on_a_call(tmp_path):
    body = tg.function("Double", ["a"], {"out": "add:z:0"}, [tg.node("add", "AddV2", ["a", "a"], T=tg.type_attr())])
    path = tg.write(tmp_path / "direct.pb", [
        tg.node("x", "Placeholder", dtype=tg.type_attr()),
        tg.node("d", "Double", ["x"]),
        tg.node("after", "Identity", ["x", "^d"], T=tg.type_attr()),
        tg.node("y", "Identity", ["d:0"], T=tg.type_attr()),
    ], [body])
    graph = load(path)
    assert graph.node("y").inputs == [("d/add", 0)]
    waiter = graph.node("d")
    assert (waiter.op_type, waiter.control_inputs, waiter.synthetic) == ("NoOp", ["d/add"], True)
    assert graph.node("after").control_inputs == ["d"]


def test_a_pass_through_output_forwards_the_call_input(tmp_path):
    body = tg.function("Id", ["a"], {"out": "a"}, [])
    path = tg.write(tmp_path / "pass.pb", [
        tg.node("x", "Placeholder", dtype=tg.type_attr()),
        tg.node("c1", "PartitionedCall", ["x"], f=tg.func_attr("Id")),
        tg.node("c2", "PartitionedCall", ["c1"], f=tg.func_attr("Id")),
        tg.node("y", "Identity", ["c2"], T=tg.type_attr()),
    ], [body])
    graph = load(path)
    assert graph.node("y").inputs == [("x", 0)]
    assert [n.name for n in graph] == ["x", "y"]


def test_an_op_the_table_does_not_know_reads_through_one_output_argument(tmp_path):
    body = tg.function("F", ["a"], {"out": "custom:result:1"}, [tg.node("custom", "MyCustomOp", ["a"])])
    path = tg.write(tmp_path / "custom.pb", [
        tg.node("x", "Placeholder", dtype=tg.type_attr()),
        tg.node("c", "PartitionedCall", ["x"], f=tg.func_attr("F")),
        tg.node("y", "Identity", ["c"], T=tg.type_attr()),
    ], [body])
    graph = load(path)
    assert graph.node("y").inputs == [("c/custom", 1)]
    assert graph.node("c/custom").output_names == ["c/custom:0", "c/custom:1"]


@pytest.mark.parametrize("case, message", [
    ("ambiguous", "which the op signature table does not know"),
    ("recursive", "calls itself"),
    ("missing_ret", "has no return value"),
    ("bad_arg", "holds 1 tensors, not 2"),
    ("arity", "passes 2 inputs to function"),
    ("no_producer", "the body has no node 'nothing'"),
])
def test_invalid_function_bodies_raise_parse_error_naming_the_function(case, message, tmp_path):
    bodies = {
        "ambiguous": tg.function("F", ["a"], {"out": "custom:one:0"}, [
            tg.node("custom", "MyCustomOp", ["a"]), tg.node("use", "AddV2", ["custom:one:0", "custom:two:0"])]),
        "recursive": tg.function("F", ["a"], {"out": "again:output:0"}, [
            tg.node("again", "PartitionedCall", ["a"], f=tg.func_attr("F"))]),
        "missing_ret": tg.function("F", ["a"], {}, []),
        "bad_arg": tg.function("F", ["a"], {"out": "r:activations:1"}, [tg.node("r", "Relu", ["a"], T=tg.type_attr())]),
        "arity": tg.function("F", ["a"], {"out": "a"}, []),
        "no_producer": tg.function("F", ["a"], {"out": "nothing:y:0"}, []),
    }
    fdef = bodies[case]
    if case == "missing_ret":
        fdef.signature.output_arg.add(name="out", type=tfpb.DT_FLOAT)
    inputs = ["x", "x"] if case == "arity" else ["x"]
    path = tg.write(tmp_path / "bad.pb", [
        tg.node("x", "Placeholder", dtype=tg.type_attr()),
        tg.node("c", "PartitionedCall", inputs, f=tg.func_attr("F")),
    ], [fdef])
    with pytest.raises(ParseError, match=message) as info:
        load(path)
    assert str(path) in str(info.value) and ("'F'" in str(info.value) or "'c'" in str(info.value))
