"""What conversions share (the builtin passes and op definitions, the IR context's types) and what each one
that adds rules, switches passes or declares fused ops makes for itself."""

from __future__ import annotations

import threading

import pytest

import scopefusion.convert as convert_module
from scopefusion.convert import convert, fusion_setup
from scopefusion.dialects import default_op_registry, shared_op_registry
from scopefusion.ir.opdef import OpDef
from scopefusion.ir.types import IRContext
from scopefusion.serde.onnx_export import model_to_onnx_bytes

EXTRA_OP_RULES = """
from scopefusion import define_fused_op

FUSED_OPS = [define_fused_op("SharedSetupExtra").input("x").output("y", follow="x")]
"""


def _outputs(model) -> tuple[bytes, bytes, dict[str, int]]:
    return bytes(model.to_bytes("ge")), model_to_onnx_bytes(model), model.fusion_counts()


def _shared_pass_states() -> list[tuple[str, bool, str]]:
    """The passes of the pass registry default conversions share: names, on/off, sources."""
    (registry, _parsers, _passes), = convert_module._SHARED_SETUP.values()
    return [(e.name, e.enabled, e.source) for e in registry.passes()]


def test_default_conversions_share_the_builtin_setup(tf_convnet_pb):
    first, second = convert(tf_convnet_pb), convert(tf_convnet_pb)
    assert second.graph.registry is first.graph.registry
    assert second.graph.context is first.graph.context
    assert _outputs(second) == _outputs(first)


def test_a_conversion_with_its_own_rules_changes_nothing_a_later_default_one_sees(tf_convnet_pb, tmp_path):
    before = convert(tf_convnet_pb)
    expected = _outputs(before)
    fused = next(iter(expected[2]))  # a pass that fuses in this model
    shared_passes = _shared_pass_states()

    switched = convert(tf_convnet_pb, disable=[fused])
    assert fused not in switched.fusion_counts()
    rules = tmp_path / "extra_op_rules.py"
    rules.write_text(EXTRA_OP_RULES)
    declared = convert(tf_convnet_pb, rules=[rules])
    assert declared.graph.registry is not before.graph.registry
    assert "fused.SharedSetupExtra" in declared.graph.registry

    after = convert(tf_convnet_pb)
    assert after.graph.registry is before.graph.registry
    assert "fused.SharedSetupExtra" not in after.graph.registry
    assert _outputs(after) == expected
    assert _shared_pass_states() == shared_passes


def test_the_shared_registries_are_read_only_and_fresh_ones_stay_available(tf_convnet_pb):
    model = convert(tf_convnet_pb)
    with pytest.raises(ValueError, match="shared by every conversion"):
        model.graph.registry.register(OpDef("Mine", "fused"))
    assert model.graph.registry is shared_op_registry(model.source)

    mine = default_op_registry(model.source)
    assert mine is not model.graph.registry and mine is not default_op_registry(model.source)
    mine.register(OpDef("Mine", "fused"))
    assert "fused.Mine" in mine and "fused.Mine" not in model.graph.registry

    first, first_parsers = fusion_setup()
    second, second_parsers = fusion_setup()
    assert first is not second and first_parsers is not second_parsers
    general = next(e.name for e in first.passes() if e.general)
    first.disable(general)
    assert not first.get(general).enabled and second.get(general).enabled
    assert IRContext() is not IRContext()


def test_another_thread_converts_with_its_own_context_and_op_registry(tf_convnet_pb):
    here = convert(tf_convnet_pb)
    there: list = []
    worker = threading.Thread(target=lambda: there.append(convert(tf_convnet_pb)))
    worker.start()
    worker.join()
    assert there[0].graph.context is not here.graph.context
    assert there[0].graph.registry is not here.graph.registry
    assert _outputs(there[0]) == _outputs(here)


def test_a_full_shared_context_is_replaced(tf_convnet_pb, monkeypatch):
    import scopefusion.convert as convert_module

    first = convert(tf_convnet_pb)
    monkeypatch.setattr(convert_module, "_SHARED_CONTEXT_TYPES", first.graph.context.interned_count() - 1)
    second = convert(tf_convnet_pb)
    assert second.graph.context is not first.graph.context
    assert _outputs(second) == _outputs(first)


def test_a_pass_changed_after_the_shared_setup_was_made_is_registered_again(tf_convnet_pb, monkeypatch):
    before = convert(tf_convnet_pb)
    fused = next(iter(before.fusion_counts()))
    (registry, _parsers, _passes), = convert_module._SHARED_SETUP.values()
    rule = registry.get(fused).rule
    monkeypatch.setattr(rule, "general", False)  # the pass is now off unless enabled
    assert fused not in convert(tf_convnet_pb).fusion_counts()
    monkeypatch.undo()
    assert convert(tf_convnet_pb).fusion_counts() == before.fusion_counts()


def test_what_earlier_conversions_left_in_the_shared_context_changes_no_output(
        tf_bert_pb, tf_rnn_pb, tf_convnet_pb, tf_mobilenet_pb, monkeypatch):
    """A model's outputs do not depend on which models the process converted before it: types with unknown or
    symbolic dims, made by BERT and the LSTM, are found again in the shared context by the others."""
    paths = [tf_bert_pb, tf_rnn_pb, tf_convnet_pb, tf_mobilenet_pb]
    alone = {}
    for path in paths:
        monkeypatch.setattr(convert_module._shared_context, "context", None)
        alone[path] = _outputs(convert(path))
    monkeypatch.setattr(convert_module._shared_context, "context", None)
    for path in paths + paths[::-1]:
        assert _outputs(convert(path)) == alone[path], path.name
