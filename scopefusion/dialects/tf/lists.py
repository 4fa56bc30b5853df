"""Tensor containers: TF2 TensorLists (variant handles) and TF1 TensorArrays (resource handles + flows).

A TensorList handle is a scalar of dtype ``variant``; a TensorArray handle a 2-vector of dtype
``resource`` with a float32 scalar ``flow`` that orders its reads and writes. Element shapes come from the
ops' own ``element_shape`` inputs (value-dependent; ``-1`` entries are unknown dims, a scalar ``-1`` an
unknown rank) or attributes.

NOTE: TF also carries a TensorArray's element shape on its handle ("handle data") from TensorArrayV3 to
TensorArrayReadV3. The IR has no handle data, so a TensorArrayReadV3 result has an unknown shape here
(TF may know it); TensorArrayGatherV3 and the TensorList ops name their element shape themselves.
"""

from __future__ import annotations

from ... import dtypes as D
from ...ir.attrs import BOOL, DTYPE, INT, LIST_INT
from ...ir.opdef import InferContext, OpDef
from ._common import Shape, merge_dim, shape_from_value, tf_op

__all__ = ["definitions"]

_VARIANT = (D.VARIANT,)


def _element_dtype(ctx: InferContext) -> None:
    ctx.set_output_dtype(0, ctx.attr("element_dtype"))


def _scalar_outputs(ctx: InferContext) -> None:
    for i in range(ctx.num_outputs):
        ctx.set_output_shape(i, ())


def _leading(n: int | None, element: Shape) -> Shape:
    return None if element is None else (-1 if n is None else n,) + tuple(element)


# ------------------------------------------------------------------------------------------ TensorList
def _list_maker(name: str, *inputs: str, value_depend: tuple[str, ...] = ()) -> OpDef:
    op = tf_op(name)
    for arg in inputs:
        op.input(arg, value_depend=arg in value_depend)
    out = "handle" if name in ("TensorListReserve", "EmptyTensorList") else "output_handle"
    return op.output(out, dtypes=_VARIANT).set_infer_shape(_scalar_outputs)


def _tensor_list_makers() -> list[OpDef]:
    reserve = _list_maker("TensorListReserve", "element_shape", "num_elements", value_depend=("element_shape", "num_elements"))
    reserve.attr("element_dtype", DTYPE)
    from_tensor = _list_maker("TensorListFromTensor", "tensor", "element_shape", value_depend=("element_shape",))
    from_tensor.attr("element_dtype", DTYPE)
    empty = _list_maker("EmptyTensorList", "element_shape", "max_num_elements", value_depend=("element_shape",))
    empty.attr("element_dtype", DTYPE)
    set_item = _list_maker("TensorListSetItem", "input_handle", "index", "item")
    set_item.attr("element_dtype", DTYPE).attr("resize_if_index_out_of_bounds", BOOL, default=False)
    push_back = _list_maker("TensorListPushBack", "input_handle", "tensor").attr("element_dtype", DTYPE)
    return [reserve, from_tensor, empty, set_item, push_back]


def _get_item() -> OpDef:
    op = tf_op("TensorListGetItem").input("input_handle").input("index").input("element_shape", value_depend=True)
    op.output("item").attr("element_dtype", DTYPE).set_infer_dtype(_element_dtype)
    return op.set_infer_shape(lambda ctx: ctx.set_output_shape(0, shape_from_value(ctx.param("element_shape"), "element_shape")))


def _pop_back() -> OpDef:
    op = tf_op("TensorListPopBack").input("input_handle").input("element_shape", value_depend=True)
    op.output("output_handle", dtypes=_VARIANT).output("tensor").attr("element_dtype", DTYPE)

    def dtype(ctx: InferContext) -> None:
        ctx.set_output_dtype(0, D.VARIANT)
        ctx.set_output_dtype(1, ctx.attr("element_dtype"))

    def shape(ctx: InferContext) -> None:
        ctx.set_output_shape(0, ())
        ctx.set_output_shape(1, shape_from_value(ctx.param("element_shape"), "element_shape"))

    return op.set_infer_dtype(dtype).set_infer_shape(shape)


def _stack() -> OpDef:
    op = tf_op("TensorListStack").input("input_handle").input("element_shape", value_depend=True)
    op.output("tensor").attr("element_dtype", DTYPE).attr("num_elements", INT, default=-1).set_infer_dtype(_element_dtype)

    def shape(ctx: InferContext) -> None:
        n = ctx.attr("num_elements")
        element = shape_from_value(ctx.param("element_shape"), "element_shape")
        ctx.set_output_shape(0, _leading(n if n >= 0 else None, element))

    return op.set_infer_shape(shape)


def _gather() -> OpDef:
    op = tf_op("TensorListGather").input("input_handle").input("indices").input("element_shape", value_depend=True)
    op.output("values").attr("element_dtype", DTYPE).set_infer_dtype(_element_dtype)

    def shape(ctx: InferContext) -> None:
        indices = ctx.param("indices").shape
        n = None if indices is None or len(indices) != 1 or indices[0] < 0 else indices[0]
        ctx.set_output_shape(0, _leading(n, shape_from_value(ctx.param("element_shape"), "element_shape")))

    return op.set_infer_shape(shape)


def _list_queries() -> list[OpDef]:
    length = tf_op("TensorListLength").input("input_handle").output("length", dtypes=(D.INT32,)).set_infer_shape(_scalar_outputs)
    element_shape = tf_op("TensorListElementShape").input("input_handle").output("element_shape")
    element_shape.attr("shape_type", DTYPE)
    element_shape.set_infer_dtype(lambda ctx: ctx.set_output_dtype(0, ctx.attr("shape_type")))
    element_shape.set_infer_shape(lambda ctx: ctx.set_output_shape(0, (-1,)))
    return [length, element_shape]


# ------------------------------------------------------------------------------------------ TensorArray
def _tensor_array() -> OpDef:
    op = tf_op("TensorArrayV3", "A TF1 tensor array: a resource handle and its flow.").input("size")
    op.output("handle", dtypes=(D.RESOURCE,)).output("flow", dtypes=(D.FLOAT32,))
    op.attr("dtype", DTYPE).attr("element_shape", LIST_INT, optional=True)

    def shape(ctx: InferContext) -> None:
        size = ctx.param("size").shape
        if size is not None and len(size) != 0:
            raise ValueError(f"TensorArrayV3 size must be a scalar, found shape {list(size)}")
        ctx.set_output_shape(0, (2,))
        ctx.set_output_shape(1, ())

    return op.set_infer_shape(shape)


def _flow_op(name: str, *inputs: str) -> OpDef:
    op = tf_op(name)
    for arg in inputs:
        op.input(arg)
    return op.output("flow_out", dtypes=(D.FLOAT32,)).set_infer_shape(_scalar_outputs)


def _array_read() -> OpDef:
    op = tf_op("TensorArrayReadV3").input("handle").input("index").input("flow_in").output("value").attr("dtype", DTYPE)
    op.set_infer_dtype(lambda ctx: ctx.set_output_dtype(0, ctx.attr("dtype")))
    return op.set_infer_shape(lambda ctx: ctx.set_output_shape(0, None))  # see the module NOTE on handle data


def _array_gather() -> OpDef:
    op = tf_op("TensorArrayGatherV3").input("handle").input("indices").input("flow_in").output("value")
    op.attr("dtype", DTYPE).attr("element_shape", LIST_INT, optional=True)
    op.set_infer_dtype(lambda ctx: ctx.set_output_dtype(0, ctx.attr("dtype")))

    def shape(ctx: InferContext) -> None:
        indices = ctx.param("indices").shape
        if indices is not None and len(indices) != 1:
            raise ValueError(f"TensorArrayGatherV3 indices must be a vector, found shape {list(indices)}")
        n = None if indices is None or indices[0] < 0 else indices[0]
        element = ctx.attr("element_shape")
        ctx.set_output_shape(0, _leading(n, None if element is None else tuple(d if d >= 0 else -1 for d in element)))

    return op.set_infer_shape(shape)


def _array_concat() -> OpDef:
    op = tf_op("TensorArrayConcatV3").input("handle").input("flow_in").output("value").output("lengths", dtypes=(D.INT64,))
    op.attr("dtype", DTYPE).attr("element_shape_except0", LIST_INT, optional=True)

    def dtype(ctx: InferContext) -> None:
        ctx.set_output_dtype(0, ctx.attr("dtype"))
        ctx.set_output_dtype(1, D.INT64)

    def shape(ctx: InferContext) -> None:
        rest = ctx.attr("element_shape_except0")
        ctx.set_output_shape(0, _leading(None, None if rest is None else tuple(d if d >= 0 else -1 for d in rest)))
        ctx.set_output_shape(1, (-1,))

    return op.set_infer_dtype(dtype).set_infer_shape(shape)


def _array_size() -> OpDef:
    op = tf_op("TensorArraySizeV3").input("handle").input("flow_in").output("size", dtypes=(D.INT32,))
    return op.set_infer_shape(_scalar_outputs)


def _array_scatter() -> OpDef:
    op = _flow_op("TensorArrayScatterV3", "handle", "indices", "value", "flow_in")

    def shape(ctx: InferContext) -> None:
        indices, value = ctx.param("indices").shape, ctx.param("value").shape
        if indices is not None and value is not None:
            if len(indices) != 1 or len(value) < 1:
                raise ValueError(f"TensorArrayScatterV3 needs vector indices and a value of rank >= 1, found {list(indices)} and {list(value)}")
            merge_dim(indices[0], value[0], "scatter indices and value rows")
        ctx.set_output_shape(0, ())

    return op.set_infer_shape(shape)


def definitions() -> list[OpDef]:
    """Every TensorList and TensorArray ``tf`` op definition."""
    ops = _tensor_list_makers() + [_get_item(), _pop_back(), _stack(), _gather()] + _list_queries()
    ops += [_tensor_array(), _array_read(), _array_gather(), _array_concat(), _array_size(), _array_scatter()]
    ops += [_flow_op("TensorArrayWriteV3", "handle", "index", "value", "flow_in")]
    ops += [_flow_op("TensorArraySplitV3", "handle", "value", "lengths", "flow_in")]
    ops.append(tf_op("TensorArrayCloseV3").input("handle"))
    return ops
