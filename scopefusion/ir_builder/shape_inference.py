"""Shape and dtype inference over a whole IR graph, with constant folding of value-dependent chains.

Nodes are visited in schedule order. For each node, every input whose value is known at build time
(a ``ge.Const``, or a value folded earlier) is offered to the op's ``fold`` / ``reference`` hook, so
chains such as Shape → StridedSlice → Pack → Reshape become known values and Reshape gets a static
shape whenever the graph's input shapes are static. Folded values live in a side table
(:attr:`InferenceResult.known_values`): the graph itself is not rewritten, so each shape profile can be
inferred on its own clone with its own table.

A shape profile's clone is inferred against the inferred graph it was cloned from (``earlier``): a node
whose inputs have the same types and the same known values there (most nodes that only read weights) takes
that node's output types, folded values and counts instead of being inferred again. Inference is a function
of exactly those inputs, the node's attributes and its output count, which a clone shares; nodes with
bodies or loop back edges are always inferred.

What inference found holds for the graph as it was: a later edit through the graph's methods (counted in
``Graph.edits``) ends it (:meth:`InferenceResult.describes`), and those who would take its answers (a
profile's inference, the ONNX export's folding) work them out again from the edited graph.

Within one graph, a node that reads exactly what an earlier node of the same op definition read (the same
interned input types, equal small known values where inference or folding reads them, equal plain
attributes, as many outputs) takes that node's output types and folded values (shared arrays) instead of
being inferred again: a model repeats its shape arithmetic and its layers. A node whose inference or
folding said anything (an error, an unfolded note, a failed fold) is never remembered. A node is keyed only
once a later node of its op definition reads the same input types (until then it cannot be repeated, and
most nodes of a small model never are), and a node that takes its input's type (below), which costs no more
than its key, is not keyed.

A node whose op has no inference function and whose every output follows one input's dtype and shape (an
``Identity``, an activation) takes that input's interned type directly; it is still folded as any node is,
and one whose kernel is the identity-like ops' (``dialects.tf.misc.identity_kernel``) folds to its input's
known value itself, without the kernel call.

An op with no definition gets unknown output types, a warning and a count; with ``strict`` it is an
:class:`~scopefusion.errors.InferenceError`.
"""

from __future__ import annotations

import sys
from collections import Counter
from itertools import compress
from operator import attrgetter
from typing import TYPE_CHECKING, Callable

import numpy as np

from .. import dtypes as _dt
from ..budgets import current_budgets
from ..errors import InferenceError
from ..ir.attrs import AttrValue
from ..ir.graph import CONST_OP, DATA_OP, Graph, Node, Value
from ..ir.inference import input_info
from ..ir.opdef import InferContext, InputInfo
from ..ir.types import TensorType, Type
from ..records import Record
from .consistency import check_contradictions

if TYPE_CHECKING:  # pragma: no cover
    import logging

__all__ = ["InferenceResult", "infer_graph"]



def _log() -> logging.Logger:
    """This module's logger; ``logging`` is imported when a conversion first has something to say."""
    import logging

    return logging.getLogger(__name__)

# Folding is for shape arithmetic, not for precomputing weights: larger constant inputs are not folded
# unless the op folds from shapes alone (its ``fold`` hook decides).
MAX_FOLD_ELEMENTS = 1 << 16


class InferenceResult(Record):
    """What inference found: ops without definitions, dynamic values, folded values."""

    _fields = ("uninferred", "uninferred_nodes", "dynamic_values", "folded", "unfolded", "known_values", "outcomes",
               "graph_edits")
    _not_shown = frozenset({"outcomes", "graph_edits"})

    def __init__(
        self,
        uninferred: Counter | None = None,
        uninferred_nodes: list[str] | None = None,
        dynamic_values: list[str] | None = None,
        folded: int = 0,
        unfolded: list[str] | None = None,
        known_values: dict[int, np.ndarray] | None = None,
        outcomes: dict[int, tuple[bool, str | None]] | None = None,
        graph_edits: int | None = None,
    ) -> None:
        self.uninferred = Counter() if uninferred is None else uninferred  # qualified op -> node count
        self.uninferred_nodes = [] if uninferred_nodes is None else uninferred_nodes
        self.dynamic_values = [] if dynamic_values is None else dynamic_values
        self.folded = folded
        self.unfolded = [] if unfolded is None else unfolded  # nodes whose value is over max_folded_bytes
        self.known_values = {} if known_values is None else known_values  # id(Value) -> value
        self.outcomes = {} if outcomes is None else outcomes
        # id(Node) -> (whether the node was folded, its note in ``unfolded`` or None), for inferred nodes
        self.graph_edits = graph_edits  # the inferred graph's Graph.edits when inference ended

    def known(self, value: Value) -> np.ndarray | None:
        return self.known_values.get(id(value))

    def describes(self, graph: Graph) -> bool:
        """Whether this is still what inference found of ``graph``, the graph it inferred: no method of the graph
        has edited it since. After an edit, a value it knew may be another (a node added anew can even take a
        removed value's ``id``), so users of its answers (the ONNX export's folding, a profile's inference)
        work them out again."""
        return self.graph_edits is not None and self.graph_edits == graph.edits


def infer_graph(
    graph: Graph,
    *,
    strict: bool = False,
    result: InferenceResult | None = None,
    progress: Callable[[int, int], None] | None = None,
    outer: dict[str, Value] | None = None,
    earlier: tuple[Graph, InferenceResult] | None = None,
) -> InferenceResult:
    """Infers every node's output types in place; returns what was found.

    ``earlier``: the inferred graph ``graph`` is a clone of, and its result; a node whose inputs are the
    same as there takes that node's answer (see the module docstring).

    Raises:
        InferenceError: an inference function failed or contradicted its inputs, or (``strict``) an op
            has no definition.
    """
    result = result if result is not None else InferenceResult()
    context = graph.context
    total = len(graph.nodes)
    # Tensors visible to bodies by name: the enclosing graphs' and this graph's, as they are inferred.
    visible: dict[str, Value] = dict(outer or {})
    twins: list[Node] | None = None
    known_values = result.known_values
    plain_infos: dict[Type | None, InputInfo] = {}  # what inference sees of an input of this type without a value
    fold_limit = current_budgets().max_folded_bytes
    if earlier is not None and len(earlier[0].nodes) == total:
        twins = earlier[0].nodes
        earlier_known = earlier[1].known_values
        earlier_outcomes = earlier[1].outcomes
    repeated: dict[tuple, tuple[list[Type | None], list[np.ndarray | None], bool]] = {}
    # By the types a node reads (see _types_read): the nodes inferred with them whose keys are not made yet.
    unkeyed: dict[tuple, list[tuple[Node, tuple[list[Type | None], list[np.ndarray | None], bool]]]] = {}
    identity = _identity_kernel()
    # Only bodies and outer-name inputs read the names: a graph with neither does not collect them.
    collect = _reads_names(graph.nodes)
    for position, node in enumerate(graph.nodes):
        if progress is not None and position % 256 == 0:
            progress(position, total)
        op = node.op
        if op == DATA_OP:
            outer_name = node.attrs.get("_outer_name")
            if outer_name is not None and node.outputs[0].type is None and outer_name in visible:
                node.outputs[0].type = visible[outer_name].type
        if collect:
            for value in node.outputs:
                name = value.meta.get("tensor_name")
                if name:
                    visible[name] = value
        if op == DATA_OP:
            continue
        if op == CONST_OP:
            array = node.attrs.get("value")
            out = node.outputs[0]
            known_values[id(out)] = array
            out.type = context.array_type(array)
            continue
        if node.subgraphs:
            for body in node.subgraphs.values():
                infer_graph(body, strict=strict, result=InferenceResult(uninferred=result.uninferred), outer=visible)
        if node.opdef is None:
            _uninferred(node, result, strict)
            continue
        unknown_input = False
        for v in node.inputs:
            if v is not None and v.type is None and not v.meta.get("back_edge"):
                unknown_input = True
                break
        if unknown_input:
            # An input of unknown type (its producer had no definition): the outputs stay unknown too.
            for value in node.outputs:
                value.type = None
            continue
        if twins is not None:
            twin = twins[position]
            outcome = earlier_outcomes.get(id(twin))
            if outcome is not None and twin.name == node.name and _same_inputs(node, twin, result.known_values, earlier_known):
                for value, twin_value in zip(node.outputs, twin.outputs):
                    value.type = twin_value.type
                    array = earlier_known.get(id(twin_value))
                    if array is not None:
                        result.known_values[id(value)] = array
                was_folded, note = outcome
                if note is not None:
                    result.unfolded.append(note)
                result.folded += was_folded
                result.outcomes[id(node)] = outcome
                continue
        opdef = node.opdef
        # An op with an inference function has no direct plan (OpDef._direct_plan): not asked.
        if node._op_type in _CHECKED_OPS or opdef.infer_shape is not None or opdef.infer_dtype is not None:
            direct = None
        else:
            direct = _direct_types(opdef, node.inputs, len(node.outputs))
        # A node that takes its input's type costs about what keying it would: it is not keyed. Nor is a
        # node that reads types no earlier node read, which cannot repeat one: its key is made (and its answer
        # remembered under it) only once a later node reads those types too.
        key = None
        types_read = None if direct is not None or node.subgraphs else _types_read(node)
        if types_read is not None:
            earlier_nodes = unkeyed.get(types_read)
            if earlier_nodes is None:
                unkeyed[types_read] = []
            else:
                for earlier_node, earlier_answer in earlier_nodes:
                    earlier_key = _node_key(earlier_node, known_values)
                    if earlier_key is not None:
                        repeated[earlier_key] = earlier_answer
                earlier_nodes.clear()
                key = _node_key(node, known_values)
                types_read = None  # keyed now: remembered under its key, if at all
        if key is not None:
            answer = repeated.get(key)
            if answer is not None:
                types, shared, was_folded = answer
                for value, t, array in zip(node.outputs, types, shared):
                    value.type = t
                    if array is not None:
                        known_values[id(value)] = array
                result.folded += was_folded
                result.outcomes[id(node)] = _UNNOTED[was_folded]
                continue
        unfolded = len(result.unfolded)
        inferred: list | None = None
        if direct is not None:
            # Each output follows one input's type (no inference function): the input's interned type.
            if identity is not None and opdef.reference is identity:
                array = _identity_read(node, direct, known_values, fold_limit)
                if array is not None:
                    node.outputs[0].type = direct[0]
                    known_values[id(node.outputs[0])] = array
                    result.folded += 1
                    result.outcomes[id(node)] = (True, None)
                    continue
            attrs = node.attrs._attrs
            folded: list[np.ndarray | None] | None = None
            if _direct_fits(node, direct, result, fold_limit) and _may_fold(opdef, node.inputs, known_values):
                if identity is not None and opdef.reference is identity and opdef.fold is None and len(node.inputs) == 1:
                    folded = [known_values[id(node.inputs[0])]]  # what folding through the kernel gives
                else:
                    folded = _try_fold(node, _infos(node, known_values, plain_infos), attrs)
        else:
            depends = opdef._value_depend_slots(len(node.inputs))
            infos: list[InputInfo | None] = []
            seen: list[InputInfo | None] = []  # the same with data only where inference reads it
            slot = 0
            for v in node.inputs:
                if v is None:
                    infos.append(None)
                    seen.append(None)
                else:
                    info = plain_infos.get(v.type)
                    if info is None:
                        info = plain_infos[v.type] = input_info(v, None)  # type: ignore[assignment]
                    data = known_values.get(id(v))
                    if data is None:
                        infos.append(info)
                        seen.append(info)
                    else:
                        full = input_info(v, data)
                        infos.append(full)
                        seen.append(full if slot in depends else info)
                slot += 1
            attrs = dict(node.attrs._attrs)
            ctx = InferContext._of_seen_inputs(opdef, node.name, seen, attrs, len(node.outputs), node.subgraphs)
            opdef.infer(ctx)
            inferred = ctx.results()
            if node._op_type in _CHECKED_OPS:  # check_contradictions finds nothing in another op's outputs
                check_contradictions(node, infos, inferred)
            folded = _try_fold(node, infos, attrs) if _fold_fits(node, inferred, result, fold_limit) else None
        if folded is _FOLD_FAILED:
            folded = key = types_read = None
        arrays: list[np.ndarray | None] = []
        if folded is None and direct is not None:
            # Nothing folded: each output takes its input's interned type, as _type_outputs would give it.
            for value, t in zip(node.outputs, direct):
                value.type = t
                arrays.append(None)
        else:
            _type_outputs(node, inferred, folded, direct, known_values, arrays)
        if folded is not None:
            result.folded += 1
        note = result.unfolded[-1] if len(result.unfolded) > unfolded else None
        result.outcomes[id(node)] = _UNNOTED[folded is not None] if note is None else (folded is not None, note)
        if key is not None and note is None:
            repeated[key] = ([value.type for value in node.outputs], arrays, folded is not None)
        elif types_read is not None and note is None:
            unkeyed[types_read].append((node, ([value.type for value in node.outputs], arrays, folded is not None)))
    if progress is not None:
        progress(total, total)
    result.graph_edits = graph.edits
    dynamic_values = result.dynamic_values
    for node in graph.nodes:
        if node.op == CONST_OP:
            continue
        for value in node.outputs:
            t = value.type
            if not (isinstance(t, TensorType) and t.is_static):
                dynamic_values.append(f"{node.name}:{value.index}")  # value.ref
    return result


def _reads_names(nodes: list[Node]) -> bool:
    """Whether a node of ``nodes`` has bodies, or is a ``ge.Data`` node with an ``_outer_name``: then bodies or
    outer-name inputs read tensors by name. The scans over every node run in C (``map``, ``compress``)."""
    if any(map(_SUBGRAPHS, nodes)):
        return True
    return any("_outer_name" in node.attrs for node in compress(nodes, map(DATA_OP.__eq__, map(_OP, nodes))))


_SUBGRAPHS = attrgetter("subgraphs")
_OP = attrgetter("op")


def _type_outputs(node: Node, inferred: list | None, folded: list[np.ndarray | None] | None, direct: list[TensorType] | None,
                  known_values: dict[int, np.ndarray], arrays: list[np.ndarray | None]) -> None:
    """Sets the types of ``node``'s outputs from what inference (or ``direct``; ``inferred`` is then None) gave
    and what folded, records each folded value in ``known_values`` and appends it (or None) to ``arrays``."""
    if direct is not None and folded is not None and _folded_as_typed(direct, folded, len(node.outputs)):
        # Each output takes its direct type: the interned type of its dtype, format and the folded shape.
        for value, t, array in zip(node.outputs, direct, folded):
            value.type = t
            if array is not None:
                known_values[id(value)] = array
            arrays.append(array)
        return
    if inferred is None:  # what inference would give each output that takes its input's type
        inferred = [(None if t.rank is None else t.shape, t.dtype, t.format) for t in direct]  # type: ignore[union-attr]
    context = node.graph.context
    for i, (value, (shape, dtype, fmt)) in enumerate(zip(node.outputs, inferred)):
        array = None
        if folded is not None and i < len(folded) and folded[i] is not None:
            array = np.asarray(folded[i])
            known_values[id(value)] = array
            shape = array.shape
            if dtype is None:
                dtype = _dt.from_numpy(array.dtype)
        try:
            if array is None and direct is not None:
                value.type = direct[i]
            else:
                value.type = context.tensor(dtype, shape, fmt) if dtype is not None else None
        except (TypeError, ValueError) as e:
            # An op's inference (or a hostile input: a negative Tile multiple) produced an impossible shape.
            raise InferenceError(
                f"node {node.name!r} ({node.op}): output {i} would get shape {list(shape or ())}, which is "
                f"impossible ({e}); the model's inputs contradict the op"
            ) from None
        arrays.append(array)


def _folded_as_typed(direct: list[TensorType], folded: list[np.ndarray | None], count: int) -> bool:
    """Whether every output of a node whose outputs take their inputs' types (``direct``) folded to an
    array (or to nothing) of exactly its direct type's shape, as an identity-like op folds to its input's
    known value. :func:`_type_outputs` would then give each output ``context.tensor(t.dtype, array.shape,
    t.format)``, which is ``t`` itself (types are interned), and record ``np.asarray(array)``, which is the
    array itself."""
    if len(folded) != count or len(direct) != count:
        return False
    for t, array in zip(direct, folded):
        if array is not None and (array.__class__ is not np.ndarray or array.shape != t.shape):
            return False
    return True


# A node's outcome without a note, one tuple for every such node: by whether it folded.
_UNNOTED: dict[bool, tuple[bool, str | None]] = {True: (True, None), False: (False, None)}

_CHECKED_OPS = frozenset({"Reshape", "Range"})  # op types whose inferred outputs check_contradictions reads

# Largest known input value (in elements) whose bytes go into a node's key (see _node_key).
MAX_KEYED_ELEMENTS = 64
PLAIN_MEMO_LIMIT = 4096  # attribute values whose stand-ins _node_key remembers; the table starts afresh when full
_plain_memo: dict[int, tuple[AttrValue, object]] = {}  # id(AttrValue) -> (the value, kept alive; its stand-in)
# (attribute names, ids of their values) -> (the values, kept alive; the stand-in of the map)
_attrs_memo: dict[tuple[tuple[str, ...], tuple[int, ...]], tuple[tuple[AttrValue, ...], tuple]] = {}


def _identity_kernel() -> Callable[..., object] | None:
    """The identity-like ops' kernel, ``scopefusion.dialects.tf.misc.identity_kernel``, when that module is
    loaded, else None: a definition can only hold a kernel of a loaded module, so inference looks for it
    without importing the ``tf`` dialect into a conversion that does not use it."""
    module = sys.modules.get("scopefusion.dialects.tf.misc")
    return None if module is None else getattr(module, "identity_kernel", None)


def _types_read(node: Node) -> tuple | None:
    """The op definition, output count and input types of ``node``, which its key (:func:`_node_key`) starts
    with, so two nodes of one key have the same; None for a node read through a loop back edge or from an
    input with no type yet, which is never keyed here.

    NOTE: a node is keyed only once a later node reads the same, perhaps long after it was inferred. Its key
    then reads what it read: its inputs' known values were found before it (by their producers, scheduled
    earlier) and do not change, unless an input is a loop back edge, whose value is found later."""
    parts: list = [id(node.opdef), len(node.outputs)]
    for value in node.inputs:
        if value is None:
            parts.append(None)
            continue
        t = value.type
        if t is None or value.meta.get("back_edge"):
            return None
        parts.append(t)
    return tuple(parts)


def _node_key(node: Node, known: dict[int, np.ndarray]) -> tuple | None:
    """What ``node``'s inference and folding read: its op definition, output count, each input's interned
    type and (small, numeric) known value, and its attributes' plain values; None when part of it cannot be
    compared exactly and cheaply (a larger or non-numeric value, a tensor or graph attribute).

    NOTE: a known value is part of the key only where something reads it: a value-dependent input (its
    inference sees the value), or every input when the op can fold (a ``fold`` hook, or a kernel while
    every input is known and small enough to fold; ``Range``, whose values are checked). Inference sees
    the other inputs' types only, so a node reading a weight is keyed by the weight's type. The names of
    the source nodes a fused node stands for (``_original_nodes``) are left out: nothing infers from them."""
    opdef = node.opdef
    inputs = node.inputs
    parts: list = [id(opdef), len(node.outputs)]
    depends: frozenset[int] | None = None  # the slots whose values are read; None: every slot's
    if opdef.fold is None and node._op_type != "Range":  # type: ignore[union-attr]
        foldable = opdef.reference is not None and bool(inputs)  # type: ignore[union-attr]
        if foldable:
            for value in inputs:
                data = None if value is None else known.get(id(value))
                if data is None or data.size > MAX_FOLD_ELEMENTS:
                    foldable = False
                    break
        if not foldable:
            try:
                depends = opdef._value_depend_slots(len(inputs))  # type: ignore[union-attr]
            except ValueError:
                return None
    for slot, value in enumerate(inputs):
        if value is None:
            parts.append(None)
            continue
        if value.type is None:  # a loop back edge not inferred yet
            return None
        data = known.get(id(value))
        if data is None or (depends is not None and slot not in depends):
            parts.append(value.type)
            continue
        if data.size > MAX_KEYED_ELEMENTS or data.dtype.kind not in "biuf":
            return None
        parts.append((value.type, data.dtype.str, data.shape, data.tobytes()))
    attrs = node.attrs._attrs
    if "_original_nodes" in attrs:
        # Left out here already: a fused node's names are its own (a fresh value), and would key a new entry
        # for every fused node, which no later node finds (and which kept its values alive).
        attrs = {name: attr for name, attr in attrs.items() if name != "_original_nodes"}
    values = tuple(attrs.values())
    # The attribute values of most nodes are shared objects (see source_attrs): a map's names and the
    # identities of its values find its stand-in; the entry keeps the values alive, so no identity is reused.
    maps = _attrs_memo
    ids = (tuple(attrs), tuple(map(id, values)))
    found = maps.get(ids)
    if found is not None:
        parts.append(found[1])
        return tuple(parts)
    memo = _plain_memo
    stand_ins = []
    for name, attr in attrs.items():
        known_attr = memo.get(id(attr))
        if known_attr is not None and known_attr[0] is attr:
            plain = known_attr[1]
        else:
            plain = _plain(attr.value)
            if plain is None:
                return None
            if len(memo) >= PLAIN_MEMO_LIMIT:
                memo.clear()
            memo[id(attr)] = (attr, plain)
        stand_ins.append((name, attr.type_id, plain))
    part = tuple(stand_ins)
    if len(maps) >= PLAIN_MEMO_LIMIT:
        maps.clear()
    maps[ids] = (values, part)
    parts.append(part)
    return tuple(parts)


def _plain(value: object) -> object:
    """A hashable stand-in for an attribute payload, equal only for equal payloads of the same Python types
    (floats by their bits, dtypes by identity), or None for a payload that is not a plain value or a tuple
    or list of them."""
    kind = type(value)
    if kind is int or kind is str or kind is bool or kind is bytes or kind is _dt.DType:
        return (kind, value)
    if kind is float:
        return (kind, value.hex())  # type: ignore[attr-defined]
    if kind is tuple or kind is list:
        items = [_plain(v) for v in value]  # type: ignore[attr-defined]
        return None if any(v is None for v in items) else (kind, tuple(items))
    return None


def _direct_types(opdef, inputs: list[Value | None], count: int) -> list[TensorType] | None:
    """The output types of a node whose op has no inference function and whose every output follows one
    present input's dtype and shape (and format, else has format ``ND`` like its input): those inputs'
    interned types, as inferring through the op's rules would give. None otherwise (inference decides)."""
    plan = opdef._direct_plan(len(inputs), count)
    if plan is None:
        return None
    out = []
    for slot, keeps_format in plan:
        value = inputs[slot]
        if value is None:
            return None
        t = value.type
        if type(t) is not TensorType or not (keeps_format or t.format == "ND"):
            return None
        out.append(t)
    return out


def _may_fold(opdef, inputs: list[Value | None], known: dict[int, np.ndarray]) -> bool:
    """Whether :func:`_try_fold` could fold a node: a ``fold`` hook, or a kernel and every input known and
    small enough."""
    if opdef.fold is not None:
        return True
    if opdef.reference is None or not inputs:
        return False
    for value in inputs:
        data = None if value is None else known.get(id(value))
        if data is None or data.size > MAX_FOLD_ELEMENTS:
            return False
    return True


def _infos(node: Node, known: dict[int, np.ndarray], plain_infos: dict) -> list[InputInfo | None]:
    """What folding sees of each input: its type and its known value."""
    infos: list[InputInfo | None] = []
    for v in node.inputs:
        if v is None:
            infos.append(None)
            continue
        data = known.get(id(v))
        if data is None:
            info = plain_infos.get(v.type)
            if info is None:
                info = plain_infos[v.type] = input_info(v, None)
            infos.append(info)
        else:
            infos.append(input_info(v, data))
    return infos


def _same_inputs(node: Node, twin: Node, known: dict[int, np.ndarray], twin_known: dict[int, np.ndarray]) -> bool:
    """Whether ``node`` reads what ``twin`` read when it was inferred: inputs present at the same slots,
    of the same (interned) types, with the same known value objects, and no loop back edge."""
    if node.subgraphs or len(node.inputs) != len(twin.inputs):
        return False
    for value, twin_value in zip(node.inputs, twin.inputs):
        if value is None or twin_value is None:
            if value is not twin_value:
                return False
            continue
        if value.type is not twin_value.type or value.meta.get("back_edge"):
            return False
        if known.get(id(value)) is not twin_known.get(id(twin_value)):
            return False
    return True


def _uninferred(node: Node, result: InferenceResult, strict: bool) -> None:
    if strict:
        raise InferenceError(
            f"node {node.name!r} ({node.op}) has no op definition, so its outputs cannot be inferred; "
            "register an OpDef for it or convert without --strict"
        )
    if not result.uninferred[node.op]:
        _log().warning("no op definition for %s (first seen at node %r): its outputs stay unknown", node.op, node.name)
    result.uninferred[node.op] += 1
    result.uninferred_nodes.append(node.name)
    for value in node.outputs:
        value.type = None


def _fold_fits(node: Node, inferred, result: InferenceResult, limit: int) -> bool:
    """Whether folding ``node`` stays within the folded-value budget: every output's inferred shape is
    known and its bytes are at most ``limit`` (``max_folded_bytes``). A larger value is left unfolded (it
    stays an op with a known shape); the node is recorded in ``result.unfolded``."""
    for shape, dtype, _ in inferred:
        size = dtype.itemsize if isinstance(dtype, _dt.DType) else 8
        if shape is not None:
            for d in shape:
                if d is None or d < 0:
                    break
                size *= d
            else:
                if size > limit:
                    result.unfolded.append(f"{node.name} ({size:,} bytes)")
                    return False
                continue
        # An output whose shape inference cannot tell: only ops that fold from shapes alone are tried.
        if node.opdef is None or node.opdef.fold is None:
            return False
    return True


def _direct_fits(node: Node, types: list[TensorType], result: InferenceResult, limit: int) -> bool:
    """:func:`_fold_fits` for a node whose outputs take the interned types ``types``: the same answer and the
    same note, read from each type's precomputed ``is_static`` and ``nbytes`` (the product of its dims and
    its dtype's item size that :func:`_fold_fits` computes from the shape) instead of walking its dims."""
    for t in types:
        if t.is_static:
            if t.nbytes > limit:  # type: ignore[operator]
                result.unfolded.append(f"{node.name} ({t.nbytes:,} bytes)")
                return False
        elif node.opdef is None or node.opdef.fold is None:
            return False
    return True


def _identity_read(node: Node, direct: list[TensorType], known: dict[int, np.ndarray], limit: int) -> np.ndarray | None:
    """The known value of the one input of ``node``, an identity-like op (its kernel is the identity, it has no
    ``fold`` hook) with one output taking that input's type ``direct[0]``, when the general path would fold
    the node to it: the value is small enough to fold (:func:`_may_fold`), the type within the folded-value
    budget (:func:`_direct_fits`, which then notes nothing), and the value an array of the type's shape (so
    :func:`_type_outputs` would give the output ``direct[0]`` and record the array itself). None otherwise,
    and the general path decides. A model reads each of its weights through such a node (a third of
    MobileNet's nodes)."""
    if len(node.inputs) != 1 or len(direct) != 1 or node.opdef.fold is not None:  # type: ignore[union-attr]
        return None
    data = known.get(id(node.inputs[0]))
    if data is None or data.__class__ is not np.ndarray or data.size > MAX_FOLD_ELEMENTS:
        return None
    t = direct[0]
    if not t.is_static or t.nbytes > limit or data.shape != t.shape:  # type: ignore[operator]
        return None
    return data


_FOLD_FAILED: list = []  # _try_fold's answer when the op's kernel raised (logged)


def _try_fold(node: Node, infos: list[InputInfo | None], attrs: dict[str, AttrValue]) -> list[np.ndarray | None] | None:
    opdef = node.opdef
    assert opdef is not None
    if opdef.fold is None:
        if opdef.reference is None or not infos:
            return None
        if any(i is None or i.data is None or i.data.size > MAX_FOLD_ELEMENTS for i in infos):
            return None
    try:
        out = opdef.try_fold(infos, attrs)
    except Exception as e:  # a kernel that cannot handle this input is not a reason to stop converting
        _log().debug("folding %s (%s) failed: %s", node.name, node.op, e)
        return _FOLD_FAILED
    if out is None:
        return None
    return [None if o is None else np.asarray(o) for o in out]
