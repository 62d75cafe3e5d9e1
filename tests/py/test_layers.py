"""Source layering the architecture promises (docs/ARCHITECTURE.md): the
image layer knows nothing of the cache or the loader, and the CLI is a client
of the public headers only."""

import pathlib
import re

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
INCLUDE = re.compile(r'^#include "([^"]+)"', re.M)


def _includes(folder):
    src = ROOT / "src" / folder
    if not src.is_dir():
        pytest.skip(f"no source tree at {src} (installed package only)")
    for path in sorted(src.glob("*.[ch]*")):
        for inc in INCLUDE.findall(path.read_text()):
            yield path.relative_to(ROOT), inc


def test_image_layer_includes_neither_cache_nor_loader():
    bad = [(p, inc) for p, inc in _includes("image")
           if inc.startswith(("cache/", "pipeline/")) or inc in ("ssdfeed/cache.h",
                                                                 "ssdfeed/loader.h")]
    assert not bad, bad


def test_cli_includes_only_public_headers():
    bad = [(p, inc) for p, inc in _includes("cli")
           if not inc.startswith(("ssdfeed/", "cli/"))]
    assert not bad, bad


def test_every_source_file_is_listed_in_cmake():
    """CMake lists sources instead of globbing them, so a new .cc that no
    CMakeLists.txt names would silently not be built (or tested)."""
    if not (ROOT / "CMakeLists.txt").is_file():
        pytest.skip("no source tree (installed package only)")
    listed = set()
    for cm in ROOT.rglob("CMakeLists.txt"):
        if any(part.startswith(("build", ".venv")) for part in cm.relative_to(ROOT).parts):
            continue
        for name in re.findall(r"[\w./${}_-]+\.cc\b", cm.read_text()):
            listed.add((cm.parent / name.split("}/")[-1]).resolve())
            listed.add((ROOT / name).resolve())
    sources = [p for d in ("src", "python", "tests/cc", "tests/util", "bench", "fuzz")
               for p in (ROOT / d).rglob("*.cc")]
    assert sources
    missing = sorted(str(p.relative_to(ROOT)) for p in sources if p.resolve() not in listed)
    assert not missing, f"not named in any CMakeLists.txt: {missing}"
