#!/usr/bin/env python3
"""Side-by-side loader comparison on one generated dataset, the same cores,
the same augmentation (RandomResizedCrop 224 + flip, uint8 out) and the same
cache disk. Writes a markdown table and a PNG bar chart.

    python3 bench/compare/run.py [--count 2000] [--repeat 3] [--out bench/compare/results]

Each run is its own process (so peak RSS is its own): ssdfeed cold (fresh
cache) and warm (second job on the filled cache); PyTorch DataLoader + PIL
(num_workers = cores, what a user would pick); tf.data with
cache(filename) on the same disk, cold (first epoch writes the cache) and
warm (a new job reading it); DALI's CPU pipeline when nvidia-dali imports
(set SSDFEED_DALI_PYTHON to a python that has nvidia-dali-cuda130).

As root it also measures warm epochs from the device rather than from RAM:
the page cache dropped before the epoch (buffered reads, what the Python
Loader picks for a dataset that fits in memory), and `ssdfeed bench loader
--warm-read direct --drop-caches --vs-storage` (O_DIRECT + io_uring, what it
picks for one that does not), with that bench's own O_DIRECT random-read
IOPS at the record size and QD 32 measured in the same run: the ratio
warm-from-device images/s / device IOPS says how much of the SSD the loader
uses.

Then the record codecs side by side: `ssdfeed bench loader --codec
raw,zstd,jpeg` on the same data and cache disk (footprint, cold fill, warm
from the page cache, with it dropped and, as root with cgroup-v1 blkio, on
the disk throttled to --throttle; codecs interleaved in rounds, medians),
each warm figure next to `ssdfeed plan`'s prediction measured in that run.
--codecs '' leaves it out.

Needs: the ssdfeed package installed in this interpreter (`pip install .`),
torch and Pillow (PyTorch row), tensorflow (tf.data rows), numpy and
matplotlib (the PNG).
Nothing from the C++ build directory is used.
"""

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
BATCH = 128
CROP = 224


def peak_rss_mb():
    import resource
    own = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    kids = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    return max(own, kids) / 1024


# ---------------------------------------------------------------- candidates
def run_ssdfeed(data, cache, epoch):
    import ssdfeed
    loader = ssdfeed.Loader(f"folder:{data}", cache=cache, prepare=ssdfeed.Prepare(resize_short=256),
                            augment=ssdfeed.RandomResizedCrop(CROP, flip=True), batch_size=BATCH,
                            shuffle=True, seed=0, workers=os.cpu_count())
    loader.set_epoch(epoch)
    t0 = time.perf_counter()
    n = sum(len(y) for _, y in loader)
    return n / (time.perf_counter() - t0)


def run_torch(data, cache, epoch):
    import math
    import random

    import numpy as np
    import torch
    from PIL import Image

    classes = sorted(d for d in os.listdir(data) if os.path.isdir(os.path.join(data, d)))
    items = [(os.path.join(data, c, f), i) for i, c in enumerate(classes)
             for f in sorted(os.listdir(os.path.join(data, c))) if f.endswith(".jpg")]

    class Folder(torch.utils.data.Dataset):  # ImageFolder + RandomResizedCrop + flip
        def __len__(self):
            return len(items)

        def __getitem__(self, i):
            path, label = items[i]
            im = Image.open(path).convert("RGB")
            w, h = im.size
            area = w * h
            for _ in range(10):
                target = area * random.uniform(0.08, 1.0)
                ratio = math.exp(random.uniform(math.log(3 / 4), math.log(4 / 3)))
                cw, ch = round(math.sqrt(target * ratio)), round(math.sqrt(target / ratio))
                if 0 < cw <= w and 0 < ch <= h:
                    x, y = random.randint(0, w - cw), random.randint(0, h - ch)
                    break
            else:
                cw, ch, x, y = min(w, h), min(w, h), (w - min(w, h)) // 2, (h - min(w, h)) // 2
            im = im.resize((CROP, CROP), Image.Resampling.BILINEAR, box=(x, y, x + cw, y + ch))
            if random.random() < 0.5:
                im = im.transpose(Image.Transpose.FLIP_LEFT_RIGHT)
            return torch.from_numpy(np.asarray(im)), label

    loader = torch.utils.data.DataLoader(Folder(), batch_size=BATCH, shuffle=True,
                                         num_workers=os.cpu_count(), persistent_workers=False)
    t0 = time.perf_counter()
    n = sum(len(y) for _, y in loader)
    return n / (time.perf_counter() - t0)


def run_tf(data, cache, epoch):
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    import tensorflow as tf
    classes = sorted(d for d in os.listdir(data) if os.path.isdir(os.path.join(data, d)))
    table = tf.lookup.StaticHashTable(
        tf.lookup.KeyValueTensorInitializer(classes, list(range(len(classes)))), -1)

    def load(path):
        img = tf.io.decode_jpeg(tf.io.read_file(path), channels=3)
        shape = tf.cast(tf.shape(img)[:2], tf.float32)
        size = tf.cast(tf.round(shape * 256.0 / tf.reduce_min(shape)), tf.int32)
        img = tf.cast(tf.image.resize(img, size, antialias=True), tf.uint8)
        label = table.lookup(tf.strings.split(path, os.sep)[-2])
        return img, label

    def augment(img, label):
        begin, size, _ = tf.image.sample_distorted_bounding_box(
            tf.shape(img), tf.zeros([1, 0, 4]), area_range=(0.08, 1.0),
            aspect_ratio_range=(3 / 4, 4 / 3), min_object_covered=0.0, max_attempts=10,
            use_image_if_no_bounding_boxes=True)
        img = tf.image.resize(tf.slice(img, begin, size), (CROP, CROP))
        img = tf.image.random_flip_left_right(tf.cast(img, tf.uint8))
        return img, label

    files = tf.data.Dataset.list_files(os.path.join(data, "*", "*.jpg"), shuffle=False)
    ds = (files.map(load, num_parallel_calls=tf.data.AUTOTUNE).cache(cache)
          .shuffle(1000, seed=epoch).map(augment, num_parallel_calls=tf.data.AUTOTUNE)
          .batch(BATCH).prefetch(tf.data.AUTOTUNE))
    t0 = time.perf_counter()
    n = sum(int(y.shape[0]) for _, y in ds)
    return n / (time.perf_counter() - t0)


def run_dali(data, cache, epoch):
    from nvidia.dali import fn, pipeline_def, types

    @pipeline_def(batch_size=BATCH, num_threads=os.cpu_count(), device_id=None, seed=epoch)
    def pipe():
        jpegs, labels = fn.readers.file(file_root=data, random_shuffle=True, name="r")
        imgs = fn.decoders.image_random_crop(jpegs, device="cpu", output_type=types.RGB,
                                             random_area=[0.08, 1.0],
                                             random_aspect_ratio=[3 / 4, 4 / 3])
        imgs = fn.resize(imgs, resize_x=CROP, resize_y=CROP)
        imgs = fn.flip(imgs, horizontal=fn.random.coin_flip())
        return imgs, labels

    p = pipe()
    p.build()
    size = p.epoch_size("r")
    t0 = time.perf_counter()
    n = 0
    while n < size:
        imgs, _ = p.run()
        n += len(imgs)
    return n / (time.perf_counter() - t0)


RUNNERS = {"ssdfeed": run_ssdfeed, "torch": run_torch, "tf": run_tf, "dali": run_dali}


def one(args):
    rate = RUNNERS[args.one](args.data, args.cache, args.epoch)
    print(json.dumps({"images_per_s": rate, "peak_rss_mb": peak_rss_mb()}))


# ------------------------------------------------------------------- driver
def child(name, data, cache, epoch):
    # DALI may live in its own venv (it pins libcst and friends).
    py = os.environ.get("SSDFEED_DALI_PYTHON", sys.executable) if name == "dali" else sys.executable
    cmd = [py, os.path.abspath(__file__), "--one", name, "--data", data,
           "--cache", cache, "--epoch", str(epoch)]
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        return None, r.stderr.strip().splitlines()[-1] if r.stderr.strip() else "failed"
    return json.loads(r.stdout.strip().splitlines()[-1]), None


def drop_page_cache():
    # Root only: what a dataset larger than memory looks like to a warm epoch.
    try:
        os.sync()
        with open("/proc/sys/vm/drop_caches", "w") as f:
            f.write("3\n")
        return True
    except OSError:
        return False


def device_run(data, cache):
    """ssdfeed bench loader on the filled entry: epochs with the page cache
    dropped (O_DIRECT reads) and its storage row, side by side."""
    exe = shutil.which("ssdfeed") or os.path.join(os.path.dirname(sys.executable), "ssdfeed")
    cmd = [exe, "bench", "loader", "--source", f"folder:{data}", "--resize-short", "256",
           "--cache", cache, "--epochs", "3", "--batch", str(BATCH), "--crop", str(CROP),
           "--warm-read", "direct", "--drop-caches", "--vs-storage", "--json"]
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        return None, (r.stderr.strip().splitlines() or ["failed"])[-1]
    return json.loads(r.stdout), None


def codec_run(data, cache, codecs, rounds, throttle):
    """ssdfeed bench loader --codec: each codec's entry filled fresh, then
    warm epochs in rounds, the codecs interleaved."""
    exe = shutil.which("ssdfeed") or os.path.join(os.path.dirname(sys.executable), "ssdfeed")
    cmd = [exe, "bench", "loader", "--source", f"folder:{data}", "--resize-short", "256",
           "--cache", cache, "--batch", str(BATCH), "--crop", str(CROP), "--codec", codecs,
           "--rounds", str(rounds), "--json"]
    if throttle:
        cmd += ["--throttle-read-bps", throttle]
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        return None, (r.stderr.strip().splitlines() or ["failed"])[-1], cmd
    return json.loads(r.stdout), None, cmd


def codec_table(res, cmd, throttle):
    """Markdown: a row per codec, each warm median with plan's prediction."""
    def cell(measured, predicted):
        if not measured:
            return "-"
        return f"{measured:,.0f} (plan {predicted:,.0f}, {measured / predicted:.2f}x)"
    lines = ["", "## Record codecs", "",
             f"`{' '.join(os.path.basename(c) if i == 0 else c for i, c in enumerate(cmd))}`", "",
             "| codec | entry MB | x raw | cold fill images/s | warm, page cache | "
             f"warm, cache dropped | warm, throttled to {throttle or '-'} |",
             "|---|---:|---:|---:|---:|---:|---:|"]
    raw = next((x for x in res["codecs"] if x["codec"] == "raw"), None)
    for x in res["codecs"]:
        name = x["codec"] + (f" q{x['quality']}" if x["codec"] == "jpeg" else "")
        p, pt = x["plan"], x["plan_throttled"]
        lines.append(f"| {name} | {x['entry_bytes'] / 1e6:,.1f} | {x['footprint_x_raw']:.2f}x | "
                     f"{x['cold_images_per_s']:,.0f} | "
                     f"{cell(x['page_cache_median'], p['cores_images_per_s'])} | "
                     f"{cell(x['dropped_median'], p['predicted_images_per_s'])} | "
                     f"{cell(x['throttled_median'], pt['predicted_images_per_s'])} |")
    lines.append("")
    if raw and raw["dropped_median"] and res["recommended"]:
        rec = next(x for x in res["codecs"] if x["codec"] == res["recommended"])
        lines.append(f"- plan recommends {rec['codec']} for this disk: "
                     f"{rec['dropped_median'] / raw['dropped_median']:.2f}x of raw's warm "
                     "images/s with the page cache dropped")
    if raw and raw["throttled_median"]:
        best = max(res["codecs"], key=lambda x: x["throttled_median"])
        lines.append(f"- throttled: {best['codec']} is fastest, "
                     f"{best['throttled_median'] / raw['throttled_median']:.2f}x raw's images/s "
                     f"(plan recommends {res['recommended_throttled']})")
    for k in ("dropped_skipped", "throttle_skipped"):
        if res.get(k):
            lines.append(f"- {k.replace('_', ' ')}: {res[k]}")
    return lines


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--count", type=int, default=2000)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--out", default=os.path.join(HERE, "results"))
    ap.add_argument("--one", choices=list(RUNNERS))
    ap.add_argument("--data")
    ap.add_argument("--cache")
    ap.add_argument("--epoch", type=int, default=0)
    ap.add_argument("--codecs", default="raw,zstd,jpeg",
                    help="record codecs to compare ('' : none)")
    ap.add_argument("--throttle", default="500M",
                    help="the slower device the codecs are also measured on ('' : none)")
    args = ap.parse_args()
    if args.one:
        return one(args)

    import ssdfeed
    os.makedirs(args.out, exist_ok=True)
    work = os.path.join(args.out, "work")
    data = os.path.join(work, "data")
    if not os.path.exists(os.path.join(data, f".n{args.count}")):
        shutil.rmtree(data, ignore_errors=True)
        ssdfeed.make_dataset(data, format="folder", count=args.count, classes=10, seed=0)
        open(os.path.join(data, f".n{args.count}"), "w").close()

    rows = {}
    notes = []
    storage = []

    def record(label, res, err):
        if res is None:
            notes.append(f"{label}: not run ({err})")
            return
        rows.setdefault(label, []).append(res)

    for rep in range(args.repeat):
        print(f"round {rep + 1}/{args.repeat}", flush=True)
        sf = os.path.join(work, "ssdfeed-cache")
        shutil.rmtree(sf, ignore_errors=True)
        record("ssdfeed cold", *child("ssdfeed", data, sf, 0))
        record("ssdfeed warm", *child("ssdfeed", data, sf, 1))
        if drop_page_cache():
            record("ssdfeed warm, page cache dropped (buffered)", *child("ssdfeed", data, sf, 2))
            res, err = device_run(data, sf)
            if res is None:
                notes.append(f"ssdfeed bench loader --warm-read direct: not run ({err})")
            else:
                dev = [e for e in res["epochs"] if e.get("dropped_caches")]
                iops = res.get("storage", {}).get("iops", 0)
                rate = statistics.median(e["images_per_s"] for e in dev)
                rows.setdefault("ssdfeed warm from device (O_DIRECT, io_uring)", []).append(
                    {"images_per_s": rate, "peak_rss_mb": None, "storage_iops": iops})
                storage.append(res.get("storage", {}))
        elif rep == 0:
            notes.append("warm-from-device rows need root (/proc/sys/vm/drop_caches)")
        record("PyTorch DataLoader + PIL", *child("torch", data, "", 0))
        tfc = os.path.join(work, "tf-cache")
        shutil.rmtree(tfc, ignore_errors=True)
        os.makedirs(tfc)
        record("tf.data cache(file) cold", *child("tf", data, os.path.join(tfc, "c"), 0))
        record("tf.data cache(file) warm", *child("tf", data, os.path.join(tfc, "c"), 1))
        if rep == 0:
            res, err = child("dali", data, "", 0)
            record("DALI CPU pipeline", res, err)
    shutil.rmtree(os.path.join(work, "ssdfeed-cache"), ignore_errors=True)
    shutil.rmtree(os.path.join(work, "tf-cache"), ignore_errors=True)
    codec_lines = []
    if args.codecs:
        print("record codecs", flush=True)
        cc = os.path.join(work, "codec-cache")
        res, err, cmd = codec_run(data, cc, args.codecs, args.repeat, args.throttle)
        shutil.rmtree(cc, ignore_errors=True)
        if res is None:
            notes.append(f"record codecs: not run ({err})")
        else:
            codec_lines = codec_table(res, cmd, args.throttle)

    # Peak RSS is not taken from `ssdfeed bench loader` (a CLI run): None, "n/a".
    med = {k: (statistics.median(r["images_per_s"] for r in v),
               max((r["peak_rss_mb"] for r in v if r["peak_rss_mb"] is not None), default=None),
               len(v)) for k, v in rows.items()}
    base = med.get("PyTorch DataLoader + PIL", (float("nan"),))[0]
    cores = os.cpu_count()
    lines = [f"# Loader comparison: {args.count} generated JPEGs, {cores} cores, "
             f"RandomResizedCrop {CROP} + flip, batch {BATCH}, uint8 out", "",
             "| loader | images/s (median) | images/s per core | vs PyTorch+PIL | peak RSS MB | runs |",
             "|---|---:|---:|---:|---:|---:|"]
    for k, (rate, rss, n) in med.items():
        rss_text = "n/a" if rss is None else f"{rss:,.0f}"
        lines.append(f"| {k} | {rate:,.0f} | {rate / cores:,.0f} | {rate / base:.1f}x | "
                     f"{rss_text} | {n} |")
    if "ssdfeed warm" in med and "tf.data cache(file) warm" in med:
        lines += ["", f"warm ssdfeed / warm tf.data cache: "
                      f"{med['ssdfeed warm'][0] / med['tf.data cache(file) warm'][0]:.1f}x"]
    if storage:
        iops = statistics.median(st["iops"] for st in storage if st.get("iops"))
        st = storage[-1]
        lines += ["", f"Device: O_DIRECT random {st['block']}-byte reads (a record's aligned "
                      f"window) at QD {st['qd']} ({st['engine']}), measured by `ssdfeed bench "
                      f"loader --vs-storage` in each round: {iops:,.0f} IOPS (median)."]
        for k in ("ssdfeed warm from device (O_DIRECT, io_uring)",
                  "ssdfeed warm, page cache dropped (buffered)"):
            if k in med:
                lines.append(f"- {k}: {med[k][0] / iops:.2f}x of the device's IOPS")
    lines += codec_lines
    lines += [""] + [f"- {n}" for n in notes]
    lines += ["", "Command: `python3 bench/compare/run.py --count "
              f"{args.count} --repeat {args.repeat}`. Peak RSS is the largest single process "
              "(a DataLoader worker counts on its own)."]
    md = "\n".join(lines) + "\n"
    with open(os.path.join(args.out, "compare.md"), "w") as f:
        f.write(md)
    with open(os.path.join(args.out, "compare.json"), "w") as f:
        json.dump(rows, f, indent=2)
    print(md)
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        names = list(med)
        fig, ax = plt.subplots(figsize=(9, 4.5))
        bars = ax.barh(names, [med[n][0] for n in names],
                       color=["#1f77b4" if n.startswith("ssdfeed") else "#999999" for n in names])
        ax.bar_label(bars, fmt="%.0f", padding=3)
        ax.invert_yaxis()
        ax.set_xlabel(f"images/s ({cores} cores, RandomResizedCrop {CROP} + flip)")
        ax.set_title(f"{args.count} JPEGs, median of {args.repeat}")
        fig.tight_layout()
        fig.savefig(os.path.join(args.out, "compare.png"), dpi=110)
    except ImportError:
        print("matplotlib not installed: no chart (pip install matplotlib)")


if __name__ == "__main__":
    main()
