"""A converted :class:`~scopefusion.model.Model` to the GE ``ModelDef``.

``ModelDef.graph[0]`` is the main graph (the model's own shapes); each shape profile follows as a
top-level graph named ``<main>_profile<i>``, with its input shapes in the graph attribute
``_profile_inputs`` and its memory plan written into the tensor descriptors: every planned output's
``data_offset`` (bytes into the profile's arena) and ``size``, ``reuse_input`` / ``reuse_input_index`` for
a forwarded buffer; the arena size is the graph attribute ``_arena_bytes``. Values left for run time
(dynamic) keep ``data_offset`` -1.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

from google.protobuf import text_format

from ..ir.attrs import LIST_STR
from ..ir.graph import Node, Value
from ..parser.wire import encode_varint
from . import ge
from . import ge_ir_pb2 as pb
from .weight_stream import ModelBytes, stream_bytes

if TYPE_CHECKING:  # pragma: no cover
    from ..model import Model

__all__ = ["model_to_bytes", "model_to_model_bytes", "model_to_proto", "model_to_text"]

# TensorDescriptor fields of a memory plan, as keys in the wire form: size (10), reuse_input (12),
# reuse_input_index (17), data_offset (18); all varints.
_SIZE, _REUSE_INPUT, _REUSE_INPUT_INDEX, _DATA_OFFSET = b"\x50", b"\x60", b"\x88\x01", b"\x90\x01"
_INT64 = (1 << 64) - 1  # a negative int64 is written as its two's complement, ten bytes
_NO_OFFSET = _DATA_OFFSET + encode_varint(-1 & _INT64)  # data_offset -1: left for run time


def _varint(n: int) -> bytes:
    """The varint of an int64 (the short ones, as offsets and sizes mostly are, without a loop)."""
    if 0 <= n < 1 << 21:
        if n < 128:
            return bytes((n,))
        if n < 1 << 14:
            return bytes((n & 0x7F | 0x80, n >> 7))
        return bytes((n & 0x7F | 0x80, n >> 7 & 0x7F | 0x80, n >> 14))
    return encode_varint(n & _INT64)


def _plan_fields(plan: Any) -> ge.OutputFields:
    """What a profile's memory plan adds to each output descriptor (the plan's tables read directly:
    MemoryPlan.offset / size / forwarded_from, one ref per value), as the fields' wire bytes."""
    offsets, sizes, forwards, external = plan.offsets, plan.sizes, plan.forwards, plan.external_forwards

    def fields(node: Node, value: Value) -> bytes:
        ref = value.ref
        out = b""
        size = sizes.get(ref)
        if size is not None and int(size):
            out = _SIZE + _varint(int(size))
        source = forwards.get(ref) or external.get(ref)
        if source is not None:
            out += _REUSE_INPUT + b"\x01"
            for slot, inp in enumerate(node.inputs):
                if inp is not None and inp.ref == source:
                    if slot:
                        out += _REUSE_INPUT_INDEX + _varint(slot)
                    break
        offset = offsets.get(ref)
        if offset is None:
            return out + _NO_OFFSET
        offset = int(offset)
        return out + _DATA_OFFSET + _varint(offset) if offset else out

    return fields


def _model_wire_bytes(model: "Model") -> bytes:
    profiles = list(model.profiles)
    outputs: list[ge.OutputFields | None] = [None]
    for profile in profiles:
        plan = profile.memory_plan
        profile.graph.attrs.set_attr("_profile_inputs", [f"{k}:{'*' if v is None else ','.join(map(str, v))}" for k, v in profile.inputs.items()], LIST_STR)
        if plan is not None:
            profile.graph.attrs.set_attr("_arena_bytes", int(plan.arena_bytes))
        outputs.append(_plan_fields(plan) if plan is not None else None)
    return ge.model_wire_bytes(
        [model.graph] + [p.graph for p in profiles],
        name=model.graph.name,
        attrs={"_source": os.path.basename(os.path.normpath(model.source.path)) if model.source.path else "", "_framework": model.source.framework or ""},
        outputs=outputs,
    )


def model_to_proto(model: "Model") -> pb.ModelDef:
    return pb.ModelDef.FromString(_model_wire_bytes(model))


def model_to_bytes(model: "Model") -> bytes:
    return model_to_model_bytes(model).tobytes()


def model_to_model_bytes(model: "Model") -> ModelBytes:
    """The binary ``ModelDef`` as pieces that stream the large tensors from their arrays (:mod:`.weight_stream`)."""
    return ge.checked_size(stream_bytes(lambda: _model_wire_bytes(model), pb.ModelDef.DESCRIPTOR))


def model_to_text(model: "Model") -> str:
    """The text form: as the binary one, but a profile graph equal to the main graph is written once
    (:mod:`.ge_profiles_text`)."""
    from .ge_profiles_text import merge_profiles_equal_to_main

    proto = model_to_proto(model)
    merge_profiles_equal_to_main(proto, len(model.profiles))
    return text_format.MessageToString(proto)
