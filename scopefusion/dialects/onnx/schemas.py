"""Op definitions of the ``onnx`` dialect, made from ONNX's own operator schemas.

The schemas come from the table :mod:`.schema_table` ships (generated from the onnx package's), as
:class:`~.schema_table.SchemaView` objects; an ``onnx.defs.OpSchema`` given here is read through
:func:`~.schema_table.schema_view`.

For an opset version, every operator of ONNX's default domain that exists (and is not deprecated) at
that version becomes one :class:`~scopefusion.ir.opdef.OpDef` named after the op type, dialect
``onnx``, ``open_attrs=True``:

* inputs and outputs in schema order, ``Single`` / ``Optional`` / ``Variadic`` as REQUIRED / OPTIONAL /
  DYNAMIC, with the element dtypes the schema allows;
* attributes with their kinds mapped by :data:`~.protos.ATTR_TYPES`; a schema default becomes the
  declared default; an optional attribute without a default is declared ``optional`` (left unset);
* inputs whose *value* ONNX's shape inference reads (Reshape ``shape``, Slice ``starts``...) declared
  ``value_depend`` (:data:`VALUE_DEPEND`);
* inference through ONNX's per-node inference (:mod:`.infer`), control flow from the bodies
  (:mod:`.control_flow`), reference kernels and folds through ``onnx.reference`` (:mod:`.kernels`);
* Reshape-like ops forward their input buffer (:data:`MEMORY_FORWARD`).

NOTE: names. A schema may give an input, an output and an attribute one name (BatchNormalization-9's
``mean`` is an input and an output; Split-1's ``split`` an input and an attribute). Attribute names are
kept exactly (nodes are keyed by them); a clashing input gets ``_input``, a clashing output ``_output``.

NOTE: graph attributes (If's ``then_branch``, Loop's ``body``) are declared optional: the builder keeps
bodies in ``node.subgraphs`` under the attribute's name, where inference reads them.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Callable, Mapping

from ...ir import attrs as A
from ...ir.opdef import OpDef, ParamType
from . import control_flow, infer, kernels
from .protos import ATTR_TYPES, TENSOR, dtype_of_type_str, wrapper_of
from .schema_table import SchemaView, schema_view, table_schemas

__all__ = [
    "MEMORY_FORWARD",
    "VALUE_DEPEND",
    "OnnxOp",
    "default_domain_definitions",
    "default_domain_schemas",
    "opdef_from_schema",
]

from . import DIALECT

# Inputs whose value ONNX's inference (or ours, for control flow) reads, by op type.
VALUE_DEPEND: dict[str, frozenset[str]] = {
    k: frozenset(v)
    for k, v in {
        "Reshape": {"shape"},
        "Expand": {"shape"},
        "ConstantOfShape": {"input"},
        "Tile": {"repeats"},
        "Slice": {"starts", "ends", "axes", "steps"},
        "Pad": {"pads", "axes"},
        "Range": {"start", "limit", "delta"},
        "Resize": {"scales", "sizes"},
        "Upsample": {"scales"},
        "Squeeze": {"axes"},
        "Unsqueeze": {"axes"},
        "Split": {"split"},
        "SplitToSequence": {"split"},
        "TopK": {"K"},
        "OneHot": {"depth"},
        "CenterCropPad": {"shape"},
        "Col2Im": {"image_shape", "block_shape"},
        "DFT": {"dft_length", "axis"},
        "STFT": {"frame_step", "frame_length"},
        "MelWeightMatrix": {"num_mel_bins", "dft_length"},
        "HannWindow": {"size"},
        "HammingWindow": {"size"},
        "BlackmanWindow": {"size"},
        "AffineGrid": {"size"},
        "ExpandDims": {"axis"},  # com.microsoft
        "If": {"cond"},
        "Loop": {"M", "cond"},
        **{
            f"Reduce{r}": {"axes"}
            for r in ("L1", "L2", "LogSum", "LogSumExp", "Max", "Mean", "Min", "Prod", "Sum", "SumSquare")
        },
    }.items()
}

MEMORY_FORWARD = frozenset({"Reshape", "Squeeze", "Unsqueeze", "Flatten", "Identity"})

_PARAM = {"Single": ParamType.REQUIRED, "Optional": ParamType.OPTIONAL, "Variadic": ParamType.DYNAMIC}


@dataclass(frozen=True)
class OnnxOp:
    """What inference and kernels need of one schema: its identity, attribute kinds, input wrappers."""

    op_type: str
    domain: str
    opset: int
    schema: SchemaView
    attr_kinds: dict[str, str]  # attribute name -> ONNX kind name ("INTS"...)
    input_wrappers: tuple[str, ...]  # per formal input: tensor / seq / optional / optional_seq
    input_types: tuple[str, ...]  # per formal input: its type string ("T", "tensor(int64)")
    output_types: tuple[str, ...]
    constraints: dict[str, tuple[str, ...]]  # type parameter -> allowed type strings

    @property
    def required_outputs(self) -> int:
        """How many leading outputs are not optional."""
        n = 0
        for p in self.schema.outputs:
            if p.option == "Optional":
                break
            n += 1
        return max(n, 1)

    def formal_input(self, index: int) -> int:
        """The formal input a node input belongs to (a variadic last input takes every later one)."""
        return min(index, len(self.input_types) - 1)

    def formal_output(self, index: int) -> int:
        return min(index, len(self.output_types) - 1)

    def wrapper(self, index: int) -> str:
        return self.input_wrappers[self.formal_input(index)] if self.input_wrappers else TENSOR

    def allowed(self, type_str: str) -> tuple[str, ...]:
        return self.constraints.get(type_str, (type_str,))

    def onnx_schema(self) -> Any:
        """The onnx package's ``OpSchema`` of this op and opset (imports ``onnx``), for ONNX's own inference."""
        from onnx import defs

        return defs.get_schema(self.op_type, self.opset, self.domain)


def _identifier(name: str) -> str:
    out = re.sub(r"\W", "_", name).strip("_") or "x"
    return out if not out[0].isdigit() else f"x{out}"


def _dtypes(type_strs: tuple[str, ...]) -> frozenset | None:
    found = {d for d in (dtype_of_type_str(t) for t in type_strs) if d is not None}
    return frozenset(found) or None


def onnx_op(schema: Any, opset: int) -> OnnxOp:
    """What inference needs of a schema (a :class:`~.schema_table.SchemaView` or an ``onnx.defs.OpSchema``)."""
    if not isinstance(schema, SchemaView):
        schema = schema_view(schema)
    constraints = {tc.type_param_str: tuple(tc.allowed_type_strs) for tc in schema.type_constraints}

    def allowed(type_str: str) -> tuple[str, ...]:
        return constraints.get(type_str, (type_str,))

    return OnnxOp(
        op_type=schema.name,
        domain=schema.domain,
        opset=opset,
        schema=schema,
        attr_kinds={name: a.kind for name, a in schema.attributes.items()},
        input_wrappers=tuple(wrapper_of(allowed(p.type_str)) for p in schema.inputs),
        input_types=tuple(p.type_str for p in schema.inputs),
        output_types=tuple(p.type_str for p in schema.outputs),
        constraints=constraints,
    )


def opdef_from_schema(
    schema: Any, opset: int, dialect: str = DIALECT, *, attach: Callable[[OpDef, OnnxOp], None] | None = None
) -> OpDef:
    """The op definition of one ONNX schema (see the module docstring).

    ``attach(opdef, op)`` sets the inference and kernel hooks; by default ONNX's own (:mod:`.infer`,
    :mod:`.kernels`), or the bodies' for control flow.
    """
    op = onnx_op(schema, opset)
    schema = op.schema
    doc = schema.doc
    opdef = OpDef(schema.name, dialect, doc=doc, open_attrs=True)
    attr_names = set(schema.attributes)
    depend = VALUE_DEPEND.get(schema.name, frozenset())
    taken: set[str] = set(attr_names)
    for p in schema.inputs:
        name = _identifier(p.name)
        if name in taken:
            name = f"{name}_input"
        taken.add(name)
        opdef.input(
            name,
            _PARAM[p.option],
            dtypes=_dtypes(op.allowed(p.type_str)),
            value_depend=p.name in depend,
        )
    for p in schema.outputs:
        name = _identifier(p.name)
        if name in taken:
            name = f"{name}_output"
        taken.add(name)
        opdef.output(name, _PARAM[p.option], dtypes=_dtypes(op.allowed(p.type_str)))
    for name, a in sorted(schema.attributes.items()):
        type_id = ATTR_TYPES[a.kind]
        if a.default:
            opdef.attr(name, type_id, default=a.default[0])
        elif a.required and type_id not in (A.GRAPH, A.LIST_GRAPH):
            opdef.attr(name, type_id)
        else:
            opdef.attr(name, type_id, optional=True)
    if attach is not None:
        attach(opdef, op)
    elif schema.name in control_flow.BODY_OPS:
        control_flow.attach(opdef, op)
    else:
        infer.attach(opdef, op)
        kernels.attach(opdef, op)
    if schema.name in MEMORY_FORWARD:
        opdef.set_memory_forward(0)
    return opdef


def default_domain_definitions(opset: int) -> list[OpDef]:
    """One op definition per operator of ONNX's default domain at ``opset``, sorted by op type."""
    return [opdef_from_schema(schema, opset) for schema in default_domain_schemas(opset).values()]


def default_domain_schemas(opset: int) -> Mapping[str, SchemaView]:
    """The schema of each operator of ONNX's default domain that exists and is not deprecated at ``opset``,
    by op type, sorted (from the table of :mod:`.schema_table`).

    Raises:
        ValueError: ``opset`` is not a version the table (the installed onnx) knows.
    """
    return table_schemas(opset)
