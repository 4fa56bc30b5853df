"""Frontends: model files on disk into a :class:`SourceGraph`."""

from __future__ import annotations

from .source_graph import GraphInput, GraphOutput, SourceGraph, SourceNode

__all__ = ["GraphInput", "GraphOutput", "SourceGraph", "SourceNode"]
