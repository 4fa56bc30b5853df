"""Property tests: random IR graphs survive IR → bytes → IR and IR → text → IR, and corrupt bytes only
ever raise SerdeError."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from scopefusion.errors import SerdeError
from scopefusion.ir_builder import Graph, IRContext, first_difference
from scopefusion.serde import from_bytes, from_text, model_from_bytes, to_bytes, to_text
from scopefusion.serde import ge_ir_pb2 as pb

from ._strategies import graphs


@settings(max_examples=200, deadline=None)
@given(graphs(max_ops=6, max_depth=2), st.lists(graphs(max_ops=2, max_depth=1), max_size=2))
def test_graph_round_trips_through_bytes_into_a_fresh_context(graph, extra):
    data = to_bytes(graph)
    back = from_bytes(data, IRContext())
    assert first_difference(graph, back) is None
    assert to_bytes(back) == data
    assert to_bytes(graph) == data
    # With extra top-level graphs (renamed apart) and model attributes: every graph comes back in order.
    top = [graph] + [g for i, g in enumerate(extra) if g.name not in {graph.name, *(e.name for e in extra[:i])}]
    model = model_from_bytes(to_bytes(top, attrs={"n": len(top)}), IRContext())
    assert [g.name for g in model.graphs] == [g.name for g in top] and model.attrs["n"].value == len(top)
    for a, b in zip(top, model.graphs):
        assert first_difference(a, b) is None


@settings(max_examples=200, deadline=None)
@given(graphs(max_ops=4, max_depth=1))
def test_graph_round_trips_through_text(graph):
    text = to_text(graph)
    back = from_text(text, graph.context)
    assert first_difference(graph, back) is None
    # NOTE: not the same bytes: protobuf text prints every NaN as "nan", dropping its sign and payload.
    assert to_text(back) == text


@st.composite
def corrupted(draw):
    """Bytes of a random model with a few byte-level edits (truncations, flips, insertions, deletions)."""
    data = bytearray(to_bytes(draw(graphs(max_ops=4, max_depth=1))))
    for _ in range(draw(st.integers(1, 3))):
        kind = draw(st.sampled_from(["truncate", "flip", "insert", "delete"]))
        at = draw(st.integers(0, max(len(data) - 1, 0)))
        if kind == "truncate":
            del data[at:]
        elif kind == "flip" and data:
            data[at] ^= draw(st.integers(1, 255))
        elif kind == "insert":
            data[at:at] = draw(st.binary(min_size=1, max_size=4))
        elif data:
            del data[at : at + draw(st.integers(1, 8))]
    return bytes(data)


INTERESTING_INTS = [-3, -2, -1, 0, 1, 2, 3, 7, 20, 27, 41, 999, 2**31, 2**40]
INTERESTING_TEXT = ["", ":", "^", "x:0", "x:-1", "in0:0", "in0", "^in0", "main", "body", "body_1", "ND", "NCHW", "Q", "a.b", "x:--1", "in0:\u00b2", "in0:+1"]


def _fields(message, out):
    """Every (message, field descriptor) that is set, depth first."""
    for field, value in message.ListFields():
        out.append((message, field))
        if field.message_type is None:
            continue
        if field.message_type.GetOptions().map_entry:
            for key in value:
                if field.message_type.fields_by_name["value"].message_type is not None:
                    _fields(value[key], out)
        elif field.is_repeated:
            for item in value:
                _fields(item, out)
        else:
            _fields(value, out)
    return out


@st.composite
def edited_models(draw):
    """A random model with a few field-level edits that keep the protobuf valid: semantic corruption."""
    model = pb.ModelDef.FromString(to_bytes(draw(graphs(max_ops=4, max_depth=1))))
    for _ in range(draw(st.integers(1, 3))):
        candidates = _fields(model, [])
        if not candidates:
            break
        message, field = draw(st.sampled_from(candidates))
        value = getattr(message, field.name)
        if field.is_repeated and not (field.message_type and field.message_type.GetOptions().map_entry):
            if len(value) and draw(st.booleans()):
                del value[draw(st.integers(0, len(value) - 1))]
                continue
            if field.message_type is None:
                value.append(_scalar(draw, field))
            else:
                value.add()
        elif field.message_type is not None and field.message_type.GetOptions().map_entry:
            keys = sorted(value)
            if keys:
                del value[draw(st.sampled_from(keys))]
        elif field.message_type is not None:
            value.Clear()
        else:
            setattr(message, field.name, _scalar(draw, field))
    return model.SerializeToString()


def _scalar(draw, field):
    kind = field.type
    if kind in (field.TYPE_STRING,):
        return draw(st.sampled_from(INTERESTING_TEXT) | st.text(max_size=4))
    if kind == field.TYPE_BYTES:
        return draw(st.binary(max_size=20))
    if kind == field.TYPE_BOOL:
        return draw(st.booleans())
    if kind == field.TYPE_FLOAT:
        return draw(st.floats(width=32))
    if kind == field.TYPE_UINT32:
        return draw(st.integers(0, 2**32 - 1))
    if kind == field.TYPE_ENUM:
        return draw(st.sampled_from([0, 1, 13, 23, 27, 99, 999]))
    return draw(st.sampled_from(INTERESTING_INTS))


def _only_serde_errors(data: bytes) -> None:
    try:
        result = from_bytes(data)
    except SerdeError as e:
        message = str(e)
        assert message and "\n" not in message
    else:
        assert isinstance(result, Graph)


@settings(max_examples=200, deadline=None)
@given(corrupted())
def test_corrupt_bytes_give_a_graph_or_a_serde_error_never_another_exception(data):
    _only_serde_errors(data)


@settings(max_examples=200, deadline=None)
@given(edited_models())
def test_edited_models_give_a_graph_or_a_serde_error_never_another_exception(data):
    _only_serde_errors(data)
