"""Our TensorFlow protos: generated modules up to date, and wire-compatible with TensorFlow's own."""

from __future__ import annotations

import importlib.util
import shutil
from pathlib import Path

import pytest

from scopefusion.parser.proto import tf_checkpoint_pb2, tf_framework_pb2, tf_saved_model_pb2

REPO = Path(__file__).resolve().parents[2]


def _gen_proto():
    spec = importlib.util.spec_from_file_location("gen_proto", REPO / "tools" / "gen_proto.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _copy_schemas(root: Path) -> None:
    for proto in _gen_proto().find_protos(REPO):
        for rel in (proto, proto.with_name(proto.stem + "_pb2.py"), proto.with_name(proto.stem + "_pb2.pyi")):
            (root / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy(REPO / rel, root / rel)


def test_committed_modules_match_a_fresh_regeneration():
    gen = _gen_proto()
    assert {
        "scopefusion/parser/proto/tf_checkpoint.proto",
        "scopefusion/parser/proto/tf_framework.proto",
        "scopefusion/parser/proto/tf_saved_model.proto",
    } <= {str(p) for p in gen.find_protos(REPO)}
    assert gen.check(REPO) == []


def test_check_reports_a_schema_edited_without_regenerating(tmp_path):
    gen = _gen_proto()
    _copy_schemas(tmp_path)
    assert gen.check(tmp_path) == []
    schema = tmp_path / "scopefusion/parser/proto/tf_framework.proto"
    schema.write_text(schema.read_text().replace("message OpList {", "message OpList {\n  string extra = 2;"))
    assert gen.check(tmp_path) == [
        "scopefusion/parser/proto/tf_framework_pb2.py",
        "scopefusion/parser/proto/tf_framework_pb2.pyi",
    ]


def test_generator_picks_up_a_new_schema_anywhere_under_the_package(tmp_path):
    gen = _gen_proto()
    _copy_schemas(tmp_path)
    new = tmp_path / "scopefusion/serde/proto/model.proto"
    new.parent.mkdir(parents=True)
    new.write_text('syntax = "proto3";\npackage scopefusion.ge;\nmessage M { int32 x = 1; }\n')
    written = gen.generate(tmp_path)
    assert tmp_path / "scopefusion/serde/proto/model_pb2.py" in written
    assert "scopefusion/serde/proto/model.proto" in (tmp_path / "scopefusion/serde/proto/model_pb2.py").read_text()


# ------------------------------------------------------------------------------------------- wire compatibility
def _tf_messages():
    from tensorflow.core.framework import (
        attr_value_pb2,
        function_pb2,
        graph_pb2,
        node_def_pb2,
        op_def_pb2,
        resource_handle_pb2,
        tensor_pb2,
        tensor_shape_pb2,
        tensor_slice_pb2,
        types_pb2,
        versions_pb2,
    )
    from tensorflow.core.protobuf import (
        meta_graph_pb2,
        saved_model_pb2,
        saved_object_graph_pb2,
        saver_pb2,
        tensor_bundle_pb2,
        trackable_object_graph_pb2,
    )

    modules = [attr_value_pb2, function_pb2, graph_pb2, node_def_pb2, op_def_pb2, resource_handle_pb2, tensor_pb2,
               tensor_shape_pb2, types_pb2, versions_pb2, meta_graph_pb2, saved_model_pb2, saved_object_graph_pb2,
               tensor_slice_pb2, saver_pb2, tensor_bundle_pb2, trackable_object_graph_pb2]
    found = {}
    for module in modules:
        for name, desc in module.DESCRIPTOR.message_types_by_name.items():
            found[name] = desc
    return found, types_pb2.DataType.DESCRIPTOR


def _walk(desc, prefix=""):
    yield prefix + desc.name, desc
    for nested in desc.nested_types:
        yield from _walk(nested, prefix + desc.name + ".")


def _tf_nested(tf_desc, dotted):
    parts = dotted.split(".")
    desc = tf_desc
    for part in parts[1:]:
        desc = desc.nested_types_by_name[part]
    return desc


@pytest.mark.parametrize("module", [tf_framework_pb2, tf_saved_model_pb2, tf_checkpoint_pb2],
                         ids=["framework", "saved_model", "checkpoint"])
def test_every_declared_field_has_tensorflows_number_type_and_label(module):
    tf_top, _ = _tf_messages()
    checked = 0
    for top in module.DESCRIPTOR.message_types_by_name.values():
        for dotted, desc in _walk(top):
            theirs = _tf_nested(tf_top[top.name], dotted)
            for field in desc.fields:
                other = theirs.fields_by_number.get(field.number)
                assert other is not None, f"{dotted}.{field.name} = {field.number} is not a TensorFlow field"
                assert other.name == field.name, dotted
                assert other.type == field.type or (
                    field.type == field.TYPE_BYTES and other.type == other.TYPE_STRING
                ), f"{dotted}.{field.name}: type {field.type} vs {other.type}"
                assert other.is_repeated == field.is_repeated, f"{dotted}.{field.name}"
                if field.is_repeated and field.type not in (field.TYPE_MESSAGE, field.TYPE_STRING, field.TYPE_BYTES):
                    assert other.is_packed == field.is_packed, f"{dotted}.{field.name} packing"
                if field.message_type is not None:
                    assert field.message_type.name == other.message_type.name, f"{dotted}.{field.name}"
                checked += 1
    assert checked > (60 if module is tf_framework_pb2 else 15)


def test_data_type_enum_values_match_tensorflow():
    _, tf_enum = _tf_messages()
    ours = tf_framework_pb2.DataType.DESCRIPTOR
    assert {v.name: v.number for v in ours.values} == {v.name: v.number for v in tf_enum.values}


def assert_same_message(ours, theirs, where="message"):
    """Every field our schema declares holds the same value in TensorFlow's parse of the same bytes."""
    for field in ours.DESCRIPTOR.fields:
        a, b = getattr(ours, field.name), getattr(theirs, field.name)
        label = f"{where}.{field.name}"
        if field.message_type is not None and field.message_type.GetOptions().map_entry:
            assert sorted(a.keys()) == sorted(b.keys()), label
            value_field = field.message_type.fields_by_name["value"]
            for key in a:
                if value_field.message_type is not None:
                    assert_same_message(a[key], b[key], f"{label}[{key!r}]")
                else:
                    assert a[key] == b[key], label
        elif field.message_type is not None and field.is_repeated:
            assert len(a) == len(b), label
            for i, (x, y) in enumerate(zip(a, b)):
                assert_same_message(x, y, f"{label}[{i}]")
        elif field.message_type is not None:
            assert ours.HasField(field.name) == theirs.HasField(field.name), label
            if ours.HasField(field.name):
                assert_same_message(a, b, label)
        elif field.is_repeated:
            assert list(a) == list(b) or [repr(x) for x in a] == [repr(x) for x in b], label
        else:
            assert a == b or (a != a and b != b), label


@pytest.mark.parametrize(
    "fixture", ["tf_mobilenet_pb", "tf_bert_pb", "tf_rnn_pb", "tf2_control_flow_pb", "tf2_calls_pb"]
)
def test_graph_def_bytes_read_the_same_with_our_classes_and_tensorflows(fixture, request):
    import tensorflow as tf

    data = request.getfixturevalue(fixture).read_bytes()
    ours = tf_framework_pb2.GraphDef.FromString(data)
    theirs = tf.compat.v1.GraphDef.FromString(data)
    assert len(ours.node) == len(theirs.node) > 0
    assert_same_message(ours, theirs, "graph")


@pytest.mark.parametrize("fixture", ["saved_model_keras", "saved_model_module", "saved_model_tf1"])
def test_saved_model_bytes_read_the_same_with_our_classes_and_tensorflows(fixture, request):
    from tensorflow.core.protobuf import saved_model_pb2

    data = (request.getfixturevalue(fixture) / "saved_model.pb").read_bytes()
    ours = tf_saved_model_pb2.SavedModel.FromString(data)
    theirs = saved_model_pb2.SavedModel.FromString(data)
    assert ours.meta_graphs and ours.meta_graphs[0].signature_def
    assert_same_message(ours, theirs, "saved_model")
