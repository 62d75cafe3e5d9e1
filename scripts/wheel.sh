#!/usr/bin/env bash
# Binary wheels that install anywhere with glibc >= 2.31 (Ubuntu 20.04+,
# Debian 11+, RHEL 9), with no compiler and no -dev package: `./dev wheel`.
#
#   scripts/wheel.sh build          wheels into dist/ (make wheel)
#   scripts/wheel.sh test [all]     installs them as uid 1000 into bare
#                                   minbase images (make wheel-test; see
#                                   scripts/wheel-test.sh)
#
# The build runs in a Debian 11 (bullseye) root that mmdebstrap makes once
# under build-wheel/bullseye (a second run reuses it, and the libraries built
# there, and its ccache), entered with chroot in a private mount namespace
# (the mounts vanish with it); scripts/wheel-build.sh does the work inside.
# Needs root (mmdebstrap, chroot), as `make image` does.
set -euo pipefail
cd "$(dirname "$0")/.."
top=$PWD
root=${WHEEL_ROOT:-$top/build-wheel/bullseye}
mirror=${DEBIAN_MIRROR:-http://deb.debian.org/debian}
log() { echo "== $(date -u +%T) $*"; }

# What the build needs from bullseye: the compiler, Python 3.9 headers and
# venv, and the -dev packages of the libraries it has in a usable version.
ROOT_PACKAGES=(build-essential pkg-config ccache dpkg-dev ca-certificates python3-dev python3-venv
  libturbojpeg0-dev libxxhash-dev libarchive-dev libzstd-dev libcurl4-openssl-dev libssl-dev
  libopencv-imgproc-dev nlohmann-json3-dev zlib1g-dev libcivetweb-dev civetweb)

make_root() {
  [[ -e $root/.ssdfeed-root ]] && return
  log "making the Debian 11 build root $root (mmdebstrap --variant=minbase bullseye)"
  rm -rf "$root.tmp"
  mkdir -p "$(dirname "$root")"
  local inc
  inc=$(IFS=,; echo "${ROOT_PACKAGES[*]}")
  # bookworm's and trixie's deb-src: the source packages of what bullseye
  # lacks (libraries; CPython 3.11 and 3.13).
  mmdebstrap --variant=minbase --include="$inc" bullseye "$root.tmp" \
    "deb $mirror bullseye main" "deb-src $mirror bookworm main" "deb-src $mirror trixie main" >"$root.log" 2>&1 ||
    { tail -20 "$root.log"; exit 1; }
  touch "$root.tmp/.ssdfeed-root"
  mv "$root.tmp" "$root"
}

# The host's resolver, pip configuration and CA bundle (pip inside reaches
# the same index as here), and the local directories that configuration
# names, mounted read-only.
pip_setup() {
  cp /etc/resolv.conf "$root/etc/resolv.conf"
  local conf f d
  # Each file to its place (the root's user is root, HOME=/root); the CA
  # bundle is passed as PIP_CERT instead of the host path a config may name.
  for f in /etc/pip.conf "$HOME/.config/pip/pip.conf" "$HOME/.pip/pip.conf"; do
    d=$root${f/#$HOME//root}
    rm -f "$d"
    [[ -f $f ]] || continue
    mkdir -p "$(dirname "$d")"
    grep -v -E '^ *cert *=' "$f" >"$d" || true
  done
  conf=$(cat /etc/pip.conf "$HOME/.config/pip/pip.conf" "$HOME/.pip/pip.conf" 2>/dev/null || true)
  cp /etc/ssl/certs/ca-certificates.crt "$root/etc/ssdfeed-host-ca.crt"
  for d in $(printf '%s\n' "$conf" | grep -oE '(file://)?/[^ ]+' | sed 's#^file://##') ${PIP_FIND_LINKS:-}; do
    d=${d%/}; d=${d%/simple}
    [[ -d $d ]] && echo "$d"
  done | sort -u
}

in_root() {  # COMMAND...
  local dirs
  dirs=$(pip_setup | paste -sd' ')
  mkdir -p "$root/src"
  unshare -m --propagation private bash -euo pipefail -c '
    root=$1 top=$2 dirs=$3; shift 3
    mount -t proc proc "$root/proc"
    mount --rbind /dev "$root/dev"
    mount --bind "$top" "$root/src"
    for d in $dirs; do mkdir -p "$root$d"; mount --bind -o ro "$d" "$root$d"; done
    exec chroot "$root" env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root LANG=C.UTF-8 \
      JOBS="${JOBS:-2}" WHEEL_PYTHONS="${WHEEL_PYTHONS:-3.9 3.11 3.13}" \
      WHEEL_BUILD_DIR="${WHEEL_BUILD_DIR:-build-wheel/py}" PIP_CERT=/etc/ssdfeed-host-ca.crt PIP_DEFAULT_TIMEOUT=180 "$@"' \
    in_root "$root" "$top" "$dirs" "$@"
}

build() {
  [[ $(id -u) -eq 0 ]] || { echo "wheel: needs root (mmdebstrap, chroot)" >&2; exit 1; }
  local t0=$SECONDS
  make_root
  rm -f dist/ssdfeed-*-manylinux*.whl
  # A copy runs: bash reads a script as it goes, and an edit to the tree's
  # copy during a long build would change what the rest of the run does.
  install -m 0755 scripts/wheel-build.sh "$root/usr/local/bin/ssdfeed-wheel-build"
  in_root /usr/local/bin/ssdfeed-wheel-build
  local w
  for w in dist/ssdfeed-*-manylinux*.whl; do
    log "$w: $(du -m "$w" | cut -f1) MiB"
  done
  log "wheels built in $((SECONDS - t0)) s"
}

case ${1:-build} in
  build) build ;;
  test) shift; bash scripts/wheel-test.sh "$@" ;;
  *) echo "usage: $0 build|test [all]" >&2; exit 2 ;;
esac
