#!/usr/bin/env bash
# kjit compile through the compile worker: NVRTC's crash on fuzz/nvrtc-crash/ is a status
# and the tool lives; the next compile gets a new worker; info and cache stats show it; the
# CUBIN is the same byte for byte as an in-process compile's.
set -eu
. "$(dirname "$0")/lib.sh"
root=$(cd "$(dirname "$0")/../.." && pwd)
C=$TMP/cache
export KJIT_WORKER_IDLE_S=${KJIT_WORKER_IDLE_S:-20}
unset KJIT_COMPILE_MODE
write_saxpy "$TMP/saxpy.cu"
cp "$root/fuzz/nvrtc-crash/malformed-template.cu" "$TMP/crash.cu"

# No worker yet: info says so and does not start one.
expect_rc 0 "$KJIT" --cache-dir "$C" info
expect_grep '^worker *not running' "$TMP/out"

# The crash: a clear message and an ordinary failure exit status, not a signal.
rc=0
"$KJIT" --cache-dir "$C" compile "$TMP/crash.cu" --arch sm_90 -n 't<int>' >"$TMP/out" 2>"$TMP/err" || rc=$?
[ "$rc" = 3 ] || fail "the crashing input exited $rc, expected 3 (kjit(1): KJIT_COMPILE_MODE)"
expect_grep 'the compiler crashed on this input (signal 11' "$TMP/err"
expect_grep 'KJIT_ERROR_NVRTC' "$TMP/err"

# The next valid compile works, on a new worker that counts one crash before it.
expect_rc 0 "$KJIT" --cache-dir "$C" compile "$TMP/saxpy.cu" --arch sm_90 -o "$TMP/w.cubin"
expect_rc 0 "$KJIT" --cache-dir "$C" info
expect_grep '^worker *running: pid [0-9]*' "$TMP/out"
expect_grep '1 earlier worker crashed' "$TMP/out"
expect_rc 0 "$KJIT" --cache-dir "$C" cache stats --json
json_check "$TMP/out" 'j["worker"]["running"] and j["worker"]["crashes"] == 1 and j["worker"]["compiles"] == 1'

# The same bytes as NVRTC in the tool's own process.
KJIT_COMPILE_MODE=inprocess expect_rc 0 "$KJIT" --cache-dir "$TMP/other" compile "$TMP/saxpy.cu" --arch sm_90 -o "$TMP/i.cubin"
cmp -s "$TMP/w.cubin" "$TMP/i.cubin" || fail "worker and in-process CUBINs differ"

# A "worker" that never starts costs a bounded wait (kjit(1): KJIT_COMPILE_MODE): one that
# closes its ready pipe and lives on, one that floods it. Worker mode fails with a
# status, auto mode compiles in the process.
printf '#!/bin/sh\nexec 3>&-\nsleep 100\n' >"$TMP/hang.sh"
printf '#!/bin/sh\nhead -c 100000 /dev/zero >&3\nsleep 100\n' >"$TMP/noise.sh"
chmod +x "$TMP/hang.sh" "$TMP/noise.sh"
for s in hang noise; do
  KJIT_WORKER=$TMP/$s.sh KJIT_COMPILE_MODE=worker expect_rc 3 timeout 30 "$KJIT" --cache-dir "$TMP/c-$s" \
    compile "$TMP/saxpy.cu" --arch sm_90 --ptx -o /dev/null
  expect_grep 'the compile worker cannot be used' "$TMP/err" "$s.sh in worker mode"
  KJIT_WORKER=$TMP/$s.sh expect_rc 0 timeout 30 "$KJIT" --cache-dir "$TMP/c-$s" \
    compile "$TMP/saxpy.cu" --arch sm_90 --ptx -o /dev/null
done
finish
