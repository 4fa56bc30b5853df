"""Building the typed IR from a fusion plan, and the analyses the build runs (inference over graphs,
shape profiles, the memory plan).

The IR core itself is :mod:`scopefusion.ir` and the op definitions are :mod:`scopefusion.dialects`; the
names below are re-exported from there so code written against ``scopefusion.ir_builder`` keeps working.
"""

from __future__ import annotations

from .. import ir as _ir
from ..ir import *  # noqa: F403  (the IR core's public names, re-exported)
from ..ir import core_ops as builtin_ops

__all__ = [name for name in _ir.__all__ if name != "core_ops"] + ["builtin_ops"]
