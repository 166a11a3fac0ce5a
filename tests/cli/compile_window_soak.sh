#!/usr/bin/env bash
# Soak (KJIT_SOAK_TESTS=ON): a header rewritten with the same bytes (O_TRUNC, then write)
# every few milliseconds by another process while kjit compiles a program that includes it,
# 80 times in this process and 80 times through the compile worker, each request a new key.
# Afterwards every one of those requests, compiled again with the header settled, must give
# the real header's code: whatever a raced compile saw, it was never stored.
set -eu
. "$(dirname "$0")/lib.sh"
rounds=${KJIT_SOAK_ROUNDS:-80}

src=$TMP/src
mkdir -p "$src"
printf '#define VAL 2.5f\n' >"$src/cfg.h"
cat >"$src/k.cu" <<'CU'
#include "cfg.h"
#ifndef VAL
#define VAL 1.0f
#endif
extern "C" __global__ void kc(float* x) { x[threadIdx.x] *= VAL; }
CU
cd "$src"
for mode in inprocess worker; do
  export KJIT_COMPILE_MODE=$mode KJIT_CACHE_DIR=$TMP/cache-$mode
  python3 - "$src/cfg.h" "$TMP/stop" <<'PY' &
import os, sys, time
path, stop = sys.argv[1], sys.argv[2]
while not os.path.exists(stop):
    fd = os.open(path, os.O_WRONLY | os.O_TRUNC)
    time.sleep(0.002)
    os.write(fd, b"#define VAL 2.5f\n")
    os.close(fd)
    time.sleep(0.002)
PY
  writer=$!
  for i in $(seq "$rounds"); do
    "$KJIT" compile k.cu --arch sm_90 --ptx -o /dev/null -q -DITER=$i || true
  done
  touch "$TMP/stop"
  wait "$writer"
  rm -f "$TMP/stop"
  sleep 2.1  # the header settles
  wrong=0
  for i in $(seq "$rounds"); do
    "$KJIT" compile k.cu --arch sm_90 --ptx -o "$TMP/g.ptx" -q -DITER=$i
    grep -q '0f40200000' "$TMP/g.ptx" || { wrong=$((wrong + 1)); echo "$mode ITER=$i wrong" >&2; }
  done
  [ "$wrong" = 0 ] || fail "$mode: $wrong of $rounds requests served code built from a rewritten header"
done
finish
