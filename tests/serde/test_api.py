"""The public API of scopefusion.serde is locked: a removal or rename here breaks users' scripts."""

from __future__ import annotations

import importlib
import subprocess
import sys

PUBLIC = {
    "scopefusion.serde": {
        "AttrSerializer", "AttrSerializerRegistry", "ListSerializer", "ModelContents", "SerdeContext",
        "ValueSerializer", "default_registry", "default_serializer_registry", "from_bytes", "from_text", "graph_from_proto", "graph_to_proto",
        "model_from_bytes", "model_from_proto", "model_from_text", "model_to_proto", "to_bytes", "to_text",
    },
    "scopefusion.serde.ge": {
        "CONTROL_INDEX", "DEFAULT_DIALECT", "RESERVED_GRAPH_ATTRS", "RESERVED_OP_ATTRS", "ModelContents",
        "from_bytes", "from_text", "graph_from_proto", "graph_to_proto", "model_from_bytes", "model_from_proto",
        "model_from_text", "model_to_proto", "read_standalone_graph", "to_bytes", "to_model_bytes", "to_text",
        "write_standalone_graph",
    },
    "scopefusion.serde.attr_serializers": {
        "AttrSerializer", "AttrSerializerRegistry", "ListSerializer", "SerdeContext", "ValueSerializer",
        "default_registry", "default_serializer_registry",
    },
    "scopefusion.serde.tensors": {
        "IR_TYPE_ATTR", "array_from_tensor_def", "array_to_tensor_def", "dtype_from_ge", "tensor_desc_bytes", "tensor_type_from_desc",
        "tensor_type_to_desc", "value_type_from_desc", "value_type_to_desc",
    },
    "scopefusion.serde.weight_stream": {
        "CHUNK_BYTES", "DEFER_MIN_BYTES", "DeferredWeights", "ModelBytes", "Weight", "active_weights", "call_deferring",
        "defer_array", "deferring", "frame", "stream_message",
    },
}  # fmt: skip


def test_public_api_is_locked():
    for name, expected in PUBLIC.items():
        module = importlib.import_module(name)
        assert set(module.__all__) == expected, name
        for symbol in expected:
            assert hasattr(module, symbol), f"{name}.{symbol}"


def test_serde_imports_neither_tensorflow_nor_onnx():
    code = "import scopefusion.serde.ge, scopefusion.serde.onnx_export, sys; print('\\n'.join(sorted(sys.modules)))"
    mods = set(subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split())
    assert "scopefusion.serde.ge_ir_pb2" in mods
    assert not {m for m in mods if m.split(".")[0] in {"tensorflow", "onnx", "keras", "torch"}}
