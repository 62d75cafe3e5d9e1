#!/usr/bin/env bash
# Installs the Debian 12 packages that building ssdfeed needs: compilers,
# ccache (the Makefile puts it under every build), CMake, Python headers and
# venv, and the libraries the core links.
# Python packages are not installed here: the Makefile puts them into the
# project's virtual environment (.venv), never into the system Python.
#
#   scripts/deps.sh          build, test and demo (library, CLI, Python package)
#   scripts/deps.sh --dev    also clang, libFuzzer runtime, clang-format (make asan/fuzz/format)
#   scripts/deps.sh --test   also prometheus (server + promtool) and chromium (headless, to
#                            open the bench report page) for the tests
#
# Idempotent and quiet when everything is there; runs apt-get as root or via sudo.
set -euo pipefail

APT_PACKAGES=(
  ca-certificates build-essential cmake ninja-build pkg-config ccache
  python3 python3-dev python3-venv
  libturbojpeg0-dev libspng-dev libopencv-imgproc-dev liburing-dev libxxhash-dev
  libarchive-dev libzstd-dev libcli11-dev nlohmann-json3-dev libgtest-dev libgmock-dev
  prometheus-cpp-dev libcurl4-openssl-dev libssl-dev
)
DEV_PACKAGES=(clang libclang-rt-14-dev clang-format)
# `make test`: a real Prometheus and promtool for the alert-rule and dashboard tests,
# and a real browser (headless) that opens the bench report page.
TEST_PACKAGES=(prometheus chromium)

want=("${APT_PACKAGES[@]}")
for arg in "$@"; do
  case "$arg" in
    --dev) want+=("${DEV_PACKAGES[@]}") ;;
    --test) want+=("${TEST_PACKAGES[@]}") ;;
  esac
done

missing=()
for p in "${want[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
((${#missing[@]})) || exit 0

SUDO=""
if [ "$(id -u)" -ne 0 ]; then
  command -v sudo >/dev/null || { echo "deps: need root (or sudo) to install: ${missing[*]}" >&2; exit 1; }
  SUDO=sudo
fi
echo "deps: apt-get installing ${missing[*]}"
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
