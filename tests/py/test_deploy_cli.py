"""ssdfeed node-labels / entry-id / plan (doctor: test_doctor.py), and the node labeller's
patches against an HTTP server that speaks the Kubernetes node API."""

import http.server
import json
import os
import re
import sys
import subprocess
import threading

import pytest

import ssdfeed
from ssdfeed import node_labeller

# Kubernetes: an optional DNS-subdomain prefix, then a name of <= 63
# alphanumerics, '-', '_', '.', starting and ending alphanumeric.
LABEL_KEY = re.compile(r"^[a-z0-9.-]{1,253}/[A-Za-z0-9]([A-Za-z0-9_.-]{0,61}[A-Za-z0-9])?$")


def run(*args):
    return subprocess.run(["ssdfeed", *args], capture_output=True, text=True)


def warm(uri, cache, *extra):
    r = run("warm", "--source", uri, "--cache", cache, "--json", "--quiet", *extra)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def test_node_labels_name_each_entry_and_entry_id_predicts_the_key(small_datasets, tmp_path):
    cache = str(tmp_path / "cache")
    uri = small_datasets["folder"]["uri"]
    r = run("entry-id", "--source", uri, "--resize-short", "40")
    assert r.returncode == 0, r.stderr
    key = r.stdout.strip()
    assert LABEL_KEY.match(key) and key.startswith("ssdfeed.io/e-"), key

    w = warm(uri, cache, "--resize-short", "40")
    assert key == "ssdfeed.io/e-" + w["entry"]
    other = warm(small_datasets["tar"]["uri"], cache, "--resize-short", "40")
    labels = json.loads(run("node-labels", "--cache", cache, "--json").stdout)
    assert labels == {key: "complete", "ssdfeed.io/e-" + other["entry"]: "complete"}

    # Another spec is another entry, hence another key.
    r2 = run("entry-id", "--source", uri, "--resize-short", "41", "--json")
    assert json.loads(r2.stdout)["label"] != key

    text = run("node-labels", "--cache", cache).stdout.splitlines()
    assert sorted(text) == sorted("%s=%s" % kv for kv in labels.items())
    nfd = tmp_path / "features.d" / "ssdfeed"
    nfd.parent.mkdir()
    r = run("node-labels", "--cache", cache, "--format", "nfd", "--output", str(nfd))
    assert r.returncode == 0, r.stderr
    lines = [x for x in nfd.read_text().splitlines() if not x.startswith("#")]
    assert sorted(lines) == sorted(text)

    # An evicted entry loses its label.
    assert run("cache", "rm", other["entry"], "--cache", cache).returncode == 0
    assert json.loads(run("node-labels", "--cache", cache, "--json").stdout) == {key: "complete"}


def test_a_partially_filled_entry_is_labelled_partial(tmp_path):
    cache = tmp_path / "cache"
    ds = ssdfeed.make_dataset(str(tmp_path / "ds"), count=40, classes=2, min_side=64, max_side=96)
    w = warm(ds["uri"], str(cache), "--resize-short", "40")
    # Drop the index of the segment: the records are no longer reachable.
    for name in os.listdir(cache / "entries" / w["entry"]):
        if name.endswith(".idx"):
            with open(cache / "entries" / w["entry"] / name, "r+b") as f:
                f.truncate(48 * 10)
    labels = json.loads(run("node-labels", "--cache", str(cache), "--json").stdout)
    assert labels == {"ssdfeed.io/e-" + w["entry"]: "partial"}


def test_a_manifest_declaring_2_62_samples_is_listed_broken_never_an_abort(tmp_path):
    """cache ls, node-labels and serve-metrics all list every entry: one
    (hand-written or imported) manifest with samples_total = 2^62 made each
    abort with bad_alloc, so the exporter and the labeller crash-looped."""
    cache = tmp_path / "cache"
    ds = ssdfeed.make_dataset(str(tmp_path / "ds"), count=8, classes=2, min_side=32, max_side=48)
    w = warm(ds["uri"], str(cache), "--resize-short", "16")
    bad = cache / "entries" / ("f" * 64)
    bad.mkdir(mode=0o700)
    (bad / "manifest.json").write_text(json.dumps(
        {"fingerprint": bad.name, "source": "x", "spec": "y", "samples_total": 2**62}))

    ls = run("cache", "ls", "--json", "--cache", str(cache))
    assert ls.returncode == 0, ls.stderr
    states = {e["entry"]: e["state"] for e in json.loads(ls.stdout)}
    assert states[w["entry"]] == "complete"
    assert states[bad.name].startswith(
        "broken: manifest damaged: samples_total 4611686018427387904 is out of range"), states
    text = run("cache", "ls", "--cache", str(cache))
    assert text.returncode == 0 and "broken" in text.stdout, text.stderr

    labels = run("node-labels", "--cache", str(cache), "--json")
    assert labels.returncode == 0, labels.stderr
    assert json.loads(labels.stdout) == {"ssdfeed.io/e-" + w["entry"]: "complete"}

    scrape = run("serve-metrics", "--cache", str(cache), "--once")
    assert scrape.returncode == 0, scrape.stderr
    totals = {e: float(v) for e, v in re.findall(
        r'^ssdfeed_entry_samples_total\{entry="([0-9a-f]+)"\} (\S+)$', scrape.stdout, re.M)}
    assert sorted(totals.values()) == [0.0, 8.0], scrape.stdout


def test_node_labels_refuses_a_missing_root(tmp_path):
    r = run("node-labels", "--cache", str(tmp_path / "nope"))
    assert r.returncode == 2 and "nope" in r.stderr


def test_label_patch_sets_new_and_removes_stale_labels_only():
    on_node = {
        "kubernetes.io/hostname": "n1",
        "ssdfeed.io/e-old": "complete",
        "ssdfeed.io/e-same": "complete",
        "ssdfeed.io/e-grew": "partial",
        "ssdfeed.io/cache": "true",
    }
    wanted = {"ssdfeed.io/e-same": "complete", "ssdfeed.io/e-grew": "complete", "ssdfeed.io/e-new": "partial"}
    assert node_labeller.label_patch(on_node, wanted) == {
        "metadata": {"labels": {"ssdfeed.io/e-old": None, "ssdfeed.io/e-grew": "complete", "ssdfeed.io/e-new": "partial"}}
    }
    assert node_labeller.label_patch(wanted, wanted) == {}


class NodeApi(http.server.BaseHTTPRequestHandler):
    """GET and merge-PATCH of /api/v1/nodes/<name>, as the API server does."""

    nodes: dict = {}
    requests: list = []

    def log_message(self, *args):
        pass

    def _node(self):
        name = self.path.rsplit("/", 1)[-1]
        return self.nodes.get(name) if self.path.startswith("/api/v1/nodes/") else None

    def _reply(self, code, body):
        data = json.dumps(body).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self):
        self.requests.append(("GET", self.path, None, None))
        node = self._node()
        self._reply(200, node) if node else self._reply(404, {"reason": "NotFound"})

    def do_PATCH(self):
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        self.requests.append(("PATCH", self.path, self.headers["Content-Type"], body))
        node = self._node()
        if not node:
            return self._reply(404, {"reason": "NotFound"})
        labels = node["metadata"]["labels"]
        for k, v in body["metadata"]["labels"].items():
            if v is None:
                labels.pop(k, None)
            else:
                labels[k] = v
        self._reply(200, node)


def test_apply_keeps_the_node_labels_equal_to_the_cache(small_datasets, tmp_path):
    cache = str(tmp_path / "cache")
    w = warm(small_datasets["tfrecord"]["uri"], cache, "--resize-short", "40")
    NodeApi.nodes = {"n1": {"metadata": {"name": "n1", "labels": {"zone": "a", "ssdfeed.io/e-gone": "complete"}}}}
    NodeApi.requests = []
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), NodeApi)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        api = "http://127.0.0.1:%d" % server.server_address[1]
        r = subprocess.run(
            [sys.executable, "-m", "ssdfeed.node_labeller",
             "--node", "n1", "--cache", cache, "--api", api],
            capture_output=True, text=True,
        )
        assert r.returncode == 0, r.stderr
        labels = NodeApi.nodes["n1"]["metadata"]["labels"]
        assert labels == {"zone": "a", "ssdfeed.io/e-" + w["entry"]: "complete"}
        patch = [q for q in NodeApi.requests if q[0] == "PATCH"]
        assert len(patch) == 1 and patch[0][2] == "application/merge-patch+json"
        # The CLI's --apply runs the same helper; the cache lost its entry, so
        # the label goes.
        assert run("cache", "rm", w["entry"], "--cache", cache).returncode == 0
        env = dict(os.environ, SSDFEED_PYTHON=sys.executable, SSDFEED_KUBE_API=api)
        r = subprocess.run(["ssdfeed", "node-labels", "--cache", cache, "--apply", "n1"],
                           capture_output=True, text=True, env=env)
        assert r.returncode == 0, r.stderr
        assert NodeApi.nodes["n1"]["metadata"]["labels"] == {"zone": "a"}
        # Nothing changed: no further patch.
        node_labeller.apply_once(node_labeller.Api(api), "n1", cache)
        assert len([q for q in NodeApi.requests if q[0] == "PATCH"]) == 2
        # A node that does not exist is an error naming it.
        with pytest.raises(RuntimeError, match="nodes/n2: HTTP 404"):
            node_labeller.apply_once(node_labeller.Api(api), "n2", cache)
    finally:
        server.shutdown()


@pytest.mark.parametrize(
    "sides,flags",
    [((48, 96), ()), ((300, 500), ("--resize-short", "160"))],
    ids=["small-full-size", "large-resized"],
)
def test_plan_estimates_the_warmed_size_within_10_percent(tmp_path, sides, flags):
    ds = ssdfeed.make_dataset(str(tmp_path / "ds"), count=300, classes=5, seed=7, min_side=sides[0], max_side=sides[1])
    # 40 of 300: the estimate extrapolates, it does not just count.
    r = run("plan", "--source", ds["uri"], *flags, "--samples", "40", "--json")
    assert r.returncode == 0, r.stderr
    plan = json.loads(r.stdout)
    assert plan["samples_total"] == 300 and plan["samples_probed"] == 40
    assert plan["capacity_min_bytes"] == int(plan["entry_bytes"] * 1.2)
    assert plan["capacity_max_bytes"] == int(plan["entry_bytes"] * 1.5)
    assert plan["warm_seconds"] >= 0
    cache = str(tmp_path / "cache")
    warm(ds["uri"], cache, *flags)
    real = json.loads(run("cache", "ls", "--json", "--cache", cache).stdout)[0]["bytes"]
    assert abs(plan["entry_bytes"] - real) <= 0.10 * real, (plan["entry_bytes"], real)


def test_plan_text_names_size_and_time(small_datasets):
    r = run("plan", "--source", small_datasets["folder"]["uri"], "--resize-short", "32")
    assert r.returncode == 0, r.stderr
    assert "cache size" in r.stdout and "warm-up" in r.stdout and "1.2-1.5x" in r.stdout
