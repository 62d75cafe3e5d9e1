#!/usr/bin/env bash
# Runs README's two commands in a fresh Debian 12 minbase container, as a new
# user would: nothing installed but what `./dev demo` / `./dev test` install.
#   scripts/fresh-debian-trial.sh [REV] [TARGETS...]   (default: HEAD, "demo test")
# Needs mmdebstrap and buildah on the host. Pass the host's pip configuration
# through with PIP_MOUNTS="host:ctr ..." and PIP_* variables when pip needs it.
set -euo pipefail
cd "$(dirname "$0")/.."
rev=${1:-HEAD}; shift || true
targets=${*:-demo test}
image=${TRIAL_IMAGE:-debian-minbase}

if ! buildah inspect --type image "$image" >/dev/null 2>&1; then
  mmdebstrap --variant=minbase bookworm /tmp/ssdfeed-minbase.tar
  podman import /tmp/ssdfeed-minbase.tar "$image"
fi
git archive --prefix=ssdfeed/ -o /tmp/ssdfeed-trial-src.tar "$rev"
ctr=$(buildah from "$image")
trap 'buildah rm "$ctr" >/dev/null' EXIT
buildah add "$ctr" /tmp/ssdfeed-trial-src.tar /root/ >/dev/null

args=(--isolation chroot)
for m in ${PIP_MOUNTS:-}; do args+=(-v "$m:ro"); done
while IFS='=' read -r k v; do args+=(-e "$k=$v"); done < <(env | grep '^PIP_' || true)

run() { echo "== $(date -u +%T) $*"; buildah run "${args[@]}" "$ctr" -- bash -c "$*"; }
for t in $targets; do
  start=$(date +%s)
  run "cd /root/ssdfeed && ./dev $t"
  echo "== ./dev $t: $(($(date +%s) - start)) s"
done
# Nothing but apt packages outside the checkout: no pip for the system Python,
# nothing in its site directories.
run 'cd /root/ssdfeed && echo "venv: $(.venv/bin/pip list 2>/dev/null | wc -l) packages";
     ! python3 -m pip --version 2>/dev/null && ! ls /usr/local/lib/python3*/dist-packages/* 2>/dev/null &&
     echo "system python3: no pip, nothing in /usr/local"'
