"""ssdfeed plan's codec comparison and bench loader --codec (issue 30):
what they print and carry, and that the recommendation follows from plan's
own numbers. No rate is asserted: the machine may be slow or shared."""

import json
import os
import signal
import subprocess
import time

import pytest

import ssdfeed

CODECS = ["raw", "zstd", "jpeg", "yuv420"]
ROW_KEYS = {"codec", "quality", "identical", "psnr_db", "record_bytes", "footprint_x_raw", "per_core_images_per_s",
            "cores_images_per_s", "device_read_block", "device_read_qd", "device_read_direct",
            "device_mb_s", "device_images_per_s", "predicted_images_per_s"}


def run(*args):
    return subprocess.run(["ssdfeed", *args], capture_output=True, text=True)


@pytest.fixture(scope="module")
def photos(tmp_path_factory):
    return ssdfeed.make_dataset(str(tmp_path_factory.mktemp("codec") / "ds"), count=24, classes=3,
                                seed=3, min_side=96, max_side=128)


def expected_pick(rows, tie):
    best = max(r["predicted_images_per_s"] for r in rows)
    close = [r for r in rows if r["predicted_images_per_s"] >= best * (1 - tie)]
    return min(close, key=lambda r: r["record_bytes"])["codec"]


def test_plan_json_carries_each_codec_and_a_consistent_recommendation(photos, tmp_path):
    r = run("plan", "--source", photos["uri"], "--resize-short", "96", "--crop", "64",
            "--samples", "8", "--probes", "6", "--cache", str(tmp_path / "cache"),
            "--device-seconds", "0.05", "--scratch-size", "8M", "--workers", "2", "--json")
    assert r.returncode == 0, r.stderr
    plan = json.loads(r.stdout)
    # The size estimate is as before.
    assert plan["samples_probed"] == 8 and plan["entry_bytes"] > 0
    rows = plan["codecs"]
    assert [x["codec"] for x in rows] == CODECS
    for x in rows:
        assert ROW_KEYS <= set(x), x
        assert x["device_read_qd"] == 32 and x["device_read_block"] % 4096 == 0
        assert x["predicted_images_per_s"] == pytest.approx(
            min(x["cores_images_per_s"], x["device_images_per_s"]))
        assert x["cores_images_per_s"] == pytest.approx(x["cores_measured_images_per_s"])
        assert x["per_core_images_per_s"] > 0
    assert rows[0]["footprint_x_raw"] == 1
    assert rows[2]["footprint_x_raw"] < rows[1]["footprint_x_raw"] < 1
    # yuv420: the planes (0.5x raw's pixels), in records of the same headers.
    assert 0.5 <= rows[3]["footprint_x_raw"] < 0.52
    assert rows[0]["identical"] and rows[1]["identical"]
    assert not rows[2]["identical"] and not rows[3]["identical"]
    assert rows[3]["psnr_db"] > 25  # 64-px crops of saturated colours
    assert plan["recommended"] == expected_pick(rows, plan["tie_fraction"])
    assert plan["device_dir"].startswith(str(tmp_path)), "measured where the cache will be"
    assert not [f for f in os.listdir(tmp_path) if "scratch" in f], "scratch file left behind"


def open_files_under(pid, directory):
    """The files (deleted or not) process pid holds open under directory."""
    out = []
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            target = os.readlink(f"/proc/{pid}/fd/{fd}")
        except OSError:  # closed since the listing
            continue
        if target.startswith(str(directory) + "/"):
            out.append(target)
    return out


def test_a_plan_killed_while_measuring_the_device_leaves_no_scratch_file(photos, tmp_path):
    cache = tmp_path / "cache"
    cache.mkdir()
    p = subprocess.Popen(["ssdfeed", "plan", "--source", photos["uri"], "--samples", "4",
                          "--probes", "2", "--codecs", "raw", "--cache", str(cache),
                          "--device-seconds", "600", "--scratch-size", "8M", "--workers", "1"],
                         stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        # Killed once it holds the scratch file open: writing or reading it.
        deadline = time.monotonic() + 300
        while not open_files_under(p.pid, cache):
            assert p.poll() is None, p.stderr.read()
            assert time.monotonic() < deadline, "plan never opened its scratch file"
            time.sleep(0.01)
    finally:
        p.send_signal(signal.SIGKILL)
        p.wait()
        p.stderr.close()
    assert os.listdir(cache) == [], "a killed plan left its scratch file"


def test_plan_text_lists_the_codecs_and_the_recommendation(photos, tmp_path):
    r = run("plan", "--source", photos["uri"], "--samples", "4", "--probes", "4", "--codecs",
            "jpeg,raw", "--quality", "80", "--device-seconds", "0", "--cache", str(tmp_path))
    assert r.returncode == 0, r.stderr
    assert "jpeg q80" in r.stdout and "\nraw " in r.stdout and "zstd" not in r.stdout
    assert "<- recommended" in r.stdout and "recommend   --codec" in r.stdout
    assert "not measured (--device-seconds 0)" in r.stdout


def test_plan_refuses_an_unknown_codec_naming_it(photos):
    r = run("plan", "--source", photos["uri"], "--codecs", "raw,webp")
    assert r.returncode == 2
    assert "--codecs" in r.stderr and "webp" in r.stderr


# Drops the page cache as root: alone, after the parallel pass.
@pytest.mark.serial
def test_bench_loader_compares_every_codec(photos, tmp_path):
    # On tmpfs when there is one: no block device there, so the throttle is
    # skipped with that reason as root, and with "needs root" otherwise.
    base = "/dev/shm" if os.access("/dev/shm", os.W_OK) else str(tmp_path)
    cache = os.path.join(base, f"ssdfeed-codec-bench-{os.getpid()}")
    try:
        r = run("bench", "loader", "--source", photos["uri"], "--resize-short", "96", "--crop",
                "64", "--batch", "8", "--workers", "2", "--cache", cache, "--codec",
                "raw,zstd,jpeg,yuv420", "--rounds", "1", "--throttle-read-bps", "500M",
                "--plan-seconds", "0.05", "--json")
        assert r.returncode == 0, r.stderr
        res = json.loads(r.stdout)
    finally:
        subprocess.run(["rm", "-rf", cache])
    rows = res["codecs"]
    assert [x["codec"] for x in rows] == CODECS
    for x in rows:
        assert x["samples"] == 24 and x["entry_bytes"] > 0 and x["cold_images_per_s"] > 0
        assert len(x["page_cache_images_per_s"]) == 1 and x["page_cache_median"] > 0
        assert x["plan"]["predicted_images_per_s"] > 0
    assert rows[0]["footprint_x_raw"] == 1
    # Each codec's medians as ratios to raw's, measured in this run.
    for x in rows:
        r = x["x_raw"]
        assert r["footprint"] == pytest.approx(x["footprint_x_raw"])
        assert r["page_cache"] == pytest.approx(x["page_cache_median"] / rows[0]["page_cache_median"])
        assert r["page_cache_per_cpu_second"] == pytest.approx(
            x["page_cache_per_cpu_second_median"] / rows[0]["page_cache_per_cpu_second_median"])
        assert r["throttled"] == (pytest.approx(x["throttled_median"] / rows[0]["throttled_median"])
                                  if rows[0]["throttled_median"] > 0 else 0)
    assert rows[0]["x_raw"]["page_cache"] == 1
    assert res["recommended"] in CODECS
    if base == "/dev/shm" or os.geteuid() != 0:
        assert res["throttle_skipped"], "no block device / not root: skipped, with the reason"
        assert all(x["throttled_images_per_s"] == [] for x in rows)
    reason = res["throttle_skipped"]
    if os.geteuid() != 0:
        assert "root" in reason
    elif base == "/dev/shm":
        assert "not a block device" in reason


@pytest.mark.serial
def test_bench_loader_codec_text_has_a_row_per_codec(photos, tmp_path):
    r = run("bench", "loader", "--source", photos["uri"], "--resize-short", "96", "--crop", "64",
            "--batch", "8", "--cache", str(tmp_path / "c"), "--codec", "raw,jpeg", "--rounds",
            "1", "--plan-seconds", "0.05")
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert any(l.startswith("raw ") for l in lines) and any(l.startswith("jpeg q90") for l in lines)
    assert "throttled: skipped: not asked for" in r.stdout
    assert "medians of 1 round(s)" in r.stdout
    ratios = [l for l in lines if l.startswith("x raw ")]
    assert [l.split()[2] for l in ratios] == ["raw", "jpeg"], r.stdout
    assert "footprint 1.00x, page cache 1.00x" in ratios[0], ratios[0]


@pytest.mark.serial
def test_bench_loader_codecs_makes_its_root_as_the_cache_does(photos, tmp_path):
    """The codec bench makes the cache root before its first fill (plan's
    scratch file goes there): private, 0700, as the cache makes roots, not
    the umask's 0755 that lets every user read the records."""
    root = tmp_path / "new" / "root"
    r = run("bench", "loader", "--source", photos["uri"], "--resize-short", "96", "--crop", "64",
            "--batch", "8", "--workers", "1", "--cache", str(root), "--codec", "raw,zstd",
            "--rounds", "1", "--plan-seconds", "0.05")
    assert r.returncode == 0, r.stderr
    assert oct(os.stat(root).st_mode & 0o7777) == oct(0o700)
    assert oct(os.stat(root.parent).st_mode & 0o077) == oct(0), "a parent it made is private too"
