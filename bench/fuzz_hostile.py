"""Hostile-model fuzzing at scale under a memory limit: only our own errors, peak memory under budget.

Run: ``.venv/bin/python bench/fuzz_hostile.py`` (``--examples 10000`` in all, spread over the strategies;
``--memory-gb 4`` the address-space limit set with ``resource.setrlimit``; ``--budget-gb 1.5`` the peak
resident memory allowed; ``--json`` for a machine-readable line).

The strategies are those of ``tests/test_fuzz_hostile.py`` (``tests/models/hostile_strategies.py``):
TF graphs with huge and odd dims, splats, Fill / Tile / Range / Reshape over hostile constants, deep
scopes and odd names; doubling, chained and recursive function libraries; ONNX folding bombs and odd
opsets. Each example is converted and serialized with small budgets. The run fails (exit 1) when any
example raises anything but a ``ScopeFusionError`` or when the peak resident memory passes the budget.
"""

from __future__ import annotations

import argparse
import collections
import json
import resource
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--examples", type=int, default=10_000, help="examples in all (default 10000)")
    parser.add_argument("--memory-gb", type=float, default=4.0, help="RLIMIT_AS in GiB (default 4)")
    parser.add_argument("--budget-gb", type=float, default=1.5, help="peak RSS allowed in GiB (default 1.5)")
    parser.add_argument("--seed", type=int, default=0, help="hypothesis seed")
    parser.add_argument("--json", action="store_true", help="print one JSON line")
    args = parser.parse_args()
    limit = int(args.memory_gb * (1 << 30))
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))

    from hypothesis import HealthCheck, Phase, given, seed, settings

    from scopefusion.errors import ScopeFusionError
    from tests.models import hostile_strategies as hs

    strategies = {"tf_graphs": hs.tf_graphs(), "function_libraries": hs.function_libraries(), "onnx": hs.onnx_models()}
    per_strategy = -(-args.examples // len(strategies))
    outcomes: dict[str, collections.Counter] = {name: collections.Counter() for name in strategies}
    start = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        directory = Path(tmp)
        def runner(strategy, counts):
            @seed(args.seed)
            # No shrinking: a failure is reported at once with the example that raised it.
            @settings(max_examples=per_strategy, deadline=None, database=None, phases=(Phase.generate,),
                      suppress_health_check=list(HealthCheck))
            @given(model=strategy)
            def run(model) -> None:
                result = hs.convert_hostile(*model, directory)
                counts["refused" if isinstance(result, ScopeFusionError) else "converted"] += 1

            return run

        for name, strategy in strategies.items():
            try:
                runner(strategy, outcomes[name])()
            except Exception as e:  # anything but our own errors: the failure this bench looks for
                print(f"FAIL {name}: {type(e).__name__}: {e}", file=sys.stderr)
                return 1
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    seconds = time.perf_counter() - start
    total = sum(sum(c.values()) for c in outcomes.values())
    summary = {
        "examples": total,
        "outcomes": {k: dict(v) for k, v in outcomes.items()},
        "peak_rss_bytes": peak,
        "rlimit_as_bytes": limit,
        "seconds": round(seconds, 1),
    }
    if args.json:
        print(json.dumps(summary))
    else:
        print(f"{total} hostile examples in {seconds:.0f} s under RLIMIT_AS {args.memory_gb:g} GiB; "
              f"peak RSS {peak / (1 << 20):.0f} MiB (budget {args.budget_gb:g} GiB)")
        for name, counts in outcomes.items():
            print(f"  {name}: {dict(counts)}")
    return 0 if peak <= args.budget_gb * (1 << 30) else 1


if __name__ == "__main__":
    sys.exit(main())
