"""Op definitions by dialect: ``ge`` (graph inputs, constants), ``tf`` (TensorFlow's op registry),
``onnx`` (ONNX's operator schemas) and ``fused`` (the fused ops of the fusion rules).

:func:`default_op_registry` assembles a fresh :class:`~scopefusion.ir.opdef.OpRegistry` with all of
them; the ONNX definitions follow the model's opset. :func:`shared_op_registry` gives the same registry made
once and shared (read-only) by the conversions that declare no op of their own.
"""

from __future__ import annotations

import threading
from functools import lru_cache, partial
from typing import TYPE_CHECKING, Any, Callable, Iterable, Iterator, NamedTuple

from ..ir.opdef import OpDef, OpRegistry

if TYPE_CHECKING:  # pragma: no cover
    from ...parser.source_graph import SourceGraph

__all__ = ["DEFAULT_ONNX_OPSET", "OpName", "default_op_registry", "op_name_tuple", "op_names", "registered_defs",
           "shared_op_registry"]

DEFAULT_ONNX_OPSET = 17
_ONNX_DIALECT = "onnx"
_FUSED_DIALECT = "fused"


def default_op_registry(source: "SourceGraph | None" = None, *, extra: Iterable[OpDef] = ()) -> OpRegistry:
    """A registry with every builtin definition; ONNX ones at ``source``'s default-domain opset.

    The registry and its definitions are new objects on each call (copies of definitions made once per
    process), so changing one registry changes no other. A definition is copied into the registry when
    it is first looked up, and an ONNX one is made from its schema then (once per process and opset), a
    fused one when its module is imported then: a conversion pays only for the ops its model uses. For an ONNX ``source``, onnxruntime's definitions
    (contrib ops, ``SimplifiedLayerNormalization``) are included only when the model has an op that
    ONNX's default domain does not define at its opset: a model that cannot use them does not pay for
    loading onnxruntime.
    """
    registry = _CopiedOnUseRegistry(*_pending_template(*_registry_kind(source)))
    for d in extra:
        registry.register(d)
    return registry


def shared_op_registry(source: "SourceGraph | None" = None) -> OpRegistry:
    """The registry :func:`default_op_registry` makes for ``source``, made once per kind of registry (the
    dialects and opset ``source`` needs) and thread, and shared by the conversions that add no op definition.

    Its definitions are copied in from their prototypes once, where each conversion's own registry would copy
    them again (and the collector would walk every copy). It refuses ``register``: a conversion whose rules
    declare fused ops, or code adding definitions, uses a registry of its own from :func:`default_op_registry`.
    One per thread, as copying a definition in is not atomic.
    """
    kind = _registry_kind(source)
    shared: dict[tuple[bool, int | None, bool], OpRegistry] = _SHARED.__dict__.setdefault("registries", {})
    found = shared.get(kind)
    if found is None:
        found = shared[kind] = _SharedRegistry(*_pending_template(*kind))
    return found


_SHARED = threading.local()  # per thread: "registries", kind of registry -> the shared registry of that kind


def _registry_kind(source: "SourceGraph | None") -> tuple[bool, int | None, bool]:
    """What the builtin definitions of ``source``'s registry depend on: whether it has the ``tf`` dialect, the
    ONNX opset of its ``onnx`` dialect (None: no ``onnx`` dialect), whether it has onnxruntime's ops."""
    opset: int | None = None
    with_onnxruntime = False
    if source is None or source.is_onnx:
        opset = DEFAULT_ONNX_OPSET
        if source is not None:
            opset = source.opset_imports.get("", source.opset_imports.get("ai.onnx", DEFAULT_ONNX_OPSET))
        with_onnxruntime = source is None or _uses_ops_beyond(source, _onnx_op_type_set(opset))
    return source is None or not source.is_onnx, opset, with_onnxruntime


@lru_cache(maxsize=None)
def _pending_template(
    with_tf: bool, opset: int | None, with_onnxruntime: bool
) -> tuple[dict[str, _Pending], tuple[OpName, ...], dict[str, None]]:
    """The definitions a new registry starts with, not copied in yet (qualified name -> prototype), their
    names in order, and their qualified names in order: made once per process and kind of registry;
    registries copy the dicts."""
    pending: dict[str, _Pending] = {}

    def add(prototypes: Iterable[OpDef]) -> None:
        for d in prototypes:
            pending[d.qualified_name] = _Pending(OpName(d.name, d.dialect), partial(_same, d))

    add(_prototypes("ge"))
    if with_tf:
        add(_prototypes("tf"))
    if opset is not None:
        for name in _onnx_op_types(opset):
            pending[f"{_ONNX_DIALECT}.{name}"] = _Pending(OpName(name, _ONNX_DIALECT), partial(_onnx_prototype, opset, name))
        if with_onnxruntime:
            add(_prototypes("onnxruntime"))
    from .fused import OP_MODULES

    for name in OP_MODULES:  # each fused op's module is imported when the op is first looked up
        pending[f"{_FUSED_DIALECT}.{name}"] = _Pending(OpName(name, _FUSED_DIALECT), partial(_fused_prototype, name))
    return pending, tuple(entry.name for entry in pending.values()), dict.fromkeys(pending)


class OpName(NamedTuple):
    """An op definition's name and dialect, without the definition."""

    name: str
    dialect: str


def op_names(registry: OpRegistry) -> list[OpName]:
    """The name and dialect of every definition in ``registry``, in its order; for a registry of
    :func:`default_op_registry`, without copying in the definitions not looked up yet."""
    if isinstance(registry, _CopiedOnUseRegistry):
        return registry.op_names()
    return [OpName(d.name, d.dialect) for d in registry]


def op_name_tuple(registry: OpRegistry) -> tuple[OpName, ...]:
    """:func:`op_names` as a tuple; for a registry of :func:`default_op_registry` in which nothing was
    registered, the one tuple every such registry of its kind shares (a table keyed by it then finds it by
    identity, without reading its names)."""
    if isinstance(registry, _CopiedOnUseRegistry) and registry._names is not None:
        return registry._names
    return tuple(op_names(registry))


def registered_defs(registry: OpRegistry) -> list[OpDef]:
    """The definitions of ``registry`` that may not be builtin ones: for a registry of
    :func:`default_op_registry`, those registered in it after it was made (``extra`` included), in the
    order of registration, without copying in any builtin; for another registry, every definition."""
    if isinstance(registry, _CopiedOnUseRegistry):
        return registry.registered()
    return list(registry)


class _Pending(NamedTuple):
    """A builtin definition not copied into a registry yet: its name, and its prototype."""

    name: OpName
    prototype: Callable[[], OpDef]


class _CopiedOnUseRegistry(OpRegistry):
    """An :class:`OpRegistry` whose builtin definitions are copied in from their process-wide prototypes
    when first looked up; iterating it copies every one. Same names, same order, same definitions as a
    registry filled up front.

    The builtins not copied in yet are those of ``pending`` (shared by every registry of its kind, never
    changed) that ``_defs`` does not hold: a builtin leaves ``pending`` only by being copied in or replaced
    (``register(replace=True)``), and both put its name in ``_defs``, which no name ever leaves.
    """

    def __init__(
        self, pending: dict[str, _Pending], names: tuple[OpName, ...] | None = None, order: dict[str, None] | None = None
    ) -> None:
        super().__init__()
        self._builtins = pending  # qualified name -> a builtin definition (copied in when not in self._defs)
        # every name, in registration order (``order``: the keys of ``pending``, copied faster than made again)
        self._order: dict[str, None] = dict.fromkeys(pending) if order is None else order.copy()
        self._in_order = True  # whether self._defs holds its definitions in that order
        self._names = names  # the names of ``pending`` in order, while nothing else is registered
        self._registered: dict[str, None] = {}  # the names registered after the builtins, in order

    def _copy_in(self, qualified_name: str) -> OpDef | None:
        """Copies in builtin ``qualified_name``, which ``self._defs`` does not hold; None when there is none."""
        entry = self._builtins.get(qualified_name)
        if entry is None:
            return None
        opdef = self._defs[qualified_name] = entry.prototype().copy()
        self._in_order = False
        return opdef

    def op_names(self) -> list[OpName]:
        if self._names is not None:
            return list(self._names)
        defs = self._defs
        return [
            OpName(defs[n].name, defs[n].dialect) if n in defs else self._builtins[n].name
            for n in self._order
        ]

    def registered(self) -> list[OpDef]:
        return [self._defs[n] for n in self._registered]

    def _copy_all(self) -> None:
        for name in self._builtins:
            if name not in self._defs:
                self._copy_in(name)
        if not self._in_order:
            self._defs = {name: self._defs[name] for name in self._order}
            self._in_order = True

    def register(self, opdef: OpDef, *, replace: bool = False) -> OpDef:
        name = opdef.qualified_name
        if not replace and name in self._builtins and name not in self._defs:  # a builtin not copied in yet
            raise ValueError(f"op {name} is already registered")
        registered = super().register(opdef, replace=replace)
        self._order[name] = None
        self._names = None
        self._registered[name] = None
        return registered

    def get(self, qualified_name: str) -> OpDef:
        found = self.lookup(qualified_name)
        return found if found is not None else super().get(qualified_name)

    def lookup(self, qualified_name: str) -> OpDef | None:
        found = self._defs.get(qualified_name)
        return found if found is not None else self._copy_in(qualified_name)

    def __contains__(self, qualified_name: object) -> bool:
        return qualified_name in self._order

    def __iter__(self) -> Iterator[OpDef]:
        self._copy_all()
        return super().__iter__()

    def __len__(self) -> int:
        return len(self._order)

    def dialects(self) -> set[str]:
        self._copy_all()
        return super().dialects()


class _SharedRegistry(_CopiedOnUseRegistry):
    """A registry of :func:`shared_op_registry`: the builtin definitions only; ``register`` is refused."""

    def register(self, opdef: OpDef, *, replace: bool = False) -> OpDef:
        raise ValueError(
            f"cannot register op {opdef.qualified_name}: this op registry is shared by every conversion that "
            "declares no fused op; register it into a registry of your own (default_op_registry())"
        )


def _same(opdef: OpDef) -> OpDef:
    return opdef


@lru_cache(maxsize=None)
def _prototypes(dialect: str) -> tuple[OpDef, ...]:
    """A dialect's builtin definitions (``ge``, ``tf``, ``onnxruntime``), made once per process; registries
    get copies, never these. (``fused`` ones are made one op at a time: :func:`_fused_prototype`.)"""
    if dialect == "ge":
        from . import ge

        return tuple(ge.definitions())
    if dialect == "tf":
        from . import tf

        return tuple(tf.definitions())
    if dialect == "onnxruntime":
        from .onnx.microsoft import microsoft_definitions, onnxruntime_extensions

        return tuple(onnxruntime_extensions() + microsoft_definitions())
    raise ValueError(f"no builtin definitions are made as a whole for dialect {dialect!r}")


@lru_cache(maxsize=None)
def _fused_prototype(name: str) -> OpDef:
    """The definition of builtin fused op ``name``, made once per process (registries get copies)."""
    from .fused import definition

    return definition(name)


@lru_cache(maxsize=None)
def _onnx_op_types(opset: int) -> tuple[str, ...]:
    """The op types of ONNX's default domain at ``opset``, sorted (their schemas read once per process)."""
    return tuple(_onnx_schemas(opset))


@lru_cache(maxsize=None)
def _onnx_op_type_set(opset: int) -> frozenset[str]:
    return frozenset(_onnx_op_types(opset))


@lru_cache(maxsize=None)
def _onnx_schemas(opset: int) -> dict[str, Any]:
    from .onnx.schemas import default_domain_schemas

    return default_domain_schemas(opset)  # type: ignore[return-value]  # a Mapping of lazily made views


@lru_cache(maxsize=None)
def _onnx_prototype(opset: int, op_type: str) -> OpDef:
    """The definition of one ONNX op at ``opset``, made from its schema once per process."""
    from .onnx.schemas import opdef_from_schema

    return opdef_from_schema(_onnx_schemas(opset)[op_type], opset)


def _uses_ops_beyond(source: "SourceGraph", default_domain_ops: frozenset[str]) -> bool:
    """Whether some node of ``source`` (bodies included) is outside ONNX's default domain or neither one of
    ``default_domain_ops`` nor a graph input, initializer or outer-scope value of the frontend."""
    from ..parser.source_graph import INITIALIZER_OP, INPUT_OP, OUTER_SCOPE_OP

    known = default_domain_ops | {INITIALIZER_OP, INPUT_OP, OUTER_SCOPE_OP}
    return any(node.domain not in ("", "ai.onnx") or node.op_type not in known for node in _all_nodes(source))


def _all_nodes(source: "SourceGraph") -> Iterator:
    for node in source:
        yield node
        for body in node.subgraphs.values():
            yield from _all_nodes(body)
