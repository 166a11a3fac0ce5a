#!/usr/bin/env bash
# kjit compile with the built-in standard headers: a program including <cstdint> and
# <cmath> compiles with no option and hits in the next process; a user's own header of the
# same name on the include path wins and is in the key; --no-builtin-std turns them off;
# kjit info lists them.
set -eu
. "$(dirname "$0")/lib.sh"
C=$TMP/cache

cat >"$TMP/std.cu" <<'CU'
#include <cstdint>
#include <cmath>
#include <limits>
extern "C" __global__ void k(float* x, std::int64_t* n) {
  x[0] = std::sqrt(x[0]) + std::numeric_limits<float>::epsilon();
  *n = INT64_MAX;
}
CU
expect_rc 0 "$KJIT" --cache-dir "$C" compile "$TMP/std.cu" --arch sm_80 --ptx -o "$TMP/a.ptx" --json
cp "$TMP/out" "$TMP/first.json"
json_check "$TMP/first.json" 'j["ok"] and j["tier"] == "compiled"'
expect_rc 0 "$KJIT" --cache-dir "$C" compile "$TMP/std.cu" --arch sm_80 --ptx -o "$TMP/b.ptx" --json
json_check "$TMP/out" 'j["tier"] == "disk"'
[ "$(json_get "$TMP/out" 'j["key"]')" = "$(json_get "$TMP/first.json" 'j["key"]')" ] || fail "the second process has another key"

# Turned off: NVRTC finds no <cstdint>.
expect_rc 1 "$KJIT" --cache-dir "$C" compile "$TMP/std.cu" --arch sm_80 --ptx -o "$TMP/c.ptx" --no-builtin-std
expect_grep 'cannot open source file' "$TMP/err" "compile with --no-builtin-std"

# A user's cstdint on the include path shadows the built-in one; editing it is a miss.
mkdir -p "$TMP/inc"
printf 'typedef long long int64_t;\n#define MINE 1\n' >"$TMP/inc/cstdint"
cat >"$TMP/mine.cu" <<'CU'
#include <cstdint>
#ifndef MINE
#error the built-in cstdint was used
#endif
extern "C" __global__ void k(int64_t* n) { *n = MINE; }
CU
expect_rc 0 "$KJIT" --cache-dir "$C" compile "$TMP/mine.cu" --arch sm_80 -I "$TMP/inc" --ptx -o "$TMP/m1.ptx" --json
cp "$TMP/out" "$TMP/m1.json"
expect_rc 0 "$KJIT" --cache-dir "$C" compile "$TMP/mine.cu" --arch sm_80 -I "$TMP/inc" --ptx -o "$TMP/m2.ptx" --json
json_check "$TMP/out" 'j["tier"] == "disk"'
printf 'typedef long long int64_t;\n#define MINE 2\n' >"$TMP/inc/cstdint"
expect_rc 0 "$KJIT" --cache-dir "$C" compile "$TMP/mine.cu" --arch sm_80 -I "$TMP/inc" --ptx -o "$TMP/m3.ptx" --json
json_check "$TMP/out" 'j["tier"] == "compiled"'
[ "$(json_get "$TMP/out" 'j["key"]')" != "$(json_get "$TMP/m1.json" 'j["key"]')" ] || fail "editing the user's cstdint kept the key"
# The user's file also wins with the built-ins turned off.
expect_rc 0 "$KJIT" --cache-dir "$C" compile "$TMP/mine.cu" --arch sm_80 -I "$TMP/inc" --ptx -o "$TMP/m4.ptx" --no-builtin-std

# kjit info lists them.
expect_rc 0 "$KJIT" --cache-dir "$C" info
expect_grep '^std headers .*algorithm' "$TMP/out" "kjit info"
expect_grep ' cstdint' "$TMP/out" "kjit info"
expect_rc 0 "$KJIT" --cache-dir "$C" info --json
json_check "$TMP/out" '"cstdint" in j["builtin_std_headers"] and "type_traits" in j["builtin_std_headers"]'

finish
