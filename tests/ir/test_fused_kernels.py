"""Reference kernels of the ``fused`` dialect on edge-case inputs."""

from __future__ import annotations

import numpy as np
import pytest

from scopefusion.dialects.fused.gelu import gelu


@pytest.mark.parametrize("approximate", ["none", "tanh"])
def test_gelu_of_a_scalar_is_the_gelu_of_its_one_element_vector(approximate: str):
    x = np.array([0.5, -1.25], dtype=np.float32)
    for i, v in enumerate(x):
        scalar = gelu(np.asarray(v), approximate)
        assert scalar.shape == () and scalar.dtype == np.float32
        assert scalar == gelu(x, approximate)[i]
