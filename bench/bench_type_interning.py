"""Interned-type lookup cost: 1,000,000 lookups of existing types, in ns per lookup.

Run: ``.venv/bin/python bench/bench_type_interning.py``. The lookups are repeated in a context
holding a few types and in one holding 200,000, to show the cost does not grow with the context (O(1)).
"""

from __future__ import annotations

import argparse
import json
import time

from scopefusion import dtypes
from scopefusion.ir.types import IRContext, TensorType

N = 1_000_000


def lookups_ns(ctx: IRContext, keys: list[tuple], n: int, via_get: bool) -> float:
    element = ctx.element(dtypes.FLOAT32)
    m = len(keys)
    start = time.perf_counter_ns()
    if via_get:
        for i in range(n):
            ctx.get(TensorType, element, keys[i % m], "ND")
    else:
        for i in range(n):
            ctx.tensor(element, keys[i % m])
    return (time.perf_counter_ns() - start) / n


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("-n", type=int, default=N)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    keys = [(1, i % 7 + 1, 224, 224) for i in range(64)]
    results = {}
    for label, filler in (("small context", 0), ("context with 200k types", 200_000)):
        ctx = IRContext()
        for i in range(filler):
            ctx.tensor(dtypes.INT32, (i,))
        for k in keys:
            ctx.tensor(dtypes.FLOAT32, k)
        before = len(ctx)
        results[label] = {
            "types_in_context": before,
            "ns_per_lookup_tensor": round(lookups_ns(ctx, keys, args.n, via_get=False), 1),
            "ns_per_lookup_get": round(lookups_ns(ctx, keys, args.n, via_get=True), 1),
        }
        assert len(ctx) == before, "lookups of existing types must not create types"
    if args.json:
        print(json.dumps(results, indent=2))
        return
    print(f"{args.n:,} lookups of existing TensorTypes")
    for label, r in results.items():
        print(
            f"  {label:26s} ({r['types_in_context']:>7,} types): ctx.tensor {r['ns_per_lookup_tensor']:7.1f} ns/lookup,"
            f" ctx.get {r['ns_per_lookup_get']:7.1f} ns/lookup"
        )


if __name__ == "__main__":
    main()
