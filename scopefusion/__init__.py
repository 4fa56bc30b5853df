"""scopefusion: read TensorFlow and ONNX models, fuse subgraphs by scope and dataflow, build a typed IR.

Importing this package does not import TensorFlow; the frontends and the verifier import it lazily
where a task needs it.
"""

from __future__ import annotations

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

__all__ = [
    "FusionError",
    "InferenceError",
    "ModelLoadError",
    "ParseError",
    "ScopeFusionError",
    "SerdeError",
    "VerifyError",
    "__version__",
]
