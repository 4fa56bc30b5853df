"""The ``ge`` dialect: graph inputs (``ge.Data``) and constants (``ge.Const``).

Every IR graph needs these two ops, so the IR core defines them (:mod:`scopefusion.ir.core_ops`); this
package presents them as a dialect beside ``tf``, ``onnx`` and ``fused``.
"""

from __future__ import annotations

from ...ir.core_ops import CONST_OP, DATA_OP, core_ops
from ...ir.opdef import OpDef

__all__ = ["CONST_OP", "DATA_OP", "DIALECT", "definitions"]

DIALECT = "ge"


def definitions() -> list[OpDef]:
    """The ``ge`` dialect's op definitions."""
    return core_ops()
