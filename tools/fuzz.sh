#!/usr/bin/env bash
# Builds the libFuzzer targets in fuzz/ in build-asan (clang, ASan + UBSan + libFuzzer's
# coverage; tools/sanitizer_tree.sh, shared with tools/sanitize.sh) and runs each for a fixed
# time, as many at once as there are cores, starting from the seed corpora committed in
# fuzz/corpus/<target>/ (new inputs go to build-asan/fuzz-corpus/, crashes to
# build-asan/fuzz-artifacts/). Prints each target's executions; fails on any finding.
#
#   tools/fuzz.sh                  20 s per target (CI)
#   tools/fuzz.sh --time 600       longer run (also KJIT_FUZZ_SECONDS)
#   tools/fuzz.sh --only metadata  one target
#
# fuzz_compile runs NVRTC only for inputs of at most 160 bytes (see fuzz/fuzz_compile.cpp);
# NVRTC is not instrumented and its own allocations are not leak-checked (tools/lsan.supp).
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${KJIT_FUZZ_SECONDS:-20}
only=""
while (($#)); do
  case "$1" in
    --time) seconds=$2; shift 2 ;;
    --only) only=$2; shift 2 ;;
    *) echo "usage: $0 [--time SECONDS] [--only TARGET]" >&2; exit 2 ;;
  esac
done
targets=(options include_scan metadata export entry_file compile)
[[ -n "$only" ]] && targets=("$only")

jobs=$(nproc)
tree=$(bash tools/sanitizer_tree.sh asan)
build_targets=()
for t in "${targets[@]}"; do build_targets+=("fuzz_$t"); done
nice -n 19 cmake --build "$tree" -j"$jobs" --target "${build_targets[@]}"

export ASAN_OPTIONS="detect_leaks=1:abort_on_error=1:allocator_may_return_null=1:${ASAN_OPTIONS:-}"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1:${UBSAN_OPTIONS:-}"
export LSAN_OPTIONS="suppressions=$PWD/tools/lsan.supp:print_suppressions=0:${LSAN_OPTIONS:-}"
out=$PWD/$tree
mkdir -p "$out/fuzz-artifacts" "$out/fuzz-logs"
fuzz_one() {  # target: runs it, leaves its log and exit status in $out/fuzz-logs
  local t=$1 status=0
  # Absolute paths: the targets work inside a private fixture directory (fuzz_input.h).
  mkdir -p "$out/fuzz-corpus/$t"
  "$out/fuzz/fuzz_$t" -max_total_time="$seconds" -timeout=60 -rss_limit_mb=4096 \
    -max_len=4096 -print_final_stats=1 -artifact_prefix="$out/fuzz-artifacts/$t-" \
    "$out/fuzz-corpus/$t" "$PWD/fuzz/corpus/$t" >"$out/fuzz-logs/$t.log" 2>&1 || status=$?
  echo "$status" >"$out/fuzz-logs/$t.status"
}
echo "== ${#targets[@]} fuzz targets, ${seconds}s each, $jobs at a time"
running=0
for t in "${targets[@]}"; do
  fuzz_one "$t" &
  if ((++running >= jobs)); then
    wait -n
    running=$((running - 1))
  fi
done
wait

failed=()
summary=()
total=0
for t in "${targets[@]}"; do
  log=$out/fuzz-logs/$t.log
  status=$(cat "$out/fuzz-logs/$t.status")
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
  execs=${execs:-0}
  total=$((total + execs))
  summary+=("$(printf '%-14s %10s executions  %s' "$t" "$execs" "$([[ $status == 0 ]] && echo ok || echo FAILED)")")
  if [[ $status != 0 ]]; then
    failed+=("$t")
    tail -60 "$log"
  fi
done
echo "== fuzzing summary (${seconds}s per target)"
printf '%s\n' "${summary[@]}"
echo "total executions: $total"
if ((${#failed[@]})); then
  echo "fuzzing found problems in: ${failed[*]} (inputs in $tree/fuzz-artifacts/)" >&2
  exit 1
fi
