"""The reference executor: runs a converted model's IR op by op (after seed 002's execution model).

* The active shape profile is chosen by the input shapes; a shape no profile accepts is an error listing
  the profiles.
* Nodes run in schedule order. Static tensors live in one numpy arena at the memory plan's offsets;
  a Reshape-like op whose output the plan forwards gets a view of its input's buffer (no copy).
* A node with a dynamic output first runs its shape inference on the actual inputs, then its output is
  allocated, then the kernel runs into it (outputs whose shape only the kernel knows, like ``Where``, are
  allocated from the kernel's result).
* Control flow runs its bodies: TF ``While`` / ``StatelessWhile`` / ``If`` / ``StatelessIf`` / ``Case`` and
  ONNX ``If`` / ``Loop`` / ``Scan``. Bodies allocate their tensors at run time.
* In checked mode every arena region is filled with NaN (all bits set) when its tensor's lifetime ends,
  so a plan that overlaps two live tensors shows up as a wrong number instead of passing silently.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Mapping, Sequence

import numpy as np

from ..errors import InferenceError, VerifyError
from ..ir.graph import CONST_OP, DATA_OP, Graph, Node, Value
from ..ir.opdef import InferContext, InputInfo
from ..ir.types import TensorType
from ..ir_builder.profiles import Profile, input_name
from . import control_flow
from .kernels import is_opaque, run_kernel

if TYPE_CHECKING:  # pragma: no cover
    from ..ir_builder.memory_plan import MemoryPlan
    from ..model import Model

__all__ = ["Executor", "RunResult", "run_graph"]


@dataclass
class RunResult:
    """Outputs by name (and in order), the profile that ran, and what the arena held."""

    outputs: dict[str, np.ndarray]
    ordered: list[Any]
    profile: int
    arena_bytes: int = 0
    dynamic_allocations: int = 0
    stats: dict[str, int] = field(default_factory=dict)


class Executor:
    """Runs a converted :class:`~scopefusion.model.Model`."""

    def __init__(self, model: "Model", *, checked: bool = False) -> None:
        self.model = model
        self.checked = checked

    def select_profile(self, inputs: Mapping[str, np.ndarray]) -> Profile:
        shapes = {k: np.shape(v) for k, v in inputs.items()}
        for profile in self.model.profiles:
            if profile.matches(shapes):
                return profile
        listed = "; ".join(
            f"profile {p.index}: " + ", ".join(f"{k}:{'*' if v is None else list(v)}" for k, v in p.inputs.items())
            for p in self.model.profiles
        )
        given = ", ".join(f"{k}:{list(v)}" for k, v in shapes.items())
        raise VerifyError(f"input shapes {given} match no shape profile of the model ({listed}); convert with a matching --input-shape")

    def run(self, inputs: Mapping[str, np.ndarray]) -> RunResult:
        profile = self.select_profile(inputs)
        graph = profile.graph
        names = [input_name(v) for v in graph.inputs]
        missing = [n for n in names if n not in inputs]
        if missing:
            raise VerifyError(f"the model needs inputs {', '.join(missing)}; given {', '.join(sorted(inputs)) or 'none'}")
        feeds = []
        for value, name in zip(graph.inputs, names):
            array = np.asarray(inputs[name])
            t = value.type
            if isinstance(t, TensorType) and array.dtype != t.dtype.numpy:
                array = array.astype(t.dtype.numpy)
            feeds.append(array)
        state = _Run(graph, profile.memory_plan, self.checked)
        outputs = state.run(feeds, {})
        out_names = graph.attrs.get("_output_names") or [v.ref for v in graph.outputs]
        result = RunResult(
            {n: _materialize(o) for n, o in zip(out_names, outputs)},
            outputs,
            profile.index,
            arena_bytes=0 if state.arena is None else state.arena.nbytes,
            dynamic_allocations=state.dynamic_allocations,
        )
        return result


def run_graph(graph: Graph, feeds: Sequence[Any], outer: Mapping[str, Any] | None = None, *, checked: bool = False) -> list[Any]:
    """Runs a graph (a body, or any graph without a memory plan) with all tensors allocated at run time."""
    return _Run(graph, None, checked).run(list(feeds), dict(outer or {}))


class _Allocated:
    """A dynamic output already placed in the buffer allocated for it before its kernel ran."""

    __slots__ = ("array",)

    def __init__(self, array: np.ndarray) -> None:
        self.array = array


def _materialize(x: Any) -> Any:
    return np.array(x, copy=True) if isinstance(x, np.ndarray) else x


class _Run:
    """The state of one graph run."""

    def __init__(self, graph: Graph, plan: "MemoryPlan | None", checked: bool) -> None:
        self.graph = graph
        self.plan = plan
        self.checked = checked
        self.arena = np.zeros(plan.arena_bytes, np.uint8) if plan is not None else None
        self.dynamic_allocations = 0
        self.ending: dict[int, list[tuple[int, int]]] = {}
        if plan is not None and checked:
            for buf in plan.buffers:
                self.ending.setdefault(buf.last, []).append((buf.offset, buf.size))

    def run(self, feeds: list[Any], outer: dict[str, Any]) -> list[Any]:
        graph = self.graph
        env: dict[int, Any] = {}
        names: dict[str, Any] = dict(outer)  # tensors visible to bodies by their original names
        feed_iter = iter(feeds)
        inputs = {id(v) for v in graph.inputs}
        for position, node in enumerate(graph.nodes):
            if node.op == DATA_OP:
                value = node.outputs[0]
                outer_name = node.attrs.get("_outer_name")
                if id(value) in inputs and outer_name is None:
                    env[id(value)] = next(feed_iter)
                elif outer_name is not None and outer_name in names:
                    env[id(value)] = names[outer_name]
                else:
                    raise VerifyError(f"graph {graph.name!r}: input {node.name!r} has no value to run with")
            elif node.op == CONST_OP:
                env[id(node.outputs[0])] = node.attrs.get("value")
            else:
                args = [None if v is None else env.get(id(v)) for v in node.inputs]
                if any(v is not None and id(v) not in env for v in node.inputs):
                    raise VerifyError(f"node {node.name!r} ({node.op}) reads a value that was not computed (a back edge?)")
                results = self._execute(node, args, names)
                for value, result in zip(node.outputs, results):
                    env[id(value)] = self._place(node, value, result, args)
            for value in node.outputs:
                tname = value.meta.get("tensor_name")
                if tname:
                    names[tname] = env[id(value)]
            if self.checked:
                for offset, size in self.ending.get(position, ()):
                    self.arena[offset : offset + size] = 0xFF  # type: ignore[index]
        return [env[id(v)] for v in graph.outputs]

    # ------------------------------------------------------------------ one node
    def _execute(self, node: Node, args: list[Any], names: dict[str, Any]) -> list[Any]:
        if node.subgraphs:
            return control_flow.run(node, args, names, self.checked)
        expected = self._infer_dynamic(node, args)
        # Seed 002's order for a dynamic output: its shape inferred on the actual inputs, then its buffer
        # allocated, then the kernel run into it. An output whose shape only the kernel knows (Where,
        # NonMaxSuppression) is allocated from the kernel's result in _place.
        preallocated = {}
        for i, shape in expected.items():
            t = node.outputs[i].type
            if all(d >= 0 for d in shape) and isinstance(t, TensorType) and t.dtype.numpy.kind != "O":
                preallocated[i] = np.empty(shape, t.dtype.numpy)
                self.dynamic_allocations += 1
        results = run_kernel(node, args)
        if len(results) < len(node.outputs):
            raise VerifyError(f"node {node.name!r} ({node.op}): the kernel gave {len(results)} outputs, the node has {len(node.outputs)}")
        for i, shape in expected.items():
            got = np.shape(results[i])
            if len(got) != len(shape) or any(s >= 0 and s != g for s, g in zip(shape, got)):
                raise VerifyError(
                    f"node {node.name!r} ({node.op}) output {i}: shape inference gave {list(shape)} at run time but the "
                    f"kernel produced {list(got)}"
                )
            if i in preallocated:
                preallocated[i][...] = results[i]
                results[i] = _Allocated(preallocated[i])
        return results

    def _infer_dynamic(self, node: Node, args: list[Any]) -> dict[int, tuple[int, ...]]:
        """Run-time shape inference for the dynamic outputs of ``node`` (seed 002: infer, allocate, run)."""
        dynamic = [i for i, v in enumerate(node.outputs) if not (isinstance(v.type, TensorType) and v.type.is_static)]
        if not dynamic or node.opdef is None:
            return {}
        infos = []
        for v, a in zip(node.inputs, args):
            if v is None or a is None or is_opaque(a):
                infos.append(None if v is None else InputInfo(None, getattr(v.type, "dtype", None)))
            else:
                arr = np.asarray(a)
                infos.append(InputInfo(arr.shape, getattr(v.type, "dtype", None), "ND", arr))
        try:
            ctx = InferContext(node.opdef, node.name, infos, dict(node.attrs.items()), len(node.outputs), node.subgraphs)
            node.opdef.infer(ctx)
        except (InferenceError, ValueError, TypeError):
            return {}  # inference cannot say more than the kernel will
        out = {}
        for i in dynamic:
            shape = ctx.output_shape(i)
            if shape is not None:
                out[i] = shape
        return out

    def _place(self, node: Node, value: Value, result: Any, args: list[Any]) -> Any:
        """Puts a kernel result where it lives: its arena region, a forwarded view, or a fresh allocation."""
        if isinstance(result, _Allocated):
            return result.array  # allocated before its kernel ran (a dynamic output)
        if is_opaque(result):
            return result
        result = np.asarray(result)
        plan = self.plan
        offset = None if plan is None else plan.offset(value)
        if offset is None and plan is not None and plan.external_forwards.get(value.ref) is not None:
            owner = plan.external_forwards[value.ref]
            for inp, arg in zip(node.inputs, args):  # a view of a weight or input buffer: no copy, no arena
                if inp is not None and isinstance(arg, np.ndarray) and arg.size == result.size:
                    if inp.ref == owner or plan.external_forwards.get(inp.ref) == owner:
                        return arg.reshape(result.shape)
        if offset is None or plan is None:
            self.dynamic_allocations += 1
            out = np.empty(result.shape, result.dtype)  # allocated now that the shape is known
            out[...] = result
            return out
        t = value.type
        dtype = t.dtype.numpy if isinstance(t, TensorType) else result.dtype
        shape = t.shape if isinstance(t, TensorType) else result.shape
        if tuple(result.shape) != tuple(shape):
            raise VerifyError(
                f"node {node.name!r} ({node.op}) output {value.index}: the plan reserved {list(shape)} but the kernel "
                f"produced {list(result.shape)}"
            )
        source = plan.forwarded_from(value)
        if source is not None:
            for inp, arg in zip(node.inputs, args):
                if inp is not None and inp.ref == source and isinstance(arg, np.ndarray) and arg.nbytes == result.nbytes:
                    view = arg.reshape(shape)  # memory forwarding: the input's buffer, no copy
                    if not np.shares_memory(view, arg):  # pragma: no cover - reshape of a contiguous view
                        break
                    return view
        view = np.ndarray(shape, dtype=dtype, buffer=self.arena, offset=offset)  # type: ignore[call-overload]
        view[...] = result.astype(dtype, copy=False)
        return view
