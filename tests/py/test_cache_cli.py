"""ssdfeed warm / cache ls / verify --repair / gc / rm as a user runs them."""

import glob
import json
import os
import subprocess


def run(*args):
    return subprocess.run(["ssdfeed", *args], capture_output=True, text=True)


def warm(uri, cache, *extra, short="48"):
    r = run("warm", "--source", uri, "--cache", cache, "--resize-short", short, "--json", *extra)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def test_warm_ls_verify_repair_gc_rm(small_datasets, tmp_path):
    uri = small_datasets["tfrecord"]["uri"]
    cache = str(tmp_path / "cache")
    first = warm(uri, cache)
    assert first["samples_present"] == first["samples_total"] == 48 and first["prepared"] == 48
    again = warm(uri, cache)  # resumes: nothing left to prepare
    assert again["prepared"] == 0 and again["entry"] == first["entry"]

    ls = json.loads(run("cache", "ls", "--json", "--cache", cache).stdout)
    assert len(ls) == 1
    e = ls[0]
    assert set(e) >= {"entry", "source", "spec", "samples_total", "samples_present", "bytes",
                      "last_used", "state"}
    assert e["state"] == "complete" and e["source"] == uri and e["bytes"] > 48 * 48 * 48 * 3
    assert not e["in_use"]

    # Flip bytes inside a record: verify finds it, --repair re-prepares it.
    dat = sorted(glob.glob(os.path.join(cache, "entries", e["entry"], "seg-*.dat")))[0]
    with open(dat, "r+b") as f:
        f.seek(1000)
        b = f.read(4)
        f.seek(1000)
        f.write(bytes(x ^ 0x5A for x in b))
    r = run("cache", "verify", "--cache", cache, "--json")
    assert r.returncode == 1
    rep = json.loads(r.stdout)[0]
    assert rep["corrupt"] == 1 and rep["good"] == 47 and rep["source"] == "unchanged"
    r = run("cache", "verify", e["entry"][:10], "--repair", "--cache", cache, "--json")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)[0]["repaired"] == 1, (r.stdout, r.stderr)
    r = run("cache", "verify", "--cache", cache)
    assert r.returncode == 0 and "48 good, 0 corrupt" in r.stdout

    # A second entry (other spec), then gc by size evicts the older one only.
    second = warm(uri, cache, short="40")
    os.utime(os.path.join(cache, "entries", e["entry"], "last_used"), (1, 1))
    sizes = {x["entry"]: x["bytes"] for x in json.loads(run("cache", "ls", "--json", "--cache",
                                                             cache).stdout)}
    r = run("cache", "gc", "--max-bytes", str(sizes[second["entry"]]), "--cache", cache)
    assert r.returncode == 0 and "removed " + e["entry"] in r.stdout
    left = json.loads(run("cache", "ls", "--json", "--cache", cache).stdout)
    assert [x["entry"] for x in left] == [second["entry"]]
    r = run("cache", "rm", left[0]["entry"], "--cache", cache)
    assert r.returncode == 0
    assert json.loads(run("cache", "ls", "--json", "--cache", cache).stdout) == []
    r = run("cache", "rm", "0123456789abcdef", "--cache", cache)
    assert r.returncode == 1 and r.stderr.startswith("ssdfeed: no cache entry")


def test_warm_reports_bad_samples_clearly(tmp_path):
    import ssdfeed
    rep = ssdfeed.make_dataset(str(tmp_path / "d"), format="tar", count=30, classes=2,
                               corrupt=0.2, min_side=40, max_side=60, shard_size=10)
    r = run("warm", "--source", rep["uri"], "--cache", str(tmp_path / "c"), "--resize-short", "32",
            "--quiet")
    assert r.returncode == 1
    assert r.stderr.strip().splitlines()[-1].startswith("ssdfeed: ")
    assert ".tar sample sample_" in r.stderr
    ok = warm(rep["uri"], str(tmp_path / "c"), "--on-error", "skip", short="32")
    assert ok["errors"] == rep["corrupt"]
    assert ok["samples_present"] == 30 - rep["corrupt"]


def test_cache_defaults_to_env_var(small_datasets, tmp_path):
    env = dict(os.environ, SSDFEED_CACHE=str(tmp_path / "envcache"))
    r = subprocess.run(["ssdfeed", "warm", "--source", small_datasets["folder"]["uri"],
                        "--resize-short", "32", "--quiet"], capture_output=True, text=True, env=env)
    assert r.returncode == 0, r.stderr
    assert os.path.isdir(tmp_path / "envcache" / "entries")
