#!/usr/bin/env bash
# Installs every system and Python package the build, tests and demo need.
# Idempotent and quiet when all is there; safe on a fresh Debian 12 machine.
set -euo pipefail

APT_PACKAGES=(
  build-essential pkg-config ninja-build
  libturbojpeg0-dev libspng-dev libopencv-imgproc-dev liburing-dev libxxhash-dev
  libarchive-dev libcli11-dev nlohmann-json3-dev
  prometheus-cpp-dev libgtest-dev libgmock-dev libbenchmark-dev
  clang libclang-rt-14-dev clang-format
  libcurl4-openssl-dev libssl-dev
)
PIP_PACKAGES=(
  "scikit-build-core>=0.10" "nanobind>=2.0" numpy pillow pytest
)
# Frameworks for the interop tests and examples (torch 2.13.0 is the CPU build
# that lies on this machine's disk; other versions download gigabytes).
PIP_TEST_PACKAGES=("torch==2.13.0" tensorflow-cpu webdataset)
PIP_TEST_PACKAGES+=("moto[server]" boto3)  # a real S3 server for the s3:// tests

missing=()
for p in "${APT_PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  SUDO=""
  [ "$(id -u)" -eq 0 ] || SUDO=sudo
  echo "deps: installing ${missing[*]}"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}" >/dev/null
fi

PY=${PYTHON:-python3}
want=("${PIP_PACKAGES[@]}")
[ "${1:-}" = "--with-frameworks" ] && want+=("${PIP_TEST_PACKAGES[@]}")
need=()
for spec in "${want[@]}"; do
  name=${spec%%[<>=[]*}
  $PY -m pip show -q "$name" >/dev/null 2>&1 || need+=("$spec")
done
if ((${#need[@]})); then
  echo "deps: pip installing ${need[*]}"
  $PY -m pip install -q --disable-pip-version-check --root-user-action=ignore "${need[@]}"
fi
