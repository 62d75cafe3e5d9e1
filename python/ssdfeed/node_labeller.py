"""Keeps a Kubernetes node's ssdfeed labels equal to what its cache holds.

``ssdfeed node-labels --apply NODE`` runs this module; the DaemonSet in
deploy/kubernetes/node-api/ runs it with ``--every SECONDS``. It asks the ``ssdfeed``
command for the labels (``node-labels --json``), reads the node, and sends one
JSON merge patch that sets the current labels and deletes (``null``) every
``ssdfeed.io/e-*`` label the cache no longer backs: a label left behind after
an entry is evicted would send jobs to a node without their data.

Only the standard library is used. The API server and credentials are the
pod's service account (``KUBERNETES_SERVICE_HOST``, the mounted token and CA),
or ``--api URL`` (``$SSDFEED_KUBE_API``) without credentials, e.g. ``kubectl
proxy`` on a workstation.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import ssl
import subprocess
import sys
import time
import urllib.error
import urllib.request

PREFIX = "ssdfeed.io/e-"
SA_DIR = "/var/run/secrets/kubernetes.io/serviceaccount"


def ssdfeed_command() -> str:
    """The ssdfeed CLI installed with this package (next to the interpreter
    in a venv), else the one on PATH."""
    beside = os.path.join(os.path.dirname(sys.executable), "ssdfeed")
    if os.access(beside, os.X_OK):
        return beside
    found = shutil.which("ssdfeed")
    if not found:
        raise SystemExit("ssdfeed node_labeller: no `ssdfeed` command next to %s or on PATH" % sys.executable)
    return found


def current_labels(cache: str) -> dict[str, str]:
    out = subprocess.run(
        [ssdfeed_command(), "node-labels", "--cache", cache, "--json"],
        check=True,
        stdout=subprocess.PIPE,
        text=True,
    )
    return json.loads(out.stdout)


def label_patch(on_node: dict[str, str], wanted: dict[str, str]) -> dict:
    """The merge patch from the node's labels to the wanted ssdfeed labels;
    labels outside our prefix are never touched. Empty when nothing changes."""
    labels: dict[str, str | None] = {}
    for key in on_node:
        if key.startswith(PREFIX) and key not in wanted:
            labels[key] = None
    for key, value in wanted.items():
        if on_node.get(key) != value:
            labels[key] = value
    return {"metadata": {"labels": labels}} if labels else {}


class Api:
    def __init__(self, base: str | None, token_file: str | None = None, ca_file: str | None = None):
        self.token_file = token_file
        self.context = None
        if base is None:
            host = os.environ.get("KUBERNETES_SERVICE_HOST")
            port = os.environ.get("KUBERNETES_SERVICE_PORT", "443")
            if not host:
                raise SystemExit(
                    "ssdfeed node_labeller: not in a pod (no KUBERNETES_SERVICE_HOST); pass --api URL "
                    "(e.g. http://127.0.0.1:8001 from `kubectl proxy`)"
                )
            base = "https://%s:%s" % ("[%s]" % host if ":" in host else host, port)
            self.token_file = token_file or os.path.join(SA_DIR, "token")
            ca_file = ca_file or os.path.join(SA_DIR, "ca.crt")
        if ca_file:
            self.context = ssl.create_default_context(cafile=ca_file)
        self.base = base.rstrip("/")

    def request(self, method: str, path: str, body: dict | None = None, ctype: str = "application/json") -> dict:
        data = json.dumps(body).encode() if body is not None else None
        req = urllib.request.Request(self.base + path, data=data, method=method)
        req.add_header("Accept", "application/json")
        if data is not None:
            req.add_header("Content-Type", ctype)
        if self.token_file:
            # Re-read every time: projected service account tokens rotate.
            with open(self.token_file) as f:
                req.add_header("Authorization", "Bearer " + f.read().strip())
        try:
            with urllib.request.urlopen(req, context=self.context, timeout=30) as r:
                return json.loads(r.read() or b"{}")
        except urllib.error.HTTPError as e:
            detail = e.read().decode(errors="replace")[:300]
            raise RuntimeError("%s %s: HTTP %d %s" % (method, path, e.code, detail)) from None


def apply_once(api: Api, node: str, cache: str) -> dict:
    wanted = current_labels(cache)
    path = "/api/v1/nodes/" + urllib.request.quote(node, safe="")
    on_node = api.request("GET", path).get("metadata", {}).get("labels") or {}
    patch = label_patch(on_node, wanted)
    if patch:
        api.request("PATCH", path, patch, "application/merge-patch+json")
    return patch


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m ssdfeed.node_labeller", description=__doc__.split("\n\n")[0])
    p.add_argument("--node", default=os.environ.get("NODE_NAME"), help="node name (default $NODE_NAME)")
    p.add_argument("--cache", default=os.environ.get("SSDFEED_CACHE"), help="cache root (default $SSDFEED_CACHE)")
    p.add_argument(
        "--api",
        default=os.environ.get("SSDFEED_KUBE_API") or None,
        help="API server URL without credentials, e.g. from kubectl proxy (default $SSDFEED_KUBE_API, else the pod's service account)",
    )
    p.add_argument("--every", type=float, default=0, help="repeat every SECONDS (default 0: once)")
    a = p.parse_args(argv)
    if not a.node or not a.cache:
        p.error("--node (or $NODE_NAME) and --cache (or $SSDFEED_CACHE) are required")
    api = Api(a.api)
    while True:
        try:
            patch = apply_once(api, a.node, a.cache)
            changed = patch.get("metadata", {}).get("labels", {})
            print("ssdfeed: node %s: %d label(s) changed %s" % (a.node, len(changed), json.dumps(changed)), flush=True)
        except (RuntimeError, OSError, subprocess.CalledProcessError) as e:
            print("ssdfeed: node %s: labels not updated: %s" % (a.node, e), file=sys.stderr, flush=True)
            if a.every <= 0:
                return 1
        if a.every <= 0:
            return 0
        time.sleep(a.every)


if __name__ == "__main__":
    sys.exit(main())
