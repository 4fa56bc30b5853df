"""Fused ops declared by fusion rules: :func:`define_fused_op` and installing them into one conversion.

A rules file or rules package declares the fused ops its rules produce with :func:`define_fused_op`,
which returns the same :class:`~scopefusion.ir.opdef.OpDef` builder the builtin fused ops use (inputs,
outputs with ``follow`` or an inference function, attributes, dtype constraints, ``set_reference`` for
the numpy kernel ``verify`` runs), plus what only a declared op carries: its ONNX exporter
(``set_onnx_export``, a function of a :class:`~scopefusion.serde.onnx_fused.FusedEmitter`, like the
builtins' exporters) and, optionally, the op type written to GE (``set_ge_type``).

Declared ops go into the op registry of the conversion that loaded them (:func:`op_registry_for`),
never into a process-wide table. A declared op named like a builtin fused op is an error naming both,
unless it was declared with ``replaces=True``; two declarations of one name are an error too.
"""

from __future__ import annotations

from functools import lru_cache
from typing import TYPE_CHECKING, Any, Callable, Iterable, Protocol, Sequence

from ...errors import FusionError
from ...ir.opdef import OpDef, OpRegistry

if TYPE_CHECKING:  # pragma: no cover
    from ...parser.source_graph import SourceGraph

__all__ = [
    "DeclaredFusedOp",
    "FusedOpDef",
    "builtin_fused_op_names",
    "check_declared_ops",
    "declared_ops_of",
    "define_fused_op",
    "install_declared_ops",
    "op_registry_for",
]

FUSED_DIALECT = "fused"


class FusedOpDef(OpDef):
    """The definition of a fused op declared by a rule (dialect ``fused``); see the module docstring.

    Attributes:
        replaces: True when the definition replaces the builtin fused op of the same name.
        onnx_export: the ONNX exporter (``fn(emitter)``), or None: the op is then written to ONNX as one
            node of domain ``scopefusion``.
        ge_type: the op type written to GE, or None for the op's own name.
    """

    def __init__(self, name: str, *, replaces: bool = False, doc: str = "") -> None:
        super().__init__(name, FUSED_DIALECT, doc=doc)
        self.replaces = replaces
        self.onnx_export: Callable[[Any], None] | None = None
        self.ge_type: str | None = None

    def set_onnx_export(self, fn: Callable[[Any], None]) -> "FusedOpDef":
        """Sets the ONNX exporter: ``fn(emitter)`` writes the ONNX nodes (``emitter.op(...)``) or declines."""
        if not callable(fn):
            raise ValueError(
                f"{self.qualified_name}: the ONNX exporter must be a function of the emitter, got {fn!r}"
            )
        self.onnx_export = fn
        return self

    def set_ge_type(self, op_type: str) -> "FusedOpDef":
        """Sets the op type written to GE (default: the op's own name)."""
        if not isinstance(op_type, str) or not op_type or "." in op_type:
            raise ValueError(f"{self.qualified_name}: the GE op type must be a non-empty name without '.', got {op_type!r}")
        self.ge_type = op_type
        return self


def define_fused_op(name: str, *, replaces: bool = False, doc: str = "") -> FusedOpDef:
    """A new fused op definition named ``name`` (the type a rule's result sets), to be declared further
    with the chained ``input`` / ``output`` / ``attr`` / ``set_infer_shape`` / ``set_reference`` /
    ``set_onnx_export`` calls and listed in the rules file's ``FUSED_OPS``.

    Args:
        name: the fused op type (``"DenseRelu"``), without the dialect.
        replaces: this definition replaces the builtin fused op of the same name.
        doc: a description.

    Example::

        DENSE_RELU = (define_fused_op("DenseRelu")
                      .input("x").input("w").input("b")
                      .output("y", follow=("x", FollowType.DTYPE))
                      .set_infer_shape(dense_shape)
                      .set_reference(lambda inputs, attrs: [np.maximum(inputs[0] @ inputs[1] + inputs[2], 0)]))
    """
    if not isinstance(name, str) or not name.isidentifier():
        raise ValueError(f"fused op name {name!r} must be a plain identifier such as 'DenseRelu' (no dialect, no dots)")
    return FusedOpDef(name, replaces=replaces, doc=doc)


class DeclaredFusedOp(Protocol):
    """A declared op as the pass registry records it (``scopefusion.scope.DeclaredOp``): the definition
    and where it was declared (``file:<path>``, ``package:<dist>``, ``user``)."""

    @property
    def op(self) -> OpDef: ...

    @property
    def source(self) -> str: ...

    @property
    def replaces(self) -> bool: ...


def builtin_fused_op_names() -> set[str]:
    """The names of the builtin fused ops (``LayerNorm``, ``Gelu``...)."""
    return set(_builtin_fused_op_names())


@lru_cache(maxsize=1)
def _builtin_fused_op_names() -> frozenset[str]:
    """The names of the builtin fused ops (without importing their definitions)."""
    from . import OP_MODULES

    return frozenset(OP_MODULES)


def check_declared_ops(declared: Sequence[DeclaredFusedOp], builtin_names: Iterable[str] | None = None) -> None:
    """Raises FusionError when a declared op is not of the fused dialect, two declarations share a name,
    or one takes a builtin fused op's name without ``replaces=True``."""
    if not declared:
        return
    builtins = _builtin_fused_op_names() if builtin_names is None else frozenset(builtin_names)
    seen: dict[str, DeclaredFusedOp] = {}
    for entry in declared:
        op = entry.op
        if op.dialect != FUSED_DIALECT:
            raise FusionError(
                f"op {op.qualified_name} from {entry.source} is not a fused op; declare it with "
                f"scopefusion.define_fused_op({op.name!r})"
            )
        if op.name in seen:
            raise FusionError(
                f"fused op {op.name!r} is declared twice: by {seen[op.name].source} and by {entry.source}; "
                "rename one of them"
            )
        seen[op.name] = entry
        if op.name in builtins and not entry.replaces:
            raise FusionError(
                f"fused op {op.qualified_name} from {entry.source} clashes with the builtin op fused.{op.name}; "
                f"rename it, or declare it with define_fused_op({op.name!r}, replaces=True) to replace the builtin"
            )
        if entry.replaces and op.name not in builtins:
            raise FusionError(
                f"fused op {op.qualified_name} from {entry.source} is declared with replaces=True, but there is "
                f"no builtin fused op {op.name!r} to replace (builtins: {', '.join(sorted(builtins))})"
            )


def install_declared_ops(registry: OpRegistry, declared: Sequence[DeclaredFusedOp]) -> OpRegistry:
    """Adds the declared ops to ``registry`` (one conversion's), replacing builtins declared as replaced."""
    if declared:  # iterating the registry copies every definition into it
        check_declared_ops(declared, {d.name for d in registry if d.dialect == FUSED_DIALECT})
    for entry in declared:
        registry.register(entry.op, replace=entry.replaces)
    return registry


def op_registry_for(source: "SourceGraph | None", declared: Sequence[DeclaredFusedOp] = ()) -> OpRegistry:
    """The op registry of one conversion: every builtin definition, plus the ops its rules declared."""
    from .. import default_op_registry

    return install_declared_ops(default_op_registry(source), declared)


def declared_ops_of(registry: OpRegistry) -> list[FusedOpDef]:
    """The declared (non-builtin) fused ops in ``registry``, without copying in its builtins (no builtin
    definition is a :class:`FusedOpDef`, and declared ones are registered after the builtins)."""
    from .. import registered_defs

    return [d for d in registered_defs(registry) if isinstance(d, FusedOpDef)]
