"""Streamed model bytes (``serde.weight_stream``): the same bytes as protobuf writes for the whole message,
weights written from their arrays (or from the mapped model file) chunk by chunk, or copied from the model
file by the kernel where its pages cannot be mapped a range at a time, mapped pages given back, transposed weights copied to C order correctly, and protobuf's limits still enforced."""

from __future__ import annotations

import errno
import io
import itertools
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import onnx
import pytest

from scopefusion import files
from scopefusion.convert import convert
from scopefusion.errors import SerdeError
from scopefusion.files import FileRange, write_atomic
from scopefusion.serde import ge, onnx_export, weight_stream
from scopefusion.serde import ge_ir_pb2 as pb
from scopefusion.serde.model_io import model_to_model_bytes, model_to_proto
from scopefusion.serde.onnx_export import model_to_onnx, model_to_onnx_model_bytes
from scopefusion.serde.tensors import array_to_tensor_def
from scopefusion.serde.weight_stream import DeferredWeights, ModelBytes, Weight, deferring, frame

BERT_SHAPES = [{n: [2, 8] for n in ("input_ids", "input_mask", "token_type_ids")},
               {n: [4, 8] for n in ("input_ids", "input_mask", "token_type_ids")}]


@pytest.fixture(scope="module")
def convnet(tf_convnet_pb):
    return convert(tf_convnet_pb, input_shapes=[{"input_0": [1, 8, 8, 3]}, {"input_0": [2, 8, 8, 3]}])


@pytest.fixture(scope="module")
def bert(tf_bert_pb):
    return convert(tf_bert_pb, input_shapes=BERT_SHAPES)


@pytest.fixture
def defer_all(monkeypatch):
    """The test models are small: defer every tensor, as a real model's large ones are."""
    monkeypatch.setattr(weight_stream, "DEFER_MIN_BYTES", 1)


@pytest.fixture
def without_populate(monkeypatch):
    """A kernel that cannot map a range's pages in one call (before Linux 5.14): mapped weights are copied
    from their file by the kernel."""
    monkeypatch.setattr(weight_stream, "_POPULATE", [False])


def _weights(data: ModelBytes) -> list[Weight]:
    return [p for p in data.pieces if isinstance(p, Weight)]


# ----------------------------------------------------------------------------- same bytes
@pytest.mark.parametrize("min_bytes", [None, 1])
@pytest.mark.parametrize("name", ["convnet", "bert", "control_flow", "attention"])
def test_streamed_bytes_equal_protobufs_serialization_of_the_whole_message(
    name, min_bytes, request, monkeypatch, onnx_control_flow, onnx_attention
):
    if name in ("control_flow", "attention"):
        model = convert(onnx_control_flow if name == "control_flow" else onnx_attention)
    else:
        model = request.getfixturevalue(name)
    if min_bytes is not None:  # every tensor deferred, also the small ones, bodies' and attributes' included
        monkeypatch.setattr(weight_stream, "DEFER_MIN_BYTES", min_bytes)
    whole_ge = model_to_proto(model).SerializeToString(deterministic=True)
    streamed_ge = model_to_model_bytes(model)
    assert streamed_ge.tobytes() == whole_ge
    assert len(streamed_ge) == len(whole_ge)
    whole_onnx = model_to_onnx(model).SerializeToString(deterministic=True)
    streamed_onnx, skeleton = model_to_onnx_model_bytes(model)
    assert streamed_onnx.tobytes() == whole_onnx
    assert onnx_export.onnx_summary(skeleton) == onnx_export.onnx_summary(whole_onnx)
    if min_bytes is not None:
        assert _weights(streamed_ge) and _weights(streamed_onnx)


def test_a_model_streams_its_weights_and_saves_the_same_bytes(convnet, tmp_path, defer_all):
    data = convnet.serialize("onnx")
    weights = _weights(data)
    assert any(not w.array.flags.c_contiguous for w in weights), "ONNX filters are transposed views (HWIO -> OIHW)"
    for fmt, name in (("ge", "m.ge"), ("onnx", "m.onnx")):
        convnet.save(tmp_path / name)
        assert (tmp_path / name).read_bytes() == convnet.to_bytes(fmt)
    assert onnx.load(str(tmp_path / "m.onnx")).graph.initializer


def test_ge_to_bytes_is_the_streamed_form_joined(bert):
    graphs = [bert.graph] + [p.graph for p in bert.profiles]
    assert ge.to_bytes(graphs) == ge.model_to_proto(graphs).SerializeToString(deterministic=True)
    assert ge.to_model_bytes(graphs).tobytes() == ge.to_bytes(graphs)


def test_frame_without_markers_returns_the_bytes_whole():
    message = pb.ModelDef(name="m")
    data = message.SerializeToString()
    framed = frame(data, pb.ModelDef.DESCRIPTOR, DeferredWeights())
    assert framed.pieces == (data,)


def test_a_table_draws_its_token_when_it_first_defers(monkeypatch):
    drawn: list[int] = []
    monkeypatch.setattr(weight_stream.os, "urandom", lambda n: drawn.append(n) or bytes(range(1, n + 1)))
    weights = DeferredWeights(min_bytes=1024)
    assert weights.defer(np.ones(3, np.float32)) is None and weights.array(bytes(16)) is None and drawn == []
    big, other = np.ones(1024, np.uint8), np.zeros(1024, np.uint8)
    first, second = weights.defer(big), weights.defer(other)
    size = weight_stream.TOKEN_BYTES
    assert drawn == [size] and first[:size] == second[:size] == weights.token == bytes(range(1, size + 1))
    assert weights.array(first) is big and weights.array(second) is other and weights.array(first[:-1]) is None


def test_call_deferring_defers_only_while_the_call_runs():
    weights = DeferredWeights(min_bytes=1)
    array = np.ones(4, np.float32)
    marker = weight_stream.call_deferring(weights, weight_stream.defer_array, array)
    assert weights.array(marker) is array and weight_stream.active_weights() is None

    def fails() -> None:
        assert weight_stream.active_weights() is weights
        raise ValueError("stop")

    with pytest.raises(ValueError, match="stop"):
        weight_stream.call_deferring(weights, fails)
    assert weight_stream.active_weights() is None and weight_stream.defer_array(array) is None


def test_frame_recomputes_every_enclosing_length():
    # A tensor whose data needs a longer length prefix than its marker, two levels down.
    big = np.arange(70_000, dtype=np.float32).reshape(700, 100)
    weights = DeferredWeights(min_bytes=1)

    def build(deferred: bool) -> pb.ModelDef:
        model = pb.ModelDef(name="m")
        op = model.graph.add(name="g").op.add(name="c", type="Const")
        tensor = op.attr["value"].t
        tensor.desc.shape.dim.extend(big.shape)
        marker = weights.defer(big) if deferred else None
        tensor.data = marker if marker is not None else big.tobytes()
        op.attr["other"].list.t.add().data = b"small"
        return model

    whole = build(False).SerializeToString(deterministic=True)
    skeleton = build(True).SerializeToString(deterministic=True)
    framed = frame(skeleton, pb.ModelDef.DESCRIPTOR, weights)
    assert len(skeleton) < 200 < len(whole) == len(framed)
    assert framed.tobytes() == whole
    assert pb.ModelDef.FromString(framed.tobytes()) == build(False)


def test_deferral_happens_only_inside_the_block_and_only_for_plain_large_arrays():
    array = np.ones((64, 64), np.float32)
    tensor = pb.TensorDef()
    array_to_tensor_def(array, tensor, "here")
    assert tensor.data == array.tobytes()
    weights = DeferredWeights(min_bytes=1024)
    with deferring(weights):
        array_to_tensor_def(array, tensor, "here")
        assert weights.array(tensor.data) is array
        small = pb.TensorDef()
        array_to_tensor_def(np.ones(3, np.float32), small, "here")
        strings = pb.TensorDef()
        array_to_tensor_def(np.array([b"a" * 2000] * 2, dtype=object), strings, "here")
        flags = pb.TensorDef()
        array_to_tensor_def(np.ones(4096, bool), flags, "here")
    assert len(weights) == 1
    assert holds_its_data(small) and holds_its_data(strings) and holds_its_data(flags)
    assert weight_stream.active_weights() is None


def holds_its_data(tensor: pb.TensorDef) -> bool:
    """True when the tensor holds its own data (no marker)."""
    return len(tensor.data) != 16


# ----------------------------------------------------------------------------- from the model file
def _maps_name_their_files(path) -> bool:
    """Whether this system's ``/proc/self/maps`` names a mapped file by the device and inode ``os.stat`` gives
    (not so on some overlay file systems, where writing falls back to reading through the mapping)."""
    import mmap

    with open(path, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as mapped:
        address = np.frombuffer(mapped, np.uint8, count=1).ctypes.data
        entry = weight_stream._read_maps().get(address)
    info = os.stat(path)
    return entry is not None and entry[1:3] == (info.st_dev, info.st_ino)


def test_contiguous_weights_of_a_mapped_model_file_are_copied_from_the_file(
    bert, tf_bert_pb, tmp_path, defer_all, without_populate
):
    if not _maps_name_their_files(tf_bert_pb):
        pytest.skip("this file system's mappings do not name the file os.stat names")
    data = bert.serialize("ge")
    chunks = list(data)
    ranges = [c for c in chunks if isinstance(c, FileRange)]
    assert ranges, "the BERT's weights are views of the mapped .pb, copied by the kernel"
    # Only arrays of at least the loader's cut size are views of the file; smaller ones were parsed into memory.
    assert sum(r.length for r in ranges) > 0.9 * sum(w.nbytes for w in _weights(data) if w.nbytes >= 1024)
    with pytest.raises(OSError):  # the iteration closed the files it opened
        os.fstat(ranges[0].fd)
    out = tmp_path / "m.ge"
    write_atomic(out, bert.serialize("ge"))
    assert out.read_bytes() == data.tobytes()


def test_a_replaced_model_file_is_not_read_again(tf_bert_pb, tmp_path, defer_all, without_populate):
    path = tmp_path / "bert.pb"
    path.write_bytes(Path(tf_bert_pb).read_bytes())
    model = convert(path, input_shapes=BERT_SHAPES[0])
    expected = model.to_bytes("ge")
    assert any(isinstance(c, FileRange) for c in model.serialize("ge")) == _maps_name_their_files(path)
    replacement = tmp_path / "other.pb"
    replacement.write_bytes(bytes(len(expected)))
    os.replace(replacement, path)  # the model's mapping still shows the old file
    chunks = list(model.serialize("ge"))
    assert not any(isinstance(c, FileRange) for c in chunks)
    model.save(tmp_path / "out.ge")
    assert (tmp_path / "out.ge").read_bytes() == expected


def test_sendfile_refused_falls_back_to_reading(bert, tmp_path, monkeypatch, defer_all, without_populate):
    expected = bert.to_bytes("ge")

    def refuse(*args):
        raise OSError(errno.EINVAL, "not here")

    monkeypatch.setattr(os, "sendfile", refuse)
    bert.save(tmp_path / "m.ge")
    assert (tmp_path / "m.ge").read_bytes() == expected


def test_a_file_range_past_the_end_of_its_file_is_an_error(tmp_path):
    source = tmp_path / "source"
    source.write_bytes(b"abc")
    fd = os.open(source, os.O_RDONLY)
    try:
        with pytest.raises(OSError, match="ended before byte"):
            write_atomic(tmp_path / "out", [b"x", FileRange(fd, 1, 10)])
        assert not (tmp_path / "out").exists()
        assert list(files.iter_bytes([b"x", FileRange(fd, 1, 2)])) == [b"x", b"bc"]
    finally:
        os.close(fd)


def test_writing_to_standard_output_reads_file_ranges(tmp_path, monkeypatch):
    from scopefusion.output_paths import STDOUT, write_outputs

    source = tmp_path / "source"
    source.write_bytes(b"0123456789")
    fd = os.open(source, os.O_RDONLY)

    class Out:
        buffer = io.BytesIO()

        def flush(self) -> None:
            pass

    out = Out()
    monkeypatch.setattr("sys.stdout", out)
    try:
        write_outputs([(STDOUT, [b"<", FileRange(fd, 2, 5), b">"])])
    finally:
        os.close(fd)
    assert out.buffer.getvalue() == b"<23456>"


def _mapping_rss_kb(address: int) -> int:
    with open("/proc/self/smaps") as f:
        inside = False
        for line in f:
            head = line.split()[0]
            if "-" in head and ":" not in head:
                inside = int(head.split("-")[0], 16) == address
            elif inside and head == "Rss:":
                return int(line.split()[1])
    raise AssertionError("mapping not found")


@pytest.mark.skipif(not os.path.exists("/proc/self/smaps"), reason="needs Linux /proc/self/smaps")
def test_mapped_weights_are_written_from_the_mapping_a_chunk_of_pages_at_a_time(bert, tmp_path, defer_all, monkeypatch):
    data = bert.serialize("ge")
    mapped = [w for w in _weights(data) if weight_stream._Mapping.of(w.array) is not None]
    assert mapped, "the BERT's weights are views of the mapped .pb"
    mapping = weight_stream._Mapping.of(mapped[0].array)
    assert mapping is not None
    if not mapping.populates():
        pytest.skip("this kernel cannot map a range's pages in one call (MADV_POPULATE_READ)")
    mapping.release(mapping.address, len(mapping.mapped))  # nothing of the file resident to begin with
    populated: list[int] = []
    populate = weight_stream._Mapping.populate

    def counting(self, address, length):
        populate(self, address, length)
        populated.append(length)
        return None

    monkeypatch.setattr(weight_stream._Mapping, "populate", counting)
    with open(tmp_path / "m.ge", "wb") as out:
        for chunk in data:
            assert not isinstance(chunk, FileRange), "written from the mapping, not copied from the file"
            out.write(chunk)
    assert sum(populated) == sum(w.nbytes for w in mapped), "each weight's pages mapped a chunk at a time"
    assert _mapping_rss_kb(mapping.address) == 0, "the pages are given back"
    assert (tmp_path / "m.ge").read_bytes() == data.tobytes()


@pytest.mark.skipif(not os.path.exists("/proc/self/smaps"), reason="needs Linux /proc/self/smaps")
def test_writing_through_the_mapping_gives_the_touched_pages_back(bert, defer_all):
    data = bert.serialize("onnx")
    mapped = [w for w in _weights(data) if weight_stream._Mapping.of(w.array) is not None]
    assert mapped
    mapping = weight_stream._Mapping.of(mapped[0].array)
    assert mapping is not None
    for weight in mapped:
        float(np.asarray(weight.array, np.float64).sum())  # touch every page of every weight
    before = _mapping_rss_kb(mapping.address)
    for weight in mapped:
        for _ in weight.chunks():
            pass
    after = _mapping_rss_kb(mapping.address)
    assert before > 4 * sum(w.nbytes for w in mapped) // 5 // 1024
    assert after < before // 4


def test_a_writable_mapping_is_written_as_it_is_in_memory(tmp_path):
    path = tmp_path / "data.bin"
    np.arange(50_000, dtype=np.float32).tofile(path)
    for mode in ("c", "r+"):
        array = np.memmap(path, np.float32, mode=mode, shape=(500, 100))
        array[0, :3] = -1.0  # copy-on-write ("c"): only in this process's memory
        expected = np.array(array).tobytes()
        data = ModelBytes([b"head", Weight(array), Weight(array.T)])
        assert not any(isinstance(c, FileRange) for c in data)
        assert b"".join(files.iter_bytes(data)) == b"head" + expected + np.ascontiguousarray(array.T).tobytes()
        assert array[0, 0] == -1.0
        del array


# ----------------------------------------------------------------------------- transposed weights
@pytest.mark.parametrize("shape", [(3, 3, 8, 16), (1, 1, 70, 130), (5, 7, 3), (200, 3), (2, 3, 4, 5, 6)])
def test_non_contiguous_arrays_are_written_in_c_order(shape, monkeypatch):
    array = np.arange(np.prod(shape), dtype=np.float32).reshape(shape)
    views = [np.transpose(array, perm) for perm in itertools.permutations(range(len(shape)))]
    views += [array[..., ::-1], array[::2], np.broadcast_to(array[:1], array.shape), array.T[::-1]]
    # Small arrays are copied by numpy at once, larger ones a tile at a time: both ways for every view.
    for whole, cached in itertools.product((weight_stream.WHOLE_COPY_BYTES, 64), (weight_stream._CACHED_COPY_BYTES, -1)):
        monkeypatch.setattr(weight_stream, "WHOLE_COPY_BYTES", whole)
        monkeypatch.setattr(weight_stream, "CHUNK_BYTES", 256)
        monkeypatch.setattr(weight_stream, "_CACHED_COPY_BYTES", cached)
        for view in views:
            weight = Weight(view)
            assert weight.tobytes() == np.ascontiguousarray(view).tobytes(), (view.shape, view.strides)
            assert b"".join(weight.chunks()) == weight.tobytes()


def test_transposed_weights_share_one_scratch_buffer_and_write_the_same_bytes(monkeypatch):
    monkeypatch.setattr(weight_stream, "CHUNK_BYTES", 256)
    views = [np.arange(n, dtype=np.float32).reshape(shape).transpose(2, 3, 0, 1)
             for n, shape in ((3 * 3 * 8 * 16, (3, 3, 8, 16)), (1 * 1 * 70 * 130, (1, 1, 70, 130)))]
    data = ModelBytes([b"head", Weight(views[0]), b"mid", Weight(views[1])])
    scratch = weight_stream.Scratch()
    chunks = [bytes(c) for v in views for c in Weight(v).chunks(scratch=scratch)]
    assert b"".join(chunks) == b"".join(np.ascontiguousarray(v).tobytes() for v in views)
    assert b"".join(bytes(c) for c in data) == data.tobytes()
    assert data.tobytes() == b"head" + np.ascontiguousarray(views[0]).tobytes() + b"mid" + np.ascontiguousarray(views[1]).tobytes()


def _transposed_filters(count: int = 3) -> list[np.ndarray]:
    """Conv filters as the ONNX writer gives them: ``HWIO`` arrays seen as ``OIHW`` (not contiguous)."""
    rng = np.random.default_rng(0)
    shapes = [(3, 3, 8, 16), (1, 1, 70, 130), (5, 5, 4, 9), (3, 3, 16, 8)][:count]
    return [rng.standard_normal(shape).astype(np.float32).transpose(3, 2, 0, 1) for shape in shapes]


def test_a_slow_writer_gets_each_transposed_chunk_intact_until_it_asks_for_the_next(monkeypatch):
    # The blocks are put in C order by a worker ahead of the caller, in a ring of reused buffers: a chunk must not
    # change while the caller still writes it, however slowly.
    monkeypatch.setattr(weight_stream, "CHUNK_BYTES", 512)
    views = _transposed_filters()
    contiguous = np.arange(5000, dtype=np.float32)
    data = ModelBytes([b"head", Weight(views[0]), Weight(contiguous), Weight(views[1]), b"mid", Weight(views[2])])
    written = []
    for chunk in data:
        before = bytes(chunk)
        time.sleep(0.001)  # the worker would overwrite a buffer still in use now
        assert bytes(chunk) == before
        written.append(before)
    expected = [b"head", *(np.ascontiguousarray(v).tobytes() for v in (views[0], contiguous, views[1])), b"mid",
                np.ascontiguousarray(views[2]).tobytes()]
    assert b"".join(written) == b"".join(expected) == data.tobytes()
    assert len(written) > 20  # many blocks went through the worker
    assert not _c_order_workers()


def test_a_writer_whose_next_block_is_not_ready_copies_blocks_itself(monkeypatch):
    # A slow worker: the writing thread copies the blocks it would otherwise wait for, in any order, and the
    # chunks still come out in file order.
    monkeypatch.setattr(weight_stream, "CHUNK_BYTES", 512)
    real = weight_stream._c_order
    copied_by: list[str] = []

    def slow_in_the_worker(array, into=None):
        copied_by.append(threading.current_thread().name)
        if threading.current_thread().name == "scopefusion-c-order":
            time.sleep(0.002)
        return real(array, into)

    monkeypatch.setattr(weight_stream, "_c_order", slow_in_the_worker)
    views = _transposed_filters(4)
    data = ModelBytes([b"head", *(Weight(v) for v in views)])
    written = b"".join(bytes(c) for c in data)
    assert written == b"head" + b"".join(np.ascontiguousarray(v).tobytes() for v in views)
    assert threading.current_thread().name in copied_by and "scopefusion-c-order" in copied_by
    assert not _c_order_workers()


def test_an_interrupt_while_the_writer_copies_a_block_ahead_goes_up_at_once(monkeypatch):
    monkeypatch.setattr(weight_stream, "CHUNK_BYTES", 512)
    real = weight_stream._c_order

    writer_reached = threading.Event()

    def interrupted_in_the_writer(array, into=None):
        if threading.current_thread().name == "scopefusion-c-order":
            writer_reached.wait(5)  # the worker cannot finish every block before the writer asks for one
        else:
            writer_reached.set()
            raise KeyboardInterrupt
        return real(array, into)

    monkeypatch.setattr(weight_stream, "_c_order", interrupted_in_the_writer)
    chunks = iter(ModelBytes([b"head", *(Weight(v) for v in _transposed_filters(4))]))
    assert next(chunks) == b"head"
    with pytest.raises(KeyboardInterrupt):
        next(chunks)  # the worker is copying the first block: the writer copies the second, and is interrupted
    assert not _c_order_workers()


def _c_order_workers() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == "scopefusion-c-order"]


def test_an_error_while_copying_a_block_reaches_the_writer_and_stops_the_worker(monkeypatch, tmp_path):
    monkeypatch.setattr(weight_stream, "CHUNK_BYTES", 512)
    calls = itertools.count()
    real = weight_stream._c_order

    def failing(array, into=None):
        if next(calls) == 5:
            raise MemoryError("no memory for the block")
        return real(array, into)

    monkeypatch.setattr(weight_stream, "_c_order", failing)
    data = ModelBytes([b"head", *(Weight(v) for v in _transposed_filters())])
    with pytest.raises(MemoryError, match="no memory for the block"):
        write_atomic(tmp_path / "m.onnx", data)
    assert not os.listdir(tmp_path)
    assert not _c_order_workers()


def test_without_a_thread_the_writer_copies_the_blocks_itself(monkeypatch):
    def refuse(self):
        raise RuntimeError("can't start new thread")

    monkeypatch.setattr(weight_stream, "CHUNK_BYTES", 512)
    monkeypatch.setattr(threading.Thread, "start", refuse)
    views = _transposed_filters()
    data = ModelBytes([b"head", *(Weight(v) for v in views)])
    assert b"".join(bytes(c) for c in data) == b"head" + b"".join(np.ascontiguousarray(v).tobytes() for v in views)


def test_a_write_stopped_midway_stops_the_worker(monkeypatch):
    monkeypatch.setattr(weight_stream, "CHUNK_BYTES", 512)
    chunks = iter(ModelBytes([b"head", *(Weight(v) for v in _transposed_filters())]))
    assert next(chunks) == b"head"
    next(chunks)
    assert _c_order_workers()
    chunks.close()  # what a failed write does (the generator is closed)
    assert not _c_order_workers()


# ----------------------------------------------------------------------------- limits
def test_an_onnx_model_over_protobufs_limit_is_refused_before_writing(convnet, tmp_path, monkeypatch):
    monkeypatch.setattr(onnx_export, "MAX_PROTOBUF_BYTES", 1000)
    with pytest.raises(SerdeError, match="needs external data"):
        convnet.save(tmp_path / "m.onnx")
    assert not (tmp_path / "m.onnx").exists()
    assert not os.listdir(tmp_path)


def test_a_ge_model_over_protobufs_limit_is_refused_before_writing(convnet, tmp_path, monkeypatch):
    monkeypatch.setattr(ge, "MAX_PROTOBUF_BYTES", 1000)
    with pytest.raises(SerdeError, match="more than a protobuf file can hold"):
        convnet.save(tmp_path / "m.ge")
    assert not os.listdir(tmp_path)


def test_writing_a_model_imports_no_hashing_library(tf_bert_pb, tmp_path):
    # The markers' random token and the temporaries' names come from os.urandom: secrets would import hmac and
    # hashlib (OpenSSL) on every write.
    code = (
        "import sys\nfrom scopefusion.convert import convert\nmodel = convert(sys.argv[1])\n"
        "model.save(sys.argv[2], 'ge')\nmodel.save(sys.argv[3], 'onnx')\n"
        "model.save(sys.argv[2], 'ge')\nmodel.save(sys.argv[3], 'onnx')\n"  # over existing files: a named temporary
        "print(sorted(m for m in ('secrets', 'hmac', 'hashlib') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code, str(tf_bert_pb), str(tmp_path / "m.ge"), str(tmp_path / "m.onnx")],
                         capture_output=True, text=True, check=True)
    assert out.stdout.strip().splitlines()[-1] == "[]"
    assert (tmp_path / "m.ge").stat().st_size and (tmp_path / "m.onnx").stat().st_size
