"""The text form of a converted model writes each graph once.

Without ``--input-shape`` (or with a profile that fixes no unknown dim) a shape profile's graph is the
main graph again: the same ops with the same types. The binary model keeps both (a runtime reads each
profile's graph with its memory plan); the text form, which people read, writes such a graph once: the
main graph takes the profile's memory plan (the ``data_offset`` / ``size`` / ``reuse_input`` fields of
its output descriptors) and graph attributes (``_profile_inputs``, ``_arena_bytes``), and the profile's
own graph and bodies are left out. A reader knows the main graph is also a profile by its
``_profile_inputs`` attribute, and which one by ``_profile_index``.
"""

from __future__ import annotations

from . import ge_ir_pb2 as pb
from .shared_weights import SHARED_WEIGHT_ATTR

__all__ = ["PROFILE_GRAPH_ATTRS", "PROFILE_INDEX_ATTR", "PROFILE_INPUTS_ATTR", "merge_profiles_equal_to_main"]

PROFILE_INPUTS_ATTR = "_profile_inputs"
PROFILE_INDEX_ATTR = "_profile_index"
_PLAN_ATTRS = (PROFILE_INPUTS_ATTR, "_arena_bytes")
# The graph attributes that make a graph a profile: a main graph read back from text may carry them.
PROFILE_GRAPH_ATTRS = (*_PLAN_ATTRS, PROFILE_INDEX_ATTR)
_PLAN_FIELDS = ("data_offset", "size", "reuse_input", "reuse_input_index")


def _bodies(graph_def: pb.GraphDef, by_name: dict[str, pb.GraphDef]) -> list[pb.GraphDef]:
    """The body graphs ``graph_def``'s ops name, depth first."""
    out: list[pb.GraphDef] = []
    for op in graph_def.op:
        for name in op.subgraph_name:
            body = by_name.get(name)
            if body is not None:
                out.append(body)
                out.extend(_bodies(body, by_name))
    return out


def _shape_only(graph_def: pb.GraphDef) -> pb.GraphDef:
    """A copy without what differs between equal graphs: names of graph and bodies, graph attributes,
    memory-plan fields."""
    copy = pb.GraphDef()
    copy.CopyFrom(graph_def)
    copy.name = ""
    copy.attr.clear()
    for op in copy.op:
        del op.subgraph_name[:]
        for desc in op.output_desc:
            for name in _PLAN_FIELDS:
                desc.ClearField(name)
    return copy


def _with_shared_weights(main: pb.GraphDef, profile: pb.GraphDef) -> pb.GraphDef:
    """``profile`` with the weights it shares with ``main`` (:mod:`.shared_weights`) filled back in."""
    if not any(SHARED_WEIGHT_ATTR in op.attr for op in profile.op):
        return profile
    filled = pb.GraphDef()
    filled.CopyFrom(profile)
    for main_op, op in zip(main.op, filled.op):
        if SHARED_WEIGHT_ATTR in op.attr and "value" in main_op.attr:
            del op.attr[SHARED_WEIGHT_ATTR]
            op.attr["value"].CopyFrom(main_op.attr["value"])
    return filled


def _same(a: pb.GraphDef, b: pb.GraphDef, by_name: dict[str, pb.GraphDef]) -> bool:
    if _shape_only(a) != _shape_only(_with_shared_weights(a, b)):
        return False
    bodies_a, bodies_b = _bodies(a, by_name), _bodies(b, by_name)
    if len(bodies_a) != len(bodies_b):
        return False
    return all(_shape_only(x) == _shape_only(y) for x, y in zip(bodies_a, bodies_b, strict=True))


def merge_profiles_equal_to_main(model: pb.ModelDef, profiles: int) -> int:
    """Merges, in place, the first of ``model.graph[1 : 1 + profiles]`` equal to the main graph into it
    (see the module docstring); returns the index of the profile merged, or -1."""
    graphs = list(model.graph)
    if len(graphs) < 1 + profiles:
        return -1
    by_name = {g.name: g for g in graphs}
    main = graphs[0]
    for index, profile in enumerate(graphs[1 : 1 + profiles]):
        if not _same(main, profile, by_name):
            continue
        for main_op, profile_op in zip(main.op, profile.op):
            for main_desc, profile_desc in zip(main_op.output_desc, profile_op.output_desc):
                for name in _PLAN_FIELDS:
                    setattr(main_desc, name, getattr(profile_desc, name))
        for key in _PLAN_ATTRS:
            if key in profile.attr:
                main.attr[key].CopyFrom(profile.attr[key])
        main.attr[PROFILE_INDEX_ATTR].i = index
        dropped = {profile.name} | {body.name for body in _bodies(profile, by_name)}
        for position in reversed(range(len(graphs))):
            if graphs[position].name in dropped:
                del model.graph[position]
        return index
    return -1
