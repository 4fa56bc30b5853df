"""The reference executor: runs a converted model's IR op by op with reference kernels."""

from __future__ import annotations

from .executor import Executor, RunResult, run_graph

__all__ = ["Executor", "RunResult", "run_graph"]
