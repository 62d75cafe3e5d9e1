"""The Dockerfile, read as text: what a build here cannot show (the registry
base, a builder other than the one installed). `make image-test` builds it."""

import pathlib
import re

ROOT = pathlib.Path(__file__).resolve().parents[2]
DOCKERFILE = (ROOT / "Dockerfile").read_text()


def instructions():
    """(INSTRUCTION, arguments) with continuation lines joined, comments dropped."""
    text = re.sub(r"^\s*#.*\n", "", DOCKERFILE, flags=re.M)
    text = re.sub(r"\\\n", " ", text)
    for line in text.splitlines():
        if line.strip():
            word, _, rest = line.strip().partition(" ")
            yield word.upper(), rest.strip()


def global_args():
    out = {}
    for word, rest in instructions():
        if word == "FROM":
            return out
        if word == "ARG":
            name, _, default = rest.partition("=")
            out[name] = default


def stages():
    """[(FROM arguments, [instructions...])]"""
    out = []
    for word, rest in instructions():
        if word == "FROM":
            out.append((rest, []))
        elif out:
            out[-1][1].append((word, rest))
    return out


def test_no_stage_is_chosen_through_a_variable():
    """`FROM wheels-${WHEELS}`: podman 4.3 does not resolve a stage name made
    from an ARG's default, so the plain `podman build -t ssdfeed .` failed.
    A FROM may use a variable only for the base image, an ARG declared
    before the first FROM; every other FROM names an image or a stage."""
    names = set()
    for spec, _ in stages():
        image, _, alias = spec.partition(" AS ")
        variables = re.findall(r"\$\{?(\w+)", image)
        if variables:
            assert image == "${BASE}", spec
        else:
            assert image in names or "/" in image or ":" in image, spec
        if alias:
            names.add(alias.strip())


def test_base_is_pinned_by_digest():
    base = global_args()["BASE"]
    assert re.fullmatch(r"docker\.io/library/debian:bookworm-slim@sha256:[0-9a-f]{64}", base), base


def test_runtime_stage_has_no_pip_and_no_build_tools():
    _, runtime = stages()[-1]
    text = " ".join(rest for _, rest in runtime)
    words = set(re.findall(r"[\w.+-]+", text))
    assert not words & {"python3-pip", "python3-venv", "python3-dev", "build-essential", "cmake"}, words
    # pip is named only where its absence is checked.
    pip_lines = [rest for _, rest in runtime if "pip" in rest]
    assert len(pip_lines) == 1 and "! /opt/ssdfeed/bin/python -c 'import pip'" in pip_lines[0], pip_lines
    assert "pip" not in re.sub(r"! [^&]*pip[^&]*", "", pip_lines[0]), pip_lines
    copies = [rest for word, rest in runtime if word == "COPY"]
    assert copies == ["--from=build /opt/ssdfeed/ /opt/ssdfeed/"]


def test_the_image_installs_the_manylinux_wheel_and_compiles_nothing():
    """The image installs the wheel `./dev wheel` wrote into dist/ (every
    library inside it): no compiler and no -dev package in any stage, pip
    offline (--no-index) from the build context, and the runtime stage gets
    Python, numpy and the CA bundle from Debian, not the core's libraries."""
    text = " ".join(rest for _, instrs in stages() for _, rest in instrs)
    words = set(re.findall(r"[\w.+-]+", text))
    assert not words & {"build-essential", "cmake", "ninja-build", "g++", "gcc"}, words
    assert not [w for w in words if w.endswith("-dev")], words
    [(spec, build)] = [s for s in stages() if s[0].endswith(" AS build")]
    assert ("COPY", "dist/ /wheels/") in build
    installs = [rest for word, rest in build if word == "RUN" and " install " in rest and "pip" in rest]
    assert len(installs) == 1 and "--no-index" in installs[0] and "--find-links /wheels" in installs[0], installs
    _, runtime = stages()[-1]
    [apt] = [rest for word, rest in runtime if word == "RUN" and "apt-get install" in rest]
    packages = set(re.findall(r"[\w.+-]+", apt.split("--no-install-recommends", 1)[1].split(">", 1)[0]))
    assert packages == {"ca-certificates", "python3", "python3-numpy"}, packages


def test_the_cache_path_is_no_volume():
    """A VOLUME at the cache path made buildah 1.28 (Debian 12's) mount the
    image's own /var/cache/ssdfeed (uid 10001, 0700) over the host directory
    given with -v at that path in about one run in four: that container's
    warm-up failed with "lstat /var/cache/ssdfeed/entries: Permission
    denied". The user's mount is the only thing at the cache path."""
    volumes = [rest for word, rest in instructions() if word == "VOLUME"]
    assert volumes == [], volumes
    env = " ".join(rest for word, rest in instructions() if word == "ENV")
    assert "SSDFEED_CACHE=/var/cache/ssdfeed" in env
