"""The one-pass node decoder gives the nodes the two-step decoding gives, or leaves the bytes to it."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings

from scopefusion.errors import ModelLoadError, ParseError
from scopefusion.parser import load
from scopefusion.parser import tf_graphdef as tg_def
from scopefusion.parser.proto import tf_framework_pb2 as tfpb
from scopefusion.parser.source_graph import NO_INPUTS
from scopefusion.parser.tf_node_decoder import decode_graph_def_nodes
from scopefusion.parser.tf_nodes import decode_node_def

from .test_fuzz import mutate, mutation
from .test_graph_def_decoder import NAME, SEED, _attr, _field, _node

_FIELDS = ("name", "op_type", "inputs", "control_inputs", "domain", "frame", "output_names", "device", "synthetic",
           "subgraphs")


def same_value(a, b) -> bool:
    """Equal decoded attribute values: of one type, arrays of one dtype, shape, strides, content and writability."""
    if isinstance(a, np.ndarray):
        return (isinstance(b, np.ndarray) and a.dtype == b.dtype and a.shape == b.shape and a.strides == b.strides
                and a.flags.writeable == b.flags.writeable and np.array_equal(a, b, equal_nan=a.dtype.kind in "fc"))
    if isinstance(a, tuple):
        return type(b) is tuple and len(a) == len(b) and all(same_value(x, y) for x, y in zip(a, b))
    return type(a) is type(b) and a == b


def two_step(small: bytes, buffer: bytes, cuts: list, where: str = "g.pb"):
    """``(GraphDef, nodes)`` as decode_graph_def (or protobuf) and decode_node_def make them, or their error."""
    graph_def, views, _ = tg_def._decode_stripped(buffer, small, cuts, where)
    return graph_def, [decode_node_def(nd, where, views.get(i)) for i, nd in enumerate(graph_def.node)]


def check_same_nodes(buffer: bytes, threshold: int = 1024) -> bool:
    """Asserts that the one-pass decoder gives the two-step nodes or None (always None where the two steps
    fail), and that decoding the unstripped bytes in one walk gives what it gives; returns whether it decoded
    the bytes. Bytes that the steps before (stripping the large tensors, finding their nodes) refuse never
    reach either."""
    try:
        small, cuts = tg_def._strip_graph_def(buffer, "g.pb", threshold, None)
        views, function_views = tg_def._views_by_node(buffer, cuts, "g.pb")
    except ModelLoadError:
        return False
    found = decode_graph_def_nodes(small, views)
    walked, walked_function_views = tg_def._decode_unstripped(buffer, buffer, "g.pb", threshold)
    assert (walked is None) == (found is None)
    if found is not None:
        assert_same_graph(found, walked)
        assert walked_function_views == function_views
    try:
        graph_def, expected = two_step(small, buffer, cuts)
    except Exception:  # noqa: BLE001 (the two steps refuse the bytes: so must the one pass)
        assert found is None
        return False
    if found is None:
        return False
    assert_same_graph((graph_def, expected), found)
    return True


def assert_same_graph(expected, found) -> None:
    """``(GraphDef, nodes)`` pairs with the same nodes, library and versions."""
    graph_def, expected_nodes = expected
    rest, nodes = found
    assert len(nodes) == len(expected_nodes)
    for a, b in zip(expected_nodes, nodes):
        assert [getattr(a, f) for f in _FIELDS] == [getattr(b, f) for f in _FIELDS]
        assert list(a.attrs) == list(b.attrs)
        assert all(same_value(a.attrs[k], b.attrs[k]) for k in a.attrs), a.name
        assert (a.value is None and b.value is None) or same_value(a.value, b.value)
    assert rest.library.SerializeToString() == graph_def.library.SerializeToString()
    assert rest.HasField("versions") == graph_def.HasField("versions")
    assert rest.versions.producer == graph_def.versions.producer


def one_pass(buffer: bytes):
    small, cuts = tg_def._strip_graph_def(buffer, "g.pb", 1024, None)
    return decode_graph_def_nodes(small, tg_def._views_by_node(buffer, cuts, "g.pb")[0])


@pytest.mark.parametrize("fixture", ["tf_bert_pb", "tf_mobilenet_pb", "tf_rnn_pb", "tf1_cond_pb", "tf2_control_flow_pb",
                                     "tf2_calls_pb"])
def test_real_models_decode_in_one_pass_to_the_same_nodes(fixture, request):
    data = request.getfixturevalue(fixture).read_bytes()
    assert check_same_nodes(data)
    assert check_same_nodes(data, threshold=64)  # many more nodes and function bodies stripped in the one walk


def test_nodes_ending_in_the_same_attributes_share_one_dict(tf_mobilenet_pb):
    data = tf_mobilenet_pb.read_bytes()
    graph_def, nodes = one_pass(data)
    small, cuts = tg_def._strip_graph_def(data, "g.pb", 1024, None)
    _, expected = two_step(small, data, cuts)
    assert all(a.attrs == b.attrs for a, b in zip(expected, nodes) if a.value is None)  # constants: see check_same_nodes
    identities = [n for n in nodes if n.op_type == "Identity"]
    shared = {id(n.attrs) for n in identities}
    assert len(identities) > 10 and len(shared) < len(identities) / 10
    assert len({id(n.attrs) for n in nodes if n.op_type == "Const"}) == len([n for n in nodes if n.op_type == "Const"])


def _tensor(dtype: int, shape: list[int], **fields) -> tfpb.TensorProto:
    tensor = tfpb.TensorProto(dtype=dtype, **fields)
    for size in shape:
        tensor.tensor_shape.dim.add(size=size)
    return tensor


@pytest.mark.parametrize("tensor", [
    _tensor(tfpb.DT_FLOAT, [10, 15], tensor_content=np.arange(150, dtype=np.float32).tobytes()),
    _tensor(tfpb.DT_INT8, [700], tensor_content=bytes(range(100)) * 7),
    _tensor(tfpb.DT_FLOAT, [2, 75], tensor_content=bytes(600), float_val=[1.5]),  # the content is read
    _tensor(tfpb.DT_STRING, [3], tensor_content=b"\xc8\x01\xc8\x01\xc8\x01" + b"s" * 600),
    _tensor(tfpb.DT_FLOAT, [150], float_val=list(range(150))),  # no content: the entry is decoded whole
    _tensor(tfpb.DT_STRING, [2], tensor_content=b"\xff\x7f" + b"s" * 600),  # strings longer than it: refused
])
def test_constants_of_a_few_hundred_values_decode_in_one_pass(tensor):
    """A tensor entry too long for the shared entry table is read as its content and the rest of the entry."""
    from . import tf_graph_util as tg

    graph = tfpb.GraphDef(node=[tg.node("c", "Const", dtype=tfpb.AttrValue(type=tensor.dtype),
                                        value=tfpb.AttrValue(tensor=tensor))])
    data = graph.SerializeToString()
    assert 512 < len(data) < 1024 + 64
    if tensor.tensor_content.startswith(b"\xff"):
        assert one_pass(data) is None and not check_same_nodes(data)
        return
    assert check_same_nodes(data)
    assert not one_pass(data)[1][0].value.flags.writeable


def _loadable(data: bytes, debug_info: bool = False) -> bytes:
    """The decoder tests' graph of every kind of field, its int tensor given the shape its values need (and
    without the debug info of its first node, unless ``debug_info``)."""
    graph = tfpb.GraphDef.FromString(data)
    for node in graph.node:
        if not debug_info:
            node.ClearField("experimental_debug_info")
        if node.name == "y":
            node.attr["values"].tensor.tensor_shape.dim.add().size = 3
    return graph.SerializeToString()


def test_a_graph_of_every_kind_of_attribute_decodes_in_one_pass():
    assert check_same_nodes(_loadable(SEED))
    assert not check_same_nodes(_loadable(SEED, debug_info=True))  # a node's debug info: the two steps decode it
    assert not check_same_nodes(SEED)  # a tensor of more values than its shape holds: the two steps refuse it


@pytest.mark.parametrize("data", [
    _node(NAME, _field(99, 0, b"\x05"), _field(98, 5, b"abcd"), _field(97, 1, b"12345678"), _field(96, 2, b"xyz")),
    _node(NAME, _field(7, 2, b"\x08\x01")),  # experimental_type, which the schema leaves out
    _node(NAME, _field(1, 2, b"second name")),  # a scalar given twice: the last one counts
    _node(NAME, _attr("s", _field(2, 2, b"\xff\xfe"))),  # bytes need not be UTF-8
    _node(NAME, _attr("b", _field(5, 0, b"\x01")), _attr("a", _field(3, 0, b"\x07"))),  # names out of order
    _node(NAME, _field(3, 2, b"x:1"), _field(3, 2, b"^c"), _field(3, 2, b"y:z")),  # inputs of every form
    # Layouts the common-case reading of name, op type, inputs and first attribute stops at (the loop goes on):
    _node(NAME),  # nothing but a name and an op type
    _node(_field(1, 2, b"n" * 200), _field(2, 2, b"O" * 130), _field(3, 2, b"i" * 140), _field(3, 2, b"x")),  # long
    _node(NAME, _field(3, 2, b""), _field(3, 2, b"x")),  # an empty input, then another
    _node(NAME, _field(3, 2, b"^c"), _field(3, 2, b"x:0")),  # a control input first
    _node(NAME, _attr("a", _field(3, 0, b"\x01")), _field(3, 2, b"x")),  # an input after an attribute
    _node(NAME, _field(4, 2, b"/cpu:0"), _attr("a", _field(3, 0, b"\x01"))),  # a device before the attributes
    _node(_field(2, 2, b"Op"), _field(1, 2, b"n"), _field(3, 2, b"x")),  # the op type first
])
def test_unusual_but_valid_nodes_decode_in_one_pass(data):
    assert check_same_nodes(data)


@pytest.mark.parametrize("data", [
    _node(NAME, _attr("a", _field(3, 0, b"\x01")), _attr("a", _field(3, 0, b"\x02"))),  # a key given twice
    _node(NAME, _field(1, 2, b"\xff")),  # a name that is not UTF-8
    _node(NAME, _field(0, 0, b"\x01")),  # field number 0
    _node(NAME, _field(50, 3, b"") + _field(50, 4, b"")),  # a group
    _node(NAME, _field(3, 2, b"abc")[:-1]),  # truncated
    _node(NAME, b"\x1a") + _node(_field(1, 2, b"m"), _field(2, 2, b"Op")),  # a field's tag ends the node
    _node(NAME, b"\x1a"),  # ... and the GraphDef
    _node(_field(2, 2, b"Op")),  # no name: decode_node_def's error
    _node(_field(1, 2, b"c"), _field(2, 2, b"Const")),  # a constant without a tensor: decode_node_def's error
    _node(NAME, _attr("t", _field(8, 2, _field(1, 0, b"\x63")))),  # a tensor of no known dtype: decode_node_def's error
])
def test_nodes_left_to_the_two_steps(data):
    assert one_pass(data) is None
    check_same_nodes(data)


def test_a_node_without_a_name_is_refused_as_before(tmp_path):
    path = tmp_path / "g.pb"
    path.write_bytes(_node(_field(2, 2, b"Op")))
    with pytest.raises(ParseError, match="has an empty name"):
        load(path)


@settings(max_examples=400, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(change=mutation)
def test_mutated_bytes_decode_to_the_same_nodes_or_go_to_the_two_steps(change):
    check_same_nodes(mutate(_LOADABLE_SEED, *change))


_LOADABLE_SEED = _loadable(SEED)


def test_nodes_without_inputs_share_one_unchangeable_empty_list(tf_mobilenet_pb):
    graph = load(tf_mobilenet_pb)
    assert all(n.control_inputs is NO_INPUTS for n in graph.nodes if not n.control_inputs)
    assert all(n.inputs is NO_INPUTS for n in graph.nodes if not n.inputs)
    assert NO_INPUTS == [] and list(NO_INPUTS) == []
    with pytest.raises(TypeError, match="assign a new list"):
        graph.nodes[0].control_inputs.append("x")
    with pytest.raises(TypeError):
        graph.nodes[0].control_inputs += ["x"]
    assert NO_INPUTS == []
    # function bodies fill their nodes' lists: each node its own
    graph_def = tfpb.GraphDef.FromString(_loadable(SEED))
    body = decode_node_def(graph_def.node[0], "g.pb", resolve_inputs=False)
    body.control_inputs.append("c")
    assert body.control_inputs == ["c"] and NO_INPUTS == []
