#!/usr/bin/env bash
# A header rewritten with the same bytes while NVRTC reads it (a code generator's open with
# O_TRUNC, then write) is never stored under the header's key: the compile's result is
# returned (built from what NVRTC saw) but the next compile is a miss that gives the code of
# the real header. In this process and through the compile worker. The rewrite is made to
# land inside the compile by an interposer (tests/race/rewrite_during_read.c).
# Usage: compile_window.sh PATH-TO-kjit PATH-TO-rewrite_during_read.so
set -eu
. "$(dirname "$0")/lib.sh"
SPY=$2

src=$TMP/src
mkdir -p "$src"
printf '#define VAL 2.5f\n' >"$src/cfg.h"
printf '/* read after cfg.h */\n' >"$src/after.h"
cat >"$src/k.cu" <<'CU'
#include "cfg.h"
#include "after.h"
#ifndef VAL
#define VAL 1.0f
#endif
extern "C" __global__ void kc(float* x) { x[threadIdx.x] *= VAL; }
CU
# 2.5f in PTX's hexadecimal float form.
has_real_value() { grep -q '0f40200000' "$1"; }

cd "$src"
for mode in inprocess worker; do
  export KJIT_COMPILE_MODE=$mode KJIT_CACHE_DIR=$TMP/cache-$mode KJIT_LOG=warn
  LD_PRELOAD=$SPY KJIT_RACE_FILE=$src/cfg.h KJIT_RACE_RESTORE=after.h \
    "$KJIT" compile k.cu --arch sm_90 --ptx -o "$TMP/race-$mode.ptx" >/dev/null 2>"$TMP/err" ||
    { fail "$mode: the compile with the rewrite failed: $(cat "$TMP/err")"; continue; }
  # The rewrite landed inside the compile: NVRTC saw the empty header.
  if has_real_value "$TMP/race-$mode.ptx"; then
    fail "$mode: the rewrite did not land while NVRTC read the header (test setup)"
    continue
  fi
  [ "$(cat cfg.h)" = '#define VAL 2.5f' ] || fail "$mode: cfg.h was not restored"
  expect_grep 'modified while NVRTC was reading' "$TMP/err" "$mode: the log of the raced compile"
  unset KJIT_LOG
  "$KJIT" compile k.cu --arch sm_90 --ptx -o "$TMP/after-$mode.ptx" >/dev/null 2>"$TMP/err" ||
    fail "$mode: the compile after the rewrite failed"
  has_real_value "$TMP/after-$mode.ptx" ||
    fail "$mode: the code NVRTC built from the empty header was served for the real one"
  expect_grep 'cache miss' "$TMP/err" "$mode: the compile after the rewrite"
  # Settled now: the same request is stored and then a hit.
  "$KJIT" compile k.cu --arch sm_90 --ptx -o "$TMP/again-$mode.ptx" >/dev/null 2>"$TMP/err"
  expect_grep 'cache hit' "$TMP/err" "$mode: the third compile"
  has_real_value "$TMP/again-$mode.ptx" || fail "$mode: the hit does not hold the real code"
done
finish
