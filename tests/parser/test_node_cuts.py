"""A large node's tensor contents cut directly give what the generic wire walk gives, or are left to it."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings

from scopefusion.parser import tf_graphdef as tg_def
from scopefusion.parser.node_cuts import cut_node
from scopefusion.parser.wire import WireError, iter_fields, strip

from .test_fuzz import mutate, mutation
from .test_graph_def_decoder import _field, _node

_NODE_SPEC = tg_def._FIELD_SPECS[1]


def generic(data: bytes, start: int, end: int, threshold: int):
    """``(stripped node, views by attribute name or None)`` as wire.strip and the views of its cuts give them."""
    stripped, cuts = strip(data, start, end, _NODE_SPEC, threshold)
    if not cuts:
        return stripped, None
    return stripped, tg_def._views_by_node(data, cuts, "g.pb", ((1, 0),))[0].get(0)


def check_node(data: bytes, start: int, end: int, threshold: int) -> bool:
    """Asserts that cut_node gives the generic answer or None (always None where the generic walk fails);
    returns whether it gave one."""
    found = cut_node(data, start, end, threshold, data)
    try:
        expected = generic(data, start, end, threshold)
    except Exception:  # noqa: BLE001 (the generic walk refuses the bytes: so must the direct one)
        assert found is None
        return False
    if found is not None:
        assert found == expected
    return found is not None


def large_nodes(data: bytes, threshold: int) -> list[tuple[int, int]]:
    return [(payload, end) for number, _, _, payload, end in iter_fields(data, 0, len(data))
            if number == 1 and end - payload >= threshold]


@pytest.mark.parametrize("fixture", ["tf_mobilenet_pb", "tf_bert_pb"])
@pytest.mark.parametrize("threshold", [1024, 64])
def test_real_models_large_nodes_are_cut_directly_as_the_generic_walk_cuts_them(fixture, threshold, request):
    data = request.getfixturevalue(fixture).read_bytes()
    spans = large_nodes(data, threshold)
    assert spans
    cut = [check_node(data, start, end, threshold) for start, end in spans]
    assert sum(cut) >= 0.9 * len(cut)  # nearly all of them: constants of the common layout


def _const(content: bytes, *extra: bytes) -> bytes:
    tensor = _field(1, 0, b"\x01") + _field(2, 2, _field(2, 2, _field(1, 0, bytes([len(content) // 4])))) + _field(4, 2, content)
    return _node(_field(1, 2, b"c"), _field(2, 2, b"Const"), _field(5, 2, _field(1, 2, b"value") + _field(2, 2, _field(8, 2, tensor + b"".join(extra)))))


@pytest.mark.parametrize("data, cut", [
    (_const(bytes(400)), True),
    (_const(bytes(40)), True),  # too short to be cut: copied, as strip copies it
    (_const(bytes(400), _field(4, 2, bytes(400))), False),  # two contents: left to strip (which refuses them)
    (_const(bytes(400), _field(5, 5, bytes(4))), False),  # a fixed-width field: left to strip
    (_node(_field(1, 2, b"n" * 200), _field(2, 2, b"Op")), True),  # large, but nothing to cut: copied whole
    (_node(_field(1, 2, b"n"), _field(5, 2, _field(1, 2, b"s") + _field(2, 2, _field(2, 2, b"x" * 200)))), False),  # a large string
])
def test_nodes_cut_directly_or_left_to_the_generic_walk(data, cut):
    (start, end), = large_nodes(data, 0)
    assert check_node(data, start, end, 100) == cut


@settings(max_examples=300, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(change=mutation)
def test_mutated_nodes_are_cut_as_the_generic_walk_cuts_them_or_left_to_it(change):
    data = mutate(_SEED, *change)
    try:
        spans = large_nodes(data, 100)
    except WireError:
        spans = [(2, len(data))]
    for start, end in spans:
        check_node(data, start, min(end, len(data)), 100)


_SEED = _const(bytes(range(200)) * 2)
