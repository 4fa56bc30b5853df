"""Fixtures for the inspect / diff / passes / HTML report tests.

``chromium``: the path of Debian's ``chromium``. When it is missing, the fixture installs it (``apt-get
update && apt-get install -y chromium``, as root, output shown only on failure) once per machine: a file
lock serialises pytest-xdist workers and concurrent runs, and the second one finds it installed.
"""

from __future__ import annotations

import fcntl
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

from tests.testing.small_models import write_model, write_rules

CHROMIUM = "chromium"
_LOCK = Path(tempfile.gettempdir()) / "scopefusion-chromium-install.lock"


def ensure_chromium() -> str:
    """The chromium binary, installed through apt when missing (root only)."""
    found = shutil.which(CHROMIUM)
    if found:
        return found
    with open(_LOCK, "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            found = shutil.which(CHROMIUM)
            if found:
                return found
            if os.geteuid() != 0:
                pytest.fail("chromium is not installed and the tests do not run as root; install it: apt-get install -y chromium")
            env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
            for command in (["apt-get", "update", "-qq"], ["apt-get", "install", "-y", "-qq", CHROMIUM]):
                proc = subprocess.run(command, capture_output=True, text=True, env=env, timeout=1800)
                if proc.returncode != 0:
                    tail = (proc.stdout + proc.stderr).strip()[-2000:]
                    pytest.fail(f"{' '.join(command)} failed with exit code {proc.returncode}:\n{tail}")
            found = shutil.which(CHROMIUM)
            if not found:
                pytest.fail("apt-get installed chromium but no 'chromium' binary is on PATH")
            return found
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


@pytest.fixture(scope="session")
def chromium() -> str:
    return ensure_chromium()


@pytest.fixture(scope="session")
def gelu_files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The GELU model, variants of it, and the user rules file (see tests/testing/small_models.py)."""
    root = tmp_path_factory.mktemp("gelu")
    return {
        "model": write_model(root / "mlp.onnx"),
        "shifted": write_model(root / "mlp_shifted.onnx", weight_shift=0.001),
        "relu": write_model(root / "mlp_relu.onnx", extra_relu=True),
        "renamed": write_model(root / "mlp_renamed.onnx", prefix="other_"),
        "rules": write_rules(root / "gelu_rules.py"),
    }
