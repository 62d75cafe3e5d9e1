"""The image's build stage installs every library package scripts/deps.sh
installs for the build (the two lists are kept by hand; this keeps them
together: a library added to the core and not to the Dockerfile fails here,
not in `make image-test`)."""
import pathlib
import re

ROOT = pathlib.Path(__file__).resolve().parents[2]
TEST_ONLY = {"libgtest-dev", "libgmock-dev"}


def deps_sh_libraries():
    text = (ROOT / "scripts" / "deps.sh").read_text()
    block = re.search(r"APT_PACKAGES=\((.*?)\)", text, re.S).group(1)
    words = re.sub(r"#.*", "", block).split()
    return {w for w in words if w.startswith("lib") and w.endswith("-dev")} - TEST_ONLY


def test_dockerfile_build_stage_has_every_library_of_deps_sh():
    dockerfile = (ROOT / "Dockerfile").read_text()
    build_stage = dockerfile.split(" AS build\n", 1)[1].split("\nFROM ", 1)[0]
    missing = sorted(p for p in deps_sh_libraries() if p not in build_stage.replace('"', " ").split())
    assert not missing, f"Dockerfile's build stage lacks {missing} (scripts/deps.sh has them)"
