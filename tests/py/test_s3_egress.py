"""An object-store origin is read once: what the server sends, counted by a
proxy between ssdfeed and a real S3 server (moto_server on loopback), for
the tar (WebDataset), TFRecord and folder layouts of one generated dataset.

* a warm-up into an empty root fetches at most 1.05x the dataset's bytes
  in about one GET per object (a shard is streamed once to index it, its
  samples prepared from the spool on the cache's disk; a folder's image is
  one GET);
* a job over the complete entry fetches no object byte: the listing, then
  the index stored in the entry (origin-<key>.index) and the records;
* a job over an entry missing 10% of its samples fetches at most 0.15x;
* a replaced object (new ETag) is still a new identity, its samples
  prepared again from the new bytes;
* a damaged index file is never trusted: the shards are streamed once to
  index them again, and the good index replaces it;
* the job's origin counters (origin_bytes, origin_requests) say what the
  proxy saw, within 1%."""

import glob
import os

import pytest

import ssdfeed

boto3 = pytest.importorskip("boto3", reason="boto3 not installed (pip install boto3)")
pytest.importorskip("moto.server", reason="moto[server] not installed (pip install 'moto[server]')")

from s3_util import FaultProxy, MotoServer, upload_tree  # noqa: E402

BUCKET = "egress"
CREDS = {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing",
         "AWS_REGION": "us-east-1"}
COUNT = 200
URIS = {
    "tar": f"tar:s3://{BUCKET}/tar/shard-*.tar",
    "tfrecord": f"tfrecord:s3://{BUCKET}/tfrecord/train-*.tfrecord",
    "folder": f"folder:s3://{BUCKET}/folder",
}
PREP = ssdfeed.Prepare(resize=(32, 32))


def require_room_to_spool(path):
    """The shard spool keeps a tenth of its disk free (kSpoolFreeShare in
    src/source/shard_spool.h); under that line a warm-up falls back, as
    designed, to ranged reads of the origin, and the one-read-per-byte
    figures below no longer hold. Say so, instead of failing on a count."""
    st = os.statvfs(path)
    free, total = st.f_bavail * st.f_frsize, st.f_blocks * st.f_frsize
    if free < total // 10 + (1 << 30):
        pytest.fail(f"{path}: its disk has {free >> 30} GiB free of {total >> 30} GiB; the "
                    "shard spool keeps a tenth free and these tests need 1 GiB more. "
                    "Free disk space and run them again.")


@pytest.fixture(scope="module")
def origin(tmp_path_factory):
    """moto_server with the dataset in three layouts, a counting proxy in
    front of it, and each layout's bytes in the bucket."""
    require_room_to_spool(tmp_path_factory.getbasetemp())
    server = MotoServer()
    proxy = FaultProxy(server.port, lambda method, target, n: None)
    s3 = boto3.client("s3", endpoint_url=server.url, region_name=CREDS["AWS_REGION"],
                      aws_access_key_id="testing", aws_secret_access_key="testing")
    s3.create_bucket(Bucket=BUCKET)
    root = tmp_path_factory.mktemp("egress")
    sizes, objects = {}, {}
    for fmt in URIS:
        rep = ssdfeed.make_dataset(str(root / fmt), format=fmt, count=COUNT, classes=4, seed=5,
                                   shard_size=40, min_side=96, max_side=160)
        local = rep["uri"].split(":", 1)[1]
        top = local if fmt == "folder" else os.path.dirname(local)
        keys = upload_tree(s3, BUCKET, top, fmt + "/")
        sizes[fmt] = sum(s3.head_object(Bucket=BUCKET, Key=k)["ContentLength"] for k in keys)
        objects[fmt] = len(keys)
    yield {"proxy": proxy, "s3": s3, "sizes": sizes, "objects": objects}
    proxy.close()
    server.close()


@pytest.fixture
def env(monkeypatch, origin):
    for k, v in CREDS.items():
        monkeypatch.setenv(k, v)
    monkeypatch.setenv("AWS_ENDPOINT_URL", origin["proxy"].url)
    monkeypatch.delenv("AWS_SESSION_TOKEN", raising=False)
    return origin


class Egress:
    """What the proxy counted between entering and leaving the block."""

    def __init__(self, proxy):
        self.proxy = proxy

    def __enter__(self):
        self.start = self.proxy.counts()
        return self

    def __exit__(self, *exc):
        end = self.proxy.counts()
        self.requests, self.gets, self.bytes = (e - s for e, s in zip(end, self.start))


def epoch(uri, cache, **kw):
    """One epoch of a Loader; its stats."""
    loader = ssdfeed.Loader(uri, cache=cache, prepare=PREP, batch_size=20, workers=2,
                            shuffle=False, **kw)
    for _ in loader:
        pass
    return loader.stats()


def within_one_percent(ours, proxy):
    assert abs(ours - proxy) <= 0.01 * proxy, (ours, proxy)


@pytest.mark.parametrize("fmt", list(URIS))
def test_warm_reads_each_byte_once_and_a_complete_entry_reads_none(env, fmt, tmp_path):
    cache, size = str(tmp_path / "cache"), env["sizes"][fmt]
    with Egress(env["proxy"]) as warm:
        r = ssdfeed.warm(URIS[fmt], cache=cache, prepare=PREP, workers=2)
    assert r.samples_present == COUNT
    assert warm.bytes <= 1.05 * size, f"warm-up fetched {warm.bytes / size:.2f}x the dataset"
    # Each object once (shards here are under one 8 MiB range), the listing,
    # and a few to spare: never one request per member or record.
    assert warm.gets <= env["objects"][fmt], (warm.gets, env["objects"][fmt])
    assert warm.requests <= env["objects"][fmt] + 3, (warm.requests, env["objects"][fmt])
    within_one_percent(r.origin_bytes, warm.bytes)
    assert r.origin_requests == warm.requests

    with Egress(env["proxy"]) as job:
        stats = epoch(URIS[fmt], cache)
    assert stats["cache_hits"] == COUNT and stats["cache_misses"] == 0, stats
    assert job.gets == 0 and job.bytes <= 0.01 * size, \
        f"a job over the complete entry fetched {job.bytes} bytes in {job.gets} GETs"
    assert stats["origin_bytes"] == job.bytes == 0
    # Listings only: the Loader's, and the one its first pass over a root
    # makes to see what the root holds (the cold-cache notice; its own
    # source, not counted in the Loader's stats).
    assert 1 == stats["origin_requests"] <= job.requests <= 2, (stats, job.requests)


@pytest.mark.parametrize("fmt", list(URIS))
def test_entry_missing_a_tenth_fetches_only_that_tenth(env, fmt, tmp_path):
    cache, size = str(tmp_path / "cache"), env["sizes"][fmt]
    epoch(URIS[fmt], cache, ids=range(0, COUNT * 9 // 10))
    with Egress(env["proxy"]) as job:
        stats = epoch(URIS[fmt], cache)
    assert stats["cache_misses"] == COUNT // 10, stats
    assert job.bytes <= 0.15 * size, f"fetched {job.bytes / size:.2f}x for 10% of the samples"
    assert job.gets <= COUNT // 10, job.gets  # one ranged GET per missing sample at most
    if fmt != "folder":
        # The missing tenth lies together in the last shard: one run, one GET.
        assert job.gets == 1, job.gets
    within_one_percent(stats["origin_bytes"], job.bytes)
    assert stats["origin_requests"] == job.requests


@pytest.mark.parametrize("fmt", list(URIS))
def test_replaced_object_is_detected_and_prepared_again(env, fmt, tmp_path):
    cache, s3 = str(tmp_path / "cache"), env["s3"]
    keys = sorted(o["Key"] for o in s3.list_objects_v2(Bucket=BUCKET, Prefix=fmt + "/")["Contents"])
    if fmt == "folder":
        keys = [k for k in keys if k.endswith((".jpg", ".png"))]
    first, other = keys[0], keys[-1]
    ssdfeed.warm(URIS[fmt], cache=cache, prepare=PREP, workers=2)
    old = s3.get_object(Bucket=BUCKET, Key=first)["Body"].read()
    try:
        new = s3.get_object(Bucket=BUCKET, Key=other)["Body"].read()
        s3.put_object(Bucket=BUCKET, Key=first, Body=new)  # a new ETag
        stats = epoch(URIS[fmt], cache)
        # Another identity, so another entry: nothing of the old one served.
        assert stats["cache_hits"] == 0, stats
        assert stats["cache_misses"] == len(ssdfeed.Source(URIS[fmt])), stats
        # Refilled: the new entry is complete, and the next job reads nothing.
        again = epoch(URIS[fmt], cache)
        assert again["cache_misses"] == 0 and again["origin_bytes"] == 0, again
    finally:
        s3.put_object(Bucket=BUCKET, Key=first, Body=old)


@pytest.mark.parametrize("fmt", ["tar", "tfrecord"])
def test_damaged_index_is_rebuilt_from_one_stream_and_replaced(env, fmt, tmp_path):
    cache, size = str(tmp_path / "cache"), env["sizes"][fmt]
    ssdfeed.warm(URIS[fmt], cache=cache, prepare=PREP, workers=2)
    (index,) = glob.glob(os.path.join(cache, "entries", "*", "origin-*.index"))
    with open(index, "r+b") as f:
        f.seek(os.path.getsize(index) // 2)
        byte = f.read(1)
        f.seek(-1, os.SEEK_CUR)
        f.write(bytes([byte[0] ^ 1]))
    with Egress(env["proxy"]) as job:
        stats = epoch(URIS[fmt], cache)
    assert stats["cache_hits"] == COUNT, stats  # the entry is served all the same
    assert job.bytes <= 1.05 * size and job.gets <= env["objects"][fmt], (job.bytes, job.gets)
    with Egress(env["proxy"]) as again:
        epoch(URIS[fmt], cache)
    assert again.gets == 0 and again.bytes == 0, "the damaged index was not replaced"
