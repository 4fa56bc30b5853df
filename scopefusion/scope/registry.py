"""``PassRegistry``: which passes exist, where each came from, which are on, and in what order they run.

* ``register(rule, name=None, general=None)``: a :class:`ScopeBasePass` instance or subclass. General
  passes are on by default and can be disabled; others are off until enabled by name.
* ``load_builtins(rules)``: the builtin rules (an explicit iterable; the scope layer has none of its own).
* ``load_rules_file(path)``: a Python file defining ``FUSION_RULES`` (passes or pass classes),
  ``FUSED_OPS`` (the fused ops its rules produce, made with ``scopefusion.define_fused_op``) and/or
  ``register(registry)``; a file that fails to import is a FusionError naming the file and the cause.
* ``load_entry_points()``: installed packages' entry points in the group ``scopefusion.fusion_rules``;
  each names a pass, a pass class, a list of them (fused op definitions may be among them), or a
  ``register(registry)`` function.
* ``declare_op(op)``: a fused op definition the registered rules produce; ``fused_ops`` lists them with
  their sources. The registry only keeps them: the conversion that uses this registry adds them to its
  own op registry (:func:`scopefusion.dialects.fused.declared.op_registry_for`).

Run order: user passes (file, package or direct registration) in registration order, then builtins in
theirs. A user pass with a builtin's name replaces that builtin (recorded in ``replacements``), as
CANN's custom plugin path does. Two user passes (or two builtins) with one name, or an unknown name in
``enable``/``disable``, is a FusionError listing the known names.

NOTE: unlike CANN, the registry is an ordinary object (a test makes a fresh one), a duplicate name is an
error rather than a silent first-wins, an unknown name is an error rather than a warning, and general
passes can be disabled.
"""

from __future__ import annotations

import sys
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterable, Iterator

from ..errors import FusionError
from ..records import FrozenRecord, Record
from .entry_points import installed_entry_points
from .passes import ScopeBasePass

if TYPE_CHECKING:  # pragma: no cover
    from importlib.metadata import EntryPoint

__all__ = ["BUILTIN", "DeclaredOp", "ENTRY_POINT_GROUP", "PassRegistry", "RegisteredPass", "Replacement", "is_op_definition"]

ENTRY_POINT_GROUP = "scopefusion.fusion_rules"
BUILTIN = "builtin"
USER = "user"


class RegisteredPass(Record):
    """One registered pass: its name, instance, default flag, origin and current on/off state."""

    _fields = ("name", "rule", "general", "source", "enabled")

    def __init__(self, name: str, rule: ScopeBasePass, general: bool, source: str, enabled: bool) -> None:
        self.name = name
        self.rule = rule
        self.general = general
        self.source = source
        self.enabled = enabled

    @property
    def is_builtin(self) -> bool:
        return self.source == BUILTIN

    def copy(self) -> RegisteredPass:
        """A new entry with the same fields (the same rule instance)."""
        entry = RegisteredPass.__new__(RegisteredPass)
        entry.__dict__ = self.__dict__.copy()
        return entry

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "general": self.general, "source": self.source, "enabled": self.enabled}


class DeclaredOp(FrozenRecord):
    """A fused op definition the registered rules produce (``scopefusion.define_fused_op``) and where it
    was declared. The scope layer only keeps it; the conversion adds ``op`` to its op registry."""

    _fields = ("op", "source")

    def __init__(self, op: Any, source: str) -> None:
        self.op = op
        self.source = source

    @property
    def name(self) -> str:
        return str(self.op.name)

    @property
    def replaces(self) -> bool:
        """True when the definition replaces the builtin fused op of the same name."""
        return bool(getattr(self.op, "replaces", False))

    def to_dict(self) -> dict[str, Any]:
        return {"op": self.op.qualified_name, "source": self.source, "replaces_builtin": self.replaces}


def is_op_definition(obj: Any) -> bool:
    """True for an op definition (an object with a ``qualified_name`` and a ``dialect``), not a pass."""
    return not isinstance(obj, (ScopeBasePass, type)) and hasattr(obj, "qualified_name") and hasattr(obj, "dialect")


class Replacement(FrozenRecord):
    """A builtin pass replaced by a user pass of the same name."""

    _fields = ("name", "by", "replaced")

    def __init__(self, name: str, by: str, replaced: str) -> None:
        self.name = name
        self.by = by
        self.replaced = replaced

    def __str__(self) -> str:
        return f"pass {self.name!r} from {self.by} replaces the builtin pass of that name"


class PassRegistry:
    """Registered passes; see the module docstring."""

    def __init__(self) -> None:
        self._user: dict[str, RegisteredPass] = {}
        self._builtin: dict[str, RegisteredPass] = {}
        self.replacements: list[Replacement] = []
        self.fused_ops: list[DeclaredOp] = []
        self._source = USER

    # ------------------------------------------------------------------ registration
    def register(self, rule: Any, *, name: str | None = None, general: bool | None = None, source: str | None = None) -> RegisteredPass:
        """Registers one pass (instance or subclass of :class:`ScopeBasePass`) and returns its entry."""
        instance = self._instance(rule)
        if name is not None:
            if not isinstance(name, str) or not name:
                raise FusionError(f"a pass name must be a non-empty string, got {name!r}")
            instance.name = name
        pass_name = instance.pass_name
        flag = bool(instance.general if general is None else general)
        origin = source or self._source
        entry = RegisteredPass(pass_name, instance, flag, origin, flag)
        if origin == BUILTIN:
            self._check_free(self._builtin, pass_name, origin)
            self._builtin[pass_name] = entry
            if pass_name in self._user:
                self.replacements.append(Replacement(pass_name, self._user[pass_name].source, origin))
        else:
            self._check_free(self._user, pass_name, origin)
            self._user[pass_name] = entry
            if pass_name in self._builtin:
                self.replacements.append(Replacement(pass_name, origin, BUILTIN))
        return entry

    def declare_op(self, op: Any) -> DeclaredOp:
        """Declares a fused op definition (from ``scopefusion.define_fused_op``) that the rules produce."""
        if not is_op_definition(op):
            raise FusionError(f"cannot declare {op!r} as a fused op; make it with scopefusion.define_fused_op(name)")
        for other in self.fused_ops:
            if other.op.qualified_name == op.qualified_name:
                if other.op is op:
                    return other
                raise FusionError(
                    f"fused op {op.name!r} is declared twice: by {other.source} and by {self._source}; rename one of them"
                )
        entry = DeclaredOp(op, self._source)
        self.fused_ops.append(entry)
        return entry

    def _check_free(self, table: dict[str, RegisteredPass], name: str, origin: str) -> None:
        if name in table:
            raise FusionError(
                f"pass name {name!r} from {origin} is already registered from {table[name].source}; "
                f"rename one of them (known passes: {', '.join(self.names()) or 'none'})"
            )

    @staticmethod
    def _instance(rule: Any) -> ScopeBasePass:
        if isinstance(rule, ScopeBasePass):
            return rule
        if isinstance(rule, type) and issubclass(rule, ScopeBasePass):
            try:
                return rule()
            except TypeError as exc:
                raise FusionError(f"pass class {rule.__name__} cannot be created without arguments ({exc}); register an instance") from exc
        raise FusionError(f"cannot register {rule!r} as a fusion pass; expected a ScopeBasePass instance or subclass")

    def load_builtins(self, rules: Iterable[Any] = ()) -> list[RegisteredPass]:
        """Registers the builtin rules (pass instances or classes), source ``"builtin"``."""
        if not self._user and not self._builtin and not self.fused_ops:
            template = _builtin_template(rules)
            if template is not None:
                self._builtin = {entry.name: entry.copy() for entry in template}
                return list(self._builtin.values())
        saved, self._source = self._source, BUILTIN  # every conversion loads them: no context manager
        try:
            return self._register_all(rules, "the builtin rules")
        finally:
            self._source = saved

    def load_rules_file(self, path: str | Path) -> list[RegisteredPass]:
        """Imports a rules file and registers its ``FUSION_RULES`` and/or calls its ``register(registry)``."""
        path = Path(path)
        label = f"file:{path}"
        if not path.is_file():
            raise FusionError(f"fusion rules file {path} does not exist; pass the path of a .py file")
        import hashlib
        import importlib.util

        digest = hashlib.sha1(str(path.resolve()).encode()).hexdigest()[:12]
        module_name = f"_scopefusion_rules_{path.stem}_{digest}"
        spec = importlib.util.spec_from_file_location(module_name, path)
        if spec is None or spec.loader is None:
            raise FusionError(f"cannot load fusion rules from {path}: it is not an importable Python file")
        module = importlib.util.module_from_spec(spec)
        sys.modules[module_name] = module
        try:
            spec.loader.exec_module(module)
        except SystemExit as exc:
            sys.modules.pop(module_name, None)
            raise FusionError(
                f"cannot load fusion rules from {path}: the file calls sys.exit({exc.code!r}) while it is imported; "
                "a rules file must only define rules"
            ) from None
        except Exception as exc:
            sys.modules.pop(module_name, None)
            raise FusionError(f"cannot load fusion rules from {path}: {type(exc).__name__}: {exc}; fix the file") from exc
        rules = getattr(module, "FUSION_RULES", None)
        register = getattr(module, "register", None)
        ops = getattr(module, "FUSED_OPS", None)
        if rules is None and not callable(register) and ops is None:
            raise FusionError(
                f"fusion rules file {path} defines none of FUSION_RULES, FUSED_OPS and register(registry); add one of them"
            )
        added: list[RegisteredPass] = []
        with self._from(label):
            if ops is not None:
                self._declare_all(ops, str(path))
            if rules is not None:
                added += self._register_all(rules, str(path))
            if callable(register):
                added += self._call_register(register, str(path))
        return added

    def load_entry_points(self, group: str = ENTRY_POINT_GROUP) -> list[RegisteredPass]:
        """Registers the rules of every installed package's entry point in ``group``, source
        ``"package:<distribution>"``, in (distribution, entry point) name order."""
        points = installed_entry_points(group)
        points.sort(key=lambda ep: (_dist_name(ep), ep.name))
        added: list[RegisteredPass] = []
        for ep in points:
            dist = _dist_name(ep)
            where = f"entry point {ep.name!r} ({ep.value}) of package {dist}"
            try:
                obj = ep.load()
            except Exception as exc:
                raise FusionError(f"cannot load fusion rules from {where}: {type(exc).__name__}: {exc}") from exc
            with self._from(f"package:{dist}"):
                if callable(obj) and not isinstance(obj, ScopeBasePass) and not (isinstance(obj, type) and issubclass(obj, ScopeBasePass)):
                    added += self._call_register(obj, where)
                else:
                    added += self._register_all(obj, where)
        return added

    def _register_all(self, rules: Any, where: str) -> list[RegisteredPass]:
        if isinstance(rules, ScopeBasePass) or is_op_definition(rules) or (isinstance(rules, type) and issubclass(rules, ScopeBasePass)):
            rules = [rules]
        if isinstance(rules, (str, bytes)) or not isinstance(rules, Iterable):
            raise FusionError(f"fusion rules from {where} must be passes or a list of passes, got {rules!r}")
        added = []
        for rule in rules:
            if is_op_definition(rule):
                self.declare_op(rule)
            else:
                added.append(self.register(rule))
        return added

    def _declare_all(self, ops: Any, where: str) -> None:
        if is_op_definition(ops):
            ops = [ops]
        if isinstance(ops, (str, bytes)) or not isinstance(ops, Iterable):
            raise FusionError(f"FUSED_OPS of {where} must be a list of fused op definitions, got {ops!r}")
        for op in ops:
            self.declare_op(op)

    def _call_register(self, register: Any, where: str) -> list[RegisteredPass]:
        before = set(id(e) for e in self._entries())
        try:
            register(self)
        except FusionError:
            raise
        except SystemExit as exc:
            raise FusionError(
                f"register(registry) from {where} calls sys.exit({exc.code!r}); it must only register rules"
            ) from None
        except Exception as exc:
            raise FusionError(f"register(registry) from {where} failed: {type(exc).__name__}: {exc}") from exc
        return [e for e in self._entries() if id(e) not in before]

    def _entries(self) -> list[RegisteredPass]:
        return list(self._user.values()) + list(self._builtin.values())

    @contextmanager
    def _from(self, source: str) -> Iterator[None]:
        saved, self._source = self._source, source
        try:
            yield
        finally:
            self._source = saved

    # ------------------------------------------------------------------ switches
    def enable(self, *names: str) -> None:
        """Turns passes on by name (non-general passes are off until named here)."""
        for entry in self._lookup(names, "enable"):
            entry.enabled = True

    def disable(self, *names: str) -> None:
        """Turns passes off by name, general ones included."""
        for entry in self._lookup(names, "disable"):
            entry.enabled = False

    def configure(self, enable: Iterable[str] = (), disable: Iterable[str] = ()) -> None:
        """``enable`` then ``disable``, checking every name first (nothing changes on an error)."""
        enable, disable = list(enable), list(disable)
        if not enable and not disable:
            return
        self._lookup(enable + disable, "configure")
        self.enable(*enable)
        self.disable(*disable)

    def _lookup(self, names: Iterable[str], what: str) -> list[RegisteredPass]:
        active = {e.name: e for e in self.passes()}
        unknown = [n for n in names if n not in active]
        if unknown:
            raise FusionError(
                f"{what}: unknown pass name(s) {', '.join(map(repr, unknown))}; known passes: "
                f"{', '.join(active) or 'none'}"
            )
        return [active[n] for n in names]

    # ------------------------------------------------------------------ queries
    def passes(self) -> list[RegisteredPass]:
        """Every active pass in run order (user passes, then builtins not replaced), enabled or not."""
        return list(self._user.values()) + [e for n, e in self._builtin.items() if n not in self._user]

    def enabled_passes(self) -> list[RegisteredPass]:
        """The passes that run, in run order."""
        if not self._user:  # the builtins only, none replaced: passes() without its copies
            return [e for e in self._builtin.values() if e.enabled]
        return [e for e in self.passes() if e.enabled]

    def names(self) -> list[str]:
        return [e.name for e in self.passes()]

    def replaced_builtin(self, name: str) -> RegisteredPass | None:
        """The builtin pass that the user pass ``name`` replaces, if any."""
        if name in self._user and name in self._builtin:
            return self._builtin[name]
        return None

    def get(self, name: str) -> RegisteredPass | None:
        return self._user.get(name) or self._builtin.get(name)

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and self.get(name) is not None

    def __len__(self) -> int:
        return len(self.passes())


# NOTE: a pure cache of the last tuple of rules asked for: (rules, the entries registering them into an empty
# registry makes); one entry, so a process passing many tuples keeps only one alive
_builtin_template_cache: list[tuple[tuple[Any, ...], tuple[RegisteredPass, ...]]] = []


def _builtin_template(rules: Iterable[Any]) -> tuple[RegisteredPass, ...] | None:
    """The entries ``load_builtins(rules)`` registers into an empty registry, for copying, when ``rules`` is a
    tuple of pass instances; None for other rules, which are registered one by one.

    Registering an instance takes its name and default flag from it and keeps the instance itself, so every
    empty registry gets equal entries: they are made once per tuple (by registering them into a scratch
    registry, which raises the same errors) and copied, as long as each instance still has the name and flag
    they were made with. Pass classes are left out: each registration makes a new instance of them.
    """
    if type(rules) is not tuple:
        return None
    cached = _builtin_template_cache[0] if _builtin_template_cache else None
    if cached is None or cached[0] is not rules:
        if not all(isinstance(rule, ScopeBasePass) for rule in rules):
            return None
        scratch = PassRegistry()
        scratch._source = BUILTIN
        entries = tuple(scratch._register_all(rules, "the builtin rules"))
        cached = (rules, entries)
        _builtin_template_cache[:] = [cached]
    for entry in cached[1]:
        rule = entry.rule
        if rule.pass_name != entry.name or bool(rule.general) != entry.general:
            return None
    return cached[1]


def _dist_name(ep: EntryPoint) -> str:
    dist = getattr(ep, "dist", None)
    name = getattr(dist, "name", None) if dist is not None else None
    return name or ep.value.split(":", 1)[0].split(".", 1)[0]
