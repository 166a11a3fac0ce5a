#!/usr/bin/env bash
# kjit compile with the built-in standard headers: a program including <cstdint> and
# <cmath> compiles with no option and hits in the next process; a user's own header of the
# same name on the include path wins and is in the key; --no-builtin-std turns them off;
# the toolkit's headers are served them too; the notes of a failed compile name the real
# cause (the option, a host-code toolkit header, C++14); kjit info lists them.
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

# Built-ins are served to the toolkit's headers too (as jitify serves its own to every
# includer): a toolkit header that includes <cstdint> and <limits> compiles. The toolkit
# here is the real one's CCCL and fp16 headers plus a header of the test's own.
expect_rc 0 "$KJIT" --cache-dir "$C" info --json
REAL_INC=$(json_get "$TMP/out" 'j["toolkit_include_path"].split(":")[-1]')
TK=$TMP/toolkit
mkdir -p "$TK/include"
ln -s "$REAL_INC/cccl" "$TK/include/cccl"
ln -s "$REAL_INC/cuda_fp16.h" "$TK/include/cuda_fp16.h"
ln -s "$REAL_INC/cuda_fp16.hpp" "$TK/include/cuda_fp16.hpp"
cat >"$TK/include/tk_util.h" <<'H'
#pragma once
#include <cstdint>
#include <limits>
__device__ inline std::uint32_t tk_max() { return std::numeric_limits<std::uint32_t>::max(); }
H
cat >"$TMP/tk.cu" <<'CU'
#include <tk_util.h>
extern "C" __global__ void t(unsigned* x) { x[0] = tk_max(); }
CU
expect_rc 0 "$KJIT" --cache-dir "$C" compile "$TMP/tk.cu" --toolkit "$TK" --arch sm_90 -o "$TMP/tk.cubin" --json
json_check "$TMP/out" 'j["stored"] is True and j["tier"] == "compiled"'
expect_rc 0 "$KJIT" --cache-dir "$C" compile "$TMP/tk.cu" --toolkit "$TK" --arch sm_90 -o "$TMP/tk.cubin" --json
json_check "$TMP/out" 'j["tier"] != "compiled"'
# Turned off, the note names the option actually given.
expect_rc 1 "$KJIT" --cache-dir "$C" compile "$TMP/tk.cu" --toolkit "$TK" --no-builtin-std --arch sm_90 -o "$TMP/tk.cubin"
expect_grep "built-in <cstdint> was turned off (--no-builtin-std)" "$TMP/err" "--no-builtin-std note"

# A toolkit header that is host code: the note names it and the real cause, not an
# option never given.
cat >"$TMP/thrust.cu" <<'CU'
#include <thrust/complex.h>
extern "C" __global__ void k(float* x) { thrust::complex<float> c(x[0], x[1]); x[2] = thrust::abs(c); }
CU
expect_rc 1 "$KJIT" --cache-dir "$C" compile "$TMP/thrust.cu" --arch sm_90 -o "$TMP/thrust.cubin"
expect_grep "kjit: note: the toolkit's <thrust/complex.h> holds host code" "$TMP/err" "thrust note"
! grep -q -e "--no-builtin-std" "$TMP/err" || fail "the thrust note blames --no-builtin-std"

# C++14: libcu++ (under the built-in <cstdint>) needs C++17, said in a kjit note.
cat >"$TMP/c14.cu" <<'CU'
#include <cstdint>
extern "C" __global__ void k(std::uint32_t* x) { x[0] = 1; }
CU
expect_rc 1 "$KJIT" --cache-dir "$C" compile "$TMP/c14.cu" -std=c++14 --arch sm_90 -o "$TMP/c14.cubin"
expect_grep "kjit: note: kjit's built-in standard headers .* needs C++17 or later" "$TMP/err" "C++14 note"
expect_rc 0 "$KJIT" --cache-dir "$C" compile "$TMP/c14.cu" -std=c++17 --arch sm_90 -o "$TMP/c14.cubin"

# kjit info lists them.
expect_rc 0 "$KJIT" --cache-dir "$C" info
expect_grep '^std headers .*algorithm' "$TMP/out" "kjit info"
expect_grep ' cstdint' "$TMP/out" "kjit info"
expect_rc 0 "$KJIT" --cache-dir "$C" info --json
json_check "$TMP/out" '"cstdint" in j["builtin_std_headers"] and "type_traits" in j["builtin_std_headers"]'

finish
