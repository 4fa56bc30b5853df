"""Op definitions and their registry (after seed 001: putting an operator into graph mode).

An :class:`OpDef` declares an op's inputs and outputs (param type required / optional / dynamic, allowed
dtypes and formats), its attributes (required, or optional with a default), and how its outputs'
shapes and dtypes are inferred: an explicit ``infer_shape`` / ``infer_dtype`` function, or ``follow``
(an output takes an input's shape, dtype or both). Inputs whose *value* shape inference needs (Reshape's
``shape``) are declared ``value_depend``; only those expose data to ``infer_shape``.

Everything is checked when the definition is written: a ``follow`` or ``value_depend`` naming an input
that does not exist, a duplicate name, a default of the wrong kind — each raises at once.

NOTE: an explicit ``infer_shape`` wins over ``follow`` and must set every output's shape (the seed's
rule); ``follow`` applies only when the definition has no ``infer_shape``. Dtypes work the same way
with ``infer_dtype``.
"""

from __future__ import annotations

import enum
from typing import Any, Callable, Iterable, Iterator, Mapping, NamedTuple, Sequence, cast

import numpy as np

from ..dtypes import DType
from ..errors import InferenceError
from ..records import FrozenRecord
from .attrs import AttrType, AttrValue

__all__ = [
    "AttrSpec",
    "FollowType",
    "InferContext",
    "InputInfo",
    "InputSpec",
    "OpDef",
    "OpRegistry",
    "OutputSpec",
    "ParamType",
]


class ParamType(enum.Enum):
    REQUIRED = "required"
    OPTIONAL = "optional"
    DYNAMIC = "dynamic"  # any number (>= 0) of inputs or outputs of one kind


class FollowType(enum.Flag):
    SHAPE = 1
    DTYPE = 2
    ALL = 3


class InputSpec(FrozenRecord):
    _fields = ("name", "param", "dtypes", "formats", "value_depend")

    def __init__(self, name: str, param: ParamType = ParamType.REQUIRED, dtypes: frozenset[DType] | None = None,
                 formats: frozenset[str] | None = None, value_depend: bool = False) -> None:
        self.name = name
        self.param = param
        self.dtypes = dtypes  # None: any
        self.formats = formats
        self.value_depend = value_depend


class OutputSpec(FrozenRecord):
    _fields = ("name", "param", "dtypes", "formats", "follow")

    def __init__(self, name: str, param: ParamType = ParamType.REQUIRED, dtypes: frozenset[DType] | None = None,
                 formats: frozenset[str] | None = None, follow: tuple[str, FollowType] | None = None) -> None:
        self.name = name
        self.param = param
        self.dtypes = dtypes
        self.formats = formats
        self.follow = follow


class AttrSpec(FrozenRecord):
    _fields = ("name", "type_id", "required", "default")

    def __init__(self, name: str, type_id: AttrType, required: bool = True, default: AttrValue | None = None) -> None:
        self.name = name
        self.type_id = type_id
        self.required = required
        self.default = default


class InputInfo(FrozenRecord):
    """What inference sees of one input: shape (None = unknown rank), dtype, format, and its value.

    ``data`` is set only for a value-dependent input whose producer is constant; otherwise None.
    """

    _fields = ("shape", "dtype", "format", "data")

    def __init__(self, shape: tuple[int, ...] | None, dtype: DType | None, format: str = "ND",
                 data: np.ndarray | None = None) -> None:
        self.shape = shape
        self.dtype = dtype
        self.format = format
        self.data = data


ShapeFn = Callable[["InferContext"], None]
DtypeFn = Callable[["InferContext"], None]


class OpDef:
    """A declared op; build it with the chained ``input`` / ``output`` / ``attr`` calls.

    Example::

        reshape = (OpDef("Reshape", dialect="tf")
                   .input("tensor").input("shape", value_depend=True, dtypes=(INT32, INT64))
                   .output("output", follow=("tensor", FollowType.DTYPE))
                   .set_infer_shape(reshape_shape))
    """

    def __init__(self, name: str, dialect: str = "", *, doc: str = "", open_attrs: bool = False) -> None:
        if not name or "." in name:
            raise ValueError(f"op name {name!r}: give a plain name and the dialect separately")
        self.name = name
        self.dialect = dialect
        self.doc = doc
        # A framework op (tf, onnx dialects) keeps every attribute the model gave it; declared ones
        # are still checked for kind, undeclared ones are kept unchecked.
        self.open_attrs = open_attrs
        self.inputs: list[InputSpec] = []
        self.outputs: list[OutputSpec] = []
        self.attrs: dict[str, AttrSpec] = {}
        self.infer_shape: ShapeFn | None = None
        self.infer_dtype: DtypeFn | None = None
        # reference(inputs: list[np.ndarray | None], attrs: dict[str, payload]) -> list[np.ndarray]:
        # a numpy kernel, used by the runtime and by constant folding.
        self.reference: Callable[..., Any] | None = None
        # fold(inputs: list[InputInfo | None], attrs) -> list[np.ndarray] | None: output values computed at
        # build time from what is known (every input's data where its producer is constant, shapes
        # otherwise); None when not foldable. Ops like Shape fold from static input shapes alone.
        self.fold: Callable[..., Any] | None = None
        self.memory_forward: int | None = None  # output 0 may alias this input's buffer
        # bind_inputs / bind_outputs answers by (kind, count); a new empty one whenever a spec is declared or
        # changed, so copies (which share it while their specs are the same) never see another's answers
        self._bindings: dict[tuple[Any, ...], Any] = {}
        # (the attribute map, its names) for complete_attrs; made again when the map is another or has grown
        self._declared_names: tuple[dict[str, AttrSpec], frozenset[str]] | None = None

    def copy(self) -> "OpDef":
        """A definition equal to this one that can be declared further without changing this one: the
        spec lists and attribute map are new, the frozen specs, the functions and the binding answers
        (until either declares further) are shared."""
        clone = OpDef.__new__(OpDef)
        state = self.__dict__.copy()  # copied whole, then the three containers replaced: no key inserted one by one
        state["inputs"] = list(self.inputs)
        state["outputs"] = list(self.outputs)
        state["attrs"] = dict(self.attrs)
        clone.__dict__ = state
        return clone

    @property
    def qualified_name(self) -> str:
        return f"{self.dialect}.{self.name}" if self.dialect else self.name

    # ------------------------------------------------------------------ declaration
    def _check_new(self, name: str, kind: str) -> None:
        if not name.isidentifier():
            raise ValueError(f"{self.qualified_name}: {kind} name {name!r} must be an identifier")
        taken = {s.name for s in self.inputs} | {s.name for s in self.outputs}
        if name in taken or name in self.attrs:
            raise ValueError(f"{self.qualified_name}: {kind} name {name!r} is already declared")

    def input(
        self,
        name: str,
        param: ParamType = ParamType.REQUIRED,
        *,
        dtypes: Iterable[DType] | None = None,
        formats: Iterable[str] | None = None,
        value_depend: bool = False,
    ) -> "OpDef":
        self._check_new(name, "input")
        if self.inputs and self.inputs[-1].param is ParamType.DYNAMIC and param is ParamType.DYNAMIC:
            raise ValueError(f"{self.qualified_name}: two dynamic inputs in a row cannot be told apart")
        self.inputs.append(InputSpec(name, param, _frozen(dtypes), _frozen(formats), value_depend))
        self._bindings = {}
        return self

    def output(
        self,
        name: str,
        param: ParamType = ParamType.REQUIRED,
        *,
        dtypes: Iterable[DType] | None = None,
        formats: Iterable[str] | None = None,
        follow: tuple[str, FollowType] | str | None = None,
    ) -> "OpDef":
        self._check_new(name, "output")
        if isinstance(follow, str):
            follow = (follow, FollowType.ALL)
        if follow is not None:
            self._input_index(follow[0], "follow")
        self.outputs.append(OutputSpec(name, param, _frozen(dtypes), _frozen(formats), follow))
        self._bindings = {}
        return self

    def follow(self, output: str, input: str, how: FollowType = FollowType.ALL) -> "OpDef":
        """Makes ``output`` take ``input``'s shape, dtype or both (``how``)."""
        self._input_index(input, "follow")
        for i, spec in enumerate(self.outputs):
            if spec.name == output:
                self.outputs[i] = OutputSpec(spec.name, spec.param, spec.dtypes, spec.formats, (input, how))
                self._bindings = {}
                return self
        raise ValueError(f"{self.qualified_name}: follow names output {output!r}, which is not declared")

    def value_depend(self, input: str) -> "OpDef":
        """Declares ``input`` a data-dependent input: inference may read its value."""
        i = self._input_index(input, "value_depend")
        spec = self.inputs[i]
        self.inputs[i] = InputSpec(spec.name, spec.param, spec.dtypes, spec.formats, True)
        self._bindings = {}
        return self

    def attr(self, name: str, type_id: AttrType, *, default: Any = ..., optional: bool = False) -> "OpDef":
        """Declares an attribute: required when no ``default`` is given, else optional with it.

        ``optional=True`` without a default declares an attribute that a node may leave unset, with no
        default filled in (ONNX's Conv ``strides``: when absent its meaning depends on the input's rank).
        """
        self._check_new(name, "attribute")
        if default is ...:
            self.attrs[name] = AttrSpec(name, type_id, not optional, None)
        else:
            try:
                value = default if isinstance(default, AttrValue) else AttrValue(type_id, default)
            except (TypeError, ValueError) as e:
                raise ValueError(f"{self.qualified_name}: default of attribute {name!r}: {e}") from None
            if value.type_id is not type_id:
                raise ValueError(f"{self.qualified_name}: default of {name!r} is {value.type_id.name}, not {type_id.name}")
            self.attrs[name] = AttrSpec(name, type_id, False, value)
        self._bindings = {}  # what was remembered of the attributes (whether a map is complete) may change
        return self

    def set_infer_shape(self, fn: ShapeFn) -> "OpDef":
        self.infer_shape = fn
        return self

    def set_infer_dtype(self, fn: DtypeFn) -> "OpDef":
        self.infer_dtype = fn
        return self

    def set_reference(self, fn: Callable[..., Any]) -> "OpDef":
        self.reference = fn
        return self

    def set_fold(self, fn: Callable[..., Any]) -> "OpDef":
        self.fold = fn
        return self

    def try_fold(self, inputs: Sequence[InputInfo | None], attrs: dict[str, AttrValue]) -> list[np.ndarray] | None:
        """Output values at build time: the ``fold`` hook, else ``reference`` when every input is constant."""
        payloads = {k: v.value for k, v in attrs.items()}
        if self.fold is not None:
            return cast("list[np.ndarray] | None", self.fold(list(inputs), payloads))
        if self.reference is not None and inputs and all(i is not None and i.data is not None for i in inputs):
            return cast("list[np.ndarray] | None", self.reference([i.data for i in inputs], payloads))  # type: ignore[union-attr]
        return None

    def set_memory_forward(self, input_index: int = 0) -> "OpDef":
        self.memory_forward = input_index
        return self

    def _input_index(self, name: str, where: str) -> int:
        for i, spec in enumerate(self.inputs):
            if spec.name == name:
                return i
        known = ", ".join(s.name for s in self.inputs) or "none"
        raise ValueError(f"{self.qualified_name}: {where} names input {name!r}, which is not declared (inputs: {known})")

    # ------------------------------------------------------------------ binding
    def bind_inputs(self, count: int) -> list[tuple[InputSpec, int, int]]:
        """Splits ``count`` node inputs over the declared inputs: ``(spec, start, stop)`` per spec.

        Raises ValueError when the count does not fit the declaration.
        """
        return list(self._bound_inputs(count))

    def _bound_inputs(self, count: int) -> tuple[tuple[InputSpec, int, int], ...]:
        found = self._bindings.get(("inputs", count))
        if found is None:
            found = self._bindings[("inputs", count)] = tuple(_bind(self.inputs, count, self.qualified_name, "inputs"))
        return found

    def _direct_plan(self, num_inputs: int, num_outputs: int) -> tuple[tuple[int, bool], ...] | None:
        """Per output, the input slot whose dtype and shape it takes and whether it takes its format too,
        when the op has no inference function and every output follows the dtype and shape of an input
        bound to exactly one slot; else None. Kept with the bindings."""
        key = ("direct", num_inputs, num_outputs)
        found = self._bindings.get(key, _UNSET)
        if found is _UNSET:
            found = None
            if self.infer_shape is None and self.infer_dtype is None:
                try:
                    slots = {spec.name: (start, stop) for spec, start, stop in self._bound_inputs(num_inputs)}
                    rules = self._output_plan(num_outputs)
                except ValueError:  # counts the definition refuses: inference says so
                    return None
                plan = []
                for rule in rules:
                    start, stop = slots.get(rule.input, (0, 0)) if rule.input is not None else (0, 0)
                    if stop - start != 1 or not (rule.follows_dtype and rule.follows_shape):
                        break
                    plan.append((start, rule.follows_format))
                else:
                    found = tuple(plan)
            self._bindings[key] = found
        return found  # type: ignore[no-any-return]

    def _value_depend_slots(self, count: int) -> frozenset[int]:
        """The slots of a node with ``count`` inputs that are bound to value-dependent inputs."""
        found = self._bindings.get(("depend", count))
        if found is None:
            slots = [i for spec, start, stop in self._bound_inputs(count) if spec.value_depend for i in range(start, stop)]
            found = self._bindings[("depend", count)] = frozenset(slots)
        return found

    def bind_outputs(self, count: int) -> list[tuple[OutputSpec, int, int]]:
        return list(self._bound_outputs(count))

    def _bound_outputs(self, count: int) -> tuple[tuple[OutputSpec, int, int], ...]:
        found = self._bindings.get(("outputs", count))
        if found is None:
            found = self._bindings[("outputs", count)] = tuple(_bind(self.outputs, count, self.qualified_name, "outputs"))
        return found

    def check_attrs(self, attrs: dict[str, AttrValue], where: str) -> dict[str, AttrValue]:
        """Checks attribute names and kinds against the declaration; returns them with defaults filled."""
        for name, value in attrs.items():
            if name.startswith("_"):
                continue  # private annotations (provenance, original names) are always allowed
            spec = self.attrs.get(name)
            if spec is None:
                if self.open_attrs:
                    continue
                known = ", ".join(self.attrs) or "none"
                raise ValueError(f"{where}: op {self.qualified_name} has no attribute {name!r} (declared: {known})")
            if value.type_id is not spec.type_id:
                raise ValueError(
                    f"{where}: attribute {name!r} of {self.qualified_name} is {value.type_id.name}, expected {spec.type_id.name}"
                )
        out = dict(attrs)
        for spec in self.attrs.values():
            if spec.name not in out:
                if spec.required:
                    raise ValueError(f"{where}: op {self.qualified_name} needs attribute {spec.name!r} ({spec.type_id.name})")
                if spec.default is not None:
                    out[spec.name] = spec.default
        return out

    def complete_attrs(self, attrs: dict[str, AttrValue], node_name: str) -> None:
        """Adds the default of every optional attribute missing from ``attrs`` (in declaration order), in
        place; the kinds of the attributes present are not checked again (see :meth:`check_attrs`).

        Raises ValueError, as :meth:`check_attrs` does, when a required attribute is missing.
        """
        declared = self.attrs
        names = self._declared_names
        if names is None or names[0] is not declared or len(names[1]) != len(declared):
            names = self._declared_names = (declared, frozenset(declared))
        if attrs.keys() >= names[1]:  # every declared attribute is set (a framework node's usual case)
            return
        for spec in declared.values():
            if spec.name not in attrs:
                if spec.required:
                    raise ValueError(
                        f"node {node_name!r}: op {self.qualified_name} needs attribute {spec.name!r} ({spec.type_id.name})"
                    )
                if spec.default is not None:
                    attrs[spec.name] = spec.default

    # ------------------------------------------------------------------ inference
    def infer(self, ctx: "InferContext") -> None:
        """Runs dtype then shape inference into ``ctx``; raises InferenceError naming the op and inputs."""
        try:
            self._infer_dtypes(ctx)
            self._infer_shapes(ctx)
        except InferenceError:
            raise
        except Exception as e:  # an inference function's own failure
            raise InferenceError(ctx.describe(f"inference failed: {type(e).__name__}: {e}")) from e
        for i in range(ctx.num_outputs):
            if ctx._out_dtypes[i] is None:
                raise InferenceError(ctx.describe(f"output {i} has no dtype after inference"))
            if ctx._out_shapes[i] is _UNSET:
                raise InferenceError(ctx.describe(f"output {i} has no shape after inference"))

    def _output_plan(self, count: int) -> tuple[_OutputRule, ...]:
        """Per output of a node with ``count`` outputs: the input it follows (or None), whether for its
        dtype, its shape and its format, and its one allowed dtype (or None). Kept with the bindings."""
        found = self._bindings.get(("plan", count))
        if found is None:
            rules = []
            for spec, start, stop in self.bind_outputs(count):
                follow, how = spec.follow if spec.follow is not None else (None, FollowType(0))
                only = next(iter(spec.dtypes)) if spec.dtypes is not None and len(spec.dtypes) == 1 else None
                rule = _OutputRule(follow, bool(how & FollowType.DTYPE), bool(how & FollowType.SHAPE), how == FollowType.ALL, only)
                rules.extend([rule] * (stop - start))
            found = self._bindings[("plan", count)] = tuple(rules)
        return found

    def _infer_dtypes(self, ctx: "InferContext") -> None:
        if self.infer_dtype is not None:
            self.infer_dtype(ctx)
            return
        dtypes = ctx._out_dtypes
        for i, rule in enumerate(self._output_plan(ctx.num_outputs)):
            if rule.follows_dtype:
                dtypes[i] = ctx.followed(rule.input).dtype  # type: ignore[arg-type]
            elif rule.only_dtype is not None:
                dtypes[i] = rule.only_dtype

    def _infer_shapes(self, ctx: "InferContext") -> None:
        if self.infer_shape is not None:
            self.infer_shape(ctx)
            return
        for i, rule in enumerate(self._output_plan(ctx.num_outputs)):
            if rule.follows_shape:
                src = ctx.followed(rule.input)  # type: ignore[arg-type]
                ctx.set_output_shape(i, src.shape)
                if rule.follows_format:
                    ctx._out_formats[i] = src.format

    def __repr__(self) -> str:
        return f"OpDef({self.qualified_name})"


class _OutputRule(NamedTuple):
    """How an output without an explicit inference function gets its dtype, shape and format."""

    input: str | None  # the declared input it follows
    follows_dtype: bool
    follows_shape: bool
    follows_format: bool
    only_dtype: DType | None  # the output's one allowed dtype, used when it does not follow a dtype


def _frozen(xs: Iterable[Any] | None) -> frozenset[Any] | None:
    return None if xs is None else frozenset(xs)


def _bind(specs: Sequence[InputSpec | OutputSpec], count: int, op: str, what: str) -> list[tuple[Any, int, int]]:
    fixed_required = sum(1 for s in specs if s.param is ParamType.REQUIRED)
    optional = sum(1 for s in specs if s.param is ParamType.OPTIONAL)
    has_dynamic = any(s.param is ParamType.DYNAMIC for s in specs)
    if count < fixed_required or (not has_dynamic and count > fixed_required + optional):
        shape = ", ".join(f"{s.name}({s.param.value})" for s in specs) or "none"
        raise ValueError(f"{op} takes {what} [{shape}], found {count}")
    extra = count - fixed_required  # slots left for optional and dynamic specs, filled left to right
    out = []
    pos = 0
    for s in specs:
        if s.param is ParamType.REQUIRED:
            n = 1
        elif s.param is ParamType.OPTIONAL:
            n = 1 if extra > 0 else 0
            extra -= n
        else:
            later_optional = sum(1 for t in specs[specs.index(s) + 1 :] if t.param is ParamType.OPTIONAL)
            n = max(0, extra - later_optional)
            extra -= n
        out.append((s, pos, pos + n))
        pos += n
    return out


_UNSET = object()


class InferContext:
    """What an inference function reads and writes for one node.

    Reading: ``input(i)`` / ``param(name)`` give :class:`InputInfo` (value data only for value-dependent
    inputs), ``attr(name)`` a declared attribute's payload. Writing: ``set_output_shape`` /
    ``set_output_dtype`` / ``set_output_format``.
    """

    def __init__(
        self,
        opdef: OpDef,
        node_name: str,
        inputs: Sequence[InputInfo | None],
        attrs: dict[str, AttrValue],
        num_outputs: int,
        subgraphs: Mapping[str, Any] | None = None,
        plain: Sequence[InputInfo | None] | None = None,
    ) -> None:
        """``plain``, when the caller has it: the same inputs as ``inputs`` without their data, taken for
        the inputs that are not value-dependent instead of copies made here."""
        self.opdef = opdef
        # Control-flow bodies (``node.subgraphs``) by name, for ops whose outputs follow their bodies'.
        self.subgraphs: dict[str, Any] = dict(subgraphs or {})
        self.node_name = node_name
        self._bound = opdef._bound_inputs(len(inputs))
        self._inputs: list[InputInfo | None] = list(inputs)
        if any(info is not None and info.data is not None for info in inputs):
            for spec, start, stop in self._bound:
                if not spec.value_depend:
                    for i in range(start, stop):
                        info = inputs[i]
                        if info is not None and info.data is not None:
                            self._inputs[i] = plain[i] if plain is not None else InputInfo(info.shape, info.dtype, info.format, None)
        self._attrs = attrs
        self.num_outputs = num_outputs
        self._out_shapes: list[Any] = [_UNSET] * num_outputs
        self._out_dtypes: list[DType | None] = [None] * num_outputs
        self._out_formats: list[str] = ["ND"] * num_outputs

    @classmethod
    def _of_seen_inputs(
        cls,
        opdef: OpDef,
        node_name: str,
        inputs: list[InputInfo | None],
        attrs: dict[str, AttrValue],
        num_outputs: int,
        subgraphs: Mapping[str, Any] | None,
    ) -> "InferContext":
        """As the constructor, for ``inputs`` that carry data only where the op's inputs are value-dependent
        (the list is kept, not copied)."""
        ctx = cls.__new__(cls)
        ctx.opdef = opdef
        ctx.subgraphs = dict(subgraphs) if subgraphs else {}
        ctx.node_name = node_name
        ctx._bound = opdef._bound_inputs(len(inputs))
        ctx._inputs = inputs
        ctx._attrs = attrs
        ctx.num_outputs = num_outputs
        ctx._out_shapes = [_UNSET] * num_outputs
        ctx._out_dtypes = [None] * num_outputs
        ctx._out_formats = ["ND"] * num_outputs
        return ctx

    @property
    def num_inputs(self) -> int:
        return len(self._inputs)

    @property
    def inputs(self) -> Sequence[InputInfo | None]:
        """Every input's info in slot order, None where absent (as :meth:`input` gives them); read only."""
        return self._inputs

    def input(self, i: int) -> InputInfo:
        if not 0 <= i < len(self._inputs):
            raise InferenceError(self.describe(f"input {i} asked, the node has {len(self._inputs)}"))
        info = self._inputs[i]
        if info is None:
            raise InferenceError(self.describe(f"input {i} is absent (an optional input left out)"))
        return info

    def has_input(self, i: int) -> bool:
        return 0 <= i < len(self._inputs) and self._inputs[i] is not None

    def _single(self, name: str) -> InputInfo | None:
        """The input bound to ``name`` when exactly one is, present; else None (the caller's general path
        then raises the right error)."""
        for spec, start, stop in self._bound:
            if spec.name == name:
                if stop - start == 1:
                    return self._inputs[start]
                return None
        return None

    def param(self, name: str) -> InputInfo:
        """The single input bound to declared input ``name``."""
        info = self._single(name)
        if info is not None:
            return info
        infos = self.params(name)
        if len(infos) != 1:
            raise InferenceError(self.describe(f"input {name!r} has {len(infos)} values, expected one"))
        return infos[0]

    def params(self, name: str) -> list[InputInfo]:
        """Every input bound to declared input ``name`` (several for a dynamic input)."""
        for spec, start, stop in self._bound:
            if spec.name == name:
                return [self.input(i) for i in range(start, stop)]
        raise InferenceError(self.describe(f"asked for input {name!r}, which the op does not declare"))

    def followed(self, name: str) -> InputInfo:
        """The input an output follows: the first value bound to ``name`` (a dynamic input's first)."""
        info = self._single(name)
        if info is not None:
            return info
        infos = self.params(name)
        if not infos:
            raise InferenceError(self.describe(f"an output follows input {name!r}, which has no values"))
        return infos[0]

    def input_shape(self, i: int) -> tuple[int, ...] | None:
        return self.input(i).shape

    def input_dtype(self, i: int) -> DType | None:
        return self.input(i).dtype

    def input_data(self, i: int) -> np.ndarray | None:
        """The input's value: only for value-dependent inputs with a constant producer, else None."""
        return self.input(i).data

    def attr(self, name: str) -> Any:
        if name not in self.opdef.attrs:
            raise InferenceError(self.describe(f"asked for attribute {name!r}, which the op does not declare"))
        value = self._attrs.get(name)
        return None if value is None else value.value

    def set_output_shape(self, i: int, shape: Iterable[int] | None) -> None:
        self._check_out(i)
        self._out_shapes[i] = None if shape is None else tuple(int(d) for d in shape)

    def set_outputs(self, answers: Sequence[tuple[Iterable[int] | None, DType | None]]) -> None:
        """Sets output ``i``'s shape and dtype from ``answers[i]``, as ``set_output_dtype`` then
        ``set_output_shape`` would, output by output."""
        if len(answers) > self.num_outputs:
            self._check_out(self.num_outputs)
        shapes, dtypes = self._out_shapes, self._out_dtypes
        for i, (shape, dtype) in enumerate(answers):
            dtypes[i] = dtype
            shapes[i] = None if shape is None else tuple([int(d) for d in shape])

    def set_output_dtype(self, i: int, dtype: DType | None) -> None:
        self._check_out(i)
        self._out_dtypes[i] = dtype

    def set_output_format(self, i: int, fmt: str) -> None:
        self._check_out(i)
        self._out_formats[i] = fmt

    def output_shape(self, i: int) -> tuple[int, ...] | None:
        shape = self._out_shapes[i]
        return None if shape is _UNSET else shape

    def output_dtype(self, i: int) -> DType | None:
        return self._out_dtypes[i]

    def results(self) -> list[tuple[tuple[int, ...] | None, DType, str]]:
        return [(s, d, f) for s, d, f in zip(self._out_shapes, self._out_dtypes, self._out_formats)]  # type: ignore[misc]

    def _check_out(self, i: int) -> None:
        if not 0 <= i < self.num_outputs:
            raise InferenceError(self.describe(f"output {i} set, the node has {self.num_outputs}"))

    def describe(self, reason: str) -> str:
        shown = []
        for info in self._inputs:
            if info is None:
                shown.append("absent")
            else:
                dims = "*" if info.shape is None else "[" + ",".join(map(str, info.shape)) + "]"
                shown.append(f"{info.dtype or '?'}{dims}")
        return f"node {self.node_name!r} ({self.opdef.qualified_name}) with inputs ({', '.join(shown)}): {reason}"


class OpRegistry:
    """A set of op definitions keyed by qualified name (``dialect.Op``); an ordinary object, fresh per test."""

    def __init__(self, defs: Iterable[OpDef] = ()) -> None:
        self._defs: dict[str, OpDef] = {}
        for d in defs:
            self.register(d)

    def register(self, opdef: OpDef, *, replace: bool = False) -> OpDef:
        """Adds ``opdef``; with ``replace``, it takes the place of the definition of the same name."""
        if opdef.qualified_name in self._defs and not replace:
            raise ValueError(f"op {opdef.qualified_name} is already registered")
        self._defs[opdef.qualified_name] = opdef
        return opdef

    def define(self, name: str, dialect: str = "", **kwargs: Any) -> OpDef:
        """Creates, registers and returns a new :class:`OpDef` to be declared further."""
        return self.register(OpDef(name, dialect, **kwargs))

    def get(self, qualified_name: str) -> OpDef:
        found = self._defs.get(qualified_name)
        if found is None:
            raise KeyError(f"no op named {qualified_name!r} is registered; check the dialect and spelling")
        return found

    def lookup(self, qualified_name: str) -> OpDef | None:
        return self._defs.get(qualified_name)

    def __contains__(self, qualified_name: object) -> bool:
        return qualified_name in self._defs

    def __iter__(self) -> Iterator[OpDef]:
        return iter(self._defs.values())

    def __len__(self) -> int:
        return len(self._defs)

    def dialects(self) -> set[str]:
        return {d.dialect for d in self._defs.values()}
