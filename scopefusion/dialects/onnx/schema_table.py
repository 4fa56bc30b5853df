"""ONNX operator schemas as plain data, read from a table shipped with the package.

``onnx_schemas.jsonl`` is generated from the installed ``onnx`` package's schemas by
``tools/gen_onnx_schemas.py`` (``--check`` compares; tests/ir/ops_onnx/test_schema_table.py keeps the table
in sync with the installed onnx). It holds, for every version of every operator of ONNX's default
domain, what an op definition is made of (:class:`SchemaView`), so building the ``onnx`` dialect does not
import the ``onnx`` package; ONNX's own inference and reference kernels (the fallbacks of
:mod:`.infer` and :mod:`.kernels`) still do, when a node needs them.

Table format: JSON lines. The first line is the header: ``onnx_version``, ``latest_opset``, ``data_types``
(``TensorProto.DataType`` name -> code), ``versions`` (op type -> ``[[since_version, deprecated], ...]``,
oldest first) and ``lines`` (op type -> ``[offset, length]`` of its line, in bytes after the header
line), ``ir_version`` (the newest IR version) and ``release_versions`` (per onnx release, oldest first:
``[ir_version, ai.onnx opset, ai.onnx.ml opset, ai.onnx.training opset]``, the last two when the release
has them). Each op's line is the list of its versions' schemas, oldest first, parsed on the op's first use:
``{"since_version", "deprecated", "doc", "inputs", "outputs", "attributes", "type_constraints"}`` with
parameters ``[name, option, type_str]``, attributes ``[name, kind, required, default]`` (``default``
null when there is none, else ``[payload]``) and constraints ``[type_param, [allowed type strings]]``.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Iterable, Iterator, Mapping

__all__ = [
    "NO_DEFAULT",
    "AttrView",
    "ConstraintView",
    "ParamView",
    "SchemaView",
    "data_type_code",
    "first_paragraph",
    "latest_ir_version",
    "latest_opset",
    "min_ir_version",
    "schema_at",
    "schema_from_record",
    "schema_record",
    "schema_view",
    "table_onnx_version",
    "table_schemas",
]

TABLE = "onnx_schemas.jsonl"

# What an attribute without a default holds in AttrView.default.
NO_DEFAULT: tuple = ()


@dataclass(frozen=True)
class ParamView:
    """An input or output: its name, option (``Single`` / ``Optional`` / ``Variadic``) and type string."""

    name: str
    option: str
    type_str: str


@dataclass(frozen=True)
class AttrView:
    """An attribute: its ONNX kind name (``INTS``...), whether required, and ``(payload,)`` of its default
    (:data:`NO_DEFAULT` when it has none)."""

    kind: str
    required: bool
    default: tuple


@dataclass(frozen=True)
class ConstraintView:
    type_param_str: str
    allowed_type_strs: tuple[str, ...]


@dataclass(frozen=True)
class SchemaView:
    """What an op definition is made of, of one version of an operator's schema."""

    name: str
    domain: str
    since_version: int
    doc: str  # the first paragraph of the schema's documentation
    inputs: tuple[ParamView, ...]
    outputs: tuple[ParamView, ...]
    attributes: dict[str, AttrView]  # in the schema's order
    type_constraints: tuple[ConstraintView, ...]
    deprecated: bool = False


def first_paragraph(doc: str | None) -> str:
    return (doc or "").strip().split("\n\n")[0].strip()


def schema_view(schema: Any) -> SchemaView:
    """The view of an ``onnx.defs.OpSchema``."""
    from .protos import attr_payload

    attributes = {}
    for name, a in schema.attributes.items():
        default = a.default_value
        has_default = default is not None and default.type != 0
        attributes[name] = AttrView(a.type.name, bool(a.required), (attr_payload(default),) if has_default else NO_DEFAULT)
    return SchemaView(
        name=schema.name,
        domain=schema.domain,
        since_version=int(schema.since_version),
        doc=first_paragraph(schema.doc),
        inputs=tuple(ParamView(p.name, p.option.name, p.type_str) for p in schema.inputs),
        outputs=tuple(ParamView(p.name, p.option.name, p.type_str) for p in schema.outputs),
        attributes=attributes,
        type_constraints=tuple(ConstraintView(c.type_param_str, tuple(c.allowed_type_strs)) for c in schema.type_constraints),
        deprecated=bool(schema.deprecated),
    )


def schema_record(view: SchemaView) -> dict[str, Any]:
    """A view as the table stores it (JSON values)."""
    return {
        "since_version": view.since_version,
        "deprecated": view.deprecated,
        "doc": view.doc,
        "inputs": [[p.name, p.option, p.type_str] for p in view.inputs],
        "outputs": [[p.name, p.option, p.type_str] for p in view.outputs],
        "attributes": [
            [name, a.kind, a.required, [_json_payload(a.default[0])] if a.default else None]
            for name, a in view.attributes.items()
        ],
        "type_constraints": [[c.type_param_str, list(c.allowed_type_strs)] for c in view.type_constraints],
    }


def _json_payload(payload: Any) -> Any:
    if isinstance(payload, tuple):
        return list(payload)
    if isinstance(payload, (bool, int, float, str)):
        return payload
    raise ValueError(f"a schema default of type {type(payload).__name__} cannot be stored in the table")


def schema_from_record(name: str, record: dict[str, Any], domain: str = "") -> SchemaView:
    attributes = {}
    for attr_name, kind, required, default in record["attributes"]:
        if default is None:
            held: tuple = NO_DEFAULT
        else:
            payload = default[0]
            held = (tuple(payload) if isinstance(payload, list) else payload,)
        attributes[attr_name] = AttrView(kind, required, held)
    return SchemaView(
        name=name,
        domain=domain,
        since_version=record["since_version"],
        doc=record["doc"],
        inputs=tuple(ParamView(*p) for p in record["inputs"]),
        outputs=tuple(ParamView(*p) for p in record["outputs"]),
        attributes=attributes,
        type_constraints=tuple(ConstraintView(t, tuple(allowed)) for t, allowed in record["type_constraints"]),
        deprecated=record["deprecated"],
    )


@lru_cache(maxsize=1)
def _table() -> tuple[dict[str, Any], bytes]:
    """The header and the op lines of the table (see the module docstring)."""
    # The package's own loader reads the file (as pkgutil.get_data does, without importing pkgutil, nor
    # importlib.resources, which imports tempfile and zipfile).
    data = __spec__.loader.get_data(os.path.join(os.path.dirname(__file__), TABLE))  # type: ignore[union-attr]
    end = data.index(b"\n") + 1
    return json.loads(data[:end]), data[end:]


def table_onnx_version() -> str:
    """The version of the onnx package the table was generated from."""
    return _table()[0]["onnx_version"]


def latest_opset() -> int:
    """The newest opset of ONNX's default domain the table knows."""
    return int(_table()[0]["latest_opset"])


def latest_ir_version() -> int:
    """The newest IR version the table's onnx writes (``onnx.IR_VERSION``)."""
    return int(_table()[0]["ir_version"])


@lru_cache(maxsize=1)
def _ir_versions() -> dict[tuple[str, int], int]:
    """(opset domain, version) -> the IR version of the first onnx release that has it."""
    found: dict[tuple[str, int], int] = {}
    for ir_version, *opsets in _table()[0]["release_versions"]:
        for domain, version in zip(("ai.onnx", "ai.onnx.ml", "ai.onnx.training"), opsets):
            if (domain, version) not in found:
                found[(domain, version)] = ir_version
                if domain != "ai.onnx.ml":  # the preview domains follow the domain they preview
                    found[(domain.replace("ai.onnx", "ai.onnx.preview", 1), version)] = ir_version
    return found


def min_ir_version(opsets: Iterable[tuple[str, int]]) -> int:
    """The lowest IR version a model importing ``opsets`` (``(domain, version)`` pairs) can declare: 3 for
    none and for a domain or version no onnx release has (as ``onnx.helper.find_min_ir_version_for`` with
    ``ignore_unknown=True``)."""
    table = _ir_versions()
    return max((table.get((domain or "ai.onnx", int(version)), 3) for domain, version in opsets), default=3)


def data_type_code(name: str) -> int | None:
    """The ``TensorProto.DataType`` code of an element type name (``FLOAT``...), or None."""
    return _table()[0]["data_types"].get(name)


# NOTE: a pure cache: op type -> its versions' views, oldest first (made from the table's text on first use)
_VIEWS: dict[str, tuple[SchemaView, ...]] = {}


def _versions_of(op_type: str) -> tuple[SchemaView, ...]:
    found = _VIEWS.get(op_type)
    if found is None:
        header, lines = _table()
        offset, length = header["lines"][op_type]
        records = json.loads(lines[offset : offset + length])
        found = _VIEWS[op_type] = tuple(schema_from_record(op_type, r) for r in records)
    return found


def schema_at(op_type: str, opset: int) -> SchemaView | None:
    """The schema of ``op_type`` in ONNX's default domain at ``opset`` (its newest version not newer than
    ``opset``, deprecated or not, as ``onnx.defs.get_schema`` finds it), or None when there is none."""
    versions = _table()[0]["versions"].get(op_type)
    index = None
    for i, (since, _) in enumerate(versions or ()):
        if since <= opset:
            index = i
    return _versions_of(op_type)[index] if index is not None else None


class _LazySchemas(Mapping[str, SchemaView]):
    """op type -> :class:`SchemaView`, each made on its first lookup."""

    def __init__(self, versions: dict[str, int]) -> None:
        self._index = versions  # op type -> index of its version in the table

    def __getitem__(self, op_type: str) -> SchemaView:
        return _versions_of(op_type)[self._index[op_type]]

    def __contains__(self, op_type: object) -> bool:
        return op_type in self._index

    def __iter__(self) -> Iterator[str]:
        return iter(self._index)

    def __len__(self) -> int:
        return len(self._index)


def table_schemas(opset: int) -> Mapping[str, SchemaView]:
    """The schema of each operator of ONNX's default domain that exists and is not deprecated at ``opset``,
    by op type, sorted; each view made on its first lookup.

    Raises:
        ValueError: ``opset`` is not one the table knows.
    """
    table = _table()[0]
    latest = table["latest_opset"]
    if not 1 <= opset <= latest:
        raise ValueError(
            f"ONNX opset {opset} is not known to the installed onnx {table['onnx_version']} (1..{latest}); upgrade onnx"
        )
    chosen: dict[str, int] = {}
    for name in sorted(table["versions"]):
        index = None
        for i, (since, deprecated) in enumerate(table["versions"][name]):
            if since <= opset:
                index = i if not deprecated else None
        if index is not None:
            chosen[name] = index
    return _LazySchemas(chosen)
