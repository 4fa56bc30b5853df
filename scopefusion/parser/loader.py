"""``load(path)``: any supported model on disk into a :class:`SourceGraph`.

Formats: a SavedModel directory (``"savedmodel"``), a frozen binary GraphDef (``"pb"``), a text GraphDef
(``"pbtxt"``) and an ONNX model (``"onnx"``). The format comes from the path (a directory, the suffix)
and is checked against the bytes, so a ``.onnx`` file that holds a GraphDef is reported as such;
``format=`` forces one. Reading any of them never imports TensorFlow (a SavedModel: unless
``savedmodel_loader="tensorflow"`` asks for it).

Every failure is a :class:`~scopefusion.errors.ModelLoadError` (the file cannot be read as a model) or a
:class:`~scopefusion.errors.ParseError` (the model's graph is invalid) naming the file and, where there
is one, the node.
"""

from __future__ import annotations

import mmap
import os
import stat
from typing import TYPE_CHECKING, Any, Callable, Sequence

from ..errors import ModelLoadError, ScopeFusionError
from .detect import FORMATS, format_from_path, sniff, sniff_against
from .source_graph import SourceGraph
from .wire import FileReader

if TYPE_CHECKING:  # pragma: no cover
    from ..progress import ProgressFn

__all__ = ["FORMATS", "load"]

_DESCRIPTION = {
    "pb": "a TensorFlow GraphDef",
    "pbtxt": "a TensorFlow text GraphDef",
    "onnx": "an ONNX model",
    "savedmodel": "a TensorFlow SavedModel (saved_model.pb)",
    "onnx-text": "an ONNX model in text form",
}


def load(
    path: str | os.PathLike[str],
    *,
    format: str | None = None,
    signature: str | None = None,
    tags: Sequence[str] | None = None,
    outputs: Sequence[str] | None = None,
    inline_functions: bool = True,
    lower_control_flow: bool = False,
    savedmodel_loader: str = "native",
    progress: ProgressFn | None = None,
) -> SourceGraph:
    """Reads a model into a SourceGraph.

    Args:
        path: a SavedModel directory, or a ``.pb`` / ``.pbtxt`` / ``.onnx`` file.
        format: ``"savedmodel"``, ``"pb"``, ``"pbtxt"`` or ``"onnx"``; default: detected.
        signature: SavedModel signature (default ``"serving_default"``).
        tags: SavedModel meta graph tags (default: the only meta graph, else ``("serve",)``).
        outputs: GraphDef output tensor names (default: the tensors nothing consumes).
        inline_functions: inline TF function calls (``PartitionedCall`` / ``StatefulPartitionedCall``).
        lower_control_flow: SavedModel only: let TensorFlow lower ``While`` / ``If`` to TF1 control flow
            (needs ``savedmodel_loader="tensorflow"``).
        savedmodel_loader: SavedModel only: ``"native"`` freezes the variables without TensorFlow,
            ``"tensorflow"`` lets TensorFlow load and freeze the SavedModel.
        progress: called as ``progress("load", bytes_read, size, path)`` while a file is read; a SavedModel
            reports each step with 0 / 0 (reading saved_model.pb, freezing); see :mod:`scopefusion.progress`.

    Raises:
        ModelLoadError: missing, empty, unreadable or mistyped file, wrong options, no such signature.
        ParseError: an invalid graph (duplicate names, missing producers, data cycles...).
    """
    where = os.fspath(path)
    if format is not None and format not in FORMATS:
        raise ModelLoadError(f"{where}: unknown format {format!r}; expected one of {', '.join(FORMATS)}")
    is_dir = _is_directory(where)
    fmt = format or format_from_path(where, is_dir=is_dir)
    if fmt != "savedmodel" and (signature is not None or tags is not None):
        raise ModelLoadError(f"{where}: signature= and tags= apply to SavedModels only, and this is read as {fmt or 'a file'}")
    if fmt not in ("pb", "pbtxt", None) and outputs is not None:
        raise ModelLoadError(f"{where}: outputs= applies to GraphDefs only; a {fmt} model declares its outputs")
    try:
        if fmt == "savedmodel":
            from .savedmodel import DEFAULT_SIGNATURE, load_saved_model

            directory = where if is_dir else os.path.dirname(os.path.abspath(where))
            return load_saved_model(
                directory,
                signature=signature or DEFAULT_SIGNATURE,
                tags=tags,
                inline_functions=inline_functions,
                lower_control_flow=lower_control_flow,
                loader=savedmodel_loader,
                step=None if progress is None else (lambda text: progress("load", 0, 0, f"SavedModel: {text}")),
            )
        if is_dir:
            raise ModelLoadError(f"{where}: is a directory, but format {fmt!r} is a file; pass the model file")
        return _load_file(where, fmt, forced=format is not None, outputs=outputs, inline_functions=inline_functions,
                          progress=progress)
    except ScopeFusionError:
        raise
    except MemoryError:
        raise ModelLoadError(f"{where}: reading the model ran out of memory; the file claims impossibly large tensors") from None
    except Exception as exc:
        # NOTE: a safety net, not a code path: every known failure raises our own errors above. Anything
        # that lands here is a scopefusion bug; the user still gets one sentence, the cause is chained.
        raise ModelLoadError(
            f"{where}: unexpected {type(exc).__name__} while reading the model ({exc}); this is a scopefusion bug, "
            "please report it with the file"
        ) from exc


def _is_directory(where: str) -> bool:
    """Whether ``where`` is a directory (else a file), asked of the file system once for the whole load.

    Raises:
        ModelLoadError: nothing is there (``os.path.exists`` would say False).
    """
    try:
        mode = os.stat(where).st_mode
    except (OSError, ValueError):
        raise ModelLoadError(f"{where}: no such file or directory; check the path") from None
    return stat.S_ISDIR(mode)


def _load_file(where: str, fmt: str | None, *, forced: bool, outputs: Sequence[str] | None, inline_functions: bool,
               progress: ProgressFn | None = None) -> SourceGraph:
    # A plain descriptor: everything below reads through it (os.pread, mmap), so a file object's buffer and
    # the system calls that set it up (terminal check, position) would be spent for nothing.
    try:
        fd = os.open(where, os.O_RDONLY)
    except OSError as exc:
        raise ModelLoadError(f"{where}: cannot read the file ({exc.strerror or exc}); check its permissions") from None
    try:
        size = os.fstat(fd).st_size
        if size == 0:
            raise ModelLoadError(f"{where}: the file is empty; expected {_DESCRIPTION.get(fmt or '', 'a model')}")
        read = None if progress is None else (lambda done, total: progress("load", done, total, where))
        reader = _walker_input(fd, size, read)
        if fmt == "pb" and reader.__class__ is bytes and size <= UNMAPPED_BYTES:
            mapped: Any = reader  # its constants are views of the bytes read (a mapping would cost more than them)
        else:
            try:
                # Constants become views of `mapped`; the wire walker reads through `reader` (see wire.py).
                mapped = mmap.mmap(fd, 0, access=mmap.ACCESS_READ)
            except (OSError, ValueError) as exc:
                raise ModelLoadError(f"{where}: cannot map the file ({exc}); is it a regular file?") from None
        graph = _parse(where, fmt, forced, mapped, reader, outputs, inline_functions)
        if progress is not None:
            progress("load", size, size, where)
        return graph
    finally:
        os.close(fd)


# A GraphDef file of up to this size, read whole, is not mapped: its constants are views of the bytes read,
# which they keep (at most this much memory). Mapping a file costs 6 us, 2% of loading a 60-node model.
UNMAPPED_BYTES = 64 << 10

# Files up to this size are read whole for the wire walker (see _walker_input): a MobileNet (2 to 4 MB) loads
# 3% faster so, an EfficientNet-B0 (16 MB) 3% slower.
WHOLE_READ_BYTES = 8 << 20


def _walker_input(fd: int, size: int, progress: Callable[[int, int], None] | None) -> FileReader | bytes:
    """What the wire walker reads: the file's bytes, read at once, when it has at most ``WHOLE_READ_BYTES``
    and no progress is reported; else a :class:`.FileReader`, which reads only the bytes the walker visits
    (between the large tensors of a large model: see :mod:`.wire`) and reports its progress.

    The walker reads the same bytes from either, so it finds the same fields and cuts; from bytes in memory
    it does so without a read per 64 KiB chunk or a method call per byte range (a third of a MobileNet's
    walk). A smaller read than asked for (the file shrank meanwhile) leaves the file to a FileReader.
    """
    if progress is None and size <= WHOLE_READ_BYTES:
        data = os.pread(fd, size, 0)
        if len(data) == size:
            return data
    return FileReader(fd, size, progress=progress)


def _parse(where: str, fmt: str | None, forced: bool, mapped: Any, reader: FileReader | bytes,
           outputs: Sequence[str] | None, inline_functions: bool) -> SourceGraph:
    if fmt is None:
        found = sniff(reader)
        if found is None:
            raise ModelLoadError(
                f"{where}: cannot tell the model format from the name or the bytes; pass format= with one of "
                f"{', '.join(FORMATS)}"
            )
        fmt = found
    elif not forced and (found := sniff_against(reader, fmt)) is not None:  # a forced format is not checked
        raise ModelLoadError(
            f"{where}: the name says {_DESCRIPTION[fmt]}, but the bytes look like {_DESCRIPTION[found]}; "
            f"rename the file or pass format= explicitly"
        )
    if fmt == "onnx-text":
        raise ModelLoadError(f"{where}: ONNX text form is not supported; convert it to a binary .onnx file")
    if fmt == "savedmodel":
        raise ModelLoadError(
            f"{where}: the bytes look like a SavedModel's saved_model.pb, which needs its directory (variables/); "
            "pass the SavedModel directory instead"
        )
    if fmt == "pb":
        from .tf_graphdef import graph_from_graph_def_buffer

        return graph_from_graph_def_buffer(mapped, where, reader=reader, outputs=outputs, inline_functions=inline_functions)
    if fmt == "pbtxt":
        from .tf_graphdef import graph_from_graph_def, parse_graph_def_text

        try:
            text = reader[0:len(reader)].decode("utf-8")
        except UnicodeDecodeError as exc:
            raise ModelLoadError(f"{where}: a text GraphDef must be UTF-8, but byte {exc.start} is not; is it a binary .pb?") from None
        graph_def = parse_graph_def_text(text, where)
        return graph_from_graph_def(graph_def, where, outputs=outputs, inline_functions=inline_functions)
    from .onnx_frontend import onnx_graph_from_buffer

    return onnx_graph_from_buffer(mapped, where, reader=reader)
