"""Synthetic IR graphs for the comparison tests, built from a spec in any topological order with any names.

A spec is a list of :class:`Op` (inputs refer to earlier ops by index). :func:`build` turns it into an
IR graph; the same spec built in another schedule order or with other names is the same graph
structurally, which is what the tests compare against.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

import numpy as np

from scopefusion import dtypes
from scopefusion.ir.graph import Graph
from scopefusion.ir.types import IRContext

F32 = dtypes.FLOAT32
WIDTH = 8


@dataclass
class Op:
    op: str
    inputs: list[tuple[int, int] | None] = field(default_factory=list)  # (producer index, output index)
    attrs: dict[str, Any] = field(default_factory=dict)
    outputs: int = 1
    controls: list[int] = field(default_factory=list)
    shape: tuple[int, ...] = (2, WIDTH)
    name: str = ""


@dataclass
class Spec:
    ops: list[Op]
    outputs: list[tuple[int, int]]

    def add(self, op: str, *inputs: int | tuple[int, int] | None, **kw: Any) -> int:
        refs = [None if i is None else (i if isinstance(i, tuple) else (i, 0)) for i in inputs]
        self.ops.append(Op(op, refs, **kw))
        return len(self.ops) - 1

    def const(self, value: np.ndarray, name: str = "") -> int:
        return self.add("ge.Const", attrs={"value": np.asarray(value, np.float32)}, shape=np.shape(value), name=name)


def transformer(blocks: int, seed: int = 0, dead: bool = True) -> Spec:
    """``blocks`` pre-norm transformer blocks (about 33 nodes each) on one input ``x`` [2, WIDTH]."""
    rng = np.random.default_rng(seed)
    spec = Spec([], [])
    h = spec.add("ge.Data", attrs={"index": 0}, name="x")
    for _b in range(blocks):
        w = lambda: spec.const(rng.standard_normal((WIDTH, WIDTH)).astype(np.float32))  # noqa: E731
        mean = spec.add("t.ReduceMean", h, attrs={"axes": (-1,), "keepdims": True})
        sub = spec.add("t.Sub", h, mean)
        var = spec.add("t.ReduceMean", spec.add("t.Mul", sub, sub), attrs={"axes": (-1,), "keepdims": True})
        rs = spec.add("t.Rsqrt", spec.add("t.Add", var, spec.const(np.float32(1e-5))))
        norm = spec.add("t.Mul", sub, rs)
        ln = spec.add("t.Add", spec.add("t.Mul", norm, spec.const(rng.standard_normal(WIDTH))), spec.const(rng.standard_normal(WIDTH)))
        q, k, v = (spec.add("t.MatMul", ln, w()) for _ in range(3))
        scores = spec.add("t.Mul", spec.add("t.MatMul", q, spec.add("t.Transpose", k, attrs={"perm": (1, 0)})), spec.const(np.float32(0.35)))
        probs = spec.add("t.Softmax", scores, attrs={"axis": -1}, controls=[mean])
        attn = spec.add("t.MatMul", spec.add("t.MatMul", probs, v), w())
        r = spec.add("t.Add", h, attn)
        up = spec.add("t.Gelu", spec.add("t.MatMul", r, w()), attrs={"approximate": "tanh"})
        halves = spec.add("t.Split", up, attrs={"axis": 0}, outputs=2, shape=(1, WIDTH))
        joined = spec.add("t.Concat", (halves, 1), (halves, 0), attrs={"axis": 0})
        h = spec.add("t.Add", r, spec.add("t.MatMul", joined, w()))
        if dead:
            spec.add("t.Identity", ln)  # read by nothing: only the forward pass reaches it
    spec.outputs = [(h, 0)]
    return spec


def topological_orders(spec: Spec, seed: int | None) -> list[int]:
    """The spec's indices in a random topological order (``seed`` None: the spec's own order)."""
    if seed is None:
        return list(range(len(spec.ops)))
    rng = random.Random(seed)
    deps = [{i for i, _ in filter(None, op.inputs)} | set(op.controls) for op in spec.ops]
    users: list[list[int]] = [[] for _ in spec.ops]
    for j, d in enumerate(deps):
        for i in d:
            users[i].append(j)
    waiting = [len(d) for d in deps]
    ready = [j for j, n in enumerate(waiting) if n == 0]
    order = []
    while ready:
        j = ready.pop(rng.randrange(len(ready)))
        order.append(j)
        for u in users[j]:
            waiting[u] -= 1
            if waiting[u] == 0:
                ready.append(u)
    return order


def build(
    spec: Spec,
    *,
    order_seed: int | None = None,
    names: Callable[[int, Op], str] | None = None,
    context: IRContext | None = None,
    edit: Callable[[int, Op], Op] | None = None,
) -> Graph:
    """The IR graph of ``spec``; ``order_seed`` shuffles the schedule, ``names`` renames, ``edit`` changes ops."""
    ctx = context or IRContext()
    graph = Graph("main", ctx)
    values: dict[int, Any] = {}
    ops = [edit(i, op) if edit else op for i, op in enumerate(spec.ops)]
    data = [i for i, op in enumerate(ops) if op.op == "ge.Data"]
    for i in data:  # graph inputs first, in their index order
        values[i] = graph.add_input(_name(i, ops[i], names), ctx.tensor(F32, ops[i].shape)).producer
    for i in topological_orders(spec, order_seed):
        op = ops[i]
        if op.op == "ge.Data":
            continue
        if op.op == "ge.Const":
            values[i] = graph.add_const(op.attrs["value"], _name(i, op, names), unique=False).producer
            continue
        inputs = [None if ref is None else values[ref[0]].outputs[ref[1]] for ref in op.inputs]
        values[i] = graph.add_node(
            op.op, inputs, name=_name(i, op, names), attrs=op.attrs, allow_unknown=True,
            output_types=[ctx.tensor(F32, op.shape)] * op.outputs, control_inputs=[values[c] for c in op.controls],
        )  # fmt: skip
    graph.set_outputs([values[i].outputs[k] for i, k in spec.outputs])
    return graph


def _name(i: int, op: Op, names: Callable[[int, Op], str] | None) -> str:
    if names is not None:
        return names(i, op)
    return op.name or f"n{i}_{op.op.split('.')[-1]}"


def renamed(i: int, op: Op) -> str:
    return f"other/{op.op.split('.')[-1].lower()}_{i * 7919 % 100003}"


def index_of(spec: Spec, op: str, nth: int) -> int:
    """The index of the ``nth`` op of type ``op`` in the spec."""
    found = [i for i, o in enumerate(spec.ops) if o.op == op]
    return found[nth]


def replace(ops: Sequence[int], **changes: Any) -> Callable[[int, Op], Op]:
    """An ``edit`` for :func:`build` that changes the fields of the ops at ``ops``."""
    chosen = set(ops)

    def edit(i: int, op: Op) -> Op:
        if i not in chosen:
            return op
        fields = {**op.__dict__, **changes}
        if "attrs" in changes:
            fields["attrs"] = {**op.attrs, **changes["attrs"]}
        return Op(**fields)

    return edit
