"""What the native SavedModel loader refuses: each a ModelLoadError naming the thing and the TensorFlow loader."""

from __future__ import annotations

import shutil

import pytest

from scopefusion.errors import ModelLoadError
from scopefusion.parser import load
from scopefusion.parser.proto import tf_checkpoint_pb2 as ckpb
from tests.models.saved_models import write_assigning_model, write_lookup_table_model

from .bundle_writer import rewrite_index

FALLBACK = "--savedmodel-loader tensorflow"


@pytest.fixture(scope="session")
def lookup_table_model(model_store):
    return model_store.written("sm_lookup_table", write_lookup_table_model)


@pytest.fixture(scope="session")
def assigning_model(model_store):
    return model_store.written("sm_assigning", write_assigning_model)


def test_a_lookup_table_is_named_and_the_tensorflow_loader_reads_it(lookup_table_model):
    with pytest.raises(ModelLoadError, match=r"captures .*a lookup table, asset or other resource") as info:
        load(lookup_table_model)
    assert FALLBACK in str(info.value) and str(lookup_table_model) in str(info.value)
    assert load(lookup_table_model, savedmodel_loader="tensorflow").outputs


def test_a_variable_assigned_inside_the_signature_is_named(assigning_model):
    with pytest.raises(ModelLoadError, match=r"\(AssignAddVariableOp\).* assigns variable .* inside the signature") as info:
        load(assigning_model)
    assert FALLBACK in str(info.value)


def test_an_unknown_dtype_in_the_checkpoint_is_named(saved_model_module, tmp_path):
    copy = tmp_path / "module"
    shutil.copytree(saved_model_module, copy)
    index = copy / "variables" / "variables.index"

    def to_variant(value: bytes) -> bytes:
        entry = ckpb.BundleEntryProto.FromString(value)
        entry.dtype = 21  # DT_VARIANT
        return entry.SerializeToString()

    index.write_bytes(rewrite_index(index.read_bytes(), "w/.ATTRIBUTES/VARIABLE_VALUE", to_variant))
    with pytest.raises(ModelLoadError, match=r"variables\.index: tensor 'w/.ATTRIBUTES/VARIABLE_VALUE' .*dtype") as info:
        load(copy)
    assert FALLBACK in str(info.value)
