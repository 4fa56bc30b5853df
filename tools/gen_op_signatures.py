#!/usr/bin/env python3
"""Regenerates ``scopefusion/parser/tf_op_signatures.json`` from TensorFlow's op registry.

Inside a TensorFlow function body a tensor is named ``node:output_arg:index``; turning that into the
node's flat output index needs the op's output arguments and how many tensors each one holds. This
script records, for every registered op, its output arguments in order, each as a string:

* ``"name"``: one tensor;
* ``"name*N"``: ``N`` tensors, ``N`` being the value of the node's int attribute ``N`` (``number_attr``);
* ``"name+T"``: one tensor per entry of the node's type-list attribute ``T`` (``type_list_attr``).

``defaults`` holds the default values of those attributes where the op defines one (a node may omit
an attribute that has a default). The parser reads the table without importing TensorFlow.

Usage: python tools/gen_op_signatures.py [--check]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

__all__ = ["OUTPUT", "build_table", "render", "main"]

OUTPUT = Path(__file__).resolve().parent.parent / "scopefusion" / "parser" / "tf_op_signatures.json"


def build_table() -> dict:
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    import tensorflow as tf
    from tensorflow.core.framework import op_def_pb2
    from tensorflow.python.client import pywrap_tf_session
    from tensorflow.python.framework import op_def_registry

    # The C API lists every registered op name; op_def_registry gives each op's OpDef.
    buffer = pywrap_tf_session.TF_GetAllOpList()
    try:
        names = sorted(op.name for op in op_def_pb2.OpList.FromString(pywrap_tf_session.TF_GetBuffer(buffer)).op)
    finally:
        pywrap_tf_session.TF_DeleteBuffer(buffer)
    ops: dict[str, list[str]] = {}
    defaults: dict[str, dict[str, int]] = {}
    for name in names:
        op_def = op_def_registry.get(name)
        if op_def is None:
            continue
        attr_defaults = {a.name: a.default_value for a in op_def.attr if a.HasField("default_value")}
        args = []
        for arg in op_def.output_arg:
            if arg.number_attr:
                args.append(f"{arg.name}*{arg.number_attr}")
                ref = arg.number_attr
                if ref in attr_defaults:
                    defaults.setdefault(name, {})[ref] = int(attr_defaults[ref].i)
            elif arg.type_list_attr:
                args.append(f"{arg.name}+{arg.type_list_attr}")
                ref = arg.type_list_attr
                if ref in attr_defaults:
                    defaults.setdefault(name, {})[ref] = len(attr_defaults[ref].list.type)
            else:
                args.append(arg.name)
        ops[name] = args
    return {"tensorflow_version": tf.__version__, "defaults": defaults, "ops": ops}


def render(table: dict) -> str:
    """One op a line, keys sorted, so a regeneration diffs cleanly."""
    lines = ["{", f'  "tensorflow_version": {json.dumps(table["tensorflow_version"])},', '  "defaults": {']
    items = sorted(table["defaults"].items())
    for i, (name, value) in enumerate(items):
        comma = "," if i < len(items) - 1 else ""
        lines.append(f"    {json.dumps(name)}: {json.dumps(value, sort_keys=True)}{comma}")
    lines.append("  },")
    lines.append('  "ops": {')
    items = sorted(table["ops"].items())
    for i, (name, value) in enumerate(items):
        comma = "," if i < len(items) - 1 else ""
        lines.append(f"    {json.dumps(name)}: {json.dumps(value)}{comma}")
    lines.append("  }")
    lines.append("}")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="exit 1 when the committed table differs")
    args = parser.parse_args(argv)
    content = render(build_table())
    if args.check:
        if not OUTPUT.exists() or OUTPUT.read_text() != content:
            print(f"{OUTPUT} differs from TensorFlow's op registry; run tools/gen_op_signatures.py")
            return 1
        print(f"{OUTPUT.name} up to date")
        return 0
    OUTPUT.write_text(content)
    print(f"wrote {OUTPUT} ({len(content)} bytes)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
