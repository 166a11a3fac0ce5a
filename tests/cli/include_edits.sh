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
check bare "$src/h.h" "$KJIT" compile k.cu --arch sm_90 --ptx -o "$TMP/bare.ptx"
check absolute "$src/h.h" "$KJIT" compile "$src/k.cu" --arch sm_90 --ptx -o "$TMP/absolute.ptx"
check computed "$src/h.h" "$KJIT" compile computed.cu --arch sm_90 --ptx -o "$TMP/computed.ptx"
check continued "$src/h.h" "$KJIT" compile continued.cu --arch sm_90 --ptx -o "$TMP/continued.ptx"
check include_path "$src/inc/h.h" "$KJIT" compile angled.cu -I inc --arch sm_90 --ptx -o "$TMP/include_path.ptx"
stdin_compile() { "$KJIT" compile - --arch sm_90 --ptx -o "$TMP/stdin.ptx" <"$src/k.cu"; }
check stdin "$src/h.h" stdin_compile

finish
