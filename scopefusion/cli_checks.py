"""Checks of ``convert``'s options that run before the model is read, so a typo fails in a moment.

Each check raises :class:`BadInput` (or the library's own error for a rules file that
fails to import) with one sentence saying what is wrong and what to write instead.
"""

from __future__ import annotations

import difflib
from os import PathLike
from typing import Iterable, Sequence

__all__ = ["BadInput", "check_pass_names", "nearest_names", "output_format"]


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
    registered passes (builtins, rules files, installed packages); with no names and no rules files there
    is nothing to check, and nothing is loaded.

    Raises:
        BadInput: an unknown pass name; the message names the nearest known names.
        FusionError: a rules file that does not exist or fails to import.
    """
    if not (enable or disable or rules):
        return
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


def output_format(output: str | PathLike, format: str | None, formats: Sequence[str] = ()) -> str:
    """The format to write ``output`` in (:func:`scopefusion.model.output_format`: the file name decides,
    ``--format`` must agree with it, a name without a known ending is written as GE bytes).

    Raises:
        BadInput: an unknown ``format``, or one that contradicts the output's name.
    """
    from .errors import SerdeError
    from .model import output_format as model_output_format

    try:
        return model_output_format(output, format)[0]
    except SerdeError as e:
        raise BadInput(str(e)) from None
