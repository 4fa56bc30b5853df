"""Matching pattern sets against the scope tree, as CANN's MatchAllBatches / MatchOneBatch do.

A pass defines several independent *pattern sets*. A set is a list of *batches* matched in order;
a batch is a list of alternative :class:`ScopePattern`. Matching a batch walks the tree from the
root's children: a scope that matches is tagged with the pattern's ``sub_type`` and recorded, and the
walk does not descend into it; a scope that does not match is descended into. The root never matches.
The walk also skips a subtree when a feature proves that nothing below can match (an op type a
feature needs is absent from the subtree), which changes the cost, not the result.

Only the last batch's matches are a set's result. A set stops at the first batch with no match, and
then yields nothing. Scopes tagged by earlier batches keep their ``sub_type`` only when they lie inside
a final match; all others are reset to ``""``.
"""

from __future__ import annotations

from typing import Any, Sequence

from ..errors import FusionError
from .features import ScopePattern
from .tree import Scope, ScopeTree

__all__ = ["Batch", "PatternSet", "match_all_batches", "match_one_batch", "match_pattern_sets", "normalize_patterns"]

Batch = Sequence[ScopePattern]
PatternSet = Sequence[Batch]


def normalize_patterns(defined: Any, owner: str) -> list[list[list[ScopePattern]]]:
    """``define_patterns()``'s value as pattern sets of batches of patterns.

    At every level a bare :class:`ScopePattern` stands for a one-element list, so ``p`` is one set of one
    batch, ``[p, q]`` two independent sets, ``[[p, q]]`` one set of two batches and ``[[[p, q]]]`` one set
    of one batch with two alternatives.
    """

    def as_list(value: Any, what: str) -> list[Any]:
        if isinstance(value, ScopePattern):
            return [value]
        if isinstance(value, (list, tuple)):
            return list(value)
        raise FusionError(
            f"pass {owner}: define_patterns() gave {value!r} where {what} was expected; return "
            "ScopePattern objects nested as pattern sets > batches > alternatives"
        )

    sets = []
    for raw_set in as_list(defined, "a list of pattern sets"):
        batches = []
        for raw_batch in as_list(raw_set, "a pattern set (a list of batches)"):
            batch = as_list(raw_batch, "a batch (a list of ScopePattern)")
            for pattern in batch:
                if not isinstance(pattern, ScopePattern):
                    raise FusionError(f"pass {owner}: define_patterns() gave {pattern!r} inside a batch; expected a ScopePattern")
            if not batch:
                raise FusionError(f"pass {owner}: define_patterns() has an empty batch; every batch needs a pattern")
            batches.append(batch)
        if not batches:
            raise FusionError(f"pass {owner}: define_patterns() has an empty pattern set; every set needs a batch")
        sets.append(batches)
    return sets


def match_one_batch(tree: ScopeTree, batch: Sequence[ScopePattern]) -> list[Scope]:
    """Scopes matched by any pattern of ``batch``, each recorded once, tagged by the last pattern that
    matched it (CANN retags); order: by pattern, then depth-first walk order."""
    if isinstance(batch, ScopePattern):
        batch = [batch]
    results: dict[int, Scope] = {}
    present = tree.root._counts.keys()  # the root counts every node: a type absent there is absent everywhere
    for pattern in batch:
        required = pattern.required_op_types
        if required and not present >= required:
            continue  # every scope would be pruned on sight, as in _walk
        key = pattern.walk_key
        found = tree.walks.get(key) if key is not None else None
        if found is None:
            found = _walk(tree, pattern)
            if key is not None:  # what a pattern that reads only op counts and last names finds, found once per tree
                tree.walks[key] = found
        sub_type = pattern.sub_type
        for scope in found:
            scope.sub_type = sub_type
            results.setdefault(id(scope), scope)
    return list(results.values())


def _walk(tree: ScopeTree, pattern: ScopePattern) -> list[Scope]:
    """The scopes ``pattern`` matches, in depth-first walk order from the root's children, not descending
    into a match nor into a scope the pattern prunes."""
    found: list[Scope] = []
    required = pattern.required_op_types
    # One required type (the usual case) is tested by one look-up rather than a comparison of key sets.
    only = next(iter(required)) if len(required) == 1 else None
    stack = list(reversed(tree.root._children.values()))
    while stack:
        scope = stack.pop()
        if only is not None:
            if only not in scope._counts:
                continue  # as below
        elif required and not scope._counts.keys() >= required:
            continue  # pattern.prunes(scope), so no match here nor below: what testing both would find
        if pattern.matches(scope):
            found.append(scope)
            continue
        if scope._children and not pattern.prunes(scope):
            stack.extend(reversed(scope._children.values()))
    return found


def match_all_batches(tree: ScopeTree, pattern_sets: Any) -> list[Scope]:
    """Final matches of every pattern set, in set order, each scope once; see the module docstring.

    ``pattern_sets`` is nested as :func:`normalize_patterns` accepts.
    """
    return match_pattern_sets(tree, normalize_patterns(pattern_sets, "match_all_batches"))


def match_pattern_sets(tree: ScopeTree, pattern_sets: Sequence[Sequence[Batch]]) -> list[Scope]:
    """:func:`match_all_batches` of pattern sets already as :func:`normalize_patterns` gives them."""
    final: dict[int, Scope] = {}
    for batches in pattern_sets:
        tagged: list[Scope] = []
        last: list[Scope] = []
        for batch in batches:
            last = match_one_batch(tree, batch)
            if not last:
                break
            tagged.extend(last)
        if not last:
            # A batch matched nothing: the set has no result and every tag it set is undone.
            for scope in tagged:
                scope.sub_type = ""
            continue
        keep = {id(scope) for scope in last}
        for scope in tagged:
            if id(scope) in keep or any(id(up) in keep for up in scope.ancestors()):
                continue
            scope.sub_type = ""
        for scope in last:
            final.setdefault(id(scope), scope)
    return list(final.values())
