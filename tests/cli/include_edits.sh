#!/usr/bin/env bash
# A header edit is never a stale hit through the tool: the source named with and without a
# directory and read from stdin, a header beside it or in an -I directory, edited with the
# same size and modification time or with a new size.
set -eu
. "$(dirname "$0")/lib.sh"

src=$TMP/src
mkdir -p "$src/inc"
export KJIT_CACHE_DIR=$TMP/cache

# ptx_value FILE: the constant the kernel stores.
ptx_value() { grep -o -E '\b(111|222|33333)\b' "$1" | head -1; }

# same_stamp FILE TEXT: new bytes of the same length, modification time put back.
same_stamp() {
  touch -r "$1" "$TMP/stamp"
  printf '%s\n' "$2" >"$1"
  touch -r "$TMP/stamp" "$1"
}

# check NAME HEADER COMMAND...: compile, edit HEADER twice, compile after each edit.
check() {
  local name=$1 header=$2
  shift 2
  printf '#define V 111\n' >"$header"
  "$@" >/dev/null 2>"$TMP/err" || { fail "$name: first compile failed"; cat "$TMP/err" >&2; return; }
  [ "$(ptx_value "$TMP/$name.ptx")" = 111 ] || fail "$name: first compile does not store 111"
  "$@" >/dev/null 2>"$TMP/err"
  grep -q "cache hit" "$TMP/err" || fail "$name: an unchanged tree is not a hit: $(cat "$TMP/err")"
  same_stamp "$header" '#define V 222'
  "$@" >/dev/null 2>"$TMP/err"
  [ "$(ptx_value "$TMP/$name.ptx")" = 222 ] || fail "$name: stale code after a same-size, same-mtime edit"
  grep -q "cache miss" "$TMP/err" || fail "$name: the edit was not a miss: $(cat "$TMP/err")"
  printf '#define V 33333\n' >"$header"
  "$@" >/dev/null 2>"$TMP/err"
  [ "$(ptx_value "$TMP/$name.ptx")" = 33333 ] || fail "$name: stale code after an edit"
}

kernel='__global__ void k(int* p) { *p = V; }'
printf '#include "h.h"\n%s\n' "$kernel" >"$src/k.cu"
printf '#include <h.h>\n%s\n' "$kernel" >"$src/angled.cu"
printf '#define H "h.h"\n#include H\n%s\n' "$kernel" >"$src/computed.cu"
printf '/* c */ #include \\\n"h.h"\n%s\n' "$kernel" >"$src/continued.cu"

cd "$src"
# In this process and through the compile worker, each with a cache of its own.
for mode in inprocess worker; do
  export KJIT_COMPILE_MODE=$mode KJIT_CACHE_DIR=$TMP/cache-$mode
  check bare-$mode "$src/h.h" "$KJIT" compile k.cu --arch sm_90 --ptx -o "$TMP/bare-$mode.ptx"
  check absolute-$mode "$src/h.h" "$KJIT" compile "$src/k.cu" --arch sm_90 --ptx -o "$TMP/absolute-$mode.ptx"
  check computed-$mode "$src/h.h" "$KJIT" compile computed.cu --arch sm_90 --ptx -o "$TMP/computed-$mode.ptx"
  check continued-$mode "$src/h.h" "$KJIT" compile continued.cu --arch sm_90 --ptx -o "$TMP/continued-$mode.ptx"
  check include_path-$mode "$src/inc/h.h" "$KJIT" compile angled.cu -I inc --arch sm_90 --ptx -o "$TMP/include_path-$mode.ptx"
  stdin_compile() { "$KJIT" compile - --arch sm_90 --ptx -o "$TMP/stdin-$KJIT_COMPILE_MODE.ptx" <"$src/k.cu"; }
  check stdin-$mode "$src/h.h" stdin_compile
done

# With precompiled headers in play, through the worker (which keeps them across processes):
# a header that reaches the toolkit, settled so that its PCH is reused, then edited. A
# compile that uses the PCH does not open the headers it holds; its result must still be
# the new code.
export KJIT_COMPILE_MODE=worker KJIT_CACHE_DIR=$TMP/cache-pch
mkdir -p "$src/p"
printf '#pragma once\n#include <cuda/std/cstdint>\n#include "v.h"\n' >"$src/p/h.h"
printf '#define V 111\n' >"$src/p/v.h"
for n in a b c d; do
  printf '#include "h.h"\n__global__ void k%s(int* p) { *p = V; }\n' "$n" >"$src/p/$n.cu"
done
sleep 2.2  # PCHs are made only from files settled for the racy window
pch() { "$KJIT" compile "p/$1.cu" --arch sm_90 --ptx -o "$TMP/p$1.ptx" 2>"$TMP/err" || fail "p/$1.cu: $(cat "$TMP/err")"; }
pch a
pch b
expect_rc 0 "$KJIT" cache stats --json
json_check "$TMP/out" 'j["totals"]["pch_used"] >= 1'
same_stamp "$src/p/v.h" '#define V 222'
pch c
[ "$(ptx_value "$TMP/pc.ptx")" = 222 ] || fail "old code from a precompiled header after a same-size edit"
pch b
[ "$(ptx_value "$TMP/pb.ptx")" = 222 ] || fail "a stale hit after a same-size edit under a PCH"
printf '#define V 33333\n' >"$src/p/v.h"
pch d
[ "$(ptx_value "$TMP/pd.ptx")" = 33333 ] || fail "old code from a precompiled header after an edit"

finish
