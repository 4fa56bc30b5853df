"""The base of the recurrent-loop rules (DynamicRNNFusion, DynamicGRUFusion): :class:`RecurrentLoopPass`
finds the candidate loops, claims them and maps their ports; :class:`Cell` is what a rule reads of one
loop body; :func:`affine` and :func:`gate_affine` read the weights of the cell's affine maps from the
constants.
"""

from __future__ import annotations

import abc
from typing import TYPE_CHECKING, Any, Collection, Iterator, Sequence

import numpy as np

from scopefusion.scope import (
    FUSION_DISABLE_INDEX,
    DataflowPattern,
    FusionScopesResult,
    Match,
    NodeOpTypeFeature,
    Refused,
    Scope,
    ScopeBasePass,
    ScopeFeature,
    ScopeGraph,
    ScopePattern,
    ScopesResult,
    reads_op_type_counts,
)

from ...records import Record
from .constants import ADD as ADD_OPS
from .constants import WHILE as WHILE_OPS

if TYPE_CHECKING:  # pragma: no cover
    from ..rnn_loops import LoopVar, SequenceLoop
    from ..rnn_values import Env, Tensor

# The loop analysis (:mod:`..rnn_loops`, :mod:`..rnn_values`) is imported when a graph has a loop to read.

__all__ = ["ACTIVATIONS", "Affine", "Cell", "RecurrentLoopPass", "activation_mismatch", "affine", "gate_affine"]

_CONST_OPS = frozenset({"Const", "Constant", "Initializer"})
_LOOP_OPS = (*WHILE_OPS, "LoopCond")  # the nodes a sequence loop is found from


_SCOPE_PATTERNS = (
    ScopePattern(
        "rnn_frame",
        NodeOpTypeFeature("LoopCond", 1),
        NodeOpTypeFeature("TensorArrayReadV3", 1),
        ScopeFeature("", 0, suffix="while"),
    ),
    *(ScopePattern(f"rnn_{op.lower()}", NodeOpTypeFeature(op, 1), NodeOpTypeFeature("TensorListFromTensor", 1))
      for op in WHILE_OPS),
)

ACTIVATIONS = ("Sigmoid", "Tanh", "Relu", "Relu6", "Elu", "Selu", "Softsign", "Softplus", "LeakyRelu", "HardSigmoid")



def activation_mismatch(
    graph: ScopeGraph, skeleton: DataflowPattern, node: Any, expected: dict[str, int], what: str, cell: str
) -> str | None:
    """When ``skeleton`` (the cell with any activations) matches at ``node``: which activations differ
    from ``expected`` (op type → count), as a reason naming ``what`` (the part of the ``cell``); else None."""
    found = skeleton.match_at(graph, node)
    if not isinstance(found, Match):
        return None
    acts = [n for n in found.nodes if n.op_type in ACTIVATIONS]
    extra = [n for n in acts if n.op_type not in expected]
    if not extra:
        return None
    missing = [k.lower() for k, count in expected.items() if sum(n.op_type == k for n in acts) < count]
    shown = ", ".join(f"{n.op_type} ({n.name})" for n in extra)
    return (
        f"{what} applies {shown} where {cell} applies {' and '.join(missing)}; only sigmoid gates with tanh "
        "activations are fused"
    )


class Cell(Record):
    """What a cell rule read: the fused op's attributes and the state variables in port order."""

    _fields = ("attrs", "states")

    def __init__(self, attrs: dict[str, Any], states: list[LoopVar]) -> None:
        self.attrs = attrs
        self.states = states


class RecurrentLoopPass(ScopeBasePass, abc.ABC):
    """A recurrent loop (TF2 ``While`` or TF1 frame) → one fused op; a subclass reads the cell.

    A subclass sets ``name``, ``fused_type``, ``num_states`` (loops with another number of states are
    left alone) and ``what``, and implements :meth:`cell`. Candidates: the loops under scopes the
    patterns match (a ``while`` scope holding one ``LoopCond`` and a TensorArray read; a scope holding
    one ``While`` / ``StatelessWhile`` and one ``TensorListFromTensor``), whose refusals are reported, then
    every other loop of the graph (by op type), reported only once it is shown to be a sequence loop.
    """

    general = True
    # A graph whose names carry no scopes is still searched: its loops are found by op type.
    select_without_matches = True
    fused_type = ""
    num_states = 0
    what = ""

    @abc.abstractmethod
    def cell(self, seq: SequenceLoop) -> Cell:
        """The cell equations of ``seq``'s body, proven from its dataflow (raises Refused when they differ)."""

    def define_patterns(self) -> Any:
        return _SCOPE_PATTERNS

    @reads_op_type_counts
    def selects_nothing(self, graph: ScopeGraph) -> bool:
        """With no matched scope the candidates are the graph's loop nodes: none when it has no node of a loop type."""
        present = graph.present_types
        return self._selects_as(RecurrentLoopPass) and not any(op in present for op in _LOOP_OPS)

    # ------------------------------------------------------------------ candidates
    def last_match_scopes_and_ops(self, graph: ScopeGraph, matches: Sequence[Scope]) -> list[ScopesResult]:
        loops: dict[str, bool] = {}
        if matches:
            # The loop nodes inside each matched scope, in graph order: the graph's loop nodes that the scope
            # holds (a few nodes looked up, rather than every node of the scope listed).
            position = graph.positions
            listed = sorted((n for op in _LOOP_OPS for n in graph.nodes_by_type(op)), key=lambda n: position[n.name])
            scope_of = graph.tree.scope_of
            for scope in matches:
                for node in listed:
                    if scope.contains(scope_of(node.name)):
                        loops.setdefault(node.name, True)
        for op in _LOOP_OPS:
            for node in graph.nodes_by_type(op):
                loops.setdefault(node.name, False)
        results = []
        names: set[str] = set()
        for name, scoped in loops.items():
            node = graph.node(name)
            stage = "loop"
            try:
                seq = _sequence_loop(graph, node)
                if len(seq.states) != self.num_states:
                    continue
                stage = "cell"
                found = self._claim(graph, seq, self.cell(seq), names)
            except Refused as refused:
                if not scoped and stage != "cell":
                    continue
                reason = f"{name} is not {self.what} over a sequence: {refused.reason}"
                found = ScopesResult(nodes=[name], refusal=reason, name=_fusion_name(graph, node, names))
            names.add(found.name)
            results.append(found)
        return results

    # ------------------------------------------------------------------ claim and ports
    def _claim(self, graph: ScopeGraph, seq: SequenceLoop, cell: Cell, names: set[str]) -> ScopesResult:
        """The nodes to claim and the port maps: batch-major when the Transposes around the loop can be
        claimed, and without initial-state inputs when the states start from zeros the fusion claims; the
        last choice (time-major, the states as inputs) always holds."""
        loop = seq.loop
        choices = [(time_major, states) for time_major in (False, True) for states in (False, True)]
        if seq.batch_in is None:
            choices = choices[2:]
        for time_major, state_inputs in choices:
            inputs, claimed, y, holds = self._ports(graph, seq, cell, time_major, state_inputs)
            if holds:
                break
        outputs: list[Tensor] = [y]
        wanted = [_is_read(graph, v.exit, claimed) for v in cell.states]
        last = max((k for k, w in enumerate(wanted) if w), default=-1)
        for v in cell.states[: last + 1]:
            outputs.append(v.exit if v.exit is not None else (v.switch, 0))
        attrs = dict(cell.attrs)
        attrs.update(time_major=time_major, return_sequences=seq.return_sequences)
        captures = {
            "inputs": inputs,
            "outputs": outputs,
            "attrs": attrs,
            "description": f"{self.pass_name}: {loop.form} loop {loop.node.name}",
        }
        name = _fusion_name(graph, loop.node, names, claimed)
        return ScopesResult(nodes=sorted(claimed, key=graph.positions.__getitem__), captures=captures, name=name)

    @staticmethod
    def _ports(graph: ScopeGraph, seq: SequenceLoop, cell: Cell, time_major: bool, state_inputs: bool):
        """``(input entries, claimed nodes, y, holds)`` for one choice of layout and initial states;
        ``holds`` is False for a Transpose read elsewhere or a zero state the fusion cannot claim."""
        main = seq.loop.main
        core = set(seq.core)
        x, entry, y = seq.x, seq.x_entry, seq.y
        if not time_major:
            assert seq.batch_in is not None, "the batch-major layout is tried only when the loop has its Transposes"
            pre = graph.node(seq.batch_in)
            x, entry = pre.inputs[0], (pre.name, 0)
            core.add(pre.name)
            if seq.batch_out is not None:
                core.add(seq.batch_out)
                y = (seq.batch_out, 0)
        inputs = [entry]
        ports = {main.resolve(x)[1], x}
        if state_inputs:
            for v in cell.states:
                inputs.append(v.entry)
                ports |= {main.resolve(v.init)[1], v.init}
        claimed = _closure(graph, core, {p for p, _ in ports}, ports)
        holds = time_major or all(c in claimed for c, _, _ in graph.shared_consumers(pre.name))
        if not state_inputs:
            holds = holds and all(_is_zero(main, v.init, claimed) for v in cell.states)
        return inputs, claimed, y, holds

    def generate_fusion_result(self, scopes: Sequence[Scope], result: FusionScopesResult, graph: ScopeGraph) -> None:
        result.op_type = self.fused_type
        result.description = result.captures["description"]
        result.attrs.update(result.captures["attrs"])
        for what, ports in (("in", result.captures["inputs"]), ("out", result.captures["outputs"])):
            maps: dict[str, list[int]] = {}
            for port, (node, slot) in enumerate(ports):
                size = len(graph.node(node).inputs) if what == "in" else slot + 1
                index_map = maps.setdefault(node, [FUSION_DISABLE_INDEX] * size)
                index_map.extend([FUSION_DISABLE_INDEX] * (slot + 1 - len(index_map)))
                index_map[slot] = port
            for node, index_map in maps.items():
                (result.insert_inputs if what == "in" else result.insert_outputs)(node, index_map)

    # ------------------------------------------------------------------ shared by the cells
    @staticmethod
    def state_var(seq: SequenceLoop, tensor: Tensor) -> LoopVar | None:
        """The state variable whose value in the body is ``tensor``."""
        body = seq.loop.body
        return next((v for v in seq.states if body.same(v.body, tensor)), None)

    @staticmethod
    def weights_dtype(seq: SequenceLoop) -> np.dtype:
        """The sequence's dtype (float32 unless the graph says otherwise)."""
        main = seq.loop.main
        node = main.producer(seq.x)[1]
        dtype = node.attrs.get("dtype", node.attrs.get("T"))
        numpy_dtype = getattr(dtype, "numpy", None)
        if numpy_dtype is None or np.dtype(numpy_dtype).kind != "f":
            return np.dtype(np.float32)
        return np.dtype(numpy_dtype)


def _sequence_loop(graph: ScopeGraph, node: Any) -> SequenceLoop:
    """The sequence loop of ``node`` (a ``While`` or a ``LoopCond``), or its Refused: read once per graph, as
    every recurrent rule asks the same question of the same loops."""
    key = ("sequence loop", node.name)
    known = graph.memo.get(key)
    if known is None:
        from ..rnn_loops import analyze_sequence_loop, frame_loop, while_loop

        try:
            known = analyze_sequence_loop(while_loop(graph, node) if node.op_type in WHILE_OPS else frame_loop(graph, node))
        except Refused as refused:
            known = refused
        graph.memo[key] = known
    if isinstance(known, Refused):
        raise known
    return known


def _fusion_name(graph: ScopeGraph, node: Any, taken: set[str], claimed: Collection[str] = ()) -> str:
    """The scope that holds the loop (``lstm`` of ``lstm/while``, ``rnn`` of ``rnn/while/LoopCond``), or the
    loop node's own name when that scope holds another loop or names an unclaimed node."""
    scope = graph.tree.scope_of(node.name)
    if node.op_type == "LoopCond" and scope.parent is not None and not scope.parent.is_root:
        scope = scope.parent
    name = node.name if scope.is_root else scope.name.rstrip("/")
    if name in taken or (graph.get(name) is not None and name not in claimed):
        return node.name
    return name


def _is_zero(main: Env, tensor: Tensor, claimed: set[str]) -> bool:
    """A zero initial state the fused op can leave out: a constant of zeros, or a claimed
    ``Fill(shape, 0)`` / ``ZerosLike``."""
    value = main.value(tensor)
    if value is not None:
        return not np.any(value)
    _, node, _ = main.producer(tensor)
    if node.name not in claimed:
        return False
    if node.op_type == "Fill":
        fill = main.value(node.inputs[1])
        return fill is not None and not np.any(fill)
    return node.op_type == "ZerosLike"


def _constant_like(graph: ScopeGraph, name: str) -> bool:
    for _ in range(16):
        node = graph.node(name)
        if node.value is not None or node.op_type in _CONST_OPS:
            return True
        if node.op_type != "Identity" or len(node.inputs) != 1:
            return False
        name = node.inputs[0][0]
    return False


def _closure(graph: ScopeGraph, core: set[str], stop: set[str], ports: set[Tensor]) -> set[str]:
    """``core`` plus every producer all of whose readers are claimed (constants, shape arithmetic, zero
    states), never a node in ``stop``, a graph input or a node a graph output names; then without the
    added nodes that read a value from outside that is neither a port nor a constant.

    Both steps are fixed points reached from work lists: a node is looked at again only when a
    neighbour's claim changes (a claimed reader may complete its producer's readers; a dropped node may
    leave its producers with a reader outside and its readers reading from outside)."""
    claimed = set(core)
    named = {o.node for o in graph.source.outputs}
    node_of = graph.source.by_name.__getitem__  # every name here is an edge's end: a node of the graph
    readers = graph.source.out_edges  # node -> its consumers (data or control) -> slots
    stack = list(claimed)
    while stack:
        node = node_of(stack.pop())
        for producer in _producers(node):
            if producer in claimed or producer in stop or producer in named:
                continue
            found = node_of(producer)
            if not found.inputs and found.value is None and found.op_type not in _CONST_OPS:
                continue
            if claimed.issuperset(readers[producer]):
                claimed.add(producer)
                stack.append(producer)
    added = claimed - core
    queue = list(added)
    queued = set(added)
    while queue:
        name = queue.pop()
        queued.discard(name)
        if name not in claimed:
            continue
        node = node_of(name)
        if not _reads_outside(graph, node, claimed, ports) and claimed.issuperset(readers[name]):
            continue
        claimed.discard(name)
        neighbours = [p for p, _ in node.inputs if p] + list(node.control_inputs) + list(readers[name])
        for other in neighbours:
            if other in claimed and other in added and other not in queued:
                queued.add(other)
                queue.append(other)
    return claimed


def _producers(node: Any) -> Iterator[str]:
    """The producers ``node`` reads, data inputs (an omitted one left out) then control inputs, in order."""
    for producer, _ in node.inputs:
        if producer:
            yield producer
    yield from node.control_inputs


def _reads_outside(graph: ScopeGraph, node: Any, claimed: set[str], ports: set[Tensor]) -> bool:
    """Whether ``node`` reads a value made outside ``claimed`` that is neither one of the ``ports`` nor a
    constant (an omitted input reads nothing)."""
    for producer, index in node.inputs:
        if producer and producer not in claimed and (producer, index) not in ports and not _constant_like(graph, producer):
            return True
    return False


def _is_read(graph: ScopeGraph, tensor: Tensor | None, claimed: set[str]) -> bool:
    if tensor is None:
        return False
    if any(o.node == tensor[0] and o.index == tensor[1] for o in graph.source.outputs):
        return True
    return any(i == tensor[1] and slot >= 0 and c not in claimed for c, slot, i in graph.shared_consumers(tensor[0]))


# ------------------------------------------------------------------------------------------ affine maps
class Affine(Record):
    """``sum(leaf @ terms[leaf]) + bias``: matrices ``[in, width]`` by leaf tensor, bias ``[width]``."""

    _fields = ("terms", "bias", "width")

    def __init__(self, terms: dict[Tensor, np.ndarray], bias: np.ndarray, width: int) -> None:
        self.terms = terms
        self.bias = bias
        self.width = width

    def columns(self, cols: slice | np.ndarray) -> Affine:
        bias = self.bias[cols]
        return Affine({k: m[:, cols] for k, m in self.terms.items()}, bias, int(bias.shape[0]))

    def matrix(self, leaf: Tensor, rows: int) -> np.ndarray:
        return self.terms.get(leaf, np.zeros((rows, self.width)))


def _bias(value: np.ndarray, width: int | None, where: str) -> np.ndarray:
    flat = np.asarray(value, np.float64)
    if flat.ndim > 1 and all(d == 1 for d in flat.shape[:-1]):
        flat = flat.reshape(-1)
    if flat.ndim == 0 or flat.size == 1:
        return np.full(width, float(flat.reshape(-1)[0])) if width is not None else flat.reshape(1)
    if flat.ndim != 1 or (width is not None and flat.shape[0] != width):
        raise Refused(f"{where} adds a constant of shape {value.shape}, not a bias over the gate's units")
    return flat


def affine(env: Env, tensor: Tensor, leaves: dict[Tensor, int | None], depth: int = 24) -> Affine:
    """``tensor`` as an affine function of the ``leaves`` (resolved body tensors → width, None when
    unknown); Refused names the node that is not affine.

    Answered once per env and arguments (the gates of a cell are column slices of one affine map, which each
    gate would otherwise compute again); the maps are shared, so their terms are never changed in place."""
    key = (tensor, depth, tuple(leaves.items()))
    answers = env.affine_answers
    known = answers.get(key)
    if known is None:
        try:
            known = _affine(env, tensor, leaves, depth)
        except Refused as refused:
            known = refused.reason
        answers[key] = known
    if isinstance(known, str):
        raise Refused(known)
    return known


def _affine(env: Env, tensor: Tensor, leaves: dict[Tensor, int | None], depth: int) -> Affine:
    env_t, t = env.resolve(tensor)
    node = env_t.node(t[0])
    if env_t is not env or depth < 0:
        raise Refused(f"{t[0]} is not computed in the loop body")
    op = node.op_type
    if op == "MatMul":
        if node.attrs.get("transpose_a"):
            raise Refused(f"{node.name} transposes its first operand")
        weight = env.value(node.inputs[1])
        if weight is None or weight.ndim != 2:
            raise Refused(f"{node.name} multiplies by {node.inputs[1][0]}, which is not a constant matrix")
        weight = np.asarray(weight.T if node.attrs.get("transpose_b") else weight, np.float64)
        parts = [env.resolve(node.inputs[0])[1]]
        _, concat, _ = env.producer(node.inputs[0])
        if parts[0] not in leaves and concat.op_type == "ConcatV2":
            axis = env.value(concat.inputs[-1])
            if axis is None or int(axis.reshape(())) not in (1, -1):
                raise Refused(f"{concat.name} does not concatenate along the feature axis")
            parts = [env.resolve(p)[1] for p in concat.inputs[:-1]]
        if not all(p in leaves for p in parts):
            bad = next(p for p in parts if p not in leaves)
            raise Refused(f"{node.name} multiplies {bad[0]}, which is not the step's input or a state")
        widths = [leaves[p] for p in parts]
        known = sum(w for w in widths if w is not None)
        if widths.count(None) > 1 or (None not in widths and known != weight.shape[0]):
            raise Refused(f"{node.name}: its operands' widths do not add up to the {weight.shape[0]} rows of its weight")
        rows = [weight.shape[0] - known if w is None else w for w in widths]
        terms: dict[Tensor, np.ndarray] = {}
        row = 0
        for p, w in zip(parts, rows):
            block = weight[row:row + w]
            terms[p] = terms[p] + block if p in terms else block
            row += w
        return Affine(terms, np.zeros(weight.shape[1]), weight.shape[1])
    if op in ("BiasAdd",) + ADD_OPS and len(node.inputs) == 2:
        consts = [env.value(a) for a in node.inputs]
        if consts[0] is not None and consts[1] is not None:
            raise Refused(f"{node.name} adds two constants")
        if consts[0] is not None or consts[1] is not None:
            k, const = next((i, c) for i, c in enumerate(consts) if c is not None)
            inner = affine(env, node.inputs[1 - k], leaves, depth - 1)
            return Affine(inner.terms, inner.bias + _bias(const, inner.width, node.name), inner.width)
        a, b = (affine(env, x, leaves, depth - 1) for x in node.inputs)
        if a.width != b.width:
            raise Refused(f"{node.name} adds values of {a.width} and {b.width} units")
        terms = dict(a.terms)
        for leaf, m in b.terms.items():
            terms[leaf] = terms[leaf] + m if leaf in terms else m
        return Affine(terms, a.bias + b.bias, a.width)
    from ..rnn_values import column_slice  # loaded with the loop ``env`` was read from

    cols = column_slice(env, node, t[1])
    if cols is not None:
        inner = affine(env, node.inputs[1] if op == "Split" else node.inputs[0], leaves, depth - 1)
        return inner.columns(cols(inner.width))
    raise Refused(f"{node.name} ({op}) is not an affine function of the step's input and state")


def gate_affine(env: Env, tensor: Tensor, leaves: dict[Tensor, int | None]) -> Affine:
    """The pre-activation of a sigmoid gate: ``Sigmoid(a)`` → ``a``, or a column slice of ``Sigmoid(a)``
    (TF1's GRUCell splits after its sigmoid) → the same slice of ``a``."""
    _, node, index = env.producer(tensor)
    if node.op_type == "Sigmoid":
        return affine(env, node.inputs[0], leaves)
    from ..rnn_values import column_slice  # loaded with the loop ``env`` was read from

    cols = column_slice(env, node, index)
    if cols is not None:
        inner = gate_affine(env, node.inputs[1] if node.op_type == "Split" else node.inputs[0], leaves)
        return inner.columns(cols(inner.width))
    raise Refused(f"{node.name} ({node.op_type}) is not a sigmoid gate")
