#!/usr/bin/env bash
# kjit warm --grouped with dtype=fp8 and scale=rowwise|block128: compiles, without a GPU, the
# fp8 e4m3 grouped-GEMM kernels a handle on an sm_90a device picks for kjit_grouped_gemm_run_scaled
# with those scales; warming again compiles nothing; bad dtype or scale fields are usage errors.
set -eu
. "$(dirname "$0")/lib.sh"
C=$TMP/cache

ROW=8,4096,1536,512,b=nk,dtype=fp8,scale=rowwise
BLK=8,4096,1536,512,b=nk,dtype=fp8,scale=block128
expect_rc 0 "$KJIT" --cache-dir "$C" warm --grouped "$ROW" --grouped "$BLK" --arch sm_90a --json
json_check "$TMP/out" 'j["kernels"] == 2 and j["compiled"] == 2 and j["cached"] == 0 and j["failed"] == 0'
json_check "$TMP/out" 'len(set(r["key"] for r in j["results"])) == 2'
expect_rc 0 "$KJIT" --cache-dir "$C" cache stats --json
json_check "$TMP/out" 'j["entries"] == 2 and j["targets"]["sm_90a"]["entries"] == 2'

# Again: both are hits, nothing new is stored.
expect_rc 0 "$KJIT" --cache-dir "$C" warm --grouped "$ROW" --grouped "$BLK" --arch sm_90a -j 1
expect_grep '^warmed 2 kernels in .*: 0 compiled, 2 already cached, 0 failed$' "$TMP/out" "second warm"
expect_rc 0 "$KJIT" --cache-dir "$C" cache stats --json
json_check "$TMP/out" 'j["entries"] == 2'

# The bf16 kernel of the same shape is another configuration (dtype=bf16 is the default).
expect_rc 0 "$KJIT" --cache-dir "$C" warm --grouped 8,4096,1536,512,b=nk,dtype=bf16 --arch sm_90a -q
expect_rc 0 "$KJIT" --cache-dir "$C" cache stats --json
json_check "$TMP/out" 'j["entries"] == 3'

# Usage errors (exit 2), before any work.
expect_rc 2 "$KJIT" --cache-dir "$C" warm --grouped 8,64,64,100,dtype=fp16 --arch sm_90a
expect_grep "unknown dtype 'fp16' (bf16, fp8)" "$TMP/err" "bad dtype"
expect_rc 2 "$KJIT" --cache-dir "$C" warm --grouped 8,64,64,100,dtype=fp8,scale=tensor --arch sm_90a
expect_grep "unknown scale 'tensor' (none, rowwise, block128)" "$TMP/err" "bad scale"
expect_rc 2 "$KJIT" --cache-dir "$C" warm --grouped 8,64,64,100,scale=rowwise --arch sm_90a
expect_grep "scale= needs dtype=fp8" "$TMP/err" "scale without fp8"
expect_rc 0 "$KJIT" --cache-dir "$C" cache stats --json
json_check "$TMP/out" 'j["entries"] == 3'

finish
