#!/usr/bin/env bash
# A header edited through a shared memory mapping whose page is already dirty keeps its size,
# modification and change time (ext4; tmpfs never stamps such writes). A new process must not
# take the record's stamps for the bytes: its first use of the header hashes it, so the edit
# is a miss that gives the new code.
set -eu
. "$(dirname "$0")/lib.sh"

src=$TMP/src
mkdir -p "$src"
printf '#define V 111\n' >"$src/h.h"
printf '#include "h.h"\n__global__ void k(int* p) { *p = V; }\n' >"$src/k.cu"
export KJIT_CACHE_DIR=$TMP/cache
value() { grep -o -E '\b(111|122)\b' "$1" | head -1; }

python3 - "$src/h.h" "$TMP" <<'PY' &
import mmap, os, sys, time
path, tmp = sys.argv[1], sys.argv[2]
with open(path, "r+b") as f:
    m = mmap.mmap(f.fileno(), 0)
    m[0:1] = b"#"  # the first write: the page is dirty and writable now
    open(os.path.join(tmp, "ready"), "w").close()
    deadline = time.time() + 120
    while not os.path.exists(os.path.join(tmp, "go")) and time.time() < deadline:
        time.sleep(0.01)
    m[11:13] = b"22"  # "#define V 122", through the same mapping
    open(os.path.join(tmp, "edited"), "w").close()
    while not os.path.exists(os.path.join(tmp, "done")) and time.time() < deadline:
        time.sleep(0.01)
    m.close()
PY
editor=$!
while [ ! -e "$TMP/ready" ]; do sleep 0.01; done
sleep 2.2  # settled: its stamp is trusted from now on
cd "$src"
"$KJIT" compile k.cu --arch sm_90 --ptx -o "$TMP/a.ptx" >/dev/null 2>"$TMP/err"
[ "$(value "$TMP/a.ptx")" = 111 ] || fail "first compile does not hold 111"
"$KJIT" compile k.cu --arch sm_90 --ptx -o "$TMP/b.ptx" >/dev/null 2>"$TMP/err"
expect_grep 'cache hit' "$TMP/err" "the second compile"
before=$(stat -c '%s %y %z %i' h.h)
touch "$TMP/go"
while [ ! -e "$TMP/edited" ]; do sleep 0.01; done
after=$(stat -c '%s %y %z %i' h.h)
if [ "$before" != "$after" ]; then
  echo "skipped: this file system stamped the write through the mapping ($before -> $after)"
else
  "$KJIT" compile k.cu --arch sm_90 --ptx -o "$TMP/c.ptx" >/dev/null 2>"$TMP/err"
  [ "$(value "$TMP/c.ptx")" = 122 ] ||
    fail "a new process served the code of the header before its edit through a mapping"
  expect_grep 'cache miss' "$TMP/err" "the compile after the edit"
fi
touch "$TMP/done"
wait "$editor"
finish
