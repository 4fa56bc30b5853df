#!/usr/bin/env python3
"""Regenerates ``scopefusion/dialects/onnx/onnx_schemas.jsonl`` from the installed onnx package's schemas.

The table holds every version of every operator schema of ONNX's default domain as the ``onnx`` dialect
reads it (see :mod:`scopefusion.dialects.onnx.schema_table` for the format), so converting a model does
not import the ``onnx`` package to build its op definitions. Regenerate it after upgrading onnx.

Usage: python tools/gen_onnx_schemas.py [--check]
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from scopefusion.dialects.onnx.schema_table import schema_record, schema_view  # noqa: E402

__all__ = ["OUTPUT", "build_table", "render", "main"]

OUTPUT = REPO / "scopefusion" / "dialects" / "onnx" / "onnx_schemas.jsonl"


def build_table() -> dict:
    import onnx
    from onnx import defs, helper

    by_op: dict[str, list] = {}
    for schema in defs.get_all_schemas_with_history():
        if schema.domain == "":
            by_op.setdefault(schema.name, []).append(schema)
    versions = {}
    schemas = {}
    for name in sorted(by_op):
        ordered = sorted(by_op[name], key=lambda s: s.since_version)
        versions[name] = [[int(s.since_version), bool(s.deprecated)] for s in ordered]
        records = [schema_record(schema_view(s)) for s in ordered]
        schemas[name] = json.dumps(records, ensure_ascii=True, separators=(",", ":"))
    data_types = {name: int(code) for name, code in onnx.TensorProto.DataType.items()}
    return {
        "onnx_version": onnx.__version__,
        "latest_opset": int(defs.onnx_opset_version()),
        "data_types": data_types,
        "ir_version": int(onnx.IR_VERSION),
        # (IR version, ai.onnx opset, ai.onnx.ml opset, ai.onnx.training opset) per onnx release, oldest first
        "release_versions": [[int(v) for v in row[1:]] for row in helper.VERSION_TABLE],
        "versions": versions,
        "schemas": schemas,
    }


def render(table: dict) -> str:
    """The table as committed: the header line, then one line per op (see schema_table's docstring)."""
    body = []
    lines = {}
    offset = 0
    for name, text in table["schemas"].items():
        line = text.encode("ascii") + b"\n"
        lines[name] = [offset, len(line) - 1]
        offset += len(line)
        body.append(text)
    header = {key: table[key] for key in ("onnx_version", "latest_opset", "data_types", "ir_version", "release_versions", "versions")}
    header["lines"] = lines
    return "\n".join([json.dumps(header, separators=(",", ":"))] + body) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="compare with a fresh table, write nothing")
    args = parser.parse_args(argv)
    text = render(build_table())
    if args.check:
        if not OUTPUT.exists() or OUTPUT.read_bytes() != text.encode("ascii"):
            print(f"{OUTPUT.relative_to(REPO)} differs from the installed onnx's schemas; run tools/gen_onnx_schemas.py")
            return 1
        print(f"{OUTPUT.relative_to(REPO)} is up to date")
        return 0
    OUTPUT.write_bytes(text.encode("ascii"))
    print(OUTPUT.relative_to(REPO))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
