"""The wheel build (which the container image installs: nothing is compiled
in the image) has every library package scripts/deps.sh installs for a
source build. The lists are kept by hand; this keeps them together: a
library added to the core and not to the wheel build fails here, not in
`./dev wheel` on a fresh machine."""
import pathlib
import re

ROOT = pathlib.Path(__file__).resolve().parents[2]
TEST_ONLY = {"libgtest-dev", "libgmock-dev"}
# Packages whose Debian 11 version is missing or too old: scripts/wheel-build.sh
# builds them static from Debian 12's source package and logs "vendored: NAME".
VENDORED = {"libspng-dev": "libspng", "liburing-dev": "liburing", "libcli11-dev": "CLI11",
            "prometheus-cpp-dev": "prometheus-cpp"}


def _array(path, name):
    text = (ROOT / path).read_text()
    block = re.search(name + r"=\((.*?)\)", text, re.S).group(1)
    return set(re.sub(r"#.*", "", block).split())


def deps_sh_libraries():
    words = _array("scripts/deps.sh", "APT_PACKAGES")
    return {w for w in words
            if (w.startswith("lib") or w.startswith("prometheus-cpp")) and w.endswith("-dev")
            } - TEST_ONLY


def test_wheel_build_has_every_library_of_deps_sh():
    root_packages = _array("scripts/wheel.sh", "ROOT_PACKAGES")
    vendored = set(re.findall(r'log "vendored: ([\w.+-]+)',
                              (ROOT / "scripts" / "wheel-build.sh").read_text()))
    missing = sorted(p for p in deps_sh_libraries()
                     if p not in root_packages and VENDORED.get(p) not in vendored)
    assert not missing, (f"scripts/wheel.sh's build root neither installs nor vendors {missing} "
                         "(scripts/deps.sh has them)")


def test_the_image_compiles_nothing():
    lines = (ROOT / "Dockerfile").read_text().splitlines()
    dockerfile = "\n".join(line for line in lines if not line.lstrip().startswith("#"))
    for tool in ("build-essential", "cmake", "g++", "-dev "):
        assert tool not in dockerfile, f"Dockerfile installs {tool!r}: the image takes the wheel"
