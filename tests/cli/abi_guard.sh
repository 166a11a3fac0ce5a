#!/usr/bin/env bash
# Proves that the ABI guard scripts catch what they are meant to catch: small libraries
# built here (with version scripts written like src/kjit.map) are checked by tools/check_symbols.sh and
# tools/check_abi.sh against a baseline made by tools/update_abi_baseline.sh.
#   tests/cli/abi_guard.sh [CC]
set -eu
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
CC=${1:-cc}
TMP=$(mktemp -d "${TMPDIR:-/tmp}/kjit-abi-test.XXXXXX")
trap 'rm -rf "$TMP"' EXIT
FAILURES=0
fail() { echo "FAIL: $*" >&2; FAILURES=$((FAILURES + 1)); }

# header VARIANT: writes $TMP/h-VARIANT/mini.h and prints the directory. v1 is the
# baseline; the others change it.
header() {
  local dir=$TMP/h-$1 body
  mkdir -p "$dir"
  case $1 in
    v1|nobeta) body='unsigned struct_size; int a; int b;' ;;
    retype) body='unsigned struct_size; int a; long long b;' ;;
    append) body='unsigned struct_size; int a; int b; int c;' ;;
    prepend) body='unsigned struct_size; int c; int a; int b;' ;;
  esac
  {
    echo '#define KJIT_EXPORT __attribute__((visibility("default")))'
    echo "typedef struct kjit_thing { $body } kjit_thing;"
    echo 'KJIT_EXPORT int kjit_alpha(const kjit_thing* t);'
    [ "$1" = nobeta ] || echo 'KJIT_EXPORT int kjit_beta(int x);'
  } >"$dir/mini.h"
  echo "$dir"
}

# build NAME HEADER-VARIANT EXTRA-C SONAME [link flags...]
build() {
  local name=$1 hdr extra=$3 soname=$4
  hdr=$(header "$2")
  shift 4
  {
    echo '#include "mini.h"'
    echo 'int kjit_alpha(const kjit_thing* t) { return t->a + (int)t->b; }'
    if grep -q kjit_beta "$hdr/mini.h"; then echo 'int kjit_beta(int x) { return x + 1; }'; fi
    echo "$extra"
  } >"$TMP/$name.c"
  "$CC" -g -shared -fPIC -fvisibility=hidden -I"$hdr" -o "$TMP/$name.so" "$TMP/$name.c" \
    -Wl,-soname,"$soname" "$@"
}
# Version scripts in the style of src/kjit.map: every symbol listed under its release.
printf 'KJIT_0.1 {\n  global:\n    kjit_alpha;\n    kjit_beta;\n  local:\n    *;\n};\n' >"$TMP/mini.map"
{ cat "$TMP/mini.map"; printf 'KJIT_0.2 {\n  global:\n    kjit_gamma;\n} KJIT_0.1;\n'; } >"$TMP/mini2.map"
printf 'KJIT_0.1 { global: kjit_*; local: *; };\n' >"$TMP/wild.map"
MAP=-Wl,--version-script=$TMP/mini.map
MAP2=-Wl,--version-script=$TMP/mini2.map

build base v1 '' libkjit.so.0 "$MAP"
KJIT_PUBLIC_HEADERS_DIR=$TMP/h-v1 "$ROOT/tools/update_abi_baseline.sh" "$TMP/base.so" "$TMP/base.abi" >/dev/null ||
  fail "update_abi_baseline.sh failed"
grep -q "soname='libkjit.so.0'" "$TMP/base.abi" || fail "the baseline does not record the soname"

# ---- check_symbols.sh ----
sym() {  # sym LIB [MAP]
  KJIT_PUBLIC_HEADERS_DIR=$TMP/h-v1 "$ROOT/tools/check_symbols.sh" "$TMP/$1.so" "${2:-$TMP/mini.map}" >"$TMP/out" 2>&1
}
sym base || { fail "check_symbols rejected a clean library"; cat "$TMP/out" >&2; }
build leak v1 'int helper_leak(void) { return 2; }' libkjit.so.0 -fvisibility=default
if sym leak; then fail "check_symbols accepted a library exporting helper_leak without versions"; fi
grep -q 'helper_leak' "$TMP/out" || fail "check_symbols did not name helper_leak"
grep -q 'not versioned' "$TMP/out" || fail "check_symbols did not report unversioned symbols"
echo 'KJIT_9 { global: kjit_*; local: *; };' >"$TMP/other.map"
build othernode v1 '' libkjit.so.0 -Wl,--version-script="$TMP/other.map"
if sym othernode; then fail "check_symbols accepted symbols of another version node"; fi
# A kjit_* function exported without being listed (here: by a pattern) is refused.
build unlisted v1 'KJIT_EXPORT int kjit_gamma(void); int kjit_gamma(void) { return 3; }' libkjit.so.0 \
  -Wl,--version-script="$TMP/wild.map"
if sym unlisted; then fail "check_symbols accepted kjit_gamma, which the map does not list"; fi
grep -q 'kjit_gamma' "$TMP/out" || fail "check_symbols did not name the unlisted kjit_gamma"
# Listed under the next release's node, it is accepted; listed under the wrong node, not.
build gamma v1 'KJIT_EXPORT int kjit_gamma(void); int kjit_gamma(void) { return 3; }' libkjit.so.0 "$MAP2"
sym gamma "$TMP/mini2.map" || { fail "check_symbols rejected kjit_gamma listed under KJIT_0.2"; cat "$TMP/out" >&2; }
sed 's/kjit_beta;/kjit_beta;\n    kjit_gamma;/; /^KJIT_0.2/,$d' "$TMP/mini2.map" >"$TMP/wrongnode.map"
if sym gamma "$TMP/wrongnode.map"; then fail "check_symbols accepted kjit_gamma@KJIT_0.2 listed under KJIT_0.1"; fi
grep -q 'listed under KJIT_0.1' "$TMP/out" || fail "check_symbols did not report the version mismatch"
# A map that exports by pattern is refused even when the library matches it.
if sym base "$TMP/wild.map"; then fail "check_symbols accepted a map with a pattern"; fi
build nosoname v1 '' libkjit.so "$MAP"
if sym nosoname; then fail "check_symbols accepted the soname libkjit.so"; fi
build base v1 '' libkjit.so.0 "$MAP"
echo 'KJIT_EXPORT int kjit_gamma(void);' >>"$TMP/h-v1/mini.h"
if sym base; then fail "check_symbols accepted a library lacking a declared function (kjit_gamma)"; fi
grep -q 'kjit_gamma' "$TMP/out" || fail "check_symbols did not name the missing kjit_gamma"

# ---- check_abi.sh ----
expect_abi() {  # expect_abi pass|fail LIB WHAT
  local rc=0
  "$ROOT/tools/check_abi.sh" "$TMP/$2.so" "$TMP/base.abi" >"$TMP/out" 2>&1 || rc=$?
  if [ "$1" = pass ] && [ $rc -ne 0 ]; then fail "check_abi rejected $3"; cat "$TMP/out" >&2; fi
  if [ "$1" = fail ] && [ $rc -eq 0 ]; then fail "check_abi accepted $3"; cat "$TMP/out" >&2; fi
  return 0
}
build base v1 '' libkjit.so.0 "$MAP"
expect_abi pass base "the baseline library itself"
build added v1 'KJIT_EXPORT int kjit_gamma(void); int kjit_gamma(void) { return 3; }' libkjit.so.0 "$MAP2"
expect_abi pass added "an added function"
grep -q 'functions were added' "$TMP/out" || fail "check_abi did not note the added function"
build append append '' libkjit.so.0 "$MAP"
expect_abi pass append "a member appended to a struct that starts with struct_size"
build nobeta nobeta '' libkjit.so.0 "$MAP"
expect_abi fail nobeta "a removed function"
grep -q 'kjit_beta' "$TMP/out" || fail "check_abi did not name the removed kjit_beta"
build retype retype '' libkjit.so.0 "$MAP"
expect_abi fail retype "a struct member whose type changed"
grep -q "member 'b' changed type" "$TMP/out" || fail "check_abi did not name the retyped member"
build prepend prepend '' libkjit.so.0 "$MAP"
expect_abi fail prepend "a member inserted before existing ones"
build bumped nobeta '' libkjit.so.1 "$MAP"
expect_abi pass bumped "an incompatible change with a soname bump"
grep -q 'soname was bumped' "$TMP/out" || fail "check_abi did not say the soname was bumped"
"$CC" -shared -fPIC -I"$TMP/h-v1" -o "$TMP/nodebug.so" "$TMP/base.c" -Wl,-soname,libkjit.so.0 "$MAP"
expect_abi fail nodebug "a library without debug information"

if [ "$FAILURES" -ne 0 ]; then
  echo "$FAILURES check(s) failed" >&2
  exit 1
fi
echo "all checks passed"
