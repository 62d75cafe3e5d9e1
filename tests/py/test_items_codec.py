"""The item codec of ssdfeed.cache (python/ssdfeed/_items.py): any supported
item comes back equal, bit for bit, with the same types; an unsupported value
is named by its place."""

import collections
import math
import struct

import numpy as np
import pytest

from ssdfeed import _items

Point = collections.namedtuple("Point", "x y")


def roundtrip(item):
    fields = _items.encode(item)
    assert fields[0][0] == "__tree__" and fields[0][1] == _items.KIND_BYTES
    assert [f[0] for f in fields[1:]] == [str(i) for i in range(len(fields) - 1)]
    return _items.decode(fields)


def as_get(fields):
    """The fields as ItemEntry.get returns them: (name, kind, dtype, shape, data)."""
    out = []
    for name, kind, payload in fields:
        if kind == _items.KIND_ARRAY:
            arr = np.lib.format.read_array(__import__("io").BytesIO(payload))
            out.append((name, kind, arr.dtype.str, arr.shape, arr.tobytes()))
        else:
            out.append((name, kind, "|u1", (len(payload),), payload))
    return out


def same(a, b):
    """a and b equal with the same types, recursively; floats by bits."""
    assert type(a) is type(b), (type(a), type(b))
    if isinstance(a, np.ndarray):
        assert a.dtype == b.dtype and a.shape == b.shape
        assert a.tobytes() == b.tobytes()
        assert a.flags.f_contiguous == b.flags.f_contiguous or a.ndim < 2
    elif isinstance(a, np.generic):
        assert a.dtype == b.dtype and a.tobytes() == b.tobytes()
    elif type(a).__name__ == "Tensor":
        assert a.dtype == b.dtype and a.shape == b.shape and not b.requires_grad
        import torch

        assert torch.equal(a.view(torch.uint8) if a.dtype == torch.bfloat16 else a, b.view(torch.uint8) if b.dtype == torch.bfloat16 else b) or (a.dtype.is_floating_point and torch.equal(a.isnan(), b.isnan()))
    elif type(a).__module__.startswith("PIL"):
        assert (a.mode, a.size, a.tobytes()) == (b.mode, b.size, b.tobytes())
        assert a.getpalette() == b.getpalette()
    elif isinstance(a, float):
        assert struct.pack("<d", a) == struct.pack("<d", b)
    elif isinstance(a, dict):
        assert list(a) == list(b)
        for k in a:
            same(a[k], b[k])
    elif isinstance(a, (list, tuple)):
        assert len(a) == len(b)
        for x, y in zip(a, b):
            same(x, y)
    else:
        assert a == b


SCALARS = [
    None, True, False, 0, -1, 2**63 - 1, -(2**63), 2**64, -(10**40), 1.5, -0.0, math.inf,
    -math.inf, math.nan, struct.unpack("<d", bytes.fromhex("0100000000f87fff"))[0],
    "", "héllo ✓", "\udcff lone surrogate", b"", b"\x00\xff", bytearray(b"ab"), 3 + 4j,
]


@pytest.mark.parametrize("value", SCALARS, ids=repr)
def test_scalars_round_trip(value):
    same(value, roundtrip(value))
    same(value, _items.decode(as_get(_items.encode(value))))


ARRAYS = {
    "f32": np.arange(12, dtype=np.float32).reshape(3, 4),
    "0d": np.array(7, dtype=np.int16),
    "empty": np.zeros((0, 3), dtype=np.float64),
    "bool": np.array([[True, False]]),
    "bigendian": np.arange(5, dtype=">i4"),
    "f16": np.array([1.5, np.nan], dtype=np.float16),
    "complex": np.array([1 + 2j], dtype=np.complex64),
    "U": np.array(["a", "héllo"]),
    "S": np.array([b"x", b"yz"]),
    "datetime": np.array(["2020-01-01T00:00:00.000000001"], dtype="datetime64[ns]"),
    "timedelta": np.array([5], dtype="timedelta64[s]"),
    "fortran": np.asfortranarray(np.arange(6, dtype=np.uint8).reshape(2, 3)),
    "structured": np.array([(1, 2.5)], dtype=[("a", "<i4"), ("b", "<f8")]),
    "void": np.array([b"ab"], dtype="V2"),
    "u64": np.array([2**64 - 1], dtype=np.uint64),
    "5d": np.ones((1, 2, 1, 2, 1), dtype=np.int8),
}


@pytest.mark.parametrize("name", sorted(ARRAYS))
def test_arrays_round_trip(name):
    arr = ARRAYS[name]
    same(arr, roundtrip(arr))
    same(arr, _items.decode(as_get(_items.encode(arr))))


def test_non_contiguous_views_come_back_equal_and_writable():
    base = np.arange(24, dtype=np.int32).reshape(4, 6)
    view = base[::2, 1::2]
    out = roundtrip(view)
    assert out.dtype == view.dtype and np.array_equal(out, view)
    out[0, 0] = -1  # a private, writable copy
    assert base[0, 1] == 1
    out2 = _items.decode(as_get(_items.encode(view)))
    out2[0, 0] = -1


def test_numpy_scalars_keep_their_type():
    for v in [np.float32(1.25), np.int8(-3), np.bool_(True), np.uint64(2**64 - 1), np.str_("ab"), np.datetime64("2021-02-03")]:
        same(v, roundtrip(v))


def test_object_arrays_are_refused_with_their_place():
    with pytest.raises(TypeError, match=r"item\[0\]\[\"x\"\]: array of dtype object"):
        _items.encode([{"x": np.array([1, "a"], dtype=object)}])


def test_containers_keep_types_and_key_order():
    item = {"b": [1, (2.0, None)], "a": {3: "three", 1: b"one"}, 7: (), (1, "t"): [], None: 0,
            True: 1, 2.5: "f", b"k": 1}
    out = roundtrip(item)
    same(item, out)
    assert list(out) == list(item)
    od = collections.OrderedDict([("z", 1), ("a", 2)])
    same(od, roundtrip(od))


def test_namedtuple_round_trips():
    p = Point(np.int64(1), [2.0])
    out = roundtrip(p)
    assert type(out) is Point
    same(tuple(p), tuple(out))


def test_local_namedtuple_is_refused():
    Local = collections.namedtuple("Local", "a")
    with pytest.raises(TypeError, match=r"item\[0\]: namedtuple .*Local"):
        _items.encode([Local(1)])


@pytest.mark.parametrize(
    "item, where",
    [
        ([0, {"boxes": {1, 2}}], r'item\[1\]\["boxes"\]: set'),
        ({"a": object()}, r'item\["a"\]: object'),
        ((1, 2, lambda: 0), r"item\[2\]: function"),
        ({frozenset(): 1}, r"item: dict key frozenset\(\) of type frozenset"),
        (Point(1, {2}), r"item\.y: set"),
    ],
)
def test_unsupported_values_are_named(item, where):
    with pytest.raises(TypeError, match=where):
        _items.encode(item)


def test_subclasses_of_builtins_are_refused_not_silently_changed():
    class MyInt(int):
        pass

    with pytest.raises(TypeError, match=r"item\[0\]: .*MyInt"):
        _items.encode([MyInt(3)])


def test_torch_tensors_round_trip():
    torch = pytest.importorskip("torch")
    tensors = [
        torch.arange(6, dtype=torch.float32).reshape(2, 3),
        torch.tensor(3, dtype=torch.int64),
        torch.tensor([True, False]),
        torch.tensor([1.5, -0.0], dtype=torch.bfloat16),
        torch.tensor([1.5], dtype=torch.float16),
        torch.zeros(0, 4, dtype=torch.uint8),
        torch.ones(2, 2, requires_grad=True),
        torch.arange(6.0).reshape(2, 3).t(),
        torch.tensor([1 + 2j], dtype=torch.complex64),
    ]
    for t in tensors:
        out = roundtrip(t)
        assert type(out) is torch.Tensor and out.dtype == t.dtype and out.shape == t.shape
        assert not out.requires_grad
        assert torch.equal(out.detach().view(torch.uint8) if t.dtype == torch.bfloat16 else out, t.detach().view(torch.uint8) if t.dtype == torch.bfloat16 else t.detach())
        out2 = _items.decode(as_get(_items.encode(t)))
        assert out2.dtype == t.dtype and out2.shape == t.shape


def test_gpu_or_sparse_tensors_are_named():
    torch = pytest.importorskip("torch")
    with pytest.raises(TypeError, match=r"item\[0\]: torch tensor with layout"):
        _items.encode([torch.eye(2).to_sparse()])


PIL_MODES = ["L", "RGB", "RGBA", "P", "I;16", "I", "F", "1", "LA", "CMYK", "YCbCr", "PA", "RGBX", "HSV", "LAB"]


@pytest.mark.parametrize("mode", PIL_MODES)
def test_pil_images_round_trip(mode):
    Image = pytest.importorskip("PIL.Image")
    rng = np.random.default_rng(0)
    rgb = Image.fromarray(rng.integers(0, 256, (5, 7, 3), dtype=np.uint8))
    img = rgb.convert(mode) if mode not in ("I;16", "HSV", "LAB") else None
    if mode == "I;16":
        img = Image.frombytes("I;16", (7, 5), rng.integers(0, 65536, 35, dtype="<u2").tobytes())
    elif mode in ("HSV", "LAB"):
        img = Image.frombytes(mode, (7, 5), rng.integers(0, 256, 105, dtype=np.uint8).tobytes())
    img.info["dpi"] = (72, 72)
    img.info["icc_profile"] = b"\x00profile"
    for fields in (_items.encode(img), as_get(_items.encode(img))):
        out = _items.decode(fields)
        assert isinstance(out, Image.Image)
        same(img, out)
        assert out.info["dpi"] == (72, 72) and out.info["icc_profile"] == b"\x00profile"


def test_pil_palette_with_transparency_and_jpeg_files(tmp_path):
    Image = pytest.importorskip("PIL.Image")
    img = Image.fromarray(np.arange(48, dtype=np.uint8).reshape(4, 4, 3)).convert("P")
    img.info["transparency"] = 3
    out = roundtrip(img)
    assert out.info["transparency"] == 3 and out.getpalette() == img.getpalette()
    path = tmp_path / "x.jpg"
    Image.fromarray(np.full((6, 8, 3), 90, dtype=np.uint8)).save(path, quality=90)
    with Image.open(path) as jpeg:
        jpeg.load()
        out = roundtrip(jpeg)
        assert (out.mode, out.size, out.tobytes()) == (jpeg.mode, jpeg.size, jpeg.tobytes())
        assert out.info.get("jfif") == jpeg.info.get("jfif")


def test_pil_empty_image():
    Image = pytest.importorskip("PIL.Image")
    img = Image.new("RGB", (0, 3))
    same(img, roundtrip(img))


def test_mixed_item_shares_one_tree_across_values():
    # Items that differ only in their values share a tree, so the C++ loader
    # can stack each leaf over a batch.
    a = _items.encode((np.zeros(3, np.float32), 1, {"y": 0.5, "s": "x"}))
    b = _items.encode((np.ones(3, np.float32), 2, {"y": 1.5, "s": "yy"}))
    assert _items.tree_of(a) == _items.tree_of(b)


def test_unflatten_replaces_leaves_with_batches():
    item = {"img": np.zeros((2, 2), np.uint8), "meta": (3, None, [1.5])}
    fields = _items.encode(item)
    tree = _items.tree_of(fields)
    names = _items.leaf_names(tree)
    assert names == ["0", "1", "2"]
    batch = _items.unflatten(tree, {n: f"batch{n}" for n in names})
    assert batch == {"img": "batch0", "meta": ("batch1", None, ["batch2"])}
    assert [n["k"] for n in _items.leaf_nodes(tree)] == ["nd", "int", "float"]


def test_decode_refuses_fields_without_a_tree():
    with pytest.raises(ValueError, match="__tree__"):
        _items.decode([("0", _items.KIND_BYTES, b"x")])
