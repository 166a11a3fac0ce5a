#!/usr/bin/env bash
# kjit link: sources and LTO-IR linked with nvJitLink through the cache, a hit the second
# time, the log of an undefined symbol, bad input and exit statuses.
set -eu
. "$(dirname "$0")/lib.sh"
C=$TMP/cache
cat >"$TMP/caller.cu" <<'CU'
extern __device__ float combine(float a, float b);
extern "C" __global__ void apply(const float* x, float* y, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = combine(x[i], y[i]);
}
CU
cat >"$TMP/callee.cu" <<'CU'
__device__ float combine(float a, float b) { return a * 3.0f + b; }
CU

# Two sources compiled to LTO-IR on the way and linked: a miss, then a hit with the same
# key and bytes.
expect_rc 0 "$KJIT" --cache-dir "$C" link "$TMP/caller.cu" "$TMP/callee.cu" --lto -a sm_90 -o "$TMP/a.cubin" --json
cp "$TMP/out" "$TMP/first.json"
json_check "$TMP/first.json" 'j["ok"] and j["tier"] == "compiled" and not j["hit"] and j["kernels"] == ["apply"]'
json_check "$TMP/first.json" 'len(j["key"]) == 64 and j["target"] == "sm_90" and j["inputs"] == 2 and j["link_ms"] > 0'
[ "$(head -c 4 "$TMP/a.cubin" | od -An -c | tr -d ' ')" = '177ELF' ] || fail "a.cubin is not an ELF file"
expect_rc 0 "$KJIT" --cache-dir "$C" link "$TMP/caller.cu" "$TMP/callee.cu" --lto -a sm_90 -o "$TMP/b.cubin" --json
json_check "$TMP/out" 'j["tier"] == "disk" and j["hit"]'
[ "$(json_get "$TMP/out" 'j["key"]')" = "$(json_get "$TMP/first.json" 'j["key"]')" ] || fail "second link has another key"
cmp -s "$TMP/a.cubin" "$TMP/b.cubin" || fail "the cached CUBIN differs from the linked one"

# LTO-IR files made by kjit compile link the same way; the status line on stderr.
expect_rc 0 "$KJIT" --cache-dir "$C" compile "$TMP/caller.cu" -a sm_90 --ltoir -o "$TMP/caller.ltoir" -- -rdc=true
expect_rc 0 "$KJIT" --cache-dir "$C" compile "$TMP/callee.cu" -a sm_90 --ltoir -o "$TMP/callee.ltoir" -- -rdc=true
expect_rc 0 "$KJIT" --cache-dir "$C" link "$TMP/caller.ltoir" "$TMP/callee.ltoir" --lto -a sm_90 -o "$TMP/c.cubin"
expect_grep 'cache miss, linked in' "$TMP/err" "link status line"
expect_grep 'kernel apply' "$TMP/err" "link status line"
expect_rc 0 "$KJIT" --cache-dir "$C" link "$TMP/caller.ltoir" "$TMP/callee.ltoir" --lto -a sm_90 -o "$TMP/c.cubin" -- -O3
expect_grep 'cache miss' "$TMP/err" "a link with another option"
expect_rc 0 "$KJIT" --cache-dir "$C" link "$TMP/caller.ltoir" "$TMP/callee.ltoir" --lto -a sm_90 -o "$TMP/c.cubin" -- -O3
expect_grep 'cache hit (disk)' "$TMP/err" "the same link again"
# PTX output with --lto, and sources linked as PTX with -rdc (no --lto).
expect_rc 0 "$KJIT" --cache-dir "$C" link "$TMP/caller.ltoir" "$TMP/callee.ltoir" --lto --ptx -a sm_90 -o "$TMP/l.ptx"
expect_grep '.entry apply' "$TMP/l.ptx" "linked PTX"
expect_rc 0 "$KJIT" --cache-dir "$C" link "$TMP/caller.cu" "$TMP/callee.cu" -a sm_90 -o "$TMP/p.cubin" --json
json_check "$TMP/out" 'j["kernels"] == ["apply"]'

# An undefined symbol: nvJitLink's log, status 1, nothing cached (the second try links again).
for _ in 1 2; do
  expect_rc 1 "$KJIT" --cache-dir "$C" link "$TMP/caller.ltoir" --lto -a sm_90 -o "$TMP/u.cubin"
  expect_grep 'Unresolved extern function' "$TMP/err" "undefined symbol log"
  expect_grep 'KJIT_ERROR_LINK' "$TMP/err" "undefined symbol status"
done
expect_rc 1 "$KJIT" --cache-dir "$C" link "$TMP/caller.ltoir" --lto -a sm_90 -o "$TMP/u.cubin" --json
json_check "$TMP/out" 'not j["ok"] and j["status_name"] == "KJIT_ERROR_LINK" and "Unresolved" in j["log"]'
[ ! -e "$TMP/u.cubin" ] || fail "a failed link wrote its output"

# Bad input and usage.
printf 'garbage' >"$TMP/g.cubin"
expect_rc 2 "$KJIT" --cache-dir "$C" link "$TMP/g.cubin" -a sm_90 -o "$TMP/g.out"
expect_grep 'not a CUBIN' "$TMP/err" "garbage CUBIN"
printf 'garbage' >"$TMP/g.ltoir"
expect_rc 1 "$KJIT" --cache-dir "$C" link "$TMP/g.ltoir" --lto -a sm_90 -o "$TMP/g.out"
expect_grep 'bad input' "$TMP/err" "garbage LTO-IR"
expect_rc 2 "$KJIT" --cache-dir "$C" link "$TMP/caller.ltoir" "$TMP/callee.ltoir" --lto -a sm_80 -o "$TMP/m.cubin"
expect_grep 'arch' "$TMP/err" "mismatched target"
expect_rc 2 "$KJIT" --cache-dir "$C" link "$TMP/caller.ltoir" "$TMP/callee.ltoir" --lto -a sm_90 -o "$TMP/m.cubin" -- -no-such-option
expect_rc 2 "$KJIT" --cache-dir "$C" link "$TMP/caller.ltoir" -a sm_90 --ptx
touch "$TMP/caller.unknown"
expect_rc 2 "$KJIT" --cache-dir "$C" link "$TMP/caller.unknown" -a sm_90
expect_rc 2 "$KJIT" --cache-dir "$C" link
expect_rc 3 "$KJIT" --cache-dir "$C" link "$TMP/missing.ptx" -a sm_90
expect_rc 0 "$KJIT" link --help
expect_grep 'Usage: kjit link' "$TMP/out" "link --help"
expect_rc 0 "$KJIT" --help
expect_grep 'link INPUT' "$TMP/out" "kjit --help"
KJIT_NVJITLINK_LIBRARY=/nonexistent/libnvJitLink.so expect_rc 3 "$KJIT" --cache-dir "$C" link "$TMP/caller.ltoir" "$TMP/callee.ltoir" --lto -a sm_90 -o "$TMP/n.cubin"
expect_grep '(nvJitLink) cannot be used' "$TMP/err" "missing nvJitLink"

finish
