"""Frontends: model files on disk into a :class:`SourceGraph`.

``load(path, **options)`` reads a SavedModel directory, a frozen GraphDef (``.pb``), a text GraphDef
(``.pbtxt``) or an ONNX model (``.onnx``); see :mod:`.loader`. None of them imports TensorFlow, except a
SavedModel loaded with ``savedmodel_loader="tensorflow"``.
"""

from __future__ import annotations

from .loader import FORMATS, load
from .source_graph import (
    ABSENT_INPUT,
    CONTROL_SLOT,
    INITIALIZER_OP,
    INPUT_OP,
    OUTER_SCOPE_OP,
    FunctionRef,
    GraphInput,
    GraphOutput,
    SourceGraph,
    SourceNode,
)
from .values import AttrPlaceholder, ForeignDType

__all__ = [
    "ABSENT_INPUT",
    "AttrPlaceholder",
    "CONTROL_SLOT",
    "FORMATS",
    "ForeignDType",
    "FunctionRef",
    "GraphInput",
    "GraphOutput",
    "INITIALIZER_OP",
    "INPUT_OP",
    "OUTER_SCOPE_OP",
    "SourceGraph",
    "SourceNode",
    "load",
]
