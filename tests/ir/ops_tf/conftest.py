"""Makes this directory's helpers (``tf_driver``, ``tf_op_models``) importable by its test modules."""

from __future__ import annotations

import os
import sys
from pathlib import Path

_HERE = str(Path(__file__).resolve().parent)
if _HERE not in sys.path:
    sys.path.insert(0, _HERE)

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
