"""Values the recurrent-loop rules read: constants, shapes and column slices, across a loop's graphs.

An :class:`Env` is one graph a loop's values live in (the main graph, or a ``While`` body whose
loop-invariant inputs stand for tensors of the enclosing graph). :meth:`Env.value` folds constants
through ``Identity``, constant ``Enter`` nodes, invariant body inputs, ``Split``, ``Squeeze``,
``StridedSlice``, ``Reshape``, ``ConcatV2``, ``Range`` and the like (the weights, the perms, the bounds);
:func:`shape_of` and :func:`sym` read shapes and integer shape arithmetic with unknown dims kept
symbolic as :class:`Dim`; :func:`column_slice` reads the column slices (``Split``, ``SplitV``,
``StridedSlice``) that gate pre-activations go through.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Sequence

import numpy as np

from scopefusion.scope import Refused, ScopeGraph

__all__ = [
    "ADD_OPS",
    "Dim",
    "Env",
    "LazyShape",
    "Refused",
    "Tensor",
    "column_slice",
    "full_slice",
    "int_list",
    "shape_of",
    "slice_index",
    "sym",
]

Tensor = tuple[str, int]

ADD_OPS = ("Add", "AddV2")
_PASS_OPS = ("Identity", "StopGradient", "Snapshot")


@dataclass(frozen=True)
class Dim:
    """Dimension ``axis`` of the tensor ``node:index`` when the graph does not fix it."""

    node: str
    index: int
    axis: int

    def __repr__(self) -> str:
        return f"dim {self.axis} of {self.node}:{self.index}"


# ------------------------------------------------------------------------------------------ values
class Env:
    """One graph a loop's values live in: the main graph, or a ``While`` body whose loop-invariant
    inputs stand for tensors of the enclosing graph (``invariants``: body input node → outer tensor)."""

    def __init__(
        self, graph: ScopeGraph, *, outer: Env | None = None, invariants: dict[str, Tensor] | None = None
    ) -> None:
        self.graph = graph
        self.outer = outer
        self.invariants = dict(invariants or {})
        self._values: dict[Tensor, Any] = {}
        self._resolved: dict[Tensor, tuple[Env, Tensor]] = {}
        #: Answers of :func:`~.base.recurrent.affine` in this graph (an affine map, or why not), by its arguments.
        self.affine_answers: dict[Any, Any] = {}

    def node(self, name: str) -> Any:
        return self.graph.node(name)

    def resolve(self, tensor: Tensor) -> tuple[Env, Tensor]:
        """``tensor`` seen through ``Identity`` reads, constant ``Enter`` nodes and invariant body inputs
        (found once per tensor: the graphs do not change)."""
        found = self._resolved.get(tensor)
        if found is None:
            found = self._resolved[tensor] = self._resolve(tensor)
        return found

    def _resolve(self, tensor: Tensor) -> tuple[Env, Tensor]:
        env, t = self, tensor
        for _ in range(64):
            node = env.graph.get(t[0])
            if node is None:
                break
            if node.op_type in _PASS_OPS and node.inputs:
                t = node.inputs[0]
                continue
            if node.op_type in ("Enter", "RefEnter") and node.attrs.get("is_constant") and node.inputs:
                t = node.inputs[0]
                continue
            outer = env.invariants.get(node.name)
            if outer is not None and env.outer is not None:
                env, t = env.outer, outer
                continue
            break
        return env, t

    def same(self, a: Tensor, b: Tensor) -> bool:
        """Whether ``a`` and ``b`` are one tensor once resolved."""
        ea, ta = self.resolve(a)
        eb, tb = self.resolve(b)
        return ea is eb and ta == tb

    def producer(self, tensor: Tensor) -> tuple[Env, Any, int]:
        """``(env, node, output index)`` of the resolved tensor."""
        env, t = self.resolve(tensor)
        return env, env.node(t[0]), t[1]

    def value(self, tensor: Tensor) -> np.ndarray | None:
        """The tensor's value when it is computed from constants alone, else None."""
        env, t = self.resolve(tensor)
        if env is not self:
            return env.value(t)
        if t not in self._values:
            self._values[t] = None  # a cycle through a back edge evaluates to "not constant"
            try:
                self._values[t] = _fold(self, self.node(t[0]), t[1])
            except (ValueError, TypeError, IndexError, KeyError):
                self._values[t] = None
        return self._values[t]


def int_list(array: np.ndarray | None) -> list[int] | None:
    if array is None or array.dtype.kind not in "iu":
        return None
    return [int(v) for v in array.reshape(-1)]


def slice_index(node: Any, begin: Sequence[int], end: Sequence[int], strides: Sequence[int], rank: int) -> tuple | None:
    """The numpy index of a ``StridedSlice`` with constant bounds, or None for masks it does not model."""
    if node.attrs.get("ellipsis_mask", 0) or node.attrs.get("new_axis_mask", 0):
        return None
    bmask, emask, smask = (int(node.attrs.get(k, 0)) for k in ("begin_mask", "end_mask", "shrink_axis_mask"))
    if not len(begin) == len(end) == len(strides) or len(begin) > rank:
        return None
    index: list[Any] = []
    for k, (b, e, s) in enumerate(zip(begin, end, strides)):
        if smask >> k & 1:
            index.append(int(b))
            continue
        index.append(slice(None if bmask >> k & 1 else int(b), None if emask >> k & 1 else int(e), int(s)))
    index.extend(slice(None) for _ in range(rank - len(begin)))
    return tuple(index)


def full_slice(index: Any) -> bool:
    """Whether a numpy index entry takes a whole axis."""
    return isinstance(index, slice) and index.start is None and index.stop is None and index.step in (None, 1)


def _fold(env: Env, node: Any, index: int) -> np.ndarray | None:
    """Constant folding of the few ops that compute weights and shapes in RNN graphs."""
    if node.value is not None:
        return np.asarray(node.value) if index == 0 else None
    op = node.op_type
    args = node.inputs
    if op in ("Split", "SplitV"):
        data = env.value(args[1] if op == "Split" else args[0])
        axis = env.value(args[0] if op == "Split" else args[2])
        if data is None or axis is None:
            return None
        split_axis = int(axis.reshape(()))
        if op == "Split":
            return np.split(data, int(node.attrs["num_split"]), axis=split_axis)[index]
        sizes = int_list(env.value(args[1]))
        if sizes is None or -1 in sizes:
            return None
        return np.split(data, np.cumsum(sizes)[:-1], axis=split_axis)[index]
    if index != 0 or op not in _FOLDED_OPS:
        return None
    vals = [v for v in (env.value(a) for a in args) if v is not None]
    if len(vals) != len(args):
        return None
    if op == "Squeeze":
        axes = tuple(int(a) for a in node.attrs.get("squeeze_dims", ()))
        return np.squeeze(vals[0], axes) if axes else np.squeeze(vals[0])
    if op == "StridedSlice":
        begin, end, strides = (int_list(v) or [] for v in vals[1:])
        idx = slice_index(node, begin, end, strides, rank=vals[0].ndim)
        return None if idx is None else np.asarray(vals[0][idx])
    if op == "Reshape":
        return vals[0].reshape([int(d) for d in vals[1].reshape(-1)])
    if op == "Transpose":
        return np.transpose(vals[0], [int(p) for p in vals[1].reshape(-1)])
    if op == "ExpandDims":
        return np.expand_dims(vals[0], int(vals[1].reshape(())))
    if op in ("ConcatV2", "Pack"):
        if op == "Pack":
            return np.stack(vals, axis=int(node.attrs.get("axis", 0)))
        return np.concatenate(vals[:-1], axis=int(vals[-1].reshape(())))
    if op == "Cast":
        dst = getattr(node.attrs.get("DstT"), "numpy", None)
        return None if dst is None else vals[0].astype(dst)
    if op == "Range":
        bounds: list[Any] = [v.reshape(()) for v in vals]  # 0-d arrays, which numpy's stubs do not take here
        return np.arange(*bounds).astype(vals[0].dtype)
    if op == "Fill":
        return np.full([int(d) for d in vals[0].reshape(-1)], vals[1].reshape(()))
    if op in ("Max", "Min", "Sum", "Prod", "Mean"):
        reducers: dict[str, Callable[..., Any]] = {
            "Max": np.max, "Min": np.min, "Sum": np.sum, "Prod": np.prod, "Mean": np.mean
        }
        fn = reducers[op]
        axes = tuple(int(a) for a in vals[1].reshape(-1))
        out = fn(vals[0], axis=axes, keepdims=bool(node.attrs.get("keep_dims", False))) if axes else vals[0]
        return np.asarray(out).astype(vals[0].dtype)
    if op in _BINARY:
        return np.asarray(_BINARY[op](vals[0], vals[1]))
    return None


_BINARY: dict[str, Callable[..., Any]] = {"Add": np.add, "AddV2": np.add, "Sub": np.subtract, "Mul": np.multiply,
                                          "Minimum": np.minimum, "Maximum": np.maximum}  # fmt: skip

# The op types :func:`_fold` computes from constant inputs. Any other op's value is None whatever its inputs
# are, so its inputs are not folded first: a value never depends on the order the folds ran in (a fold that
# meets a cycle gives None, and so does every fold on that cycle), so skipping them changes no answer.
_FOLDED_OPS = frozenset({
    "Squeeze", "StridedSlice", "Reshape", "Transpose", "ExpandDims", "ConcatV2", "Pack", "Cast", "Range", "Fill",
    "Max", "Min", "Sum", "Prod", "Mean", *_BINARY,
})


class LazyShape:
    """The shape of a tensor of unknown rank: dim ``k`` is ``Dim(node, index, k)``."""

    def __init__(self, tensor: Tensor) -> None:
        self.tensor = tensor

    def __getitem__(self, k: int) -> Dim:
        if not isinstance(k, int) or k < 0:
            raise IndexError(f"dim {k!r} of a tensor of unknown rank")
        return Dim(self.tensor[0], self.tensor[1], k)


_SAME_SHAPE = frozenset(
    {"ReverseV2", "Reverse", "BiasAdd", "Relu", "Relu6", "Elu", "Selu", "Tanh", "Sigmoid", "Softsign", "Softplus",
     "LeakyRelu", "Neg", "Abs", "Exp", "Square", "Sqrt", "Rsqrt"}
)


def shape_of(env: Env, tensor: Tensor, depth: int = 32) -> tuple | LazyShape:
    """The tensor's shape, dims as ints or :class:`Dim` (the dim of the tensor it comes from, when the
    graph does not fix it); a :class:`LazyShape` when the rank is not known either. Follows graph inputs,
    ``_output_shapes``, Transpose, shape-preserving ops, ConcatV2 and TensorListStack."""
    env, t = env.resolve(tensor)
    node = env.node(t[0])
    op = node.op_type
    if depth < 0:
        return LazyShape(t)
    if op == "Transpose":
        inner = shape_of(env, node.inputs[0], depth - 1)
        perm = int_list(env.value(node.inputs[1]))
        ranks_differ = isinstance(inner, tuple) and len(inner) != len(perm or ())
        if perm is None or sorted(perm) != list(range(len(perm))) or ranks_differ:
            return LazyShape(t)
        return tuple(inner[p] for p in perm)
    if op in _SAME_SHAPE and node.inputs:
        return shape_of(env, node.inputs[0], depth - 1)
    if op == "TensorListStack":
        element = int_list(env.value(node.inputs[1]))
        count = int(node.attrs.get("num_elements", -1))
        if element is not None and not (len(element) == 1 and element[0] == -1):  # [-1]: unknown rank
            return tuple(d if d >= 0 else Dim(t[0], t[1], k) for k, d in enumerate([count, *element]))
    if op == "ConcatV2":
        axis = env.value(node.inputs[-1])
        parts = [shape_of(env, p, depth - 1) for p in node.inputs[:-1]]
        fixed = [p for p in parts if isinstance(p, tuple)]
        if axis is not None and fixed and len(fixed) == len(parts) and all(len(p) == len(fixed[0]) for p in fixed):
            rank = len(fixed[0])
            a = int(axis.reshape(())) % rank
            dims: list[int | Dim] = []
            for k in range(rank):
                known = [d for d in (p[k] for p in fixed) if isinstance(d, int)]
                if k == a:
                    dims.append(sum(known) if len(known) == len(parts) else Dim(t[0], t[1], k))
                else:
                    dims.append(known[0] if known else fixed[0][k])
            return tuple(dims)
    shape = None
    for graph_input in env.graph.source.inputs:
        if graph_input.node == node.name and graph_input.shape is not None:
            shape = graph_input.shape
    if shape is None and not node.inputs and node.value is None:
        shape = node.attrs.get("shape")
    if shape is None:
        shapes = node.attrs.get("_output_shapes")
        if isinstance(shapes, (list, tuple)) and t[1] < len(shapes):
            shape = shapes[t[1]]
    if shape is None:
        return LazyShape(t)
    try:
        return tuple(int(d) if d is not None and int(d) >= 0 else Dim(t[0], t[1], k) for k, d in enumerate(shape))
    except TypeError:
        return LazyShape(t)


def sym(env: Env, tensor: Tensor, depth: int = 24) -> Any:
    """An integer scalar or vector whose entries are ints or :class:`Dim`; None when not known."""
    known = env.value(tensor)
    if known is not None and known.dtype.kind in "iu":
        return int(known) if known.ndim == 0 else tuple(int(v) for v in known.reshape(-1))
    if depth < 0:
        return None
    env, t = env.resolve(tensor)
    node = env.node(t[0])
    op = node.op_type
    if op == "Shape":
        return shape_of(env, node.inputs[0])
    if op == "StridedSlice":
        base = sym(env, node.inputs[0], depth - 1)
        bounds = [int_list(env.value(a)) for a in node.inputs[1:]]
        begin, end, strides = bounds if len(bounds) == 3 else (None, None, None)
        if not isinstance(base, (tuple, LazyShape)) or begin is None or end is None or strides is None:
            return None
        idx = slice_index(node, begin, end, strides, rank=1)
        if idx is None or (isinstance(base, LazyShape) and not isinstance(idx[0], int)):
            return None
        try:
            return base[idx[0]]
        except IndexError:
            return None
    if op == "Pack":
        items = [sym(env, a, depth - 1) for a in node.inputs]
        return tuple(items) if all(i is not None and not isinstance(i, tuple) for i in items) else None
    if op in ("Minimum", "Maximum"):
        a, b = (sym(env, x, depth - 1) for x in node.inputs)
        return _min_max(op, a, b)
    if op in ("Max", "Min") and len(node.inputs) == 2:
        axes = env.value(node.inputs[1])
        if axes is not None and axes.size == 0:
            return sym(env, node.inputs[0], depth - 1)
    return None


def _min_max(op: str, a: Any, b: Any) -> Any:
    if a is None or b is None or isinstance(a, tuple) or isinstance(b, tuple):
        return None
    if a == b:
        return a
    if isinstance(a, int) and isinstance(b, int):
        return min(a, b) if op == "Minimum" else max(a, b)
    if op == "Maximum":  # Maximum(k, T) with k <= 1 is T for a sequence of at least one step
        if isinstance(a, int) and a <= 1:
            return b
        if isinstance(b, int) and b <= 1:
            return a
    return None


def column_slice(env: Env, node: Any, index: int):
    """For a Split / SplitV / StridedSlice over the last axis of a matrix: ``fn(width) -> columns``."""
    op = node.op_type
    if op in ("Split", "SplitV"):
        axis = env.value(node.inputs[0] if op == "Split" else node.inputs[2])
        if axis is None or int(axis.reshape(())) not in (1, -1):
            return None
        if op == "Split":
            n = int(node.attrs["num_split"])
            return lambda width: slice(index * width // n, (index + 1) * width // n)
        sizes = int_list(env.value(node.inputs[1]))
        if sizes is None:
            return None

        def split_v(width: int) -> slice:
            full = [width - (sum(sizes) + 1) if s == -1 else s for s in sizes]
            start = sum(full[:index])
            return slice(start, start + full[index])

        return split_v
    if op == "StridedSlice":
        bounds = [int_list(env.value(a)) for a in node.inputs[1:]]
        begin, end, strides = bounds if len(bounds) == 3 else (None, None, None)
        if begin is None or end is None or strides is None:
            return None
        idx = slice_index(node, begin, end, strides, rank=2)
        if idx is None or not full_slice(idx[0]) or not isinstance(idx[1], slice) or idx[1].step != 1:
            return None
        return lambda width: slice(*idx[1].indices(width))
    return None
