"""Golden bytes of the item formats Python writes into cache entries
(docs/cache-format.md, "Items"): one ssdfeed.cache item and one
ssdfeed.tf.cache element, each as the field section of its record, checked
in under tests/py/golden/. Each must decode to its known value, and today's
writer must store exactly those bytes, with the entry's documented source,
identity and spec. A change to either format fails here until the doc, the
golden files and (for a change readers cannot take) the spec or identity
version change with it.

Regenerate after a deliberate format change (and say so in cache-format.md):
    python tests/py/test_items_golden.py --write
"""
import collections
import inspect
import json
import pathlib
import struct
import sys

import numpy as np
import pytest

import ssdfeed
from ssdfeed import _items

GOLDEN = pathlib.Path(__file__).resolve().parent / "golden"
HEADER = 40  # record header bytes (cache-format.md, "Records")


def golden_item():
    """An item that uses every node of the tree vocabulary that needs no
    optional package (PIL, torch): tuple, list, dict and OrderedDict with
    every key form, None, a bigint, a namedtuple, and the leaf tags str,
    bytes, bytearray, int, float, bool, complex, nd (C, Fortran order,
    structured) and np."""
    return (
        {"x": np.arange(6, dtype="<f4").reshape(2, 3), None: None, True: 7, 3: -2.5,
         1.5: b"\x00raw", b"k": bytearray(b"ba"), (1, "t"): [1 + 2j, False, 2**80]},
        collections.OrderedDict(s="h\u00e9", n=np.int16(-3)),
        inspect.ArgInfo([1], None, None, np.ones((2, 3), dtype="<i2", order="F")),
        np.array([(1, 2.0)], dtype=[("a", "<i4"), ("b", "<f8")]),
    )


def _same(a, b, where="item"):
    assert type(a) is type(b), f"{where}: {type(a)} != {type(b)}"
    if isinstance(a, np.ndarray) or isinstance(a, np.generic):
        assert a.dtype == b.dtype and a.shape == np.shape(b), where
        assert np.asarray(a).tobytes() == np.asarray(b).tobytes(), where
        if isinstance(a, np.ndarray) and a.ndim > 1:
            assert a.flags.f_contiguous == b.flags.f_contiguous, where
    elif isinstance(a, dict):
        assert list(a) == list(b), where
        for k in a:
            _same(a[k], b[k], f"{where}[{k!r}]")
    elif isinstance(a, (tuple, list)):
        assert len(a) == len(b), where
        for j, (x, y) in enumerate(zip(a, b)):
            _same(x, y, f"{where}[{j}]")
    else:
        assert a == b, where


# --------------------------------------------------------------- sections


def parse_section(section: bytes) -> list:
    """A record's field section (cache-format.md, "Fields") as the
    (name, kind, dtype, shape, data) tuples readers get."""
    (count,) = struct.unpack_from("<I", section)
    off, fields = 8, []
    for _ in range(count):
        kind, ndim, nlen, dlen = section[off:off + 4]
        (size,) = struct.unpack_from("<Q", section, off + 8)
        shape = list(struct.unpack_from(f"<{ndim}Q", section, off + 16))
        off += 16 + 8 * ndim
        name = section[off:off + nlen].decode()
        dtype = section[off + nlen:off + nlen + dlen].decode()
        off += -(-(nlen + dlen) // 8) * 8
        fields.append((name, kind, dtype, shape, section[off:off + size]))
        off += -(-size // 8) * 8
    assert off == len(section), "bytes after the last field"
    return fields


def stored(root: pathlib.Path, source: str, identity: str = None) -> tuple:
    """(manifest, the field section of each record by id) of the entry of
    `source` (and `identity`, where one source has several) under root."""
    manifests = [m for m in root.glob("entries/*/manifest.json")
                 if json.loads(m.read_text())["source"] == source
                 and identity in (None, json.loads(m.read_text())["source_identity"])]
    assert len(manifests) == 1, manifests
    entry = manifests[0].parent
    records = {}
    for dat in sorted(entry.glob("seg-*.dat")):
        data = dat.read_bytes()
        off = 0
        while off + HEADER <= len(data):
            magic, length, sid, h, w, c, nfields, codec = struct.unpack_from("<4sIQHHBBB", data, off)
            assert magic == b"SDFR" and (h, w, c) == (0, 0, 0) and codec == 0, (magic, codec)
            records[sid] = data[off + HEADER:off + HEADER + length]
            off += HEADER + length
    return json.loads(manifests[0].read_text()), records


def golden(name: str) -> bytes:
    return (GOLDEN / name).read_bytes()


# ------------------------------------------------------------------ items


def write_item(root) -> bytes:
    cached = ssdfeed.cache([golden_item()], key="golden", cache=str(root))
    cached[0]
    cached.close()
    manifest, records = stored(pathlib.Path(root), "python:golden")
    assert (manifest["source_identity"], manifest["spec"], manifest["samples_total"]) == \
        ("key=golden", "items1", 1), manifest
    return records[0]


def test_golden_item_decodes_to_its_tree():
    fields = parse_section(golden("item.section"))
    assert fields[0][0] == "__tree__" and json.loads(fields[0][4])["T"][2]["nt"] == \
        "inspect:ArgInfo"
    _same(_items.decode(fields), golden_item())


def test_the_writer_reproduces_the_golden_item(tmp_path):
    assert write_item(tmp_path) == golden("item.section")


# ------------------------------------------------------------- tf elements


def golden_element(tf):
    img = tf.cast(tf.reshape(tf.range(64), (8, 8)), tf.float32) / 255.0  # stored as uint8
    return {"img": img, "label": tf.constant(3, tf.int64), "name": tf.constant([b"a", b"bc"]),
            "r": tf.ragged.constant([[1, 2], [3]], dtype=tf.int32), "f": tf.constant([0.5, -1.0]),
            "id": tf.constant(b"x7")}


def _tf_dataset(tf):
    return tf.data.Dataset.from_tensors(golden_element(tf))


def write_element(tf, root) -> tuple:
    import ssdfeed.tf
    from ssdfeed import _tf_cache
    cached = ssdfeed.tf.cache(_tf_dataset(tf), key="golden", cache=str(root))
    assert len(list(cached)) == 1
    digest = _tf_cache._digest(repr(_tf_dataset(tf).element_spec))
    manifest, records = stored(pathlib.Path(root), "tf:golden",
                               f"tf1 key=golden spec={digest} P=65536 part=0")
    return manifest, records[0]


def test_golden_tf_element_decodes_to_its_components():
    tf = pytest.importorskip("tensorflow")
    from ssdfeed import _tf_cache
    spec = _tf_dataset(tf).element_spec
    fields = parse_section(golden("tf-element.section"))
    # f, id (a scalar string: "|S2"), img (float32 stored as uint8 k), label,
    # name (strings), r values, r row_splits
    assert [(f[0], f[1], f[2]) for f in fields] == [
        ("0", 5, "<f4"), ("1", 5, "|S2"), ("2:u8/255", 5, "|u1"), ("3", 5, "<i8"),
        ("4", 6, "|u1"), ("5", 5, "<i4"), ("6", 5, "<i8")]
    got = _tf_cache.decode(fields, _tf_cache.component_specs(spec))
    want = [np.asarray(c) for c in _tf_cache.to_numpy(golden_element(tf))]
    for g, w in zip(got, want):
        assert g.dtype == w.dtype and g.shape == w.shape
        assert g.tolist() == w.tolist() if g.dtype == object else g.tobytes() == w.tobytes()
    assert got[1].dtype == np.dtype("S2") and got[1][()] == b"x7"


def test_the_writer_reproduces_the_golden_tf_element(tmp_path):
    tf = pytest.importorskip("tensorflow")
    from ssdfeed import _tf_cache
    manifest, section = write_element(tf, tmp_path)
    digest = _tf_cache._digest(repr(_tf_dataset(tf).element_spec))
    assert (manifest["spec"], manifest["samples_total"]) == ("items1", 65536), manifest
    assert section == golden("tf-element.section")
    # The meta entry: one item, the element count as an int64 .npy field "0".
    meta, records = stored(tmp_path, "tf:golden", f"tf1 key=golden spec={digest} P=65536 meta")
    assert meta["samples_total"] == 1
    assert parse_section(records[0]) == [("0", 5, "<i8", [], struct.pack("<q", 1))]


if __name__ == "__main__" and sys.argv[1:] == ["--write"]:
    import tempfile

    import tensorflow as tf
    with tempfile.TemporaryDirectory() as d:
        (GOLDEN / "item.section").write_bytes(write_item(pathlib.Path(d) / "i"))
        (GOLDEN / "tf-element.section").write_bytes(write_element(tf, pathlib.Path(d) / "t")[1])
    print("wrote", sorted(p.name for p in GOLDEN.iterdir()))
