#!/usr/bin/env bash
# kjit warm --grouped: compiles, without a GPU, the grouped-GEMM kernel a handle on a device
# of the given target picks for a shape, into the cache; warming again (or a shape that
# picks the same configuration) is a hit; bad specs are usage errors.
set -eu
. "$(dirname "$0")/lib.sh"
C=$TMP/cache

# A decode-like shape (4 rows per group: the cooperative 128x256 kernel), B as (G, N, K),
# bias and SiLU in the epilogue.
SPEC=128,2048,1536,512,b=nk,epi=bias+silu
expect_rc 0 "$KJIT" --cache-dir "$C" warm --grouped "$SPEC" --arch sm_90a -j 1
expect_grep "^\[1/1\] compiled grouped $SPEC (sm_90a) in " "$TMP/out" "warm --grouped line"
expect_grep '^warmed 1 kernels in .*: 1 compiled, 0 already cached, 0 failed$' "$TMP/out" "summary"
expect_rc 0 "$KJIT" --cache-dir "$C" cache stats --json
json_check "$TMP/out" 'j["entries"] == 1 and j["targets"]["sm_90a"]["entries"] == 1'

# Again, with a shape of another group count and row count that picks the same
# configuration (the kernel does not depend on G or rows): both are cache hits, with the key
# of the first compile; nothing new is stored.
expect_rc 0 "$KJIT" --cache-dir "$C" warm --grouped "$SPEC" --grouped 64,2048,1536,256,b=nk,epi=bias+silu \
  --arch sm_90a --json
json_check "$TMP/out" 'j["kernels"] == 2 and j["compiled"] == 0 and j["cached"] == 2 and j["failed"] == 0'
json_check "$TMP/out" 'len(set(r["key"] for r in j["results"])) == 1 and all(r["tier"] in ("disk", "memory") for r in j["results"])'
expect_rc 0 "$KJIT" --cache-dir "$C" cache stats --json
json_check "$TMP/out" 'j["entries"] == 1'

# The portable kernel for an sm_80 device is another configuration (another entry).
expect_rc 0 "$KJIT" --cache-dir "$C" warm --grouped 8,64,64,100,portable --arch sm_80 -q
expect_rc 0 "$KJIT" --cache-dir "$C" cache stats --json
json_check "$TMP/out" 'j["entries"] == 2 and j["targets"]["sm_80"]["entries"] == 1'

# Usage errors (exit 2), before any work.
expect_rc 2 "$KJIT" --cache-dir "$C" warm --grouped 8,64,64 --arch sm_90a
expect_grep "bad --grouped '8,64,64': expected G,K,N,ROWS first" "$TMP/err" "short spec"
expect_rc 2 "$KJIT" --cache-dir "$C" warm --grouped 8,64,64,100,epi=tanh --arch sm_90a
expect_grep "unknown epilogue piece 'tanh'" "$TMP/err" "bad piece"
expect_rc 2 "$KJIT" --cache-dir "$C" warm --grouped 0,64,64,100 --arch sm_90a
expect_grep "G is '0', not a number in range" "$TMP/err" "zero groups"
expect_rc 2 "$KJIT" --cache-dir "$C" warm --grouped 8,64,64,100
expect_grep "\-\-grouped needs --arch" "$TMP/err" "no arch"
# A target the kernels are not compiled for fails that job (exit 1), with the library's reason.
expect_rc 1 "$KJIT" --cache-dir "$C" warm --grouped 8,64,64,100 --arch sm_90
expect_grep "runs the sm_90a kernel; give target sm_90a" "$TMP/out" "sm_90 refused"
expect_rc 1 "$KJIT" --cache-dir "$C" warm --grouped 8,64,64,100 --arch compute_90
expect_grep "is not an exact architecture" "$TMP/out" "compute_90 refused"

finish
