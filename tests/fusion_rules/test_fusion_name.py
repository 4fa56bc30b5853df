"""``fusion_name`` tells most fusions are named after their output without finding the claimed nodes' scopes
(the output's scope alone holds more nodes than are claimed): on real graphs it gives what finding them gives."""

from __future__ import annotations

import pytest

from scopefusion.convert import convert
from scopefusion.errors import FusionError
from scopefusion.fusion_rules.base import anchored
from scopefusion.parser import load
from scopefusion.scope import ScopeGraph

MODELS = ["tf_convnet_pb", "tf_mobilenet_pb", "tf_bert_pb"]


def _name_from_common_scope(graph, claimed, output):
    """The innermost scope holding every claimed node, when the fusion replaces all of it, else the output."""
    claimed = set(claimed)
    tree = graph.tree
    common = tree.scope_of(output)
    scopes = [tree.scope_of(n) for n in claimed]
    while not common.is_root and not all(common.contains(s) for s in scopes):
        common = common.parent
    if common.is_root or sum(common.op_counts.values()) != len(claimed):
        return output
    name = common.name.rstrip("/")
    return name if graph.get(name) is None or name in claimed else output


@pytest.mark.parametrize("fixture", MODELS)
def test_fusion_name_is_the_common_scope_rule(fixture, request, monkeypatch):
    real = anchored.fusion_name
    seen = []

    def named(graph, claimed, output):
        claimed = list(claimed)
        found = real(graph, claimed, output)
        assert found == _name_from_common_scope(graph, claimed, output)
        seen.append(found)
        return found

    monkeypatch.setattr(anchored, "fusion_name", named)
    convert(request.getfixturevalue(fixture))
    graph = ScopeGraph.build(load(request.getfixturevalue(fixture)))
    for scope in graph.tree:  # every scope's nodes, and every scope's nodes but one, named from each node
        nodes = [n.name for n in scope.all_nodes]
        for claimed in (nodes, nodes[1:]):
            for output in claimed[:3]:
                assert real(graph, claimed, output) == _name_from_common_scope(graph, claimed, output)


def test_fusion_name_refuses_a_node_that_is_not_in_the_graph(tf_convnet_pb):
    graph = ScopeGraph.build(load(tf_convnet_pb))
    output = graph.source.nodes[-1].name
    with pytest.raises(FusionError):
        anchored.fusion_name(graph, [output, "no/such/node"], output)
