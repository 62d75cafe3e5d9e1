"""The bench verbs run, print numbers, clean up, and fail clearly."""

import json
import os
import shutil
import subprocess

import pytest


def run(*args):
    return subprocess.run(["ssdfeed", *args], capture_output=True, text=True)


def drop_caches_refusal():
    """Why this process cannot drop the page cache, or None. Root is not
    enough: a container mounts /proc/sys read-only, or withholds
    CAP_SYS_ADMIN; opening the file for writing (which drops nothing) says."""
    try:
        with open("/proc/sys/vm/drop_caches", "w"):
            pass
    except OSError as e:
        return f"cannot write /proc/sys/vm/drop_caches: {e.strerror}"
    return None


def as_nobody(exe):
    """A prefix that runs exe as uid/gid 65534, or None where this process
    cannot switch users (not root, no setpriv, a user namespace without that
    uid) or that user cannot run exe (a checkout under /root). Probed through
    a shell: setpriv's own exec still has root's capabilities."""
    cmd = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"]
    try:
        probe = [*cmd, "/bin/sh", "-c", f"{exe} --version"]
        ok = subprocess.run(probe, capture_output=True).returncode == 0
    except OSError:
        return None
    return cmd if ok else None


def test_bench_storage_json_and_cleanup(tmp_path):
    r = run("bench", "storage", str(tmp_path), "--size", "16M", "--duration", "0.05", "--json")
    assert r.returncode == 0, r.stderr
    res = json.loads(r.stdout)
    assert res[0]["path"] == str(tmp_path) and res[0]["engine"] in ("io_uring", "threads")
    rows = res[0]["rows"]
    assert {(x["pattern"], x["block"], x["qd"]) for x in rows} >= {
        ("randread", 4096, 1), ("randread", 131072, 32), ("randread", 114688, 8),
        ("seqread", 1 << 20, 1)}
    assert all(x["iops"] > 0 and x["p99_us"] >= x["p50_us"] > 0 for x in rows)
    assert os.listdir(tmp_path) == [], "test file left behind"


def test_bench_storage_thread_engine(tmp_path):
    r = run("bench", "storage", str(tmp_path), "--size", "8M", "--duration", "0.05", "--threads",
            "--json")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)[0]["engine"] == "threads"


def test_bench_storage_bad_path():
    r = run("bench", "storage", "/nonexistent/dir")
    assert r.returncode != 0 and "not a directory" in r.stderr


def test_bench_loader_with_model_preset(small_datasets, tmp_path):
    uri = small_datasets["folder"]["uri"]
    r = run("bench", "loader", "--source", uri, "--cache", str(tmp_path / "c"), "--epochs", "2",
            "--model", "resnet50", "--gpu", "h100", "--batch", "16", "--compute-time", "0.005",
            "--resize-short", "64", "--crop", "48", "--json")
    assert r.returncode == 0, r.stderr
    res = json.loads(r.stdout)
    e0, e1 = res["epochs"]
    assert e0["hit_rate"] == 0 and e1["hit_rate"] == 1
    assert 0 < e1["utilization"] <= 1 and e1["images_per_s"] > 0
    assert res["compute_seconds"] == 0.005 and res["capacity_images_per_s"] > 0
    assert res["accelerators_at_90"] >= 0
    assert "resnet50_h100.yaml" in res["preset_source"]


def test_bench_loader_unknown_preset_is_a_clear_error(small_datasets):
    r = run("bench", "loader", "--source", small_datasets["folder"]["uri"], "--model", "resnet50",
            "--gpu", "h200")
    assert r.returncode == 2
    assert "no MLPerf Storage preset for resnet50 on h200" in r.stderr
    assert r.stderr.count("\n") == 1


@pytest.mark.root
@pytest.mark.serial
def test_bench_loader_warm_from_device(small_datasets, tmp_path):
    # The direct reads, device stats and bounds are what the ratios
    # are read from.
    why = drop_caches_refusal()
    if why is not None:
        pytest.skip(f"--drop-caches cannot work here: {why}")
    uri = small_datasets["folder"]["uri"]
    r = run("bench", "loader", "--source", uri, "--cache", str(tmp_path / "c"), "--epochs", "2",
            "--batch", "16", "--resize-short", "64", "--crop", "48", "--drop-caches",
            "--warm-read", "direct", "--bounds", "--json")
    assert r.returncode == 0, r.stderr
    res = json.loads(r.stdout)
    eps = res["epochs"]
    # cold, warm with the page cache dropped, then one more warm as left
    assert [e["dropped_caches"] for e in eps] == [False, True, False]
    assert eps[0]["hit_rate"] == 0 and eps[1]["hit_rate"] == 1 and eps[2]["hit_rate"] == 1
    assert all(e["cpu_seconds"] > 0 and e["record_bytes"] >= 0 for e in eps)
    assert eps[1]["record_bytes"] > 40
    b = res["bounds"]
    assert b["decode_prepare_per_core"] > 0 and b["augment_per_core"] > 0 and b["cores"] >= 1
    assert b["augment_opencv_per_core"] > 0
    dev = eps[1].get("device")
    if dev is not None:  # on a block device listed in /proc/diskstats
        assert dev["read_mb_s"] >= 0 and 0 <= dev["util_pct"] <= 100


@pytest.mark.root
def test_bench_loader_drop_caches_refused_says_what_is_missing(small_datasets, tmp_path):
    """Where the page cache cannot be dropped, bench says why (the errno and
    what it means) before it fills anything."""
    prefix = []
    exe = shutil.which("ssdfeed")
    if drop_caches_refusal() is None:  # allowed here: refuse it as another user
        prefix = as_nobody(exe)
        if prefix is None:
            pytest.skip("drop_caches is writable here and no other user who can run ssdfeed")
    r = subprocess.run([*prefix, exe, "bench", "loader", "--source",
                        small_datasets["folder"]["uri"], "--cache", str(tmp_path / "c"),
                        "--epochs", "2", "--resize-short", "64", "--drop-caches"],
                       capture_output=True, text=True)
    assert r.returncode != 0
    err = r.stderr
    assert "/proc/sys/vm/drop_caches: " in err, err
    assert any(w in err for w in ("Permission denied", "Read-only file system",
                                  "Operation not permitted", "No such file")), err
    assert err.count("\n") == 1, err
    assert not (tmp_path / "c").exists(), "the cold epoch ran before the check"
