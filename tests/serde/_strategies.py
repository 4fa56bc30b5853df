"""Hypothesis strategies for the serde tests: attribute values, tensors, types and random IR graphs."""

from __future__ import annotations

import numpy as np
from hypothesis import strategies as st

from scopefusion import dtypes as D
from scopefusion.ir import attrs as A
from scopefusion.ir.attrs import AttrValue
from scopefusion.ir.types import FORMATS
from scopefusion.ir_builder import Graph, IRContext, NamedAttrs

ALL_DTYPES = list(D.all_dtypes())
PACKED_BITS = {"int4": 4, "float4_e2m1": 4, "int2": 2, "uint2": 2, "uint1": 1}
SHARED = IRContext()  # the writers' context; tests read back into fresh contexts

names = st.text(alphabet="abcdefgh_/:.^-0123456789", min_size=1, max_size=8)
floats32 = st.floats(width=32)
int64s = st.integers(-(2**63), 2**63 - 1)


@st.composite
def arrays(draw, dtype=None, max_side: int = 4):
    """Read-only arrays of any IR dtype: arbitrary bits for numeric types, canonical codes for packed ones."""
    dtype = dtype if dtype is not None else draw(st.sampled_from(ALL_DTYPES))
    shape = tuple(draw(st.lists(st.integers(0, max_side), max_size=3)))
    count = int(np.prod(shape, dtype=np.int64))
    if dtype.numpy.kind == "O":
        items = draw(st.lists(st.binary(max_size=6), min_size=count, max_size=count))
        out = np.empty(count, dtype=object)
        out[:] = items
        out = out.reshape(shape)
    elif dtype.name == "bool":
        out = np.array(draw(st.lists(st.booleans(), min_size=count, max_size=count)), dtype=np.bool_).reshape(shape)
    elif dtype.name in PACKED_BITS:
        codes = draw(st.lists(st.integers(0, 2 ** PACKED_BITS[dtype.name] - 1), min_size=count, max_size=count))
        out = np.array(codes, dtype=np.uint8).view(dtype.numpy).reshape(shape)
    else:
        raw = draw(st.binary(min_size=count * dtype.itemsize, max_size=count * dtype.itemsize))
        out = np.frombuffer(raw, dtype=dtype.numpy).reshape(shape).copy()
    out.flags.writeable = False
    return out


def _tensor_type(dtype, shape, fmt):
    return SHARED.tensor(dtype, shape, fmt)


# Strategies are built once: building them per draw costs more than the tests themselves.
TENSOR_TYPES = st.builds(
    _tensor_type,
    st.sampled_from(ALL_DTYPES),
    st.none() | st.lists(st.integers(-1, 6), max_size=4).map(tuple),
    st.sampled_from(sorted(FORMATS)),
)
ELEMENT_TYPES = st.sampled_from(ALL_DTYPES).map(SHARED.element)
VALUE_TYPES = st.one_of(
    st.none(),
    TENSOR_TYPES,
    ELEMENT_TYPES,
    (TENSOR_TYPES | ELEMENT_TYPES).map(SHARED.list_of),
    st.lists(TENSOR_TYPES | ELEMENT_TYPES, max_size=3).map(SHARED.tuple_of),
)


def tensor_types():
    """Tensor types with static, unknown (-1) dims or unknown rank, in any format (in ``SHARED``)."""
    return TENSOR_TYPES


def value_types():
    """Any value type: None, tensors, elements, lists and tuples (in ``SHARED``)."""
    return VALUE_TYPES


SCALAR_VALUES = st.one_of(
    int64s.map(lambda x: AttrValue(A.INT, x)),
    floats32.map(lambda x: AttrValue(A.FLOAT, x)),
    st.booleans().map(lambda x: AttrValue(A.BOOL, x)),
    st.text(max_size=8).map(lambda x: AttrValue(A.STR, x)),
    st.binary(max_size=8).map(lambda x: AttrValue(A.BYTES, x)),
    st.sampled_from(ALL_DTYPES).map(lambda x: AttrValue(A.DTYPE, x)),
    arrays().map(lambda x: AttrValue(A.TENSOR, x)),
    TENSOR_TYPES.map(lambda x: AttrValue(A.TENSOR_DESC, x)),
)

LIST_VALUES = st.one_of(
    st.lists(int64s, max_size=4).map(lambda x: AttrValue(A.LIST_INT, x)),
    st.lists(floats32, max_size=4).map(lambda x: AttrValue(A.LIST_FLOAT, x)),
    st.lists(st.booleans(), max_size=4).map(lambda x: AttrValue(A.LIST_BOOL, x)),
    st.lists(st.text(max_size=5), max_size=4).map(lambda x: AttrValue(A.LIST_STR, x)),
    st.lists(st.binary(max_size=5), max_size=4).map(lambda x: AttrValue(A.LIST_BYTES, x)),
    st.lists(st.sampled_from(ALL_DTYPES), max_size=4).map(lambda x: AttrValue(A.LIST_DTYPE, x)),
    st.lists(arrays(max_side=3), max_size=3).map(lambda x: AttrValue(A.LIST_TENSOR, x)),
    st.lists(TENSOR_TYPES, max_size=3).map(lambda x: AttrValue(A.LIST_TENSOR_DESC, x)),
    st.lists(st.lists(int64s, max_size=4), max_size=4).map(lambda x: AttrValue(A.LIST_LIST_INT, x)),
    st.lists(st.lists(floats32, max_size=4), max_size=4).map(lambda x: AttrValue(A.LIST_LIST_FLOAT, x)),
)


def _nest(children):
    named = st.builds(NamedAttrs, names, st.dictionaries(names, children, max_size=3))
    return st.one_of(
        named.map(lambda x: AttrValue(A.NAMED_ATTRS, x)),
        st.lists(named, max_size=3).map(lambda x: AttrValue(A.LIST_NAMED_ATTRS, x)),
    )


PLAIN_VALUES = st.recursive(SCALAR_VALUES | LIST_VALUES, _nest, max_leaves=6)


def attr_values(with_graphs: bool = True):
    """Every builtin attribute type; named attributes nest, graphs (with bodies) appear when asked."""
    return ALL_VALUES if with_graphs else PLAIN_VALUES


DIALECTS = ["tf", "onnx", "ge", "", "custom.ns", "fused"]
OP_TYPES = ["Add", "MatMul", "Split", "LayerNorm", "While"]


@st.composite
def graphs(draw, max_ops: int = 6, max_depth: int = 1, with_graph_attrs: bool = True, name: str | None = None, context=None):
    """A random DAG: inputs of any value type, constants, ops of several dialects with absent optional
    inputs, several outputs, control inputs, attributes, bodies (nested up to ``max_depth``)."""
    graph = Graph(name if name is not None else draw(names), context if context is not None else SHARED)
    for i in range(draw(st.integers(0, 3))):
        graph.add_input(f"in{i}", draw(VALUE_TYPES))
    for _ in range(draw(st.integers(0, 2))):
        graph.add_const(draw(arrays(max_side=3)), "const")
    attrs = PLAIN_VALUES if with_graph_attrs else SCALAR_VALUES
    for _ in range(draw(st.integers(1, max_ops))):
        values = list(graph.values())
        nodes = list(graph.nodes)
        inputs = draw(st.lists(st.sampled_from(values), max_size=3)) if values else []
        if inputs and draw(st.booleans()):
            inputs.insert(draw(st.integers(0, len(inputs))), None)
        controls = draw(st.lists(st.sampled_from(nodes), max_size=2, unique_by=id)) if nodes else []
        n_out = draw(st.integers(0, 3))
        bodies = {}
        if max_depth > 0 and draw(st.integers(0, 3)) == 0:
            for key in draw(st.lists(st.sampled_from(["then", "else", "body", "cond"]), min_size=1, max_size=2, unique=True)):
                bodies[key] = draw(graphs(max_ops=3, max_depth=max_depth - 1, with_graph_attrs=False, name=draw(st.sampled_from(["body", "branch", graph.name]))))
        dialect = draw(st.sampled_from(DIALECTS))
        op_type = draw(st.sampled_from(OP_TYPES))
        op = f"{dialect}.{op_type}" if dialect else op_type
        graph.add_node(
            op,
            inputs,
            name=draw(names),
            unique=True,
            attrs=draw(st.dictionaries(names, attrs, max_size=3)),
            output_types=[draw(VALUE_TYPES) for _ in range(n_out)],
            control_inputs=controls,
            subgraphs=bodies,
            allow_unknown=True,
        )
    values = list(graph.values())
    if values:
        graph.set_outputs(draw(st.lists(st.sampled_from(values), max_size=4)))
    if with_graph_attrs:
        for key, value in draw(st.dictionaries(names, SCALAR_VALUES, max_size=2)).items():
            graph.attrs.set_attr(key, value)
    return graph


_ATTR_GRAPHS = graphs(max_ops=3, max_depth=1, with_graph_attrs=False)
ALL_VALUES = st.one_of(
    PLAIN_VALUES,
    _ATTR_GRAPHS.map(lambda g: AttrValue(A.GRAPH, g)),
    st.lists(_ATTR_GRAPHS, max_size=2).map(lambda x: AttrValue(A.LIST_GRAPH, x)),
)
