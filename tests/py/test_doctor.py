"""ssdfeed doctor through the real CLI: exit 0 / 1 (a warning) / 2 (a
blocking check), --json, the text output; the node's facts from fixtures
(--sysroot) and from real cases (chmod 777, prlimit, a tmpfs mounted in a
mount namespace of its own). tests/cc/doctor_checks_test.cc makes each check
fail and pass against fixtures."""

import json
import os
import resource
import shutil
import subprocess

import pytest


def run(*args, prefix=()):
    return subprocess.run([*prefix, shutil.which("ssdfeed"), *args], capture_output=True,
                          text=True)


def doctor(root, *extra, prefix=()):
    r = run("doctor", "--cache", str(root), "--json", *extra, prefix=prefix)
    assert r.stdout, r.stderr
    out = json.loads(r.stdout)
    assert out["exit"] == r.returncode
    return r.returncode, {c["id"]: c for c in out["checks"]}, out


def failed(checks):
    return {i for i, c in checks.items() if c["status"] == "fail"}


GOOD_LIMITS = (
    "Limit                     Soft Limit           Hard Limit           Units     \n"
    "Max open files            65536                65536                files     \n"
    "Max locked memory         unlimited            unlimited            bytes     \n")


def sysroot(tmp_path, fstype="xfs", options="rw,noatime", limits=GOOD_LIMITS):
    """doctor's flags for a node whose kernel files are fixtures: the test's
    directory mounted as `fstype` on the device it really has, good limits,
    a /dev/shm (a directory of the test's filesystem, so batches of 1 MiB:
    the shm check passes on any disk)."""
    sr = tmp_path / "sysroot"
    (sr / "proc" / "self").mkdir(parents=True, exist_ok=True)
    (sr / "dev" / "shm").mkdir(parents=True, exist_ok=True)
    dev = os.stat(tmp_path).st_dev
    (sr / "proc" / "self" / "mountinfo").write_text(
        "22 1 8:1 / / rw,relatime shared:1 - ext4 /dev/sda1 rw\n"
        "40 22 %d:%d / %s %s shared:9 - %s /dev/nvme0n1p1 rw\n"
        % (os.major(dev), os.minor(dev), os.path.realpath(tmp_path), options, fstype))
    (sr / "proc" / "self" / "limits").write_text(limits)
    return ["--sysroot", str(sr), "--batch-bytes", "1M"]


@pytest.fixture
def root(tmp_path):
    r = tmp_path / "root"
    r.mkdir()
    os.chmod(r, 0o700)
    return r


def test_a_good_node_exits_0(tmp_path, root):
    rc, checks, out = doctor(root, *sysroot(tmp_path))
    assert rc == 0 and failed(checks) == set(), out
    assert out["root"] == str(root)
    for c in checks.values():
        assert c["severity"] in ("blocking", "warning") and c["fix"] and "\n" not in c["fix"]
        assert c["status"] in ("pass", "skip")
    r = run("doctor", "--cache", str(root), *sysroot(tmp_path))
    assert r.returncode == 0 and r.stdout.splitlines()[-1] == "0 blocking, 0 warnings: exit 0"


def test_a_warning_exits_1_and_prints_its_fix(tmp_path, root):
    sr = sysroot(tmp_path, options="rw,relatime")
    rc, checks, _ = doctor(root, *sr)
    assert rc == 1 and failed(checks) == {"mount-noatime"}
    assert checks["mount-noatime"]["severity"] == "warning"
    assert "remount,noatime " + os.path.realpath(tmp_path) in checks["mount-noatime"]["fix"]
    lines = run("doctor", "--cache", str(root), *sr).stdout.splitlines()
    at = next(i for i, x in enumerate(lines) if x.startswith("warn   mount-noatime"))
    assert lines[at + 1].strip().startswith("fix: remount with noatime")
    assert lines[-1] == "0 blocking, 1 warning: exit 1"


def test_overlay_is_blocking_and_exits_2(tmp_path, root):
    rc, checks, _ = doctor(root, *sysroot(tmp_path, fstype="overlay"))
    assert rc == 2 and failed(checks) == {"fs-overlay"}
    assert checks["fs-overlay"]["severity"] == "blocking"
    assert "container's writable layer" in checks["fs-overlay"]["fix"]


def test_a_world_writable_root_is_blocking(tmp_path, root):
    os.chmod(root, 0o777)
    rc, checks, _ = doctor(root, *sysroot(tmp_path))
    assert rc == 2 and failed(checks) == {"root-open-to-others"}
    assert "writable by all users" in checks["root-open-to-others"]["value"]
    r = run("doctor", "--cache", str(root))  # the real node: still blocking
    assert r.returncode == 2 and r.stdout.startswith("BLOCK  root-open-to-others")
    os.chmod(root, 0o1777)  # sticky, as /tmp: accepted
    rc, checks, _ = doctor(root, *sysroot(tmp_path))
    assert rc == 0, failed(checks)


def test_a_group_shared_root_wants_group_write_and_setgid(tmp_path, root):
    sr = sysroot(tmp_path)
    os.chmod(root, 0o770)
    rc, checks, _ = doctor(root, *sr)  # not asked to share: others can write
    assert rc == 2 and failed(checks) == {"root-open-to-others"}
    rc, checks, _ = doctor(root, *sr, "--group-shared")  # no setgid
    assert rc == 1 and failed(checks) == {"root-group-shared"}
    assert "chmod 2770 " + str(root) in checks["root-group-shared"]["fix"]
    os.chmod(root, 0o2770)
    rc, checks, _ = doctor(root, *sr, "--group-shared")
    assert rc == 0, failed(checks)


def test_the_descriptor_limit_through_prlimit(root):
    rc, checks, _ = doctor(root, prefix=["prlimit", "--nofile=256:256"])
    assert checks["nofile"]["status"] == "fail" and rc >= 1
    assert checks["nofile"]["value"].startswith("soft 256, hard 256")
    if os.geteuid() != 0 and resource.getrlimit(resource.RLIMIT_NOFILE)[1] < 4096:
        pytest.skip("raising the descriptor limit to 4096 needs root")
    _, checks, _ = doctor(root, prefix=["prlimit", "--nofile=4096:4096"])  # the least that passes
    assert checks["nofile"]["status"] == "pass"


def test_the_memlock_limit_through_prlimit(root):
    rc, checks, _ = doctor(root, "--batch-bytes", "1M", prefix=["prlimit", "--memlock=65536"])
    assert checks["memlock"]["status"] == "fail" and rc >= 1
    assert "pinned batches need 3.0 MiB" in checks["memlock"]["value"]
    if os.geteuid() != 0 and resource.getrlimit(resource.RLIMIT_MEMLOCK)[1] < 4 << 20:
        pytest.skip("raising the memlock limit needs root")
    _, checks, _ = doctor(root, "--batch-bytes", "1M",
                          prefix=["prlimit", "--memlock=%d" % (4 << 20)])
    assert checks["memlock"]["status"] == "pass"


def test_shm_is_sized_from_workers_prefetch_and_batch(root):
    shm = os.statvfs("/dev/shm")
    size = shm.f_blocks * shm.f_frsize
    # 4 workers x prefetch 2 x batch: just over, then just under /dev/shm.
    over, under = size // 8 + 1, size // 8
    rc, checks, _ = doctor(root, "--workers", "4", "--batch-bytes", str(over))
    assert checks["shm-size"]["status"] == "fail" and rc >= 1
    assert "4 workers x prefetch 2 x batch" in checks["shm-size"]["value"]
    _, checks, _ = doctor(root, "--workers", "4", "--batch-bytes", str(under))
    assert checks["shm-size"]["status"] == "pass"


def test_bad_arguments_exit_2_with_a_message(tmp_path):
    f = tmp_path / "file"
    f.write_text("")
    r = run("doctor", "--cache", str(f))
    assert r.returncode == 2 and "not a directory" in r.stderr
    r = run("doctor", "--cache", str(tmp_path), "--batch-bytes", "lots")
    assert r.returncode == 2 and "--batch-bytes" in r.stderr


def test_a_missing_root_checks_its_parent(tmp_path):
    rc, checks, _ = doctor(tmp_path / "not" / "yet", *sysroot(tmp_path))
    assert "does not exist yet" in checks["root-access"]["value"] and rc == 0


def _in_mount_namespace(script):
    """Runs `script` (sh) as root in a mount namespace of its own, so its
    mounts vanish with it."""
    if os.geteuid() != 0:
        pytest.skip("mounting needs root")
    probe = subprocess.run(["unshare", "-m", "true"], capture_output=True)
    if probe.returncode != 0:
        pytest.skip("unshare -m: " + probe.stderr.decode().strip())
    return subprocess.run(["unshare", "-m", "sh", "-ec", script], capture_output=True, text=True)


@pytest.mark.root
def test_a_real_tmpfs_root_and_a_small_dev_shm(root):
    r = _in_mount_namespace(
        "mount -t tmpfs -o size=16m,mode=0700 tmpfs %s\n"
        "mount -t tmpfs -o size=1m tmpfs /dev/shm\n"
        "exec %s doctor --cache %s --json --workers 2 --batch-bytes 1M"
        % (root, shutil.which("ssdfeed"), root))
    assert r.stdout, r.stderr
    out = json.loads(r.stdout)
    checks = {c["id"]: c for c in out["checks"]}
    assert r.returncode == 2 and out["exit"] == 2
    assert checks["fs-memory"]["status"] == "fail"
    assert checks["fs-memory"]["value"].startswith("tmpfs on " + str(root))
    assert checks["shm-size"]["status"] == "fail"
    assert checks["shm-size"]["value"].startswith("/dev/shm 1.0 MiB, workers need 4.0 MiB")


def test_a_capacity_the_filesystem_cannot_hold_is_blocking(tmp_path, root):
    sr = sysroot(tmp_path)
    rc, checks, _ = doctor(root, *sr, "--capacity", "1G")
    assert rc == 0 and checks["space-capacity"]["status"] == "pass"
    rc, checks, _ = doctor(root, *sr, "--capacity", "1000000T")
    assert rc == 2 and failed(checks) == {"space-capacity"}
    assert checks["space-capacity"]["fix"].startswith("lower --capacity to ")
