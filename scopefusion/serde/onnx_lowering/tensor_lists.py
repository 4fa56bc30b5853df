"""TF2 TensorLists and TF1 TensorArrays: a list is one tensor whose leading dim indexes its elements.

A TensorList handle (a ``variant`` scalar in the IR) and a TensorArray's ``flow`` (a float32 scalar that
orders the array's reads and writes) both become that tensor: ``[n, *element]``. The TensorArray's resource
handle only names the array, so it becomes a placeholder constant nothing computes with.

* ``TensorListReserve(shape, n)`` / ``TensorArrayV3(n)`` → ``ConstantOfShape([n, *dims])``, each unknown dim
  1; ``EmptyTensorList`` the same with ``n = 0``. A write broadcasts the list to the written element's shape
  first (``Expand``), so the unknown dims take the elements' real size.
* ``TensorListFromTensor(t)`` → ``t``; ``TensorListStack(l)`` / ``TensorArrayGatherV3`` over the list → ``l``
  or ``Gather(l, indices)``.
* ``TensorListSetItem(l, i, x)`` / ``TensorArrayWriteV3`` → ``ScatterND(Expand(l, [n, *shape(x)]), [[i]], [x])``;
  ``TensorArrayScatterV3(indices, v)`` → ``ScatterND(…, indices[:, None], v)``.
* ``TensorArraySplitV3(v, lengths)`` → ``Reshape(v, [n, L, *shape(v)[1:]])`` where the ``n`` lengths are
  constants all equal to ``L``, or ``Fill([n], L)``; ``TensorArrayConcatV3(l)`` → ``Reshape(l, [-1, *shape(l)[2:]])`` and
  lengths ``[L] * n``. Elements of unequal lengths (a ragged array) do not fit the one tensor: a split into
  them is refused, and so is a concatenation of elements whose ops tell different leading dims (where the
  sizes are known only when the model runs, onnxruntime fails where an element is written).
* ``TensorListGetItem(l, i)`` / ``TensorArrayReadV3`` → ``Gather(l, i)``; ``TensorListPushBack`` → ``Concat``;
  ``TensorListPopBack`` → ``Slice`` + ``Gather(l, -1)``; ``TensorListLength`` / ``TensorArraySizeV3`` →
  ``Shape(l)[0]``; ``TensorListElementShape`` → the ``element_shape`` the list was made with, as TF answers
  (-1 for a dim it leaves free), not the elements' real dims: the maker's input, followed back through list
  ops and loops (:func:`declared_element_shape`). A list of unknown element rank is refused (TF answers a
  scalar -1 where the op's output has rank 1).

NOTE: the element rank must be known to allocate a list. :func:`list_element_type` finds it (and the dtype)
from every op that touches the same list: the maker's ``element_shape``, the ``element_shape`` a read or a
stack names, the rank of an element written, across ``While`` bodies (a ``variant`` scalar says nothing).
The loop lowering (:mod:`.control`) types a loop-carried list through it too.

NOTE: a write copies the list (``ScatterND`` is not in place), so a loop carrying a list it writes ``n``
elements of moves ``O(n²)`` elements; the common case, one element per iteration in order, is written as the
``Loop``'s scan output instead (:mod:`.loop_scans`).
"""

from __future__ import annotations

from typing import Callable, Iterator

import numpy as np

from ...dtypes import DType
from ...ir.graph import CONST_OP, DATA_OP, Node, Value
from ...ir.types import TensorType
from ..onnx_proto import make_tensor
from .emitter import LoweringEmitter

__all__ = ["LOWERINGS", "declared_element_array", "declared_element_shape", "holds_list", "list_element_type"]

_PASS_THROUGH = frozenset({"Identity", "Enter", "Exit", "NextIteration", "Switch", "Merge"})
_WHILE = frozenset({"While", "StatelessWhile"})
#: list-valued input slot → list-valued output, per op
_LIST_IN_OUT = {"TensorListSetItem": (0, 0), "TensorListPushBack": (0, 0), "TensorListPopBack": (0, 0),
                "TensorArrayWriteV3": (3, 0), "TensorArrayScatterV3": (3, 0), "TensorArraySplitV3": (3, 0)}
#: list makers → their element_shape input slot
_MAKERS = {"TensorListReserve": 0, "EmptyTensorList": 0, "TensorListFromTensor": 1}
#: ops that read a list (slot) without making a new one
_LIST_READS = {"TensorListGetItem": 0, "TensorListStack": 0, "TensorListGather": 0, "TensorListLength": 0,
               "TensorListElementShape": 0, "TensorArrayReadV3": 2, "TensorArrayGatherV3": 2, "TensorArraySizeV3": 1,
               "TensorArrayConcatV3": 1}



# ----------------------------------------------------------------------------- what a list holds
def _const(value: Value | None) -> np.ndarray | None:
    if value is None or value.producer.op != CONST_OP:
        return None
    return np.asarray(value.producer.attrs.as_tensor("value"))


def _shape_const(value: Value | None) -> tuple[int, ...] | None:
    """The element shape an ``element_shape`` input names (-1 dims unknown), None for an unknown rank."""
    array = _const(value)
    if array is None or array.ndim != 1:
        return None
    return tuple(int(d) if d >= 0 else -1 for d in array.tolist())


def _rank_of(value: Value | None, drop: int = 0) -> tuple[int, ...] | None:
    t = value.type if value is not None else None
    if isinstance(t, TensorType) and t.rank is not None and t.rank >= drop:
        return tuple(t.shape[drop:])
    return None


def _facts(node: Node, slot: int) -> Iterator[tuple[DType | None, tuple[int, ...] | None]]:
    """(element dtype, element shape) that ``node`` tells of the list it reads at ``slot`` (or makes)."""
    op, ins, attrs = node.op_type, node.inputs, node.attrs
    dtype = attrs.get("element_dtype") or attrs.get("dtype")
    dtype = dtype if isinstance(dtype, DType) else None
    if op in ("TensorListReserve", "EmptyTensorList"):
        yield dtype, _shape_const(ins[0])
    elif op == "TensorListFromTensor":
        yield dtype, _rank_of(ins[0], 1)
    elif op in ("TensorListGetItem", "TensorListStack", "TensorListPopBack"):
        yield dtype, _shape_const(ins[-1])
    elif op == "TensorListGather":
        yield dtype, _shape_const(ins[2])
    elif op in ("TensorListSetItem", "TensorListPushBack") and slot == 0:
        yield dtype, _rank_of(ins[-1])
    elif op == "TensorArrayWriteV3" and slot == 3:
        yield dtype, _rank_of(ins[2])
    elif op == "TensorArrayScatterV3" and slot == 3:
        yield dtype, _rank_of(ins[2], 1)
    elif op == "TensorArraySplitV3" and slot == 3:
        rest, lengths = _rank_of(ins[1], 1), _const(ins[2])
        t = ins[1].type if ins[1] is not None else None
        size = int(lengths[0]) if lengths is not None and lengths.size and np.all(lengths == lengths.flat[0]) else -1
        yield (t.dtype if isinstance(t, TensorType) else None), (None if rest is None else (size, *rest))
    elif op == "TensorArrayConcatV3":
        rest = attrs.get("element_shape_except0")
        yield dtype, (None if rest is None else (-1, *(int(d) if d >= 0 else -1 for d in rest)))
    elif op in ("TensorArrayV3", "TensorArrayGatherV3", "TensorArrayReadV3"):
        element = attrs.get("element_shape")
        shape = tuple(int(d) if d >= 0 else -1 for d in element) if element is not None and len(element) else None
        if op == "TensorArrayReadV3":
            shape = _rank_of(node.outputs[0])
        yield dtype, shape


def _neighbours(value: Value) -> Iterator[tuple[Value | None, Node | None, int]]:
    """The values holding the same list as ``value``, and the nodes (with their slot) that tell of it."""
    node = value.producer
    op = node.op_type
    if op in _PASS_THROUGH:
        yield (node.inputs[0] if node.inputs else None), None, 0
    elif op in _LIST_IN_OUT:
        yield node.inputs[_LIST_IN_OUT[op][0]], node, _LIST_IN_OUT[op][0]
    elif op in _WHILE and value.index < len(node.inputs):
        yield node.inputs[value.index], None, 0
    elif op in ("TensorListReserve", "EmptyTensorList", "TensorListFromTensor", "TensorArrayV3"):
        yield None, node, -1
    for user, slot in value.uses:
        op = user.op_type
        if op in _PASS_THROUGH and slot == 0:
            yield user.outputs[0], None, 0
        elif op in _LIST_IN_OUT and slot == _LIST_IN_OUT[op][0]:
            yield user.outputs[_LIST_IN_OUT[op][1]], user, slot
        elif op in _LIST_READS and slot == _LIST_READS[op]:
            yield None, user, slot
        elif op in _WHILE:
            for body in user.subgraphs.values():
                for data in body.inputs:
                    index = data.producer.attrs.get("index")
                    if index is not None and int(index) == slot:
                        yield data, None, 0
            if slot < len(user.outputs):
                yield user.outputs[slot], None, 0
    if node.op == DATA_OP:  # a body's argument: the body's own output at that index carries the list on
        graph = node.graph
        index = node.attrs.get("index")
        if index is not None and int(index) < len(graph.outputs):
            yield graph.outputs[int(index)], None, 0


def list_element_type(value: Value) -> TensorType | None:
    """The type of the elements of the list ``value`` holds (dims merged over what each op says), or None
    when no op touching the list tells its dtype and rank."""
    dtype: DType | None = None
    shape: tuple[int, ...] | None = None
    for found_dtype, found_shape in _list_facts(value):
        dtype = dtype or found_dtype
        shape = _merge(shape, found_shape)
    if dtype is None or shape is None:
        return None
    return value.producer.graph.context.tensor(dtype, shape)


def _list_facts(value: Value) -> Iterator[tuple[DType | None, tuple[int, ...] | None]]:
    """What each op touching the list ``value`` holds tells of its elements: (dtype, shape)."""
    seen: set[int] = set()
    todo = [value]
    while todo:
        current = todo.pop()
        if id(current) in seen:
            continue
        seen.add(id(current))
        known = current.meta.get("list_element")  # set where a body is typed from its loop's operands
        if isinstance(known, TensorType):
            yield known.dtype, (known.shape if known.rank is not None else None)
        for other, node, slot in _neighbours(current):
            if node is not None:
                yield from _facts(node, slot)
            if other is not None and id(other) not in seen:
                todo.append(other)


def _merge(a: tuple[int, ...] | None, b: tuple[int, ...] | None) -> tuple[int, ...] | None:
    if a is None or b is None or len(a) != len(b):
        return a if a is not None else b
    return tuple(x if x >= 0 else y for x, y in zip(a, b))


def declared_element_shape(value: Value | None) -> Value | np.ndarray | None:
    """The ``element_shape`` the list ``value`` holds was made with (TF keeps it for the list's life): the
    maker's input, or the array a body argument was given (``meta["list_declared_shape"]``); None when no
    maker is found."""
    seen: set[int] = set()
    while value is not None and id(value) not in seen:
        seen.add(id(value))
        node = value.producer
        op = node.op_type
        if op in _MAKERS:
            return node.inputs[_MAKERS[op]] if _MAKERS[op] < len(node.inputs) else None
        if op in _PASS_THROUGH or op in _LIST_IN_OUT or (op in _WHILE and value.index < len(node.inputs)):
            slot = 0 if op in _PASS_THROUGH else _LIST_IN_OUT[op][0] if op in _LIST_IN_OUT else value.index
            value = node.inputs[slot] if slot < len(node.inputs) else None
            continue
        found = value.meta.get("list_declared_shape") if node.op == DATA_OP else None
        return np.asarray(found) if found is not None else None
    return None


def declared_element_array(e: LoweringEmitter, value: Value | None) -> np.ndarray | None:
    """:func:`declared_element_shape` of ``value`` when it is a list and that shape a constant, else None."""
    if not holds_list(value):
        return None
    found = declared_element_shape(value)
    return e.value_const(found) if isinstance(found, Value) else found


def holds_list(value: Value | None) -> bool:
    """True when ``value`` is a TensorList handle or a TensorArray flow (followed back through identities,
    frame ops and loops)."""
    seen: set[int] = set()
    while value is not None and id(value) not in seen:
        seen.add(id(value))
        t = value.type
        if isinstance(t, TensorType) and t.dtype.name == "variant":
            return True
        node = value.producer
        op = node.op_type
        if op == "TensorArrayV3":
            return value.index == 1
        if op in _LIST_IN_OUT:
            return True
        if op in _PASS_THROUGH or (op in _WHILE and value.index < len(node.inputs)):
            value = node.inputs[0 if op in _PASS_THROUGH else value.index] if node.inputs else None
            continue
        return bool(node.op == DATA_OP and isinstance(value.meta.get("list_element"), TensorType))
    return False


# ----------------------------------------------------------------------------- lowerings
def _element(e: LoweringEmitter, index: int) -> TensorType:
    element = list_element_type(e.node.outputs[index])
    if element is None:
        e.decline("no op touching the list tells its element dtype and rank")
    return element


def _allocate(e: LoweringEmitter, count: str, index: int, output: str) -> None:
    """``[count, *element dims]`` zeros (unknown dims 1) as output ``output``'s tensor."""
    element = _element(e, index)
    dims = e.ints([max(d, 1) for d in element.shape], "dims") if element.shape else None
    n = e.op("Reshape", [e.cast(count, np.int64), e.ints([1], "one")])[0]
    shape = e.op("Concat", [n, dims], axis=0)[0] if dims is not None else n
    zero = make_tensor("zero", e.onnx_type(element.dtype), [1], [0])
    e.op("ConstantOfShape", [shape], outputs=[output], value=zero)


def _reserve(e: LoweringEmitter) -> None:
    _allocate(e, e.input(1), 0, e.outputs[0])


def _empty(e: LoweringEmitter) -> None:
    element = _element(e, 0)
    shape = e.ints([0, *[max(d, 1) for d in element.shape]], "empty_shape")
    zero = make_tensor("zero", e.onnx_type(element.dtype), [1], [0])
    e.op("ConstantOfShape", [shape], outputs=[e.outputs[0]], value=zero)


def _tensor_array(e: LoweringEmitter) -> None:
    if e.used(0):  # the handle only names the array: a placeholder no lowering reads
        e.result("Identity", [e.const(np.zeros(2, np.float32), "handle")], 0)
    if e.used(1):
        _allocate(e, e.input(0), 1, e.outputs[1])


def _shaped_like(e: LoweringEmitter, lst: str, element: str, skip_leading: bool = False) -> str:
    """``lst`` broadcast to ``[len(lst), *shape(element)]`` (unknown dims allocated as 1 take their size)."""
    count = e.op("Shape", [lst], start=0, end=1)[0]
    dims = e.op("Shape", [element], start=1)[0] if skip_leading else e.op("Shape", [element])[0]
    return e.op("Expand", [lst, e.op("Concat", [count, dims], axis=0)[0]])[0]


def _set_item(lst: int, index: int, item: int) -> Callable[[LoweringEmitter], None]:
    def lower(e: LoweringEmitter) -> None:
        target = _shaped_like(e, e.input(lst), e.input(item))
        at = e.unsqueeze(e.int64(index), [0, 1])
        e.result("ScatterND", [target, at, e.unsqueeze(e.input(item), [0])])

    return lower


def _scatter(e: LoweringEmitter) -> None:
    target = _shaped_like(e, e.input(3), e.input(2), skip_leading=True)
    e.result("ScatterND", [target, e.unsqueeze(e.int64(1), [1]), e.input(2)])


def _push_back(e: LoweringEmitter) -> None:
    target = _shaped_like(e, e.input(0), e.input(1))
    e.result("Concat", [target, e.unsqueeze(e.input(1), [0])], axis=0)


def _pop_back(e: LoweringEmitter) -> None:
    if e.used(0):
        e.result("Slice", [e.input(0), e.ints([0], "start"), e.ints([-1], "end"), e.ints([0], "axes")], 0)
    if e.used(1):
        e.result("Gather", [e.input(0), e.const(np.asarray(-1, np.int64), "last")], 1, axis=0)


def _read(lst: int, index: int) -> Callable[[LoweringEmitter], None]:
    def lower(e: LoweringEmitter) -> None:
        e.result("Gather", [e.input(lst), e.int64(index)], axis=0)

    return lower


def _stack(e: LoweringEmitter) -> None:
    e.result("Identity", [e.input(0)])


def _length(lst: int) -> Callable[[LoweringEmitter], None]:
    def lower(e: LoweringEmitter) -> None:
        count = e.op("Shape", [e.input(lst)], start=0, end=1)[0]
        e.cast(e.squeeze(count, [0]), e.out_dtype(0), out=e.outputs[0])

    return lower


def _element_shape(e: LoweringEmitter) -> None:
    declared = declared_element_shape(e.node.inputs[0])
    if isinstance(declared, Value):
        found = e.value_const(declared)
        if found is None:
            name = e.value_name(declared)
            if name is None:
                e.decline("the element_shape its list was made with is computed in another graph")
            e.cast(name, e.out_dtype(0), out=e.outputs[0])
            return
        declared = found
    if declared is None:
        e.decline("the op that made its list is not found (through loops and list ops)")
    if np.ndim(declared) != 1:
        e.decline("its list was made with an unknown element rank, for which TensorFlow answers a scalar -1 that "
                  "the op's rank-1 output cannot hold; make the list with an element_shape of known rank")
    shape = np.where(np.asarray(declared) < 0, -1, declared).astype(e.out_dtype(0).numpy)  # -1: unknown
    e.result("Identity", [e.const(shape, "element_shape")])


def _split(e: LoweringEmitter) -> None:
    lengths = e.const_value(2)
    rest = e.op("Shape", [e.input(1)], start=1)[0]
    if lengths is None:
        pieces = _filled(e, e.node.inputs[2])
        if pieces is None:
            e.decline("its lengths are not known at export time (nor made by a Fill), and the lowering holds an "
                      "array as one tensor of equal-sized elements; split with constant, equal lengths")
        e.result("Reshape", [e.input(1), e.op("Concat", [pieces, rest], axis=0)[0]])
        return
    lengths = np.asarray(lengths).reshape(-1)
    if lengths.size and not np.all(lengths == lengths[0]):
        e.decline(f"its lengths {lengths.tolist()} differ, and the lowering holds an array as one tensor of "
                  "equal-sized elements; split into equal lengths, or concatenate the pieces yourself")
    size = int(lengths[0]) if lengths.size else 0
    e.result("Reshape", [e.input(1), e.op("Concat", [e.ints([lengths.size, size], "pieces"), rest], axis=0)[0]])


def _filled(e: LoweringEmitter, lengths: Value | None) -> str | None:
    """``[n, L]`` (int64) when ``lengths`` is ``Fill([n], L)`` (cast or not): equal lengths whose size is known
    only when the model runs."""
    fill = lengths.producer if lengths is not None else None
    while fill is not None and fill.op_type in ("Cast", "Identity") and fill.inputs and fill.inputs[0] is not None:
        fill = fill.inputs[0].producer  # TF casts the lengths to int64
    if fill is None or fill.op_type != "Fill" or len(fill.inputs) != 2:
        return None
    names = []
    for value in fill.inputs:
        found = e.value_const(value) if value is not None else None
        name = e.ints(found, "fill") if found is not None else e.value_name(value) if value is not None else None
        if name is None:
            return None
        names.append(e.op("Reshape", [e.cast(name, np.int64), e.ints([-1], "flat")])[0])
    return e.op("Concat", names, axis=0)[0]


def _concat(e: LoweringEmitter) -> None:
    lst = e.input(1)
    source = e.node.inputs[1]
    facts = _list_facts(source) if source is not None else iter(())
    leading = sorted({shape[0] for _, shape in facts if shape and shape[0] >= 0})
    if len(leading) > 1:
        e.decline(f"its elements differ in their leading dim ({', '.join(map(str, leading))}), and the lowering "
                  "holds an array as one tensor of equal-sized elements; write elements of one size, or "
                  "concatenate them yourself")
    if e.used(0):
        flat = e.op("Concat", [e.ints([-1], "joined"), e.op("Shape", [lst], start=2)[0]], axis=0)[0]
        e.result("Reshape", [lst, flat], 0)
    if e.used(1):
        count, size = e.op("Shape", [lst], start=0, end=1)[0], e.op("Shape", [lst], start=1, end=2)[0]
        e.result("Expand", [size, count], 1)


def _from_tensor(e: LoweringEmitter) -> None:
    e.result("Identity", [e.input(0)])


def _close(e: LoweringEmitter) -> None:
    pass


LOWERINGS: list[tuple[str, Callable[[LoweringEmitter], None]]] = [
    ("TensorListReserve", _reserve), ("EmptyTensorList", _empty), ("TensorListFromTensor", _from_tensor),
    ("TensorListSetItem", _set_item(0, 1, 2)), ("TensorListPushBack", _push_back), ("TensorListPopBack", _pop_back),
    ("TensorListGetItem", _read(0, 1)), ("TensorListGather", _read(0, 1)), ("TensorListStack", _stack),
    ("TensorListLength", _length(0)), ("TensorListElementShape", _element_shape),
    ("TensorArrayV3", _tensor_array), ("TensorArrayWriteV3", _set_item(3, 1, 2)), ("TensorArrayScatterV3", _scatter),
    ("TensorArrayReadV3", _read(2, 1)), ("TensorArrayGatherV3", _read(2, 1)), ("TensorArraySizeV3", _length(1)),
    ("TensorArraySplitV3", _split), ("TensorArrayConcatV3", _concat), ("TensorArrayCloseV3", _close),
]  # fmt: skip
