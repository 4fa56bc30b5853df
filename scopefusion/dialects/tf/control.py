"""Control flow: TF1 frames (Enter, Exit, Switch, Merge, NextIteration, LoopCond), functional loops and
conditionals (While, StatelessWhile, If, StatelessIf, Case, StatelessCase), calls and Assert.

TF1 frame ops pass their data through unchanged (Enter's output is its input's value, for every
iteration a constant Enter and the first for a loop variable). Merge joins its inputs' shapes: dims that
agree are kept, others become -1, and any input of unknown rank (a loop's back edge that is not inferred
yet) makes the rank unknown, as in TF.

If, Case and calls read their bodies when the builder has put them, inferred, in ``node.subgraphs``
(under the attribute's name: ``then_branch``, ``else_branch``, ``branches:0``..., ``f``): an output joins
the branches' output shapes like Merge (only the taken branch's when the selector is a known constant),
refined by the ``output_shapes`` the node declares. Without bodies: ``output_shapes``, else an unknown rank.
Dtypes come from ``Tout``; a branch output of another dtype is a contradiction. A ``Tout`` the builder could
not convert (it lists a handle dtype the frontend has no DType for) is absent: the bodies' dtypes stand in.

NOTE: a functional While's outputs take the shapes its ``output_shapes`` attribute declares (TF's shape
invariants) and its inputs' shapes when that list is empty (TF's own rule). A dim the invariants leave
free stays -1 here even when the body keeps it: proving that takes inferring the body with the loop's
input shapes, which only the builder can do (a body inferred alone knows its arguments' invariant shapes,
not the loop's).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ... import dtypes as D
from ...ir.attrs import BOOL, INT, LIST_DTYPE, LIST_LIST_INT, STR
from ...ir.opdef import InferContext, OpDef, ParamType
from ._common import ALL, Shape, first_dtype, merge_shapes, tf_op

__all__ = ["definitions"]


def _pass_through(name: str, doc: str = "") -> OpDef:
    return tf_op(name, doc).input("data").output("output", follow=("data", ALL))


def _enter() -> OpDef:
    op = _pass_through("Enter", "Makes its input available in a child frame (a TF1 loop).")
    return op.attr("frame_name", STR).attr("is_constant", BOOL, default=False).attr("parallel_iterations", INT, default=10)


def _switch() -> OpDef:
    op = tf_op("Switch", "Forwards data to output_true or output_false by pred.").input("data").input("pred")
    op.output("output_false", follow=("data", ALL)).output("output_true", follow=("data", ALL))

    def shape(ctx: InferContext) -> None:
        pred = ctx.param("pred").shape
        if pred is not None and len(pred) != 0:
            raise ValueError(f"Switch pred must be a scalar, found shape {list(pred)}")
        ctx.set_output_shape(0, ctx.param("data").shape)
        ctx.set_output_shape(1, ctx.param("data").shape)

    return op.set_infer_shape(shape)


def merged_shape(shapes: list[Shape]) -> Shape:
    """TF's Merge rule: equal dims kept, differing dims -1, any unknown or differing rank unknown."""
    if not shapes or any(s is None for s in shapes):
        return None
    rank = len(shapes[0])  # type: ignore[arg-type]
    if any(len(s) != rank for s in shapes):  # type: ignore[arg-type]
        return None
    return tuple(d if all(s[i] == d for s in shapes) else -1 for i, d in enumerate(shapes[0]))  # type: ignore[arg-type, index]


def _merge() -> OpDef:
    op = tf_op("Merge", "Forwards the first of its inputs to become available.").input("inputs", ParamType.DYNAMIC)
    op.output("output").output("value_index", dtypes=(D.INT32,))

    def dtype(ctx: InferContext) -> None:
        ctx.set_output_dtype(0, first_dtype(ctx.params("inputs")))
        ctx.set_output_dtype(1, D.INT32)

    def shape(ctx: InferContext) -> None:
        ctx.set_output_shape(0, merged_shape([i.shape for i in ctx.params("inputs")]))
        ctx.set_output_shape(1, ())

    return op.set_infer_dtype(dtype).set_infer_shape(shape)


def _loop_cond() -> OpDef:
    op = tf_op("LoopCond", "The loop predicate of a TF1 while frame.").input("input").output("output", follow=("input", ALL))

    def shape(ctx: InferContext) -> None:
        s = ctx.param("input").shape
        if s is not None and len(s) != 0:
            raise ValueError(f"LoopCond input must be a scalar, found shape {list(s)}")
        ctx.set_output_shape(0, ())

    return op.set_infer_shape(shape)


def _declared_shapes(ctx: InferContext) -> list[Shape] | None:
    shapes = ctx.attr("output_shapes")
    if not shapes:
        return None
    if len(shapes) != ctx.num_outputs:
        raise ValueError(f"output_shapes lists {len(shapes)} shapes for {ctx.num_outputs} outputs")
    return [tuple(int(d) if d >= 0 else -1 for d in s) for s in shapes]


def _while(name: str) -> OpDef:
    op = tf_op(name, "A functional loop: outputs are the loop variables after the last iteration.")
    op.input("input", ParamType.DYNAMIC).output("output", ParamType.DYNAMIC)
    op.attr("T", LIST_DTYPE, optional=True).attr("output_shapes", LIST_LIST_INT, default=())

    def dtype(ctx: InferContext) -> None:
        declared = ctx.attr("T")
        for i, info in enumerate(ctx.params("input")):
            ctx.set_output_dtype(i, info.dtype if info.dtype is not None or declared is None else declared[i])

    def shape(ctx: InferContext) -> None:
        inputs = ctx.params("input")
        if len(inputs) != ctx.num_outputs:
            raise ValueError(f"{name} has {len(inputs)} loop inputs and {ctx.num_outputs} outputs")
        declared = _declared_shapes(ctx)
        for i, info in enumerate(inputs):
            ctx.set_output_shape(i, info.shape if declared is None else declared[i])

    return op.set_infer_dtype(dtype).set_infer_shape(shape)


def _tout_dtype(ctx: InferContext, keys: list[str]) -> None:
    tout = ctx.attr("Tout")
    if tout is None:  # fall back on the bodies' output dtypes
        bodies = [b for b in (_body_types(ctx, k) for k in keys) if b is not None]
        tout = [next((b[i][1] for b in bodies if b[i][1] is not None), None) for i in range(ctx.num_outputs)]
        if None in tout:
            raise ValueError("output dtypes are unknown: no Tout attribute and no inferred body gives them")
    if len(tout) != ctx.num_outputs:
        raise ValueError(f"Tout lists {len(tout)} dtypes for {ctx.num_outputs} outputs")
    for i, dt in enumerate(tout):
        ctx.set_output_dtype(i, dt)


def _body_types(ctx: InferContext, key: str) -> list[tuple[Shape, D.DType | None]] | None:
    """The output (shape, dtype) pairs of the inferred body ``key`` in ``node.subgraphs``, or None."""
    body: Any = ctx.subgraphs.get(key)
    if body is None:
        return None
    out: list[tuple[Shape, D.DType | None]] = []
    for value in body.outputs:
        t: Any = getattr(value, "type", None)
        dtype = getattr(t, "dtype", None)
        out.append((None if dtype is None or t.rank is None else tuple(t.shape), dtype))
    if len(out) != ctx.num_outputs:
        raise ValueError(f"body {key!r} has {len(out)} outputs, the node has {ctx.num_outputs}")
    return out


def _from_bodies(ctx: InferContext, keys: list[str]) -> None:
    """Output shapes from the bodies ``keys`` (joined), refined by ``output_shapes``; dtypes checked."""
    bodies = [b for b in (_body_types(ctx, k) for k in keys) if b is not None]
    declared = _declared_shapes(ctx) if "output_shapes" in ctx.opdef.attrs else None
    for i in range(ctx.num_outputs):
        shape: Shape = None
        if bodies and len(bodies) == len(keys):
            shape = merged_shape([b[i][0] for b in bodies])
            for b in bodies:
                if b[i][1] is not None and b[i][1] is not ctx.output_dtype(i):
                    raise ValueError(f"a body's output {i} is {b[i][1]}, Tout says {ctx.output_dtype(i)}")
        if declared is not None:
            shape = merge_shapes(shape, declared[i], f"output {i}'s body shape and output_shapes")
        ctx.set_output_shape(i, shape)


def _branch_keys(ctx: InferContext, selector: str) -> list[str]:
    """The bodies that may run: both branches, or the one a constant selector picks."""
    value = ctx.param(selector).data
    if ctx.opdef.name.endswith("If"):
        keys = ["then_branch", "else_branch"]
        if value is not None and np.asarray(value).size == 1:
            return [keys[0] if bool(np.asarray(value).reshape(-1)[0]) else keys[1]]
        return keys
    keys = sorted((k for k in ctx.subgraphs if k.startswith("branches:")), key=lambda k: int(k.split(":")[1]))
    if value is not None and np.asarray(value).size == 1 and keys:
        index = int(np.asarray(value).reshape(-1)[0])
        return [keys[index] if 0 <= index < len(keys) else keys[-1]]  # out of range runs the last branch
    return keys or ["branches:0"]


def _branching(name: str, selector: str) -> OpDef:
    op = tf_op(name, "A functional conditional: runs one branch function on the inputs.")
    op.input(selector, value_depend=True).input("input", ParamType.DYNAMIC).output("output", ParamType.DYNAMIC)
    op.attr("Tout", LIST_DTYPE, optional=True).attr("output_shapes", LIST_LIST_INT, default=())
    op.set_infer_dtype(lambda ctx: _tout_dtype(ctx, _branch_keys(ctx, selector)))
    return op.set_infer_shape(lambda ctx: _from_bodies(ctx, _branch_keys(ctx, selector)))


def _call(name: str) -> OpDef:
    op = tf_op(name, "Calls a function of the library: its outputs are the function's (body ``f``).")
    op.input("args", ParamType.DYNAMIC).output("output", ParamType.DYNAMIC).attr("Tout", LIST_DTYPE, optional=True)
    return op.set_infer_dtype(lambda ctx: _tout_dtype(ctx, ["f"])).set_infer_shape(lambda ctx: _from_bodies(ctx, ["f"]))


def _assert() -> OpDef:
    op = tf_op("Assert", "Fails at run time when condition is false; no outputs.").input("condition")
    op.input("data", ParamType.DYNAMIC).attr("summarize", INT, default=3)

    def shape(ctx: InferContext) -> None:
        s = ctx.param("condition").shape
        if s is not None and len(s) != 0:
            raise ValueError(f"Assert condition must be a scalar, found shape {list(s)}")

    return op.set_infer_shape(shape).set_infer_dtype(lambda ctx: None)


def definitions() -> list[OpDef]:
    """Every control-flow ``tf`` op definition."""
    ops = [_enter(), _pass_through("Exit", "Leaves a TF1 frame."), _switch(), _merge()]
    ops += [_pass_through("NextIteration", "Feeds a loop variable to the next iteration."), _loop_cond()]
    ops += [_while("While"), _while("StatelessWhile")]
    ops += [_branching("If", "cond"), _branching("StatelessIf", "cond")]
    ops += [_branching("Case", "branch_index"), _branching("StatelessCase", "branch_index")]
    ops += [_call("PartitionedCall"), _call("StatefulPartitionedCall"), _assert()]
    ops.append(tf_op("ControlTrigger", "A no-op that only orders control edges."))
    return ops
