"""The CLI's honest exits and messages: cache full, skipped samples, Ctrl-C,
gc that cannot remove an entry in use, gc --dry-run, ambiguous rm."""

import json
import os
import shutil
import signal
import subprocess

import pytest

import ssdfeed


def run(*args, **kw):
    return subprocess.run(["ssdfeed", *args], capture_output=True, text=True, **kw)


@pytest.fixture
def small_tmpfs(tmp_path):
    """A 2 MiB filesystem that really fills (root only)."""
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root")
    r = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=2m", "tmpfs", str(mnt)],
                       capture_output=True, text=True)
    if r.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {r.stderr.strip()}")
    yield str(mnt)
    subprocess.run(["umount", "-l", str(mnt)], check=False)


@pytest.mark.root
def test_warm_on_a_full_disk_stops_early_and_exits_3(small_tmpfs, tmp_path):
    rep = ssdfeed.make_dataset(str(tmp_path / "d"), format="folder", count=300, classes=3,
                               min_side=64, max_side=96)
    cache = os.path.join(small_tmpfs, "c")
    # --capacity above the filesystem's size: the disk itself fills (ENOSPC).
    r = run("warm", "--source", rep["uri"], "--cache", cache, "--capacity", "1G", "--workers",
            "2", "--json")
    assert r.returncode == 3, (r.stdout, r.stderr)
    out = json.loads(r.stdout)
    assert out["cache_full"] and 0 < out["samples_present"] < 300
    assert out["prepared"] < 300, "kept preparing samples nothing could store"
    assert f"cache full: stored {out['samples_present']} of 300 samples" in r.stderr
    assert "--allow-partial" in r.stderr
    r = run("warm", "--source", rep["uri"], "--cache", cache, "--capacity", "1G",
            "--allow-partial", "--quiet")
    assert r.returncode == 0, r.stderr
    assert "cache full: stored" in r.stderr


def test_skip_names_every_bad_sample_and_the_entry_is_complete(tmp_path):
    rep = ssdfeed.make_dataset(str(tmp_path / "d"), format="tar", count=30, classes=2,
                               corrupt=0.2, min_side=40, max_side=60, shard_size=10)
    n_bad = rep["corrupt"]
    cache = str(tmp_path / "c")
    r = run("warm", "--source", rep["uri"], "--cache", cache, "--resize-short", "32",
            "--on-error", "skip", "--quiet")
    assert r.returncode == 0, r.stderr
    named = [l for l in r.stderr.splitlines() if ".tar sample sample_" in l]
    assert len(named) == n_bad, r.stderr
    assert f"skipped {n_bad} bad samples" in r.stderr
    ls = json.loads(run("cache", "ls", "--json", "--cache", cache).stdout)
    assert ls[0]["state"] == f"complete ({n_bad} skipped)" and ls[0]["skipped"] == n_bad
    assert f"complete ({n_bad} skipped)" in run("cache", "ls", "--cache", cache).stdout
    listing = tmp_path / "skipped.txt"
    r = run("warm", "--source", rep["uri"], "--cache", cache, "--resize-short", "32",
            "--on-error", "skip", "--quiet", "--skipped-file", str(listing))
    assert r.returncode == 0, r.stderr
    assert len(listing.read_text().splitlines()) == n_bad
    assert ".tar sample sample_" not in r.stderr and str(listing) in r.stderr


def test_ctrl_c_stops_syncs_and_says_rerun_resumes(tmp_path):
    rep = ssdfeed.make_dataset(str(tmp_path / "d"), format="folder", count=1000, classes=3,
                               min_side=200, max_side=320)
    cache = str(tmp_path / "c")
    p = subprocess.Popen(["ssdfeed", "warm", "--source", rep["uri"], "--cache", cache,
                          "--workers", "1"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         text=True)
    # The plan line comes before any sample is prepared.
    assert "preparing" in p.stderr.readline()
    p.send_signal(signal.SIGINT)
    out, err = p.communicate(timeout=120)
    assert p.returncode == 130, (out, err)
    assert "interrupted:" in err and "rerun the same command to resume" in err
    stored = int(err.split("interrupted: ")[1].split("/")[0])
    assert stored < 1000
    r = run("warm", "--source", rep["uri"], "--cache", cache, "--json", "--quiet")
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert out["samples_present"] == 1000 and out["prepared"] <= 1000 - stored


def warm(uri, cache, short):
    r = run("warm", "--source", uri, "--cache", cache, "--resize-short", short, "--json",
            "--quiet")
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)["entry"]


def test_gc_dry_run_in_use_and_ambiguous_rm(small_datasets, tmp_path):
    uri, cache = small_datasets["folder"]["uri"], str(tmp_path / "c")
    old, new = warm(uri, cache, "32"), warm(uri, cache, "40")
    os.utime(os.path.join(cache, "entries", old, "last_used"), (1, 1))
    r = run("cache", "gc", "--older-than", "1d", "--dry-run", "--cache", cache)
    assert r.returncode == 0 and f"would remove {old}" in r.stdout
    assert "1 entry would be removed" in r.stdout
    assert len(json.loads(run("cache", "ls", "--json", "--cache", cache).stdout)) == 2
    # An entry a job has open is never removed, and gc says so.
    loader = ssdfeed.Loader(uri, cache=cache, prepare=ssdfeed.Prepare(resize_short=32))
    os.utime(os.path.join(cache, "entries", old, "last_used"), (1, 1))  # opening touched it
    r = run("cache", "gc", "--older-than", "1d", "--cache", cache)
    assert r.returncode == 0
    assert "0 entries removed" in r.stdout
    assert "kept 1 entry gc would remove, in use" in r.stdout and old[:12] in r.stdout
    loader.close()
    del loader
    # Closing is use too (last_used follows use, so a long job's entry never
    # looks old): age it again to see gc remove it once nobody holds it.
    os.utime(os.path.join(cache, "entries", old, "last_used"), (1, 1))
    r = run("cache", "gc", "--older-than", "1d", "--cache", cache)
    assert f"removed {old}" in r.stdout and "1 entry removed" in r.stdout
    # Two entries sharing a prefix: rm PREFIX is an error listing both.
    twin = new[:10] + ("0" if new[10] != "0" else "1") + new[11:]
    shutil.copytree(os.path.join(cache, "entries", new), os.path.join(cache, "entries", twin))
    r = run("cache", "rm", new[:10], "--cache", cache)
    assert r.returncode == 2 and "ambiguous" in r.stderr
    assert new in r.stderr and twin in r.stderr
    r = run("cache", "rm", new[:12], "--cache", cache)
    assert r.returncode == 0 and f"removed {new}" in r.stdout
