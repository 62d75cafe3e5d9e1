"""Every Kubernetes manifest in deploy/kubernetes validates offline against
the API schemas (kubernetes-validate bundles them), strictly: a misspelt field
is an error, not silently dropped by the API server. Plus the properties the
deployment relies on, which a schema cannot see."""

import pathlib

import kubernetes_validate
import pytest
import yaml

MANIFESTS = sorted((pathlib.Path(__file__).resolve().parents[2] / "deploy" / "kubernetes").glob("*.yaml"))
# The oldest Kubernetes release still supported upstream when this was written,
# and the newest the package knows: fields used must exist in both.
VERSIONS = ["1.30.0", kubernetes_validate.utils.latest_version()]


def documents():
    for path in MANIFESTS:
        for doc in yaml.safe_load_all(path.read_text()):
            if doc:
                yield path.name, doc


def pod_specs():
    for name, doc in documents():
        if doc["kind"] in ("DaemonSet", "Job"):
            yield name, doc["spec"]["template"]["spec"]


def test_there_are_manifests():
    names = {p.name for p in MANIFESTS}
    assert {"daemonset.yaml", "rbac.yaml", "warm-job.yaml", "train-job.yaml"} <= names


@pytest.mark.parametrize("version", VERSIONS)
def test_manifests_validate_strictly(version):
    for name, doc in documents():
        try:
            kubernetes_validate.validate(doc, version, strict=True)
        except kubernetes_validate.ValidationError as e:
            pytest.fail("%s: %s %s: %s" % (name, doc.get("kind"), doc["metadata"].get("name"), e.message))


def test_a_schema_error_is_caught():
    """The check can fail: a misspelt field in a copy of the DaemonSet."""
    ds = next(doc for _, doc in documents() if doc["kind"] == "DaemonSet")
    ds["spec"]["template"]["spec"]["containers"][0]["volumeMount"] = []
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(ds, VERSIONS[0], strict=True)


def test_cache_hostpath_fails_fast_when_the_ssd_is_not_mounted():
    for name, spec in pod_specs():
        for v in spec["volumes"]:
            if "hostPath" in v:
                assert v["hostPath"]["type"] == "Directory", name


def test_pods_run_non_root_read_only_with_requests():
    for name, spec in pod_specs():
        assert spec["securityContext"]["runAsNonRoot"] is True, name
        assert spec["securityContext"]["runAsUser"] != 0, name
        for c in spec["containers"]:
            sc = c["securityContext"]
            assert sc["readOnlyRootFilesystem"] is True, (name, c["name"])
            assert sc["allowPrivilegeEscalation"] is False, (name, c["name"])
            assert c["resources"]["requests"], (name, c["name"])


def test_labeller_rbac_is_get_and_patch_on_nodes_only():
    role = next(doc for _, doc in documents() if doc["kind"] == "ClusterRole")
    assert role["rules"] == [{"apiGroups": [""], "resources": ["nodes"], "verbs": ["get", "patch"]}]


def test_train_job_prefers_nodes_with_its_entry():
    job = next(doc for name, doc in documents() if name == "train-job.yaml")
    prefs = job["spec"]["template"]["spec"]["affinity"]["nodeAffinity"]["preferredDuringSchedulingIgnoredDuringExecution"]
    keys = {e["key"] for p in prefs for e in p["preference"]["matchExpressions"]}
    assert len(keys) == 1
    key = keys.pop()
    assert key.startswith("ssdfeed.io/e-") and len(key.split("/", 1)[1]) <= 63
