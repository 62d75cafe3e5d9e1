#!/usr/bin/env bash
# Fails when a tracked C++ file (.cc/.h) is not as clang-format (.clang-format)
# would write it, naming each file; `make format` rewrites them.
# clang-format comes from scripts/deps.sh --dev.
set -euo pipefail
cd "$(dirname "$0")/.."
command -v clang-format >/dev/null ||
  { echo "check-format: clang-format not found (bash scripts/deps.sh --dev installs it)" >&2; exit 1; }
mapfile -t files < <(git ls-files '*.cc' '*.h')
[ "${#files[@]}" -gt 0 ] || { echo "check-format: no tracked .cc/.h files" >&2; exit 1; }
bad=()
for f in "${files[@]}"; do
  clang-format --dry-run -Werror "$f" >/dev/null 2>&1 || bad+=("$f")
done
if [ "${#bad[@]}" -gt 0 ]; then
  echo "check-format: ${#bad[@]} file(s) not clang-format clean (make format fixes them):" >&2
  printf '  %s\n' "${bad[@]}" >&2
  exit 1
fi
echo "check-format: ${#files[@]} files clean ($(clang-format --version | head -1))"
