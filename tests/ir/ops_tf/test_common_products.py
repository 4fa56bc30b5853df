"""``int64_product`` is numpy's int64 product (wrapping included) for every input it is given."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from scopefusion.dialects.tf._common import int64_product, num_elements

dims = st.one_of(st.integers(-3, 10), st.integers(0, 1 << 40), st.integers(-(1 << 63), (1 << 63) - 1))


@settings(max_examples=300, deadline=None)
@given(st.lists(dims, max_size=6))
def test_product_equals_numpy_int64_product(values):
    assert int64_product(values) == int(np.prod(values, dtype=np.int64))


def test_numpy_ints_and_out_of_range_values_take_numpy_path():
    assert int64_product([np.int64(3), 4]) == 12
    assert int64_product(()) == 1 and num_elements(()) == 1 and num_elements((2, -1)) is None
    for values in ([1 << 63, 0], [np.int64(1 << 62), 4]):
        assert int64_product(values) == int(np.prod(values, dtype=np.int64))
