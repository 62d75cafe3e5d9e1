#!/usr/bin/env bash
# Builds the container image, and tests it: two containers warm the same
# dataset into one fresh host cache directory, mounted where the image keeps
# its cache (/var/cache/ssdfeed), at the same time: once as one uid, once as
# two uids of one group (--group-shared). Each sample must be prepared about
# once and `cache verify` must be clean.
#   scripts/image.sh build [TAG]     (make image)
#   scripts/image.sh test  [TAG]     (make image-test: builds first, the way
#                                     docs/deploy.md shows, then tests)
#   scripts/image.sh check [TAG]     (the test alone, on an image built before)
# The image installs the manylinux wheel from dist/ (Dockerfile): a build
# here makes the cp311 one first when dist/ has none (`./dev wheel`, root),
# and compiles nothing in the image. Needs podman and buildah (root, or
# rootless with subuids). Runs containers with `buildah run --isolation
# chroot`, which works where `podman run` is not permitted (CI).
set -euo pipefail
cd "$(dirname "$0")/.."
cmd=${1:-build}
tag=${2:-${IMAGE:-localhost/ssdfeed:latest}}
base=${BASE:-localhost/debian-minbase}

log() { echo "== $(date -u +%T) $*"; }

make_base() {
  buildah inspect --type image "$base" >/dev/null 2>&1 && return
  [[ $base == localhost/* ]] || return 0  # a registry image: podman pulls it
  log "making $base with mmdebstrap (Debian 12 minbase)"
  mmdebstrap --variant=minbase bookworm /tmp/ssdfeed-minbase.tar
  podman import /tmp/ssdfeed-minbase.tar "$base"
  rm -f /tmp/ssdfeed-minbase.tar
}

# The wheel for the image's CPython (Debian 12's 3.11) in dist/, or made
# now: only that one, as the image needs no other.
need_wheel() {
  compgen -G "dist/ssdfeed-*-cp311-cp311-manylinux*.whl" >/dev/null && return
  log "no cp311 manylinux wheel in dist/: ./dev wheel (CPython 3.11 only)"
  WHEEL_PYTHONS=3.11 JOBS=${JOBS:-2} bash scripts/wheel.sh build
}

run_build() {
  log "podman build $* ."
  local t0=$SECONDS blog
  # A log of this build's own (other builds on the machine may run at once).
  blog=$(mktemp /tmp/ssdfeed-image-build.XXXXXX.log)
  podman build "$@" . >"$blog" 2>&1 || { tail -40 "$blog"; exit 1; }
  rm -f "$blog"
  log "built $tag in $((SECONDS - t0)) s ($(podman image inspect --format '{{.Size}}' "$tag") bytes)"
}

build() {
  make_base
  need_wheel
  run_build --isolation chroot --build-arg "BASE=$base" -t "$tag"
}

# `podman build -t TAG .` as docs/deploy.md shows it. What is added is the
# machine's, not the build's: BASE, as no registry may be at hand here (the
# default is a registry image pinned by digest), and chroot isolation through
# the environment (BUILDAH_ISOLATION, so the command line stays as
# documented), for where the OCI runtime is not permitted (CI).
plain_build() {
  make_base
  need_wheel
  local args=(-t "$tag")
  [[ $base == docker.io/library/debian:bookworm-slim* ]] || args+=(--build-arg "BASE=$base")
  BUILDAH_ISOLATION=${BUILDAH_ISOLATION:-chroot} run_build "${args[@]}"
}

# Containers are started by `buildah run` in the background; each waits at a
# barrier (a file in a shared scratch directory) until all have started, so
# their warm-ups overlap whatever the runtime's start-up time.
start_at_barrier() {  # NAME CTR USER ARGS...
  local name=$1 ctr=$2 user=$3
  shift 3
  "${run[@]}" -v "$work/barrier:/barrier" --user "$user" "$ctr" -- sh -c \
    'touch /barrier/ready-$1; while [ ! -e /barrier/go ]; do sleep 0.05; done; shift; exec "$@"' \
    sh "$name" "$@" >"$work/$name.json" &
  pids+=($!)
}

release_barrier() {  # COUNT
  until [[ $(find "$work/barrier" -name 'ready-*' | wc -l) -ge $1 ]]; do
    for p in "${pids[@]}"; do kill -0 "$p" 2>/dev/null || { wait "$p" || true; break 2; }; done
    sleep 0.05
  done
  touch "$work/barrier/go"
}

# Two warms of one dataset into one host directory at once: USER_A and
# USER_B, extra warm flags after them.
warm_pair() {  # LABEL HOST_DIR USER_A USER_B [FLAGS...]
  local label=$1 host=$2 ua=$3 ub=$4 rc=0 p
  shift 4
  rm -rf "$work/barrier" && mkdir -m 0777 "$work/barrier"
  run=(buildah run --isolation chroot -v "$work/data:/data:ro" -v "$host:/var/cache/ssdfeed")
  # One worker each: two warms of all cores let the first to start starve
  # the other's start-up on 2 cores (30 of 1000 prepared by one, once).
  local warm=(ssdfeed warm --source folder:/data/ds --resize-short 128 --workers 1 --json --quiet
    "$@")
  log "$label: warm as $ua and $ub at the same time into a fresh $(stat -c 'uid %u gid %g mode %a' "$host") directory"
  pids=()
  start_at_barrier "$label-a" "${ctrs[0]}" "$ua" "${warm[@]}"
  start_at_barrier "$label-b" "${ctrs[1]}" "$ub" "${warm[@]}"
  release_barrier 2
  for p in "${pids[@]}"; do wait "$p" || rc=$?; done
  cat "$work/$label-a.json" "$work/$label-b.json"
  ((rc == 0)) || { echo "image-test: $label: a warm failed (exit $rc)" >&2; exit 1; }
  python3 - "$n" "$work/$label-a.json" "$work/$label-b.json" <<'PY'
import json, sys
n = int(sys.argv[1])
runs = [json.load(open(p)) for p in sys.argv[2:]]
prepared = sum(r["prepared"] for r in runs)
assert all(r["samples_present"] == n for r in runs), runs
print("prepared %d + %d = %d for %d samples (%.2fx)" % (runs[0]["prepared"], runs[1]["prepared"], prepared, n, prepared / n))
assert prepared <= 1.3 * n, "samples prepared more than about once"
# Not asserted: how the work splits. Both start at one barrier, yet one
# container's start-up now and then lags the other's by seconds (31 of 1000
# prepared, once in 16 pairs, with one worker each and 2 s warms), and a
# later one serving all from the cache is correct too.
if min(r["prepared"] for r in runs) == 0:
    print("note: one warm prepared nothing (it started after the other had done)")
PY
  log "$label: cache verify as $ub"
  "${run[@]}" --user "$ub" "${ctrs[1]}" -- ssdfeed cache verify "$@"
  local owners
  owners=$(find "$host/entries" -name 'seg-*' -printf '%u\n' | sort -u | paste -sd' ')
  log "$label: segment files owned by: $owners"
}

# The host cache is mounted on /var/cache/ssdfeed, as docs/deploy.md shows:
# the image declares no VOLUME there. When it did, buildah 1.28 mounted the
# image's own directory over the host's there in about one `buildah run` in
# four, and in every run of this test (its third mount, the barrier).
image_test() {
  n=${IMAGE_TEST_SAMPLES:-1000}
  local t0=$SECONDS
  # Globals: the EXIT trap runs after this function returned.
  work=$(mktemp -d /tmp/ssdfeed-image-test.XXXXXX)
  ctrs=()
  trap 'for c in "${ctrs[@]}"; do buildah rm "$c" >/dev/null 2>&1 || true; done; rm -rf "$work"' EXIT
  mkdir -p "$work/data" "$work/one-uid" "$work/group"
  chmod 0755 "$work" "$work/data"
  # A fresh host directory of one user (0755), and a team's (setgid 2770).
  chown 1000:1000 "$work/one-uid" && chmod 0755 "$work/one-uid"
  chown 20001:20000 "$work/group" && chmod 2770 "$work/group"
  for i in 0 1; do ctrs+=("$(buildah from "$tag")"); done
  log "dataset: $n samples (made in the image as uid 0)"
  # Photos of 640-960 px make a warm take seconds (at 200-400 px it took
  # 0.5 s, and one container's start came within 14 ms of missing the
  # other's whole warm): the two warms overlap by far more than the start
  # skew, so "both prepared some" holds every run.
  buildah run --isolation chroot -v "$work/data:/data" --user 0:0 "${ctrs[0]}" -- \
    ssdfeed make-dataset /data/ds --count "$n" --classes 10 --min-side 640 --max-side 960 >/dev/null
  chmod -R a+rX "$work/data"
  # The runtime stage has no pip (the Dockerfile checks it too).
  if buildah run --isolation chroot --user 0:0 "${ctrs[0]}" -- python3 -c 'import pip' >/dev/null 2>&1; then
    echo "image-test: pip is in the image" >&2
    exit 1
  fi
  warm_pair one-uid "$work/one-uid" 1000:1000 1000:1000
  warm_pair group "$work/group" 20001:20000 20002:20000 --group-shared
  "${run[@]}" --user 20001:20000 "${ctrs[0]}" -- ssdfeed cache ls
  log "image-test passed in $((SECONDS - t0)) s"
}

case $cmd in
  build) build ;;
  test) plain_build; image_test ;;
  check) image_test ;;
  *) echo "usage: $0 build|test|check [TAG]" >&2; exit 2 ;;
esac
