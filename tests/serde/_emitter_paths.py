"""The builtin lowerings with every shortcut turned off, for the tests that compare a shortcut's bytes with
the general path's."""

from __future__ import annotations

from scopefusion.serde.onnx_lowering import LoweringRegistry, default_lowerings
from scopefusion.serde.onnx_lowering.registry import PlainOp


def through_emitters() -> LoweringRegistry:
    """The builtin lowerings with each PlainOp as the plain function it runs (then the writer runs it on an emitter)."""
    builtin = default_lowerings()
    registry = LoweringRegistry()
    for op_type in builtin.types():
        fn = builtin.get(op_type)
        assert fn is not None
        registry.register(op_type, fn.lower if isinstance(fn, PlainOp) else fn)
    return registry
