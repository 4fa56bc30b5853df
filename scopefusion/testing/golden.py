"""Golden files of IR graphs: written in a parseable stable text form, compared structurally.

NOTE: what a golden file holds. The readable printed form (:func:`~scopefusion.ir.printer.format_graph`)
has no parser, and comparing printed text would make every rename or reordering a failure. So a golden
file holds the graph as a GE ``ModelDef`` in protobuf text, one op per line, each weight summarised as
its dtype, shape and a content hash (:mod:`scopefusion.testing.golden_format`; ``keep_weights=True``
keeps the bytes), preceded by the printed form as ``#`` comment lines for reviewers (protobuf text
format skips comments). A check reads the file back and compares it with
:func:`~scopefusion.testing.graph_diff`, the graph's weights summarised the same way; it never compares
text. A changed weight is then a difference of that weight's ``sha256``. Updating writes the file only
when its text would change.
"""

from __future__ import annotations

from os import PathLike
from pathlib import Path
from typing import Any, Iterable

from ..errors import SerdeError
from ..files import write_atomic
from ..ir.graph import Graph
from .assertions import as_graph, graph_diff
from .golden_format import golden_model, has_summaries, parse_golden, summarise_weights, to_golden_text

__all__ = ["UPDATE_OPTION", "assert_matches_golden", "comparable", "golden_text", "read_golden", "write_golden"]

UPDATE_OPTION = "--scopefusion-update-golden"
_HEADER = (
    "# scopefusion golden graph. The GE text form below (one op per line, weights as dtype, shape and sha256)\n"
    "# is the oracle, compared structurally (names ignored unless a test asks); these comment lines are its\n"
    "# readable printed form, for reviews only.\n"
    f"# Rewrite with: pytest {UPDATE_OPTION}\n"
)


def golden_text(graph: Any, *, keep_weights: bool = False) -> str:
    """The content of a golden file for ``graph`` (an IR graph or a converted model's main graph); with
    ``keep_weights`` every weight's bytes are kept instead of its summary."""
    from ..ir.printer import format_graph
    from ..serde.ge import model_from_proto

    model = golden_model(as_graph(graph), keep_weights=keep_weights)
    printed_graph = model_from_proto(model).main
    printed = "".join(f"# {line}".rstrip() + "\n" for line in format_graph(printed_graph).splitlines())
    return _HEADER + "#\n" + printed + "\n" + to_golden_text(model)


def _read_model(path: Path):
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeError) as e:
        raise SerdeError(f"cannot read golden file {path} ({e}); write it with pytest {UPDATE_OPTION}") from None
    try:
        return parse_golden(text)
    except SerdeError as e:
        raise SerdeError(f"golden file {path}: {e}") from None


def _graph(model, path: Path) -> Graph:
    from ..serde.ge import model_from_proto

    try:
        return model_from_proto(model).main
    except SerdeError as e:
        raise SerdeError(f"golden file {path}: {e}") from None


def read_golden(path: str | PathLike) -> Graph:
    """The graph a golden file holds (a summarised weight as the string tensor of its summary); SerdeError
    naming the file when it cannot be read back."""
    path = Path(path)
    return _graph(_read_model(path), path)


def _holds_summaries(graph: Graph) -> bool:
    for node in graph.nodes:
        value = node.attrs.get("value") if node.op == "ge.Const" else None
        if value is not None and value.dtype == object and value.size == 1:
            text = value.reshape(-1)[0]
            text = text.decode("utf-8", "replace") if isinstance(text, bytes) else str(text)
            if text.startswith("weight ") and " sha256:" in text:
                return True
    return False


def comparable(a: Graph, b: Graph) -> tuple[Graph, Graph]:
    """``a`` and ``b``, both with their weights summarised when either holds summaries (a golden file's
    graph), so that a golden compares with a model; else as they are."""
    from ..serde.ge import model_from_proto

    if not (_holds_summaries(a) or _holds_summaries(b)):
        return a, b
    return model_from_proto(golden_model(a)).main, model_from_proto(golden_model(b)).main


def write_golden(path: str | PathLike, graph: Any, *, keep_weights: bool = False) -> bool:
    """Writes ``graph``'s golden text to ``path`` (whole or not at all); False when the file already held it."""

    path = Path(path)
    text = golden_text(graph, keep_weights=keep_weights)
    if path.is_file() and path.read_text(encoding="utf-8") == text:
        return False
    path.parent.mkdir(parents=True, exist_ok=True)
    write_atomic(path, text.encode("utf-8"))
    return True


def assert_matches_golden(
    graph: Any,
    path: str | PathLike,
    *,
    update: bool = False,
    keep_weights: bool = False,
    check_names: bool = False,
    check_attrs: bool = True,
    rtol: float = 0.0,
    atol: float = 0.0,
    ignore_attrs: Iterable[str] = (),
) -> None:
    """Asserts that ``graph`` equals the graph in golden file ``path`` (structurally; see
    :func:`~scopefusion.testing.graph_diff` for the keywords). With ``update`` the file is (re)written
    instead (``keep_weights``: with every weight's bytes), and the assertion passes.

    Weights compare by their content hash, so exactly, unless the golden keeps their bytes and a
    tolerance (``rtol`` / ``atol``) is given: then they compare by value within it.
    """
    __tracebackhide__ = True
    path = Path(path)
    if update:
        write_golden(path, graph, keep_weights=keep_weights)
        return
    if not path.is_file():
        raise AssertionError(f"golden file {path} does not exist; run pytest {UPDATE_OPTION} to write it")
    model = _read_model(path)
    by_value = (rtol > 0 or atol > 0) and not has_summaries(model)
    if not by_value:
        summarise_weights(model)
    expected = _graph(model, path)
    actual = as_graph(graph) if by_value else _graph(golden_model(as_graph(graph)), path)
    diff = graph_diff(actual, expected, check_names=check_names, check_attrs=check_attrs, rtol=rtol, atol=atol,
                      ignore_attrs=ignore_attrs)  # fmt: skip
    if not diff.equal:
        raise AssertionError(
            f"the graph (a) differs from golden file {path} (b); if the change is intended, run pytest "
            f"{UPDATE_OPTION}\n{diff.format()}"
        )
