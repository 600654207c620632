#!/usr/bin/env bash
# clang-tidy (.clang-tidy) over the sources of libddp, ddp-launch and ddp-bench, with the
# compile commands of the build in $1 (`make lint`: build-lint, without unity batches, whose
# entries name the batch files, not the sources). Tests and the files that include LibTorch (ddp/torch,
# examples/, any other file including <torch/...> or <ATen/...>: about 35 s a file, and clang 14
# cannot parse some of LibTorch 1.13's headers) are left out. Prints every warning and fails if there is one.
set -euo pipefail
build=${1:-build}
cd "$(dirname "$0")/.."
[ -f "$build/compile_commands.json" ] || { echo "lint: no $build/compile_commands.json (run make lint)"; exit 1; }
mapfile -t files < <(git ls-files '*.cc' | grep -v -e '^tests/' -e '^ddp/torch/' -e '^examples/' |
  while read -r f; do
    grep -q -e '#include <torch/' -e '#include <ATen/' "$f" && continue  # LibTorch: see above
    grep -q "\"file\": \"$PWD/$f\"" "$build/compile_commands.json" && echo "$f"
  done)
echo "lint: clang-tidy over ${#files[@]} files"
log=$(mktemp)
trap 'rm -f "$log"' EXIT
# run-clang-tidy exits 1 when a file had warnings; anything else (killed, no clang-tidy) is not
# a clean run.
status=0
# A -DDDP_WERROR=ON build passes GCC's -Wno-error=maybe-uninitialized, unknown to clang.
run-clang-tidy-14 -p "$build" -quiet -extra-arg=-Wno-unknown-warning-option -j "$(nproc)" "${files[@]/#/$PWD/}" > "$log" 2>/dev/null || status=$?
if [ "$status" -gt 1 ]; then
  echo "lint: clang-tidy did not finish (exit $status)"
  exit 1
fi
# run-clang-tidy colours its output even into a file: strip the escapes before matching.
warnings=$(sed 's/\x1b\[[0-9;]*m//g' "$log" | grep -E '^/.*: (warning|error): ' | sort -u || true)
if [ -n "$warnings" ]; then
  echo "$warnings"
  echo "lint: $(echo "$warnings" | wc -l) warnings"
  exit 1
fi
echo "lint: clean"
