#!/usr/bin/env bash
# Runs the CPU test suites under AddressSanitizer + UndefinedBehaviorSanitizer (build-asan)
# and the concurrency tests under ThreadSanitizer (build-tsan), both configured by
# tools/sanitizer_tree.sh (clang, -O1; build-asan also serves tools/fuzz.sh).
#
#   tools/sanitize.sh            both
#   tools/sanitize.sh asan       only ASan+UBSan
#   tools/sanitize.sh tsan       only TSan
#
# What runs where (to fit CI's time budget on 2 cores):
#   ASan+UBSan: every CPU suite: test_compile, test_store, test_util, test_multiprocess,
#               test_reliability, test_crash (30 kill cycles; the plain build runs 100),
#               test_kernel_cpu, test_remote, test_gemm_cpu, test_abi.
#   TSan:       the suites whose point is concurrency: test_multiprocess, the stampede and
#               fork tests of test_reliability, test_compile's threaded and async tests,
#               test_store and test_crash (10 cycles).
# NVRTC is a closed, uninstrumented library: tools/lsan.supp and tools/tsan.supp name it
# (and only it) so that what it keeps or does inside is not reported as ours.
set -euo pipefail
cd "$(dirname "$0")/.."
which=${1:-all}
jobs=$(nproc)
root=$PWD

asan_tests=(test_compile test_store test_util test_multiprocess test_reliability test_crash
            test_kernel_cpu test_remote test_gemm_cpu test_abi)
tsan_tests=(test_multiprocess test_reliability test_compile test_store test_crash)

# Only suites that exist in this checkout (others are added by their owners): a program is
# tests/test_<name>.cpp, or the files of tests/<name>/.
present() {
  local out=() t
  for t in "$@"; do [[ -f tests/$t.cpp || -d tests/${t#test_} ]] && out+=("$t"); done
  echo "${out[@]}"
}

failed=()
run() {  # name command...
  local name=$1
  shift
  local start=$SECONDS
  if "$@" >"$log_dir/$name.log" 2>&1; then
    echo "ok      $name ($((SECONDS - start)) s)"
  else
    echo "FAILED  $name ($((SECONDS - start)) s)"
    tail -80 "$log_dir/$name.log"
    failed+=("$name")
  fi
}

if [[ $which == all || $which == asan ]]; then
  tests=($(present "${asan_tests[@]}"))
  bash tools/sanitizer_tree.sh asan >/dev/null
  nice -n 19 cmake --build build-asan -j"$jobs" --target "${tests[@]}"
  log_dir=build-asan/logs
  mkdir -p "$log_dir"
  export ASAN_OPTIONS="detect_leaks=1:abort_on_error=1:detect_stack_use_after_return=1:strict_string_checks=1"
  export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1"
  export LSAN_OPTIONS="suppressions=$root/tools/lsan.supp:print_suppressions=0"
  echo "== ASan+UBSan"
  for t in "${tests[@]}"; do
    if [[ $t == test_crash ]]; then
      run "asan-$t" env KJIT_SOAK_CYCLES=30 "build-asan/tests/$t"
    else
      run "asan-$t" "build-asan/tests/$t"
    fi
  done
  unset ASAN_OPTIONS UBSAN_OPTIONS LSAN_OPTIONS
fi

if [[ $which == all || $which == tsan ]]; then
  tests=($(present "${tsan_tests[@]}"))
  bash tools/sanitizer_tree.sh tsan >/dev/null
  nice -n 19 cmake --build build-tsan -j"$jobs" --target "${tests[@]}"
  log_dir=build-tsan/logs
  mkdir -p "$log_dir"
  export TSAN_OPTIONS="halt_on_error=1:second_deadlock_stack=1:suppressions=$root/tools/tsan.supp"
  echo "== TSan"
  for t in "${tests[@]}"; do
    case $t in
      test_reliability)
        run "tsan-$t" "build-tsan/tests/$t" --gtest_filter='Stampede.*:Fork.*:BoundedSize.*' ;;
      test_compile)
        run "tsan-$t" "build-tsan/tests/$t" --gtest_filter='Compile.*' ;;
      test_crash)
        run "tsan-$t" env KJIT_SOAK_CYCLES=10 "build-tsan/tests/$t" ;;
      *)
        run "tsan-$t" "build-tsan/tests/$t" ;;
    esac
  done
  unset TSAN_OPTIONS
fi

if ((${#failed[@]})); then
  echo "sanitizer runs failed: ${failed[*]} (logs in build-asan/logs, build-tsan/logs)" >&2
  exit 1
fi
echo "sanitizer runs passed"
