"""The item codec of ``ssdfeed.cache``: a Python item <-> cache record fields.

An item (whatever a dataset's ``__getitem__`` returns) becomes a list of
fields ``(name, kind, payload)``:

- ``"__tree__"`` (kind bytes): UTF-8 JSON describing the structure (tuples,
  lists, dicts, namedtuples, None) with a node per leaf;
- ``"0"``, ``"1"``, ...: the leaves in depth-first order. Arrays, tensors,
  PIL images and Python numbers are ``array`` fields (a ``.npy`` payload);
  ``bytes`` and ``str`` values, and PIL images whose pixels are not a plain
  array (modes ``1``, ``P``, ...), are ``bytes`` fields.

Numbers are leaves (0-d arrays), not part of the tree, so that items of one
dataset usually share one tree: the C++ loader can then stack each leaf over
a batch (``unflatten``). Only what a leaf cannot hold sits in the tree: ints
beyond int64, PIL modes, palettes and info, namedtuple classes and their
field names, tv_tensor kinds and metadata.

Reading is data only: ``tree_of`` checks a stored tree in full against the
schema in ``_item_tree`` (which also holds the only classes a tree may
name) before anything is built; what fails is ItemFormatError.

``decode(encode(item))`` equals the item bit for bit with the same types;
the exceptions are documented in docs/python.md (views and non-contiguous
arrays come back contiguous, tensors come back without grad, PIL image
subclasses such as ``JpegImageFile`` come back as ``PIL.Image.Image``; a
namedtuple or a tv_tensor comes back only where its module is loaded).
"""

from __future__ import annotations

import ast
import base64
import binascii
import collections
import functools
import io
import json
import struct
import sys
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

import numpy as np

from ssdfeed import _item_tree
from ssdfeed._item_tree import KIND_ARRAY, KIND_BYTES, ItemFormatError  # noqa: F401

TREE = "__tree__"

_INT64 = (-(2**63), 2**63 - 1)

# PIL modes whose np.asarray(image) holds exactly image.tobytes(), so the
# pixels can travel as an array (stackable by the fast path).
_PIL_ARRAY_MODES = {
    "L": "|u1",
    "RGB": "|u1",
    "RGBA": "|u1",
    "RGBX": "|u1",
    "LA": "|u1",
    "CMYK": "|u1",
    "YCbCr": "|u1",
    "LAB": "|u1",
    "HSV": "|u1",
    "I": "=i4",
    "F": "=f4",
    "I;16": "<u2",
}


# ----------------------------------------------------------------- encode


def _npy(arr: np.ndarray) -> bytes:
    """arr (C-contiguous, not structured) as .npy bytes, format 1.0."""
    descr = arr.dtype.str
    header = "{'descr': %r, 'fortran_order': False, 'shape': %r, }" % (descr, tuple(arr.shape))
    # The data starts on a 64-byte boundary, as np.save writes it.
    pad = 64 - (10 + len(header) + 1) % 64
    header = header + " " * (pad % 64) + "\n"
    head = b"\x93NUMPY\x01\x00" + struct.pack("<H", len(header)) + header.encode("latin1")
    return head + arr.tobytes()


def array_payload(arr: np.ndarray) -> bytes:
    """An array field's payload (kind 5): arr as .npy, C order. The one
    writer of array fields, for items and tf.cache elements alike."""
    return _npy(_c_order(arr))


def _c_order(arr: np.ndarray) -> np.ndarray:
    # Not np.ascontiguousarray: it turns 0-d arrays into 1-d ones.
    return arr if arr.flags.c_contiguous else arr.copy(order="C")


def _is_torch_tensor(x) -> bool:
    t = type(x)
    return t.__name__ in ("Tensor", "Parameter") and t.__module__.startswith("torch")


def _tv_kind(x) -> Optional[str]:
    """The kind of a torchvision tv_tensor (Image, BoundingBoxes, ...) that
    the codec keeps, else None."""
    t = type(x)
    tv = sys.modules.get("torchvision.tv_tensors")
    if tv is None or t.__name__ not in _item_tree.TV_KINDS:
        return None
    return t.__name__ if vars(tv).get(t.__name__) is t else None


def _is_pil_image(x) -> bool:
    if "PIL.Image" not in sys.modules:
        return False
    return isinstance(x, sys.modules["PIL.Image"].Image)


class UnsupportedItemError(TypeError):
    """A value ssdfeed.cache cannot store; the message names its place."""


class _Encoder:
    def __init__(self) -> None:
        self.leaves: List[Tuple[str, int, bytes]] = []

    def leaf(self, kind: int, payload: bytes, tag: str, **extra) -> dict:
        name = str(len(self.leaves))
        self.leaves.append((name, kind, payload))
        node = {"L": name, "k": tag}
        node.update(extra)
        return node

    def array_leaf(self, arr: np.ndarray, tag: str, where: str, **extra) -> dict:
        dt = arr.dtype
        if dt.hasobject:
            raise UnsupportedItemError(
                f"{where}: array of dtype {dt} (object arrays are not supported)")
        if dt.fields is not None or dt.subdtype is not None:
            # Structured (or sub-array) dtypes travel as opaque records; the
            # tree keeps the dtype.
            extra["sd"] = repr(np.lib.format.dtype_to_descr(dt))
            arr = _c_order(arr).view(np.dtype(("V", dt.itemsize)))
        if arr.ndim > 1 and arr.flags.f_contiguous and not arr.flags.c_contiguous:
            extra["F"] = 1
        return self.leaf(KIND_ARRAY, _npy(_c_order(arr)), tag, **extra)

    def node(self, x: Any, where: str):
        t = type(x)
        if x is None:
            return None
        if t is bool:
            return self.array_leaf(np.array(x, dtype=np.bool_), "bool", where)
        if t is int:
            if _INT64[0] <= x <= _INT64[1]:
                return self.array_leaf(np.array(x, dtype=np.int64), "int", where)
            return {"bigint": str(x)}
        if t is float:
            return self.array_leaf(np.array(x, dtype=np.float64), "float", where)
        if t is complex:
            return self.array_leaf(np.array(x, dtype=np.complex128), "complex", where)
        if t is str:
            return self.leaf(KIND_BYTES, x.encode("utf-8", "surrogatepass"), "str")
        if t is bytes:
            return self.leaf(KIND_BYTES, x, "bytes")
        if t is bytearray:
            return self.leaf(KIND_BYTES, bytes(x), "bytearray")
        if t is np.ndarray or t is np.memmap:
            return self.array_leaf(x, "nd", where)
        if isinstance(x, np.generic) and type(x).__module__ == "numpy":
            return self.array_leaf(np.asarray(x), "np", where)
        if _is_torch_tensor(x):
            return self.tensor(x, where)
        tv = _tv_kind(x)
        if tv is not None:
            return self.tv_tensor(x, tv, where)
        if _is_pil_image(x):
            return self.pil(x, where)
        if t is tuple:
            return {"T": [self.node(v, f"{where}[{i}]") for i, v in enumerate(x)]}
        if t is list:
            return {"l": [self.node(v, f"{where}[{i}]") for i, v in enumerate(x)]}
        if t is dict or t is collections.OrderedDict:
            items = [[_key(k, where), self.node(v, f"{where}[{_show_key(k)}]")]
                     for k, v in x.items()]
            return {"d" if t is dict else "od": items}
        if isinstance(x, tuple) and hasattr(t, "_fields"):
            return self.namedtuple(x, where)
        raise UnsupportedItemError(
            f"{where}: {_type_name(x)} is not supported by ssdfeed.cache")

    def namedtuple(self, x, where: str) -> dict:
        t = type(x)
        path = f"{t.__module__}:{t.__qualname__}"
        try:
            found = _item_tree.loaded_namedtuple(path, list(t._fields), len(t._fields))
        except ItemFormatError:
            found = None
        if found is not t:
            raise UnsupportedItemError(
                f"{where}: namedtuple {t.__qualname__} cannot be found again as {path} "
                "(define it at module level so that it can be rebuilt)"
            )
        return {"nt": path, "f": list(t._fields),
                "v": [self.node(v, f"{where}.{f}") for f, v in zip(t._fields, x)]}

    def tv_tensor(self, x, kind: str, where: str) -> dict:
        """A torchvision tv_tensor: its tensor, its kind and its metadata."""
        import torch

        extra: Dict[str, Any] = {"tv": kind}
        if kind == "BoundingBoxes":
            extra["fmt"] = x.format.name
        if kind in ("BoundingBoxes", "KeyPoints"):
            extra["cs"] = [int(v) for v in x.canvas_size]
        return self.tensor(x.as_subclass(torch.Tensor), where, "tv", extra)

    def tensor(self, x, where: str, tag: str = "pt", extra: Optional[dict] = None) -> dict:
        import torch

        if type(x) is not torch.Tensor and type(x) is not torch.nn.Parameter:
            raise UnsupportedItemError(
            f"{where}: {_type_name(x)} is not supported by ssdfeed.cache")
        if x.device.type != "cpu":
            raise UnsupportedItemError(
                f"{where}: torch tensor on {x.device} (only CPU tensors can be cached)")
        if x.layout != torch.strided or x.is_quantized:
            raise UnsupportedItemError(
                f"{where}: torch tensor with layout {x.layout} is not supported")
        x = x.detach().resolve_conj().resolve_neg()
        extra = dict(extra or {})
        try:
            arr = x.numpy()
        except TypeError:  # no numpy dtype (bfloat16, float8): keep the bits
            extra["dt"] = str(x.dtype).replace("torch.", "")
            size = x.element_size()
            as_int = {1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}.get(size)
            if as_int is None:
                raise UnsupportedItemError(
                    f"{where}: torch tensor of dtype {x.dtype} is not supported")
            arr = x.contiguous().view(as_int).numpy()
        return self.array_leaf(arr, tag, where, **extra)

    def pil(self, img, where: str) -> dict:
        if img.mode not in _item_tree.PIL_MODES:
            raise UnsupportedItemError(f"{where}: PIL image of mode {img.mode!r} is not supported")
        limit = _item_tree.pil_size_limit()
        if limit is not None and img.width * img.height > limit:
            raise UnsupportedItemError(
                f"{where}: PIL image of {img.width}x{img.height} pixels, above PIL's own "
                f"limit of {limit} (2 x PIL.Image.MAX_IMAGE_PIXELS) that reading it back "
                f"enforces")
        extra: Dict[str, Any] = {"m": img.mode}
        info = _pil_info(img.info)
        if info:
            extra["i"] = info
        if img.palette is not None and img.mode in ("P", "PA"):
            pmode = img.palette.mode
            extra["pm"] = pmode
            extra["pal"] = base64.b64encode(bytes(img.getpalette(pmode) or [])).decode()
        dtype = _PIL_ARRAY_MODES.get(img.mode)
        if dtype is not None and img.width and img.height:
            arr = np.asarray(img)
            expected = img.width * img.height * _pil_bpp(img)
            if arr.dtype == np.dtype(dtype) and arr.nbytes == expected:
                return self.array_leaf(arr, "pil", where, **extra)
        extra["s"] = [img.width, img.height]
        return self.leaf(KIND_BYTES, img.tobytes(), "pil", **extra)


def _pil_bpp(img) -> int:
    return len(img.getbands()) * (4 if img.mode in ("I", "F") else 2 if img.mode == "I;16" else 1)


def _pil_info(info: Mapping) -> dict:
    """The JSON-able part of a PIL image's info (dpi, icc_profile, ...):
    values that are not numbers, strings, bytes or tuples of these (file
    handles, EXIF objects) are left out."""
    out = {}
    for k, v in info.items():
        if isinstance(k, str):
            enc = _info_value(v)
            if enc is not _SKIP:
                out[k] = enc
    return out


_SKIP = object()


def _info_value(v):
    if v is None or isinstance(v, (bool, str)):
        return v
    if isinstance(v, int):
        return {"i": int(v)}
    if isinstance(v, float) or (hasattr(v, "numerator") and hasattr(v, "denominator")):
        try:
            return {"f": float(v).hex()}
        except (TypeError, ValueError, ZeroDivisionError):
            return _SKIP
    if isinstance(v, (bytes, bytearray)):
        return {"b": base64.b64encode(bytes(v)).decode()}
    if isinstance(v, (tuple, list)):
        parts = [_info_value(e) for e in v]
        if any(p is _SKIP for p in parts):
            return _SKIP
        return {"T" if isinstance(v, tuple) else "l": parts}
    return _SKIP


def _info_decode(v):
    if not isinstance(v, dict):
        return v
    if "i" in v:
        return v["i"]
    if "f" in v:
        return float.fromhex(v["f"])
    if "b" in v:
        return base64.b64decode(v["b"])
    if "T" in v:
        return tuple(_info_decode(e) for e in v["T"])
    return [_info_decode(e) for e in v["l"]]


def _key(k, where: str):
    """A dict key as an inline JSON node (keys are never leaves)."""
    t = type(k)
    if k is None or t is bool or t is str:
        return k
    if t is int:
        return {"i": str(k)}
    if t is float:
        return {"f": struct.pack("<d", k).hex()}
    if t is bytes:
        return {"b": base64.b64encode(k).decode()}
    if t is tuple:
        return {"T": [_key(e, where) for e in k]}
    raise UnsupportedItemError(f"{where}: dict key {k!r} of type {_type_name(k)} is not supported")


def _show_key(k) -> str:
    return json.dumps(k) if isinstance(k, str) else repr(k)


def _type_name(x) -> str:
    t = type(x)
    return t.__qualname__ if t.__module__ == "builtins" else f"{t.__module__}.{t.__qualname__}"


def encode(item: Any, where: str = "item") -> List[Tuple[str, int, bytes]]:
    """The item as fields ``[("__tree__", KIND_BYTES, json), ("0", kind, payload), ...]``.

    Raises TypeError naming the place of an unsupported value, e.g.
    ``item[1]["boxes"]: set is not supported by ssdfeed.cache``.
    """
    enc = _Encoder()
    tree = enc.node(item, where)
    text = json.dumps(tree, separators=(",", ":"), ensure_ascii=True, allow_nan=False)
    return [(TREE, KIND_BYTES, text.encode("ascii"))] + enc.leaves


# ----------------------------------------------------------------- decode


def _parse_npy(payload: bytes) -> np.ndarray:
    # allow_pickle=False: an object array's pickle is refused, never loaded.
    return np.lib.format.read_array(io.BytesIO(payload), allow_pickle=False)


def _field_value(field) -> Tuple[str, Any]:
    """(name, raw value) of a field as encode or ItemEntry.get gives it: a
    writable numpy array for array fields, bytes for bytes fields."""
    if len(field) == 3:
        name, kind, payload = field
        if kind == KIND_ARRAY:
            return name, _parse_npy(bytes(payload))
        return name, bytes(payload)
    name, kind, dtype, shape, data = field
    if kind == KIND_BYTES:
        return name, bytes(data)
    return name, _RawArray(dtype, shape, data)


class _RawArray:
    """An array field as ItemEntry.get gives it, converted when its leaf's
    type is known: a PIL image is built from the bytes as they are (one
    copy less than through a numpy array)."""

    __slots__ = ("dtype", "shape", "data")

    def __init__(self, dtype, shape, data):
        self.dtype, self.shape, self.data = np.dtype(dtype), tuple(shape), data
        if self.dtype.hasobject:
            raise ItemFormatError(f"a cached array field of dtype {self.dtype}, which holds "
                                  f"Python objects")

    def array(self) -> np.ndarray:
        # bytearray: a private, writable copy (users write into items).
        return np.frombuffer(bytearray(self.data), dtype=self.dtype).reshape(self.shape)


def tree_of(fields: Sequence) -> Any:
    """The structure tree of an item's fields, checked against the codec's
    schema (``_item_tree.check``): nothing stored is trusted before that.
    Raises ItemFormatError naming what is wrong."""
    tree_bytes, kinds = None, []
    for f in fields:
        if f[0] == TREE:
            tree_bytes = bytes(f[2] if len(f) == 3 else f[4])
        else:
            kinds.append((f[0], int(f[1])))
    if tree_bytes is None:
        raise ItemFormatError("the item's fields have no __tree__ field "
                              "(not an ssdfeed.cache item)")
    return _checked_tree(tree_bytes, tuple(kinds))


@functools.lru_cache(maxsize=64)
def _checked_tree(tree_bytes: bytes, kinds: Tuple[Tuple[str, int], ...]) -> Any:
    # Items of one dataset share a tree: each is parsed and checked once.
    # (Cached trees are never mutated: _build only reads them.)
    names = dict(kinds)
    if len(names) != len(kinds):
        raise ItemFormatError("the item has two fields of one name")
    try:
        tree = json.loads(tree_bytes.decode("ascii"))
    except (UnicodeDecodeError, ValueError, RecursionError) as e:
        raise ItemFormatError(f"the item's __tree__ is not ASCII JSON ({e})") from None
    _item_tree.check(tree, names)
    return tree


def leaf_names(tree: Any) -> List[str]:
    """The names of the tree's leaves, in field order."""
    out: List[str] = []
    _walk_leaves(tree, out)
    return out


def leaf_nodes(tree: Any) -> List[dict]:
    """The tree's leaf nodes ({"L": name, "k": tag, ...}), in field order."""
    out: List[dict] = []
    _walk_leaves(tree, out, nodes=True)
    return out


def _walk_leaves(node, out, nodes=False) -> None:
    if isinstance(node, dict):
        if "L" in node:
            out.append(node if nodes else node["L"])
        elif "T" in node or "l" in node or "v" in node:
            for v in node.get("T", node.get("l", node.get("v"))):
                _walk_leaves(v, out, nodes)
        elif "d" in node or "od" in node:
            for _, v in node.get("d", node.get("od")):
                _walk_leaves(v, out, nodes)


def decode(fields: Sequence) -> Any:
    """The item that ``encode`` made these fields from (same values, same types).

    Accepts encode's ``(name, kind, payload)`` triples or ``ItemEntry.get``'s
    ``(name, kind, dtype, shape, data)`` tuples. Stored data that is not such
    an item is an ItemFormatError (never anything it names executed)."""
    tree = tree_of(fields)
    try:
        leaves: Dict[str, Any] = dict(_field_value(f) for f in fields if f[0] != TREE)
        return _build(tree, lambda node: _leaf_value(node, leaves[node["L"]]))
    except ItemFormatError:
        raise
    except _STORED_DATA_ERRORS as e:
        raise ItemFormatError(f"the item's stored fields do not match its tree "
                              f"({type(e).__name__}: {e})") from None


# What reading values out of malformed stored bytes can raise (numpy, PIL,
# torch, base64, struct on data that the tree check cannot see into).
_STORED_DATA_ERRORS = (ValueError, TypeError, KeyError, IndexError, OverflowError,
                       RecursionError, struct.error, binascii.Error, UnicodeError,
                       SyntaxError, MemoryError, ImportError)


def unflatten(tree: Any, leaves: Mapping[str, Any]) -> Any:
    """The tree with each leaf replaced by ``leaves[name]`` (as given: the fast
    path passes each leaf's stacked batch), containers rebuilt with their
    types. Constant parts of the tree (None, big ints) stay as they are.
    tree must come from ``tree_of`` (checked)."""
    return _build(tree, lambda node: leaves[node["L"]])


def _key_decode(k):
    if not isinstance(k, dict):
        return k
    if "i" in k:
        return int(k["i"])
    if "f" in k:
        return struct.unpack("<d", bytes.fromhex(k["f"]))[0]
    if "b" in k:
        return base64.b64decode(k["b"])
    return tuple(_key_decode(e) for e in k["T"])


def _build(node, leaf):
    if not isinstance(node, dict):
        return node  # None (the only inline scalar)
    if "L" in node:
        return leaf(node)
    if "T" in node:
        return tuple(_build(v, leaf) for v in node["T"])
    if "l" in node:
        return [_build(v, leaf) for v in node["l"]]
    if "d" in node:
        return {_key_decode(k): _build(v, leaf) for k, v in node["d"]}
    if "od" in node:
        return collections.OrderedDict((_key_decode(k), _build(v, leaf)) for k, v in node["od"])
    if "bigint" in node:
        return int(node["bigint"])
    if "nt" in node:
        cls = _item_tree.loaded_namedtuple(node["nt"], node.get("f"), len(node["v"]))
        # tuple.__new__, as namedtuple's own __new__ does: no code of the
        # class (or of a subclass) runs.
        return tuple.__new__(cls, [_build(v, leaf) for v in node["v"]])
    raise ItemFormatError(f"unknown node in an ssdfeed.cache item tree: {sorted(node)}")


# ------------------------------------------------------------------ leaves
# A leaf's value from its stored field, written once for both readers: one
# item (decode) and a batch of items (the C++ loader's, ItemLoader: a leaf
# stacked over the batch, or a list of per-item values).


def _text(b) -> str:
    return bytes(b).decode("utf-8", "surrogatepass")


# Bytes leaves (kind 6): the value from the stored bytes.
_BYTES_LEAVES = {"str": _text, "bytes": bytes, "bytearray": bytearray}


def _leaf_value(node: dict, value):
    """One item's leaf from its field (_field_value's)."""
    tag = node["k"]
    if tag in _BYTES_LEAVES:
        return _BYTES_LEAVES[tag](value)
    if isinstance(value, _RawArray) and tag in ("int", "float", "bool", "complex"):
        value = np.frombuffer(value.data, dtype=value.dtype)[0]
    if tag == "int":
        return int(value)
    if tag == "float":
        return float(value)
    if tag == "bool":
        return bool(value)
    if tag == "complex":
        return complex(value)
    if tag == "pil":
        return _pil_value(node, value)
    if isinstance(value, _RawArray):
        value = value.array()
    arr = _restore_array(node, value)
    if tag == "np":
        return arr[()]
    if tag == "pt":
        return _tensor_value(node, arr)
    if tag == "tv":
        return _tv_value(node, _tensor_value(node, arr))
    return arr


def batch_leaf(node: dict, value, tensors: bool = False):
    """A leaf's batch as the C++ loader gives it (an array stacked over the
    batch, or a list of per-item values) as ItemLoader serves it: bytes
    leaves as lists of their values, structured dtypes restored, and with
    ``tensors`` arrays as torch tensors (of the stored torch dtype where
    numpy has none; an array torch cannot hold stays one)."""
    tag = node["k"]
    if tag in _BYTES_LEAVES:
        return [_BYTES_LEAVES[tag](v) for v in value]
    if isinstance(value, list) and value and isinstance(value[0], bytes):
        return list(value)  # PIL images of other modes, as given
    if "sd" in node:  # structured dtypes travel as opaque records
        dt = structured_dtype(node)
        value = _each(value, lambda a: a.view(dt))
    if tensors:
        value = _each(value, lambda a: _batch_tensor(node, a))
    return value


def _each(value, fn):
    return [fn(v) for v in value] if isinstance(value, list) else fn(value)


def _batch_tensor(node: dict, a):
    if not isinstance(a, np.ndarray):
        return a
    try:
        return _tensor(node, a)
    except TypeError:  # no torch dtype (strings, big-endian): as it is
        return a


def structured_dtype(node: dict) -> np.dtype:
    """The structured dtype a leaf's "sd" describes (a literal, never code);
    one holding Python objects is refused."""
    dt = np.lib.format.descr_to_dtype(ast.literal_eval(node["sd"]))
    if dt.hasobject:
        raise ItemFormatError(f"the cached item's field {node['L']} has dtype {dt}, which holds "
                              f"Python objects")
    return dt


def _restore_array(node: dict, arr: np.ndarray) -> np.ndarray:
    if "sd" in node:
        arr = arr.view(structured_dtype(node))
    if node.get("F"):
        arr = np.asfortranarray(arr)
    return arr


def _tensor_value(node: dict, arr: np.ndarray):
    """One item's tensor: its own memory (users write into items)."""
    return _tensor(node, arr if arr.flags.writeable else arr.copy())


def _tensor(node: dict, arr: np.ndarray):
    import torch

    t = torch.from_numpy(arr)
    return t.view(_item_tree.torch_dtype(node["dt"])) if "dt" in node else t


def _tv_value(node: dict, t):
    """A torchvision tv_tensor of the node's kind (from the fixed allow-list,
    out of the loaded torchvision.tv_tensors only) around tensor t."""
    tv = _item_tree.tv_module()
    cls = vars(tv)[node["tv"]]
    if node["tv"] == "BoundingBoxes":
        fmt = vars(tv)["BoundingBoxFormat"][node["fmt"]]
        return cls(t, format=fmt, canvas_size=tuple(node["cs"]))
    if node["tv"] == "KeyPoints":
        return cls(t, canvas_size=tuple(node["cs"]))
    return cls(t)


def _pil_value(node: dict, value):
    from PIL import Image

    mode = node["m"]
    if isinstance(value, (np.ndarray, _RawArray)):
        if len(value.shape) not in (2, 3):
            raise ItemFormatError(f"the cached item's field {node['L']}: a PIL image's pixels "
                                  f"of shape {value.shape}")
        size = (value.shape[1], value.shape[0])
        data = value.data if isinstance(value, _RawArray) else value.tobytes()
    else:
        size = tuple(node["s"])
        data = value
    _item_tree.check_pil_size(size[0], size[1], len(data), f"field {node['L']}")
    img = Image.frombytes(mode, size, data) if size[0] and size[1] else Image.new(mode, size)
    if "pal" in node:
        img.putpalette(base64.b64decode(node["pal"]), node["pm"])
    for k, v in node.get("i", {}).items():
        img.info[k] = _info_decode(v)
    return img
