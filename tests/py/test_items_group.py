"""ssdfeed.cache and ssdfeed.tf.cache on a group-shared (2770) root: two uids
of one group fill and read one entry (group_shared=True); without it the
root is refused. Needs root (to run the jobs as two other uids)."""

import json
import os
import shutil
import subprocess
import sys
import tempfile

import pytest

GROUP = 4242  # the team's gid; neither job is root
UIDS = {"alice": 64001, "bob": 64002}

CACHE_JOB = """
import json, sys, ssdfeed
root, who, n, shared = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4] == "1"

class Squares:
    def __len__(self):
        return 8
    def __getitem__(self, i):
        return {"i": i, "sq": i * i, "who": who}

try:
    cached = ssdfeed.cache(Squares(), cache=root, key="squares", group_shared=shared)
    items = [cached[i] for i in range(n)]
except Exception as e:
    print(json.dumps({"error": f"{type(e).__name__}: {e}"}))
    raise SystemExit(0)
print(json.dumps({"who": [x["who"] for x in items], "sq": [x["sq"] for x in items]}))
"""

TF_JOB = """
import json, sys
import tensorflow as tf
import ssdfeed.tf
root, factor = sys.argv[1], int(sys.argv[2])
ds = tf.data.Dataset.range(6).map(lambda x: x * factor)
cached = ssdfeed.tf.cache(ds, key="times", cache=root, group_shared=True)
print(json.dumps([int(x) for x in cached.as_numpy_iterator()]))
"""


def as_user(name):
    return ["setpriv", f"--reuid={UIDS[name]}", f"--regid={GROUP}", "--clear-groups"]


@pytest.fixture
def group_root():
    """A 2770 root of group GROUP that both users can reach, or a skip."""
    if os.geteuid() != 0:
        pytest.skip("running jobs as two other uids needs root")
    if shutil.which("setpriv") is None:
        pytest.skip("setpriv is not installed")
    probe = subprocess.run([*as_user("alice"), sys.executable, "-c", "import ssdfeed"],
                           capture_output=True, text=True, env=_env("/tmp"))
    if probe.returncode != 0:
        pytest.skip(f"uid {UIDS['alice']} cannot import ssdfeed here: {probe.stderr[-300:]}")
    top = tempfile.mkdtemp(prefix="ssdfeed-group-")
    os.chmod(top, 0o755)
    root = os.path.join(top, "cache")
    os.mkdir(root)
    os.chown(root, 0, GROUP)
    os.chmod(root, 0o2770)
    yield root
    shutil.rmtree(top)


def _env(home):
    return dict(os.environ, HOME=home, TF_CPP_MIN_LOG_LEVEL="3")


def run_as(name, root, script, *args):
    r = subprocess.run([*as_user(name), sys.executable, "-c", script, root, *map(str, args)],
                       capture_output=True, text=True, env=_env(os.path.dirname(root)),
                       timeout=600)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout.strip().splitlines()[-1])


@pytest.mark.root
def test_two_uids_of_a_group_share_one_cache_entry(group_root):
    assert run_as("alice", group_root, CACHE_JOB, "alice", 4, 1) == {
        "who": ["alice"] * 4, "sq": [0, 1, 4, 9]}
    # Bob reads what Alice stored and stores the rest; Alice then reads Bob's.
    assert run_as("bob", group_root, CACHE_JOB, "bob", 8, 1)["who"] == ["alice"] * 4 + ["bob"] * 4
    got = run_as("alice", group_root, CACHE_JOB, "alice", 8, 1)
    assert got == {"who": ["alice"] * 4 + ["bob"] * 4, "sq": [i * i for i in range(8)]}
    entries = os.path.join(group_root, "entries")
    for d in os.listdir(entries):
        st = os.stat(os.path.join(entries, d))
        assert st.st_gid == GROUP and st.st_mode & 0o2770 == 0o2770, oct(st.st_mode)


@pytest.mark.root
def test_a_group_root_is_refused_without_group_shared(group_root):
    got = run_as("alice", group_root, CACHE_JOB, "alice", 1, 0)
    assert "error" in got and "group" in got["error"] and group_root in got["error"], got


@pytest.mark.root
def test_tf_cache_two_uids_of_a_group_share_one_cache(group_root):
    pytest.importorskip("tensorflow")
    assert run_as("alice", group_root, TF_JOB, 10) == [0, 10, 20, 30, 40, 50]
    # Another upstream under the same key: Bob is served what Alice stored.
    assert run_as("bob", group_root, TF_JOB, 7) == [0, 10, 20, 30, 40, 50]
