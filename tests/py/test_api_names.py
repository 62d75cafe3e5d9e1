"""The public Python API names one thing one way: a boxes field not named
"boxes" works in every adapter (its count field is derived in one place),
the exceptions are exported at top level, ssdfeed.cache / ssdfeed.warm are
the functions and moved names keep their old spelling with a warning."""
import io
import warnings

import numpy as np
import pytest

import ssdfeed

H = W = 32


def _jpeg(i):
    from PIL import Image
    buf = io.BytesIO()
    Image.fromarray(np.full((H, W, 3), 20 * i, np.uint8)).save(buf, "JPEG")
    return buf.getvalue()


@pytest.fixture(scope="module")
def od_bbox(tmp_path_factory):
    """A TF Object Detection tfrecord read with its boxes field named
    "bbox" and classes "cls": i % 3 boxes in sample i."""
    tf = pytest.importorskip("tensorflow")
    path = str(tmp_path_factory.mktemp("od") / "od.tfrecord")

    def feature(kind, values):
        if kind == "bytes":
            return tf.train.Feature(bytes_list=tf.train.BytesList(value=values))
        if kind == "float":
            return tf.train.Feature(float_list=tf.train.FloatList(value=values))
        return tf.train.Feature(int64_list=tf.train.Int64List(value=values))

    counts = []
    with tf.io.TFRecordWriter(path) as w:
        for i in range(6):
            k = i % 3
            b = np.tile(np.array([[0.1, 0.2, 0.5, 0.6]], np.float32), (k, 1))
            f = {"image/encoded": feature("bytes", [_jpeg(i)]),
                 "image/object/bbox/xmin": feature("float", b[:, 0].tolist()),
                 "image/object/bbox/ymin": feature("float", b[:, 1].tolist()),
                 "image/object/bbox/xmax": feature("float", b[:, 2].tolist()),
                 "image/object/bbox/ymax": feature("float", b[:, 3].tolist()),
                 "image/object/class/label": feature("int64", list(range(1, k + 1)))}
            w.write(tf.train.Example(features=tf.train.Features(feature=f))
                    .SerializeToString())
            counts.append(k)
    fields = {"image": "image/encoded", "bbox": ("boxes", "image/object/bbox/"),
              "cls": ("classes", "image/object/class/label")}
    return "tfrecord:" + path, fields, counts


def test_box_count_name_is_the_loaders(od_bbox):
    uri, fields, counts = od_bbox
    with ssdfeed.Loader(uri, fields=fields, cache=False, batch_size=6) as loader:
        batch = next(iter(loader))
    assert list(batch["num_bbox"]) == counts and "num_boxes" not in batch


def test_tf_cuts_a_boxes_field_not_named_boxes(od_bbox):
    tf = pytest.importorskip("tensorflow")
    import ssdfeed.tf
    uri, fields, counts = od_bbox
    ds = ssdfeed.tf.dataset(uri, fields=fields, cache=False, batch_size=6)
    b = next(iter(ds))
    assert isinstance(b["bbox"], tf.RaggedTensor) and isinstance(b["cls"], tf.RaggedTensor)
    assert list(b["bbox"].row_lengths().numpy()) == counts
    assert list(b["cls"].row_lengths().numpy()) == counts


def test_ray_cuts_a_boxes_field_not_named_boxes(od_bbox):
    pytest.importorskip("ray")
    from ssdfeed import ray as sray
    uri, fields, counts = od_bbox
    with ssdfeed.Loader(uri, fields=fields, cache=False, batch_size=6) as loader:
        rows = sray._rows(next(iter(loader)), loader.fields)
    assert [len(r) for r in rows["bbox"]] == counts
    assert [len(r) for r in rows["cls"]] == counts


def test_cache_and_warm_are_the_functions_and_the_errors_are_exported():
    import ssdfeed.cache  # noqa: F401  (the old module path: must not rebind the function)
    import ssdfeed.warm  # noqa: F401
    assert callable(ssdfeed.cache) and ssdfeed.cache.__name__ == "cache"
    assert callable(ssdfeed.warm) and ssdfeed.warm.__name__ == "warm"
    for name in ("SkippedItemsError", "WarmWorkerError", "CorruptionError",
                 "CacheUnavailableError", "ItemFormatError"):
        assert issubclass(getattr(ssdfeed, name), Exception) and name in ssdfeed.__all__


def test_old_module_spellings_warn_and_reach_the_same_objects(monkeypatch):
    with pytest.warns(DeprecationWarning, match="ssdfeed.SkippedItemsError"):
        from ssdfeed.cache import SkippedItemsError
    assert SkippedItemsError is ssdfeed.SkippedItemsError
    with pytest.warns(DeprecationWarning, match="ssdfeed.WarmWorkerError"):
        from ssdfeed.cache import WarmWorkerError
    assert WarmWorkerError is ssdfeed.WarmWorkerError
    import sys
    old = sys.modules["ssdfeed.cache"]
    with pytest.warns(DeprecationWarning, match="CachedDataset.RETRY_OPEN_SECONDS"):
        monkeypatch.setattr(old, "RETRY_OPEN_SECONDS", 0.5)
    assert ssdfeed.CachedDataset.RETRY_OPEN_SECONDS == 0.5
    with pytest.warns(DeprecationWarning, match="ssdfeed.warm"):
        assert sys.modules["ssdfeed.warm"].warm is ssdfeed.warm
    with pytest.raises(AttributeError, match="migrating"):
        old.no_such_name


def test_one_capacity_name_everywhere(tmp_path):
    """cache_capacity=, as the Loader, warm, ray and torch spell it; the old
    capacity= of ssdfeed.cache and ssdfeed.tf.cache warns."""
    import inspect
    import ssdfeed.torch  # noqa: F401
    for fn in (ssdfeed.Loader, ssdfeed.cache, ssdfeed.CachedDataset, ssdfeed.warm):
        assert "cache_capacity" in inspect.signature(fn).parameters, fn
    cached = ssdfeed.cache([1, 2], key="c", cache=tmp_path, cache_capacity=1 << 30)
    assert cached._capacity == 1 << 30
    with pytest.warns(DeprecationWarning, match=r"ssdfeed.cache\(cache_capacity=\)"):
        old = ssdfeed.cache([1, 2], key="c", cache=tmp_path, capacity=1 << 30)
    assert old._capacity == 1 << 30
    with pytest.raises(TypeError, match="cache_capacity= only"):
        ssdfeed.cache([1], cache=tmp_path, capacity=1, cache_capacity=1)


def test_tf_datasets_give_stats_by_a_method(tmp_path, small_datasets):
    tf = pytest.importorskip("tensorflow")
    import ssdfeed.tf
    assert "cache_capacity" in __import__("inspect").signature(ssdfeed.tf.cache).parameters
    cached = ssdfeed.tf.cache(tf.data.Dataset.range(10), key="r", cache=tmp_path,
                              cache_capacity=1 << 30)
    assert isinstance(cached, tf.data.Dataset)
    assert [int(x) for x in cached] == list(range(10))
    assert [int(x) for x in cached] == list(range(10))
    assert cached.stats()["cache_hits"] == 10, cached.stats()
    with pytest.warns(DeprecationWarning, match=r"ds.stats\(\)"):
        assert cached.ssdfeed_cache.stats() == cached.stats()
    with pytest.warns(DeprecationWarning, match="cache_capacity"):
        ssdfeed.tf.cache(tf.data.Dataset.range(3), key="r2", cache=tmp_path, capacity=1 << 30)

    ds = ssdfeed.tf.dataset(small_datasets["folder"]["uri"], cache=tmp_path / "l", batch_size=4,
                            prepare=ssdfeed.Prepare(resize=(16, 16)))
    n = sum(1 for _ in ds)
    assert ds.stats()["batches"] >= n > 0 and ds.loader.stats()["batches"] == ds.stats()["batches"]
    with pytest.warns(DeprecationWarning, match="ds.loader"):
        assert ds.ssdfeed_loader is ds.loader


def _no_warning(fn):
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        return fn()


def test_item_loader_takes_a_cached_dataset_and_loader_keeps_it_with_a_warning(tmp_path):
    """One kind of source per signature: ItemLoader(cached) for items,
    Loader(uri) for sources; Loader(cached) works for one release, warning."""
    import inspect
    cached = ssdfeed.cache([np.full(3, i) for i in range(4)], key="il", cache=tmp_path)
    with _no_warning(lambda: ssdfeed.ItemLoader(cached, batch_size=4)) as loader:
        batch = _no_warning(lambda: next(iter(loader)))
    assert batch.tolist() == [[i] * 3 for i in range(4)]
    assert "ItemLoader" in ssdfeed.__all__
    with pytest.warns(DeprecationWarning, match=r"ssdfeed.ItemLoader\(cached dataset\)"):
        old = ssdfeed.Loader(cached, batch_size=4)
    with old:
        assert next(iter(old)).tolist() == batch.tolist()
    # Only the item loader's options: no image ones, no other source.
    params = inspect.signature(ssdfeed.ItemLoader).parameters
    assert not {"prepare", "augment", "dtype", "fields", "cache"} & set(params)
    with pytest.raises(TypeError, match="prepare"):
        ssdfeed.ItemLoader(cached, prepare=ssdfeed.Prepare())
    with pytest.raises(TypeError, match="goes to Loader"):
        ssdfeed.ItemLoader(str(tmp_path))


def test_torch_item_loader_and_the_old_torch_spelling(tmp_path):
    torch = pytest.importorskip("torch")
    import ssdfeed.torch
    cached = ssdfeed.cache([np.full(3, i) for i in range(4)], key="ti", cache=tmp_path)
    with _no_warning(lambda: ssdfeed.torch.ItemLoader(cached, batch_size=4, pin_memory=False,
                                                      seed=0)) as loader:
        batch = _no_warning(lambda: next(iter(loader)))
    assert isinstance(batch, torch.Tensor) and batch.tolist() == [[i] * 3 for i in range(4)]
    with pytest.warns(DeprecationWarning, match=r"ssdfeed.torch.ItemLoader\(cached dataset\)"):
        old = ssdfeed.torch.Loader(cached, batch_size=4, pin_memory=False, seed=0)
    with old:
        assert next(iter(old)).tolist() == batch.tolist()
    with pytest.raises(TypeError, match="goes to Loader"):
        ssdfeed.torch.ItemLoader(str(tmp_path))
