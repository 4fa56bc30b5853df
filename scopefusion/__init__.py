"""scopefusion: read TensorFlow and ONNX models, fuse subgraphs by scope and dataflow, build a typed IR.

Importing this package does not import TensorFlow; the frontends and the verifier import it lazily
where a task needs it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .errors import (
    FusionError,
    InferenceError,
    ModelLoadError,
    ParseError,
    ScopeFusionError,
    SerdeError,
    VerifyError,
)

__version__ = "0.1.0"


def define_fused_op(name: str, *, replaces: bool = False, doc: str = "") -> "FusedOpDef":
    """A new fused op definition for the ops a rules file or package declares (``FUSED_OPS``): the
    builder the builtin fused ops use (``input`` / ``output`` / ``attr`` / ``set_infer_shape`` /
    ``set_reference``) plus ``set_onnx_export`` and ``set_ge_type``; ``replaces=True`` replaces the builtin
    fused op of that name. See :mod:`scopefusion.dialects.fused.declared` and docs/writing_rules.md."""
    from .dialects.fused.declared import define_fused_op as define

    return define(name, replaces=replaces, doc=doc)

if TYPE_CHECKING:  # pragma: no cover
    from .dialects.fused.declared import FusedOpDef

__all__ = [
    "FusionError",
    "InferenceError",
    "ModelLoadError",
    "ParseError",
    "ScopeFusionError",
    "SerdeError",
    "VerifyError",
    "__version__",
    "define_fused_op",
]
