"""What several builtin rules share: the pass bases and the helpers that read constants and ranks.

* :mod:`.anchored`: :class:`AnchoredDataflowPass`, small computations found by dataflow from seed ops
  (GELU, HardSwish, Swish, Clip).
* :mod:`.scoped_dataflow`: :class:`ScopedDataflowPass`, dataflow matches named and explained by scope
  candidates (LayerNorm, InstanceNorm, BatchNorm, L2Normalize).
* :mod:`.recurrent`: :class:`RecurrentLoopPass`, sequence loops claimed whole (DynamicRNN, DynamicGRU).
* :mod:`.constants` and :mod:`.ranks`: values and ranks read from the source graph.
"""

from __future__ import annotations

__all__: list[str] = []
