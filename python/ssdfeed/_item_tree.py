"""The stored item tree of ``ssdfeed.cache``: its vocabulary, its check, and
the only classes a tree may name.

A cache entry's bytes are data that another process wrote: a job of another
uid in a group-shared root, an ``ssdfeed cache import`` stream from another
machine, any process of our own uid. So reading an item never imports a
module, never calls a callable that the tree names, and never builds a value
before the whole tree has been checked against the schema below
(``check``). What a tree can name is closed:

- a namedtuple class, only one already loaded in this process (looked up in
  ``sys.modules`` and class dicts, never imported, no ``__getattr__`` hook)
  whose ``_fields`` equal the stored field names; it is built with
  ``tuple.__new__`` (no ``__new__``/``__init__`` of the class runs);
- a torchvision tv_tensor kind, from the fixed ``TV_KINDS``, only when
  ``torchvision.tv_tensors`` is already loaded;
- a torch dtype by name, only an attribute of the loaded ``torch`` module
  that is a ``torch.dtype``;
- a PIL mode from ``PIL_MODES``, with sizes bounded by the leaf's bytes and
  by PIL's own decompression-bomb limit.

Any other tree is an ``ItemFormatError`` naming what is wrong.
"""

from __future__ import annotations

import base64
import binascii
import inspect
import os
import re
import sys
from typing import Any, Mapping, Optional

KIND_ARRAY = 5  # FieldKind::kArray: a .npy payload
KIND_BYTES = 6  # FieldKind::kBytes: raw bytes

# Deeper trees are refused: nesting this deep is no dataset's item, and the
# walks below recurse once per level.
MAX_DEPTH = 64
# The longest structured-dtype descriptor ("sd") read; numpy's own .npy
# header limit.
MAX_DESCR = 10000

# Leaf tags and the field kinds each may have.
_LEAF_KINDS = {
    "str": (KIND_BYTES,),
    "bytes": (KIND_BYTES,),
    "bytearray": (KIND_BYTES,),
    "int": (KIND_ARRAY,),
    "float": (KIND_ARRAY,),
    "bool": (KIND_ARRAY,),
    "complex": (KIND_ARRAY,),
    "nd": (KIND_ARRAY,),
    "np": (KIND_ARRAY,),
    "pt": (KIND_ARRAY,),
    "tv": (KIND_ARRAY,),
    "pil": (KIND_ARRAY, KIND_BYTES),
}
# The keys a leaf node of each tag may hold besides "L" and "k".
_LEAF_EXTRAS = {
    "nd": {"sd", "F"},
    "np": {"sd"},
    "pt": {"dt", "F"},
    "tv": {"dt", "F", "tv", "fmt", "cs"},
    "pil": {"m", "i", "pm", "pal", "s"},
}

# PIL modes a stored image may have (Pillow's modes, rawmodes excluded).
PIL_MODES = frozenset({
    "1", "L", "LA", "La", "P", "PA", "RGB", "RGBA", "RGBa", "RGBX", "CMYK", "YCbCr", "LAB",
    "HSV", "I", "F", "I;16", "I;16L", "I;16B", "I;16N", "BGR;15", "BGR;16", "BGR;24",
})

# torchvision tv_tensor kinds that can be cached: a tensor plus the listed
# metadata. Rebuilt from torchvision.tv_tensors' own namespace, by these
# names only.
TV_KINDS = frozenset({"Image", "Video", "Mask", "BoundingBoxes", "KeyPoints"})
TV_BOX_FORMATS = frozenset({"XYXY", "XYWH", "CXCYWH", "XYXYXYXY", "XYWHR", "CXCYWHR"})

_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_DIGITS = re.compile(r"^-?[0-9]{1,4300}$")
_HEX_DOUBLE = re.compile(r"^[0-9a-f]{16}$")
_FLOAT_HEX = re.compile(r"^-?(0x[0-9a-f]\.?[0-9a-f]{0,13}p[+-][0-9]{1,4}|inf|nan)$")


class ItemFormatError(ValueError):
    """A stored item that the item codec refuses to read: a malformed tree,
    a field it does not name, or a class, dtype or size outside what a
    cached item may hold. Nothing of the item is built."""


def _fail(where: str, what: str):
    raise ItemFormatError(f"{where}: {what}")


# ------------------------------------------------------------- the check


def check(tree: Any, kinds: Mapping[str, int]) -> None:
    """Raises ItemFormatError unless tree is a well-formed item tree whose
    leaves are exactly the fields in kinds ({name: field kind}), "0", "1",
    ... in order, each with a kind its tag allows, and whose namedtuple
    classes and tv_tensors are loaded in this process."""
    seen = []
    _node(tree, "item", 0, kinds, seen)
    if len(seen) != len(kinds) or any(n != str(j) for j, n in enumerate(seen)):
        _fail("item", f"the tree's leaves {seen[:8]} are not the item's fields "
                      f"{sorted(kinds)[:8]}")


def _node(node, where: str, depth: int, kinds, seen) -> None:
    if depth > MAX_DEPTH:
        _fail(where, f"nested deeper than {MAX_DEPTH} levels")
    if node is None:
        return
    if not isinstance(node, dict) or len(node) == 0:
        _fail(where, f"a tree node must be null or an object, not {_show(node)}")
    if "L" in node:
        return _leaf(node, where, kinds, seen)
    keys = set(node)
    if keys in ({"T"}, {"l"}):
        seq = _list(node[next(iter(keys))], where)
        for j, v in enumerate(seq):
            _node(v, f"{where}[{j}]", depth + 1, kinds, seen)
    elif keys in ({"d"}, {"od"}):
        for j, pair in enumerate(_list(node[next(iter(keys))], where)):
            if not isinstance(pair, list) or len(pair) != 2:
                _fail(where, f"dict entry {j} is not a [key, value] pair")
            _key(pair[0], f"{where} key {j}", depth + 1)
            _node(pair[1], f"{where}[{j}]", depth + 1, kinds, seen)
    elif keys == {"bigint"}:
        if not isinstance(node["bigint"], str) or not _DIGITS.match(node["bigint"]):
            _fail(where, "bigint is not a decimal integer string")
    elif keys in ({"nt", "v"}, {"nt", "v", "f"}):
        _namedtuple_node(node, where)
        for j, v in enumerate(node["v"]):
            _node(v, f"{where}.{j}", depth + 1, kinds, seen)
    else:
        _fail(where, f"unknown node {_show(sorted(keys))}")


def _leaf(node: dict, where: str, kinds, seen) -> None:
    name, tag = node.get("L"), node.get("k")
    if not isinstance(name, str) or name not in kinds:
        _fail(where, f"leaf {_show(name)} names no field of the item")
    where = f"{where} (field {name})"
    if not _member(tag, _LEAF_KINDS):
        _fail(where, f"unknown leaf type {_show(tag)}")
    if kinds[name] not in _LEAF_KINDS[tag]:
        _fail(where, f"a {tag} leaf cannot be a field of kind {kinds[name]}")
    extra = set(node) - {"L", "k"} - _LEAF_EXTRAS.get(tag, set())
    if extra:
        _fail(where, f"a {tag} leaf does not take {sorted(extra)}")
    seen.append(name)
    if "sd" in node:
        _descr(node["sd"], where)
    if "F" in node and node["F"] not in (0, 1):
        _fail(where, "F (Fortran order) must be 0 or 1")
    if "dt" in node and (not isinstance(node["dt"], str) or not _NAME.match(node["dt"])):
        _fail(where, f"dt {_show(node['dt'])} is not a torch dtype name")
    if tag == "tv":
        _tv_node(node, where)
    if tag == "pil":
        _pil_node(node, where, kinds[name])


def _descr(sd, where: str) -> None:
    if not isinstance(sd, str) or len(sd) > MAX_DESCR:
        _fail(where, f"sd (structured dtype) must be a string of at most {MAX_DESCR} "
                     "characters")


def _tv_node(node: dict, where: str) -> None:
    kind = node.get("tv")
    if not _member(kind, TV_KINDS):
        _fail(where, f"tv {_show(kind)} is not one of the tv_tensors kinds {sorted(TV_KINDS)}")
    box = kind == "BoundingBoxes"
    if box != ("fmt" in node):
        _fail(where, "fmt is the metadata of BoundingBoxes (and only of them)")
    if (box or kind == "KeyPoints") != ("cs" in node):
        _fail(where, "cs is the metadata of BoundingBoxes and KeyPoints (and only of them)")
    tv_module()  # loaded, or the item cannot be rebuilt here
    if box and not _member(node["fmt"], TV_BOX_FORMATS):
        _fail(where, f"bounding box format {_show(node['fmt'])} is not one of "
                     f"{sorted(TV_BOX_FORMATS)}")
    if "cs" in node:
        cs = node["cs"]
        if not isinstance(cs, list) or len(cs) != 2 or not all(_small_int(v) for v in cs):
            _fail(where, "cs (canvas size) must be [height, width]")


def _pil_node(node: dict, where: str, kind: int) -> None:
    if not _member(node.get("m"), PIL_MODES):
        _fail(where, f"PIL mode {_show(node.get('m'))} is not one of Pillow's modes")
    if ("s" in node) != (kind == KIND_BYTES):
        _fail(where, "s (size) is given for images stored as bytes, and only for them")
    if "s" in node:
        s = node["s"]
        if not isinstance(s, list) or len(s) != 2 or not all(_small_int(v) for v in s):
            _fail(where, "s (size) must be [width, height]")
    if ("pal" in node) != ("pm" in node):
        _fail(where, "pal and pm (palette and its mode) come together")
    if "pal" in node:
        if not _member(node["pm"], PIL_MODES) or not isinstance(node["pal"], str):
            _fail(where, "pm must be a PIL mode and pal a base64 string")
        _b64(node["pal"], where)
    if "i" in node:
        info = node["i"]
        if not isinstance(info, dict):
            _fail(where, "i (PIL info) must be an object")
        for k, v in info.items():
            _info(v, f"{where} info {k!r}", 0)


def _info(v, where: str, depth: int) -> None:
    if depth > MAX_DEPTH:
        _fail(where, f"nested deeper than {MAX_DEPTH} levels")
    if v is None or isinstance(v, (bool, str)):
        return
    if not isinstance(v, dict) or len(v) != 1:
        _fail(where, f"not a stored info value: {_show(v)}")
    (tag, x), = v.items()
    if tag == "i" and isinstance(x, int) and not isinstance(x, bool):
        return
    if tag == "f" and isinstance(x, str) and _FLOAT_HEX.match(x):
        return
    if tag == "b" and isinstance(x, str):
        return _b64(x, where)
    if tag in ("T", "l") and isinstance(x, list):
        for e in x:
            _info(e, where, depth + 1)
        return
    _fail(where, f"not a stored info value: {_show(v)}")


def _key(k, where: str, depth: int) -> None:
    if depth > MAX_DEPTH:
        _fail(where, f"nested deeper than {MAX_DEPTH} levels")
    if k is None or isinstance(k, (bool, str)):
        return
    if not isinstance(k, dict) or len(k) != 1:
        _fail(where, f"not a stored dict key: {_show(k)}")
    (tag, x), = k.items()
    if tag == "i" and isinstance(x, str) and _DIGITS.match(x):
        return
    if tag == "f" and isinstance(x, str) and _HEX_DOUBLE.match(x):
        return
    if tag == "b" and isinstance(x, str):
        return _b64(x, where)
    if tag == "T" and isinstance(x, list):
        for e in x:
            _key(e, where, depth + 1)
        return
    _fail(where, f"not a stored dict key: {_show(k)}")


def _namedtuple_node(node: dict, where: str) -> None:
    path, values = node["nt"], node["v"]
    if not isinstance(path, str) or not _class_path(path):
        _fail(where, f"namedtuple {_show(path)} is not a module:Class path")
    _list(values, where)
    if "f" in node:
        names = node["f"]
        if not isinstance(names, list) or not all(isinstance(n, str) for n in names) \
                or len(names) != len(values):
            _fail(where, f"namedtuple {path}: f must list one field name per value")
    # The class must be one this process has loaded, now: a tree that names
    # any other is refused before anything is built (and before the fast
    # path serves a batch).
    loaded_namedtuple(path, node.get("f"), len(values))


def _class_path(path: str) -> bool:
    mod, sep, qual = path.partition(":")
    return bool(sep) and all(_NAME.match(p) for p in mod.split(".") + qual.split("."))


def _list(x, where: str) -> list:
    if not isinstance(x, list):
        _fail(where, f"expected a list, not {_show(x)}")
    return x


def _b64(text: str, where: str) -> None:
    try:
        base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):
        _fail(where, "not valid base64")


def _member(x, allowed) -> bool:
    # A str test first: a stored list or object is unhashable.
    return isinstance(x, str) and x in allowed


def _small_int(v) -> bool:
    return isinstance(v, int) and not isinstance(v, bool) and 0 <= v < 2**31


def _show(x) -> str:
    text = repr(x)
    return text if len(text) <= 80 else text[:77] + "..."


# ---------------------------------------------- what a tree may name, rebuilt


def loaded_namedtuple(path: str, names: Optional[list], n: int):
    """The namedtuple class at module:qualname, if its module is loaded in
    this process and the class's fields match (names, or n values for a tree
    written before field names were stored). Never imports."""
    mod, _, qual = path.partition(":")
    obj = sys.modules.get(mod) or _script_as(mod)
    if obj is None:
        raise ItemFormatError(
            f"the cached item holds a namedtuple {path}, but module {mod} is not loaded in this "
            f"process; ssdfeed never imports a module that cached data names: import {mod} "
            f"before reading the item")
    for part in qual.split("."):
        obj = _own_attr(obj, part)
        if obj is None:
            raise ItemFormatError(f"the cached item holds a namedtuple {path}, which module "
                                  f"{mod} does not define")
    fields = _static(obj, "_fields") if isinstance(obj, type) else None
    if not (isinstance(obj, type) and issubclass(obj, tuple) and isinstance(fields, tuple)):
        raise ItemFormatError(f"the cached item names {path} as a namedtuple, which it is not")
    stored = list(names) if names is not None else None
    if (stored is not None and list(fields) != stored) or len(fields) != n:
        raise ItemFormatError(
            f"the cached item's namedtuple {path} has fields {stored or n}, the loaded class "
            f"{list(fields)}: the class changed since the item was stored (ssdfeed cache rm "
            f"the entry, or change its key)")
    return obj


def _script_as(mod: str):
    """The running script's module when it is file mod.py: ``ssdfeed warm
    --python train:make`` stores train:Point, ``python train.py`` has the
    class in __main__ (ssdfeed.cache names entries the same way)."""
    main = sys.modules.get("__main__")
    path = getattr(main, "__file__", None)
    if path and os.path.splitext(os.path.basename(path))[0] == mod:
        return main
    return None


def _own_attr(obj, name: str):
    """obj's attribute from its own (or its classes') dicts: no module
    __getattr__, descriptor or property runs."""
    try:
        return inspect.getattr_static(obj, name)
    except AttributeError:
        return None


def _static(cls, name: str):
    for k in cls.__mro__:
        if name in k.__dict__:
            return k.__dict__[name]
    return None


def torch_dtype(name: str):
    """torch.<name> if it is a dtype of the loaded torch."""
    torch = sys.modules.get("torch")
    dt = vars(torch).get(name) if torch is not None else None
    if torch is None or not isinstance(dt, torch.dtype):
        raise ItemFormatError(f"the cached item holds a tensor of dtype {name!r}, which is not "
                              f"a dtype of torch {getattr(torch, '__version__', '(not loaded)')}")
    return dt


def tv_module():
    """torchvision.tv_tensors, if loaded in this process. Never imported
    from here: a cached item does not choose what this process imports."""
    mod = sys.modules.get("torchvision.tv_tensors")
    if mod is None:
        raise ItemFormatError(
            "the cached item holds torchvision tv_tensors, but torchvision.tv_tensors is not "
            "loaded in this process: import it (from torchvision import tv_tensors) before "
            "reading the item")
    return mod


def pil_size_limit() -> Optional[int]:
    """The most pixels a stored PIL image may have: twice PIL's
    MAX_IMAGE_PIXELS, the size at which PIL.Image.open itself refuses an
    image as a decompression bomb; None when the user turned PIL's limit off."""
    from PIL import Image

    limit = Image.MAX_IMAGE_PIXELS
    return None if limit is None else 2 * int(limit)


def check_pil_size(width: int, height: int, nbytes: int, where: str = "item") -> None:
    """Refuses a PIL image larger than PIL's own limit, or larger than its
    stored bytes can hold (each pixel takes at least one bit, each row at
    least a byte; an empty image gets no more than 65535 rows or columns)."""
    pixels = width * height
    limit = pil_size_limit()
    if limit is not None and pixels > limit:
        _fail(where, f"a PIL image of {width}x{height} pixels exceeds PIL's limit of {limit} "
                     f"(2 x PIL.Image.MAX_IMAGE_PIXELS)")
    if pixels == 0:
        if max(width, height) > 65535:
            _fail(where, f"an empty PIL image of {width}x{height}")
    elif pixels > 8 * nbytes or height > nbytes:
        _fail(where, f"a PIL image of {width}x{height} pixels cannot come from {nbytes} bytes")
