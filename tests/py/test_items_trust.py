"""A cached item's stored tree is data that someone else may have written (a
member of the group, the producer of an imported stream): reading it must
never import a module or call anything it names. Each planted tree below
names a callable, by every path a writer has (ItemEntry.put into the entry,
`ssdfeed cache import`), and must be refused with ItemFormatError on
cached[i], in DataLoader workers and on ssdfeed.Loader(cached), while the
payload's marker file never appears."""

import collections
import json
import os
import pickle
import random
import shutil
import subprocess
import sys

import numpy as np
import pytest

import ssdfeed
from ssdfeed import _items

ARRAY, BYTES = 5, 6
Pair = collections.namedtuple("Pair", "a b")


class Words:
    """Four items of one structure: (str,)."""

    def __len__(self):
        return 4

    def __getitem__(self, i):
        return (f"word-{i}",)


def leaf(j, tag="str"):
    return {"L": str(j), "k": tag}


def planted(tree, *strings):
    """Fields of an item whose tree is `tree` over str leaves `strings`."""
    text = json.dumps(tree, separators=(",", ":")).encode()
    return [("__tree__", BYTES, text)] + [(str(j), BYTES, s.encode())
                                          for j, s in enumerate(strings)]


def payloads(marker, tmp_path, monkeypatch):
    """{name: fields} of trees naming callables that would create marker."""
    evil = f"ssdfeed_planted_{os.getpid()}"
    (tmp_path / f"{evil}.py").write_text(
        f"open({str(marker)!r}, 'w').close()\nclass Thing(tuple):\n    _fields = ()\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    touch = f"touch {marker}"
    return {
        "os:system": planted({"nt": "os:system", "v": [leaf(0)]}, touch),
        "builtins:eval": planted({"nt": "builtins:eval", "v": [leaf(0)]},
                                 f"open({str(marker)!r}, 'w').close()"),
        "subprocess:Popen": planted(
            {"nt": "subprocess:Popen", "f": ["args"], "v": [{"l": [leaf(0), leaf(1)]}]},
            "touch", str(marker)),
        "unloaded module": planted({"nt": f"{evil}:Thing", "f": [], "v": []}),
        "os.system with fields": planted(
            {"nt": "os:system", "f": ["command"], "v": [leaf(0)]}, touch),
    }


@pytest.fixture
def marker(tmp_path):
    path = tmp_path / "payload-ran"
    yield path
    assert not path.exists(), "the planted tree ran its payload"


def cached_with(root, i, fields):
    """ssdfeed.cache(Words()) whose item i (or each of the items i) holds fields."""
    cached = ssdfeed.cache(Words(), cache=str(root), key="words")
    for j in [i] if isinstance(i, int) else i:
        assert cached._open_entry().put(j, fields)
    return cached


NAMES = ["os:system", "builtins:eval", "subprocess:Popen", "unloaded module",
         "os.system with fields"]


@pytest.mark.parametrize("name", NAMES)
def test_planted_tree_is_refused_on_getitem(name, tmp_path, marker, monkeypatch):
    fields = payloads(marker, tmp_path, monkeypatch)[name]
    cached = cached_with(tmp_path / "c", 1, fields)
    assert cached[0] == ("word-0",)
    with pytest.raises(ssdfeed.ItemFormatError, match="namedtuple|not loaded|not a namedtuple"):
        cached[1]
    assert not any(m.startswith("ssdfeed_planted_") for m in sys.modules)


@pytest.mark.parametrize("name", ["os:system", "unloaded module"])
def test_planted_tree_is_refused_in_dataloader_workers(name, tmp_path, marker, monkeypatch):
    torch = pytest.importorskip("torch")
    fields = payloads(marker, tmp_path, monkeypatch)[name]
    cached = cached_with(tmp_path / "c", 2, fields)
    cached.close()
    loader = torch.utils.data.DataLoader(cached, batch_size=None, num_workers=2,
                                         multiprocessing_context="fork")
    with pytest.raises(ssdfeed.ItemFormatError, match="namedtuple|not loaded"):
        list(loader)


@pytest.mark.parametrize("name", ["os:system", "builtins:eval", "unloaded module"])
def test_planted_tree_is_refused_by_the_fast_path(name, tmp_path, marker, monkeypatch):
    fields = payloads(marker, tmp_path, monkeypatch)[name]
    cached = cached_with(tmp_path / "c", range(4), fields)  # one structure: batches form
    with pytest.raises(ssdfeed.ItemFormatError, match="python:words .*namedtuple|not loaded"):
        for _ in ssdfeed.Loader(cached, batch_size=2):
            pass


def test_planted_later_item_is_refused_by_the_fast_path(tmp_path, marker, monkeypatch):
    """Item 0 is genuine: the planted item's tree differs from it, and the
    fast path refuses the batch before it builds anything."""
    fields = payloads(marker, tmp_path, monkeypatch)["os:system"]
    cached = cached_with(tmp_path / "c", 3, fields)
    with pytest.raises(ValueError, match="items of different structures"):
        for _ in ssdfeed.Loader(cached, batch_size=2):
            pass


def test_a_loaded_namedtuple_with_other_fields_is_refused(tmp_path):
    tree = {"nt": f"{__name__}:Pair", "f": ["x", "y"], "v": [leaf(0), leaf(1)]}
    cached = cached_with(tmp_path / "c", 1, planted(tree, "p", "q"))
    with pytest.raises(ssdfeed.ItemFormatError, match=r"fields \['x', 'y'\].*\['a', 'b'\]"):
        cached[1]
    good = {"nt": f"{__name__}:Pair", "f": ["a", "b"], "v": [leaf(0), leaf(1)]}
    assert _items.decode(planted(good, "p", "q")) == Pair("p", "q")


def test_oversized_pil_image_is_refused_before_it_is_allocated(tmp_path):
    pytest.importorskip("PIL")
    def image(size, data):
        tree = {"L": "0", "k": "pil", "m": "1", "s": size}
        return _items.decode([("__tree__", BYTES, json.dumps(tree).encode()), ("0", BYTES, data)])

    with pytest.raises(ssdfeed.ItemFormatError, match="PIL image of 60000x60000 pixels exceeds"):
        image([60000, 60000], b"\0" * 16)
    with pytest.raises(ssdfeed.ItemFormatError, match="PIL image of 200x200 pixels cannot come"):
        image([200, 200], b"\0" * 16)
    with pytest.raises(ssdfeed.ItemFormatError, match="empty PIL image"):
        image([0, 10**9], b"")  # no pixels, a billion row pointers
    assert image([8, 8], b"\xff" * 8).size == (8, 8)  # 64 one-bit pixels from 8 bytes


def _ssdfeed_cli():
    exe = shutil.which("ssdfeed")
    if exe is None:
        pytest.skip("the ssdfeed command is not on PATH")
    return exe


def test_cache_import_of_items_needs_trust_and_planted_trees_stay_refused(
        tmp_path, marker, monkeypatch):
    exe = _ssdfeed_cli()
    fields = payloads(marker, tmp_path, monkeypatch)["os:system"]
    producer = tmp_path / "producer"
    cached = cached_with(producer, 1, fields)
    for i in (0, 2, 3):
        cached[i]  # the rest of the entry, computed
    cached.close()
    ls = json.loads(subprocess.run([exe, "cache", "ls", "--json", "--cache", str(producer)],
                                   capture_output=True, text=True, check=True).stdout)
    stream = tmp_path / "words.tar"
    subprocess.run([exe, "cache", "export", ls[0]["entry"], "--to", str(stream), "--cache",
                    str(producer)], capture_output=True, text=True, check=True)
    victim = tmp_path / "victim"
    r = subprocess.run([exe, "cache", "import", str(stream), "--cache", str(victim)],
                       capture_output=True, text=True)
    assert r.returncode != 0
    assert str(stream) in r.stderr and "Python items" in r.stderr and "--trust-items" in r.stderr
    listed = subprocess.run([exe, "cache", "ls", "--json", "--cache", str(victim)],
                            capture_output=True, text=True)
    assert listed.returncode != 0 or json.loads(listed.stdout or "[]") == []
    r = subprocess.run([exe, "cache", "import", str(stream), "--cache", str(victim),
                        "--trust-items"], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    got = ssdfeed.cache(Words(), cache=str(victim), key="words")
    assert got[3] == ("word-3",)
    with pytest.raises(ssdfeed.ItemFormatError, match="item 1 .*names os:system as a namedtuple"):
        got[1]


# ------------------------------------------------ mutations of stored trees


def _real_items():
    items = [
        {"x": np.arange(6, dtype=np.float32).reshape(2, 3), "n": 7, "s": "text",
         "big": 2**80, (1, "k"): None, 2.5: b"raw", "od": collections.OrderedDict(z=1.0)},
        Pair(np.int16(3), [True, 1 + 2j, bytearray(b"ab")]),
        (np.zeros((2, 2), dtype=[("a", "<i4"), ("b", "<f8")]), np.ones((3, 2), order="F")),
    ]
    try:
        from PIL import Image

        p = Image.new("P", (5, 4))
        p.putpalette(list(range(48)))
        p.info["dpi"] = (72, 72)
        items.append([Image.new("RGB", (6, 5), (1, 2, 3)), p, Image.new("1", (9, 3))])
    except ImportError:
        pass
    try:
        import torch

        items.append({"t": torch.arange(4, dtype=torch.bfloat16), "u": torch.ones(2, 3).T})
        from test_field_geometry import _torchvision

        tv = _torchvision()[1]
        items.append((tv.Image(torch.zeros(3, 4, 5, dtype=torch.uint8)),
                      tv.BoundingBoxes([[1, 2, 3, 4]], format="XYWH", canvas_size=(4, 5)),
                      tv.Mask(torch.ones(4, 5, dtype=torch.uint8))))
    except (ImportError, pytest.skip.Exception):
        pass
    return items


# What a rewriter might put in place of a value of the tree.
_VOCAB = [None, 0, -1, 2**70, 1.5, "", "0", "9", "os:system", "builtins:eval",
          f"{__name__}:Pair", "subprocess:Popen", "L", "k", "nt", "pil", "pt", "tv", "sd",
          "Image", "BoundingBoxes", "load", "I;16", "XYXY", "[('a', 'O')]", "'<f8'",
          "(" * 500, "AAAA", "!!", [], {}, [[]], {"L": "0", "k": "str"},
          {"nt": "os:system", "v": []}, [60000, 60000], {"i": "1"}, {"f": "zz"}]


def _mutate_json(node, rng):
    """node with one value, key or list somewhere replaced, dropped or nested."""
    if isinstance(node, dict) and node and rng.random() < 0.7:
        k = rng.choice(sorted(node, key=str))
        out = dict(node)
        r = rng.random()
        if r < 0.15:
            del out[k]
        elif r < 0.3:
            out[rng.choice(["nt", "f", "v", "L", "k", "m", "s", "sd", "dt", "tv", "fmt", "cs",
                            "pal", "pm", "i", "x"])] = rng.choice(_VOCAB)
        elif r < 0.5:
            out[k] = rng.choice(_VOCAB)
        else:
            out[k] = _mutate_json(node[k], rng)
        return out
    if isinstance(node, list) and node and rng.random() < 0.7:
        out = list(node)
        j = rng.randrange(len(out))
        r = rng.random()
        if r < 0.2:
            del out[j]
        elif r < 0.4:
            out.insert(j, rng.choice(_VOCAB))
        else:
            out[j] = _mutate_json(out[j], rng)
        return out
    return rng.choice(_VOCAB)


def _nested_text(tree, depth: int) -> bytes:
    """tree inside depth tuples, as JSON text (json.dumps itself would
    recurse too deep)."""
    return ('{"T":[' * depth + json.dumps(tree) + "]}" * depth).encode()


def _mutate_bytes(data: bytes, rng) -> bytes:
    b = bytearray(data)
    for _ in range(rng.randint(1, 4)):
        r = rng.random()
        if r < 0.4 and b:
            b[rng.randrange(len(b))] = rng.randrange(256)
        elif r < 0.7 and b:
            del b[rng.randrange(len(b)):]
        else:
            b[rng.randrange(len(b) + 1):0] = bytes(rng.randrange(256) for _ in range(3))
    return bytes(b)


def _mutate_field(field, rng):
    name, kind, dtype, shape, data = field
    r = rng.random()
    if r < 0.4:
        return (name, kind, dtype, shape, _mutate_bytes(data, rng))
    if r < 0.6:
        return (name, kind, rng.choice(["<f8", "|u1", "|V3", "<i4", "|b1", "<U2"]), shape, data)
    if r < 0.8:
        return (name, kind, dtype, rng.choice([[], [0], [1], [2, 3], [3, 2, 1], [10**6]]), data)
    return (name, ARRAY if kind == BYTES else BYTES, dtype, shape, data)


def test_rewritten_stored_trees_fail_cleanly_and_never_run_anything(tmp_path):
    """A seeded mutation loop over the stored fields of real items (as the
    entry gives them back): every result is the item or an ItemFormatError;
    nothing named in a tree is called (a namedtuple class of this module,
    which the mutations may name, is built without running code)."""
    root = tmp_path / "c"
    items = _real_items()
    entry = ssdfeed._ssdfeed.ItemEntry(str(root), "python:fuzz", "id", len(items),
                                       lambda i: _items.encode(items[i]))
    stored = [entry.get(i) for i in range(len(items))]
    for fields in stored:
        _items.decode(fields)  # the unmutated fields decode
    rng = random.Random(1234)
    outcomes = collections.Counter()
    for step in range(4000):
        fields = list(rng.choice(stored))
        if rng.random() < 0.02:
            tree = json.loads(bytes(fields[0][4]))
            text = _nested_text(tree, rng.choice([65, 5000, 200000]))
            fields[0] = fields[0][:4] + (text,)
        elif rng.random() < 0.6:
            tree = json.loads(bytes(fields[0][4]))
            text = json.dumps(_mutate_json(tree, rng)).encode()
            fields[0] = fields[0][:4] + (text,)
        elif rng.random() < 0.5:
            fields[0] = fields[0][:4] + (_mutate_bytes(bytes(fields[0][4]), rng),)
        else:
            j = rng.randrange(1, len(fields))
            fields[j] = _mutate_field(fields[j], rng)
        try:
            _items.decode(fields)
            outcomes["decoded"] += 1
        except ssdfeed.ItemFormatError:
            outcomes["refused"] += 1
        except Exception as e:  # noqa: BLE001 (the point: no other error class escapes)
            raise AssertionError(f"step {step}: {type(e).__name__}: {e}\nfields: "
                                 f"{[(f[0], f[1], f[2], f[3], bytes(f[4])[:200]) for f in fields]}")
    entry.close()
    assert outcomes["refused"] > 1000 and outcomes["decoded"] > 0, outcomes


# ------------------------------------- namedtuples keep working where loaded


def test_namedtuple_items_in_spawn_workers(tmp_path):
    """A spawn worker unpickles the dataset, which loads the module that
    defines the namedtuple: its items come back as that class."""
    torch = pytest.importorskip("torch")
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import cache_own_data as data

    cached = ssdfeed.cache(data.NamedDataset(), cache=str(tmp_path / "c"))
    cached[0]  # stored by this process, read by the worker
    loader = torch.utils.data.DataLoader(cached, batch_size=None, num_workers=1,
                                         multiprocessing_context="spawn")
    got = list(loader)
    assert [type(x).__name__ for x in got] == ["Sample"] * 4
    assert [int(x.label) for x in got] == [0, 1, 2, 3]


SCRIPT = """
import collections, pickle, sys
from ssdfeed import _items
Point = collections.namedtuple("Point", "x y")
p = _items.decode(pickle.load(open(sys.argv[1], "rb")))
print(type(p) is Point, p)
"""


def test_namedtuple_stored_by_warm_python_is_read_by_the_script(tmp_path):
    """`ssdfeed warm --python train:make` stores train:Point; `python
    train.py` has Point in __main__: the running script stands for its
    module name (no import of train)."""
    script = tmp_path / "train.py"
    script.write_text(SCRIPT)
    fields = planted({"nt": "train:Point", "f": ["x", "y"], "v": [leaf(0), leaf(1)]}, "a", "b")
    with open(tmp_path / "fields.pickle", "wb") as f:
        pickle.dump(fields, f)
    r = subprocess.run([sys.executable, str(script), str(tmp_path / "fields.pickle")],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "True Point(x='a', y='b')"


# -------------------------------- mutations of stored tf.cache elements


def _tf_elements(tf):
    """Real tf.cache elements, as ssdfeed.tf.cache flattens them: a float
    image stored as uint8 k (k / 255), ints, strings (a scalar one is kept
    as numpy's fixed-width bytes), a ragged tensor."""
    img = tf.cast(tf.reshape(tf.range(64) % 256, (8, 8)), tf.float32) / 255.0
    return [
        {"img": img, "label": tf.constant(3, tf.int64), "name": tf.constant([b"a", b"bc"]),
         "r": tf.ragged.constant([[1, 2], [3]], dtype=tf.int32), "id": tf.constant(b"x7")},
        {"img": img + 0.5, "label": tf.constant(-1, tf.int64), "name": tf.constant([b""]),
         "r": tf.ragged.constant([[]], dtype=tf.int32), "id": tf.constant(b"")},
    ]


def test_rewritten_tf_elements_fail_cleanly(tmp_path):
    """The same mutation loop over the stored fields of ssdfeed.tf.cache
    elements: every result is components of the element_spec's dtypes or an
    ItemFormatError naming the field; no other error escapes (a stray
    KeyError or struct.error would stop a training pipeline with a message
    that names nothing)."""
    tf = pytest.importorskip("tensorflow")
    from ssdfeed import _tf_cache

    elements = _tf_elements(tf)
    spec = tf.data.Dataset.from_generator(lambda: iter(elements), output_signature={
        k: tf.type_spec_from_value(v) if k != "r" else tf.RaggedTensorSpec([None, None], tf.int32)
        for k, v in elements[0].items()}).element_spec
    specs = _tf_cache.component_specs(spec)
    comps = [_tf_cache.to_numpy(e) for e in elements]
    entry = ssdfeed._ssdfeed.ItemEntry(str(tmp_path / "c"), "tf:fuzz", "id", len(comps),
                                       lambda i: _tf_cache.encode(comps[i]))
    stored = [entry.get(i) for i in range(len(comps))]
    assert any(":" in f[0] for f in stored[0])  # the uint8 form is among them
    for fields in stored:
        _tf_cache.decode(fields, specs)
    rng = random.Random(4321)
    outcomes = collections.Counter()
    for step in range(4000):
        fields = list(rng.choice(stored))
        r = rng.random()
        j = rng.randrange(len(fields))
        if r < 0.15:
            del fields[j]
        elif r < 0.3:
            name = rng.choice(["9", "-1", "x", "0:u8", "0:zz", "1:u8/255", "", ":", "00"])
            fields[j] = (name,) + tuple(fields[j][1:])
        else:
            fields[j] = _mutate_field(fields[j], rng)
        try:
            out = _tf_cache.decode(fields, specs)
            assert len(out) == len(specs)
            for c, s in zip(out, specs):
                if s.dtype == tf.string:  # strings, or one as numpy's fixed-width bytes
                    assert c.dtype == object or (c.dtype.kind == "S" and c.ndim == 0)
                else:
                    assert c.dtype == s.dtype.as_numpy_dtype
            outcomes["decoded"] += 1
        except ssdfeed.ItemFormatError:
            outcomes["refused"] += 1
        except Exception as e:  # noqa: BLE001 (the point: no other error class escapes)
            raise AssertionError(f"step {step}: {type(e).__name__}: {e}\nfields: "
                                 f"{[(f[0], f[1], f[2], f[3], bytes(f[4])[:80]) for f in fields]}")
    entry.close()
    assert outcomes["refused"] > 1000 and outcomes["decoded"] > 0, outcomes
