#!/usr/bin/env bash
# Portable entries: `ssdfeed cache export` / `import` throughput next to tar
# of the same entry directory and next to preparing the entry from the origin.
#   bench/transfer_bench.sh WORKDIR [COUNT] [RESIZE_SHORT]
# Needs: the `ssdfeed` command on PATH (`pip install .`, or `make build` and
# PATH=build:$PATH), tar and zstd. Files stay in the page cache (a fresh
# write of every byte, read back from memory): this measures the CPU side
# (checks, hashing, tar, zstd), not the disk.
set -euo pipefail
work=$1
count=${2:-2000}
short=${3:-256}
rm -rf "$work" && mkdir -p "$work"
ssdfeed make-dataset "$work/data" --count "$count" >/dev/null
secs() { local t0 t1; t0=$(date +%s.%N); "$@" >/dev/null; t1=$(date +%s.%N); echo "$t1 - $t0" | bc; }
prep=$(secs ssdfeed warm --source "folder:$work/data" --cache "$work/a" --resize-short "$short" \
  --quiet)
entry=$(ssdfeed cache ls --json --cache "$work/a" | sed -n 's/.*"entry": "\([0-9a-f]*\)".*/\1/p')
bytes=$(du -sb "$work/a/entries/$entry" | cut -f1)
mbs() { echo "scale=0; $bytes / 1000000 / $1" | bc; }
row() { printf '%-38s %8.2f s %7s MB/s\n' "$1" "$2" "$(mbs "$2")"; }
echo "entry: $count samples, short side $short, $((bytes / 1000000)) MB on disk"
row "prepare from origin (ssdfeed warm)" "$prep"
row "export to file" "$(secs ssdfeed cache export "$entry" --cache "$work/a" --to "$work/e.tar" \
  2>/dev/null)"
row "export --zstd to file" "$(secs ssdfeed cache export "$entry" --zstd --cache "$work/a" \
  --to "$work/e.tar.zst" 2>/dev/null)"
row "tar cf of the entry directory" "$(secs tar cf "$work/t.tar" -C "$work/a/entries" "$entry")"
row "tar cf | zstd of the entry directory" "$(secs sh -c "tar cf - -C '$work/a/entries' $entry \
  | zstd -q -o '$work/t.tar.zst'")"
row "import file" "$(secs ssdfeed cache import "$work/e.tar" --cache "$work/b")"
row "import file --check-origin 0" "$(secs ssdfeed cache import "$work/e.tar" --check-origin 0 \
  --cache "$work/b0")"
row "import zstd file" "$(secs ssdfeed cache import "$work/e.tar.zst" --cache "$work/c" \
  )"
mkdir -p "$work/x"
row "tar xf of the entry directory" "$(secs tar xf "$work/t.tar" -C "$work/x")"
row "export | import (pipe)" "$(secs sh -c "ssdfeed cache export $entry --cache '$work/a' \
  2>/dev/null | ssdfeed cache import - --cache '$work/d' >/dev/null")"
ls -l "$work/e.tar" "$work/e.tar.zst" "$work/t.tar.zst" | awk '{print $5, $9}'
