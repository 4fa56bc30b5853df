"""Every op the ``tf`` dialect defines has an ONNX lowering, except the ops listed below, each with the
reason it has none. The list must stay exact: an op that gains a lowering comes off it. (A lowering may still
refuse some uses of its op, naming the op and the reason: a TensorArray split into unequal lengths, say.)"""

from __future__ import annotations

from scopefusion.dialects.tf import definitions
from scopefusion.serde.onnx_lowering import default_lowerings

WITHOUT_LOWERING: dict[str, str] = {}  # every op has one now; an op added here needs its reason


def test_every_tf_op_has_a_lowering_or_a_reason_for_none():
    lowerings = default_lowerings()
    missing = sorted(op.name for op in definitions() if op.name not in lowerings and op.name not in WITHOUT_LOWERING)
    assert not missing, f"tf ops without an ONNX lowering and not listed with a reason: {missing}"


def test_the_list_of_ops_without_lowering_is_exact():
    lowerings = default_lowerings()
    defined = {op.name for op in definitions()}
    lowered_now = sorted(name for name in WITHOUT_LOWERING if name in lowerings)
    assert not lowered_now, f"these ops have a lowering now; take them off WITHOUT_LOWERING: {lowered_now}"
    undefined = sorted(set(WITHOUT_LOWERING) - defined)
    assert not undefined, f"these ops are not in the tf dialect: {undefined}"
    assert all(reason.strip() for reason in WITHOUT_LOWERING.values())


def test_every_lowering_is_for_an_op_the_dialect_defines():
    defined = {op.name for op in definitions()}
    stray = sorted(set(default_lowerings().types()) - defined)
    assert not stray, f"lowerings registered for op types the tf dialect does not define: {stray}"
