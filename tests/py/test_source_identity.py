"""What identifies a source: the folder's label map as ImageFolder builds it,
files rewritten with the same size and mtime, symlinked datasets, and what
`ssdfeed cache verify` says of a source that changed under its entry."""

import importlib.util
import json
import os
import subprocess
import sys
import types

import numpy as np
import pytest
from PIL import Image

import ssdfeed

EXTENSIONS = (".jpg", ".jpeg", ".png")


def torchvision_folder():
    """torchvision.datasets.folder itself when torchvision is installed, else
    None. `import torchvision` fails beside torch 2.13.0 (its compiled ops do
    not load), so folder.py and vision.py are loaded on their own under stub
    parent packages, which are removed again."""
    spec = importlib.util.find_spec("torchvision")
    if spec is None or not spec.submodule_search_locations:
        return None
    base = spec.submodule_search_locations[0]
    names = ["torchvision", "torchvision.utils", "torchvision.datasets",
             "torchvision.datasets.vision", "torchvision.datasets.folder"]
    saved = {n: sys.modules.get(n) for n in names}
    try:
        pkg = types.ModuleType("torchvision")
        pkg.__path__ = [base]
        utils = types.ModuleType("torchvision.utils")
        utils._log_api_usage_once = lambda *a, **k: None
        datasets = types.ModuleType("torchvision.datasets")
        datasets.__path__ = [os.path.join(base, "datasets")]
        sys.modules.update({"torchvision": pkg, "torchvision.utils": utils,
                            "torchvision.datasets": datasets})
        for name in ("vision", "folder"):
            full = "torchvision.datasets." + name
            s = importlib.util.spec_from_file_location(full, os.path.join(base, "datasets",
                                                                           name + ".py"))
            module = importlib.util.module_from_spec(s)
            sys.modules[full] = module
            s.loader.exec_module(module)
        return sys.modules["torchvision.datasets.folder"]
    except Exception:
        return None
    finally:
        for n, m in saved.items():
            if m is None:
                sys.modules.pop(n, None)
            else:
                sys.modules[n] = m


def imagefolder_samples(directory, allow_empty):
    """(path, label) of every sample torchvision's DatasetFolder finds with
    ssdfeed's extensions, from torchvision when it loads, else from
    imagefolder_reference."""
    folder = torchvision_folder()
    if folder is None:
        return imagefolder_reference(directory, allow_empty)
    return folder.DatasetFolder(directory, loader=lambda p: p, extensions=EXTENSIONS,
                                allow_empty=allow_empty).samples


def imagefolder_reference(directory, allow_empty):
    """torchvision.datasets.folder.find_classes + make_dataset, replicated,
    restricted to ssdfeed's extensions and to files directly inside a class
    folder: classes are every os.scandir entry whose is_dir() is true (hidden
    ones and symlinked folders included), sorted; a class without a valid
    file raises FileNotFoundError unless allow_empty."""
    classes = sorted(e.name for e in os.scandir(directory) if e.is_dir())
    if not classes:
        raise FileNotFoundError(f"Couldn't find any class folder in {directory}.")
    class_to_idx = {c: i for i, c in enumerate(classes)}
    instances, available = [], set()
    for target_class in sorted(class_to_idx):
        target_dir = os.path.join(directory, target_class)
        for fname in sorted(os.listdir(target_dir)):
            path = os.path.join(target_dir, fname)
            if os.path.isdir(path) or not fname.lower().endswith(EXTENSIONS):
                continue
            instances.append((path, class_to_idx[target_class]))
            available.add(target_class)
    empty = set(class_to_idx) - available
    if empty and not allow_empty:
        raise FileNotFoundError(
            f"Found no valid file for the classes {', '.join(sorted(empty))}. ")
    return instances


def save_png(path, seed, size=(40, 32)):
    rng = np.random.default_rng(seed)
    pixels = rng.integers(0, 256, (size[1], size[0], 3), dtype=np.uint8)
    # Stored (uncompressed) deflate: the file's size depends on the image's
    # size only, so one image can replace another byte for byte.
    Image.fromarray(pixels).save(path, compress_level=0)


def messy_tree(root):
    """A dataset as found in the wild: empty and hidden folders, a symlinked
    class (linked from outside the root: read with follow_links=1), a class
    with no image, a broken link and a stray file."""
    os.makedirs(root)
    for c, n in (("b", 2), ("a", 3), ("e", 1)):
        os.makedirs(os.path.join(root, c))
        for i in range(n):
            save_png(os.path.join(root, c, f"{c}{i}.png"), hash((c, i)) % 1000)
    os.makedirs(os.path.join(root, "__MACOSX"))
    os.makedirs(os.path.join(root, ".hidden"))
    os.makedirs(os.path.join(root, "d_text_only"))
    with open(os.path.join(root, "d_text_only", "notes.txt"), "w") as f:
        f.write("no images here")
    os.makedirs(root + "-elsewhere/c")
    save_png(root + "-elsewhere/c/c0.png", 7)
    os.symlink(root + "-elsewhere/c", os.path.join(root, "c"))
    os.symlink(os.path.join(root, "missing"), os.path.join(root, "zz_broken"))
    with open(os.path.join(root, "README.txt"), "w") as f:
        f.write("stray file")


def samples(src):
    return [(src.describe(i), src.read(i)[1]) for i in range(len(src))]


def test_labels_match_imagefolder(tmp_path):
    root = str(tmp_path / "ds")
    messy_tree(root)
    expected = imagefolder_samples(root, allow_empty=True)
    assert expected == imagefolder_reference(root, allow_empty=True)
    got = samples(ssdfeed.Source("folder:" + root + "?allow_empty=1&follow_links=1"))
    assert got == expected
    # Empty classes keep their index: .hidden=0, __MACOSX=1, a=2, ...
    assert sorted({label for _, label in got}) == [2, 3, 4, 6]

    with pytest.raises(FileNotFoundError) as ref:
        imagefolder_samples(root, allow_empty=False)
    with pytest.raises(FileNotFoundError) as ours:
        ssdfeed.Source("folder:" + root + "?follow_links=1")
    named = "no valid file for the classes .hidden, __MACOSX, d_text_only"
    assert named in str(ref.value) and named in str(ours.value)
    assert root in str(ours.value)


def test_empty_class_changes_the_fingerprint(tmp_path):
    root = str(tmp_path / "ds")
    for c in ("cat", "dog"):
        os.makedirs(os.path.join(root, c))
        save_png(os.path.join(root, c, "x.png"), len(c))
    before = ssdfeed.Source("folder:" + root)
    os.makedirs(os.path.join(root, "bird"))  # empty: shifts cat and dog up by one
    after = ssdfeed.Source("folder:" + root + "?allow_empty=1")
    assert [after.read(i)[1] for i in range(2)] == [1, 2]
    assert after.identity != before.identity


def run(*args):
    return subprocess.run(["ssdfeed", *args], capture_output=True, text=True)


def rewrite_same_size_and_mtime(path, seed):
    st = os.stat(path)
    tmp = path + ".new.png"
    save_png(tmp, seed)
    with open(tmp, "rb") as f:
        data = f.read()
    os.remove(tmp)
    assert len(data) == st.st_size
    with open(path, "r+b") as f:  # in place, as `cp -p` does
        f.write(data)
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))
    after = os.stat(path)
    assert (after.st_size, after.st_mtime_ns, after.st_ino) == (st.st_size, st.st_mtime_ns,
                                                                st.st_ino)


def test_verify_finds_a_same_size_same_mtime_rewrite(tmp_path):
    root = str(tmp_path / "ds")
    for c in ("a", "b"):
        os.makedirs(os.path.join(root, c))
        for i in range(3):
            save_png(os.path.join(root, c, f"{i}.png"), ord(c) * 10 + i)
    uri, cache = "folder:" + root, str(tmp_path / "cache")
    r = run("warm", "--source", uri, "--cache", cache, "--resize-short", "16", "--json")
    assert r.returncode == 0, r.stderr
    r = run("cache", "verify", "--cache", cache, "--verify-source=content", "--json")
    assert r.returncode == 0, r.stdout + r.stderr
    rep = json.loads(r.stdout)[0]
    assert rep["source"] == "unchanged"
    assert rep["source_content"]["compared"] == 6 and rep["source_content"]["mismatched"] == 0

    victim = os.path.join(root, "b", "1.png")
    rewrite_same_size_and_mtime(victim, 999)

    r = run("cache", "verify", "--cache", cache, "--json")
    assert r.returncode == 1, r.stdout + r.stderr
    assert json.loads(r.stdout)[0]["source"] == "changed (entry is stale)"

    r = run("cache", "verify", "--cache", cache, "--verify-source", "content", "--json")
    assert r.returncode == 1
    content = json.loads(r.stdout)[0]["source_content"]
    assert content["compared"] == 6 and content["mismatched"] == 1, content
    assert content["problems"][0].startswith(victim + ": sample 4: "), content

    r = run("cache", "verify", "--cache", cache, "--verify-source=content")
    assert r.returncode == 1 and victim in r.stdout and "1 differ" in r.stdout, r.stdout
    assert "no longer matches its source" in r.stderr

    r = run("cache", "verify", "--cache", cache, "--verify-source=sometimes")
    assert r.returncode != 0


def test_symlinked_folder_dataset_warms(tmp_path):
    real = tmp_path / "real"
    os.makedirs(real / "a")
    save_png(str(real / "a" / "0.png"), 1)
    split = tmp_path / "split"
    os.makedirs(split / "a")
    os.symlink(real / "a" / "0.png", split / "a" / "0.png")
    os.symlink(real / "a", split / "b")
    # Links out of the root are followed only on request.
    r = run("warm", "--source", f"folder:{split}", "--cache", str(tmp_path / "c"),
            "--resize-short", "16", "--json")
    assert r.returncode != 0 and str(split) in r.stderr and str(real) in r.stderr, r.stderr
    assert "follow_links=1" in r.stderr, r.stderr
    r = run("warm", "--source", f"folder:{split}?follow_links=1", "--cache",
            str(tmp_path / "c"), "--resize-short", "16", "--json")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["samples_present"] == 2
