"""The vocabulary of dataflow patterns: variables, constants and op nodes, and the ``op`` builder a
pattern function receives (see :mod:`.dataflow` for how patterns are written and matched)."""

from __future__ import annotations

from functools import partial
from typing import Any, Callable, Hashable, Sequence

import numpy as np

from ..dtypes import DType
from ..errors import FusionError
from ..parser.source_graph import SourceNode

__all__ = [
    "COMMUTATIVE_OPS",
    "ConstPattern",
    "OpBuilder",
    "OpOutput",
    "OpPattern",
    "Tensor",
    "ValuePattern",
    "Var",
    "structure_key",
]

COMMUTATIVE_OPS = frozenset(
    {"Add", "AddV2", "Mul", "Maximum", "Minimum", "Max", "Min", "Sum", "AddN", "Equal", "NotEqual",
     "LogicalAnd", "LogicalOr", "And", "Or", "Xor", "SquaredDifference"}
)

Tensor = tuple[str, int]


class ValuePattern:
    """Something that matches one tensor."""

    __slots__ = ()


class Var(ValuePattern):
    """Any tensor; a variable used twice must see the same tensor."""

    __slots__ = ("name",)

    def __init__(self, name: str) -> None:
        self.name = name

    def __repr__(self) -> str:
        return f"Var({self.name!r})"


class ConstPattern(ValuePattern):
    """A constant tensor, optionally with a value (close to), shape (``None`` dims match any), dtype and
    a check function ``check(array) -> reason | None``."""

    __slots__ = ("name", "value", "shape", "dtype", "check", "rtol", "atol")

    def __init__(
        self,
        name: str | None = None,
        *,
        value: Any = None,
        shape: Sequence[int | None] | None = None,
        dtype: Any = None,
        check: Callable[[np.ndarray], str | None] | None = None,
        rtol: float = 1e-5,
        atol: float = 1e-7,
    ) -> None:
        self.name = name
        self.value = None if value is None else np.asarray(value)
        self.shape = None if shape is None else tuple(shape)
        self.dtype = None if dtype is None else (dtype.numpy if isinstance(dtype, DType) else np.dtype(dtype))
        self.check = check
        self.rtol = rtol
        self.atol = atol

    def why_not(self, array: np.ndarray) -> str | None:
        if self.dtype is not None and array.dtype != self.dtype:
            return f"has dtype {array.dtype}, expected {self.dtype}"
        if self.shape is not None:
            if len(self.shape) != array.ndim or any(w is not None and w != d for w, d in zip(self.shape, array.shape)):
                return f"has shape {array.shape}, expected {self.shape}"
        if self.value is not None:
            want = self.value
            if want.ndim == 0 or want.size == 1:
                if array.size != 1:
                    return f"has {array.size} elements, expected the scalar {want.reshape(()).item()!r}"
                ok = np.allclose(array.reshape(()), want.reshape(()), rtol=self.rtol, atol=self.atol)
            else:
                ok = array.shape == want.shape and np.allclose(array, want, rtol=self.rtol, atol=self.atol)
            if not ok:
                shown = array.reshape(()).item() if array.size == 1 else f"an array of shape {array.shape}"
                return f"has value {shown!r}, expected {want.tolist()!r}"
        if self.check is not None:
            return self.check(array)
        return None

    def __repr__(self) -> str:
        return f"ConstPattern({self.name!r})" if self.name else "ConstPattern()"


class OpPattern:
    """One op node of the pattern."""

    __slots__ = ("op_types", "inputs", "name", "attrs", "num_outputs", "commute", "check", "operand_order", "arity",
                 "checked")

    def __init__(self, op_types: tuple[str, ...], inputs: list[ValuePattern], name: str | None, attrs: dict[str, Any],
                 num_outputs: int, commute: bool, check: Callable[[SourceNode], str | None] | None) -> None:
        self.op_types = op_types
        self.inputs = inputs
        self.name = name
        self.attrs = attrs
        self.num_outputs = num_outputs
        self.commute = commute
        self.check = check
        # The order a commutative op's operands are assigned in: most specific first (ops, constants, variables).
        kinds = [0 if isinstance(v, OpOutput) else 1 if isinstance(v, ConstPattern) else 2 for v in inputs]
        self.operand_order = tuple(sorted(range(len(inputs)), key=kinds.__getitem__))
        #: The number of operands, and whether a node needs more than its type and arity tested (attributes, a
        #: check): read by every search step, so kept rather than recomputed.
        self.arity = len(inputs)
        self.checked = bool(attrs) or check is not None

    def __repr__(self) -> str:
        return f"OpPattern({'|'.join(self.op_types)}{', ' + repr(self.name) if self.name else ''})"


class OpOutput(ValuePattern):
    """Output ``index`` of an :class:`OpPattern`."""

    __slots__ = ("op", "index")

    def __init__(self, op: OpPattern, index: int) -> None:
        self.op = op
        self.index = index

    def __repr__(self) -> str:
        return f"{self.op!r}:{self.index}"


class OpBuilder:
    """The ``op`` argument of a pattern function; ``op.MatMul(a, b)`` builds a pattern node."""

    def __init__(self, commutative: frozenset[str]) -> None:
        self._commutative = commutative

    def __getattr__(self, op_type: str) -> Callable[..., Any]:
        if op_type.startswith("_"):
            raise AttributeError(op_type)
        return partial(self.op, op_type)

    def op(
        self,
        op_type: str | Sequence[str],
        *inputs: Any,
        _name: str | None = None,
        _attrs: dict[str, Any] | None = None,
        _outputs: int = 1,
        _commute: bool | None = None,
        _check: Callable[[SourceNode], str | None] | None = None,
    ) -> Any:
        """A node of one of ``op_type``; returns its output, or a tuple of ``_outputs`` outputs."""
        if op_type.__class__ is str and op_type:  # one op type, as nearly every op has: the checks below, at once
            types: tuple[str, ...] = (op_type,)
            commute = _commute if _commute is not None else op_type in self._commutative
        else:
            types = (op_type,) if isinstance(op_type, str) else tuple(op_type)
            if not types or not all(isinstance(t, str) and t for t in types):
                raise FusionError(f"a pattern op needs op type names, got {op_type!r}")
            commute = _commute if _commute is not None else all(t in self._commutative for t in types)
        values = [v if isinstance(v, ValuePattern) else self._value(v) for v in inputs]
        node = OpPattern(types, values, _name, dict(_attrs or {}), _outputs, commute and len(values) > 1, _check)
        if _outputs == 1:
            return OpOutput(node, 0)
        return tuple(OpOutput(node, i) for i in range(_outputs))

    def const(self, name: str | None = None, **kw: Any) -> ConstPattern:
        """A constant; see :class:`ConstPattern` for the keyword arguments."""
        return ConstPattern(name, **kw)

    def var(self, name: str) -> Var:
        return Var(name)

    @staticmethod
    def _value(value: Any) -> ValuePattern:
        if isinstance(value, ValuePattern):
            return value
        if isinstance(value, (bool, int, float, np.ndarray, np.generic, list, tuple)):
            return ConstPattern(value=value)
        raise FusionError(f"a pattern input must be a pattern value, a constant or a literal number, got {value!r}")


def structure_key(op: OpPattern) -> Hashable | None:
    """What matching the part of a pattern below ``op`` (``op``, its operands, theirs...) depends on, as a
    hashable value: parts of different patterns with equal keys match at the same nodes. It holds each op's
    types, operand order, attributes and check, each constant's constraints (not its name), and which
    operands are one variable or one op. None when an attribute value is not hashable (a list, an array)."""
    seen: dict[int, int] = {}  # id of an op, variable or constant -> the order it was first reached in

    def op_key(node: OpPattern) -> Hashable:
        attrs = []
        for name, want in node.attrs.items():
            hash(want)  # TypeError when unhashable
            attrs.append((name, type(want).__name__, want))
        operands = tuple(value_key(v) for v in node.inputs)
        return (node.op_types, node.commute, node.operand_order, tuple(attrs), node.check, operands)

    def value_key(value: ValuePattern) -> Hashable:
        ident = id(value.op) if isinstance(value, OpOutput) else id(value)
        order = seen.get(ident)
        if order is not None:  # the same op, variable or constant again
            return ("again", order, value.index if isinstance(value, OpOutput) else -1)
        seen[ident] = len(seen)
        if isinstance(value, OpOutput):
            return ("op", value.index, op_key(value.op))
        if isinstance(value, ConstPattern):
            array = value.value
            wanted = None if array is None else (array.dtype.str, array.shape, array.tobytes())
            return ("const", wanted, value.shape, value.dtype, value.check, value.rtol, value.atol)
        if isinstance(value, Var):
            return ("var",)
        return ("value", ident)  # another kind of value: only itself

    seen[id(op)] = 0
    try:
        return op_key(op)
    except TypeError:
        return None
