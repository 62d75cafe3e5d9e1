"""The cached, deterministic preparation step (DESIGN.md "Prepare spec")."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional, Tuple

from ssdfeed import _ssdfeed


def _pair(v) -> Tuple[int, int]:
    if v is None:
        return (0, 0)
    if isinstance(v, int):
        return (v, v)
    h, w = v
    return (int(h), int(w))


@dataclass(frozen=True)
class Prepare:
    """Decode, then resize (shorter side, or exact (H, W)), then centre crop.

    resize_short: shorter side in pixels (aspect kept); None: no resize.
    resize: exact (H, W); None: off. max_long: cap on the longer side.
    center_crop: int or (H, W); None: off. color: "rgb" or "gray".
    """

    resize_short: Optional[int] = None
    resize: Optional[Tuple[int, int]] = None
    max_long: Optional[int] = None
    center_crop: Optional[Tuple[int, int]] = None
    color: str = "rgb"

    def __post_init__(self):
        if self.color not in ("rgb", "gray"):
            raise ValueError(f"color must be 'rgb' or 'gray', not {self.color!r}")
        _ssdfeed.prepare_canonical(**self._kwargs())  # validates

    def _kwargs(self) -> dict:
        return dict(
            resize_short=self.resize_short or 0,
            max_long=self.max_long or 0,
            resize=_pair(self.resize),
            center_crop=_pair(self.center_crop),
            gray=self.color == "gray",
        )

    def canonical(self) -> str:
        """The text that goes into cache fingerprints."""
        return _ssdfeed.prepare_canonical(**self._kwargs())

    def apply(self, data: bytes):
        """Decodes and prepares encoded image bytes: uint8 HWC numpy array."""
        return _ssdfeed.decode(data, **self._kwargs())
