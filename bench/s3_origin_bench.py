"""Origin throughput from an S3-compatible server: ssdfeed's s3:// reader
against boto3 reading the same objects / byte ranges with the same
concurrency, side by side.

    python bench/s3_origin_bench.py [--count 400] [--concurrency 1,8,16]

Starts moto_server on loopback (pip install 'moto[server]' boto3), uploads a
generated dataset as a folder layout (one object per image: whole-object
GETs) and as TFRecord shards (one ranged GET per record), then reads every
sample once per reader and concurrency. Both sides pay the same server, so
the numbers compare clients, not storage. Prints MB/s and objects/s.
"""

import argparse
import os
import struct
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor

import boto3
from botocore.config import Config

import ssdfeed

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "tests", "py"))
from s3_util import MotoServer, upload_tree  # noqa: E402


def record_ranges(path):
    """(offset, length) of every TFRecord record's payload + CRC in path."""
    out, off = [], 0
    data = open(path, "rb").read()
    while off < len(data):
        (n,) = struct.unpack_from("<Q", data, off)
        out.append((off + 12, n + 4))
        off += 12 + n + 4
    return out


def timed(fn, jobs, conc):
    t0 = time.perf_counter()
    with ThreadPoolExecutor(conc) as ex:
        total = sum(ex.map(fn, jobs))
    return time.perf_counter() - t0, total


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--count", type=int, default=400)
    ap.add_argument("--concurrency", default="1,8,16")
    ap.add_argument("--side", type=int, default=384, help="image side (bigger: larger objects)")
    a = ap.parse_args()
    tmp = tempfile.mkdtemp(prefix="s3bench-")
    server = MotoServer()
    try:
        env = {"AWS_ACCESS_KEY_ID": "bench", "AWS_SECRET_ACCESS_KEY": "bench",
               "AWS_REGION": "us-east-1", "AWS_ENDPOINT_URL": server.url}
        os.environ.update(env)
        s3 = boto3.client("s3", endpoint_url=server.url)
        s3.create_bucket(Bucket="bench")
        folder = ssdfeed.make_dataset(os.path.join(tmp, "folder"), format="folder",
                                      count=a.count, classes=10, seed=1,
                                      min_side=a.side, max_side=a.side)
        tfr = ssdfeed.make_dataset(os.path.join(tmp, "tfr"), format="tfrecord", count=a.count,
                                   classes=10, seed=1, shard_size=100,
                                   min_side=a.side, max_side=a.side)
        keys = upload_tree(s3, "bench", folder["uri"].split(":", 1)[1], "folder/")
        tdir = os.path.join(tmp, "tfr")
        shard_keys = upload_tree(s3, "bench", tdir, "tfr/")
        ranges = [(k, off, n) for k in shard_keys
                  for off, n in record_ranges(os.path.join(tdir, k[len("tfr/"):]))]
        print(f"moto_server on loopback, {a.count} images of {a.side}px "
              f"({sum(n for _, _, n in ranges) / a.count / 1024:.0f} KiB on average)")
        print(f"{'layout':9} {'conc':>4} {'reader':8} {'MB/s':>8} {'objects/s':>10}")
        for conc in [int(c) for c in a.concurrency.split(",")]:
            os.environ["SSDFEED_S3_MAX_REQUESTS"] = str(conc)
            b3 = boto3.client("s3", endpoint_url=server.url,
                              config=Config(max_pool_connections=max(conc, 10)))
            for layout in ("folder", "tfrecord"):
                if layout == "folder":
                    src = ssdfeed.Source("folder:s3://bench/folder")
                    boto_fn = (lambda k: len(b3.get_object(Bucket="bench", Key=k)["Body"]
                                             .read()))
                    boto_jobs = keys
                else:
                    src = ssdfeed.Source("tfrecord:s3://bench/tfr/*.tfrecord")
                    boto_fn = (lambda j: len(b3.get_object(
                        Bucket="bench", Key=j[0],
                        Range=f"bytes={j[1]}-{j[1] + j[2] - 1}")["Body"].read()))
                    boto_jobs = ranges
                assert len(src) == a.count
                for name, fn, jobs in [("ssdfeed", lambda i: len(src.read(i)[0]),
                                        range(a.count)),
                                       ("boto3", boto_fn, boto_jobs)]:
                    secs, nbytes = timed(fn, jobs, conc)
                    print(f"{layout:9} {conc:4} {name:8} {nbytes / secs / 1e6:8.1f} "
                          f"{len(jobs) / secs:10.0f}", flush=True)
    finally:
        server.close()


if __name__ == "__main__":
    main()
