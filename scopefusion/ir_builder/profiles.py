"""Shape profiles (after seed 002): one fully inferred copy of the graph per set of input shapes.

A profile fixes the shape of some graph inputs (an input left out keeps the model's own shape), is
inferred on its own clone of the graph, and gets its own memory plan. All profiles live in one model;
at run time exactly one is active, chosen by the input shapes.
"""

from __future__ import annotations

from contextlib import nullcontext
from typing import Any, Callable, ContextManager, Mapping, Sequence

from ..errors import InferenceError
from ..ir.graph import Graph, Value
from ..ir.types import TensorType
from .shape_inference import InferenceResult, infer_graph

__all__ = ["Profile", "build_profile", "deferred_profile", "input_names", "normalize_input_shapes"]


class Profile:
    """One shape profile: the input shapes it fixes, its inferred graph, and (once planned) its memory plan.

    ``graph`` and ``inference`` (and ``memory_plan``) may be given as functions that make them: they are
    then made on first access, once (see :func:`deferred_profile`), with the same result as when made
    up front.
    """

    def __init__(
        self,
        index: int,
        inputs: dict[str, tuple[int, ...] | None],
        graph: Graph | None = None,
        inference: InferenceResult | None = None,
        memory_plan: Any = None,
        *,
        make: Callable[[], tuple[Graph, InferenceResult]] | None = None,
        plan: Callable[["Profile"], Any] | None = None,
    ) -> None:
        self.index = index
        self.inputs = inputs
        self._graph = graph
        self._inference = inference
        self._memory_plan = memory_plan
        self._make = make  # makes (graph, inference) when they were not given
        self._plan = plan  # makes the memory plan when it is first read

    def _made(self) -> None:
        make = self._make
        if make is not None:
            self._graph, self._inference = make()
            self._make = None

    @property
    def graph(self) -> Graph:
        if self._make is not None:
            self._made()
        return self._graph  # type: ignore[return-value]

    @graph.setter
    def graph(self, graph: Graph) -> None:
        self._made()
        self._graph = graph

    @property
    def inference(self) -> InferenceResult:
        if self._make is not None:
            self._made()
        return self._inference  # type: ignore[return-value]

    @inference.setter
    def inference(self, inference: InferenceResult) -> None:
        self._made()
        self._inference = inference

    @property
    def memory_plan(self) -> Any:
        plan = self._plan
        if plan is not None:
            self._memory_plan = plan(self)
            self._plan = None
        return self._memory_plan

    @memory_plan.setter
    def memory_plan(self, plan: Any) -> None:
        self._plan = None
        self._memory_plan = plan

    def defer_memory_plan(self, plan: Callable[["Profile"], Any]) -> None:
        """Makes the memory plan with ``plan(self)`` when it is first read."""
        self._plan = plan

    def __repr__(self) -> str:
        return f"Profile({self.index}, {self.inputs!r})"

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "index": self.index,
            "inputs": {k: (None if v is None else list(v)) for k, v in self.inputs.items()},
            "dynamic_tensors": len(self.inference.dynamic_values),
        }
        plan = self.memory_plan
        if plan is not None:
            out.update(
                arena_bytes=plan.arena_bytes,
                naive_bytes=plan.naive_bytes,
                lower_bound_bytes=plan.lower_bound_bytes,
                dynamic_tensors=plan.dynamic_tensors,
            )
        return out

    def matches(self, shapes: Mapping[str, Sequence[int]]) -> bool:
        """True when the given input shapes fit this profile (unknown dims match anything)."""
        for value in self.graph.inputs:
            name = input_name(value)
            if name not in shapes:
                continue
            t = value.type
            if not isinstance(t, TensorType) or t.rank is None:
                continue
            given = tuple(shapes[name])
            if len(given) != len(t.shape) or any(d >= 0 and d != g for d, g in zip(t.shape, given)):
                return False
        return True


def input_name(value: Value) -> str:
    """The user-facing name of a graph input (a signature key or the input tensor's name)."""
    return value.producer.attrs.get("_input_name") or value.producer.name


def input_names(graph: Graph) -> list[str]:
    return [input_name(v) for v in graph.inputs]


def normalize_input_shapes(
    input_shapes: Mapping[str, Sequence[int]] | Sequence[Mapping[str, Sequence[int]]] | None,
) -> list[dict[str, tuple[int, ...]]]:
    """``None`` → no explicit profile; one mapping → one profile; a list of mappings → one profile each."""
    if input_shapes is None:
        return []
    if isinstance(input_shapes, Mapping):
        input_shapes = [input_shapes]
    out = []
    for i, profile in enumerate(input_shapes):
        if not isinstance(profile, Mapping):
            raise InferenceError(f"input_shapes[{i}] is a {type(profile).__name__}; give a mapping of input name to shape")
        fixed: dict[str, tuple[int, ...]] = {}
        for name, shape in profile.items():
            try:
                dims = tuple(int(d) for d in shape)
            except (TypeError, ValueError):
                raise InferenceError(f"input_shapes[{i}][{name!r}] = {shape!r} is not a list of integers") from None
            if any(d < -1 for d in dims):
                raise InferenceError(f"input_shapes[{i}][{name!r}] = {list(dims)}: dims are >= 0, or -1 for unknown")
            fixed[str(name)] = dims
        out.append(fixed)
    return out


def build_profile(
    graph: Graph,
    index: int,
    shapes: Mapping[str, tuple[int, ...]],
    *,
    strict: bool = False,
    progress: Callable[[int, int], None] | None = None,
    inferred: InferenceResult | None = None,
) -> Profile:
    """Clones ``graph``, fixes the given input shapes, and infers the clone.

    ``inferred``: ``graph``'s own inference result, when it has been inferred; nodes of the clone whose
    inputs did not change take their answers from it instead of being inferred again (unless ``graph`` has
    been edited since: :meth:`InferenceResult.describes`).

    Raises:
        InferenceError: a shape names no input, has the wrong rank or contradicts a static dim of the
            model, or inference finds the shapes contradict the graph.
    """
    clone = graph.clone()
    clone.name = f"{graph.name}_profile{index}"
    by_name = {input_name(v): v for v in clone.inputs}
    for name in shapes:
        if name not in by_name:
            raise InferenceError(
                f"profile {index}: --input-shape names {name!r}, which is not a graph input; inputs are "
                f"{', '.join(sorted(by_name)) or 'none'}"
            )
    fixed: dict[str, tuple[int, ...] | None] = {}
    for name, value in by_name.items():
        t = value.type
        if name not in shapes:
            fixed[name] = None if not isinstance(t, TensorType) or t.rank is None else t.shape
            continue
        dims = shapes[name]
        if isinstance(t, TensorType) and t.rank is not None:
            if len(dims) != t.rank:
                raise InferenceError(
                    f"profile {index}: input {name!r} has rank {t.rank} (shape {_fmt(t.shape)}) but the profile gives "
                    f"{_fmt(dims)} (rank {len(dims)}); give {t.rank} dims"
                )
            for axis, (have, want) in enumerate(zip(t.shape, dims)):
                if have >= 0 and want >= 0 and have != want:
                    raise InferenceError(
                        f"profile {index}: input {name!r} dim {axis} is {have} in the model but {want} in the profile "
                        f"{_fmt(dims)}; only unknown dims (-1) can be set"
                    )
        if not isinstance(t, TensorType):
            raise InferenceError(f"profile {index}: input {name!r} has no known dtype, so its shape cannot be set")
        value.type = clone.context.tensor(t.element, dims, t.format)
        fixed[name] = dims
    try:
        earlier = (graph, inferred) if inferred is not None and inferred.describes(graph) else None
        inference = infer_graph(clone, strict=strict, progress=progress, earlier=earlier)
    except InferenceError as e:
        raise InferenceError(f"profile {index} ({_describe(fixed)}): {e}") from None
    return Profile(index, fixed, clone, inference)


def deferred_profile(
    graph: Graph,
    index: int,
    *,
    strict: bool = False,
    inferred: InferenceResult | None = None,
    around: Callable[[], ContextManager[Any]] = nullcontext,
) -> Profile:
    """The profile of ``graph``'s own input shapes, made on first access of its ``graph`` or ``inference``
    as :func:`build_profile` with no shapes makes it (inside ``around()``, e.g. the conversion's budgets).

    Inference of the clone sees the inputs ``graph`` was inferred with, so it finds what ``graph``'s own
    inference found and cannot fail where that did not: only the moment of the work moves.
    """
    fixed: dict[str, tuple[int, ...] | None] = {}
    for value in graph.inputs:
        t = value.type
        fixed[input_name(value)] = None if not isinstance(t, TensorType) or t.rank is None else t.shape

    def make() -> tuple[Graph, InferenceResult]:
        with around():
            made = build_profile(graph, index, {}, strict=strict, inferred=inferred)
        return made.graph, made.inference

    return Profile(index, fixed, make=make)


def _fmt(dims: Sequence[int]) -> str:
    return "[" + ",".join(str(d) for d in dims) + "]"


def _describe(shapes: Mapping[str, tuple[int, ...] | None]) -> str:
    return "; ".join(f"{k}:{'*' if v is None else ','.join(map(str, v))}" for k, v in shapes.items())
