"""Every op the ``tf`` dialect defines has an ONNX lowering, except the ops listed below, each with the
reason it has none. The list must stay exact: an op that gains a lowering comes off it."""

from __future__ import annotations

from scopefusion.dialects.tf import definitions
from scopefusion.serde.onnx_lowering import default_lowerings

_LIST_HANDLE = ("a TensorList handle; ONNX has no handle type, so the list must become a tensor carried through "
                "the While body that builds it, which a lowering of this one node cannot do")
_ARRAY_HANDLE = ("a TensorArray resource and flow pair; like a TensorList it needs the enclosing loop rewritten "
                 "to carry the array as a tensor")

WITHOUT_LOWERING: dict[str, str] = {
    # TF2 lists (Keras RNNs, tf.function loops that stack results).
    "EmptyTensorList": _LIST_HANDLE,
    "TensorListReserve": _LIST_HANDLE,
    "TensorListFromTensor": _LIST_HANDLE,
    "TensorListSetItem": _LIST_HANDLE,
    "TensorListPushBack": _LIST_HANDLE,
    "TensorListGetItem": _LIST_HANDLE,
    "TensorListPopBack": _LIST_HANDLE,
    "TensorListStack": _LIST_HANDLE,
    "TensorListGather": _LIST_HANDLE,
    "TensorListLength": _LIST_HANDLE,
    "TensorListElementShape": _LIST_HANDLE,
    # TF1 arrays (dynamic_rnn, tf.compat.v1.while_loop bodies).
    "TensorArrayV3": _ARRAY_HANDLE,
    "TensorArrayReadV3": _ARRAY_HANDLE,
    "TensorArrayGatherV3": _ARRAY_HANDLE,
    "TensorArrayConcatV3": _ARRAY_HANDLE,
    "TensorArraySizeV3": _ARRAY_HANDLE,
    "TensorArrayScatterV3": _ARRAY_HANDLE,
    "TensorArrayWriteV3": _ARRAY_HANDLE,
    "TensorArraySplitV3": _ARRAY_HANDLE,
    "TensorArrayCloseV3": _ARRAY_HANDLE,
}


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
