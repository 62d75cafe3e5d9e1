"""Every Kubernetes manifest in deploy/kubernetes validates offline against
the API schemas (kubernetes-validate bundles them), strictly: a misspelt field
is an error, not silently dropped by the API server. Plus the properties the
deployment relies on, which a schema cannot see."""

import pathlib

import kubernetes_validate
import pytest
import yaml

KUBE = pathlib.Path(__file__).resolve().parents[2] / "deploy" / "kubernetes"
MANIFESTS = sorted(KUBE.rglob("*.yaml"))
# The oldest Kubernetes release still supported upstream when this was written,
# and the newest the package knows: fields used must exist in both.
VERSIONS = ["1.30.0", kubernetes_validate.utils.latest_version()]


def documents(paths=MANIFESTS):
    for path in paths:
        for doc in yaml.safe_load_all(path.read_text()):
            if doc:
                yield path.relative_to(KUBE).as_posix(), doc


def default_documents():
    """What `kubectl apply -f deploy/kubernetes/` installs (not node-api/)."""
    return documents(sorted(KUBE.glob("*.yaml")))


def find(name, kind):
    return next(doc for n, doc in documents() if n == name and doc["kind"] == kind)


def pod_specs():
    for name, doc in documents():
        if doc["kind"] in ("DaemonSet", "Job"):
            yield name, doc["spec"]["template"]["spec"]


def test_there_are_manifests():
    names = {p.relative_to(KUBE).as_posix() for p in MANIFESTS}
    assert {"namespace.yaml", "daemonset.yaml", "networkpolicy.yaml", "warm-job.yaml", "train-job.yaml",
            "node-api/rbac.yaml", "node-api/admission.yaml", "node-api/daemonset.yaml"} <= names


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


def test_api_labeller_rbac_is_get_and_patch_on_nodes_only():
    role = find("node-api/rbac.yaml", "ClusterRole")
    assert role["rules"] == [{"apiGroups": [""], "resources": ["nodes"], "verbs": ["get", "patch"]}]


def test_train_job_prefers_nodes_with_its_entry():
    job = next(doc for name, doc in documents() if name == "train-job.yaml")
    prefs = job["spec"]["template"]["spec"]["affinity"]["nodeAffinity"]["preferredDuringSchedulingIgnoredDuringExecution"]
    keys = {e["key"] for p in prefs for e in p["preference"]["matchExpressions"]}
    assert len(keys) == 1
    key = keys.pop()
    assert key.startswith("ssdfeed.io/e-") and len(key.split("/", 1)[1]) <= 63


# --- the default install: node labels through node-feature-discovery --------


def test_default_install_grants_nothing():
    """No RBAC object, and no ServiceAccount, in what `kubectl apply -f
    deploy/kubernetes/` installs: its labeller writes an NFD features file."""
    kinds = {(n, d["kind"]) for n, d in default_documents()}
    granting = {"ServiceAccount", "Role", "RoleBinding", "ClusterRole", "ClusterRoleBinding"}
    assert not {k for k in kinds if k[1] in granting}, kinds


def test_default_labeller_writes_an_nfd_features_file_in_its_own_directory():
    spec = find("daemonset.yaml", "DaemonSet")["spec"]["template"]["spec"]
    labeller = next(c for c in spec["containers"] if c["name"] == "labeller")
    script = " ".join(labeller.get("command", []) + labeller.get("args", []))
    assert "node-labels" in script and "--format nfd" in script and "--output /nfd/labels" in script
    nfd = next(v for v in spec["volumes"] if v["name"] == "nfd")
    # Not features.d itself: nfd-worker reads every file there.
    assert nfd["hostPath"] == {"path": "/etc/kubernetes/node-feature-discovery/features.d/ssdfeed.d",
                               "type": "Directory"}
    mounts = {m["name"]: m for m in labeller["volumeMounts"]}
    assert mounts["nfd"]["mountPath"] == "/nfd" and mounts["cache"]["readOnly"] is True
    assert not any(m["name"] == "nfd" for c in spec["containers"] if c["name"] != "labeller"
                   for m in c["volumeMounts"])


# --- service account tokens --------------------------------------------------


def token_volumes(spec):
    return {v["name"] for v in spec.get("volumes", [])
            if any("serviceAccountToken" in s for s in v.get("projected", {}).get("sources", []))}


def test_no_pod_automounts_a_token():
    for name, spec in pod_specs():
        assert spec.get("automountServiceAccountToken") is False, name


def test_only_the_api_labeller_container_has_a_token():
    holders = []
    for name, spec in pod_specs():
        tokens = token_volumes(spec)
        for c in spec["containers"]:
            if any(m["name"] in tokens for m in c.get("volumeMounts", [])):
                holders.append((name, c["name"]))
    assert holders == [("node-api/daemonset.yaml", "labeller")]
    spec = find("node-api/daemonset.yaml", "DaemonSet")["spec"]["template"]["spec"]
    labeller = next(c for c in spec["containers"] if c["name"] == "labeller")
    mount = next(m for m in labeller["volumeMounts"] if m["name"] in token_volumes(spec))
    # Where ssdfeed.node_labeller reads the token and the CA.
    assert mount["mountPath"] == "/var/run/secrets/kubernetes.io/serviceaccount"
    sa = find("node-api/rbac.yaml", "ServiceAccount")
    assert sa["automountServiceAccountToken"] is False
    assert spec["serviceAccountName"] == sa["metadata"]["name"]


def test_both_daemonsets_run_the_same_metrics_container():
    def metrics(name):
        spec = find(name, "DaemonSet")["spec"]["template"]["spec"]
        return next(c for c in spec["containers"] if c["name"] == "metrics"), spec["securityContext"]

    assert metrics("daemonset.yaml") == metrics("node-api/daemonset.yaml")


# --- network -------------------------------------------------------------------


def test_only_prometheus_reaches_the_metrics_port():
    pol = find("networkpolicy.yaml", "NetworkPolicy")
    ds = find("daemonset.yaml", "DaemonSet")
    assert pol["metadata"]["namespace"] == ds["metadata"]["namespace"]
    selector = pol["spec"]["podSelector"].get("matchLabels", {})
    assert selector.items() <= ds["spec"]["template"]["metadata"]["labels"].items()
    assert pol["spec"]["policyTypes"] == ["Ingress"]
    [rule] = pol["spec"]["ingress"]
    assert rule["ports"] == [{"protocol": "TCP", "port": 9808}]
    [peer] = rule["from"]  # namespace AND pod selector in one peer: both must match
    assert peer["podSelector"]["matchLabels"] == {"app.kubernetes.io/name": "prometheus"}
    assert "kubernetes.io/metadata.name" in peer["namespaceSelector"]["matchLabels"]


# --- pod security and who shares a cache -------------------------------------------


def test_namespaces_of_hostpath_pods_admit_hostpath_and_still_audit_restricted():
    namespaces = {d["metadata"]["name"]: d["metadata"].get("labels", {})
                  for _, d in documents() if d["kind"] == "Namespace"}
    for name, doc in documents():
        if doc["kind"] in ("DaemonSet", "Job"):
            labels = namespaces[doc["metadata"]["namespace"]]
            assert labels["pod-security.kubernetes.io/enforce"] == "privileged", name
            assert labels["pod-security.kubernetes.io/audit"] == "restricted", name
            assert labels["pod-security.kubernetes.io/warn"] == "restricted", name


def test_jobs_run_as_their_team_and_the_daemonset_joins_the_team_group():
    """Not one uid/gid for every pod: a team's jobs have the team's, and only
    the DaemonSet that folds their stats is added to that group."""
    jobs = [(n, s) for n, s in pod_specs() if n.endswith("job.yaml")]
    gids = {s["securityContext"]["runAsGroup"] for _, s in jobs}
    assert len(gids) == 1
    team = gids.pop()
    for name, spec in jobs:
        sc = spec["securityContext"]
        assert sc["runAsUser"] != 10001 and team != 10001, name
    for name, doc in documents():
        if doc["kind"] == "DaemonSet":
            sc = doc["spec"]["template"]["spec"]["securityContext"]
            assert sc["runAsGroup"] != team and sc["supplementalGroups"] == [team], name


# --- the admission policy of the API labeller ----------------------------------

SA_USER = "system:serviceaccount:ssdfeed:ssdfeed-labeller"
NODE_EXTRA = "authentication.kubernetes.io/node-name"


def test_admission_policy_binds_the_labellers_account():
    pol = find("node-api/admission.yaml", "ValidatingAdmissionPolicy")
    binding = find("node-api/admission.yaml", "ValidatingAdmissionPolicyBinding")
    assert binding["spec"]["policyName"] == pol["metadata"]["name"]
    assert binding["spec"]["validationActions"] == ["Deny"]
    assert pol["spec"]["failurePolicy"] == "Fail"
    sa = find("node-api/rbac.yaml", "ServiceAccount")
    assert SA_USER == "system:serviceaccount:%s:%s" % (sa["metadata"]["namespace"], sa["metadata"]["name"])
    [cond] = pol["spec"]["matchConditions"]
    assert repr(SA_USER) in cond["expression"]
    [rule] = pol["spec"]["matchConstraints"]["resourceRules"]
    assert "nodes" in rule["resources"] and "UPDATE" in rule["operations"]


def node(name, labels, spec=None, annotations=None, **metadata):
    meta = {"name": name, "labels": labels, **metadata}
    if annotations is not None:
        meta["annotations"] = annotations
    return {"apiVersion": "v1", "kind": "Node", "metadata": meta, "spec": spec or {"podCIDR": "10.0.1.0/24"}}


def admission(old, new, node_name="node-a", user=SA_USER, operation="UPDATE", sub_resource=""):
    extra = {NODE_EXTRA: [node_name]} if node_name else {}
    request = {"operation": operation, "name": (new or old)["metadata"]["name"], "subResource": sub_resource,
               "userInfo": {"username": user, "extra": extra}}
    return {"request": request, "object": new, "oldObject": old}


class Policy:
    """The policy's CEL, evaluated as the API server does (matchConditions,
    then variables, then every validation) by the CEL reference runtime:
    no API server or kubectl needed."""

    def __init__(self):
        cel = pytest.importorskip("cel_expr_python.cel", reason="cel-expr-python (tests/requirements.txt)")
        from cel_expr_python.ext import ext_optional, ext_strings

        self.spec = find("node-api/admission.yaml", "ValidatingAdmissionPolicy")["spec"]
        names = ("request", "object", "oldObject", "variables")
        self.env = cel.NewEnv(variables={n: cel.Type.DYN for n in names},
                              extensions=[ext_optional.ExtOptional(), ext_strings.ExtStrings()])

    def _eval(self, expression, data):
        return self.env.compile(expression).eval(data=data).plain_value()

    def decide(self, req):
        """'skip' (not matched), 'allow' or 'deny'."""
        if not all(self._eval(c["expression"], req) for c in self.spec["matchConditions"]):
            return "skip"
        data = dict(req, variables={})
        for v in self.spec["variables"]:
            data["variables"][v["name"]] = self._eval(v["expression"], data)
        for v in self.spec["validations"]:
            try:
                ok = self._eval(v["expression"], data)
            except Exception:  # an evaluation error under failurePolicy Fail
                ok = False
            if ok is not True:
                return "deny"
        return "allow"


@pytest.fixture(scope="module")
def policy():
    return Policy()


BASE_LABELS = {"kubernetes.io/hostname": "node-a", "ssdfeed.io/cache": "true", "ssdfeed.io/e-old": "partial"}


@pytest.mark.parametrize("case,new_labels,kw,want", [
    ("adds, changes and removes its own labels", {"kubernetes.io/hostname": "node-a", "ssdfeed.io/cache": "true",
                                                  "ssdfeed.io/e-new": "complete"}, {}, "allow"),
    ("no change", dict(BASE_LABELS), {}, "allow"),
    ("another node", dict(BASE_LABELS, **{"ssdfeed.io/e-new": "complete"}), {"node_name": "node-b"}, "deny"),
    ("a token without a node", dict(BASE_LABELS, **{"ssdfeed.io/e-new": "complete"}), {"node_name": None}, "deny"),
    ("changes another label", dict(BASE_LABELS, **{"ssdfeed.io/cache": "false"}), {}, "deny"),
    ("adds another label", dict(BASE_LABELS, **{"node-role.kubernetes.io/control-plane": ""}), {}, "deny"),
    ("removes another label", {k: v for k, v in BASE_LABELS.items() if k != "ssdfeed.io/cache"}, {}, "deny"),
    ("a label merely starting with ssdfeed.io/e", dict(BASE_LABELS, **{"ssdfeed.io/eviction": "x"}), {}, "deny"),
    ("the status subresource", dict(BASE_LABELS), {"sub_resource": "status"}, "deny"),
    ("someone else", dict(BASE_LABELS, **{"anything": "x"}), {"user": "system:serviceaccount:ssdfeed:default"},
     "skip"),
])
def test_admission_policy_confines_the_labeller_to_its_nodes_ssdfeed_labels(policy, case, new_labels, kw, want):
    req = admission(node("node-a", dict(BASE_LABELS)), node("node-a", new_labels), **kw)
    assert policy.decide(req) == want, case


def test_admission_policy_refuses_spec_annotation_and_delete(policy):
    old = node("node-a", dict(BASE_LABELS), annotations={"a": "1"})
    tainted = node("node-a", dict(BASE_LABELS), spec={"podCIDR": "10.0.1.0/24",
                                                      "taints": [{"key": "x", "effect": "NoSchedule"}]},
                   annotations={"a": "1"})
    annotated = node("node-a", dict(BASE_LABELS), annotations={"a": "2"})
    assert policy.decide(admission(old, tainted)) == "deny"
    assert policy.decide(admission(old, annotated)) == "deny"
    assert policy.decide(admission(old, None, operation="DELETE")) == "deny"
    assert policy.decide(admission(old, node("node-a", dict(BASE_LABELS), annotations={"a": "1"}))) == "allow"


OWNER = {"apiVersion": "v1", "kind": "Pod", "name": "x", "uid": "1234", "controller": True,
         "blockOwnerDeletion": True}


@pytest.mark.parametrize("old_meta,new_meta", [
    ({}, {"finalizers": ["example.com/hold"]}),
    ({"finalizers": ["example.com/hold"]}, {}),
    ({"finalizers": ["example.com/hold"]}, {"finalizers": ["example.com/other"]}),
    ({}, {"ownerReferences": [OWNER]}),
    ({"ownerReferences": [OWNER]}, {}),
    ({"ownerReferences": [OWNER]}, {"ownerReferences": [dict(OWNER, uid="5678")]}),
])
def test_admission_policy_pins_owner_references_and_finalizers(policy, old_meta, new_meta):
    old = node("node-a", dict(BASE_LABELS), **old_meta)
    new = node("node-a", dict(BASE_LABELS, **{"ssdfeed.io/e-new": "complete"}), **new_meta)
    assert policy.decide(admission(old, new)) == "deny"
    # The same label change with that metadata left as it was is allowed.
    same = node("node-a", dict(BASE_LABELS, **{"ssdfeed.io/e-new": "complete"}), **old_meta)
    assert policy.decide(admission(old, same)) == "allow"


# --- systemd units (deploy/systemd) for nodes without Kubernetes ----------------

SYSTEMD = KUBE.parent / "systemd"


def unit(name):
    out = {}
    for line in (SYSTEMD / name).read_text().splitlines():
        if "=" in line and not line.startswith("#"):
            k, _, v = line.partition("=")
            out.setdefault(k.strip(), v.strip())
    return out


@pytest.mark.parametrize("name", ["ssdfeed-gc.service", "ssdfeed-metrics.service"])
def test_units_run_as_the_caches_owner_not_root(name):
    """A timer's service runs as root unless it names a User=."""
    u = unit(name)
    assert u.get("User") not in (None, "", "root", "0"), name
    assert u.get("Group") not in (None, "", "root", "0"), name
    assert u["ProtectSystem"] == "strict" and u["ReadWritePaths"] in u["ExecStart"], name
    assert u["NoNewPrivileges"] == "yes", name


def test_gc_timer_starts_the_gc_service():
    assert (SYSTEMD / "ssdfeed-gc.timer").exists() and "cache gc" in unit("ssdfeed-gc.service")["ExecStart"]


def test_units_verify(tmp_path):
    import shutil
    import subprocess

    if not shutil.which("systemd-analyze"):
        pytest.skip("systemd-analyze is not installed")
    for f in SYSTEMD.iterdir():
        # verify wants ExecStart's program to exist here.
        (tmp_path / f.name).write_text(f.read_text().replace("/opt/ssdfeed/bin/ssdfeed", "/bin/true"))
    r = subprocess.run(["systemd-analyze", "verify", "--man=no", *sorted(str(p) for p in tmp_path.iterdir())],
                       capture_output=True, text=True)
    assert r.returncode == 0 and not r.stderr.strip(), r.stderr
