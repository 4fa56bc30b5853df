"""The static memory planner: rules (what is planned, lifetimes, forwarding), validity on random graphs
(hypothesis), and packing quality on realistic CNN and transformer graphs (arena / lower bound)."""

from __future__ import annotations

import time

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from scopefusion import dtypes
from scopefusion.ir.opdef import OpDef, ParamType
from scopefusion.ir_builder import Graph, IRContext, OpRegistry, builtin_ops
from scopefusion.ir_builder.memory_plan import Buffer, MemoryPlan, MemoryPlanError, plan_memory

F32, F16, I64 = dtypes.FLOAT32, dtypes.FLOAT16, dtypes.INT64


def registry() -> OpRegistry:
    op = OpDef("Op", "m").input("x", ParamType.DYNAMIC).output("y", ParamType.DYNAMIC)
    reshape = OpDef("Reshape", "m").input("x").output("y").set_memory_forward(0)
    cond = OpDef("If", "m").input("c").output("y", ParamType.DYNAMIC)
    return OpRegistry(builtin_ops() + [op, reshape, cond])


class Builder:
    """Builds IR graphs with given output types directly (no inference): ``op(inputs, *shapes)``."""

    def __init__(self) -> None:
        self.g = Graph("g", IRContext(), registry())
        self.n = 0

    def t(self, shape, dtype=F32):
        return self.g.context.tensor(dtype, shape)

    def input(self, shape, dtype=F32):
        self.n += 1
        return self.g.add_input(f"in{self.n}", self.t(shape, dtype))

    def const(self, shape):
        return self.g.add_const(np.zeros(shape, np.float32), "w")

    def op(self, inputs, *shapes, dtype=F32, kind="m.Op", **kw):
        self.n += 1
        types = [self.t(s, dtype) if s is not None else None for s in shapes]
        node = self.g.add_node(kind, list(inputs), name=f"n{self.n}", output_types=types, **kw)
        return node.outputs[0] if len(node.outputs) == 1 else node.outputs

    def reshape(self, x, shape, dtype=F32):
        return self.op([x], shape, dtype=dtype, kind="m.Reshape")

    def plan(self, outputs, **kw) -> MemoryPlan:
        self.g.set_outputs(outputs)
        plan = plan_memory(self.g, **kw)
        plan.validate()
        return plan


# ----------------------------------------------------------------------------- rules
def test_inputs_and_constants_are_not_in_the_arena_and_lifetimes_end_at_last_use():
    b = Builder()
    x, w = b.input((1, 64)), b.const((64, 64))
    h1 = b.op([x, w], (1, 64))  # 256 bytes
    h2 = b.op([h1, w], (1, 64))
    h3 = b.op([h2, w], (1, 64))
    plan = b.plan([h3])
    assert plan.offset(x) is None and plan.offset(w) is None and set(plan.external_values) == {x.ref, w.ref}
    assert plan.lifetimes[h1.ref] == (2, 3) and plan.lifetimes[h3.ref] == (4, 5)  # an output lives to the end
    # h1 dies when h3 is made: h1 and h3 share memory, h2 overlaps both
    assert plan.offset(h1) == plan.offset(h3) != plan.offset(h2)
    assert plan.arena_bytes == plan.lower_bound_bytes == 512 and plan.naive_bytes == 768


def test_sizes_are_aligned_and_offsets_too():
    b = Builder()
    x = b.input((3,))
    a = b.op([x], (3,))  # 12 bytes
    c = b.op([a], (5,), dtype=F16)  # 10 bytes
    plan = b.plan([a, c], alignment=128)
    assert plan.size(a) == 12 and plan.size(c) == 10
    assert {buf.size for buf in plan.buffers} == {128} and plan.arena_bytes == 256
    assert all(o % 128 == 0 for o in plan.offsets.values())
    with pytest.raises(ValueError, match="power of two"):
        plan_memory(b.g, alignment=48)


def test_dynamic_tensors_are_counted_and_not_placed():
    b = Builder()
    x = b.input((-1, 8))
    dyn = b.op([x], (-1, 8))
    unknown_rank = b.op([dyn], None)
    strings = b.op([x], (4,), dtype=dtypes.STRING)
    untyped = b.op([x], None)
    untyped.type = None
    static = b.op([dyn], (2, 8))
    plan = b.plan([unknown_rank, strings, untyped, static])
    assert plan.dynamic_tensors == 4 and set(plan.dynamic_values) == {dyn.ref, unknown_rank.ref, strings.ref, untyped.ref}
    assert plan.offset(static) == 0 and plan.offset(dyn) is None


def test_reshape_forwards_its_input_buffer():
    b = Builder()
    x = b.input((2, 8))
    h = b.op([x], (2, 8))
    r1 = b.reshape(h, (16,))
    r2 = b.reshape(r1, (4, 4))  # a chain of forwards aliases the owner
    y = b.op([r2], (4, 4))
    plan = b.plan([y])
    assert plan.forwards == {r1.ref: h.ref, r2.ref: h.ref}
    assert plan.offset(r1) == plan.offset(r2) == plan.offset(h)
    assert len(plan.buffers) == 2 and plan.buffers[0].values == (h.ref, r1.ref, r2.ref)
    assert plan.naive_bytes == 4 * 64 and plan.arena_bytes == plan.lower_bound_bytes == 2 * 64


def test_forwarding_extends_the_shared_buffers_lifetime_to_every_alias_use():
    b = Builder()
    x = b.input((1024,))
    h = b.op([x], (1024,))  # 1
    r = b.reshape(h, (32, 32))  # 2
    a = b.op([h], (1024,))  # 3: the input is used after the reshape, which is fine
    c = b.op([a], (1024,))  # 4
    d = b.op([r, c], (1024,))  # 5: the alias is used late, so h's buffer lives to 5
    plan = b.plan([d])
    (shared,) = [buf for buf in plan.buffers if h.ref in buf.values]
    assert (shared.first, shared.last) == (1, 5) and r.ref in shared.values
    assert plan.offset(c) != plan.offset(h)  # c is made while the shared buffer is alive


def test_no_forwarding_from_outside_the_arena_or_across_sizes():
    b = Builder()
    x = b.input((4, 4))
    from_input = b.reshape(x, (16,))  # a view of a graph input: aliases it outside the arena
    h = b.op([from_input], (4, 4))
    cast_like = b.reshape(h, (4, 4), dtype=dtypes.INT32)  # another dtype: no alias
    dyn = b.op([h], (-1,))
    from_dynamic = b.reshape(dyn, (16,))
    plan = b.plan([cast_like, from_dynamic])
    assert plan.forwards == {}
    assert plan.offset(from_input) is None and plan.forwarded_from(from_input) == x.ref
    assert from_input.ref in plan.external_values
    assert plan.offset(from_dynamic) is not None


def test_control_inputs_keep_values_alive_for_bodies():
    b = Builder()
    x = b.input((256,))
    v = b.op([x], (256,))  # read inside the If's body
    w = b.op([x], (256,))
    c = b.op([w], (1,))
    y = b.op([c], (256,), kind="m.If", control_inputs=[v.producer])
    plain = b.plan([y])
    assert plain.lifetimes[v.ref] == (1, 1)  # a plain control edge orders execution, keeps nothing alive
    y.producer.subgraphs = {"then_branch": Graph("body", b.g.context, b.g.registry)}
    plan = b.plan([y])
    assert plan.lifetimes[v.ref] == (1, 4)
    assert plan.offset(y) != plan.offset(v)


def test_validate_rejects_overlapping_live_buffers():
    b = Builder()
    x = b.input((64,))
    h1 = b.op([x], (64,))
    h2 = b.op([h1], (64,))
    plan = b.plan([h2])
    buf1, buf2 = plan.buffers
    broken = MemoryPlan(**{**plan.__dict__, "buffers": [buf1, Buffer(buf2.values, buf1.offset, buf2.size, buf2.first, buf2.last)]})
    broken.offsets = {**plan.offsets, h2.ref: buf1.offset}
    with pytest.raises(MemoryPlanError, match="overlap while both are alive"):
        broken.validate()
    misaligned = MemoryPlan(**{**plan.__dict__, "buffers": [buf1, Buffer(buf2.values, 32, buf2.size, buf2.first, buf2.last)]})
    with pytest.raises(MemoryPlanError, match="not aligned"):
        misaligned.validate()
    fresh = plan_memory(b.g)
    wrong_alias = MemoryPlan(**{**fresh.__dict__, "forwards": {h2.ref: h1.ref}})
    with pytest.raises(MemoryPlanError, match="does not own its buffer"):
        wrong_alias.validate()


def test_empty_graph():
    b = Builder()
    x = b.input((4,))
    plan = b.plan([x])
    assert plan.arena_bytes == plan.lower_bound_bytes == plan.naive_bytes == 0 and plan.ratio == 1.0


# ----------------------------------------------------------------------------- random graphs
@st.composite
def random_graphs(draw, max_nodes: int = 40):
    b = Builder()
    values = [b.input((draw(st.integers(1, 64)),))]
    n = draw(st.integers(1, max_nodes))
    window = draw(st.sampled_from([2, 4, 1000]))  # chains, branchy, arbitrary DAGs
    for _ in range(n):
        k = draw(st.integers(1, 3))
        lo = max(0, len(values) - window)
        inputs = [values[draw(st.integers(lo, len(values) - 1))] for _ in range(k)]
        kind = draw(st.sampled_from(["op", "op", "op", "reshape", "dynamic"]))
        if kind == "reshape":
            src = inputs[0]
            shape = src.type.shape if src.type is not None and src.type.rank is not None and -1 not in src.type.shape else (8,)
            values.append(b.reshape(src, (int(np.prod(shape)),)))
        elif kind == "dynamic":
            values.append(b.op(inputs, (-1, 4)))
        else:
            outs = draw(st.integers(1, 2))
            made = b.op(inputs, *[(draw(st.integers(0, 3000)),) for _ in range(outs)])
            values.extend(made if isinstance(made, list) else [made])
    outputs = [v for v in values if not v.uses and v.producer.op != "ge.Data"] or values[-1:]
    b.g.set_outputs(outputs)
    return b.g


def _assert_plan_is_sound(g: Graph, plan: MemoryPlan) -> None:
    plan.validate()
    for value in g.values():
        if value.producer.op in ("ge.Data", "ge.Const"):
            assert plan.offset(value) is None
        elif value.ref in plan.external_forwards:  # a reshape-like view of an input or a constant
            assert plan.offset(value) is None and value.ref in plan.external_values
            owner = plan.external_forwards[value.ref]
            assert g.node(owner.rsplit(":", 1)[0]).op in ("ge.Data", "ge.Const")
        elif value.type is not None and value.type.is_static:
            assert plan.offset(value) is not None, value
        else:
            assert value.ref in plan.dynamic_values
    assert plan.lower_bound_bytes <= plan.arena_bytes <= plan.naive_bytes


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(random_graphs(), st.sampled_from(["best", "greedy_by_size", "greedy_by_breadth", "sweep"]))
def test_random_graphs_get_sound_plans(g, strategy):
    _assert_plan_is_sound(g, plan_memory(g, strategy=strategy))


def _random_dag(n: int, seed: int, window: int) -> Graph:
    rng = np.random.default_rng(seed)
    b = Builder()
    values = [b.input((64,))]
    for _ in range(n):
        k = int(rng.integers(1, 3))
        lo = max(0, len(values) - window)
        inputs = [values[int(rng.integers(lo, len(values)))] for _ in range(k)]
        values.append(b.op(inputs, (int(rng.integers(1, 4096)),)))
    b.g.set_outputs([v for v in values if not v.uses and v.producer.op != "ge.Data"])
    return b.g


@pytest.mark.parametrize("window", [2, 8, 64])
def test_random_dag_ratios(window):
    ratios = []
    for seed in range(5):
        g = _random_dag(300, seed, window)
        plan = plan_memory(g)
        _assert_plan_is_sound(g, plan)
        ratios.append(plan.ratio)
    assert max(ratios) <= 1.15, ratios


# ----------------------------------------------------------------------------- realistic graphs
def transformer(layers: int = 4, batch: int = 1, seq: int = 128, hidden: int = 768, heads: int = 12, ffn: int = 3072) -> Builder:
    """BERT-style encoder layers as an exporter decomposes them (LayerNorm and GELU as elementwise chains)."""
    b = Builder()
    d = hidden // heads
    x = b.op([b.input((batch, seq), I64)], (batch, seq, hidden))  # embedding gather
    bsh, bhsd, bhss = (batch, seq, hidden), (batch, heads, seq, d), (batch, heads, seq, seq)

    def layer_norm(h):
        mean = b.op([h], (batch, seq, 1))
        diff = b.op([h, mean], bsh)
        var = b.op([b.op([diff], bsh)], (batch, seq, 1))
        std = b.op([b.op([var], (batch, seq, 1))], (batch, seq, 1))
        return b.op([b.op([b.op([diff, std], bsh)], bsh)], bsh)

    for _ in range(layers):
        heads_of = []
        for perm in (bhsd, (batch, heads, d, seq), bhsd):
            proj = b.op([b.op([x, b.const((hidden, hidden))], bsh)], bsh)
            heads_of.append(b.op([b.reshape(proj, (batch, seq, heads, d))], perm))
        q, k, v = heads_of
        scores = b.op([b.op([q, k], bhss)], bhss)
        probs = b.op([b.op([scores, b.input((batch, 1, 1, seq))], bhss)], bhss)
        ctx = b.reshape(b.op([b.op([probs, v], bhsd)], (batch, seq, heads, d)), bsh)
        attn = b.op([b.op([b.op([ctx, b.const((hidden, hidden))], bsh)], bsh), x], bsh)
        h = layer_norm(attn)
        up = b.op([b.op([h, b.const((hidden, ffn))], (batch, seq, ffn))], (batch, seq, ffn))
        erf = b.op([b.op([b.op([up], (batch, seq, ffn))], (batch, seq, ffn))], (batch, seq, ffn))
        gelu = b.op([b.op([up, erf], (batch, seq, ffn))], (batch, seq, ffn))
        down = b.op([b.op([gelu, b.const((ffn, hidden))], bsh)], bsh)
        x = layer_norm(b.op([down, h], bsh))
    b.g.set_outputs([x])
    return b


def resnet(stages=(3, 4, 6, 3), batch: int = 1, size: int = 224) -> Builder:
    """ResNet-50: conv/bn/relu as separate ops, bottleneck blocks with projection shortcuts."""
    b = Builder()
    s = size // 2
    x = b.op([b.op([b.op([b.input((batch, 3, size, size))], (batch, 64, s, s))], (batch, 64, s, s))], (batch, 64, s, s))
    s //= 2
    x = b.op([x], (batch, 64, s, s))  # max pool
    channels = 64
    for i, blocks in enumerate(stages):
        width = 64 * 2**i
        for j in range(blocks):
            stride = 2 if j == 0 and i > 0 else 1
            out_s = s // stride
            h = x
            for c, sz in ((width, s), (width, out_s), (4 * width, out_s)):
                h = b.op([b.op([b.op([h, b.const((c, 1, 1, 1))], (batch, c, sz, sz))], (batch, c, sz, sz))], (batch, c, sz, sz))
            shortcut = x if j > 0 else b.op([b.op([x], (batch, 4 * width, out_s, out_s))], (batch, 4 * width, out_s, out_s))
            x = b.op([b.op([h, shortcut], (batch, 4 * width, out_s, out_s))], (batch, 4 * width, out_s, out_s))
            s, channels = out_s, 4 * width
    pooled = b.reshape(b.op([x], (batch, channels, 1, 1)), (batch, channels))
    b.g.set_outputs([b.op([b.op([pooled], (batch, 1000))], (batch, 1000))])
    return b


def mobilenet_v2(batch: int = 1, size: int = 224) -> Builder:
    b = Builder()
    s = size // 2
    x = b.op([b.op([b.input((batch, 3, size, size))], (batch, 32, s, s))], (batch, 32, s, s))
    cin = 32
    for t, c, n, stride in ((1, 16, 1, 1), (6, 24, 2, 2), (6, 32, 3, 2), (6, 64, 4, 2), (6, 96, 3, 1), (6, 160, 3, 2), (6, 320, 1, 1)):
        for i in range(n):
            st_ = stride if i == 0 else 1
            out_s = s // st_
            h = b.op([b.op([x], (batch, cin * t, s, s))], (batch, cin * t, s, s)) if t != 1 else x
            h = b.op([b.op([h], (batch, cin * t, out_s, out_s))], (batch, cin * t, out_s, out_s))
            h = b.op([h], (batch, c, out_s, out_s))
            x = b.op([h, x], (batch, c, out_s, out_s)) if st_ == 1 and cin == c else h
            s, cin = out_s, c
    b.g.set_outputs([b.op([b.reshape(b.op([x], (batch, cin, 1, 1)), (batch, cin))], (batch, 1000))])
    return b


def unet(depth: int = 4, batch: int = 1, size: int = 256, base: int = 32) -> Builder:
    """Encoder features stay alive until the decoder concatenates them: long, nested lifetimes."""
    b = Builder()
    x = b.input((batch, 3, size, size))
    skips, s, c = [], size, base
    for _ in range(depth):
        x = b.op([b.op([x], (batch, c, s, s))], (batch, c, s, s))
        skips.append(x)
        s //= 2
        x = b.op([x], (batch, c, s, s))
        c *= 2
    x = b.op([b.op([x], (batch, c, s, s))], (batch, c, s, s))
    for skip in reversed(skips):
        s *= 2
        c //= 2
        up = b.op([x], (batch, c, s, s))
        x = b.op([b.op([b.op([up, skip], (batch, 2 * c, s, s))], (batch, c, s, s))], (batch, c, s, s))
    b.g.set_outputs([b.op([x], (batch, 1, s, s))])
    return b


REALISTIC = {
    "bert_4_layers": lambda: transformer(4),
    "bert_batch8_seq64": lambda: transformer(2, batch=8, seq=64),
    "resnet50": resnet,
    "mobilenet_v2": mobilenet_v2,
    "unet": unet,
}


@pytest.mark.parametrize("name", sorted(REALISTIC))
def test_realistic_graphs_pack_within_five_percent_of_the_lower_bound(name):
    b = REALISTIC[name]()
    plan = plan_memory(b.g)
    _assert_plan_is_sound(b.g, plan)
    assert plan.ratio <= 1.05, (name, plan.ratio, plan.strategy)
    assert plan.arena_bytes < plan.naive_bytes / 2


def test_forwarding_saves_memory_in_a_transformer():
    b = transformer(2)
    plan = plan_memory(b.g)
    assert len(plan.forwards) == 2 * 4  # q/k/v head splits and the context merge of each layer
    assert sum(plan.sizes[r] for r in plan.forwards) > 0


def test_a_large_graph_is_planned_fast():
    b = transformer(layers=400, seq=16, hidden=64, heads=4, ffn=256)  # about 20k nodes
    assert len(b.g.nodes) > 20_000
    start = time.perf_counter()
    plan = plan_memory(b.g)
    elapsed = time.perf_counter() - start
    assert plan.strategy == "greedy_by_size" and plan.ratio <= 1.05
    assert elapsed < 10.0, elapsed  # about 1 s on an idle core; a quadratic planner takes minutes


@settings(max_examples=100, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 40), st.integers(0, 12), st.integers(0, 1 << 40)), min_size=1, max_size=40))
def test_breadth_order_is_the_same_with_and_without_numpy(buffers):
    from scopefusion.ir_builder import memory_plan

    firsts = [f for f, _, _ in buffers]
    lasts = [f + n for f, n, _ in buffers]
    sizes = [s for _, _, s in buffers]
    end = max(lasts) + 1
    with_numpy = memory_plan._breadth_order(firsts, lasts, sizes, end)
    saved = memory_plan._NUMPY_SAFE
    memory_plan._NUMPY_SAFE = 0
    try:
        assert memory_plan._breadth_order(firsts, lasts, sizes, end) == with_numpy
    finally:
        memory_plan._NUMPY_SAFE = saved
