"""TensorFlow ``AttrValue`` to plain Python values.

=============  ==========================================================================
AttrValue      Python
=============  ==========================================================================
``s``          ``str`` when the bytes are UTF-8 (``"SAME"``, ``"NHWC"``), else ``bytes``
``i f b``      ``int``, ``float``, ``bool``
``type``       :class:`~scopefusion.dtypes.DType` (or :class:`.ForeignDType`: resource, variant)
``shape``      ``tuple`` of ints, ``-1`` for an unknown dim; ``None`` for an unknown rank
``tensor``     read-only ``numpy.ndarray`` (see :mod:`.tf_tensors`)
``func``       :class:`.FunctionRef` with its own decoded attributes
``list``       ``tuple`` of the above (``()`` for an empty list)
placeholder    :class:`.AttrPlaceholder` (inside function bodies)
unset          ``None``
=============  ==========================================================================

NOTE: string attributes are decoded to ``str`` because nearly all of them are names and enums
(padding, data formats, ``_class`` colocation names); bytes that are not UTF-8 stay ``bytes``.
"""

from __future__ import annotations

from typing import Any, Mapping

from ..dtypes import from_tf
from .tf_tensors import shape_of, tensor_to_numpy, tf_dtype
from .values import AttrPlaceholder, FunctionRef

__all__ = ["decode_attr", "decode_attrs", "decode_func", "is_immutable_attr", "text"]

ContentViews = Mapping[str, tuple[object, int, int]]


def text(raw: bytes) -> str | bytes:
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        return raw


def decode_func(func) -> FunctionRef:
    attrs = tuple(sorted((k, decode_attr(v)) for k, v in func.attr.items()))
    return FunctionRef(func.name, attrs)


def _decode_list(lst) -> tuple:
    if lst.s:
        return tuple(text(v) for v in lst.s)
    if lst.i:
        return tuple(int(v) for v in lst.i)
    if lst.f:
        return tuple(float(v) for v in lst.f)
    if lst.b:
        return tuple(bool(v) for v in lst.b)
    if lst.type:
        return tuple(tf_dtype(v) for v in lst.type)
    if lst.shape:
        return tuple(shape_of(v) for v in lst.shape)
    if lst.tensor:
        return tuple(tensor_to_numpy(v) for v in lst.tensor)
    if lst.func:
        return tuple(decode_func(v) for v in lst.func)
    return ()


def decode_attr(value, content_view: tuple[object, int, int] | None = None) -> Any:
    """Decodes one ``AttrValue`` (ours or TensorFlow's class).

    Raises:
        TensorDecodeError: a tensor attribute is inconsistent.
    """
    kind = value.WhichOneof("value")
    if kind == "s":
        return text(value.s)
    if kind == "i":
        return int(value.i)
    if kind == "f":
        return float(value.f)
    if kind == "b":
        return bool(value.b)
    if kind == "type":
        return tf_dtype(value.type)
    if kind == "shape":
        return shape_of(value.shape)
    if kind == "tensor":
        return tensor_to_numpy(value.tensor, content_view)
    if kind == "list":
        return _decode_list(value.list)
    if kind == "func":
        return decode_func(value.func)
    if kind == "placeholder":
        return AttrPlaceholder(value.placeholder)
    return None


def decode_attrs(attr_map, content_views: ContentViews | None = None) -> dict[str, Any]:
    """Decodes a NodeDef's attribute map, sorted by name; ``content_views`` maps attr names to cut tensors.

    The kinds most attributes have (a dtype, a flag, an int, a string, a list of numbers, a constant's tensor) are
    decoded here, the rest by :func:`decode_attr`. Lists of plain values are decoded once per process for
    each distinct encoding, and so is every attribute of an immutable value in a map of decoded messages
    (see ``_PLAIN``).
    """
    out: dict[str, Any] = {}
    plain = _PLAIN if type(attr_map) is dict else None  # a map of decoded messages: see _PLAIN
    for name in sorted(attr_map):
        value = attr_map[name]
        if plain is not None:
            known = plain.get(value, _UNKNOWN)
            if known is not _UNKNOWN:
                out[name] = known
                continue
        kind = value.WhichOneof("value")
        decoded: Any
        if kind == "type":
            code = value.type
            dtype = _DTYPES.get(code)
            decoded = dtype if dtype is not None else tf_dtype(code)
        elif kind == "b":
            decoded = bool(value.b)
        elif kind == "i":
            decoded = int(value.i)
        elif kind == "s":
            decoded = text(value.s)
        elif kind == "list":
            decoded = _decode_list_value(value)
        elif kind == "tensor":
            decoded = tensor_to_numpy(value.tensor, None if content_views is None else content_views.get(name))
        else:
            decoded = decode_attr(value, None if content_views is None else content_views.get(name))
        out[name] = decoded
        if plain is not None and (kind in _PLAIN_KINDS or (kind == "list" and not value.list.tensor and not value.list.func)):
            if len(plain) >= _MAX_PLAIN:
                plain.clear()
            plain[value] = decoded
    return out


def is_immutable_attr(value) -> bool:
    """Whether the decoded value of ``AttrValue`` message ``value`` is immutable: not a tensor, nor a list of
    tensors or functions (the attributes ``_PLAIN`` remembers), so that one value may serve every node."""
    kind = value.WhichOneof("value")
    return kind in _PLAIN_KINDS or (kind == "list" and not value.list.tensor and not value.list.func)


def _decode_list_value(value) -> tuple:
    """``decode_attr`` of a ``list`` AttrValue; lists without tensors or functions (strides, shapes, dtypes)
    come from a table keyed by their encoding, as such lists repeat across the nodes of a model."""
    key = value.SerializeToString()
    found = _LISTS.get(key)
    if found is not None:
        return found
    lst = value.list
    decoded = _decode_list(lst)
    if not lst.tensor and not lst.func:  # the decoded values are immutable: one tuple may serve every node
        if len(_LISTS) >= _MAX_LISTS:
            _LISTS.clear()
        _LISTS[key] = decoded
    return decoded


# TF DataType enum -> DType, for the codes that have one (``*_REF`` included).
_DTYPES = {code: dtype for code in range(256) if (dtype := from_tf(code)) is not None}
_LISTS: dict[bytes, tuple] = {}
_MAX_LISTS = 4096
# Decoded attribute message -> its value, when immutable (not a tensor, nor a function with its attributes).
# The decoder shares one message among all the nodes whose attribute has the same encoding (see
# ``message_decoder.MAX_CACHED_ENTRY``) and nothing writes a decoded message, so a message stands for its
# encoding and its value is decoded once. Protobuf's messages are not hashable and their maps are not dicts:
# they are decoded every time.
_PLAIN: dict[Any, Any] = {}
_MAX_PLAIN = 4096
_PLAIN_KINDS = frozenset({"type", "b", "i", "f", "s", "shape"})
_UNKNOWN = object()
