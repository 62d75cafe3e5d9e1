#!/usr/bin/env python3
"""Which reversible filter before zstd stores prepared photos smallest: the
zstd codec's Up (PNG's filter on interleaved RGB rows) against reversible
colour transforms (YCoCg-R, JPEG 2000's RCT) with Up per plane. Prepares
the first --count samples of a source with ssdfeed (resize_short 256, raw
records), filters each image, and compresses all of it with the `zstd`
command at level 1 (the codec's level), printing stored bytes / raw bytes.

    python3 bench/zstd_filters.py --source folder:DIR [--count 40]

A colour transform's chroma planes need 9 bits: "16-bit" stores each
residual as two bytes, "9th bit packed" stores the low byte's Up residual
plus the plane's ninth bit packed 8 to a byte (both decode losslessly).
"""
import argparse
import subprocess
import tempfile

import numpy as np

import ssdfeed


def zstd_size(data: bytes) -> int:
    return len(subprocess.run(["zstd", "-1", "-c", "-q"], input=data, capture_output=True,
                              check=True).stdout)


def up(p):
    d = p.copy()
    d[1:] = p[1:] - p[:-1]
    return d


def sixteen_bit(planes) -> bytes:
    out = b""
    for p in planes:
        d = up(p).astype(np.int16)
        out += (d & 0xFF).astype(np.uint8).tobytes() + ((d >> 8) & 0xFF).astype(np.uint8).tobytes()
    return out


def ninth_bit_packed(luma, chroma) -> bytes:
    out = (up(luma) & 0xFF).astype(np.uint8).tobytes()
    for p in chroma:  # -255..255: the low byte's residual, then the 9th bit
        out += (up(p) & 0xFF).astype(np.uint8).tobytes()
        out += np.packbits(((p + 256) >> 8) & 1).tobytes()
    return out


def filters(a):
    """Each filter's bytes for one prepared H x W x 3 image (int32)."""
    r, g, b = a[..., 0], a[..., 1], a[..., 2]
    co = r - b
    t = b + (co >> 1)
    cg = g - t
    y = t + (cg >> 1)  # YCoCg-R, lossless
    yr, u, v = (r + 2 * g + b) >> 2, b - g, r - g  # JPEG 2000 RCT, lossless
    return {
        "Up on RGB rows (the zstd codec)": up(a).astype(np.uint8).tobytes(),
        "YCoCg-R + Up per plane, 16-bit": sixteen_bit([y, co, cg]),
        "YCoCg-R + Up per plane, 9th bit packed": ninth_bit_packed(y, [co, cg]),
        "RCT + Up per plane, 16-bit": sixteen_bit([yr, u, v]),
        "RCT + Up per plane, 9th bit packed": ninth_bit_packed(yr, [u, v]),
    }


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--source", required=True)
    p.add_argument("--count", type=int, default=40)
    args = p.parse_args()
    raw, images_done, joined = 0, 0, {}
    with tempfile.TemporaryDirectory(prefix="ssdfeed-zstd-filters-") as cache:
        it = ssdfeed.Loader(args.source, cache=cache, prepare=ssdfeed.Prepare(resize_short=256),
                            batch_size=1, shuffle=False, workers=1)
        for images, _ in it:
            if images_done == args.count:
                break
            a = np.asarray(images[0]).astype(np.int32)
            raw += a.size
            images_done += 1
            for name, data in filters(a).items():
                joined.setdefault(name, []).append(data)
    print(f"{args.source}: {images_done} prepared images, resize_short 256, zstd -1")
    for name, parts in joined.items():
        print(f"{name:42s} {zstd_size(b''.join(parts)) / raw:.3f}x raw")


if __name__ == "__main__":
    main()
