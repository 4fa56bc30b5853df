"""Element types: one DType per GE data type numpy can hold; ml_dtypes' types loaded when first needed."""

from __future__ import annotations

import subprocess
import sys

import ml_dtypes
import numpy as np

from scopefusion import dtypes


def test_every_dtype_is_the_canonical_dtype_of_its_numpy_dtype_unless_quantized():
    for dtype in dtypes.all_dtypes():
        found = dtypes.from_numpy(dtype.numpy)
        if dtype.name.startswith(("qint", "quint")):
            assert found is not dtype and found.numpy == dtype.numpy
        elif dtype is not dtypes.STRING:
            assert found is dtype, dtype


def test_ml_dtypes_types_hold_their_ml_dtypes_numpy_dtype():
    assert dtypes.BFLOAT16.numpy == np.dtype(ml_dtypes.bfloat16)
    assert dtypes.by_name("int4").numpy == np.dtype(ml_dtypes.int4)
    assert dtypes.by_name("float8_e8m0").numpy == np.dtype(ml_dtypes.float8_e8m0fnu)
    kinds = {d.name: (d.is_floating, d.is_integer) for d in dtypes.all_dtypes()}
    assert kinds["bfloat16"] == kinds["float8_e5m2"] == kinds["complex32"] == kinds["float32"] == (True, False)
    assert kinds["int4"] == kinds["uint1"] == kinds["int32"] == (False, True)
    assert kinds["bool"] == kinds["string"] == (False, False)


def test_ml_dtypes_is_imported_only_when_one_of_its_types_needs_its_numpy_dtype():
    code = (
        "import sys\nimport numpy as np\nfrom scopefusion import dtypes\n"
        "assert dtypes.from_numpy(np.float32) is dtypes.FLOAT32 and dtypes.FLOAT16.itemsize == 2\n"
        "assert dtypes.BFLOAT16.is_floating and not dtypes.BFLOAT16.is_integer\n"
        "print('ml_dtypes' in sys.modules)\n"
        "assert dtypes.BFLOAT16.itemsize == 2\n"
        "import ml_dtypes\n"
        "assert dtypes.from_numpy(ml_dtypes.float8_e4m3fn) is dtypes.by_name('float8_e4m3fn')\n"
        "print('ml_dtypes' in sys.modules)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["False", "True"]


def test_a_numpy_dtype_of_ml_dtypes_is_found_before_any_dtype_loaded_it():
    code = (
        "import ml_dtypes\nfrom scopefusion import dtypes\n"
        "print(dtypes.from_numpy(ml_dtypes.int4).name, dtypes.from_numpy('datetime64[s]'))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["int4", "None"]
