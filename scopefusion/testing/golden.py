"""Golden files of IR graphs: written in a parseable stable text form, compared structurally.

NOTE: what a golden file holds. The readable printed form (:func:`~scopefusion.ir_builder.format_graph`)
has no parser, and comparing printed text would make every rename or reordering a failure. So a golden
file holds the GE text form of the graph (:func:`scopefusion.serde.ge.to_text`, the protobuf text of a
``ModelDef``: deterministic, and read back by :func:`~scopefusion.serde.ge.from_text`), preceded by the
printed form as ``#`` comment lines for reviewers (protobuf text format skips comments). A check reads
the file back and compares it with :func:`~scopefusion.testing.assert_graphs_equal`; it never compares
text. Updating writes the file only when its text would change.
"""

from __future__ import annotations

from os import PathLike
from pathlib import Path
from typing import Any, Iterable

from ..errors import SerdeError
from ..files import write_atomic
from ..ir.graph import Graph
from .assertions import as_graph, graph_diff

__all__ = ["UPDATE_OPTION", "assert_matches_golden", "golden_text", "read_golden", "write_golden"]

UPDATE_OPTION = "--scopefusion-update-golden"
_HEADER = (
    "# scopefusion golden graph. The GE text form below is the oracle, compared structurally (names ignored\n"
    "# unless a test asks); these comment lines are its readable printed form, for reviews only.\n"
    f"# Rewrite with: pytest {UPDATE_OPTION}\n"
)


def golden_text(graph: Any) -> str:
    """The content of a golden file for ``graph`` (an IR graph or a converted model's main graph)."""
    from ..ir.printer import format_graph
    from ..serde.ge import to_text

    g = as_graph(graph)
    printed = "".join(f"# {line}".rstrip() + "\n" for line in format_graph(g).splitlines())
    return _HEADER + "#\n" + printed + "\n" + to_text(g)


def read_golden(path: str | PathLike) -> Graph:
    """The graph a golden file holds; SerdeError naming the file when it cannot be read back."""
    from ..serde.ge import from_text

    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeError) as e:
        raise SerdeError(f"cannot read golden file {path} ({e}); write it with pytest {UPDATE_OPTION}") from None
    try:
        return from_text(text)
    except SerdeError as e:
        raise SerdeError(f"golden file {path}: {e}") from None


def write_golden(path: str | PathLike, graph: Any) -> bool:
    """Writes ``graph``'s golden text to ``path`` (whole or not at all); False when the file already held it."""
    path = Path(path)
    text = golden_text(graph)
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
    check_names: bool = False,
    check_attrs: bool = True,
    rtol: float = 0.0,
    atol: float = 0.0,
    ignore_attrs: Iterable[str] = (),
) -> None:
    """Asserts that ``graph`` equals the graph in golden file ``path`` (structurally; see
    :func:`~scopefusion.testing.graph_diff` for the keywords). With ``update`` the file is (re)written
    instead, and the assertion passes."""
    __tracebackhide__ = True
    path = Path(path)
    if update:
        write_golden(path, graph)
        return
    if not path.is_file():
        raise AssertionError(f"golden file {path} does not exist; run pytest {UPDATE_OPTION} to write it")
    expected = read_golden(path)
    diff = graph_diff(graph, expected, check_names=check_names, check_attrs=check_attrs, rtol=rtol, atol=atol, ignore_attrs=ignore_attrs)
    if not diff.equal:
        raise AssertionError(
            f"the graph (a) differs from golden file {path} (b); if the change is intended, run pytest "
            f"{UPDATE_OPTION}\n{diff.format()}"
        )
