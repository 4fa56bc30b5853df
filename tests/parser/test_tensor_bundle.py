"""The native checkpoint reader: every dtype, zero-copy views, and corrupt checkpoints as ModelLoadError."""

from __future__ import annotations

import shutil
import struct
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from scopefusion.errors import ModelLoadError
from scopefusion.parser import load
from scopefusion.parser.proto import tf_checkpoint_pb2 as ckpb
from scopefusion.parser.tensor_bundle import TABLE_MAGIC, TensorBundle, crc32c, mask_crc, read_table, snappy_decompress
from tests.models.saved_models import write_checkpoint_of_every_dtype

from .bundle_writer import rewrite_index, write_table


@pytest.fixture(scope="session")
def every_dtype_checkpoint(model_store) -> Path:
    return model_store.written("ckpt_every_dtype", write_checkpoint_of_every_dtype) / "ckpt"


@pytest.fixture
def module_copy(saved_model_module, tmp_path) -> Path:
    copy = tmp_path / "module"
    shutil.copytree(saved_model_module, copy)
    return copy


def test_every_dtype_reads_as_tensorflow_reads_it(every_dtype_checkpoint):
    import tensorflow as tf

    reader = tf.train.load_checkpoint(str(every_dtype_checkpoint))
    bundle = TensorBundle(str(every_dtype_checkpoint))
    keys = sorted(reader.get_variable_to_shape_map())
    assert bundle.keys() == keys
    variables = [k for k in keys if k.endswith("VARIABLE_VALUE")]
    assert len(variables) == 18
    for key in keys:
        expected = np.asarray(reader.get_tensor(key))
        got = bundle.tensor(key)
        assert got.shape == expected.shape, key
        assert not got.flags.writeable
        if got.dtype == object:
            assert got.tolist() == expected.astype(object).tolist(), key
        else:
            assert got.dtype == expected.dtype, key
            np.testing.assert_array_equal(got.reshape(-1).view(np.uint8), expected.reshape(-1).view(np.uint8), err_msg=key)


def test_numeric_tensors_are_views_of_the_mapped_shard(every_dtype_checkpoint):
    bundle = TensorBundle(str(every_dtype_checkpoint))
    weights = bundle.tensor("f32/.ATTRIBUTES/VARIABLE_VALUE")
    assert not weights.flags.owndata
    shard, offset, size = bundle.content_view("f32/.ATTRIBUTES/VARIABLE_VALUE")
    assert size == weights.nbytes
    assert np.shares_memory(weights, np.frombuffer(shard, np.uint8, count=size, offset=offset))


def test_a_truncated_index_names_the_file(module_copy):
    index = module_copy / "variables" / "variables.index"
    index.write_bytes(index.read_bytes()[:-10])
    with pytest.raises(ModelLoadError, match=r"variables\.index: not a valid checkpoint index: .*--savedmodel-loader tensorflow"):
        load(module_copy)


def test_a_flipped_byte_in_a_shard_fails_the_crc(module_copy):
    shard = module_copy / "variables" / "variables.data-00000-of-00001"
    data = bytearray(shard.read_bytes())
    entry = ckpb.BundleEntryProto.FromString(dict(read_table((module_copy / "variables" / "variables.index").read_bytes()))[
        b"w/.ATTRIBUTES/VARIABLE_VALUE"])
    data[entry.offset + 5] ^= 0x40
    shard.write_bytes(bytes(data))
    with pytest.raises(ModelLoadError, match=r"variables\.data-00000-of-00001: the bytes of tensor 'w/.ATTRIBUTES/VARIABLE_VALUE' "
                                             r"fail their CRC32C check"):
        load(module_copy)


def test_a_missing_shard_names_the_shard(module_copy):
    (module_copy / "variables" / "variables.data-00000-of-00001").unlink()
    with pytest.raises(ModelLoadError, match=r"variables\.data-00000-of-00001: the checkpoint data shard is missing"):
        load(module_copy)


def test_a_wrong_shape_in_an_entry_is_named(module_copy):
    index = module_copy / "variables" / "variables.index"

    def reshape(value: bytes) -> bytes:
        entry = ckpb.BundleEntryProto.FromString(value)
        del entry.shape.dim[:]
        for d in (3, 4):
            entry.shape.dim.add().size = d
        return entry.SerializeToString()

    index.write_bytes(rewrite_index(index.read_bytes(), "w/.ATTRIBUTES/VARIABLE_VALUE", reshape))
    with pytest.raises(ModelLoadError, match=r"tensor 'w/.ATTRIBUTES/VARIABLE_VALUE' has shape \[3, 4\], but the SavedModel "
                                             r"declares \[4, 3\]"):
        load(module_copy)


def test_the_test_table_writer_round_trips():
    entries = [(b"", b"header"), (b"a", b"1"), (b"ab", b"22"), (b"b", b"")]
    assert read_table(write_table(entries)) == entries


def test_the_cli_exits_2_and_writes_nothing_on_a_corrupt_bundle(module_copy, tmp_path):
    from typer.testing import CliRunner

    from scopefusion.cli import app

    shard = module_copy / "variables" / "variables.data-00000-of-00001"
    shard.write_bytes(shard.read_bytes()[:-4])
    out = tmp_path / "out.ge"
    result = CliRunner().invoke(app, ["convert", str(module_copy), "-o", str(out), "-q"])
    assert result.exit_code == 2, result.output
    assert "the shard is truncated" in result.output and "--savedmodel-loader tensorflow" in result.output
    assert not out.exists()


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_mutated_index_bytes_give_only_our_errors(saved_model_module, tmp_path_factory, data):
    original = (saved_model_module / "variables" / "variables.index").read_bytes()
    mutated = bytearray(original)
    kind = data.draw(st.sampled_from(["flip", "truncate", "splice"]))
    if kind == "flip":
        for position in data.draw(st.lists(st.integers(0, len(mutated) - 1), min_size=1, max_size=4)):
            mutated[position] ^= data.draw(st.integers(1, 255))
    elif kind == "truncate":
        mutated = mutated[: data.draw(st.integers(0, len(mutated) - 1))]
    else:
        position = data.draw(st.integers(0, len(mutated)))
        mutated[position:position] = data.draw(st.binary(min_size=1, max_size=8))
    copy = tmp_path_factory.mktemp("mutated") / "module"
    shutil.copytree(saved_model_module, copy)
    (copy / "variables" / "variables.index").write_bytes(bytes(mutated))
    try:
        load(copy)
    except ModelLoadError as exc:
        assert "scopefusion bug" not in str(exc)


def test_block_crcs_are_checked():
    table = bytearray(write_table([(b"", b"x"), (b"k", b"v")]))
    table[6] ^= 1
    with pytest.raises(ValueError, match="fails its CRC32C check"):
        read_table(bytes(table))
    assert struct.unpack("<Q", bytes(table[-8:]))[0] == 0xDB4775248B80FB57


def test_snappy_blocks_decode_literals_and_overlapping_copies():
    # 11 bytes: literal "abc", copy length 6 from 3 back (overlapping), literal "xy"
    stream = bytes([11, 2 << 2, *b"abc", ((6 - 4) << 2) | 1, 3, 1 << 2, *b"xy"])
    assert snappy_decompress(stream) == b"abcabcabcxy"
    long_literal = bytes([70, 60 << 2, 69]) + b"z" * 70
    assert snappy_decompress(long_literal) == b"z" * 70
    with pytest.raises(ValueError, match="before the start"):
        snappy_decompress(bytes([4, ((4 - 4) << 2) | 1, 9]))


def test_a_table_of_snappy_blocks_reads():
    from scopefusion.parser.wire import encode_varint as _varint

    from .bundle_writer import _block, _with_trailer

    raw = _block([(b"", b"header"), (b"key", b"value" * 3)])
    compressed = _varint(len(raw)) + bytes([(len(raw) - 1) << 2]) + raw
    data = compressed + b"\x01" + struct.pack("<I", mask_crc(crc32c(compressed + b"\x01")))
    meta_offset = len(data)
    meta = _block([])
    out = bytearray(data + _with_trailer(meta))
    index_offset = len(out)
    index = _block([(b"key", _varint(0) + _varint(len(compressed)))])
    out += _with_trailer(index)
    handles = _varint(meta_offset) + _varint(len(meta)) + _varint(index_offset) + _varint(len(index))
    out += handles + b"\x00" * (40 - len(handles)) + struct.pack("<Q", TABLE_MAGIC)
    assert read_table(bytes(out)) == [(b"", b"header"), (b"key", b"value" * 3)]
