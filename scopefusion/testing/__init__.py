"""Helpers for tests that compare fused IR graphs.

* :func:`assert_graphs_equal` / :func:`graph_diff`: structural equality of two IR graphs (names ignored
  unless asked, constants within a tolerance), the difference as text (smallest first) or as data
  (:class:`GraphDiff`). How nodes are paired: :mod:`scopefusion.testing.matching`.
* :func:`op_counts`, :func:`fusion_counts`: what a graph or a converted model holds.
* :func:`assert_matches_golden`, :func:`read_golden`, :func:`write_golden`: golden files of graphs
  (:mod:`scopefusion.testing.golden` says what they hold).

The pytest plugin (:mod:`scopefusion.pytest_plugin`, installed through the ``pytest11`` entry point)
adds the ``convert_model`` and ``assert_matches_golden`` fixtures and the ``--scopefusion-update-golden``
option.
"""

from __future__ import annotations

from .assertions import assert_graphs_equal, fusion_counts, graph_diff, op_counts
from .diff import AttrDifference, GraphDiff, NodeRef, TypeDifference, UnmatchedNode
from .golden import assert_matches_golden, golden_text, read_golden, write_golden
from .values import NAME_ATTRS

__all__ = [
    "AttrDifference",
    "GraphDiff",
    "NAME_ATTRS",
    "NodeRef",
    "TypeDifference",
    "UnmatchedNode",
    "assert_graphs_equal",
    "assert_matches_golden",
    "fusion_counts",
    "golden_text",
    "graph_diff",
    "op_counts",
    "read_golden",
    "write_golden",
]
