"""``scopefusion inspect`` on a converted model: the IR one op per line.

A converted model is a binary GE model (``.ge``), its text form (``.ge.txt``, ``.ge-text``, or any file
whose text is a GE ``ModelDef``), or an ONNX file scopefusion wrote (its ``producer_name``). Each op is
one line::

    %bert/encoder/layer_0/attention/output/LayerNorm = fused.LayerNorm(%.../add, %.../gamma, %.../beta)
        : f32[?,8,32]  p0 f32[2,8,32]  fused by LayerNormFusion {axis=-1, epsilon=1e-12}

(one line in the output): the name, the op type with its dialect (``tf``, ``onnx``, ``fused``, ``ge``;
an ONNX file's domain, ``onnx`` for the default one), the inputs by producer name (``:1`` for a second
output), the output types of the main graph and, where a shape profile gives other shapes, of each
profile (``p0``, ``p1``...), then for a fused op its rule and attributes. Weights are summarised as
their dtype and shape (``%w = weight f32[32,32]``), small constants show their values. Control-flow
bodies follow their op, indented, down to ``depth`` levels. A filter keeps the ops whose op type or name
contains it (case ignored; ``*`` and ``?`` as in shell patterns).
"""

from __future__ import annotations

import fnmatch
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator

from .errors import SerdeError

__all__ = ["OpLine", "converted_kind", "format_lines", "read_converted"]

GE_TEXT_SUFFIXES = (".ge-text", ".getxt", ".ge.txt", ".golden.txt")
GE_BINARY_SUFFIXES = (".ge",)
INLINE_ELEMENTS = 8
# Attributes that record provenance or serialization details, not what the op computes.
_HIDDEN_ATTRS = frozenset({"_fusion_rule", "_original_nodes", "_outer_name", "_input_name", "_output_names",
                           "_dialect", "_subgraph_keys", "_back_edges"})  # fmt: skip
_PROFILE_NAME = re.compile(r"_profile(\d+)$")
_FUSED_BY = re.compile(r"fused by (\S+)")


@dataclass
class OpLine:
    """One op of a converted model, as :func:`format_lines` prints it."""

    name: str
    op: str
    inputs: list[str] = field(default_factory=list)
    types: list[str] = field(default_factory=list)
    profile_types: list[tuple[int, list[str]]] = field(default_factory=list)
    rule: str = ""
    attrs: list[tuple[str, str]] = field(default_factory=list)
    weight: str = ""  # "f32[32,32]" for a weight: its data is not shown
    value: str = ""  # a small constant's value
    depth: int = 0
    body: str = ""  # the body key, for the first line of a body


@dataclass
class ConvertedModel:
    """What a converted model file holds, as lines, with its profiles' input shapes."""

    path: str
    kind: str
    lines: list[OpLine]
    profiles: list[tuple[int, str]] = field(default_factory=list)


# ============================================================================= detection
def converted_kind(path: str | os.PathLike) -> str | None:
    """``"ge"``, ``"ge-text"`` or ``"onnx"`` when ``path`` is a model scopefusion wrote, else None."""
    path = Path(path)
    name = path.name.lower()
    if not path.is_file():
        return None
    if name.endswith(GE_TEXT_SUFFIXES):
        return "ge-text"
    if name.endswith(GE_BINARY_SUFFIXES):
        return "ge"
    try:
        with open(path, "rb") as f:
            head = f.read(4096)
    except OSError:
        return None
    if name.endswith(".onnx"):
        return "onnx" if _written_by_scopefusion(path) else None
    if _looks_like_ge_text(head):
        return "ge-text"
    return None


def _looks_like_ge_text(head: bytes) -> bool:
    try:
        text = head.decode("utf-8")
    except UnicodeDecodeError:
        return False
    lines = [line.strip() for line in text.splitlines() if line.strip() and not line.lstrip().startswith("#")]
    return bool(lines) and (lines[0].startswith("graph {") or (lines[0].startswith("name:") and "graph {" in text))


def _written_by_scopefusion(path: Path) -> bool:
    import onnx

    try:
        model = onnx.load(str(path), load_external_data=False)
    except Exception:  # noqa: BLE001 — not an ONNX file we can read: not ours
        return False
    return model.producer_name == "scopefusion"


# ============================================================================= reading
def read_converted(path: str | os.PathLike, kind: str) -> ConvertedModel:
    """The lines of the converted model at ``path`` (``kind`` from :func:`converted_kind`).

    Raises:
        SerdeError: the file cannot be read as that kind of model.
    """
    path = Path(path)
    try:
        data = path.read_bytes()
    except OSError as e:
        raise SerdeError(f"cannot read {path} ({e.strerror or e}); check the path") from None
    if kind == "onnx":
        return _read_onnx(path, data)
    from .serde.ge import model_from_bytes, model_from_text

    try:
        if kind == "ge":
            contents = model_from_bytes(data)
        else:
            contents = model_from_text(data.decode("utf-8"))
    except UnicodeDecodeError:
        raise SerdeError(f"{path} is not a GE text model (it is not UTF-8 text)") from None
    except SerdeError as e:
        raise SerdeError(f"{path}: {e}") from None
    return _from_ge(str(path), kind, contents.graphs)


def _profile_index(graph: Any) -> int | None:
    index = graph.attrs.get("_profile_index")
    if index is not None:
        return int(index)
    found = _PROFILE_NAME.search(graph.name)
    if found:
        return int(found.group(1))
    return 0 if graph.attrs.get("_profile_inputs") is not None else None


def _from_ge(path: str, kind: str, graphs: tuple) -> ConvertedModel:
    main = graphs[0]
    profiles: list[tuple[int, Any]] = []
    for graph in graphs:
        index = _profile_index(graph)
        if index is not None and graph.attrs.get("_profile_inputs") is not None:
            profiles.append((index, graph))
    profiles.sort(key=lambda p: p[0])
    shapes = [(i, "; ".join(g.attrs.get("_profile_inputs") or ())) for i, g in profiles]
    by_name = [(i, {n.name: n for n in g.nodes}) for i, g in profiles if g is not main]
    lines: list[OpLine] = []
    _ge_lines(main, by_name, 0, "", lines)
    return ConvertedModel(path, kind, lines, shapes)


def _ge_lines(graph: Any, profiles: list[tuple[int, dict]], depth: int, body: str, out: list[OpLine]) -> None:
    from .ir.printer import format_value

    first = True
    for node in graph.nodes:
        line = OpLine(node.name, node.op, depth=depth, body=body if first else "")
        first = False
        line.inputs = [_ref(v.producer.name, v.index) for v in node.inputs if v is not None]
        line.inputs += [f"^{c.name}" for c in node.control_inputs]
        line.types = [_type(v.type) for v in node.outputs]
        for index, nodes in profiles:
            twin = nodes.get(node.name)
            if twin is not None:
                types = [_type(v.type) for v in twin.outputs]
                if types != line.types:
                    line.profile_types.append((index, types))
        if node.op == "ge.Const":
            value = node.attrs.get("value")
            if value is not None and value.size > INLINE_ELEMENTS:
                line.weight = _tensor_summary(value)
            elif value is not None:
                line.value = format_value(node.attrs.get_attr("value"))
        rule = node.attrs.get("_fusion_rule")
        if rule or node.op.startswith("fused."):
            line.rule = str(rule or "")
            for key, attr in sorted(node.attrs.items()):
                if key not in _HIDDEN_ATTRS:
                    line.attrs.append((key, _attr_text(attr.value, format_value, attr)))
        out.append(line)
        for key in sorted(node.subgraphs):
            _ge_lines(node.subgraphs[key], [], depth + 1, f"{node.name}{{{key}}}", out)


def _tensor_summary(array: Any) -> str:
    from . import dtypes

    dt = dtypes.from_numpy(array.dtype)
    return f"{dt.short if dt else array.dtype}[{','.join(map(str, array.shape))}]"


def _attr_text(value: Any, format_value: Any, attr: Any) -> str:
    import numpy as np

    if isinstance(value, np.ndarray) and value.size > INLINE_ELEMENTS:
        return "weight " + _tensor_summary(value)
    return format_value(attr)


def _ref(name: str, index: int) -> str:
    return f"%{name}" if index == 0 else f"%{name}:{index}"


def _type(t: Any) -> str:
    return "?" if t is None else str(t)


# ============================================================================= ONNX
def _read_onnx(path: Path, data: bytes) -> ConvertedModel:
    import onnx

    try:
        model = onnx.load_from_string(data)
    except Exception as e:  # noqa: BLE001 — protobuf raises several kinds
        raise SerdeError(f"{path}: cannot read it as an ONNX model ({e})") from None
    try:
        model = onnx.shape_inference.infer_shapes(model, strict_mode=False)
    except Exception:  # noqa: BLE001, S110 — the types the file carries are still shown
        pass
    lines: list[OpLine] = []
    _onnx_lines(model.graph, 0, "", lines)
    return ConvertedModel(str(path), "onnx", lines)


def _onnx_type(type_proto: Any) -> str:

    if not type_proto.HasField("tensor_type"):
        return "?"
    tensor = type_proto.tensor_type
    short = _onnx_dtype(tensor.elem_type)
    if not tensor.HasField("shape"):
        return f"{short}[*]"
    dims = [str(d.dim_value) if d.HasField("dim_value") else (d.dim_param or "?") for d in tensor.shape.dim]
    return f"{short}[{','.join(dims)}]"


def _onnx_dtype(data_type: int) -> str:
    """The short name of an ONNX element type (``f32``), ``?`` for one the IR has no dtype for."""
    from onnx import helper

    from . import dtypes

    try:
        dt = dtypes.from_numpy(helper.tensor_dtype_to_np_dtype(data_type))
    except (KeyError, TypeError, ValueError):
        return "?"
    return dt.short if dt is not None else "?"


def _onnx_weight(data_type: int, dims: list[int]) -> str:
    return f"{_onnx_dtype(data_type)}[{','.join(map(str, dims))}]"


def _onnx_lines(graph: Any, depth: int, body: str, out: list[OpLine]) -> None:
    from onnx import helper, numpy_helper

    types = {v.name: _onnx_type(v.type) for v in list(graph.input) + list(graph.value_info) + list(graph.output)}
    producers: dict[str, tuple[str, int]] = {}
    first = True
    initializers = {t.name for t in graph.initializer}
    for value in graph.input:
        if value.name not in initializers:
            out.append(OpLine(value.name, "input", types=[types.get(value.name, "?")], depth=depth,
                              body=body if first else ""))  # fmt: skip
            first = False
    for tensor in graph.initializer:
        line = OpLine(tensor.name, "initializer", depth=depth, body=body if first else "")
        first = False
        elements = 1
        for dim in tensor.dims:
            elements *= dim
        if elements > INLINE_ELEMENTS:  # from the header alone: the data may be large, or stored outside
            line.weight = _onnx_weight(tensor.data_type, list(tensor.dims))
        else:
            line.value = str(numpy_helper.to_array(tensor).tolist())
        out.append(line)
    for node in graph.node:
        for i, name in enumerate(node.output):
            producers[name] = (node.name or name, i)
    first_node = len(out)
    for node in graph.node:
        domain = node.domain or "onnx"
        line = OpLine(node.name or (node.output[0] if node.output else ""), f"{domain}.{node.op_type}", depth=depth,
                      body=body if first else "")  # fmt: skip
        first = False
        for name in node.input:
            if not name:
                continue
            producer = producers.get(name)
            line.inputs.append(_ref(*producer) if producer else f"%{name}")
        line.types = [types.get(name, "?") for name in node.output]
        found = _FUSED_BY.search(node.doc_string or "")
        subgraphs = []
        for attr in node.attribute:
            if attr.type == attr.GRAPH:
                subgraphs.append((attr.name, attr.g))
        if found or domain == "scopefusion":
            line.rule = found.group(1) if found else ""
            for attr in sorted(node.attribute, key=lambda a: a.name):
                if attr.type in (attr.GRAPH, attr.GRAPHS):
                    continue
                value = helper.get_attribute_value(attr)
                if attr.type == attr.TENSOR:
                    array = numpy_helper.to_array(value)
                    text = "weight " + _tensor_summary(array) if array.size > INLINE_ELEMENTS else str(array.tolist())
                else:
                    text = value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value)
                line.attrs.append((attr.name, text))
        out.append(line)
        for key, sub in subgraphs:
            _onnx_lines(sub, depth + 1, f"{line.name}{{{key}}}", out)
    _mark_fused_groups([line for line in out[first_node:] if line.depth == depth])


def _mark_fused_groups(lines: list[OpLine]) -> None:
    """A fused op exported as several ONNX nodes names them ``<fused op>/<piece>`` and records its rule on
    one of them: the others are marked as parts of it."""
    for fused in [line for line in lines if line.rule and "/" in line.name]:
        prefix = fused.name.rsplit("/", 1)[0] + "/"
        for line in lines:
            if not line.rule and line.name.startswith(prefix) and "/" not in line.name[len(prefix):]:
                line.rule = f"{fused.rule} (part of {prefix[:-1]})"


# ============================================================================= formatting
def _matches(line: OpLine, pattern: str) -> bool:
    pattern = pattern.lower()
    fields = (line.op.lower(), line.name.lower())
    if any(c in pattern for c in "*?["):
        return any(fnmatch.fnmatchcase(f, pattern) for f in fields) or fnmatch.fnmatchcase(line.op.lower().split(".")[-1], pattern)
    return any(pattern in f for f in fields)


def format_line(line: OpLine) -> str:
    """One op as one line of text (see the module docstring)."""
    indent = "    " * line.depth
    if line.weight:
        return f"{indent}%{line.name} = weight {line.weight}"
    if line.value:
        return f"{indent}%{line.name} = {line.op} {line.value}"
    text = f"{indent}%{line.name} = {line.op}({', '.join(line.inputs)})"
    if line.types:
        text += " : " + ", ".join(line.types)
    for index, types in line.profile_types:
        text += f"  p{index} " + ", ".join(types)
    if line.rule or line.attrs:
        text += f"  fused by {line.rule}" if line.rule else "  fused"
        if line.attrs:
            text += " {" + ", ".join(f"{k}={v}" for k, v in line.attrs) + "}"
    return text


def format_lines(model: ConvertedModel, *, depth: int = 3, pattern: str | None = None) -> Iterator[str]:
    """The listing: a header, one line per op (bodies to ``depth`` levels, only ops matching ``pattern``
    when given), and a closing count."""
    shown = [line for line in model.lines if line.depth <= depth and (pattern is None or _matches(line, pattern))]
    top = [line for line in model.lines if line.depth == 0]
    fused = sum(1 for line in top if (line.rule and "(part of" not in line.rule) or line.op.startswith("fused."))
    weights = sum(1 for line in model.lines if line.weight)
    yield f"{model.path}: {model.kind} model, {len(top)} nodes in the main graph ({fused} fused, {weights} weights)"
    for index, shapes in model.profiles:
        yield f"profile p{index}: {shapes}"
    for line in shown:
        if line.body and (pattern is None):
            yield "    " * (line.depth - 1) + f"  body {line.body}:"
        yield format_line(line)
    hidden = len([line for line in model.lines if line.depth > depth])
    more = f"; {hidden} ops in bodies deeper than --depth {depth}" if hidden else ""
    yield f"{len(shown)} of {len(model.lines)} ops shown{more}"
