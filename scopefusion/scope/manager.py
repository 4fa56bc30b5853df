"""``PassManager``: runs the enabled passes in order, validates their results, reports per pass.

Each pass runs (:meth:`ScopeBasePass.run`), then each of its results is submitted to the run's
:class:`FusionPlan` (validated against the graph and everything accepted before). A pass that raises
is reported by name, exception and the ``file:line`` where it was raised, and skipped, the others go
on; in strict mode the run fails with a FusionError naming the pass and the passes that ran before it.
A user pass that replaces a builtin is reported with the count the builtin would have fused on the
same graph (the builtin runs first on its own, counting only); fewer fusions than that is a warning.
:meth:`PassManager.explain` answers "why did this scope not fuse?" for each pass: where it fused, why a
result was refused, the first failing feature, or the nearest miss of its dataflow.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Container, Iterable, Sequence

from ..collector import call_collector_paused
from ..errors import FusionError
from ..records import Record
from .accepted import AcceptedFusion, PatternCheck, Refusal
from .graph import ScopeGraph
from .op_types import KnownOpTypes, OpDefinitionLike, framework_dialect
from .plan import FusionPlan
from .registry import PassRegistry
from .tree import Scope, ScopeTree

if TYPE_CHECKING:  # pragma: no cover
    from ..progress import ProgressFn

__all__ = ["Explanation", "PassManager", "PassReport", "RunReport", "raised_at"]

CHANGED = "changed"
NOT_CHANGED = "not_changed"
ERROR = "error"


class PassReport(Record):
    """What one pass did in one run."""

    _fields = (
        "name", "source", "status", "scopes_matched", "results_accepted", "results_refused", "notes", "error",
        "error_at", "seconds", "replaces", "builtin_would_fuse",
    )

    def __init__(
        self,
        name: str,
        source: str,
        status: str = NOT_CHANGED,
        scopes_matched: list[str] | None = None,
        results_accepted: list[str] | None = None,
        results_refused: list[Refusal] | None = None,
        notes: list[str] | None = None,
        error: str = "",
        error_at: str = "",
        seconds: float = 0.0,
        replaces: str = "",
        builtin_would_fuse: int | None = None,
    ) -> None:
        self.name = name
        self.source = source
        self.status = status
        self.scopes_matched = [] if scopes_matched is None else scopes_matched
        self.results_accepted = [] if results_accepted is None else results_accepted
        self.results_refused = [] if results_refused is None else results_refused
        self.notes = [] if notes is None else notes
        self.error = error
        self.error_at = error_at
        self.seconds = seconds
        self.replaces = replaces
        self.builtin_would_fuse = builtin_would_fuse

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "source": self.source,
            "status": self.status,
            "replaces": self.replaces,
            "builtin_would_fuse": self.builtin_would_fuse,
            "scopes_matched": list(self.scopes_matched),
            "fusions_accepted": len(self.results_accepted),
            "fusions_refused": len(self.results_refused),
            "results_accepted": list(self.results_accepted),
            "results_refused": [r.to_dict() for r in self.results_refused],
            "notes": list(self.notes),
            "error": self.error,
            "error_at": self.error_at,
            "seconds": round(self.seconds, 6),
        }

    @property
    def fused_fewer_than_builtin(self) -> bool:
        """True when this pass replaces a builtin that would have fused more on the same graph."""
        return self.builtin_would_fuse is not None and len(self.results_accepted) < self.builtin_would_fuse

    def warnings(self) -> list[str]:
        """What the conversion summary must say about this pass: an error, or a replacement that fused less."""
        out = []
        if self.error:
            where = f" at {self.error_at}" if self.error_at else ""
            out.append(
                f"fusion pass {self.name!r} ({self.source}) raised {self.error}{where}; the conversion went on without it"
            )
        if self.fused_fewer_than_builtin:
            out.append(
                f"fusion pass {self.name!r} ({self.source}) replaces the builtin pass of that name and fused "
                f"{len(self.results_accepted)} instance(s) where the builtin would have fused {self.builtin_would_fuse}"
            )
        return out


class RunReport(Record):
    """The reports of every pass of one run, the resulting plan, and the builtins that user passes
    replaced."""

    _fields = ("passes", "plan", "seconds", "replacements")

    def __init__(
        self,
        passes: list[PassReport],
        plan: FusionPlan,
        seconds: float = 0.0,
        replacements: list[str] | None = None,
    ) -> None:
        self.passes = passes
        self.plan = plan
        self.seconds = seconds
        self.replacements = [] if replacements is None else replacements

    def __getitem__(self, name: str) -> PassReport:
        for report in self.passes:
            if report.name == name:
                return report
        raise KeyError(f"no pass named {name!r} ran; passes: {[r.name for r in self.passes]}")

    @property
    def accepted(self) -> list[AcceptedFusion]:
        return list(self.plan.accepted)

    @property
    def refused(self) -> list[Refusal]:
        return list(self.plan.refused)

    def warnings(self) -> list[str]:
        """Every pass's warnings in run order (see :meth:`PassReport.warnings`)."""
        return [w for r in self.passes for w in r.warnings()]

    def to_dict(self) -> dict[str, Any]:
        return {
            "passes": [r.to_dict() for r in self.passes],
            "warnings": self.warnings(),
            "accepted": [a.to_dict() for a in self.plan.accepted],
            "replacements": list(self.replacements),
            "seconds": round(self.seconds, 6),
        }


class Explanation(Record):
    """Why one pass did or did not fuse one scope."""

    _fields = ("pass_name", "scope", "matched", "reason", "checks")

    def __init__(
        self,
        pass_name: str,
        scope: str,
        matched: bool,
        reason: str,
        checks: list[PatternCheck] | None = None,
    ) -> None:
        self.pass_name = pass_name
        self.scope = scope
        self.matched = matched
        self.reason = reason
        self.checks = [] if checks is None else checks

    def __str__(self) -> str:
        return f"{self.pass_name}: {self.reason}"

    def to_dict(self) -> dict[str, Any]:
        return {
            "pass": self.pass_name,
            "scope": self.scope,
            "matched": self.matched,
            "reason": self.reason,
            "checks": [str(c) for c in self.checks],
        }


class PassManager:
    """Runs a registry's enabled passes; see the module docstring.

    Args:
        registry: the passes.
        strict: a pass that raises fails the run instead of being skipped.
        ops: the conversion's op registry (any iterable of definitions with ``name`` and ``dialect``):
            a result whose type its ``fused`` dialect does not define is refused, naming the nearest
            known types; an inner node may also have an op type of the model's framework dialect.
        known_types: instead of ``ops``, the op types a fused op (or inner node) may have: a predicate
            or a container. With neither, any non-empty type is accepted.
    """

    def __init__(
        self,
        registry: PassRegistry,
        *,
        strict: bool = False,
        known_types: Callable[[str], bool] | Container[str] | None = None,
        ops: Iterable[OpDefinitionLike] | None = None,
    ) -> None:
        self.registry = registry
        self.strict = strict
        self._ops = tuple(ops) if ops is not None else None
        self._known: Callable[[str], bool] | None
        if known_types is None or callable(known_types):
            self._known = known_types
        else:
            self._known = known_types.__contains__
        self._last: tuple[ScopeGraph, RunReport] | None = None

    def run(self, graph: ScopeGraph, progress: ProgressFn | None = None) -> RunReport:
        """Runs every enabled pass on ``graph`` (whose sub_types are cleared first) and returns the
        per-pass reports with the fusion plan; ``progress("fusion", done, total, pass_name)`` is called
        before each pass and once at the end (see :mod:`scopefusion.progress`).

        Python's cyclic collector is paused meanwhile (:func:`~scopefusion.collector.collector_paused`, as
        ``convert`` does for a whole conversion): the passes add tables and matches that all stay alive, and
        the collector's full passes over a large graph's objects would make the run grow faster than the graph."""
        return call_collector_paused(self._run, graph, progress)

    def _run(self, graph: ScopeGraph, progress: ProgressFn | None) -> RunReport:
        start = time.perf_counter()
        known = self._known_types(graph)
        would_fuse = self._replaced_builtin_counts(graph, known)
        graph.tree.reset_sub_types()
        plan = FusionPlan(graph, known)
        reports: list[PassReport] = []
        enabled = self.registry.enabled_passes()
        for done, entry in enumerate(enabled):
            if progress is not None:
                progress("fusion", done, len(enabled), entry.name)
            report = PassReport(entry.name, entry.source)
            if entry.name in would_fuse:
                report.replaces = f"builtin {entry.name}"
                report.builtin_would_fuse = would_fuse[entry.name]
            reports.append(report)
            t0 = time.perf_counter()
            try:
                if entry.rule.idle_in(graph):  # run would return an empty outcome: the report stands as made
                    report.seconds = time.perf_counter() - t0
                    continue
                outcome = entry.rule.run(graph)
            except Exception as exc:
                report.status = ERROR
                report.error = f"{type(exc).__name__}: {exc}"
                report.error_at = raised_at(exc, user=not entry.is_builtin)
                report.notes.append(_exception_text(exc))
                report.seconds = time.perf_counter() - t0
                if self.strict:
                    before = [r.name for r in reports[:-1]]
                    raise FusionError(
                        f"fusion pass {entry.name!r} ({entry.source}) failed: {report.error} at {report.error_at}; "
                        f"passes run before it: {', '.join(before) or 'none'}; fix or disable the pass"
                    ) from exc
                continue
            if outcome.matched:  # most passes match nothing: the report's empty lists stand
                report.scopes_matched = [s.name for s in outcome.matched]
            if outcome.notes:
                report.notes.extend(outcome.notes)
            for result in outcome.results:
                result.pass_name = entry.name
                recorded = plan.submit(result)
                if isinstance(recorded, Refusal):
                    report.results_refused.append(recorded)
                else:
                    report.results_accepted.append(recorded.name)
            report.status = CHANGED if report.results_accepted else NOT_CHANGED
            report.seconds = time.perf_counter() - t0
        if progress is not None:
            progress("fusion", len(enabled), len(enabled), "")
        replaced = [str(r) for r in self.registry.replacements]
        graph.release_answers()  # they served this run's passes; the plan keeps the graph as long as the model
        run = RunReport(reports, plan, time.perf_counter() - start, replaced)
        self._last = (graph, run)
        return run

    def _known_types(self, graph: ScopeGraph) -> KnownOpTypes | Callable[[str], bool] | None:
        if self._ops is not None:
            return KnownOpTypes.from_op_registry(self._ops, framework_dialect(graph.source))
        return self._known

    def _replaced_builtin_counts(
        self, graph: ScopeGraph, known: KnownOpTypes | Callable[[str], bool] | None
    ) -> dict[str, int | None]:
        """For each enabled user pass that replaces a builtin: how many fusions the builtin alone would
        have had accepted on ``graph`` (None when it raised). Counting only: nothing is kept."""
        counts: dict[str, int | None] = {}
        if not self.registry.replacements:  # no user pass has a builtin's name (each such pair is recorded)
            return counts
        for entry in self.registry.enabled_passes():
            builtin = self.registry.replaced_builtin(entry.name)
            if builtin is None:
                continue
            graph.tree.reset_sub_types()
            plan = FusionPlan(graph, known)
            try:
                outcome = builtin.rule.run(graph)
            except Exception:
                counts[entry.name] = None
                continue
            accepted = 0
            for result in outcome.results:
                result.pass_name = builtin.name
                accepted += not isinstance(plan.submit(result), Refusal)
            counts[entry.name] = accepted
        return counts

    def explain(self, scope: Scope | str, graph: ScopeGraph | None = None) -> list[Explanation]:
        """For each enabled pass, why ``scope`` did or did not match and fuse.

        Features are evaluated on the graph's current state (sub_types as the last run left them);
        ``graph`` defaults to the graph of the last run.
        """
        last = self._last
        if graph is None:
            if last is None:
                raise FusionError("explain() needs a graph: run the manager first or pass graph=")
            graph = last[0]
        if isinstance(scope, str):
            scope = graph.tree[scope]
        run_info = last if last is not None and last[0] is graph else None
        out = []
        for entry in self.registry.enabled_passes():
            checks = list(entry.rule.explain(scope, graph))
            matched = bool(checks) and checks[-1].matched if _is_dataflow(checks) else any(c.matched for c in checks)
            reason = self._summary(entry.name, scope, checks, matched, run_info)
            matched = matched or reason.startswith(("fused by", "matched"))
            out.append(Explanation(entry.name, scope.name, matched, reason, checks))
        return out

    @staticmethod
    def _summary(name: str, scope: Scope, checks: list[PatternCheck], matched: bool, run_info: Any) -> str:
        """What the last run did in ``scope`` comes first (an error, a fusion, a refusal); then why the
        pass's patterns do not match there: the first failing scope feature or the dataflow's nearest miss."""
        report: PassReport | None = None
        if run_info is not None:
            _, run = run_info
            plan: FusionPlan = run.plan
            report = next((r for r in run.passes if r.name == name), None)
            if report is not None and report.status == ERROR:
                return f"the pass failed: {report.error}" + (f" at {report.error_at}" if report.error_at else "")
            tree = plan.graph.tree
            fused = [a for a in plan.accepted if a.pass_name == name and _concerns(tree, scope, a.scopes, a.claimed)]
            if fused:
                more = f" and {len(fused) - 3} more" if len(fused) > 3 else ""
                shown = ", ".join(repr(a.name) for a in fused[:3]) + more
                failing = [c for c in checks if not c.matched]
                if failing and not matched and not _is_dataflow(checks):
                    shown += f" (inside {scope.name}; the scope itself: no match: {failing[0]})"
                return f"fused by {shown}"
            refused = [r for r in plan.refused if r.pass_name == name and _concerns(tree, scope, r.scopes, r.nodes)]
            if refused:
                return f"matched, but the result was refused: {refused[0].reason}"
        if not matched:
            failing = [c for c in checks if not c.matched]
            if not failing:
                return "no match: the pass defines no pattern"
            return f"no match: {failing[-1] if _is_dataflow(checks) else failing[0]}"
        if run_info is None:
            return "features match (the pass has not run on this graph)"
        if not _is_dataflow(checks) and (report is None or scope.name not in report.scopes_matched):
            return "features match now, but the scope was not a final match in the run (multi-batch or an enclosing match)"
        return "matched, but last_match_scopes_and_ops did not select it or another check declined it"


def _exception_text(exc: BaseException) -> str:
    import traceback  # only a failing pass needs it

    return "".join(traceback.format_exception_only(type(exc), exc)).strip()


def raised_at(exc: BaseException, *, user: bool) -> str:
    """``file:line`` where ``exc`` was raised: the innermost frame, or for a user pass the innermost frame
    outside scopefusion itself (the rule's own code rather than a library call it made)."""
    import traceback  # only a failing pass needs it

    frames = traceback.extract_tb(exc.__traceback__)
    if not frames:
        return ""
    chosen = frames[-1]
    if user:
        outside = [f for f in frames if not Path(f.filename).resolve().is_relative_to(_PACKAGE_DIR)]
        if outside:
            chosen = outside[-1]
    return f"{chosen.filename}:{chosen.lineno}"


_PACKAGE_DIR = Path(__file__).resolve().parents[1]


def _is_dataflow(checks: list[PatternCheck]) -> bool:
    return bool(checks) and checks[-1].where.startswith("dataflow pattern")


def _concerns(tree: ScopeTree, scope: Scope, scopes: Sequence[str], nodes: Sequence[str]) -> bool:
    """True if a result's scopes or nodes lie in ``scope``, or ``scope`` lies in one of its scopes."""
    for name in scopes:
        other = tree.get(name)
        if other is not None and (scope.contains(other) or other.contains(scope)):
            return True
    return any(scope.contains(tree.scope_of(node)) for node in nodes)
