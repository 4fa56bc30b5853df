#!/usr/bin/env python3
"""Regenerates the committed protobuf modules from every ``.proto`` file under ``scopefusion/``.

Each ``path/name.proto`` gets ``path/name_pb2.py`` and ``path/name_pb2.pyi`` beside it, built by
the ``protoc`` that ships with ``grpcio-tools`` (``python -m grpc_tools.protoc``), with the
repository root as the import root, so a schema imports another as
``import "scopefusion/parser/proto/tf_framework.proto";`` and the generated module imports it as
``scopefusion.parser.proto.tf_framework_pb2``.

Usage:
    python tools/gen_proto.py            # rewrite the generated modules in place
    python tools/gen_proto.py --check    # exit 1 and name the files that differ from a regeneration
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
from pathlib import Path

__all__ = ["REPO", "find_protos", "generate", "check", "main"]

REPO = Path(__file__).resolve().parent.parent
GENERATED_SUFFIXES = ("_pb2.py", "_pb2.pyi")


def find_protos(root: Path = REPO) -> list[Path]:
    """Every ``.proto`` under ``root/scopefusion``, relative to ``root``, sorted."""
    return sorted(p.relative_to(root) for p in (root / "scopefusion").rglob("*.proto"))


def generate(root: Path = REPO, out_dir: Path | None = None) -> list[Path]:
    """Runs protoc over every schema; writes into ``out_dir`` (default: ``root``). Returns the written files."""
    out_dir = root if out_dir is None else out_dir
    protos = find_protos(root)
    if not protos:
        return []
    cmd = [
        sys.executable, "-m", "grpc_tools.protoc",
        f"--proto_path={root}",
        f"--python_out={out_dir}",
        f"--pyi_out={out_dir}",
        *[str(p) for p in protos],
    ]
    result = subprocess.run(cmd, capture_output=True, text=True)
    if result.returncode != 0:
        raise SystemExit(f"protoc failed on {', '.join(map(str, protos))}:\n{result.stderr}")
    written = []
    for proto in protos:
        for suffix in GENERATED_SUFFIXES:
            written.append(out_dir / proto.with_name(proto.stem + suffix))
    return written


def check(root: Path = REPO) -> list[str]:
    """Regenerates into a temporary directory; returns the generated files whose committed copy differs."""
    with tempfile.TemporaryDirectory() as tmp:
        fresh_root = Path(tmp)
        generate(root, fresh_root)
        stale = []
        for proto in find_protos(root):
            for suffix in GENERATED_SUFFIXES:
                rel = proto.with_name(proto.stem + suffix)
                committed = root / rel
                fresh = fresh_root / rel
                if not committed.exists() or committed.read_bytes() != fresh.read_bytes():
                    stale.append(str(rel))
        return stale


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="compare with a fresh regeneration, write nothing")
    parser.add_argument("--root", type=Path, default=REPO, help="repository root (default: this repository)")
    args = parser.parse_args(argv)
    if args.check:
        stale = check(args.root)
        if stale:
            print("generated protobuf modules differ from their .proto files; run `make proto`: " + ", ".join(stale))
            return 1
        print(f"{len(find_protos(args.root))} schemas, generated modules up to date")
        return 0
    for path in generate(args.root):
        print(path.relative_to(args.root))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
