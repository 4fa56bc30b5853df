"""ONNX models into a :class:`SourceGraph`.

* Graph inputs (initializers excluded) become synthetic :data:`INPUT_OP` nodes, initializers (dense and
  sparse) synthetic :data:`INITIALIZER_OP` nodes with ``value`` set, all named after their tensor.
* Each ONNX node keeps its output tensor names in ``output_names``; its data inputs are
  ``(producer node, output index)``. Empty node names become ``"{op_type}_{position}"`` and repeated
  names get ``"_1"``, ``"_2"``... (also when a name equals a tensor name of an input or initializer), so
  the result is deterministic.
* ``If`` / ``Loop`` / ``Scan`` bodies (any graph attribute) are nested SourceGraphs, in the node's
  ``attrs`` and ``subgraphs``; a body's reads of enclosing tensors become :data:`OUTER_SCOPE_OP` nodes.
* Model-local functions are ``graph.functions["domain::name"]`` (``"domain::name::overload"`` when
  overloaded); attributes that refer to the caller's attributes are :class:`.AttrPlaceholder`.
* ``raw_data`` of large tensors are zero-copy views of the mmap'd file; external data is read from files
  inside the model's directory only.

The model is decoded with the messages of :mod:`.onnx_model_decoder` (the ONNX schema declared for
scopefusion), so loading a model imports neither the ``onnx`` package nor protobuf; bytes that decoder leaves
aside (malformed, or unusual) are parsed with :mod:`.proto.onnx_model_pb2`'s messages (the same schema, with
UTF-8 checks of string fields at C speed).
"""

from __future__ import annotations

import os
from typing import Any, Mapping

import numpy as np

from ..dtypes import from_onnx
from ..errors import ModelLoadError, ParseError
from .onnx_model_decoder import AttributeProto, decode_model
from .onnx_tensors import ExternalData, sparse_to_numpy, tensor_to_numpy
from .source_graph import (
    ABSENT_INPUT,
    FRAMEWORK_ONNX,
    INITIALIZER_OP,
    INPUT_OP,
    OUTER_SCOPE_OP,
    GraphInput,
    GraphOutput,
    SourceGraph,
    SourceNode,
)
from .tf_attrs import text
from .values import AttrPlaceholder
from .wire import CUT, Cut, Path, Spec, WireError, strip

__all__ = ["LATEST_DEFAULT_OPSET", "MODEL_SPEC", "onnx_graph_from_buffer", "graph_from_model"]

# The newest opset of ONNX's default domain: the installed onnx package's, which the op schemas of the
# ``onnx`` dialect are generated from (tools/gen_onnx_schemas.py); tests/parser/test_onnx_proto.py checks both.
LATEST_DEFAULT_OPSET = 28

_TENSOR = Spec({9: CUT})
_GRAPH = Spec()
_ATTR = Spec({5: _TENSOR, 6: _GRAPH, 10: _TENSOR, 11: _GRAPH})
_NODE = Spec({5: _ATTR})
_GRAPH.fields.update({1: _NODE, 5: _TENSOR})
MODEL_SPEC = Spec({7: _GRAPH, 25: Spec({7: _NODE})})

_A = AttributeProto
_RAW = ((9, 0),)


def _value_type(type_proto) -> tuple[Any, tuple[int, ...] | None, tuple[str, ...]]:
    """(DType or None, shape or None, dim_params) of a ValueInfo type."""
    if type_proto.WhichOneof("value") != "tensor_type":
        return None, None, ()
    tensor_type = type_proto.tensor_type
    dtype = from_onnx(tensor_type.elem_type)
    if not tensor_type.HasField("shape"):
        return dtype, None, ()
    dims = []
    params = []
    for dim in tensor_type.shape.dim:
        kind = dim.WhichOneof("value")
        dims.append(int(dim.dim_value) if kind == "dim_value" and dim.dim_value >= 0 else -1)
        params.append(dim.dim_param if kind == "dim_param" else "")
    return dtype, tuple(dims), tuple(params) if any(params) else ()


class _Builder:
    def __init__(self, where: str, views: Mapping[Path, tuple[Any, int, int]], external: ExternalData | None,
                 opset_imports: dict[str, int]) -> None:
        self.where = where
        self.views = views
        self.external = external
        self.opset_imports = opset_imports

    # ------------------------------------------------------------------------------------ values
    def tensor(self, proto, path: Path) -> np.ndarray:
        return tensor_to_numpy(proto, self.where, self.views.get(path + _RAW), self.external)

    def attribute(self, attr, path: Path, outer: frozenset[str], where: str) -> tuple[Any, list[tuple[str, SourceGraph]], list[str]]:
        """Decoded value, subgraphs (name, graph) and the outer tensors the subgraphs read."""
        if attr.ref_attr_name:
            return AttrPlaceholder(attr.ref_attr_name), [], []
        kind = attr.type
        if kind == _A.UNDEFINED:
            kind = self._guess_kind(attr)
        if kind == _A.FLOAT:
            return float(attr.f), [], []
        if kind == _A.INT:
            return int(attr.i), [], []
        if kind == _A.STRING:
            return text(attr.s), [], []
        if kind == _A.TENSOR:
            return self.tensor(attr.t, path + ((5, 0),)), [], []
        if kind == _A.SPARSE_TENSOR:
            return sparse_to_numpy(attr.sparse_tensor, self.where, self.external), [], []
        if kind == _A.GRAPH:
            graph, captures = self.graph(attr.g, path + ((6, 0),), outer, f"{where} attribute {attr.name!r}")
            return graph, [(attr.name, graph)], captures
        if kind == _A.FLOATS:
            return tuple(float(v) for v in attr.floats), [], []
        if kind == _A.INTS:
            return tuple(int(v) for v in attr.ints), [], []
        if kind == _A.STRINGS:
            return tuple(text(v) for v in attr.strings), [], []
        if kind == _A.TENSORS:
            return tuple(self.tensor(t, path + ((10, m),)) for m, t in enumerate(attr.tensors)), [], []
        if kind == _A.SPARSE_TENSORS:
            return tuple(sparse_to_numpy(t, self.where, self.external) for t in attr.sparse_tensors), [], []
        if kind == _A.GRAPHS:
            graphs, subs, captures = [], [], []
            for m, g in enumerate(attr.graphs):
                graph, caps = self.graph(g, path + ((11, m),), outer, f"{where} attribute {attr.name!r}[{m}]")
                graphs.append(graph)
                subs.append((f"{attr.name}:{m}", graph))
                captures.extend(caps)
            return tuple(graphs), subs, captures
        if kind == _A.TYPE_PROTO:
            return _value_type(attr.tp)[:2], [], []
        if kind == _A.TYPE_PROTOS:
            return tuple(_value_type(t)[:2] for t in attr.type_protos), [], []
        raise ParseError(f"{self.where}: {where} attribute {attr.name!r} has unknown type {attr.type}; the model is corrupt")

    @staticmethod
    def _guess_kind(attr) -> int:
        # Very old models leave AttributeProto.type unset; the set field tells the kind.
        for field, kind in (("g", _A.GRAPH), ("t", _A.TENSOR), ("s", _A.STRING), ("f", _A.FLOAT), ("i", _A.INT)):
            if attr.HasField(field):
                return kind
        for field, kind in (("graphs", _A.GRAPHS), ("tensors", _A.TENSORS), ("strings", _A.STRINGS),
                            ("floats", _A.FLOATS), ("ints", _A.INTS)):
            if len(getattr(attr, field)):
                return kind
        return _A.INTS

    # ------------------------------------------------------------------------------------ graphs
    def graph(self, proto, prefix: Path, outer: frozenset[str], label: str = "main graph",
              function=None) -> tuple[SourceGraph, list[str]]:
        """Converts a GraphProto (or, with ``function``, a FunctionProto); returns it and its outer reads."""
        where = f"{self.where}: {label}"
        is_function = function is not None
        node_field = 7 if is_function else 1
        inputs: list[tuple[str, Any, Any, tuple[str, ...]]] = []
        initializers: list[tuple[str, np.ndarray, int]] = []
        if is_function:
            inputs = [(name, None, None, ()) for name in proto.input]
        else:
            init_names = {t.name for t in proto.initializer} | {s.values.name for s in proto.sparse_initializer}
            for i, t in enumerate(proto.initializer):
                initializers.append((t.name, self.tensor(t, prefix + ((5, i),)), t.data_type))
            for s in proto.sparse_initializer:
                initializers.append((s.values.name, sparse_to_numpy(s, self.where, self.external), s.values.data_type))
            inputs = [(v.name, *_value_type(v.type)) for v in proto.input if v.name not in init_names]
        synthetic: dict[str, SourceNode] = {}
        for name, array, code in initializers:
            if not name:
                raise ParseError(f"{where}: an initializer has no name; every initializer needs one")
            if name in synthetic:
                raise ParseError(f"{where}: two initializers are named {name!r}; tensor names must be unique")
            dtype = from_onnx(code)
            synthetic[name] = SourceNode(name, INITIALIZER_OP, attrs={"dtype": dtype}, value=array, synthetic=True,
                                         output_names=[name])
        graph_inputs = []
        for index, (name, dtype, shape, params) in enumerate(inputs):
            if not name:
                raise ParseError(f"{where}: graph input {index} has no name; every input needs one")
            if name in synthetic:
                raise ParseError(f"{where}: two graph inputs are named {name!r}; tensor names must be unique")
            attrs: dict[str, Any] = {"dtype": dtype, "shape": shape}
            if params:
                attrs["dim_params"] = params
            synthetic[name] = SourceNode(name, INPUT_OP, attrs=attrs, synthetic=True, output_names=[name])
            graph_inputs.append(GraphInput(name, name, dtype, shape, index))

        node_protos = list(proto.node)
        # Each node's inputs and outputs as Python lists, read from the message once.
        node_inputs = [list(node.input) for node in node_protos]
        node_outputs = [list(node.output) for node in node_protos]
        defined = set(synthetic)
        for outs in node_outputs:
            defined.update(filter(None, outs))
        visible = outer | defined

        # Decode every node (subgraphs first, so their outer reads are known before naming).
        decoded: list[tuple[Any, dict[str, Any], dict[str, SourceGraph], list[str]]] = []
        for j, node in enumerate(node_protos):
            attribute_protos = node.attribute
            if not attribute_protos:  # most nodes: nothing to decode
                decoded.append((node, {}, {}, []))
                continue
            node_where = f"node {node.name or j!r} ({node.op_type})"
            attrs = {}
            subgraphs: dict[str, SourceGraph] = {}
            implicit: list[str] = []
            path = prefix + ((node_field, j),)
            for k, attr in enumerate(attribute_protos):
                if not attr.name:
                    raise ParseError(f"{where}: {node_where} has an attribute without a name")
                value, subs, caps = self.attribute(attr, path + ((5, k),), visible, f"{label} {node_where}")
                attrs[attr.name] = value
                subgraphs.update(subs)
                implicit.extend(caps)
            decoded.append((node, dict(sorted(attrs.items())), subgraphs, list(dict.fromkeys(implicit))))

        # Tensors read here but defined in an enclosing graph.
        referenced: list[str] = []
        for (_, _, _, implicit), ins in zip(decoded, node_inputs):
            referenced.extend(filter(None, ins))
            if implicit:
                referenced.extend(implicit)
        out_names = list(proto.output) if is_function else [o.name for o in proto.output]
        referenced.extend(out_names)
        captures = []
        for name in dict.fromkeys(referenced):
            if name in defined:
                continue
            if name not in outer:
                user = next((n for n, *_ in decoded if name in n.input), None)
                who = f"node {user.name!r} ({user.op_type})" if user is not None else "a graph output"
                raise ParseError(
                    f"{where}: {who} reads tensor {name!r}, which no node, graph input or initializer produces; "
                    "the graph is incomplete"
                )
            captures.append(name)
            synthetic[name] = SourceNode(name, OUTER_SCOPE_OP, synthetic=True, output_names=[name])

        names = _node_names([n for n, *_ in decoded], set(synthetic))
        producers: dict[str, tuple[str, int]] = {name: (name, 0) for name in synthetic}
        for outs, name in zip(node_outputs, names):
            for i, out in enumerate(outs):
                if not out:
                    continue
                if out in producers and producers[out][0] != name:
                    raise ParseError(
                        f"{where}: tensor {out!r} is produced twice (by {producers[out][0]!r} and {name!r}); "
                        "ONNX tensors are assigned once"
                    )
                producers[out] = (name, i)

        nodes: list[SourceNode] = list(synthetic.values())
        for (node, attrs, subgraphs, implicit), name, raw, outs in zip(decoded, names, node_inputs, node_outputs):
            while raw and not raw[-1]:
                raw.pop()
            inputs_ = [producers[t] if t else ABSENT_INPUT for t in raw]
            controls = list(dict.fromkeys(producers[t][0] for t in implicit)) if implicit else []
            domain = node.domain
            if domain == "ai.onnx":
                domain = ""
            op_type = node.op_type
            source = SourceNode(name, op_type, inputs=inputs_, control_inputs=controls, attrs=attrs,
                                domain=domain, subgraphs=subgraphs, output_names=outs)
            if op_type == "Constant" and not domain:
                source.value = _constant_value(attrs)
            nodes.append(source)

        graph_outputs = []
        for name in out_names:
            if not name:
                raise ParseError(f"{where}: a graph output has no name; every output needs one")
            producer, index = producers[name]
            graph_outputs.append(GraphOutput(name, producer, index))

        metadata: dict[str, Any] = {}
        if is_function:
            metadata["domain"] = proto.domain
            metadata["attributes"] = tuple(proto.attribute) + tuple(a.name for a in proto.attribute_proto)
            defaults = {}
            for a in proto.attribute_proto:
                defaults[a.name] = self.attribute(a, (), frozenset(), f"{label} attribute default")[0]
            metadata["attribute_defaults"] = defaults
            opsets = {("" if o.domain == "ai.onnx" else o.domain): int(o.version) for o in proto.opset_import}
        else:
            value_info = {}
            for v in proto.value_info:
                dtype, shape, _ = _value_type(v.type)
                value_info[v.name] = (dtype, shape)
            metadata["value_info"] = value_info
            opsets = self.opset_imports
        graph = SourceGraph(
            nodes, inputs=graph_inputs, outputs=graph_outputs, framework=FRAMEWORK_ONNX, path=self.where,
            name=proto.name, opset_imports=opsets, metadata=metadata,
        )
        return graph, captures


def _constant_value(attrs: dict[str, Any]) -> np.ndarray | None:
    for key, dtype in (("value", None), ("value_float", np.float32), ("value_floats", np.float32),
                       ("value_int", np.int64), ("value_ints", np.int64), ("value_string", object),
                       ("value_strings", object), ("sparse_value", None)):
        if key in attrs:
            value = attrs[key]
            if isinstance(value, np.ndarray):
                return value
            if dtype is None or isinstance(value, AttrPlaceholder):
                return None
            array = np.array(value, dtype=dtype)
            array.flags.writeable = False
            return array
    return None


def _node_names(nodes: list, taken: set[str]) -> list[str]:
    """Unique, deterministic node names: originals where free, else ``{op_type}_{position}`` / ``name_k``."""
    reserved = {n.name for n in nodes if n.name} - taken
    taken = set(taken)
    names = []
    for j, node in enumerate(nodes):
        name = node.name
        if name and name not in taken:
            taken.add(name)
            names.append(name)
            continue
        base = name or f"{node.op_type or 'node'}_{j}"
        candidate = base
        k = 0
        while candidate in taken or (candidate != name and candidate in reserved):
            k += 1
            candidate = f"{base}_{k}"
        taken.add(candidate)
        names.append(candidate)
    return names


def _non_utf8_field(message, path: str = "model") -> str | None:
    """The path of the first string field that is not valid UTF-8 (ONNX is proto2: it is not checked on parse)."""
    found = _non_utf8_steps(message)
    return None if found is None else path + "".join(reversed(found))


# What a field holds, decided once per field descriptor: a string, strings, a message, messages, other.
_STRING_ONE, _STRINGS, _MESSAGE_ONE, _MESSAGES, _OTHER = range(5)
_FIELD_KINDS: dict[Any, int] = {}


def _field_kind(field) -> int:
    from google.protobuf.descriptor import FieldDescriptor

    if field.type == FieldDescriptor.TYPE_STRING:
        return _STRINGS if field.is_repeated else _STRING_ONE
    if field.type == FieldDescriptor.TYPE_MESSAGE:
        if not field.is_repeated:
            return _MESSAGE_ONE
        return _OTHER if field.message_type.GetOptions().map_entry else _MESSAGES
    return _OTHER


def _non_utf8_steps(message) -> list[str] | None:
    """The path steps (innermost first) to the first string field that is not UTF-8, else None; the
    path text is made only for the field found."""
    kinds = _FIELD_KINDS
    for field, value in message.ListFields():
        kind = kinds.get(field)
        if kind is None:
            kind = kinds[field] = _field_kind(field)
        if kind == _STRING_ONE:
            if value.__class__ is not str:
                return [f".{field.name}"]
        elif kind == _STRINGS:
            try:
                "".join(value)  # fails on a bytes item: all str is checked at C speed
            except TypeError:
                return [f".{field.name}"]
        elif kind == _MESSAGE_ONE:
            found = _non_utf8_steps(value)
            if found is not None:
                found.append(f".{field.name}")
                return found
        elif kind == _MESSAGES:
            for i, item in enumerate(value):
                found = _non_utf8_steps(item)
                if found is not None:
                    found.append(f".{field.name}[{i}]")
                    return found
    return None


def _views(cuts: list[Cut], buffer) -> dict[Path, tuple[Any, int, int]]:
    return {cut.path: (buffer, cut.offset, cut.length) for cut in cuts}


# The same schema without the UTF-8 check of string fields, to name a bad field; made on first use.
_UNCHECKED_MODEL: list[Any] = []
_OUR_PACKAGE = "scopefusion.onnx"  # the package of proto/onnx_model.proto
_UNCHECKED_PACKAGE = "scopefusion_unchecked." + _OUR_PACKAGE


def _strings_are_utf8(serialized: bytes) -> bool:
    """Whether every string field of the serialized ModelProto is valid UTF-8 (False also when the bytes
    do not parse for another reason: :func:`_non_utf8_field` then looks field by field)."""
    from google.protobuf import message

    from .proto import onnx_model_pb2 as _pb

    try:
        _pb.ModelProto.FromString(serialized)
    except message.DecodeError:
        return False
    return True


def _unchecked_model_class() -> Any:
    """The ModelProto class of :mod:`.proto.onnx_model_pb2`'s schema with UTF-8 checks off (as the onnx
    package's proto2 schema parses), in a pool of its own."""
    if _UNCHECKED_MODEL:
        return _UNCHECKED_MODEL[0]
    from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

    from .proto import onnx_model_pb2 as _pb

    schema = descriptor_pb2.FileDescriptorProto()
    _pb.DESCRIPTOR.CopyToProto(schema)
    schema.name = "scopefusion_unchecked/" + schema.name
    schema.package = _UNCHECKED_PACKAGE
    schema.options.features.utf8_validation = descriptor_pb2.FeatureSet.NONE
    pending = list(schema.message_type)
    while pending:
        declared = pending.pop()
        pending.extend(declared.nested_type)
        for field in declared.field:
            if field.type_name.startswith(f".{_OUR_PACKAGE}."):
                field.type_name = ".scopefusion_unchecked" + field.type_name
    pool = descriptor_pool.DescriptorPool()
    pool.Add(schema)
    found = message_factory.GetMessageClass(pool.FindMessageTypeByName(f"{_UNCHECKED_PACKAGE}.ModelProto"))
    _UNCHECKED_MODEL.append(found)
    return found


def _decode_error_text(exc: Exception) -> str:
    """The decode error's text, naming the messages by their ONNX names (``onnx.ModelProto``)."""
    text = str(exc) or "protobuf decode error"
    return text.replace(f"'{_UNCHECKED_PACKAGE}.", "'onnx.").replace(f"'{_OUR_PACKAGE}.", "'onnx.")


def graph_from_model(model: Any, where: str, views: Mapping[Path, tuple[Any, int, int]] | None = None,
                     base_dir: str | None = None, *, strings_checked: bool = False) -> SourceGraph:
    """Converts a parsed ModelProto (of :mod:`.proto.onnx_model_pb2` or of the onnx package); ``views`` are
    cut raw data by wire path (see :mod:`.wire`); ``strings_checked``: the model's string fields are known
    to be UTF-8 (:func:`_strings_are_utf8`).

    Raises:
        ModelLoadError: no graph, or external data that cannot be read safely.
        ParseError: an invalid graph (missing producers, duplicate tensors, cycles, bad tensors).
    """
    if not model.HasField("graph") or model.ir_version <= 0:
        raise ModelLoadError(
            f"{where}: not an ONNX model (ir_version {model.ir_version}, "
            f"{'a' if model.HasField('graph') else 'no'} graph); the file is corrupt or another format"
        )
    bad = None if strings_checked else _non_utf8_field(model)
    if bad is not None:
        raise ParseError(f"{where}: the string field {bad} holds bytes that are not UTF-8; the file is corrupt")
    opsets = {("" if o.domain == "ai.onnx" else o.domain): int(o.version) for o in model.opset_import}
    _check_default_opset(opsets.get(""), where)
    external = ExternalData(base_dir if base_dir is not None else os.path.dirname(os.path.abspath(where)), where)
    builder = _Builder(where, views or {}, external, opsets)
    graph, _ = builder.graph(model.graph, ((7, 0),), frozenset())
    functions: dict[str, SourceGraph] = {}
    for f, function in enumerate(model.functions):
        key = f"{function.domain}::{function.name}" + (f"::{function.overload}" if function.overload else "")
        if key in functions:
            raise ParseError(f"{where}: the model defines function {key!r} twice; function names must be unique")
        functions[key], _ = builder.graph(function, ((25, f),), frozenset(), f"function {key!r}", function=True)
    graph.functions = functions
    graph.metadata.update({
        "ir_version": int(model.ir_version),
        "producer_name": model.producer_name,
        "producer_version": model.producer_version,
        "model_version": int(model.model_version),
        "metadata_props": {p.key: p.value for p in model.metadata_props},
    })
    return graph


def onnx_graph_from_buffer(buffer, where: str, base_dir: str | None = None, threshold: int = 1024,
                           reader=None) -> SourceGraph:
    """Parses ONNX model bytes (``bytes`` or ``mmap``) with large raw data kept in ``buffer``.

    ``reader`` (default: ``buffer``) is what the wire walker reads (see :func:`.parse_graph_def_buffer`).
    """
    reader = buffer if reader is None else reader
    try:
        small, cuts = strip(reader, 0, len(reader), MODEL_SPEC, threshold)
    except WireError as exc:
        raise ModelLoadError(f"{where}: not a valid ONNX model ({exc}); the file is truncated or another format") from None
    model = decode_model(small)
    if model is None:  # something the Python decoder leaves to protobuf, malformed bytes included
        model, strings_checked = _parse_with_protobuf(small, where)
    else:
        strings_checked = True  # the decoder refuses strings that are not UTF-8
    return graph_from_model(model, where, _views(cuts, buffer), base_dir, strings_checked=strings_checked)


def _parse_with_protobuf(small: bytes, where: str) -> tuple[Any, bool]:
    """The ModelProto in ``small`` parsed by protobuf, and whether its strings were checked as UTF-8.

    Raises:
        ModelLoadError: the bytes are not a ModelProto.
    """
    from google.protobuf import message

    from .proto import onnx_model_pb2 as _pb

    model = _pb.ModelProto()
    strings_checked = True
    try:
        model.ParseFromString(small)
    except message.DecodeError:
        # Corrupt, or a string field is not UTF-8: parsed again unchecked, the field walk names the field.
        model = _unchecked_model_class()()
        strings_checked = False
        try:
            model.ParseFromString(small)
        except message.DecodeError as exc:
            raise ModelLoadError(f"{where}: not a valid ONNX model ({_decode_error_text(exc)}); the file is truncated or another format") from None
    return model, strings_checked


def _check_default_opset(opset: int | None, where: str) -> None:
    """The default domain's opset must be one the installed onnx knows (1..latest)."""
    if opset is None:
        return
    latest = LATEST_DEFAULT_OPSET
    if opset < 1:
        raise ModelLoadError(f"{where}: the model imports ONNX opset {opset}; opsets start at 1, so the file is corrupt")
    if opset > latest:
        raise ModelLoadError(
            f"{where}: the model imports ONNX opset {opset}, newer than the installed onnx knows (1..{latest}); "
            "upgrade onnx or export the model at a lower opset"
        )
