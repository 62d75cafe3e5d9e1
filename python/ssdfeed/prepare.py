"""The cached, deterministic preparation step."""

from __future__ import annotations

import numbers
from dataclasses import dataclass
from typing import Optional, Tuple, Union

from ssdfeed import _ssdfeed


def _pair(v) -> Tuple[int, int]:
    if v is None:
        return (0, 0)
    if isinstance(v, numbers.Integral):
        return (int(v), int(v))
    h, w = v
    return (int(h), int(w))


def _is_int(v) -> bool:
    return isinstance(v, numbers.Integral) and not isinstance(v, bool)


def _positive(name: str, v) -> None:
    if v is not None and (not _is_int(v) or v < 1):
        raise ValueError(f"{name} must be an int >= 1 or None (off), not {v!r}")


def _positive_pair(name: str, v) -> None:
    """v is an int >= 1 or a pair (H, W) of them."""
    ok = _is_int(v) and v >= 1
    if not ok and isinstance(v, (tuple, list)) and len(v) == 2:
        ok = all(_is_int(x) and x >= 1 for x in v)
    if not ok:
        raise ValueError(f"{name} must be an int >= 1 or a pair (H, W) of them, not {v!r}")


@dataclass(frozen=True)
class Prepare:
    """The preparation done once per sample and cached: decode, then resize
    (shorter side, or exact (H, W)), then centre crop.

    The default, ``Prepare()``, keeps full-size RGB pixels: it loses nothing,
    so it suits any model, but it is large (a 500x375 JPEG of ~110 KB becomes
    550 KiB). ``ssdfeed warm`` and ``ssdfeed bench loader`` use the same
    default, so the same call keys the same cache entry everywhere.

    Args:
        resize_short: shorter side in pixels, aspect kept (int >= 1), or None
            (default): no resize. Resizing down antialiases.
        resize: exact (H, W) (ints >= 1), aspect not kept, or None (default).
            Not together with resize_short.
        max_long: with resize_short, cap on the longer side (int >=
            resize_short), or None (default): no cap.
        center_crop: int or (H, W) cut from the centre after resizing, or None
            (default). An image smaller than the crop is an error naming both
            sizes.
        color: ``"rgb"`` (default) or ``"gray"`` (one channel).
        codec: how cache records store the pixels. ``"raw"`` (default): as
            they are. ``"zstd"``: lossless (a row filter, then zstd; about
            0.75-0.8x raw's bytes on photos); the pixels served equal raw's.
            ``"jpeg"``: lossy; the prepared image is re-encoded at
            ``quality`` (4:2:0 chroma; about 0.1-0.2x raw) and the pixels
            served, in every epoch, are its decode. ``"yuv420"``: lossy in
            chroma only; BT.601 YCbCr with Cb and Cr at half resolution,
            0.5x raw's bytes, decoded with a few integer operations per
            pixel (chroma upsampled by JPEG's triangle filter); the pixels
            served, in every epoch, are its decode.
            Part of the cache key.
        quality: JPEG quality of ``codec="jpeg"``, an int 1-100 (default 90).

    Samples of one batch must have one shape: use resize or center_crop, or
    an augment, unless batch_size is 1.
    """

    resize_short: Optional[int] = None
    resize: Optional[Tuple[int, int]] = None
    max_long: Optional[int] = None
    center_crop: Optional[Union[int, Tuple[int, int]]] = None
    color: str = "rgb"
    codec: str = "raw"
    quality: int = 90

    def __post_init__(self):
        if self.color not in ("rgb", "gray"):
            raise ValueError(f"color must be 'rgb' or 'gray', not {self.color!r}")
        if self.codec not in ("raw", "zstd", "jpeg", "yuv420"):
            raise ValueError(f"codec must be 'raw', 'zstd', 'jpeg' or 'yuv420', not {self.codec!r}")
        if not _is_int(self.quality) or not 1 <= self.quality <= 100:
            raise ValueError(f"quality must be an int from 1 to 100, not {self.quality!r}")
        _positive("resize_short", self.resize_short)
        _positive("max_long", self.max_long)
        if self.resize is not None:
            _positive_pair("resize", self.resize)
        if self.center_crop is not None:
            _positive_pair("center_crop", self.center_crop)
        self._spec()  # the C++ checks (combinations)

    def _spec(self) -> "_ssdfeed.PrepareSpec":
        """The C++ PrepareSpec of these arguments (validated)."""
        s = _ssdfeed.PrepareSpec()
        s.resize_short = self.resize_short or 0
        s.max_long = self.max_long or 0
        s.resize_h, s.resize_w = _pair(self.resize)
        s.crop_h, s.crop_w = _pair(self.center_crop)
        s.gray = self.color == "gray"
        s.codec = self.codec
        s.quality = int(self.quality)
        s.validate()
        return s

    def canonical(self) -> str:
        """The text that goes into cache fingerprints."""
        return self._spec().canonical()

    def describe(self) -> str:
        """A short human form, as ``ssdfeed cache ls`` shows it."""
        return _ssdfeed.describe_spec(self.canonical())

    def apply(self, data: bytes):
        """Decodes and prepares encoded image bytes: uint8 HWC numpy array,
        the pixels a cache of this preparation serves (for ``codec="jpeg"``
        and ``"yuv420"`` the decode of the prepared image re-encoded)."""
        return _ssdfeed._decode_with(data, self._spec())
