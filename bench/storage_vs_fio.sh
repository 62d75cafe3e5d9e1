#!/usr/bin/env bash
# ssdfeed bench storage next to fio for the same patterns on the same
# directory (O_DIRECT, io_uring).
#   bench/storage_vs_fio.sh DIR [SECONDS]
# Needs: the `ssdfeed` command on PATH (`pip install .`, or `make build` and
# PATH=build:$PATH) and fio (apt-get install fio).
set -euo pipefail
dir=$1
secs=${2:-3}
command -v fio >/dev/null || { echo "fio not installed (apt-get install fio)"; exit 1; }
ours=$(ssdfeed bench storage "$dir" --size 512M --duration "$secs" --json)
file="$dir/.fio-compare.dat"
fio --name=prep --filename="$file" --size=512M --rw=write --bs=1M --direct=1 \
    --output-format=terse >/dev/null
printf '%-9s %-7s %3s %12s %12s %7s\n' pattern block qd ssdfeed_iops fio_iops ratio
for spec in "randread 4096 1" "randread 4096 32" "randread 131072 8" "randread 114688 32" \
            "seqread 1048576 1"; do
  set -- $spec
  rw=$([ "$1" = seqread ] && echo read || echo randread)
  fio_iops=$(fio --name=x --filename="$file" --size=512M --rw="$rw" --bs="$2" --iodepth="$3" \
      --ioengine=io_uring --direct=1 --time_based --runtime="$secs" --output-format=json |
    python3 -c 'import json,sys; print(json.load(sys.stdin)["jobs"][0]["read"]["iops"])')
  our_iops=$(echo "$ours" | python3 -c "import json,sys
rows = json.load(sys.stdin)[0]['rows']
print([r['iops'] for r in rows if r['pattern']=='$1' and r['block']==$2 and r['qd']==$3][0])")
  python3 -c "print(f'{\"$1\":9s} {$2:<7d} {$3:3d} {$our_iops:12.0f} {$fio_iops:12.0f} {$our_iops/$fio_iops:7.2f}')"
done
rm -f "$file"
