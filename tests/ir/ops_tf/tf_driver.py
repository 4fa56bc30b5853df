"""Runs the ``tf`` dialect op definitions over TensorFlow's own graphs and compares with TensorFlow.

The driver walks a ``tf.Graph`` in topological order (a TF1 loop's ``NextIteration → Merge`` back edges
left out, so the back edge is seen as unknown, as TF's importer sees it) and does for every op what the IR
builder does for a node: it converts the node's attributes (dtype → DTYPE, shape → LIST_INT absent for an
unknown rank, list(shape) → LIST_LIST_INT, func → NAMED_ATTRS ...), builds an ``InferContext`` from the
facts already inferred for the op's inputs (shape, dtype and, where known, the value), runs the op
definition's inference and then ``try_fold``. ``Const`` ops give values; ``Placeholder`` ops the fed shapes.

Each output is then compared with TensorFlow's static shape and dtype: ``equal``, ``more`` (we know dims or
a rank that TF does not), ``less`` (TF knows more) or ``conflict`` (both know and disagree: a bug).
"""

from __future__ import annotations

from collections import defaultdict, deque
from dataclasses import dataclass, field
from typing import Any, Iterable

import numpy as np

from scopefusion import dtypes as D
from scopefusion.errors import InferenceError
from scopefusion.ir import attrs as A
from scopefusion.ir.attrs import AttrValue, NamedAttrs
from scopefusion.ir.opdef import InferContext, InputInfo, OpRegistry
from scopefusion.ir_builder.shape_inference import MAX_FOLD_ELEMENTS

__all__ = ["Fact", "GraphRun", "OpRecord", "compare_shape", "dtype_of", "run_graph", "run_model"]

SOURCE_OPS = ("Const", "Placeholder")
FUNC_ATTRS = ("body", "cond", "then_branch", "else_branch", "f", "branches")


@dataclass
class Fact:
    """What the driver knows of one tensor: shape (None: unknown rank), dtype, value (None: unknown)."""

    shape: tuple[int, ...] | None
    dtype: D.DType | None
    value: np.ndarray | None = None

    def info(self) -> InputInfo:
        return InputInfo(self.shape, self.dtype, "ND", self.value)


# Why our inference may know less than TF's (``OpRecord.cause``): TF facts the IR does not carry.
HANDLE_DATA = "handle data"  # TF carries a container's element shape on its resource / variant handle
CALL = "function call"  # TF's Python sets a call's output shapes from the traced function
PARTIAL_VALUE = "partial value"  # TF reads a shape tensor's known elements when the whole value is unknown
_HANDLE_DATA_OPS = {"TensorArrayReadV3", "TensorListElementShape"}
_CALL_OPS = {"PartitionedCall", "StatefulPartitionedCall"}


@dataclass
class OpRecord:
    name: str
    op_type: str
    status: str  # equal | more | less | conflict | error | uncovered
    detail: str = ""
    folded: bool = False
    cause: str = ""  # for a "less" record: HANDLE_DATA, CALL or PARTIAL_VALUE when that explains it


@dataclass
class GraphRun:
    facts: dict[str, Fact] = field(default_factory=dict)
    records: list[OpRecord] = field(default_factory=list)
    folded: list[str] = field(default_factory=list)  # tensor names whose value came from a fold
    causes: dict[str, str] = field(default_factory=dict)  # tensor name -> why it may be less precise than TF


def dtype_of(tf_dtype: Any) -> D.DType:
    """Our dtype of a ``tf.DType`` (resource and variant handles included)."""
    code = tf_dtype.base_dtype.as_datatype_enum
    found = D.from_tf(code)
    if found is not None:
        return found
    if code == D.RESOURCE.tf:
        return D.RESOURCE
    if code == D.VARIANT.tf:
        return D.VARIANT
    raise KeyError(f"TF dtype {tf_dtype} has no scopefusion dtype")


def _tf_shape(tensor: Any) -> tuple[int, ...] | None:
    shape = tensor.shape
    if shape.rank is None:
        return None
    return tuple(-1 if d is None else int(d) for d in shape.as_list())


# ------------------------------------------------------------------------------------------ attributes
def _proto_shape(shape: Any) -> tuple[int, ...] | None:
    if shape.unknown_rank:
        return None
    return tuple(int(d.size) if d.size >= 0 else -1 for d in shape.dim)


def _dtype_or_none(code: int) -> D.DType | None:
    found = D.from_tf(code)
    if found is None and code in (D.RESOURCE.tf, D.VARIANT.tf):
        return D.RESOURCE if code == D.RESOURCE.tf else D.VARIANT
    return found


def convert_attr(value: Any, declared: A.AttrType | None) -> AttrValue | None:
    """One TF ``AttrValue`` under the builder's conventions; None when it has no IR form."""
    import tensorflow as tf

    kind = value.WhichOneof("value")
    if kind == "s":
        try:
            return AttrValue(A.STR, value.s.decode("utf-8"))
        except UnicodeDecodeError:
            return AttrValue(A.BYTES, value.s)
    if kind == "i":
        return AttrValue(A.INT, int(value.i))
    if kind == "f":
        return AttrValue(A.FLOAT, float(value.f))
    if kind == "b":
        return AttrValue(A.BOOL, bool(value.b))
    if kind == "type":
        dt = _dtype_or_none(value.type)
        return None if dt is None else AttrValue(A.DTYPE, dt)
    if kind == "shape":
        shape = _proto_shape(value.shape)
        return None if shape is None else AttrValue(A.LIST_INT, shape)
    if kind == "tensor":
        array = tf.make_ndarray(value.tensor)
        return None if D.from_numpy(array.dtype) is None else AttrValue(A.TENSOR, array)
    if kind == "func":
        return AttrValue(A.NAMED_ATTRS, NamedAttrs(value.func.name))
    if kind == "list":
        lst = value.list
        if lst.s:
            return AttrValue(A.LIST_STR, [s.decode("utf-8", "replace") for s in lst.s])
        if lst.i:
            return AttrValue(A.LIST_INT, [int(i) for i in lst.i])
        if lst.f:
            return AttrValue(A.LIST_FLOAT, [float(f) for f in lst.f])
        if lst.b:
            return AttrValue(A.LIST_BOOL, [bool(b) for b in lst.b])
        if lst.type:
            types = [_dtype_or_none(t) for t in lst.type]
            return None if None in types else AttrValue(A.LIST_DTYPE, types)
        if lst.shape:
            shapes = [_proto_shape(s) for s in lst.shape]
            return None if any(s is None for s in shapes) else AttrValue(A.LIST_LIST_INT, shapes)
        if lst.func:
            return AttrValue(A.LIST_NAMED_ATTRS, [NamedAttrs(f.name) for f in lst.func])
        if lst.tensor:
            return AttrValue(A.LIST_TENSOR, [tf.make_ndarray(t) for t in lst.tensor])
        list_kind = declared if declared is not None and declared.name.startswith("list") else A.LIST_INT
        return AttrValue(list_kind, ())
    return None


def convert_attrs(node_def: Any, declared: dict[str, A.AttrType]) -> dict[str, AttrValue]:
    out = {}
    for name in sorted(node_def.attr):
        converted = convert_attr(node_def.attr[name], declared.get(name))
        if converted is not None:
            out[name] = converted
    return out


# ------------------------------------------------------------------------------------------ comparison
def compare_shape(ours: tuple[int, ...] | None, theirs: tuple[int, ...] | None) -> tuple[str, str]:
    """``(status, detail)`` of our shape against TF's: equal, more, less or conflict."""
    if theirs is None:
        return ("equal", "") if ours is None else ("more", f"rank known: {list(ours)}")
    if ours is None:
        return "less", f"rank unknown, TF knows {list(theirs)}"
    if len(ours) != len(theirs):
        return "conflict", f"rank {len(ours)} vs TF's {len(theirs)}"
    more = less = False
    for a, b in zip(ours, theirs):
        if a >= 0 and b >= 0 and a != b:
            return "conflict", f"{list(ours)} vs TF's {list(theirs)}"
        more |= a >= 0 > b
        less |= b >= 0 > a
    if less:
        return "less", f"{list(ours)} vs TF's {list(theirs)}"
    return ("more", f"{list(ours)} vs TF's {list(theirs)}") if more else ("equal", "")


_RANK = {"equal": 0, "more": 1, "less": 2, "conflict": 3}


# ------------------------------------------------------------------------------------------ walking
def topological_ops(graph: Any) -> list[Any]:
    """The graph's ops with every producer before its consumers, TF1 loop back edges left out."""
    ops = graph.get_operations()
    index = {op.name: i for i, op in enumerate(ops)}
    deps: dict[str, set[str]] = {}
    users: dict[str, list[str]] = defaultdict(list)
    for op in ops:
        producers = {t.op.name for t in op.inputs} | {c.name for c in op.control_inputs}
        if op.type == "Merge":
            producers = {p for p in producers if graph.get_operation_by_name(p).type != "NextIteration"}
        deps[op.name] = producers
        for p in producers:
            users[p].append(op.name)
    ready = deque(sorted((n for n, d in deps.items() if not d), key=index.__getitem__))
    order = []
    remaining = {n: len(d) for n, d in deps.items()}
    while ready:
        name = ready.popleft()
        order.append(graph.get_operation_by_name(name))
        for user in users[name]:
            remaining[user] -= 1
            if remaining[user] == 0:
                ready.append(user)
    if len(order) != len(ops):
        raise RuntimeError(f"graph has a cycle outside TF1 loops ({len(ops) - len(order)} ops unordered)")
    return order


def run_graph(graph: Any, registry: OpRegistry, args: dict[str, Fact]) -> GraphRun:
    """Infers every op of ``graph``; ``args`` gives the facts of its placeholders' outputs by tensor name."""
    run = GraphRun()
    for op in topological_ops(graph):
        if op.type == "Placeholder":
            fact = args[op.outputs[0].name]
            run.facts[op.outputs[0].name] = fact
            continue
        if op.type == "Const":
            value = _const_value(op)
            run.facts[op.outputs[0].name] = Fact(value.shape, dtype_of(op.outputs[0].dtype), value)
            continue
        opdef = registry.lookup(f"tf.{op.type}")
        if opdef is None:
            run.records.append(OpRecord(op.name, op.type, "uncovered", "no op definition"))
            for t in op.outputs:
                run.facts[t.name] = Fact(None, dtype_of(t.dtype))
            continue
        inputs = [run.facts.get(t.name, Fact(None, None)).info() for t in op.inputs]
        record = OpRecord(op.name, op.type, "equal")
        try:
            attrs = opdef.check_attrs(convert_attrs(op.node_def, {n: s.type_id for n, s in opdef.attrs.items()}), op.name)
            ctx = InferContext(opdef, op.name, inputs, attrs, len(op.outputs))
            opdef.infer(ctx)
            values = opdef.try_fold(inputs, attrs) if _foldable(opdef, inputs) else None
        except (InferenceError, ValueError) as e:
            run.records.append(OpRecord(op.name, op.type, "error", str(e)))
            for t in op.outputs:
                run.facts[t.name] = Fact(_tf_shape(t), dtype_of(t.dtype))
            continue
        details = []
        for i, t in enumerate(op.outputs):
            shape, dtype = ctx.output_shape(i), ctx.output_dtype(i)
            value = None if values is None else np.asarray(values[i])
            if dtype is not dtype_of(t.dtype):
                record.status, details = "conflict", details + [f"output {i}: dtype {dtype} vs TF's {t.dtype.name}"]
            status, detail = compare_shape(shape, _tf_shape(t))
            if _RANK[status] > _RANK[record.status]:
                record.status = status
            if detail:
                details.append(f"output {i}: {detail}")
            if value is not None:
                # A folded value is a constant: its shape is exact and must fit the inferred one.
                record.folded = True
                run.folded.append(t.name)
                if compare_shape(tuple(value.shape), shape)[0] not in ("equal", "more") or D.from_numpy(value.dtype) is not dtype:
                    record.status = "conflict"
                    details.append(f"output {i}: folded {value.dtype}{list(value.shape)} vs inferred {dtype}{shape}")
                shape = tuple(value.shape)
            run.facts[t.name] = Fact(shape, dtype, value)
        record.detail = "; ".join(details)
        if record.status == "less":
            record.cause = _cause(op, opdef, inputs, run)
            for t in op.outputs:
                if record.cause:
                    run.causes[t.name] = record.cause
        run.records.append(record)
    return run


def _cause(op: Any, opdef: Any, inputs: list[InputInfo], run: GraphRun) -> str:
    """What explains TF knowing more than we do here, or "" when nothing does (a gap to fix)."""
    if op.type in _HANDLE_DATA_OPS:
        return HANDLE_DATA
    if op.type in _CALL_OPS:
        return CALL
    for t in op.inputs:
        if t.name in run.causes:
            return run.causes[t.name]
    bound = [spec for spec, start, stop in opdef.bind_inputs(len(inputs)) for _ in range(start, stop)]
    if any(spec.value_depend and info.data is None for spec, info in zip(bound, inputs)):
        return PARTIAL_VALUE
    return ""


def _foldable(opdef: Any, inputs: list[InputInfo]) -> bool:
    """The builder's rule: a ``fold`` hook always runs; a reference kernel only on small constant inputs."""
    if opdef.fold is not None:
        return True
    return all(i.data is not None and i.data.size <= MAX_FOLD_ELEMENTS for i in inputs)


def _const_value(op: Any) -> np.ndarray:
    import tensorflow as tf

    return tf.make_ndarray(op.node_def.attr["value"].tensor)


# ------------------------------------------------------------------------------------------ models
@dataclass
class ModelReport:
    name: str
    graph: Any  # the imported tf.Graph (placeholders at the fed shapes)
    top: GraphRun
    functions: dict[str, GraphRun] = field(default_factory=dict)

    def records(self) -> list[OpRecord]:
        out = list(self.top.records)
        for run in self.functions.values():
            out += run.records
        return out

    def op_types(self) -> set[str]:
        types = {op.type for op in self.graph.get_operations()}
        for fdef in self.graph.as_graph_def().library.function:
            types |= {n.op for n in fdef.node_def}
        return types - set(SOURCE_OPS)

    def summary(self) -> dict[str, int]:
        recs = self.records()
        counts = {s: sum(r.status == s for r in recs) for s in ("equal", "more", "less", "conflict", "error", "uncovered")}
        counts["ops"] = len(recs)
        counts["folded"] = sum(r.folded for r in recs)
        counts["types"] = len(self.op_types())
        return counts


def run_model(model: Any, registry: OpRegistry) -> ModelReport:
    """Imports ``model`` (a ``FrozenModel``) at its fed shapes and infers its graph and function bodies."""
    import tensorflow as tf

    graph_def = tf.compat.v1.GraphDef()
    graph_def.CopyFrom(model.graph_def)
    for node in graph_def.node:
        if node.op == "Placeholder" and node.name in model.feeds:
            node.attr["shape"].shape.CopyFrom(tf.TensorShape(model.feeds[node.name]).as_proto())
        node.attr.pop("_output_shapes", None)
    graph = tf.Graph()
    with graph.as_default():
        tf.graph_util.import_graph_def(graph_def, name="")
    args = {}
    for op in graph.get_operations():
        if op.type == "Placeholder":
            t = op.outputs[0]
            args[t.name] = Fact(_tf_shape(t), dtype_of(t.dtype))
    report = ModelReport(model.name, graph, run_graph(graph, registry, args))
    _run_functions(report, graph, graph_def, registry)
    return report


def _callers(graph: Any) -> Iterable[tuple[str, list[Any]]]:
    """``(function name, the caller's tensors whose shapes its arguments take)`` for each function call."""
    for op in graph.get_operations():
        for attr in FUNC_ATTRS:
            if attr not in op.node_def.attr:
                continue
            value = op.node_def.attr[attr]
            names = [f.name for f in value.list.func] if value.WhichOneof("value") == "list" else [value.func.name]
            if op.type in ("While", "StatelessWhile"):
                tensors = list(op.outputs)  # the loop invariants: what every iteration sees
            elif op.type in ("If", "StatelessIf", "Case", "StatelessCase"):
                tensors = list(op.inputs)[1:]
            else:
                tensors = list(op.inputs)
            for name in names:
                yield name, tensors


def _run_functions(report: ModelReport, graph: Any, graph_def: Any, registry: OpRegistry) -> None:
    from tensorflow.python.framework.function_def_to_graph import function_def_to_graph

    library = {f.signature.name: f for f in graph_def.library.function}
    pending = deque(_callers(graph))
    while pending:
        name, tensors = pending.popleft()
        if name in report.functions or name not in library:
            continue
        shapes = [t.shape for t in tensors]
        body = function_def_to_graph(library[name], input_shapes=shapes)
        args = {t.name: Fact(_tf_shape(t), dtype_of(t.dtype)) for t in body.inputs}
        report.functions[name] = run_graph(body, registry, args)
        pending.extend(_callers(body))
