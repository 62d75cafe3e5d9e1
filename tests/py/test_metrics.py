"""Metrics end to end: two loader processes on one cache root, `ssdfeed
serve-metrics`, and a real Prometheus (Debian package `prometheus`) scraping
it every second; every query of deploy/grafana/ssdfeed.json must return data.
Also: Loader(metrics_port=N), the summed hits of two jobs, and bad input."""
import json
import pathlib
import re
import shutil
import socket
import subprocess
import sys
import time
import urllib.parse
import urllib.request

import pytest

import ssdfeed

REPO = pathlib.Path(__file__).resolve().parents[2]
DASHBOARD = REPO / "deploy" / "grafana" / "ssdfeed.json"
PROMETHEUS = shutil.which("prometheus")

# A loader process: iterates epochs until the stop file appears, then prints
# its stats() as JSON. Epochs sleep a little per batch, as training would.
LOADER = r"""
import json, os, sys, time, ssdfeed
uri, cache, stop = sys.argv[1:4]
loader = ssdfeed.Loader(uri, cache=cache, prepare=ssdfeed.Prepare(resize=(32, 32)),
                        augment=ssdfeed.RandomResizedCrop(24), batch_size=8, shuffle=True,
                        workers=1)
epoch = 0
while not os.path.exists(stop):
    loader.set_epoch(epoch)
    for images, labels in loader:
        time.sleep(0.002)
    epoch += 1
print(json.dumps(loader.stats()))
"""


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def http_json(url, timeout=5):
    with urllib.request.urlopen(url, timeout=timeout) as r:
        return json.loads(r.read())


def query(prom, expr):
    url = f"http://127.0.0.1:{prom}/api/v1/query?" + urllib.parse.urlencode({"query": expr})
    try:
        return http_json(url)
    except urllib.error.HTTPError as e:  # bad queries answer 400 with a JSON error
        return json.loads(e.read())


def dashboard_queries():
    d = json.loads(DASHBOARD.read_text())
    for p in d["panels"]:
        for t in p["targets"]:
            yield p["title"], t["expr"]


def concrete(expr):
    # What Grafana substitutes: every node and entry; a window of 5 scrapes.
    return (expr.replace("$__rate_interval", "5s").replace("$instance", ".*")
            .replace("$entry", ".*"))


def parse_metrics(text):
    out = {}
    for line in text.splitlines():
        if line.startswith("#") or not line.strip():
            continue
        name, value = line.rsplit(" ", 1)
        out[name] = float(value)
    return out


def total(metrics, name):
    return sum(v for k, v in metrics.items() if re.match(re.escape(name) + r"(\{|$)", k))


@pytest.fixture(scope="module")
def dataset(tmp_path_factory):
    root = tmp_path_factory.mktemp("metrics_data")
    return ssdfeed.make_dataset(str(root / "d"), format="tfrecord", count=96, classes=4,
                                seed=5, shard_size=48, min_side=40, max_side=64)


def warm(uri, cache):
    subprocess.run(["ssdfeed", "warm", "--source", uri, "--resize", "32x32", "--cache",
                    str(cache), "--quiet"], check=True, capture_output=True)


def test_dashboard_is_importable_with_datasource_and_entry_variables():
    d = json.loads(DASHBOARD.read_text())
    names = {v["name"]: v for v in d["templating"]["list"]}
    assert names["datasource"]["type"] == "datasource"
    assert names["entry"]["type"] == "query" and "entry" in names["entry"]["definition"]
    for p in d["panels"]:
        assert p["datasource"]["uid"] == "${datasource}", p["title"]
        for t in p["targets"]:
            assert "ssdfeed_" in t["expr"], p["title"]


@pytest.mark.serial
@pytest.mark.skipif(PROMETHEUS is None, reason="prometheus not installed (Debian package)")
def test_prometheus_scrapes_two_jobs_and_every_panel_has_data(dataset, tmp_path):
    uri = dataset["uri"] if isinstance(dataset, dict) else dataset.uri
    cache = tmp_path / "cache"
    warm(uri, cache)  # so the jobs below only hit: their summed hits = samples served
    stop = tmp_path / "stop"
    procs = []
    try:
        jobs = [subprocess.Popen([sys.executable, "-c", LOADER, uri, str(cache), str(stop)],
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
                for _ in range(2)]
        procs += jobs
        exporter = subprocess.Popen(["ssdfeed", "serve-metrics", "--cache", str(cache),
                                     "--listen", "127.0.0.1:0"],
                                    stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        procs.append(exporter)
        line = exporter.stdout.readline()
        port = int(re.search(r":(\d+)/metrics", line).group(1))
        prom_port = free_port()
        (tmp_path / "prometheus.yml").write_text(
            "global: {scrape_interval: 1s, evaluation_interval: 1s}\n"
            "scrape_configs:\n"
            f"  - job_name: ssdfeed\n    static_configs: [{{targets: ['127.0.0.1:{port}']}}]\n")
        prom = subprocess.Popen(
            [PROMETHEUS, f"--config.file={tmp_path / 'prometheus.yml'}",
             f"--storage.tsdb.path={tmp_path / 'tsdb'}",
             f"--web.listen-address=127.0.0.1:{prom_port}"],
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        procs.append(prom)
        # Enough scrapes for 5 s windows, while both jobs are live.
        deadline = time.time() + 40
        while time.time() < deadline:
            time.sleep(1)
            try:
                r = query(prom_port, "sum(ssdfeed_processes)")
                up = query(prom_port, "count_over_time(up[10s])")
            except OSError:
                continue
            if (r["data"]["result"] and float(r["data"]["result"][0]["value"][1]) == 2
                    and up["data"]["result"] and float(up["data"]["result"][0]["value"][1]) >= 8):
                break
        else:
            pytest.fail("Prometheus never saw two live jobs: " + prom.stderr.read()[-2000:]
                        if prom.poll() is not None else "Prometheus never saw two live jobs")
        has_device = bool(query(prom_port, "ssdfeed_device_reads_total")["data"]["result"])
        empty, errors = [], []
        for title, expr in dashboard_queries():
            r = query(prom_port, concrete(expr))
            if r.get("status") != "success":
                errors.append(f"{title}: {expr}: {r.get('error')}")
            elif not r["data"]["result"]:
                if "ssdfeed_device_" in expr and not has_device:
                    continue  # the root is on no block device here (tmpfs, overlay)
                empty.append(f"{title}: {expr}")
        for v in json.loads(DASHBOARD.read_text())["templating"]["list"]:
            if v["type"] == "query":
                m = re.match(r"label_values\((\w+), *(\w+)\)", v["definition"])
                r = query(prom_port, f"count by ({m.group(2)}) ({m.group(1)})")
                if not r["data"]["result"]:
                    empty.append(f"variable {v['name']}: {v['definition']}")
        assert not errors, "queries that fail:\n" + "\n".join(errors)
        assert not empty, "panels without data:\n" + "\n".join(empty)

        stop.write_text("")
        stats = [json.loads(j.communicate(timeout=60)[0]) for j in jobs]
        served = sum(s["samples"] for s in stats)
        assert served > 0 and sum(s["cache_hits"] for s in stats) == served
        # Both jobs ended: their totals were folded and still count, exactly once.
        once = subprocess.run(["ssdfeed", "serve-metrics", "--cache", str(cache), "--once"],
                              capture_output=True, text=True, check=True).stdout
        m = parse_metrics(once)
        assert total(m, "ssdfeed_samples_served_total") == served
        assert total(m, "ssdfeed_cache_hits_total") == served
        assert total(m, "ssdfeed_processes") == 0
    finally:
        stop.write_text("")
        for p in reversed(procs):
            if p.poll() is None:
                p.terminate()
                try:
                    p.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    p.kill()


@pytest.mark.serial
def test_loader_metrics_port_serves_its_own_counters(dataset, tmp_path):
    uri = dataset["uri"] if isinstance(dataset, dict) else dataset.uri
    port = free_port()
    loader = ssdfeed.Loader(uri, cache=str(tmp_path / "c"), prepare=ssdfeed.Prepare(resize=(32, 32)),
                            batch_size=16, metrics_port=port)
    n = sum(len(y) for _, y in loader)
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as r:
        m = parse_metrics(r.read().decode())
    assert total(m, "ssdfeed_samples_served_total") == n == loader.stats()["samples"]
    assert total(m, "ssdfeed_cache_misses_total") == loader.stats()["cache_misses"] == n
    with pytest.raises(Exception, match=f"cannot listen on 127.0.0.1:{port}"):
        ssdfeed.Loader(uri, cache=str(tmp_path / "c"), prepare=ssdfeed.Prepare(resize=(32, 32)),
                       metrics_port=port)
    loader.close()


def test_serve_metrics_port_in_use_is_one_clear_line(tmp_path):
    (tmp_path / "c").mkdir()
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        r = subprocess.run(["ssdfeed", "serve-metrics", "--cache", str(tmp_path / "c"),
                            "--listen", f"127.0.0.1:{port}"], capture_output=True, text=True,
                           timeout=30)
    assert r.returncode != 0
    lines = [ln for ln in r.stderr.splitlines() if ln.startswith("ssdfeed:")]
    assert len(lines) == 1 and f"cannot listen on 127.0.0.1:{port}" in lines[0], r.stderr


def test_serve_metrics_without_a_root_fails_clearly(tmp_path):
    r = subprocess.run(["ssdfeed", "serve-metrics", "--cache", str(tmp_path / "none"), "--once"],
                       capture_output=True, text=True)
    assert r.returncode != 0 and "no cache root there" in r.stderr


def test_bench_loader_reports_loader_stats_names(dataset, tmp_path):
    uri = dataset["uri"] if isinstance(dataset, dict) else dataset.uri
    r = subprocess.run(["ssdfeed", "bench", "loader", "--source", uri, "--cache",
                        str(tmp_path / "c"), "--epochs", "2", "--resize-short", "32", "--crop",
                        "24", "--batch", "16", "--json"], capture_output=True, text=True,
                       check=True)
    epochs = json.loads(r.stdout)["epochs"]
    loader = ssdfeed.Loader(uri, cache=str(tmp_path / "c"), prepare=ssdfeed.Prepare(resize_short=32),
                            augment=ssdfeed.RandomResizedCrop(24), batch_size=16)
    for _ in loader:
        pass
    names = {k for k, v in loader.stats().items() if isinstance(v, (int, float))
             and not isinstance(v, bool)}
    assert set(epochs[1]["stats"]) <= names
    assert epochs[1]["stats"]["cache_hits"] == loader.stats()["cache_hits"] == 96
    assert epochs[0]["stats"]["cache_misses"] == 96


@pytest.mark.serial  # metrics_port: a port picked free, then bound
def test_every_counter_of_the_table_is_in_each_listing(dataset, tmp_path):
    """The counter table (ssdfeed/counters.h) is the one list: each row is a
    Loader.stats() key, a LoaderStats attribute with the same number, and a
    family with its help text on /metrics, so no listing drifts from it."""
    uri = dataset["uri"] if isinstance(dataset, dict) else dataset.uri
    port = free_port()
    loader = ssdfeed.Loader(uri, cache=str(tmp_path / "c"), prepare=ssdfeed.Prepare(resize=(32, 32)),
                            batch_size=16, metrics_port=port)
    for _ in loader:
        pass
    # One stats() (it copies the cache's counters into the block), then the
    # scrape: nothing stores after the pass, so both see the same block.
    native = loader._impl.stats()
    stats = native.as_dict()
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as r:
        text = r.read().decode()
    m = parse_metrics(text)
    table = ssdfeed._ssdfeed._counters()
    assert len(table) >= 21 and "cache_lock_timeouts" in {k for k, _, _ in table}
    for key, name, help_text in table:
        assert getattr(native, key) == stats[key], key
        assert f"# HELP {name} {help_text}\n" in text, name
        assert total(m, name) == stats[key], name
    loader.close()


@pytest.mark.parametrize("kwargs, message", [
    (dict(shard="ring"), "shard must be 'global', 'sticky' or 'rotate', not 'ring'"),
    (dict(on_error="ignore"), "on_error must be 'raise' or 'skip', not 'ignore'"),
    (dict(dtype="int8"), "dtype must be 'uint8', 'float32' or 'float16', not 'int8'"),
    (dict(layout="HWC"), "layout must be 'NHWC' or 'NCHW', not 'HWC'"),
    (dict(warm_read=None), "warm_read must be 'auto', 'buffered' or 'direct', not 'None'"),
])
def test_enum_keywords_are_checked_once_by_the_spelling_table(dataset, kwargs, message):
    uri = dataset["uri"] if isinstance(dataset, dict) else dataset.uri
    with pytest.raises(ValueError) as e:
        ssdfeed.Loader(uri, cache=False, **kwargs)
    assert message in str(e.value)
    for enum in ("OnError", "ShardMode", "WarmRead", "FillWrite", "DType", "Layout"):
        cls = getattr(ssdfeed._ssdfeed, enum)
        for member in cls:
            spelled = member.name if enum == "Layout" else member.name.lower()
            assert cls.parse(spelled) is member
