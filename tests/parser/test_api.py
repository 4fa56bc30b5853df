"""The parser's public API, locked."""

from __future__ import annotations

import scopefusion.parser as parser


def test_public_names():
    assert sorted(parser.__all__) == sorted([
        "ABSENT_INPUT", "AttrPlaceholder", "CONTROL_SLOT", "FORMATS", "ForeignDType", "FunctionRef", "GraphInput",
        "GraphOutput", "INITIALIZER_OP", "INPUT_OP", "OUTER_SCOPE_OP", "SourceGraph", "SourceNode", "load",
    ])
    for name in parser.__all__:
        assert getattr(parser, name) is not None
    assert parser.FORMATS == ("savedmodel", "pb", "pbtxt", "onnx")
    assert parser.ABSENT_INPUT == ("", -1)


def test_load_signature():
    import inspect

    params = inspect.signature(parser.load).parameters
    assert list(params) == ["path", "format", "signature", "tags", "outputs", "inline_functions", "lower_control_flow",
                            "savedmodel_loader", "progress"]
    assert all(p.kind is p.KEYWORD_ONLY for name, p in params.items() if name != "path")
