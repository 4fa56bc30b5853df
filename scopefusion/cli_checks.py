"""Checks of ``convert``'s options that run before the model is read, so a typo fails in a moment.

Each check raises :class:`BadInput` (or the library's own error for a rules file that
fails to import) with one sentence saying what is wrong and what to write instead.
"""

from __future__ import annotations

import difflib
from os import PathLike
from pathlib import Path
from typing import Iterable, Sequence

__all__ = ["FORMAT_SUFFIXES", "BadInput", "check_pass_names", "nearest_names", "output_format"]

# Output suffixes that say which format a file holds (longest first: ".ge.txt" before ".txt").
FORMAT_SUFFIXES: tuple[tuple[str, str], ...] = (
    (".ge.txt", "ge-text"),
    (".ge-text", "ge-text"),
    (".getxt", "ge-text"),
    (".pbtxt", "ge-text"),
    (".onnx", "onnx"),
    (".ge", "ge"),
)
DEFAULT_FORMAT = "ge"


class BadInput(Exception):
    """A command-line value that cannot be used; reported as one sentence with exit code 2."""


def nearest_names(name: str, known: Iterable[str], limit: int = 3) -> list[str]:
    """The known names closest to ``name`` (case ignored first, then by similarity), best first."""
    known = list(known)
    same_case = [k for k in known if k.lower() == name.lower()]
    by_lower = {k.lower(): k for k in known}
    close = difflib.get_close_matches(name.lower(), list(by_lower), n=limit, cutoff=0.5)
    found = same_case + [by_lower[c] for c in close if by_lower[c] not in same_case]
    if not found:  # a fragment of a name ("Gelu" for "GeluFusion")
        found = [k for k in known if name.lower() in k.lower()]
    return found[:limit]


def check_pass_names(
    enable: Sequence[str] = (),
    disable: Sequence[str] = (),
    rules: Sequence[str | PathLike] = (),
) -> None:
    """Imports the rules files and checks every ``--enable-pass`` / ``--disable-pass`` name against the
    registered passes (builtins, rules files, installed packages).

    Raises:
        BadInput: an unknown pass name; the message names the nearest known names.
        FusionError: a rules file that does not exist or fails to import.
    """
    from .convert import fusion_setup

    registry, _ = fusion_setup(rules=rules)
    known = [entry.name for entry in registry.passes()]
    for option, names in (("--enable-pass", enable), ("--disable-pass", disable)):
        for name in names:
            if name in known:
                continue
            near = nearest_names(name, known)
            hint = f"did you mean {' or '.join(map(repr, near))}?" if near else f"the passes are {', '.join(known)}"
            raise BadInput(
                f"{option} {name!r} is not a registered fusion pass; {hint} (scopefusion passes lists them all)"
            )


def output_format(output: str | PathLike, format: str | None, formats: Sequence[str]) -> str:
    """The format to write ``output`` in: ``format`` when given, else the one its suffix names, else ``ge``.

    Raises:
        BadInput: an unknown ``format``, or one that contradicts the output's suffix.
    """
    if format is not None and format not in formats:
        raise BadInput(f"--format {format!r} is not one of {', '.join(formats)}")
    name = Path(output).name.lower()
    implied = next((fmt for suffix, fmt in FORMAT_SUFFIXES if name.endswith(suffix)), None)
    if format is None:
        return implied or DEFAULT_FORMAT
    if implied is not None and implied != format:
        raise BadInput(
            f"the output {output} has the suffix of the {implied} format but --format is {format}; "
            f"pass --format {implied}, or name the file for {format}"
        )
    return format
