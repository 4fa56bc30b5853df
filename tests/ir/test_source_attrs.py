"""Framework attribute values to typed IR attributes: remembered conversions give what a fresh conversion gives."""

from __future__ import annotations

import pytest

from scopefusion import dtypes
from scopefusion.ir import attrs as A
from scopefusion.ir.opdef import OpDef
from scopefusion.ir_builder import source_attrs
from scopefusion.ir_builder.source_attrs import convert_attrs, convert_value

VALUES = [1, True, 0, False, "SAME", b"SAME", dtypes.FLOAT32, (1, 2), (True, False), (1.0, 2.0), ("a", "b"), (1, True),
          0.0, -0.0, (0.0,), (-0.0,), (), None, 2.5, float("nan"), float("-inf"), 1e-3,
          (dtypes.FLOAT32, dtypes.INT32), (dtypes.FLOAT32, "float32")]  # fmt: skip


def same(a, b) -> bool:
    if a is None or b is None:
        return a is b
    return a.type_id is b.type_id and type(a.value) is type(b.value) and repr(a.value) == repr(b.value)


@pytest.mark.parametrize(
    "declared", [None, A.INT, A.BOOL, A.FLOAT, A.STR, A.LIST_INT, A.LIST_FLOAT, A.LIST_BOOL, A.LIST_STR, A.LIST_DTYPE]
)
def test_remembered_conversions_equal_fresh_ones_for_every_declared_kind(declared):
    opdef = OpDef("Op", "t", open_attrs=True) if declared is None else OpDef("Op", "t").attr("a", declared, optional=True)
    for _ in range(2):  # the second round hits the remembered table
        for value in VALUES:
            got, dropped = convert_attrs({"a": value}, opdef)
            try:
                fresh = convert_value(value, declared)
            except (TypeError, ValueError):
                fresh = None
            assert same(got.get("a"), fresh), f"{value!r} declared {declared}: {got.get('a')!r} != {fresh!r}"
            assert dropped == ([] if fresh is not None or value is None else ["a"])


def test_the_table_of_conversions_stays_bounded(monkeypatch):
    monkeypatch.setattr(source_attrs, "CONVERTED_LIMIT", 8)
    monkeypatch.setattr(source_attrs, "_converted", {})
    for i in range(50):
        assert convert_attrs({"n": i}, None)[0]["n"].value == i
        assert len(source_attrs._converted) <= 8


def test_a_list_of_dtypes_is_converted_once_and_shared():
    """Nodes of one op type (``IdentityN``'s ``T``) repeat their lists of dtypes: each node shares one value."""
    opdef = OpDef("Op", "t").attr("T", A.LIST_DTYPE)
    first = convert_attrs({"T": (dtypes.FLOAT32, dtypes.INT32)}, opdef)[0]["T"]
    again = convert_attrs({"T": (dtypes.FLOAT32, dtypes.INT32)}, opdef)[0]["T"]
    assert again is first and first.value == (dtypes.FLOAT32, dtypes.INT32)
