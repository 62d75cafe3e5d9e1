"""One item codec: a leaf decodes the same whether it is read one item at a
time (``cached[i]``, ``_items.decode``) or as a batch (``ItemLoader``'s,
``_items.batch_leaf``): both go through the leaf decoding of ``_items``."""
import numpy as np
import pytest

from ssdfeed import _items


def _batch_of(items):
    """Each leaf's batch as the C++ loader gives it: kind-6 leaves a list of
    their bytes, arrays stacked (one shape and dtype across the items)."""
    encoded = [_items.encode(it) for it in items]
    nodes = _items.leaf_nodes(_items.tree_of(encoded[0]))
    batch = {}
    for node in nodes:
        values = [dict((f[0], f) for f in e)[node["L"]] for e in encoded]
        if values[0][1] == _items.KIND_BYTES:
            batch[node["L"]] = [v[2] for v in values]
        else:
            batch[node["L"]] = np.stack([_items._parse_npy(v[2]) for v in values])
    return nodes, batch


def _same(a, b):
    if isinstance(a, np.ndarray):
        assert a.dtype == b.dtype and a.tobytes() == b.tobytes()
    else:
        assert type(a) is type(b) and a == b


def test_a_batch_leaf_is_the_batch_of_the_items_leaves():
    rec = np.dtype([("a", "<i4"), ("b", "<f8")])
    items = [{"s": f"h\u00e9llo {i}", "b": bytes([i]), "ba": bytearray(b"y" * i),
              "rec": np.array([(i, i / 2)], dtype=rec), "v": np.arange(3) + i}
             for i in range(3)]
    nodes, batch = _batch_of(items)
    got = _items.unflatten(_items.tree_of(_items.encode(items[0])),
                           {n["L"]: _items.batch_leaf(n, batch[n["L"]]) for n in nodes})
    for key in items[0]:
        one = [_items.decode(_items.encode(it))[key] for it in items]
        if isinstance(got[key], list):
            for a, b in zip(got[key], one, strict=True):
                _same(a, b)
        else:  # stacked: row k is item k's
            for k, b in enumerate(one):
                _same(got[key][k], b)


def test_a_batch_of_tensors_keeps_the_stored_torch_dtype():
    torch = pytest.importorskip("torch")
    items = [torch.arange(4, dtype=torch.bfloat16) + i for i in range(2)]
    nodes, batch = _batch_of(items)
    (node,) = nodes
    got = _items.batch_leaf(node, batch[node["L"]], tensors=True)
    assert got.dtype == torch.bfloat16
    for k, it in enumerate(items):
        one = _items.decode(_items.encode(it))
        assert one.dtype == torch.bfloat16 and torch.equal(got[k], one)
