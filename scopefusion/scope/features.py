"""Scope features and patterns with CANN's match semantics.

A :class:`ScopePattern` is the AND of its features. Each feature answers ``matches(scope)`` (fast, a
bool) and ``check(scope)`` (``None`` on a match, else one sentence saying why not); ``check`` is built
on ``matches`` so the two never disagree.

* ``NodeOpTypeFeature(op_type, num, step=0)`` counts ``op_type`` over the scope's subtree. With
  ``step == 0`` the count must equal ``num``, an absent type counting as ``-1`` (so ``num=-1`` means
  "must not appear"). With ``step > 0`` the type must be present and ``count % step == num``.
* ``NodeAttrFeature(op_type, attr, value)`` looks at the scope's direct nodes of ``op_type`` only: a node
  missing ``attr`` fails the feature at once, a node whose value differs is skipped, the first equal
  value matches. Floats compare with CANN's relative tolerance of two float32 epsilons.
* ``ScopeFeature(sub_type, num, suffix="", sub_scope_mask="", step=0)``: a non-empty ``suffix`` must equal
  the scope's ``last_name``; with a non-empty ``sub_type`` the descendants whose ``sub_type`` equals it are
  counted (``== num`` when ``step == 0``); a non-empty ``sub_scope_mask`` must occur in the last name of
  some descendant.

NOTE: where CANN accepts a feature that can never match, we refuse it at construction with a
FusionError: ``NodeOpTypeFeature(t, 0)`` (an absent type counts as -1, never 0) and a ``num`` outside
``0..step-1``. CANN ignores ``ScopeFeature``'s ``step``; we apply it like NodeOpTypeFeature's (present
and ``count % step == num``), so a rule that passes it gets what it asked for.
"""

from __future__ import annotations

import abc
import numbers
from typing import Any

import numpy as np

from ..errors import FusionError
from .tree import Scope

__all__ = [
    "NodeAttrFeature",
    "NodeOpTypeFeature",
    "RETVAL_OP",
    "ScopeFeature",
    "ScopePattern",
    "ScopeFeatureBase",
    "values_match",
]

RETVAL_OP = "_Retval"
_FLOAT32_EPS = float(np.finfo(np.float32).eps)


class ScopeFeatureBase(abc.ABC):
    """What every feature offers; see the module docstring."""

    __slots__ = ()

    @abc.abstractmethod
    def matches(self, scope: Scope) -> bool:
        """True when ``scope`` has the feature."""

    def check(self, scope: Scope) -> str | None:
        """``None`` if ``scope`` has the feature, else why not (one sentence, no trailing period)."""
        if self.matches(scope):
            return None
        return self._why(scope)

    @abc.abstractmethod
    def _why(self, scope: Scope) -> str:
        """Why ``scope`` lacks the feature (one sentence, no trailing period)."""

    def prunes(self, scope: Scope) -> bool:
        """True when no scope below ``scope`` can have the feature either (subtree skipped in a walk)."""
        return False


def _count_text(n: int) -> str:
    return "absent" if n == -1 else f"present {n} time{'s' if n != 1 else ''}"


class NodeOpTypeFeature(ScopeFeatureBase):
    """How many nodes of ``op_type`` the scope's subtree holds; see the module docstring."""

    __slots__ = ("op_type", "num", "step")

    def __init__(self, op_type: str, num: int, step: int = 0) -> None:
        if not isinstance(op_type, str) or not op_type:
            raise FusionError(f"NodeOpTypeFeature needs a non-empty op type, got {op_type!r}")
        if isinstance(num, bool) or not isinstance(num, int) or isinstance(step, bool) or not isinstance(step, int):
            raise FusionError(f"NodeOpTypeFeature({op_type!r}) needs integer num and step, got {num!r}, {step!r}")
        if step < 0:
            raise FusionError(f"NodeOpTypeFeature({op_type!r}) has step={step}; step must be 0 or positive")
        if step == 0 and num < -1:
            raise FusionError(f"NodeOpTypeFeature({op_type!r}) has num={num}; use a count >= 1, or -1 for 'absent'")
        if step == 0 and num == 0:
            raise FusionError(
                f"NodeOpTypeFeature({op_type!r}, num=0) can never match because an absent op type counts "
                "as -1; use num=-1 for 'must not appear'"
            )
        if step > 0 and not 0 <= num < step:
            raise FusionError(
                f"NodeOpTypeFeature({op_type!r}, num={num}, step={step}) can never match; num must be a "
                f"remainder in 0..{step - 1}"
            )
        self.op_type = op_type
        self.num = num
        self.step = step

    def matches(self, scope: Scope) -> bool:
        count = scope._counts.get(self.op_type, -1)
        if self.step == 0:
            return count == self.num
        return count != -1 and count % self.step == self.num

    def _why(self, scope: Scope) -> str:
        count = scope._counts.get(self.op_type, -1)
        if self.step == 0:
            want = "absent" if self.num == -1 else f"exactly {self.num}"
            return f"{self!r}: {self.op_type} is {_count_text(count)} in {scope.name}, expected {want}"
        return (
            f"{self!r}: {self.op_type} is {_count_text(count)} in {scope.name}, expected present "
            f"with count % {self.step} == {self.num}"
        )

    def prunes(self, scope: Scope) -> bool:
        return self.num != -1 and self.op_type not in scope._counts

    def __repr__(self) -> str:
        step = f", step={self.step}" if self.step else ""
        return f"NodeOpTypeFeature({self.op_type!r}, {self.num}{step})"


_MISSING = object()


def values_match(found: Any, expected: Any) -> bool:
    """CANN's attribute comparison, tolerant where values are floats: floats within two float32
    epsilons relative, others exact (:func:`scopefusion.ir.attrs.values_equal` is the exact one).

    Strings match bytes holding the same UTF-8 text; integers match any integral value; lists,
    tuples and arrays match element-wise.
    """
    if isinstance(expected, bool):
        return isinstance(found, (bool, np.bool_)) and bool(found) == expected
    if isinstance(expected, numbers.Integral):
        return (
            isinstance(found, numbers.Integral)
            and not isinstance(found, (bool, np.bool_))
            and int(found) == int(expected)
        )
    if isinstance(expected, numbers.Real):
        if not isinstance(found, numbers.Real) or isinstance(found, (bool, np.bool_)):
            return False
        a, b = float(found), float(expected)
        return abs(a - b) <= 2 * _FLOAT32_EPS * max(abs(a), abs(b))
    if isinstance(expected, str):
        if isinstance(found, bytes):
            try:
                found = found.decode("utf-8")
            except UnicodeDecodeError:
                return False
        return isinstance(found, str) and found == expected
    if isinstance(expected, (list, tuple, np.ndarray)):
        if not isinstance(found, (list, tuple, np.ndarray)):
            return False
        arr_a, arr_b = np.asarray(found), np.asarray(expected)
        if arr_a.shape != arr_b.shape:
            return False
        if arr_a.dtype.kind in "fc" or arr_b.dtype.kind in "fc":
            close = np.abs(arr_a - arr_b) <= 2 * _FLOAT32_EPS * np.maximum(np.abs(arr_a), np.abs(arr_b))
            return bool(np.all(close))
        return bool(np.array_equal(arr_a, arr_b))
    return bool(found == expected)


class NodeAttrFeature(ScopeFeatureBase):
    """An attribute value on one of the scope's direct nodes of ``op_type``; see the module docstring."""

    __slots__ = ("op_type", "attr", "value")

    def __init__(self, op_type: str, attr: str, value: Any) -> None:
        if not isinstance(op_type, str) or not op_type or not isinstance(attr, str) or not attr:
            raise FusionError(f"NodeAttrFeature needs a non-empty op type and attribute name, got {op_type!r}, {attr!r}")
        if value is None:
            raise FusionError(f"NodeAttrFeature({op_type!r}, {attr!r}) needs a value to compare with, got None")
        self.op_type = op_type
        self.attr = attr
        self.value = value

    def _scan(self, scope: Scope) -> tuple[bool, str]:
        seen = 0
        for node in scope._direct_nodes():
            if node.op_type != self.op_type:
                continue
            seen += 1
            found = node.attrs.get(self.attr, _MISSING)
            if found is _MISSING:
                return False, f"node {node.name} has no attribute {self.attr!r}"
            if values_match(found, self.value):
                return True, ""
        if seen == 0:
            return False, f"{scope.name} has no direct {self.op_type} node"
        return False, f"none of its {seen} direct {self.op_type} node(s) has {self.attr}={self.value!r}"

    def matches(self, scope: Scope) -> bool:
        return self._scan(scope)[0]

    def _why(self, scope: Scope) -> str:
        return f"{self!r}: {self._scan(scope)[1]}"

    def prunes(self, scope: Scope) -> bool:
        return self.op_type not in scope._counts

    def __repr__(self) -> str:
        return f"NodeAttrFeature({self.op_type!r}, {self.attr!r}, {self.value!r})"


class ScopeFeature(ScopeFeatureBase):
    """The scope's last name and its descendants' sub_types and names; see the module docstring."""

    __slots__ = ("sub_type", "num", "suffix", "sub_scope_mask", "step")

    def __init__(self, sub_type: str, num: int, suffix: str = "", sub_scope_mask: str = "", step: int = 0) -> None:
        for label, text in (("sub_type", sub_type), ("suffix", suffix), ("sub_scope_mask", sub_scope_mask)):
            if not isinstance(text, str):
                raise FusionError(f"ScopeFeature {label} must be a string, got {text!r}")
        if isinstance(num, bool) or not isinstance(num, int) or isinstance(step, bool) or not isinstance(step, int):
            raise FusionError(f"ScopeFeature({sub_type!r}) needs integer num and step, got {num!r}, {step!r}")
        if step < 0 or (step > 0 and not 0 <= num < step) or (step == 0 and num < 0 and sub_type):
            raise FusionError(
                f"ScopeFeature({sub_type!r}, num={num}, step={step}) can never match; use num >= 0, and with "
                "a step a remainder in 0..step-1"
            )
        if "/" in suffix:
            raise FusionError(f"ScopeFeature suffix {suffix!r} contains '/'; a suffix is one scope name part")
        self.sub_type = sub_type
        self.num = num
        self.suffix = suffix
        self.sub_scope_mask = sub_scope_mask
        self.step = step

    def _evaluate(self, scope: Scope) -> tuple[bool, str]:
        if self.suffix and self.suffix != scope.last_name:
            return False, f"last name is {scope.last_name!r}, expected {self.suffix!r}"
        mask = self.sub_scope_mask
        found_mask = not mask
        count = 0
        sub_type = self.sub_type
        need_count = bool(sub_type)
        if need_count or mask:
            for sub in scope.descendants():
                if need_count and sub.sub_type == sub_type:
                    count += 1
                if not found_mask and len(mask) < len(sub.name) and mask in sub.last_name:
                    found_mask = True
        if not found_mask:
            return False, f"no sub-scope's last name contains {mask!r}"
        if need_count:
            if self.step == 0 and count != self.num:
                return False, f"{count} sub-scope(s) have sub_type {sub_type!r}, expected {self.num}"
            if self.step > 0 and (count == 0 or count % self.step != self.num):
                return False, (
                    f"{count} sub-scope(s) have sub_type {sub_type!r}, expected present with "
                    f"count % {self.step} == {self.num}"
                )
        return True, ""

    def matches(self, scope: Scope) -> bool:
        return self._evaluate(scope)[0]

    def _why(self, scope: Scope) -> str:
        return f"{self!r}: {self._evaluate(scope)[1]}"

    def prunes(self, scope: Scope) -> bool:
        # Descendants of a scope have no more tagged descendants than it has: requiring some prunes.
        if not self.sub_type or (self.step == 0 and self.num == 0):
            return False
        return not any(sub.sub_type == self.sub_type for sub in scope.descendants())

    def __repr__(self) -> str:
        extra = "".join(
            f", {k}={v!r}"
            for k, v in (("suffix", self.suffix), ("sub_scope_mask", self.sub_scope_mask), ("step", self.step))
            if v
        )
        return f"ScopeFeature({self.sub_type!r}, {self.num}{extra})"


_RETVAL_ABSENT = NodeOpTypeFeature(RETVAL_OP, -1)


class ScopePattern:
    """The AND of features; a match tags the scope with ``sub_type``.

    Features are checked in CANN's order whatever the order they were added in: op-type features,
    then attribute features, then scope features, then the implicit "no ``_Retval`` node in the scope".
    """

    __slots__ = ("sub_type", "_op_features", "_attr_features", "_scope_features", "_ordered", "_required", "_counted",
                 "_suffixes", "_rest")

    def __init__(self, sub_type: str = "", *features: ScopeFeatureBase) -> None:
        if not isinstance(sub_type, str):
            raise FusionError(f"ScopePattern sub_type must be a string, got {sub_type!r}; features come after it")
        self.sub_type = sub_type
        self._op_features: list[NodeOpTypeFeature] = []
        self._attr_features: list[NodeAttrFeature] = []
        self._scope_features: list[ScopeFeature] = []
        self._ordered: tuple[ScopeFeatureBase, ...] = ()
        self._required: frozenset[str] = frozenset()
        self._counted: tuple[tuple[str, int], ...] = ()
        self._suffixes: tuple[str, ...] = ()
        self._rest: tuple[ScopeFeatureBase, ...] = ()
        self.add(*features)

    def add(self, *features: ScopeFeatureBase) -> ScopePattern:
        """Adds features; returns the pattern so calls chain."""
        for feature in features:
            if isinstance(feature, NodeOpTypeFeature):
                self._op_features.append(feature)
            elif isinstance(feature, NodeAttrFeature):
                self._attr_features.append(feature)
            elif isinstance(feature, ScopeFeature):
                self._scope_features.append(feature)
            else:
                raise FusionError(
                    f"ScopePattern {self.sub_type!r} got {feature!r}; expected a NodeOpTypeFeature, "
                    "NodeAttrFeature or ScopeFeature"
                )
        self._ordered = tuple(self._op_features) + tuple(self._attr_features) + tuple(self._scope_features)
        self._required = frozenset(
            f.op_type for f in self._op_features if type(f) is NodeOpTypeFeature and f.num != -1
        )
        self._split_for_matches()
        return self

    def _split_for_matches(self) -> None:
        """Splits the features for :meth:`matches`: exact op-type counts as ``(op type, count)`` pairs, scope
        features that only name a suffix as that suffix, and the rest as they are. ``matches`` then reads a
        scope's counts and last name without a call per feature; the answer is the same AND of the same
        tests, whose order only :meth:`check` (which names the first failing feature) depends on."""
        counted: list[tuple[str, int]] = []
        suffixes: list[str] = []
        rest: list[ScopeFeatureBase] = []
        for feature in self._ordered:
            if type(feature) is NodeOpTypeFeature and feature.step == 0:
                counted.append((feature.op_type, feature.num))
            elif (type(feature) is ScopeFeature and feature.suffix and not feature.sub_type
                  and not feature.sub_scope_mask):
                suffixes.append(feature.suffix)
            else:
                rest.append(feature)
        self._counted = tuple(counted)
        self._suffixes = tuple(suffixes)
        self._rest = tuple(rest)

    @property
    def walk_key(self) -> tuple[Any, ...] | None:
        """What :meth:`matches` and :meth:`prunes` read of a scope, when that is only its op counts and last
        name (exact op-type counts and suffixes): patterns with equal keys match the same scopes of a tree, so
        a walk of the tree for one answers for all (:func:`~.matching.match_one_batch`); else None (a feature
        reads sub_types or attributes, or a subclass matches its own way)."""
        if self._rest or type(self) is not ScopePattern:
            return None
        return (self._counted, self._suffixes)

    @property
    def required_op_types(self) -> frozenset[str]:
        """The op types its :class:`NodeOpTypeFeature` features require present (``num`` other than -1): a
        scope whose subtree lacks one neither matches nor has a match below it (the feature prunes it)."""
        return self._required

    @property
    def features(self) -> tuple[ScopeFeatureBase, ...]:
        """Features in checking order (without the implicit ``_Retval`` check)."""
        return self._ordered

    def matches(self, scope: Scope) -> bool:
        if scope.parent is None:
            return False
        counts = scope._counts
        for op_type, num in self._counted:  # NodeOpTypeFeature.matches with step 0
            if counts.get(op_type, -1) != num:
                return False
        for suffix in self._suffixes:  # ScopeFeature.matches with a suffix only
            if suffix != scope.last_name:
                return False
        for feature in self._rest:
            if not feature.matches(scope):
                return False
        return RETVAL_OP not in counts

    def check(self, scope: Scope) -> str | None:
        """``None`` on a match, else the first failing feature and why."""
        if scope.parent is None:
            return "the root scope is never matched"
        for feature in self._ordered:
            reason = feature.check(scope)
            if reason is not None:
                return reason
        return _RETVAL_ABSENT.check(scope)

    def prunes(self, scope: Scope) -> bool:
        """True when no scope below ``scope`` can match either."""
        for feature in self._ordered:
            if feature.prunes(scope):
                return True
        return False

    def __repr__(self) -> str:
        inner = ", ".join(repr(f) for f in self._ordered)
        return f"ScopePattern({self.sub_type!r}{', ' if inner else ''}{inner})"
