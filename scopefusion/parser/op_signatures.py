"""Output-argument signatures of TensorFlow ops, read from a table shipped with the package.

``tf_op_signatures.json`` is generated from TensorFlow's op registry by ``tools/gen_op_signatures.py``
(see that script for the format). With it, a function-body tensor name ``node:output_arg:index`` becomes
the node's flat output index, and a node's number of outputs is known, without importing TensorFlow.
"""

from __future__ import annotations

import json
import os
from functools import lru_cache
from typing import Any, Mapping, Sequence

from ..records import FrozenRecord

__all__ = ["OutputArg", "OpSignatures", "builtin_signatures"]


class OutputArg(FrozenRecord):
    """One output argument: a single tensor, ``number_attr`` tensors, or one per ``type_list_attr`` entry."""

    _fields = ("name", "number_attr", "type_list_attr")

    def __init__(self, name: str, number_attr: str = "", type_list_attr: str = "") -> None:
        self.name = name
        self.number_attr = number_attr
        self.type_list_attr = type_list_attr

    @classmethod
    def parse(cls, text: str) -> "OutputArg":
        if "*" in text:
            name, attr = text.split("*", 1)
            return cls(name, number_attr=attr)
        if "+" in text:
            name, attr = text.split("+", 1)
            return cls(name, type_list_attr=attr)
        return cls(text)

    def size(self, attrs: Mapping[str, Any], defaults: Mapping[str, int]) -> int | None:
        """How many tensors this argument holds on a node with ``attrs``; None when it cannot be known."""
        if self.number_attr:
            value = attrs.get(self.number_attr, defaults.get(self.number_attr))
            return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None
        if self.type_list_attr:
            if self.type_list_attr in attrs:
                value = attrs[self.type_list_attr]
                return len(value) if isinstance(value, tuple) else None
            return defaults.get(self.type_list_attr)
        return 1


class _BuiltinOps:
    """The builtin ops' output arguments, each op's parsed from the table's text on its first use (a
    conversion meets a few dozen of the table's thousands of ops)."""

    def __init__(self, table: Mapping[str, Sequence[str]]) -> None:
        self._table = table
        self._parsed: dict[str, tuple[OutputArg, ...]] = {}
        self._fixed: dict[str, int | None] = {}  # op type -> fixed_count's answer
        self.fixed_counts: Mapping[str, int | None] = self._fixed  # (read it, do not change it)
        self._positions: dict[tuple[str, str], int | None] = {}  # see single_position

    def single_position(self, op_type: str, arg: str) -> int | None:
        """For an op of single-tensor arguments only (``fixed_count`` is its count): the position of
        argument ``arg`` (its flat output index), or None when it has no such argument. -1 for another op."""
        key = (op_type, arg)
        if key in self._positions:
            return self._positions[key]
        if self.fixed_count(op_type) is None:
            found: int | None = -1
        else:
            names = [a.name for a in self.get(op_type) or ()]
            found = names.index(arg) if arg in names else None
        if op_type in self._table:  # the table never changes: an op it holds keeps its answer
            self._positions[key] = found
        return found

    def __contains__(self, op_type: str) -> bool:
        return op_type in self._table

    def get(self, op_type: str) -> tuple[OutputArg, ...] | None:
        found = self._parsed.get(op_type)
        if found is None:
            texts = self._table.get(op_type)
            if texts is None:
                return None
            found = self._parsed[op_type] = tuple(OutputArg.parse(t) for t in texts)
        return found

    def fixed_count(self, op_type: str) -> int | None:
        """The op's output count when its arguments are all single tensors (it does not depend on the
        node's attributes), else None."""
        if op_type in self._fixed:
            return self._fixed[op_type]
        args = self.get(op_type)
        count = None if args is None or any(a.number_attr or a.type_list_attr for a in args) else len(args)
        if args is not None:  # the table never changes: an op it holds keeps its answer
            self._fixed[op_type] = count
        return count


@lru_cache(maxsize=1)
def _builtin_table() -> tuple[_BuiltinOps, dict[str, dict[str, int]], str]:
    """The ops' output arguments, their attribute defaults and the TF version."""
    # The package's own loader reads the file (as pkgutil.get_data does, without importing pkgutil, nor
    # importlib.resources, which imports tempfile and zipfile).
    data = __spec__.loader.get_data(os.path.join(os.path.dirname(__file__), "tf_op_signatures.json"))  # type: ignore[union-attr]
    text = data.decode("utf-8")
    raw = json.loads(text)
    return _BuiltinOps(raw["ops"]), raw["defaults"], raw["tensorflow_version"]


class OpSignatures:
    """Output signatures of the builtin TF ops plus, optionally, a graph's library functions.

    Args:
        functions: output arguments of each library function, by function name (a node whose op type is
            a function name calls that function).
    """

    def __init__(self, functions: Mapping[str, Sequence[OutputArg]] | None = None) -> None:
        self._ops, self._defaults, self.tensorflow_version = _builtin_table()
        self._functions = {name: tuple(args) for name, args in (functions or {}).items()}
        #: :meth:`fixed_count`'s answers so far for builtin ops, by op type (read it, do not change it): the
        #: table's own, shared by every graph, so a reader finds most ops' counts without a call; empty when a
        #: library function may shadow a builtin op.
        self.builtin_fixed_counts: Mapping[str, int | None] = {} if self._functions else self._ops.fixed_counts

    def outputs(self, op_type: str) -> tuple[OutputArg, ...] | None:
        found = self._functions.get(op_type)
        return found if found is not None else self._ops.get(op_type)

    def knows(self, op_type: str) -> bool:
        return op_type in self._functions or op_type in self._ops

    def _sizes(self, op_type: str, attrs: Mapping[str, Any]) -> list[tuple[str, int | None]] | None:
        args = self.outputs(op_type)
        if args is None:
            return None
        defaults = {} if op_type in self._functions else self._defaults.get(op_type, {})
        return [(a.name, a.size(attrs, defaults)) for a in args]

    def fixed_count(self, op_type: str) -> int | None:
        """The op's output count when no attribute decides it (a builtin op of single-tensor arguments,
        not shadowed by a library function), else None."""
        if op_type in self._functions:
            return None
        return self._ops.fixed_count(op_type)

    def num_outputs(self, op_type: str, attrs: Mapping[str, Any]) -> int | None:
        """The node's number of output tensors, or None for an unknown op or unresolved list sizes."""
        if op_type not in self._functions:
            count = self._ops.fixed_count(op_type)
            if count is not None:
                return count
        sizes = self._sizes(op_type, attrs)
        if sizes is None or any(size is None for _, size in sizes):
            return None
        return sum(size for _, size in sizes)  # type: ignore[misc]

    def output_index(self, op_type: str, attrs: Mapping[str, Any], arg: str, index: int) -> int | None:
        """Flat output index of ``arg:index`` on a node; None when the op or the argument is unknown.

        Raises:
            IndexError: ``index`` is past the end of the argument's list of tensors.
        """
        if op_type not in self._functions:
            position = self._ops.single_position(op_type, arg)
            if position is None or position >= 0:  # every argument is one tensor: no attribute counts
                if position is not None and index >= 1:
                    raise IndexError(f"output argument {arg!r} of {op_type} holds 1 tensors, not {index + 1}")
                return None if position is None else position + index
        sizes = self._sizes(op_type, attrs)
        if sizes is None:
            return None
        offset = 0
        for name, size in sizes:
            if name == arg:
                if size is not None and index >= size:
                    raise IndexError(f"output argument {arg!r} of {op_type} holds {size} tensors, not {index + 1}")
                return offset + index
            if size is None:
                return None
            offset += size
        return None


def builtin_signatures() -> OpSignatures:
    """A signature table of TensorFlow's builtin ops only."""
    return OpSignatures()
