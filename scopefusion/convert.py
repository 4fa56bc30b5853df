"""``convert``: a model file to a fused, typed, shape-inferred IR with profiles and memory plans.

Stages (each timed in the report): load → scope tree → fusion passes → build IR → infer each shape
profile → plan memory per profile.
"""

from __future__ import annotations

import gc
import importlib
import os
import sys
import threading
import time
from contextlib import contextmanager
from os import PathLike
from pathlib import Path
from typing import Any, Callable, ContextManager, Iterable, Iterator, Mapping, Sequence

from .budgets import (
    DEFAULT_BUDGETS,
    DEFAULT_MAX_FOLDED_BYTES,
    DEFAULT_MAX_INLINED_NODES,
    Budgets,
    current_budgets,
    use_budgets,
)
from .collector import collector_paused
from .errors import ModelLoadError
from .model import Model
from .progress import ProgressFn, stage_progress

__all__ = ["collector_paused", "convert", "fusion_setup"]


def convert(
    path: str | PathLike,
    *,
    input_shapes: Mapping[str, Sequence[int]] | Sequence[Mapping[str, Sequence[int]]] | None = None,
    enable: Iterable[str] = (),
    disable: Iterable[str] = (),
    rules: Iterable[str | PathLike] = (),
    strict: bool = False,
    model_format: str | None = None,
    signature: str | None = None,
    tags: Sequence[str] | None = None,
    savedmodel_loader: str = "native",
    progress: ProgressFn | None = None,
    max_inlined_nodes: int = DEFAULT_MAX_INLINED_NODES,
    max_folded_bytes: int = DEFAULT_MAX_FOLDED_BYTES,
) -> Model:
    """Converts the model at ``path``.

    Args:
        path: a SavedModel directory, a frozen GraphDef ``.pb``, a text GraphDef ``.pbtxt`` or an ``.onnx`` file.
        input_shapes: one mapping of input name to shape, or a list of them: one shape profile each
            (an input left out keeps the model's own shape). None: one profile with the model's shapes.
        enable / disable: fusion pass names to turn on (non-general passes) or off (general ones).
        rules: Python files of user fusion rules, run before the builtins.
        strict: a fusion pass that raises, or an op with no definition, fails the conversion.
        model_format: force the input format (``savedmodel``, ``pb``, ``pbtxt``, ``onnx``).
        signature / tags: the SavedModel signature and tag set.
        savedmodel_loader: how a SavedModel's variables are frozen: ``"native"`` (without TensorFlow) or
            ``"tensorflow"`` (TensorFlow loads and freezes it).
        progress: called as ``progress(stage, done, total, detail)`` as the stages go
            (:mod:`scopefusion.progress` lists them); None reports nothing, and then the profile of the
            model's own shapes and the memory plans are made on first use (same results and errors; their
            time is added to ``model.timings`` then).
        max_inlined_nodes: nodes that inlining TF function calls may make, over the whole model.
        max_folded_bytes: bytes of one value computed at build time; larger values stay unfolded, and a
            larger one-value constant becomes a ``Fill`` (see :mod:`scopefusion.budgets`).

    Raises:
        ScopeFusionError: any stage's error (ModelLoadError, ParseError, FusionError, InferenceError).
    """
    if (max_inlined_nodes.__class__ is int and max_inlined_nodes == DEFAULT_MAX_INLINED_NODES
            and max_folded_bytes.__class__ is int and max_folded_bytes == DEFAULT_MAX_FOLDED_BYTES):
        budgets = DEFAULT_BUDGETS
    else:
        try:
            budgets = Budgets(max_inlined_nodes=max_inlined_nodes, max_folded_bytes=max_folded_bytes)
        except ValueError as e:
            raise ModelLoadError(f"{path}: {e}") from None
    with use_budgets(budgets), collector_paused():
        try:
            return _convert(path, input_shapes=input_shapes, enable=enable, disable=disable, rules=rules,
                            strict=strict, model_format=model_format, signature=signature, tags=tags,
                            savedmodel_loader=savedmodel_loader, progress=progress)
        except MemoryError:
            raise ModelLoadError(
                f"{path}: converting the model ran out of memory; lower --max-inlined-nodes / --max-folded-bytes "
                "(max_inlined_nodes= / max_folded_bytes=) to refuse such models early, or convert on a larger machine"
            ) from None


def _convert(path, *, input_shapes, enable, disable, rules, strict, model_format, signature, tags, savedmodel_loader,
             progress) -> Model:
    imported = len(sys.modules)
    # NOTE: imported here, on each call (a replaced function is the one called), by absolute name: a relative
    # import in a function resolves its package's name again on every call.
    from scopefusion.dialects import op_name_tuple
    from scopefusion.ir_builder.build import build_graph
    from scopefusion.ir_builder.memory_plan import plan_memory
    from scopefusion.ir_builder.profiles import build_profile, deferred_profile, normalize_input_shapes
    from scopefusion.ir_builder.shape_inference import infer_graph
    from scopefusion.ir_builder.size_limits import arena_fits, check_arena, check_tensor_sizes, checked_arena_fits
    from scopefusion.parser import load
    from scopefusion.scope import PassManager, ScopeGraph

    _import_conversion_modules(path, model_format)
    if len(sys.modules) > imported:
        _promote_tracked_objects()
    timings: dict[str, float] = {}
    stage = _StageClock(timings)

    profiles_wanted = normalize_input_shapes(input_shapes)
    options: dict[str, Any] = {}
    if model_format:
        options["format"] = model_format
    if signature:
        options["signature"] = signature
    if tags:
        options["tags"] = tuple(tags)
    if savedmodel_loader != "native":
        options["savedmodel_loader"] = savedmodel_loader
    with stage("load"):
        source = load(path, progress=progress, **options)
    with stage("scope"):
        scope_graph = ScopeGraph.build(source)
    with stage("fusion"):
        registry, parsers, ops = _fusion_setup_of_conversion(source, rules, enable, disable)
        manager = PassManager(registry, strict=strict, ops=op_name_tuple(ops))
        fusion_run = manager.run(scope_graph, progress=progress)
    context = _shared_ir_context()
    with stage("build"):
        if progress is not None:
            progress("build", 0, 1, "")
        built = build_graph(source, context=context, registry=ops, parsers=parsers, fusions=fusion_run.accepted)
        if progress is not None:
            progress("build", 1, 1, "")
    graph = built.graph
    budgets = current_budgets()
    # Without a progress display, what only some outputs read is made on first use (the ONNX export reads
    # neither a default profile nor a memory plan); it cannot fail then where making it now would not.
    deferred: set[int] = set()
    with stage("infer"):
        main_inference = infer_graph(graph, strict=strict, progress=stage_progress(progress, "infer"))
        profiles = []
        for i, shapes in enumerate(profiles_wanted or [{}]):
            if not shapes and progress is None:
                deferred.add(i)
                around = _LaterWork(budgets, stage, "infer")
                profiles.append(deferred_profile(graph, i, strict=strict, inferred=main_inference, around=around))
                continue
            report = stage_progress(progress, f"profile {i}", _shapes(shapes))
            profiles.append(build_profile(graph, i, shapes, strict=strict, progress=report, inferred=main_inference))
        main_fits = checked_arena_fits(graph)  # check_tensor_sizes(graph), and arena_fits(graph) for later
        for i, profile in enumerate(profiles):
            if i not in deferred:  # a deferred profile has the main graph's types
                check_tensor_sizes(profile.graph, f"profile {i}: ")
    with stage("memory_plan"):
        for done, profile in enumerate(profiles):
            if progress is None and (main_fits if profile.index in deferred else arena_fits(profile.graph)):
                profile.defer_memory_plan(_planner(_LaterWork(budgets, stage, "memory_plan")))
                continue
            if progress is not None:
                progress("memory plan", done, len(profiles), f"profile {profile.index}")
            profile.memory_plan = plan_memory(profile.graph)
            check_arena(int(profile.memory_plan.arena_bytes), f"profile {profile.index}")
        if progress is not None:
            progress("memory plan", len(profiles), len(profiles), "")
    return Model(
        graph=graph,
        profiles=profiles,
        source=source,
        fusion_run=fusion_run,
        inference=main_inference,
        dropped_attrs=built.dropped_attrs,
        timings=timings,
    )


# The modules a conversion runs beyond those ``_convert`` imports: the fusion rules, and the parser and op
# definitions of the model's format (by its name or the forced format; a wrong guess only imports early).
_CONVERSION_MODULES = ("scopefusion.fusion_rules", "scopefusion.ir_builder.op_parsers", "scopefusion.dialects.fused")
_FORMAT_MODULES = {
    "pb": ("scopefusion.parser.tf_graphdef", "scopefusion.dialects.tf"),
    "pbtxt": ("scopefusion.parser.tf_graphdef", "scopefusion.dialects.tf"),
    "onnx": ("scopefusion.parser.onnx_frontend", "scopefusion.dialects.onnx"),
}


_IMPORTED_FOR: set[str] = set()  # the formats whose modules were imported here once (later imports find them)

# The file name suffixes (lower case) that say a format of _IMPORTED_FOR.
_IMPORTED_SUFFIXES: tuple[str, ...] = ()


def _import_conversion_modules(path: str | PathLike, model_format: str | None) -> None:
    global _IMPORTED_SUFFIXES
    if model_format:
        if model_format in _IMPORTED_FOR:
            return
    elif _IMPORTED_SUFFIXES and os.fspath(path).lower().endswith(_IMPORTED_SUFFIXES):
        # The name's suffix says a format whose modules are here, without asking the file system: were the
        # path a SavedModel directory, its modules are a part of every format's. (A wrong guess, as a file
        # named only ".pb", leaves the loader to import what it needs.)
        return
    from scopefusion.parser.detect import SUFFIX_FORMATS, format_from_path  # absolute: see _convert

    fmt = model_format or format_from_path(str(path)) or ""
    if fmt in _IMPORTED_FOR:
        return
    for name in _CONVERSION_MODULES + _FORMAT_MODULES.get(fmt, ()):
        importlib.import_module(name)
    _IMPORTED_FOR.add(fmt)
    _IMPORTED_SUFFIXES = tuple(suffix for suffix, said in SUFFIX_FORMATS.items() if said in _IMPORTED_FOR)


def _promote_tracked_objects() -> None:
    """Moves every object the cyclic collector tracks into its oldest generation, without a pass over them.

    Called once the modules a conversion needs are imported, before it reads the model: the objects of
    those imports (a hundred thousand on the first conversion: functions, classes, tables) live as long
    as the process, and the collection at the end of the conversion would otherwise walk them all once
    more as young objects. ``gc.freeze()`` followed by ``gc.unfreeze()`` merges the young generations
    into the oldest one, so no object stays frozen: the caller's objects are only aged, as a full
    collection would find their garbage, and the conversion's own objects stay young. When the process
    has frozen objects of its own (``gc.get_freeze_count()``), unfreezing would thaw them: nothing moves.
    """
    if gc.get_freeze_count() == 0:
        gc.freeze()
        gc.unfreeze()


class _StageClock:
    """``with clock(name):`` adds the block's seconds to ``timings[name]`` (rounded to the microsecond), as a
    generator-based context manager would, at a fraction of its cost per block."""

    __slots__ = ("timings", "name", "start")

    def __init__(self, timings: dict[str, float]) -> None:
        self.timings = timings
        self.name = ""
        self.start = 0.0

    def __call__(self, name: str) -> "_StageClock":
        clock = _StageClock(self.timings)
        clock.name = name
        return clock

    def __enter__(self) -> None:
        self.start = time.perf_counter()

    def __exit__(self, *exc: object) -> None:
        timings = self.timings
        timings[self.name] = round(timings.get(self.name, 0.0) + time.perf_counter() - self.start, 6)


class _LaterWork:
    """For work left to first use (a profile of the model's own shapes, a memory plan): ``with work():`` runs
    the block with the conversion's budgets and the collector paused, and adds its time to stage ``name``."""

    __slots__ = ("budgets", "stage", "name")

    def __init__(self, budgets: Budgets, stage: _StageClock, name: str) -> None:
        self.budgets = budgets
        self.stage = stage
        self.name = name

    @contextmanager
    def __call__(self) -> Iterator[None]:
        with use_budgets(self.budgets), collector_paused(), self.stage(self.name):
            yield


def _planner(around: Callable[[], ContextManager[None]]) -> Callable[[Any], Any]:
    """Makes a profile's memory plan when it is first read, as ``convert`` would have made it."""

    def plan(profile: Any) -> Any:
        from .ir_builder.memory_plan import plan_memory
        from .ir_builder.size_limits import check_arena

        graph = profile.graph
        with around():
            made = plan_memory(graph)
            check_arena(int(made.arena_bytes), f"profile {profile.index}")
        return made

    return plan


def _shapes(shapes: Mapping[str, Sequence[int]]) -> str:
    return "; ".join(f"{name}:{','.join(map(str, dims))}" for name, dims in shapes.items()) or "the model's own shapes"


def fusion_setup(
    *,
    rules: Iterable[str | PathLike] = (),
    enable: Iterable[str] = (),
    disable: Iterable[str] = (),
    entry_points: bool = True,
):
    """``(PassRegistry, OpParserRegistry)`` as ``convert`` uses them: user rules (files, then installed
    packages) registered before the builtins, enable/disable applied; the fused ops the rules declare
    (``registry.fused_ops``) checked against the builtin fused ops."""
    from scopefusion.dialects.fused.declared import check_declared_ops  # absolute: see _convert
    from scopefusion.fusion_rules import BUILTIN_RULES
    from scopefusion.ir_builder.op_parsers import default_op_parsers
    from scopefusion.scope import PassRegistry

    registry = PassRegistry()
    for path in rules:
        registry.load_rules_file(Path(path))
    if entry_points:
        registry.load_entry_points()
    registry.load_builtins(BUILTIN_RULES)
    registry.configure(enable=tuple(enable), disable=tuple(disable))
    check_declared_ops(registry.fused_ops)
    return registry, default_op_parsers()


def _fusion_setup_of_conversion(source: Any, rules: Iterable[str | PathLike], enable: Iterable[str],
                                disable: Iterable[str]) -> tuple[Any, Any, Any]:
    """``(PassRegistry, OpParserRegistry, OpRegistry)`` of one conversion of ``source``.

    Without user rules, enable or disable, the pass registry and the op parsers are those of
    :func:`fusion_setup`, made once per state of the import path (the installed packages' entry points are
    found there, and do not change while it does not) and shared: a conversion only reads them. (They are
    made again if a registered pass has changed its name or default flag since.) With any of
    them, the conversion makes its own, so nothing it registers or switches is seen by another. The op
    registry is :func:`~scopefusion.dialects.shared_op_registry`'s unless the rules declare fused ops; then
    it is a registry of the conversion's own with them.
    """
    from scopefusion.dialects import shared_op_registry  # absolute: see _convert
    from scopefusion.dialects.fused.declared import op_registry_for

    rules, enable, disable = tuple(rules), tuple(enable), tuple(disable)
    if rules or enable or disable:
        registry, parsers = fusion_setup(rules=rules, enable=enable, disable=disable)
    else:
        key = (tuple(sys.path), tuple(sys.meta_path))
        shared = _SHARED_SETUP.get(key)
        if shared is None or not _registered_as_made(shared[2]):
            _SHARED_SETUP.clear()  # only the newest setup can be asked for again
            registry, parsers = fusion_setup()
            shared = _SHARED_SETUP[key] = (registry, parsers, tuple(registry.passes()))
        registry, parsers, _ = shared
    if registry.fused_ops:
        return registry, parsers, op_registry_for(source, registry.fused_ops)
    return registry, parsers, shared_op_registry(source)


def _registered_as_made(entries: tuple[Any, ...]) -> bool:
    """Whether the pass of each registry entry still has the name and default flag it was registered with: a
    pass is an object its module keeps, which code may change, and registering it again would then give
    another registry."""
    for entry in entries:
        rule = entry.rule
        if rule.pass_name != entry.name or bool(rule.general) != entry.general:
            return False
    return True


# NOTE: a pure cache: (sys.path, sys.meta_path) -> fusion_setup() made then, and the registry's passes; one entry
_SHARED_SETUP: dict[tuple[tuple[Any, ...], tuple[Any, ...]], tuple[Any, Any, tuple[Any, ...]]] = {}

# Types made by conversions before a shared IRContext is set aside for a new one: a bound on what it keeps
# alive in a process that converts many models (a large CNN makes about a thousand).
_SHARED_CONTEXT_TYPES = 20_000


class _SharedContext(threading.local):
    context: Any = None


_shared_context = _SharedContext()


def _shared_ir_context() -> Any:
    """The IRContext conversions in this thread make their types in: types are immutable and interned (equal
    parameters give one object), so conversions can share them, and a conversion finds most of its types made
    by an earlier one. A new context replaces it once it holds ``_SHARED_CONTEXT_TYPES`` types (graphs made in
    the old one keep it). One per thread, as interning a new type is not atomic."""
    context = _shared_context.context
    if context is None or context.interned_count() > _SHARED_CONTEXT_TYPES:
        from scopefusion.ir.types import IRContext  # absolute: see _convert

        context = _shared_context.context = IRContext()
    return context
