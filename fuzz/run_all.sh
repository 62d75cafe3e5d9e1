#!/usr/bin/env bash
# Runs every fuzz target for a few seconds from its seed corpus.
# usage: fuzz/run_all.sh BUILD_DIR SECONDS
set -euo pipefail
build=$1
secs=${2:-20}
here=$(cd "$(dirname "$0")" && pwd)
corpus_root=$(mktemp -d)
trap 'rm -rf "$corpus_root"' EXIT
# Seed corpora: a few real files of each kind from make-dataset.
"$build"/ssdfeed make-dataset "$corpus_root/tfr" --format tfrecord --count 4 --shard-size 2 \
  --min-side 32 --max-side 48 >/dev/null
"$build"/ssdfeed make-dataset "$corpus_root/tar" --format tar --count 4 --shard-size 2 \
  --min-side 32 --max-side 48 >/dev/null
"$build"/ssdfeed make-dataset "$corpus_root/img" --format folder --count 4 \
  --min-side 32 --max-side 48 >/dev/null
mkdir -p "$corpus_root/decode" "$corpus_root/tfrecord" "$corpus_root/tarc"
cp "$corpus_root"/img/*/*.jpg "$corpus_root/decode/"
cp "$corpus_root"/tfr/*.tfrecord "$corpus_root/tfrecord/"
cp "$corpus_root"/tar/*.tar "$corpus_root/tarc/"
# Scenes: a COCO json for the annotations parser, WebDataset shards with
# masks, arrays and json members for the tar reader.
"$build"/ssdfeed make-dataset "$corpus_root/coco_src" --format coco --count 4 \
  --min-side 32 --max-side 48 >/dev/null
"$build"/ssdfeed make-dataset "$corpus_root/wds" --format wds-seg --count 4 \
  --min-side 32 --max-side 48 >/dev/null
mkdir -p "$corpus_root/coco"
cp "$corpus_root"/coco_src/annotations.json "$corpus_root/coco/"
# Numbers no int64 or float32 holds (a cast of them would be undefined), so
# mutations start next to those checks.
printf '%s' '{"images": [{"id": 1e30, "file_name": "a.jpg"}, {"id": 2.0, "file_name": "b.jpg"}],
 "categories": [{"id": -9.3e18, "name": "x"}, {"id": 4, "name": "y"}],
 "annotations": [{"id": 9, "image_id": 2, "category_id": 4, "bbox": [1e300, 0, 3e38, -1e39],
  "iscrowd": 1e19, "area": 1.5}]}' >"$corpus_root/coco/out_of_range.json"
cp "$corpus_root"/wds/*.tar "$corpus_root/tarc/"
# An export stream of a small entry, for the import parser.
mkdir -p "$corpus_root/import"
"$build"/ssdfeed warm --source "$corpus_root/img" --cache "$corpus_root/c" --resize-short 16 \
  --quiet >/dev/null
"$build"/ssdfeed cache export "$("$build"/ssdfeed cache ls --json --cache "$corpus_root/c" |
  sed -n 's/.*"entry": "\([0-9a-f]*\)".*/\1/p')" --cache "$corpus_root/c" \
  --to "$corpus_root/import/seed.tar" 2>/dev/null
# The warm above left the entry's ended stats totals: seeds for the stats parser.
mkdir -p "$corpus_root/stats"
cp "$corpus_root"/c/stats/ended-*.stats "$corpus_root/stats/" 2>/dev/null || true
# A ledger of three writers' reservations.
mkdir -p "$corpus_root/ledger"
printf 'w0 67108864\nw3 4096\nw12 0\n' >"$corpus_root/ledger/seed"
# The entry's manifest, its "prepare" object, and a skipped.json as
# `warm --on-error skip` writes it.
mkdir -p "$corpus_root/manifest" "$corpus_root/prepare" "$corpus_root/skipped"
cp "$corpus_root"/c/entries/*/manifest.json "$corpus_root/manifest/"
sed -n '/^  "prepare": {/,/^  }/p' "$corpus_root"/c/entries/*/manifest.json |
  sed '1s/.*/{/;$s/.*/}/' >"$corpus_root/prepare/prepare.json"
printf '{\n "samples_total": 4,\n "skipped": [\n  {"id": 2, "sample": "a/1.jpg", "error": "bad"}\n ]\n}\n' \
  >"$corpus_root/skipped/skipped.json"
# A record's field count, then a section of one 2x2 "|u1" mask (format v3).
mkdir -p "$corpus_root/field_section_fuzzer"
printf '\x01\x01\0\0\0\0\0\0\0\x01\x02\x04\x03\0\0\0\0\x04\0\0\0\0\0\0\0%b%b%b' \
  '\x02\0\0\0\0\0\0\0\x02\0\0\0\0\0\0\0' 'mask|u1\0' '\x00\x01\x01\x00\0\0\0\0' \
  >"$corpus_root/field_section_fuzzer/mask"
# The same mask stored as runs (codec 1): rows (0 x1, 1 x1) and (1 x1, 0 x1).
printf '\x01\x01\0\0\0\0\0\0\0\x01\x02\x04\x03\x01\0\0\0\x08\0\0\0\0\0\0\0%b%b%b' \
  '\x02\0\0\0\0\0\0\0\x02\0\0\0\0\0\0\0' 'mask|u1\0' '\x00\x01\x01\x01\x01\x01\x00\x01' \
  >"$corpus_root/field_section_fuzzer/mask-rle"
for f in "$here"/seeds/*; do [ -e "$f" ] && cp "$f" "$corpus_root/decode/"; done
# Crafted records (sample 3, zstd RLE frames): one claiming 2048x2048x3 in
# 445 bytes, which no entry's rules in the fuzzer allow, and a 16x16x3 one
# the zstd rules take and decode (docs/cache-format.md, "What a reader checks
# before allocating").
mkdir -p "$corpus_root/cache"
cp "$here"/corpus/cache/* "$corpus_root/cache/"
# A Fortran-ordered (2,2) float32 .npy (header padded to 128 bytes, as
# numpy writes it).
mkdir -p "$corpus_root/npy"
{ printf '\223NUMPY\001\000\166\000'
  printf "%-117s\n" "{'descr': '<f4', 'fortran_order': True, 'shape': (2, 2), }"
  printf '1234567812345678'; } >"$corpus_root/npy/f4.npy"
# A shape whose product is 2^128 + 4: a size check that wraps accepts its 4
# bytes (field_prepare_test's Npy.ShapeWhoseProductOverflowsIsRefused).
{ printf '\223NUMPY\001\000\266\000'
  printf "%-181s\n" "{'descr': '|u1', 'fortran_order': True, 'shape': (4, 5, 13, 29, 37, 109, \
113, 1429, 14449, 40388473189, 118750098349), }"
  printf 'abcd'; } >"$corpus_root/npy/wrap.npy"
# A ListObjectsV2 page with the entities, quotes and paging a real one has.
mkdir -p "$corpus_root/s3_list_fuzzer"
printf '%s' '<?xml version="1.0" encoding="UTF-8"?><ListBucketResult xmlns="http://s3.amazonaws.com/doc/2006-03-01/"><Name>bkt</Name><Prefix>a/</Prefix><KeyCount>2</KeyCount><MaxKeys>1000</MaxKeys><IsTruncated>true</IsTruncated><Contents><Key>a/x&amp;y &#233;.tar</Key><LastModified>2025-01-01T00:00:00.000Z</LastModified><ETag>&quot;9b2cf535f27731c974343645a3985328&quot;</ETag><Size>10240</Size><StorageClass>STANDARD</StorageClass></Contents><Contents><Key>a/b/c.jpg</Key><ETag>"d41d8cd98f00b204e9800998ecf8427e-2"</ETag><Size>0</Size></Contents><NextContinuationToken>1ueGcxLPRx1Tr/XYExHnhbYLgveDs2J/wm36Hy4vbOwM=</NextContinuationToken></ListBucketResult>' \
  >"$corpus_root/s3_list_fuzzer/page.xml"
declare -A corpus=([decode_fuzzer]=decode [tfrecord_fuzzer]=tfrecord [tar_fuzzer]=tarc
                   [cache_record_fuzzer]=cache [import_stream_fuzzer]=import
                   [stats_block_fuzzer]=stats [ledger_fuzzer]=ledger
                   [manifest_fuzzer]=manifest [prepare_spec_fuzzer]=prepare
                   [npy_fuzzer]=npy [coco_fuzzer]=coco
                   [skipped_fuzzer]=skipped)
for bin in "$build"/fuzz/*_fuzzer; do
  name=$(basename "$bin")
  dir="$corpus_root/${corpus[$name]:-$name}"
  mkdir -p "$dir"
  echo "fuzz: $name for ${secs}s"
  "$bin" -max_total_time="$secs" -rss_limit_mb=2048 -max_len=262144 "$dir" 2>&1 | tail -n 2
done
echo "fuzz: all targets ran without a crash"
