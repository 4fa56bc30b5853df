"""The exception hierarchy: one base, one subclass per stage.

Every message is one sentence: what went wrong, where (file, node name, op type),
what was expected and what was found, and what to do about it.
"""

from __future__ import annotations

__all__ = [
    "ScopeFusionError",
    "ModelLoadError",
    "ParseError",
    "FusionError",
    "InferenceError",
    "SerdeError",
    "VerifyError",
]


class ScopeFusionError(Exception):
    """Base of every error this package raises on purpose."""


class ModelLoadError(ScopeFusionError):
    """A model file or directory cannot be read: missing, empty, wrong format, corrupt."""


class ParseError(ScopeFusionError):
    """A model was read but its graph is invalid: missing producers, duplicate names, cycles."""


class FusionError(ScopeFusionError):
    """A fusion pass, pattern, registry or fusion result is invalid."""


class InferenceError(ScopeFusionError):
    """Shape or dtype inference failed or left an output unset."""


class SerdeError(ScopeFusionError):
    """A serialized model cannot be written or read back."""


class VerifyError(ScopeFusionError):
    """Verification against the source framework could not run."""
