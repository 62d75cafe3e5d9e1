import pathlib
import re
import shutil
import subprocess

import ssdfeed


def test_version_is_semver():
    assert re.fullmatch(r"\d+\.\d+\.\d+", ssdfeed.__version__)


def test_cli_on_path_matches_package():
    exe = shutil.which("ssdfeed")
    assert exe, "pip install . must put the ssdfeed command on PATH"
    out = subprocess.run([exe, "--version"], capture_output=True, text=True, check=True)
    assert ssdfeed.__version__ in out.stdout


def test_cli_failure_is_one_line_on_stderr():
    r = subprocess.run(["ssdfeed", "no-such-verb"], capture_output=True, text=True)
    assert r.returncode != 0
    assert r.stderr.strip().count("\n") == 0
    assert r.stderr.startswith("ssdfeed: ")


def test_typed_package_ships_its_stubs():
    # Without py.typed type checkers ignore _ssdfeed.pyi and see Any.
    from importlib import metadata, resources

    pkg = resources.files("ssdfeed")
    assert pkg.joinpath("py.typed").is_file()
    assert pkg.joinpath("_ssdfeed.pyi").is_file()
    meta = metadata.metadata("ssdfeed")
    assert meta["License"] == "Apache-2.0"
    assert {"torch", "tf", "test"} <= set(meta.get_all("Provides-Extra"))


def test_command_execs_the_binary_bundled_in_the_package(tmp_path):
    # The `ssdfeed` entry point runs ssdfeed/_bin/ssdfeed beside it (where
    # the binary wheel's repair points its RPATH at the vendored libraries),
    # and says which file it could not run when that is missing.
    import sys

    import _ssdfeed_cli

    pkg_bin = pathlib.Path(_ssdfeed_cli.__file__).parent / "ssdfeed" / "_bin" / "ssdfeed"
    assert pkg_bin.is_file()
    copy = tmp_path / "_ssdfeed_cli.py"
    shutil.copy(_ssdfeed_cli.__file__, copy)
    r = subprocess.run([sys.executable, str(copy), "--version"], capture_output=True, text=True)
    assert r.returncode == 127
    assert str(tmp_path / "ssdfeed" / "_bin" / "ssdfeed") in r.stderr
    assert r.stderr.startswith("ssdfeed: ")
