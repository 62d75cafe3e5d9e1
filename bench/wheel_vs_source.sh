#!/usr/bin/env bash
# `./dev demo`'s cold and warm epochs with the binary wheel against the source
# build, interleaved in one run (README, "Install the binary wheel"):
#
#   bash bench/wheel_vs_source.sh [WHEEL] [ROUNDS]
#
# WHEEL: default the cp311 manylinux wheel in dist/ (./dev wheel), for the
# CPython of .venv, so only the build differs; the source build is .venv's
# (make install-py). Each round runs `python -m ssdfeed.demo` once with each,
# the one that goes first alternating, on one dataset (generated once, 3,000
# JPEGs) and a fresh cache each time (the demo removes it). Prints every run,
# then the median cold and warm images/s of each and the wheel's ratio.
set -euo pipefail
cd "$(dirname "$0")/.."
wheel=${1:-$(ls dist/ssdfeed-*-cp311-cp311-manylinux*.whl 2>/dev/null | head -1)}
rounds=${2:-5}
work=${WORK:-/tmp/ssdfeed-wheel-vs-source}
[[ -n $wheel && -f $wheel ]] || { echo "wheel_vs_source: no wheel (./dev wheel, or pass one)" >&2; exit 2; }
[[ -x .venv/bin/python ]] || { echo "wheel_vs_source: no .venv (make install-py)" >&2; exit 2; }

# The wheel in a venv of its own (nothing of .venv's site-packages in it).
rm -rf "$work/venv"
mkdir -p "$work"
.venv/bin/python -m venv "$work/venv"
"$work/venv/bin/pip" install -q "$wheel" numpy
declare -A PY=([source]=.venv/bin/python [wheel]=$work/venv/bin/python)
for b in source wheel; do
  echo "$b: $("${PY[$b]}" -c 'import ssdfeed, sys; print(ssdfeed.__file__, sys.version.split()[0])')"
done

run() {  # BUILD ROUND
  echo "== $1 round $2"
  "${PY[$1]}" -m ssdfeed.demo --dir "$work/demo" 2>/dev/null | tee -a "$work/$1.out"
}
rm -f "$work/source.out" "$work/wheel.out"
"${PY[source]}" -m ssdfeed.demo --dir "$work/demo" --epochs 0 >/dev/null  # the dataset, untimed
for ((r = 1; r <= rounds; r++)); do
  if ((r % 2)); then run source "$r"; run wheel "$r"; else run wheel "$r"; run source "$r"; fi
done

# An epoch row of the demo: "    0   74   0%  1547.3ms  288.0".
python3 - "$work" <<'PY'
import re, statistics, sys
work = sys.argv[1]
med = {}
for build in ("source", "wheel"):
    rows = [l.split() for l in open(f"{work}/{build}.out") if re.match(r"\s+[01]\s+\d", l)]
    cold = [float(r[1]) for r in rows if r[0] == "0"]
    warm = [float(r[1]) for r in rows if r[0] == "1"]
    med[build] = (statistics.median(cold), statistics.median(warm))
    print(f"{build:>6}: cold {cold} median {med[build][0]:.0f}; warm {warm} median {med[build][1]:.0f} images/s")
print("wheel / source: cold %.3f, warm %.3f" % (med["wheel"][0] / med["source"][0], med["wheel"][1] / med["source"][1]))
PY
