#!/usr/bin/env bash
# The wheels in dist/ on bare Debian images: `./dev wheel-test [all|RELEASE...]`.
#
# Each image is Debian minbase with only python3 and python3-venv (made with
# mmdebstrap, kept as localhost/ssdfeed-wheeltest-RELEASE): no compiler, no
# -dev package. As uid 1000, in a venv: `pip install --no-index` of the wheel
# for that release's CPython and numpy (a wheelhouse made here, on the host),
# then `ssdfeed make-dataset`, `ssdfeed warm`, `ssdfeed cache verify`, and a
# Python Loader epoch in which every sample must be a cache hit.
#
#   default: every release whose CPython a wheel in dist/ serves, of
#            bullseye (3.9), bookworm (3.11), trixie (3.13)
#   all:     all three; a release without a wheel for its CPython fails
# Containers run with `buildah run --isolation chroot` (podman run is not
# permitted in CI). Needs root, buildah, podman (for import) and mmdebstrap.
set -euo pipefail
cd "$(dirname "$0")/.."
top=$PWD
log() { echo "== $(date -u +%T) wheel-test: $*"; }
declare -A PY=([bullseye]=3.9 [bookworm]=3.11 [trixie]=3.13)

# The wheel that serves CPython X.Y: cpXY, else a stable-ABI one (abi3) whose
# floor is at or below X.Y.
wheel_for() {  # X.Y
  local v=${1/./} w floor
  for w in dist/ssdfeed-*-cp"$v"-cp"$v"-manylinux*.whl; do
    [[ -e $w ]] && { echo "$w"; return; }
  done
  for w in dist/ssdfeed-*-abi3-manylinux*.whl; do
    [[ -e $w ]] || continue
    floor=$(basename "$w" | sed -E 's/.*-cp3([0-9]+)-abi3-.*/\1/')
    ((${v#3} >= floor)) && { echo "$w"; return; }
  done
  return 0
}

make_image() {  # RELEASE
  local img=localhost/ssdfeed-wheeltest-$1 tar
  buildah inspect --type image "$img" >/dev/null 2>&1 && return
  log "making $img (mmdebstrap --variant=minbase $1, python3 python3-venv)"
  tar=$(mktemp /tmp/ssdfeed-wheeltest.XXXXXX.tar)
  mmdebstrap -q --variant=minbase --include=python3,python3-venv "$1" "$tar" \
    "deb ${DEBIAN_MIRROR:-http://deb.debian.org/debian} $1 main"
  podman import -q "$tar" "$img" >/dev/null
  rm -f "$tar"
}

# numpy for CPython X.Y as a binary wheel, from the host's index: any
# manylinux up to 2.28 (every image here has glibc 2.31 or newer; numpy's
# newest wheels are manylinux_2_28).
wheelhouse() {  # X.Y DIR
  python3 -m pip download -q --only-binary=:all: --python-version "$1" \
    --platform manylinux2014_x86_64 --platform manylinux_2_17_x86_64 \
    --platform manylinux_2_27_x86_64 --platform manylinux_2_28_x86_64 -d "$2" numpy
}

# What runs in the container, as uid 1000 with HOME in the scratch directory.
# shellcheck disable=SC2016
INSIDE='set -eu
export HOME=/work/home; mkdir -p "$HOME"; cd /work
for c in cc gcc c++ g++ clang; do
  if command -v $c >/dev/null 2>&1; then echo "a compiler is in the image: $c" >&2; exit 1; fi
done
t0=$(date +%s.%N)
export T0=$t0
python3 -m venv venv
venv/bin/pip install -q --no-index --find-links /wheels ssdfeed
. venv/bin/activate
echo "installed in $(python3 -c "import sys; print(round($(date +%s.%N) - $t0, 1))") s: $(ssdfeed --version)"
ssdfeed make-dataset ds --count 300 --classes 5 >/dev/null
ssdfeed warm --source folder:ds --resize-short 64 --cache cache --json --quiet
ssdfeed cache verify --cache cache
python3 - <<PY
import os, time
import ssdfeed
loader = ssdfeed.Loader("folder:ds", cache="cache", prepare=ssdfeed.Prepare(resize_short=64),
                        augment=ssdfeed.RandomResizedCrop(48), batch_size=32, shuffle=True)
n = 0
for _, labels in loader:
    if n == 0:
        print("from a bare image (wheel at hand) to the first served batch: %.1f s" % (time.time() - float(os.environ["T0"])))
    n += len(labels)
s = loader.stats()
print("Loader epoch: %d samples, %d cache hits, %d misses" % (n, s["cache_hits"], s["cache_misses"]))
assert n == loader.num_samples == 300, n
assert s["cache_hits"] == n and s["cache_misses"] == 0, s
PY
echo "from a bare image (wheel at hand) to a served epoch: $(python3 -c "import sys; print(round($(date +%s.%N) - $t0, 1))") s"'

test_release() {  # RELEASE
  local rel=$1 py=${PY[$1]} wheel work ctr rc=0
  wheel=$(wheel_for "$py")
  if [[ -z $wheel ]]; then
    echo "wheel-test: $rel: no wheel in dist/ serves its CPython $py" >&2
    return 1
  fi
  make_image "$rel"
  work=$(mktemp -d /tmp/ssdfeed-wheeltest.XXXXXX)
  mkdir -p "$work/wheels" "$work/scratch"
  cp "$wheel" "$work/wheels/"
  wheelhouse "$py" "$work/wheels"
  chown 1000:1000 "$work/scratch"
  chmod -R a+rX "$work/wheels"
  ctr=$(buildah from "localhost/ssdfeed-wheeltest-$rel")
  log "$rel (CPython $py): $(basename "$wheel") as uid 1000"
  local t0=$SECONDS
  buildah run --isolation chroot --user 1000:1000 -v "$work/wheels:/wheels:ro" \
    -v "$work/scratch:/work" "$ctr" -- sh -c "$INSIDE" || rc=$?
  buildah rm "$ctr" >/dev/null
  rm -rf "$work"
  ((rc == 0)) || { echo "wheel-test: $rel failed (exit $rc)" >&2; return 1; }
  log "$rel passed in $((SECONDS - t0)) s"
}

releases=()
case ${1:-} in
  "") for r in bullseye bookworm trixie; do
        [[ -n $(wheel_for "${PY[$r]}") ]] && releases+=("$r")
      done
      ((${#releases[@]})) || { echo "wheel-test: no wheel in dist/ (./dev wheel makes them)" >&2; exit 1; } ;;
  all) releases=(bullseye bookworm trixie) ;;
  *) releases=("$@") ;;
esac
rc=0
for r in "${releases[@]}"; do test_release "$r" || rc=1; done
exit $rc
