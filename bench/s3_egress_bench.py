"""Egress of an s3:// origin per warm-up and per job start: what a proxy
between ssdfeed and an S3 server (moto_server on loopback) counts, for the
tar (WebDataset), TFRecord and folder layouts of one generated dataset.

    python bench/s3_egress_bench.py [--count 600] [--shard-size 100]

For each layout: a warm-up into an empty root, a job (one epoch of a
Loader) over the complete entry, and a job over an entry missing 10% of its
samples. Prints object bytes (as a multiple of the dataset's bytes), object
GETs and all requests (listings included).
"""

import argparse
import os
import sys
import tempfile

import boto3

import ssdfeed

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "tests", "py"))
from s3_util import FaultProxy, MotoServer, upload_tree  # noqa: E402

BUCKET = "bench"
URIS = {"tar": f"tar:s3://{BUCKET}/tar/shard-*.tar",
        "tfrecord": f"tfrecord:s3://{BUCKET}/tfrecord/train-*.tfrecord",
        "folder": f"folder:s3://{BUCKET}/folder"}
PREP = ssdfeed.Prepare(resize=(64, 64))


def measured(proxy, fn):
    before = proxy.counts()
    fn()
    return [a - b for a, b in zip(proxy.counts(), before)]


def epoch(uri, cache, ids=None):
    for _ in ssdfeed.Loader(uri, cache=cache, prepare=PREP, batch_size=50, workers=2,
                            ids=ids):
        pass


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--count", type=int, default=600)
    ap.add_argument("--shard-size", type=int, default=100)
    a = ap.parse_args()
    tmp = tempfile.mkdtemp(prefix="s3egress-")
    server = MotoServer()
    proxy = FaultProxy(server.port, lambda method, target, n: None)
    try:
        os.environ.update({"AWS_ACCESS_KEY_ID": "bench", "AWS_SECRET_ACCESS_KEY": "bench",
                           "AWS_REGION": "us-east-1", "AWS_ENDPOINT_URL": proxy.url})
        s3 = boto3.client("s3", endpoint_url=server.url, region_name="us-east-1")
        s3.create_bucket(Bucket=BUCKET)
        print(f"{a.count} samples; bytes as a multiple of the layout's bytes in the bucket")
        print(f"{'layout':9} {'run':28} {'bytes':>7} {'GETs':>6} {'requests':>8}")
        for fmt, uri in URIS.items():
            rep = ssdfeed.make_dataset(os.path.join(tmp, fmt), format=fmt, count=a.count,
                                       classes=10, seed=1, shard_size=a.shard_size,
                                       min_side=128, max_side=256)
            local = rep["uri"].split(":", 1)[1]
            keys = upload_tree(s3, BUCKET, local if fmt == "folder" else os.path.dirname(local),
                               fmt + "/")
            size = sum(s3.head_object(Bucket=BUCKET, Key=k)["ContentLength"] for k in keys)
            full, part = os.path.join(tmp, "c-" + fmt), os.path.join(tmp, "p-" + fmt)
            runs = [
                ("warm-up, empty root", lambda: ssdfeed.warm(uri, cache=full, prepare=PREP,
                                                             workers=2)),
                ("job, complete entry", lambda: epoch(uri, full)),
                ("fill 90% (Loader ids=)", lambda: epoch(uri, part, range(a.count * 9 // 10))),
                ("job, entry missing 10%", lambda: epoch(uri, part)),
            ]
            for name, fn in runs:
                req, gets, nbytes = measured(proxy, fn)
                print(f"{fmt:9} {name:28} {nbytes / size:6.3f}x {gets:6d} {req:8d}")
    finally:
        proxy.close()
        server.close()


if __name__ == "__main__":
    main()
