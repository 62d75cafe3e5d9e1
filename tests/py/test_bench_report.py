"""`ssdfeed bench ... --report DIR`: one self-contained HTML page and the JSON
it is drawn from (the same numbers as --json), opened in a real headless
browser; and `bench loader --headspace`, the compute floor."""

import html as htmlmod
import json
import os
import re
import shutil
import subprocess

import pytest

from test_bench import drop_caches_refusal

MIB = 1 << 20
CHART = re.compile(r'<svg class="chart" data-chart="([^"]+)".*?</svg>', re.S)
CELL = re.compile(r'<td data-json="([^"]+)"(?: data-scale="([^"]+)")?>([^<]*)</td>')


def run(*args):
    return subprocess.run(["ssdfeed", *args], capture_output=True, text=True)


def pointer(doc, ptr):
    """The value at an RFC 6901 pointer."""
    for part in ptr.split("/")[1:]:
        part = part.replace("~1", "/").replace("~0", "~")
        doc = doc[int(part)] if isinstance(doc, list) else doc[part]
    return doc


def num(v):
    """The page's number format (svg::Num): 4 significant digits, whole
    numbers from 1000 up."""
    if v == 0:
        return "0"
    if abs(v) >= 1000:
        return f"{v:.0f}"
    return f"{v:.4g}"


def charts(page):
    """{chart id: [each data path's d]} of the page's charts."""
    out = {}
    for m in CHART.finditer(page):
        out[m.group(1)] = re.findall(r'<path class="data"[^>]*? d="([^"]*)"', m.group(0))
    return out


def check_self_contained(page):
    assert len(page.encode()) < MIB
    for needle in ("<script", "src=", "href=", "url(", "@import"):
        assert needle not in page, needle
    # The one URL on the page is SVG's namespace, which loads nothing.
    assert set(re.findall(r"https?://[^\"' ]+", page)) <= {"http://www.w3.org/2000/svg"}


def check_cells_equal_json(page, doc):
    cells = CELL.findall(page)
    assert cells, "no numbers in the page's tables"
    for ptr, scale, text in cells:
        value = pointer(doc, htmlmod.unescape(ptr))
        assert text == num(value * (float(scale) if scale else 1)), (ptr, text, value)
    return {htmlmod.unescape(p) for p, _, _ in cells}


@pytest.fixture
def loader_report(small_datasets, tmp_path):
    """One bench loader run with --json and --report: its stdout, report
    directory and page."""
    out = tmp_path / "report"
    r = run("bench", "loader", "--source", small_datasets["folder"]["uri"], "--cache",
            str(tmp_path / "c"), "--epochs", "2", "--batch", "8", "--resize-short", "64",
            "--crop", "48", "--compute-time", "0.004", "--bounds", "--headspace", "--json",
            "--report", str(out))
    assert r.returncode == 0, r.stderr
    assert f"report: {out / 'report.html'}" in r.stderr
    return json.loads(r.stdout), out, (out / "report.html").read_text()


def test_loader_report_numbers_equal_the_json_of_the_same_run(loader_report):
    printed, out, page = loader_report
    doc = json.loads((out / "report.json").read_text())
    assert doc["kind"] == "loader" and doc["result"] == printed
    h = doc["header"]
    assert h["command_line"].startswith("ssdfeed bench loader --source folder:")
    assert "--report" in h["command_line"] and h["version"] and h["commit"]
    assert h["host"] and h["cores"] >= 1 and h["memory_bytes"] > 0
    shown = check_cells_equal_json(page, doc)
    for e in range(2):
        for key in ("images_per_s", "p50_wait_ms", "p99_wait_ms", "utilization"):
            assert f"/result/epochs/{e}/{key}" in shown
    assert {"/result/headspace/images_per_s", "/result/headspace_gap",
            "/result/bounds/augment_per_core"} <= shown
    check_self_contained(page)
    drawn = charts(page)
    assert {"images-per-s", "wait-0", "wait-1", "accelerator"} <= set(drawn)
    assert all(ds and all(d.strip() for d in ds) for ds in drawn.values()), drawn
    # The bounds and the headspace as lines on the images/s chart.
    assert "decode+prepare bound" in page and "crop+resize bound" in page
    assert "headspace (no reads)" in page


def test_loader_json_has_timelines_and_wait_histograms(loader_report):
    printed, _, _ = loader_report
    for e in printed["epochs"]:
        assert e["timeline"] and len(e["timeline"]) <= 120
        ts = [p["t_s"] for p in e["timeline"]]
        assert ts == sorted(ts) and ts[-1] <= e["seconds"] + 1e-6
        # The intervals' images add up to the epoch's.
        prev, total = 0, 0
        for p in e["timeline"]:
            total += p["images_per_s"] * (p["t_s"] - prev)
            prev = p["t_s"]
        assert total == pytest.approx(e["images"], rel=1e-6)
        h = e["wait_histogram"]
        assert sum(h["counts"]) == e["batches"] == 6
        assert len(h["edges_ms"]) == len(h["counts"]) + 1


def test_headspace_replays_a_batch_at_the_compute_floor(loader_report):
    printed, _, _ = loader_report
    hs, last = printed["headspace"], printed["epochs"][-1]
    assert hs["batches"] == last["batches"] and hs["images"] == last["images"]
    # No read behind a batch: nothing to wait for, and the consumer's
    # emulated compute (0.004 s per batch of 8) is the only limit.
    assert hs["p50_wait_ms"] == hs["p99_wait_ms"] == 0
    assert sum(hs["wait_histogram"]["counts"]) == hs["batches"]
    assert 0 < hs["images_per_s"] <= 8 / 0.004
    assert 0 < hs["utilization"] <= 1
    assert printed["headspace_gap"] == pytest.approx(hs["images_per_s"] / last["images_per_s"])


def test_headspace_text_names_the_gap(small_datasets, tmp_path):
    r = run("bench", "loader", "--source", small_datasets["folder"]["uri"], "--cache",
            str(tmp_path / "c"), "--epochs", "1", "--batch", "16", "--resize-short", "64",
            "--crop", "48", "--headspace")
    assert r.returncode == 0, r.stderr
    assert re.search(r"headspace \(one batch replayed 3 times, no reads; the consumer copies "
                     r"it\): \d+ images/s = [\d.]+x the last epoch's", r.stdout), r.stdout


def test_storage_report(tmp_path):
    out = tmp_path / "r"
    r = run("bench", "storage", str(tmp_path), "--size", "16M", "--duration", "0.05", "--json",
            "--report", str(out))
    assert r.returncode == 0, r.stderr
    doc = json.loads((out / "report.json").read_text())
    assert doc["kind"] == "storage" and doc["result"] == json.loads(r.stdout)
    page = (out / "report.html").read_text()
    check_cells_equal_json(page, doc)
    check_self_contained(page)
    assert set(charts(page)) == {"storage-iops", "storage-mb_s", "storage-p99_us"}


# Drops the page cache as root (the codec bench's dropped epochs): alone,
# after the parallel pass.
@pytest.mark.serial
def test_codec_comparison_report(small_datasets, tmp_path):
    out = tmp_path / "r"
    r = run("bench", "loader", "--source", small_datasets["folder"]["uri"], "--cache",
            str(tmp_path / "c"), "--resize-short", "64", "--crop", "48", "--batch", "16",
            "--codec", "raw,zstd", "--rounds", "1", "--plan-seconds", "0.1", "--json",
            "--report", str(out))
    assert r.returncode == 0, r.stderr
    doc = json.loads((out / "report.json").read_text())
    assert doc["kind"] == "codecs" and doc["result"] == json.loads(r.stdout)
    page = (out / "report.html").read_text()
    shown = check_cells_equal_json(page, doc)
    assert "/result/codecs/1/plan/cores_images_per_s" in shown
    check_self_contained(page)
    drawn = charts(page)
    assert set(drawn) == {"codec-images-per-s", "codec-footprint"}
    assert all(drawn.values())


def test_report_into_a_file_is_a_clear_error(small_datasets, tmp_path):
    (tmp_path / "f").write_text("x")
    r = run("bench", "storage", str(tmp_path), "--size", "8M", "--duration", "0.05",
            "--report", str(tmp_path / "f" / "r"))
    assert r.returncode == 1
    last = r.stderr.splitlines()[-1]
    assert last.startswith(f"ssdfeed: --report {tmp_path / 'f' / 'r'}: cannot create the "
                           "directory: "), r.stderr
    assert "not a directory" in last


@pytest.mark.parametrize("flags, why", [
    (["--codec", "raw,zstd", "--headspace"], "several --codec: not with --headspace"),
    (["--codec", "raw,zstd", "--compare-devices", "500M"], "several --codec: not with"),
    (["--metrics-cost", "1", "--report", "r"], "--metrics-cost: not with --report"),
    (["--compare-devices", "fast"], "--compare-devices: expected a read rate > 0 such as 500M"),
])
def test_flags_a_mode_would_ignore_are_usage_errors(small_datasets, tmp_path, flags, why):
    r = run("bench", "loader", "--source", small_datasets["folder"]["uri"], "--cache",
            str(tmp_path / "c"), *flags)
    assert r.returncode == 2 and why in r.stderr, r.stderr
    assert not (tmp_path / "c").exists() or flags[0] == "--compare-devices"


def chromium():
    """The headless browser, or None where it is absent outside CI; in CI
    (CI or SSDFEED_CI set, as .ci/run does) its absence fails the test."""
    exe = shutil.which("chromium") or shutil.which("chromium-browser")
    if exe is None and (os.environ.get("CI") or os.environ.get("SSDFEED_CI")):
        pytest.fail("chromium is not installed (scripts/deps.sh --dev installs it)")
    return exe


def artefacts_dir():
    """Where CI keeps the screenshot: $SSDFEED_ARTEFACTS, else build/artefacts."""
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    d = os.environ.get("SSDFEED_ARTEFACTS") or os.path.join(root, "build", "artefacts")
    os.makedirs(d, exist_ok=True)
    return d


def browse(exe, page, *what, profile):
    """Runs headless chromium on the page; returns (rc, stdout, stderr)."""
    cmd = [exe, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
           f"--user-data-dir={profile}", "--enable-logging=stderr", "--v=0",
           "--window-size=1400,4200", *what, f"file://{page}"]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    return r.returncode, r.stdout, r.stderr


def test_report_renders_in_a_headless_browser(loader_report, tmp_path):
    exe = chromium()
    if exe is None:
        pytest.skip("chromium not installed (scripts/deps.sh --dev installs it)")
    _, out, page = loader_report
    html_path = out / "report.html"
    rc, dom, log = browse(exe, html_path, "--dump-dom", profile=tmp_path / "p1")
    assert rc == 0, log[-2000:]
    # The browser's DOM: every chart the page has, each with drawn paths.
    drawn = charts(dom)
    assert set(drawn) == set(charts(page)) and len(drawn) >= 4
    for chart, ds in drawn.items():
        assert ds and all(d.strip() for d in ds), chart
    console = [line for line in log.splitlines() if "CONSOLE" in line or "Uncaught" in line]
    assert not console, console
    png = os.path.join(artefacts_dir(), "bench-loader-report.png")
    if os.path.exists(png):
        os.remove(png)
    rc, _, log = browse(exe, html_path, f"--screenshot={png}", profile=tmp_path / "p2")
    assert rc == 0 and os.path.exists(png), log[-2000:]
    with open(png, "rb") as f:
        head = f.read(8)
    assert head == b"\x89PNG\r\n\x1a\n" and os.path.getsize(png) > 10_000


@pytest.mark.root
@pytest.mark.serial
def test_compare_devices_runs_as_is_and_throttled_in_one_page(small_datasets, tmp_path):
    why = drop_caches_refusal()
    if why is not None:
        pytest.skip(f"--compare-devices drops the page cache: {why}")
    if not os.path.isdir("/sys/fs/cgroup/blkio"):
        pytest.skip("no cgroup-v1 blkio controller for the throttle")
    out = tmp_path / "r"
    r = run("bench", "loader", "--source", small_datasets["folder"]["uri"], "--cache",
            str(tmp_path / "c"), "--epochs", "2", "--batch", "8", "--resize-short", "64",
            "--crop", "48", "--compare-devices", "20M", "--json", "--report", str(out))
    if r.returncode != 0 and "block device" in r.stderr:
        pytest.skip(r.stderr.strip())
    assert r.returncode == 0, r.stderr
    printed = json.loads(r.stdout)
    doc = json.loads((out / "report.json").read_text())
    assert doc["kind"] == "compare-devices" and doc["result"] == printed
    assert printed["throttle_read_bps"] == 20 * MIB
    a, b = printed["runs"]
    assert a["name"] == "the device as it is" and b["name"].startswith("reads throttled to 20M")
    for run_ in (a, b):
        eps = run_["result"]["epochs"]
        assert eps[0]["hit_rate"] == 0 and eps[1]["hit_rate"] == 1 and eps[1]["dropped_caches"]
    page = (out / "report.html").read_text()
    check_cells_equal_json(page, doc)
    check_self_contained(page)
    drawn = charts(page)
    assert {"run0-images-per-s", "run1-images-per-s"} <= set(drawn)


def test_demo_writes_its_report_and_says_where(tmp_path):
    import sys
    r = subprocess.run([sys.executable, "-m", "ssdfeed.demo", "--dir", str(tmp_path), "--count",
                        "40", "--batch-size", "16", "--epochs", "1"],
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr
    page = tmp_path / "report" / "report.html"
    assert f"report: {page}" in r.stdout, r.stdout
    assert "headspace" in r.stdout and page.stat().st_size < MIB
