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
from typing import TYPE_CHECKING

from google.protobuf import text_format

from ..ir.attrs import LIST_STR
from . import ge
from .weight_stream import ModelBytes, stream_message

if TYPE_CHECKING:  # pragma: no cover
    from ..model import Model

__all__ = ["model_to_bytes", "model_to_model_bytes", "model_to_proto", "model_to_text"]


def model_to_proto(model: "Model"):
    profiles = list(model.profiles)
    for profile in profiles:
        plan = profile.memory_plan
        profile.graph.attrs.set_attr("_profile_inputs", [f"{k}:{'*' if v is None else ','.join(map(str, v))}" for k, v in profile.inputs.items()], LIST_STR)
        if plan is not None:
            profile.graph.attrs.set_attr("_arena_bytes", int(plan.arena_bytes))
    proto = ge.model_to_proto(
        [model.graph] + [p.graph for p in profiles],
        name=model.graph.name,
        attrs={"_source": os.path.basename(os.path.normpath(model.source.path)) if model.source.path else "", "_framework": model.source.framework or ""},
    )
    for profile, graph_def in zip(profiles, list(proto.graph)[1 : 1 + len(profiles)]):
        plan = profile.memory_plan
        if plan is None:
            continue
        # The plan's tables are read directly (MemoryPlan.offset / size / forwarded_from), one ref per value.
        offsets, sizes, forwards, external = plan.offsets, plan.sizes, plan.forwards, plan.external_forwards
        for node, op_def in zip(profile.graph.nodes, graph_def.op):
            for value, desc in zip(node.outputs, op_def.output_desc):
                ref = value.ref
                offset = offsets.get(ref)
                desc.data_offset = -1 if offset is None else int(offset)
                size = sizes.get(ref)
                if size is not None:
                    desc.size = int(size)
                source = forwards.get(ref) or external.get(ref)
                if source is not None:
                    desc.reuse_input = True
                    for slot, inp in enumerate(node.inputs):
                        if inp is not None and inp.ref == source:
                            desc.reuse_input_index = slot
                            break
    return proto


def model_to_bytes(model: "Model") -> bytes:
    return model_to_model_bytes(model).tobytes()


def model_to_model_bytes(model: "Model") -> ModelBytes:
    """The binary ``ModelDef`` as pieces that stream the large tensors from their arrays (:mod:`.weight_stream`)."""
    return ge.checked_size(stream_message(lambda: model_to_proto(model)))


def model_to_text(model: "Model") -> str:
    """The text form: as the binary one, but a profile graph equal to the main graph is written once
    (:mod:`.ge_profiles_text`)."""
    from .ge_profiles_text import merge_profiles_equal_to_main

    proto = model_to_proto(model)
    merge_profiles_equal_to_main(proto, len(model.profiles))
    return text_format.MessageToString(proto)
