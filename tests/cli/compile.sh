#!/usr/bin/env bash
# kjit compile: cache miss then hit, outputs, include tracking, errors and exit statuses.
set -eu
. "$(dirname "$0")/lib.sh"
C=$TMP/cache
write_saxpy "$TMP/saxpy.cu"

# First compile: a miss that writes a CUBIN.
expect_rc 0 "$KJIT" --cache-dir "$C" compile "$TMP/saxpy.cu" --arch sm_90 -o "$TMP/a.cubin" --json
cp "$TMP/out" "$TMP/first.json"
json_check "$TMP/first.json" 'j["ok"] and j["tier"] == "compiled" and not j["hit"] and j["kind"] == "cubin"'
json_check "$TMP/first.json" 'len(j["key"]) == 64 and j["target"] == "sm_90" and j["bytes"] > 0 and j["kernels"] == ["saxpy"]'
[ "$(head -c 4 "$TMP/a.cubin" | od -An -c | tr -d ' ')" = '177ELF' ] || fail "a.cubin is not an ELF file"
[ "$(stat -c %s "$TMP/a.cubin")" = "$(json_get "$TMP/first.json" 'j["bytes"]')" ] || fail "a.cubin size differs from the reported size"

# Second compile of the same input: a disk hit with the same key and the same bytes.
expect_rc 0 "$KJIT" --cache-dir "$C" compile "$TMP/saxpy.cu" --arch sm_90 -o "$TMP/b.cubin" --json
json_check "$TMP/out" 'j["tier"] == "disk" and j["hit"] and j["compile_ms"] > 0'
[ "$(json_get "$TMP/out" 'j["key"]')" = "$(json_get "$TMP/first.json" 'j["key"]')" ] || fail "second compile has another key"
cmp -s "$TMP/a.cubin" "$TMP/b.cubin" || fail "the cached CUBIN differs from the compiled one"

# The cache holds exactly one entry for it.
expect_rc 0 "$KJIT" cache stats --json --cache-dir "$C"
json_check "$TMP/out" 'j["entries"] == 1 and j["state"] == "ok" and j["bytes"] > 0 and j["targets"]["sm_90"]["entries"] == 1'
json_check "$TMP/out" 'j["stored_compile_ms"] > 0 and j["max_size_bytes"] > 0'
expect_rc 0 "$KJIT" cache stats --cache-dir "$C"
expect_grep '^entries  *1$' "$TMP/out" "cache stats"

# The default output name, and the human-readable status lines on stderr. The program
# name (FILE as given, or --program-name) is part of the key, as __FILE__ would see it.
(cd "$TMP" && "$KJIT" --cache-dir "$C" compile saxpy.cu -a sm_90 2>"$TMP/err") || fail "compile with the default output failed"
[ -s "$TMP/saxpy.cubin" ] || fail "no saxpy.cubin written by default"
expect_grep 'cache miss, compiled in' "$TMP/err" "compile status line"
(cd "$TMP" && "$KJIT" --cache-dir "$C" compile saxpy.cu -a sm_90 2>"$TMP/err") || fail "compile with the default output failed"
expect_grep 'cache hit (disk)' "$TMP/err" "compile status line"
expect_rc 0 "$KJIT" --cache-dir "$C" compile "$TMP/saxpy.cu" -a sm_90 --program-name saxpy.cu -o "$TMP/d.cubin"
expect_grep 'cache hit (disk)' "$TMP/err" "compile with --program-name"

# PTX to stdout from standard input (same entry: PTX is stored beside the CUBIN).
expect_rc 0 sh -c "\"$KJIT\" --cache-dir \"$C\" compile - --arch sm_90 --ptx -o - < \"$TMP/saxpy.cu\""
expect_grep '\.entry saxpy' "$TMP/out" "PTX output"
expect_grep '\.target sm_90' "$TMP/out" "PTX output"

# Options change the key: a define is a new entry.
expect_rc 0 "$KJIT" --cache-dir "$C" compile "$TMP/saxpy.cu" --arch sm_90 -D SCALE=2 -o "$TMP/c.cubin" --json
json_check "$TMP/out" 'j["tier"] == "compiled"'
[ "$(json_get "$TMP/out" 'j["key"]')" != "$(json_get "$TMP/first.json" 'j["key"]')" ] || fail "-D did not change the key"

# Editing a header reachable through -I invalidates the entry.
mkdir -p "$TMP/inc"
echo '#define FACTOR 2.0f' >"$TMP/inc/factor.h"
cat >"$TMP/scale.cu" <<'CU'
#include "factor.h"
extern "C" __global__ void scale(float* x) { x[threadIdx.x] *= FACTOR; }
CU
expect_rc 0 "$KJIT" --cache-dir "$C" compile "$TMP/scale.cu" --arch sm_80 -I "$TMP/inc" --ptx -o "$TMP/s1.ptx" --json
cp "$TMP/out" "$TMP/s1.json"
expect_rc 0 "$KJIT" --cache-dir "$C" compile "$TMP/scale.cu" --arch sm_80 -I "$TMP/inc" --ptx -o "$TMP/s2.ptx" --json
json_check "$TMP/out" 'j["tier"] == "disk"'
echo '#define FACTOR 3.0f' >"$TMP/inc/factor.h"
expect_rc 0 "$KJIT" --cache-dir "$C" compile "$TMP/scale.cu" --arch sm_80 -I "$TMP/inc" --ptx -o "$TMP/s3.ptx" --json
json_check "$TMP/out" 'j["tier"] == "compiled"'
[ "$(json_get "$TMP/out" 'j["key"]')" != "$(json_get "$TMP/s1.json" 'j["key"]')" ] || fail "editing an included header kept the key"
expect_grep '0f40400000' "$TMP/s3.ptx" "PTX after the header edit (3.0f)"

# Name expressions are reported with their lowered names; NVRTC options after --.
cat >"$TMP/tmpl.cu" <<'CU'
template <typename T> __global__ void twice(T* x) { x[threadIdx.x] *= T(2); }
CU
expect_rc 0 "$KJIT" --cache-dir "$C" compile "$TMP/tmpl.cu" --arch sm_90 -n 'twice<float>' -o "$TMP/t.cubin" --json -- -std=c++17 --use_fast_math
json_check "$TMP/out" 'j["names"]["twice<float>"].startswith("_Z")'

# LTO-IR.
expect_rc 0 "$KJIT" --cache-dir "$C" compile "$TMP/saxpy.cu" --arch sm_90 --ltoir -o "$TMP/a.ltoir" --json
json_check "$TMP/out" 'j["kind"] == "ltoir" and j["bytes"] > 0'
[ -s "$TMP/a.ltoir" ] || fail "no LTO-IR written"

# A compile error: exit 1, the NVRTC log on stderr naming the file, and in the JSON.
printf '__global__ void broken( { undeclared_thing; }\n' >"$TMP/broken.cu"
expect_rc 1 "$KJIT" --cache-dir "$C" compile "$TMP/broken.cu" --arch sm_90 -o "$TMP/x.cubin"
expect_grep 'broken.cu' "$TMP/err" "compile error message"
expect_grep 'error' "$TMP/err" "compile error log"
[ ! -e "$TMP/x.cubin" ] || fail "a failed compile wrote its output"
expect_rc 1 "$KJIT" --cache-dir "$C" compile "$TMP/broken.cu" --arch sm_90 -o "$TMP/x.cubin" --json
json_check "$TMP/out" 'not j["ok"] and j["status_name"] == "KJIT_ERROR_COMPILE" and "error" in j["log"]'

# Other failures: a missing file (3), a target or option NVRTC rejects (2), bad usage (2).
expect_rc 3 "$KJIT" --cache-dir "$C" compile "$TMP/nope.cu" --arch sm_90
expect_grep 'nope.cu' "$TMP/err" "missing file message"
expect_rc 2 "$KJIT" --cache-dir "$C" compile "$TMP/saxpy.cu" --arch sm_1 -o "$TMP/y.cubin"
expect_grep 'sm_1' "$TMP/err" "unsupported target message"
expect_rc 2 "$KJIT" --cache-dir "$C" compile "$TMP/saxpy.cu" --arch sm_90 -o "$TMP/y.cubin" -- --no-such-nvrtc-option
expect_rc 2 "$KJIT" --cache-dir "$C" compile "$TMP/saxpy.cu" --arch compute_90 --cubin
expect_rc 2 "$KJIT" --cache-dir "$C" compile "$TMP/saxpy.cu" --ptx --cubin
expect_rc 2 "$KJIT" --cache-dir "$C" compile
expect_rc 3 "$KJIT" --cache-dir "$C" compile "$TMP/saxpy.cu" --arch sm_90 -o "$TMP/no/such/dir/out.cubin"
expect_grep 'out.cubin' "$TMP/err" "unwritable output message"

finish
