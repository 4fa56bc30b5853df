"""Static memory planning (after seed 002): one arena for every statically shaped intermediate tensor.

The schedule is ``graph.nodes``. A value lives from its producer's position to its last consumer's
position, both inclusive (an op reads its inputs while it writes its outputs, so an output never shares
memory with an input of the same op); a graph output lives to the end of the schedule. A node with
bodies and control inputs (an If or Loop whose body reads enclosing values) keeps every output of those
control inputs alive up to its own position; a plain control edge orders execution and keeps nothing alive.

What is planned:

* graph inputs (``ge.Data``) and constants (``ge.Const``) are **not** in the arena: inputs are fed by the
  user, weights live in the model; neither is the output of a reshape-like op (below) on one of them,
  which aliases that external buffer (``external_forwards``): a frozen graph's ``Identity`` reads of its
  weights cost nothing;
* every other value with a static shape gets an offset in the arena (a multiple of ``alignment``) and its
  size rounded up to ``alignment``; two values live at the same time never overlap (:meth:`MemoryPlan.validate`);
* a value whose shape or dtype is not known at build time (an unknown dim or rank, a string tensor, no
  type) is *dynamic*: counted in ``dynamic_tensors``, left for the runtime to allocate after its shape
  inference;
* memory forwarding: output 0 of an op whose definition has ``memory_forward = k`` (Reshape, Squeeze,
  Unsqueeze, Flatten, Identity) aliases input ``k``'s buffer when that input is in the arena and has the
  same dtype and byte size. The buffer then lives until the last use of any value aliasing it.
* control-flow bodies are not planned: the runtime allocates a body's tensors when it runs the body.

NOTE: forwarding and later uses. Kernels never write into their inputs, so a later use of the forwarded
input is no conflict: the input and its reshaped alias are both read-only once produced. A later use only
keeps the shared buffer alive longer (its lifetime is the union of its values' lifetimes).

Placement is *greedy by size* (as in TFLite's and MegCC's arena planners): buffers in decreasing size
order, each at the best-fitting gap (the smallest that fits) between the buffers already placed whose
lifetimes overlap its own, else above them. The overlapping placed buffers are found through buckets by
lifetime length and start, so the cost is about the number of overlapping pairs. When that number is too
large for the budget (a graph whose values all live long), or when it does better, a sweep over the
schedule allocating from best-fit free blocks (O(n log n)) is used instead; ``strategy`` says which plan
was kept. The candidate plans are made in order of preference and the search stops at the first that
reaches ``lower_bound_bytes``, since no later one can do better.

``lower_bound_bytes`` is the peak, over the schedule, of the bytes of the buffers alive at once (aligned
sizes, a forwarding group counted once): no plan with this alignment can use less.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right, insort
from typing import Callable, NamedTuple, Sequence

import numpy as np

from ..errors import ScopeFusionError
from ..ir.graph import CONST_OP, DATA_OP, Graph, Value
from ..ir.types import TensorType
from ..records import Record

__all__ = ["Buffer", "MemoryPlan", "MemoryPlanError", "plan_memory"]

DEFAULT_ALIGNMENT = 64
# Greedy by size is skipped when the buffers' lifetimes overlap in more pairs than this.
MAX_OVERLAP_PAIRS = 4_000_000


class MemoryPlanError(ScopeFusionError, AssertionError):
    """A memory plan breaks its own rules (two live buffers overlap, a value is placed twice...): a bug in
    the planner or in code that edited the plan, never a property of the model."""


class Buffer(NamedTuple):
    """One arena allocation: the values sharing it (the owner first, then its forwarded aliases)."""

    values: tuple[str, ...]
    offset: int
    size: int  # bytes reserved: the owner's size rounded up to the alignment
    first: int  # schedule positions, inclusive
    last: int

    @property
    def end(self) -> int:
        return self.offset + self.size


class MemoryPlan(Record):
    """The arena layout of one graph (see the module docstring).

    Values are keyed by their GE reference ``"node:index"``; the accessors also take :class:`Value` s.
    """

    _fields = (
        "alignment", "buffers", "offsets", "sizes", "lifetimes", "forwards", "arena_bytes", "naive_bytes",
        "lower_bound_bytes", "dynamic_values", "external_values", "external_forwards", "strategy", "schedule_length",
    )

    def __init__(
        self,
        alignment: int,
        buffers: list[Buffer],
        offsets: dict[str, int],
        sizes: dict[str, int],
        lifetimes: dict[str, tuple[int, int]],
        forwards: dict[str, str],
        arena_bytes: int,
        naive_bytes: int,
        lower_bound_bytes: int,
        dynamic_values: list[str] | None = None,
        external_values: list[str] | None = None,
        external_forwards: dict[str, str] | None = None,
        strategy: str = "greedy_by_size",
        schedule_length: int = 0,
    ) -> None:
        self.alignment = alignment
        self.buffers = buffers
        self.offsets = offsets  # every value in the arena -> its offset (aliases share their owner's)
        self.sizes = sizes  # every value in the arena -> its tensor bytes (not rounded)
        self.lifetimes = lifetimes  # every value in the arena -> (producer, last use) positions
        self.forwards = forwards  # aliasing value -> the value owning the buffer it aliases
        self.arena_bytes = arena_bytes
        self.naive_bytes = naive_bytes  # sum of the aligned sizes of every value in the arena, aliases included
        self.lower_bound_bytes = lower_bound_bytes
        self.dynamic_values = [] if dynamic_values is None else dynamic_values
        # graph inputs, constants and views of them
        self.external_values = [] if external_values is None else external_values
        # view of an external buffer -> its owner
        self.external_forwards = {} if external_forwards is None else external_forwards
        self.strategy = strategy
        self.schedule_length = schedule_length

    @property
    def dynamic_tensors(self) -> int:
        return len(self.dynamic_values)

    @property
    def ratio(self) -> float:
        """``arena_bytes / lower_bound_bytes`` (1.0 for an empty plan)."""
        return self.arena_bytes / self.lower_bound_bytes if self.lower_bound_bytes else 1.0

    def offset(self, value: Value | str) -> int | None:
        """The value's offset in the arena, or None when it is not in the arena."""
        return self.offsets.get(_ref(value))

    def size(self, value: Value | str) -> int | None:
        return self.sizes.get(_ref(value))

    def forwarded_from(self, value: Value | str) -> str | None:
        """The value whose buffer ``value`` aliases (in the arena, or an external one), or None."""
        ref = _ref(value)
        return self.forwards.get(ref) or self.external_forwards.get(ref)

    def validate(self) -> None:
        """Raises :class:`MemoryPlanError` when two buffers alive at the same time overlap in the arena,
        a buffer is misaligned or outside the arena, or a value's records disagree with its buffer."""
        seen: dict[str, Buffer] = {}
        for b in self.buffers:
            if b.offset % self.alignment or b.size % self.alignment or b.offset < 0:
                raise MemoryPlanError(f"buffer of {b.values[0]} at {b.offset} (+{b.size}) is not aligned to {self.alignment}")
            if b.end > self.arena_bytes:
                raise MemoryPlanError(f"buffer of {b.values[0]} ends at {b.end}, past the arena's {self.arena_bytes} bytes")
            for ref in b.values:
                if ref in seen:
                    raise MemoryPlanError(f"value {ref} is in two buffers")
                seen[ref] = b
                if self.offsets.get(ref) != b.offset:
                    raise MemoryPlanError(f"value {ref}: offset {self.offsets.get(ref)} disagrees with its buffer's {b.offset}")
                if self.sizes[ref] > b.size:
                    raise MemoryPlanError(f"value {ref} needs {self.sizes[ref]} bytes, its buffer has {b.size}")
                first, last = self.lifetimes[ref]
                if first < b.first or last > b.last:
                    raise MemoryPlanError(f"value {ref} lives {first}..{last}, outside its buffer's {b.first}..{b.last}")
        if set(seen) != set(self.offsets):
            raise MemoryPlanError(f"values with offsets but no buffer: {sorted(set(self.offsets) - set(seen))[:5]}")
        for alias, owner in self.forwards.items():
            if seen.get(alias) is None or seen.get(alias) is not seen.get(owner) or seen[owner].values[0] != owner:
                raise MemoryPlanError(f"value {alias} is recorded as aliasing {owner}, which does not own its buffer")
        _check_no_overlap(self.buffers)


def _check_no_overlap(buffers: Sequence[Buffer]) -> None:
    """Sweeps the schedule keeping the live buffers sorted by offset; each newcomer must fit between its
    neighbours (the live set never overlaps, by induction, so neighbours suffice)."""
    live = [b for b in buffers if b.size > 0]
    births = sorted(range(len(live)), key=lambda i: (live[i].first, i))
    deaths = sorted(range(len(live)), key=lambda i: (live[i].last, i))
    active: list[tuple[int, int, int]] = []  # (offset, end, index) sorted
    d = 0
    for i in births:
        b = live[i]
        while d < len(deaths) and live[deaths[d]].last < b.first:
            dead = live[deaths[d]]
            del active[bisect_left(active, (dead.offset, dead.end, deaths[d]))]
            d += 1
        at = bisect_left(active, (b.offset, b.end, i))
        for other in active[max(0, at - 1) : at + 1]:
            if other[0] < b.end and b.offset < other[1]:
                o = live[other[2]]
                raise MemoryPlanError(
                    f"buffers of {b.values[0]} ({b.offset}..{b.end}, alive {b.first}..{b.last}) and {o.values[0]} "
                    f"({o.offset}..{o.end}, alive {o.first}..{o.last}) overlap while both are alive"
                )
        active.insert(at, (b.offset, b.end, i))


def _ref(value: Value | str) -> str:
    return value if isinstance(value, str) else value.ref


# ----------------------------------------------------------------------------- planning
def plan_memory(graph: Graph, *, alignment: int = DEFAULT_ALIGNMENT, strategy: str = "best") -> MemoryPlan:
    """Plans the arena of ``graph``'s static intermediate tensors (see the module docstring).

    ``strategy``: ``"best"`` (greedy by size when affordable and the sweep, keeping the smaller arena),
    ``"greedy_by_size"`` or ``"sweep"``.
    """
    if alignment <= 0 or alignment & (alignment - 1):
        raise ValueError(f"alignment must be a power of two, found {alignment}")
    if strategy not in ("best", "greedy_by_size", "greedy_by_breadth", "sweep"):
        raise ValueError(f"unknown strategy {strategy!r}; use 'best', 'greedy_by_size', 'greedy_by_breadth' or 'sweep'")
    position = {id(node): i for i, node in enumerate(graph.nodes)}
    end = len(graph.nodes)
    # Per arena value (by index): reference, tensor bytes, lifetime, and the value owning its buffer.
    refs: list[str] = []
    nbytes: list[int] = []
    firsts: list[int] = []
    lasts: list[int] = []
    owner: list[int] = []
    dynamic: list[str] = []
    external: list[str] = []
    arena_index: dict[int, int] = {}  # id(value) -> index
    type_bytes: dict[int, int | None] = {}  # id(type) -> bytes (types are interned: few distinct ones)
    outputs = {id(v) for v in graph.outputs}
    external_ids: set[int] = set()
    external_forwards: dict[str, str] = {}
    for pos, node in enumerate(graph.nodes):
        if node.dialect == "ge" and node.op in (DATA_OP, CONST_OP):
            external.extend(v.ref for v in node.outputs)
            external_ids.update(id(v) for v in node.outputs)
            continue
        forward = node.opdef.memory_forward if node.opdef is not None else None
        if forward is not None and len(node.outputs) == 1 and forward < len(node.inputs):
            src, out = node.inputs[forward], node.outputs[0]
            if src is not None and id(src) in external_ids and id(out) not in outputs:
                # A reshape-like view of a weight or an input (a frozen graph's ReadVariableOp Identity):
                # it aliases that external buffer and takes no arena bytes.
                external.append(out.ref)
                external_ids.add(id(out))
                external_forwards[out.ref] = external_forwards.get(src.ref, src.ref)
                continue
        for value in node.outputs:
            t = value.type
            size = type_bytes.get(id(t), -1)
            if size == -1:
                size = type_bytes[id(t)] = _static_bytes(t)
            if size is None or value.meta.get("in_frame") or value.meta.get("back_edge"):
                dynamic.append(value.ref)  # left for run time: unknown size, or inside a TF1 loop frame
                continue
            last = end if id(value) in outputs else pos
            for user, _ in value._uses:
                used = position.get(id(user), pos)
                if used > last:
                    last = used
            i = len(refs)
            arena_index[id(value)] = i
            refs.append(value.ref)
            nbytes.append(size)
            firsts.append(pos)
            lasts.append(last)
            owner.append(i)
        for ctrl in node.control_inputs if node.subgraphs else ():  # a body reads these values: keep them alive
            for value in ctrl.outputs:
                j = arena_index.get(id(value))
                if j is not None and lasts[j] < pos:
                    lasts[j] = pos
        forward = node.opdef.memory_forward if node.opdef is not None else None
        if forward is not None and node.outputs and forward < len(node.inputs):
            src, out = node.inputs[forward], node.outputs[0]
            j = None if src is None else arena_index.get(id(src))
            k = arena_index.get(id(out))
            if j is not None and k is not None and src.type.dtype is out.type.dtype and nbytes[j] == nbytes[k]:  # type: ignore[union-attr]
                owner[k] = owner[j]  # the owner of the input's buffer: chains of forwards share one
    plan = _place(refs, nbytes, firsts, lasts, owner, dynamic, external, alignment, strategy, end)
    plan.external_forwards = external_forwards
    return plan


def _static_bytes(t: object) -> int | None:
    if not isinstance(t, TensorType) or not t.is_static or t.dtype.name == "string":
        return None
    return t.nbytes


def _place(
    refs: list[str],
    nbytes: list[int],
    firsts: list[int],
    lasts: list[int],
    owner: list[int],
    dynamic: list[str],
    external: list[str],
    alignment: int,
    strategy: str,
    end: int,
) -> MemoryPlan:
    # One buffer per owner; owners come before their aliases, so buffers are in schedule order.
    n = len(refs)
    buffer_of = [-1] * n  # per value: its buffer
    roots: list[int] = []  # per buffer: the owning value
    aliases: dict[int, list[int]] = {}  # buffer -> its forwarded values
    bfirst: list[int] = []
    blast: list[int] = []
    bsize: list[int] = []
    for i in range(n):
        o = owner[i]
        if o == i:
            buffer_of[i] = len(roots)
            roots.append(i)
            bfirst.append(firsts[i])
            blast.append(lasts[i])
            bsize.append(-(-nbytes[i] // alignment) * alignment)
        else:
            b = buffer_of[i] = buffer_of[o]
            aliases.setdefault(b, []).append(i)
            if lasts[i] > blast[b]:
                blast[b] = lasts[i]
    # Candidate placements, in order of preference among equal arenas; each is computed only while it
    # may still win: none can go below the peak of live bytes, so one reaching it ends the search.
    candidates: list[tuple[str, Callable[[], list[int]]]] = []
    if strategy in ("best", "greedy_by_size", "greedy_by_breadth"):
        affordable = _overlap_pairs(bfirst, blast) <= MAX_OVERLAP_PAIRS
        if strategy == "greedy_by_size" or (strategy == "best" and affordable):
            # Two tie-breaks among equal sizes (earliest first, latest first): neither wins everywhere
            # (a CNN's equal-sized activations fit the bound one way and not the other), so keep the better.
            candidates.append(("greedy_by_size", lambda: _greedy_by_size(bfirst, blast, bsize)))
            candidates.append(("greedy_by_size", lambda: _greedy_by_size(
                bfirst, blast, bsize, sorted(range(len(bsize)), key=lambda i: (-bsize[i], -bfirst[i], i)))))
        if strategy == "greedy_by_breadth" or (strategy == "best" and affordable):
            candidates.append(("greedy_by_breadth", lambda: _greedy_by_size(
                bfirst, blast, bsize, _breadth_order(bfirst, blast, bsize, end))))
    if strategy == "sweep" or not candidates or strategy == "best":
        candidates.append(("sweep", lambda: _sweep(bfirst, blast, bsize)))
    lower_bound = _peak(bfirst, blast, bsize, end)
    best: tuple[tuple[int, bool], str, list[int]] | None = None
    for k, (strategy_name, place) in enumerate(candidates):
        placed = place()
        key = (_arena(placed, bsize), strategy_name != "greedy_by_size")
        if best is None or key < best[0]:
            best = (key, strategy_name, placed)
        if best[0][0] == lower_bound and (not best[0][1] or all(c[0] != "greedy_by_size" for c in candidates[k + 1:])):
            break
    assert best is not None
    name, offsets = best[1], best[2]
    buffers = [
        Buffer((refs[r],) + tuple(refs[i] for i in aliases.get(b, ())), offsets[b], bsize[b], bfirst[b], blast[b])
        for b, r in enumerate(roots)
    ]
    value_offsets = {refs[i]: offsets[buffer_of[i]] for i in range(n)}
    forwards = {refs[i]: refs[owner[i]] for i in range(n) if owner[i] != i}
    return MemoryPlan(
        alignment=alignment,
        buffers=buffers,
        offsets=value_offsets,
        sizes=dict(zip(refs, nbytes)),
        lifetimes={r: (first, last) for r, first, last in zip(refs, firsts, lasts)},
        forwards=forwards,
        arena_bytes=_arena(offsets, bsize),
        naive_bytes=sum(-(-n // alignment) * alignment for n in nbytes),
        lower_bound_bytes=lower_bound,
        dynamic_values=dynamic,
        external_values=external,
        strategy=name,
        schedule_length=end,
    )


def _arena(offsets: Sequence[int], sizes: Sequence[int]) -> int:
    return max((o + s for o, s in zip(offsets, sizes)), default=0)


def _peak(firsts: Sequence[int], lasts: Sequence[int], sizes: Sequence[int], end: int) -> int:
    delta = [0] * (end + 2)
    for first, last, s in zip(firsts, lasts, sizes):
        delta[first] += s
        delta[last + 1] -= s
    peak = live = 0
    for d in delta:
        live += d
        peak = max(peak, live)
    return peak


def _overlap_pairs(firsts: Sequence[int], lasts: Sequence[int]) -> int:
    """How many pairs of buffers are alive at a common position (each pair counted once)."""
    order = sorted(range(len(firsts)), key=lambda i: firsts[i])
    starts = [firsts[i] for i in order]
    return sum(bisect_right(starts, lasts[i], k + 1) - k - 1 for k, i in enumerate(order))


_NUMPY_SAFE = 1 << 62  # live-byte profiles within this bound are maxed in int64 arrays


def _breadth_order(firsts: Sequence[int], lasts: Sequence[int], sizes: Sequence[int], end: int) -> list[int]:
    """TFLite's *greedy by breadth* order: buffers alive at the schedule position with the most live bytes
    first, then those of the next broadest position, each group largest first. A buffer's key is the
    broadest position of its lifetime (a range-maximum over the live-bytes profile, by sparse table)."""
    n = len(sizes)
    delta = [0] * (end + 2)
    for first, last, s in zip(firsts, lasts, sizes):
        delta[first] += s
        delta[last + 1] -= s
    live, profile = 0, []
    for d in delta[: end + 1]:
        live += d
        profile.append(live)
    table = [profile]
    k = 1
    if profile and max(profile) < _NUMPY_SAFE and min(profile) > -_NUMPY_SAFE:
        row = np.asarray(profile, dtype=np.int64)  # exact: every entry fits in int64
        while (1 << k) <= len(profile):
            half = 1 << (k - 1)
            row = np.maximum(row[: len(row) - half], row[half:])
            table.append(row.tolist())
            k += 1
    while (1 << k) <= len(profile):
        prev, half = table[-1], 1 << (k - 1)
        table.append([max(prev[i], prev[i + half]) for i in range(len(profile) - (1 << k) + 1)])
        k += 1

    def broadest(a: int, b: int) -> int:
        level = (b - a + 1).bit_length() - 1
        row = table[level]
        return max(row[a], row[b - (1 << level) + 1])

    return sorted(range(n), key=lambda i: (-broadest(firsts[i], lasts[i]), -sizes[i], firsts[i], i))


def _greedy_by_size(
    firsts: Sequence[int], lasts: Sequence[int], sizes: Sequence[int], order: Sequence[int] | None = None
) -> list[int]:
    """Greedy with best fit, buffers in ``order`` (default: by size, largest first); placed buffers are
    found by lifetime-length level and start bucket.

    A buffer of lifetime length ``n`` (last - first) is at level ``n.bit_length()``, bucket
    ``first >> level``; a query for positions ``a..b`` at level ``L`` reads the buckets whose starts can
    reach ``a`` (``first >= a - 2**L + 1``) and begin by ``b`` (or, for a long query, every bucket of
    the level whose key is in that range).
    """
    n = len(sizes)
    if order is None:
        order = sorted(range(n), key=lambda i: (-sizes[i], firsts[i], i))
    offsets = [0] * n
    ends = [0] * n
    levels: dict[int, dict[int, list[int]]] = {}
    for i in order:
        a, b, size = firsts[i], lasts[i], sizes[i]
        busy: list[tuple[int, int]] = []
        for level, buckets in levels.items():
            lo = a - (1 << level) + 1
            lo, hi = (lo >> level if lo > 0 else 0), b >> level
            if hi - lo < len(buckets):
                for key in range(lo, hi + 1):
                    bucket = buckets.get(key)
                    if bucket is not None:
                        for j in bucket:
                            if firsts[j] <= b and lasts[j] >= a:
                                busy.append((offsets[j], ends[j]))
            else:
                for key, bucket in buckets.items():
                    if lo <= key <= hi:
                        for j in bucket:
                            if firsts[j] <= b and lasts[j] >= a:
                                busy.append((offsets[j], ends[j]))
        offsets[i] = offset = _best_fit(busy, size)
        ends[i] = offset + size
        level = (b - a).bit_length()
        levels.setdefault(level, {}).setdefault(a >> level, []).append(i)
    return offsets


def _best_fit(busy: list[tuple[int, int]], size: int) -> int:
    """The start of the smallest gap of at least ``size`` between ``busy`` ranges, else above them all."""
    if size == 0:
        return 0
    busy.sort()
    best, best_gap, top = -1, -1, 0
    for start, stop in busy:
        gap = start - top
        if gap >= size and (best_gap < 0 or gap < best_gap):
            best, best_gap = top, gap
        if stop > top:
            top = stop
    return best if best >= 0 else top


def _sweep(firsts: Sequence[int], lasts: Sequence[int], sizes: Sequence[int]) -> list[int]:
    """Allocates in schedule order (larger first within a position) from best-fit free blocks, freeing a
    buffer after its last use; blocks coalesce, and a free block at the top grows to fit.

    Free blocks are kept twice, sorted by offset (to coalesce) and by size (to find the best fit).
    """
    n = len(sizes)
    offsets = [0] * n
    births = sorted(range(n), key=lambda i: (firsts[i], -sizes[i], i))
    deaths = sorted(range(n), key=lambda i: (lasts[i], i))
    free = _FreeBlocks()
    top = 0
    d = 0
    for i in births:
        while d < n and lasts[deaths[d]] < firsts[i]:
            j = deaths[d]
            d += 1
            if sizes[j]:
                free.release(offsets[j], sizes[j])
        size = sizes[i]
        if size == 0:
            continue
        found = free.take(size)
        if found is not None:
            offsets[i] = found
            continue
        tail = free.tail(top)
        if tail is not None:  # grow the free block at the top
            offsets[i] = tail
            top = tail + size
        else:
            offsets[i] = top
            top += size
    return offsets


class _FreeBlocks:
    """Coalesced free blocks of the sweep, by offset and by (size, offset)."""

    __slots__ = ("by_offset", "by_size")

    def __init__(self) -> None:
        self.by_offset: list[tuple[int, int]] = []  # (offset, size)
        self.by_size: list[tuple[int, int]] = []  # (size, offset)

    def _remove(self, offset: int, size: int) -> None:
        del self.by_offset[bisect_left(self.by_offset, (offset, size))]
        del self.by_size[bisect_left(self.by_size, (size, offset))]

    def _add(self, offset: int, size: int) -> None:
        insort(self.by_offset, (offset, size))
        insort(self.by_size, (size, offset))

    def take(self, size: int) -> int | None:
        """The offset of the smallest block that fits (its rest stays free), or None."""
        k = bisect_left(self.by_size, (size, -1))
        if k == len(self.by_size):
            return None
        block_size, offset = self.by_size[k]
        self._remove(offset, block_size)
        if block_size > size:
            self._add(offset + size, block_size - size)
        return offset

    def tail(self, top: int) -> int | None:
        """Takes the block ending at ``top`` (the arena's end so far) and returns its offset, or None."""
        if self.by_offset and sum(self.by_offset[-1]) == top:
            offset, size = self.by_offset[-1]
            self._remove(offset, size)
            return offset
        return None

    def release(self, offset: int, size: int) -> None:
        k = bisect_left(self.by_offset, (offset, size))
        if k < len(self.by_offset) and offset + size == self.by_offset[k][0]:
            nxt = self.by_offset[k]
            self._remove(*nxt)
            size += nxt[1]
        if k > 0 and sum(self.by_offset[k - 1]) == offset:
            prev = self.by_offset[k - 1]
            self._remove(*prev)
            offset, size = prev[0], prev[1] + size
        self._add(offset, size)
