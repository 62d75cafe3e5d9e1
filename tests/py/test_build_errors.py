"""`pip install .` on a machine without a library the core links stops at
CMake's configure step with one message that names the Debian/Ubuntu
packages to install and points to the binary wheel, which needs none of
them (instead of a bare "not found" deep in a CMake trace)."""
import pathlib
import shutil
import subprocess

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]


def configure(tmp_path, *defines):
    cmake = shutil.which("cmake")
    if cmake is None:
        pytest.skip("no cmake")
    return subprocess.run(
        [cmake, "-S", str(ROOT), "-B", str(tmp_path / "b"), "-DSSDFEED_BUILD_TESTS=OFF",
         "-DSSDFEED_BUILD_BENCH=OFF", *defines],
        capture_output=True, text=True, timeout=300)


def test_a_missing_library_names_its_package_and_the_wheel(tmp_path):
    # As if prometheus-cpp-dev were not installed.
    r = configure(tmp_path, "-DCMAKE_DISABLE_FIND_PACKAGE_prometheus-cpp=ON")
    assert r.returncode != 0
    err = " ".join(r.stderr.split())
    assert "missing: prometheus-cpp-dev" in err, r.stderr
    assert "apt-get install prometheus-cpp-dev" in err, r.stderr
    assert "Debian 12 / Ubuntu" in err, r.stderr
    # The way out that needs no root and no -dev package.
    assert "binary wheel" in err and "pip install ssdfeed-" in err, r.stderr
