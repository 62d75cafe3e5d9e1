"""Source layering the architecture promises (docs/ARCHITECTURE.md): the
image layer knows nothing of the cache or the loader, the metrics nothing of
the loader, the public headers and the Python bindings use only public
headers, the CLI (a tool, like leveldb's db_bench) only the public ones and
a named few private ones, and the Python package's modules import one
another without a cycle."""

import ast
import pathlib
import re

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
INCLUDE = re.compile(r'^#include "([^"]+)"', re.M)


def _includes(folder, under="src"):
    src = ROOT / under / folder
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


# The private headers the CLI may use: the work it does that is not a public
# API (the entry key, the size parser) and the uninstalled tools library
# (the benchmarks, their report page, the doctor's node checks).
# Anything else it needs belongs in the library: `cache verify --repair` and
# `cache import --check-origin` call ssdfeed/entry_check.h, not the fetcher
# and the origin check; a record's fields it reads parsed
# (CachedSample::ParsedFields), never through the cache's private headers.
CLI_PRIVATE = {"bench/bench.h", "bench/report_html.h", "doctor/node_checks.h",
               "pipeline/entry_key.h", "util/units.h"}


def test_cli_includes_public_headers_and_only_the_named_private_ones():
    bad = [(p, inc) for p, inc in _includes("cli")
           if not inc.startswith(("ssdfeed/", "cli/")) and inc not in CLI_PRIVATE]
    assert not bad, bad


def test_public_headers_include_only_public_headers():
    bad = [(p, inc) for p, inc in _includes("ssdfeed", under="include")
           if not inc.startswith("ssdfeed/")]
    assert not bad, bad


# Test hooks: the SigV4 signer (_ssdfeed._s3_sign, checked against
# botocore's by test_s3.py) and the field geometry (crop_params,
# _prepare_fields, _render_fields, checked against torchvision and OpenCV by
# test_field_geometry.py).
BINDING_HOOKS = {"source/s3_sigv4.h", "image/augment.h", "image/field_augment.h",
                 "image/field_prepare.h"}
# The record codecs: _decode_with (ssdfeed.decode) gives a jpeg spec's pixels
# as a jpeg entry serves them, the prepared image's round trip.
BINDING_HOOKS |= {"image/pixel_codec.h"}


# The item bindings (python/src/bind_items.cc, bind_item_stream.cc) are glue
# over the public ItemStore and ItemStream (ssdfeed/items.h): no exception
# for them.
def test_bindings_include_only_public_headers():
    bad = [(p, inc) for p, inc in _includes("src", under="python")
           if not inc.startswith(("ssdfeed/", "python/src/")) and inc not in BINDING_HOOKS]
    assert not bad, bad


def test_no_cache_header_in_the_cli_the_bindings_or_the_item_tests():
    """The cache's private headers (cache/*.h) are the cache's (and the
    library's pipeline, benchmarks and fuzzers'): the CLI, the bindings and
    the item tests read a record's fields parsed (CachedSample::ParsedFields)."""
    bad = [(p, inc) for folder, under in (("cli", "src"), ("src", "python"))
           for p, inc in _includes(folder, under) if inc.startswith("cache/")]
    bad += [(p, inc) for p, inc in _includes("cc", under="tests")
            if inc.startswith("cache/") and p.name in ("items_test.cc", "item_store_test.cc")]
    assert not bad, bad


def _resolve(inc):
    for base in (ROOT / "include", ROOT / "src", ROOT):
        if (base / inc).is_file():
            return base / inc
    return None


def _closure(path):
    """Every quoted header path reaches through its includes."""
    seen, stack = set(), [path]
    while stack:
        for inc in INCLUDE.findall(stack.pop().read_text()):
            if inc not in seen:
                seen.add(inc)
                if _resolve(inc) is not None:
                    stack.append(_resolve(inc))
    return seen


UPPER = ("ssdfeed/loader.h", "ssdfeed/cache.h")


def test_image_and_source_rooms_reach_neither_loader_nor_cache_headers():
    """Through every include, not only the direct ones: enum_names.h declares
    its enums rather than including their headers, so a file that spells an
    option does not pull in the loader's and the cache's."""
    bad = []
    for room in ("image", "source"):
        folder = ROOT / "src" / room
        if not folder.is_dir():
            pytest.skip("no source tree (installed package only)")
        for path in sorted(folder.glob("*.[ch]*")):
            bad += [(path.name, inc) for inc in _closure(path)
                    if inc in UPPER or inc.startswith(("cache/", "pipeline/"))]
    enum_names = ROOT / "include" / "ssdfeed" / "enum_names.h"
    bad += [("enum_names.h", inc) for inc in _closure(enum_names) if inc != "ssdfeed/status.h"]
    assert not bad, bad


def test_util_headers_reach_nothing_above_util():
    folder = ROOT / "src" / "util"
    if not folder.is_dir():
        pytest.skip("no source tree (installed package only)")
    bad = [(p.name, inc) for p in sorted(folder.glob("*.h")) for inc in _closure(p)
           if inc in UPPER or inc.startswith(("cache/", "pipeline/", "image/", "source/"))]
    assert not bad, bad


def test_metrics_include_nothing_of_the_loader():
    bad = [(p, inc) for p, inc in _includes("metrics")
           if inc.startswith("pipeline/") or inc == "ssdfeed/loader.h"]
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


def python_imports(package: pathlib.Path) -> dict:
    """{module: the package's modules it imports}, for every .py file of
    the package, counting imports inside functions too (a cycle hidden by a
    function-level import is still a cycle: each module needs the other).
    A name imported from the package itself that is not a module is an edge
    to ``__init__``; the C++ extension (``_ssdfeed``) imports none of them."""
    modules = {p.stem for p in package.glob("*.py")} | {"_ssdfeed"}
    name = package.name
    graph = {}
    for path in sorted(package.glob("*.py")):
        edges = set()
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                if node.module == name:
                    edges |= {a.name if a.name in modules else "__init__" for a in node.names}
                    continue
                targets = [node.module]
            else:
                continue
            for t in targets:
                parts = t.split(".")
                if parts[0] == name and len(parts) > 1 and parts[1] in modules:
                    edges.add(parts[1])
        graph[path.stem] = edges - {path.stem}
    return graph


def import_cycles(graph: dict) -> list:
    """Every module that lies on a cycle, with the cycle found from it."""
    cycles = []
    for start in sorted(graph):
        stack, seen = [(start, [start])], set()
        while stack:
            node, path = stack.pop()
            for nxt in sorted(graph.get(node, ())):
                if nxt == start:
                    cycles.append(path + [start])
                    stack = []
                    break
                if nxt not in seen:
                    seen.add(nxt)
                    stack.append((nxt, path + [nxt]))
    return cycles


def test_python_modules_import_without_cycles():
    package = ROOT / "python" / "ssdfeed"
    if not package.is_dir():
        pytest.skip(f"no source tree at {package} (installed package only)")
    graph = python_imports(package)
    assert graph["tf"] and graph["_tf_cache"] is not None  # the parse sees the modules
    assert not import_cycles(graph), import_cycles(graph)


def test_the_cycle_check_finds_a_cycle_behind_a_function_level_import(tmp_path):
    pkg = tmp_path / "ssdfeed"
    pkg.mkdir()
    (pkg / "a.py").write_text("from ssdfeed import b\n")
    (pkg / "b.py").write_text("def f():\n    from ssdfeed.a import x\n")
    (pkg / "c.py").write_text("import ssdfeed.b\n")
    assert import_cycles(python_imports(pkg)) == [["a", "b", "a"], ["b", "a", "b"]]
