#!/usr/bin/env bash
# Files left in the cache directory by hand or by another program: FIFOs and links where
# kjit's files go, a deleted index, temporaries of killed writers, a directory at an entry's
# path. Every command must finish (each runs under `timeout`), write nothing outside the
# cache directory, and report what it did truthfully.
set -eu
. "$(dirname "$0")/lib.sh"
C=$TMP/c
T="timeout 60"
write_saxpy "$TMP/saxpy.cu"
for d in A B C; do
  expect_rc 0 "$KJIT" --cache-dir "$C" compile "$TMP/saxpy.cu" --arch sm_90 -D "$d" -o /dev/null
done

# A stale temporary is removed by verify but is no corrupt entry (exit 0, not 5).
mkdir -p "$C/entries/ab"
printf 'partial' >"$C/entries/ab/.tmp-deadbeef-1-0"
touch -d '2 hours ago' "$C/entries/ab/.tmp-deadbeef-1-0"
expect_rc 0 $T "$KJIT" --cache-dir "$C" cache verify
expect_grep 'checked 3 entries: 0 corrupt' "$TMP/out" "verify with a stale temporary"
[ ! -e "$C/entries/ab/.tmp-deadbeef-1-0" ] || fail "verify left the stale temporary"

# A directory at an entry's path: reported corrupt once, removed, then gone.
KEY=$(python3 -c 'print("ab" + "0" * 62)')
mkdir -p "$C/entries/ab/$KEY/inner"
expect_rc 5 $T "$KJIT" --cache-dir "$C" cache verify
[ ! -e "$C/entries/ab/$KEY" ] || fail "verify did not remove the directory at an entry's path"
expect_rc 0 $T "$KJIT" --cache-dir "$C" cache verify
expect_grep 'checked 3 entries: 0 corrupt' "$TMP/out" "verify after the directory went"

# counters/pending as a FIFO, then as a link to a file outside: hit-only processes finish,
# the file outside is untouched, and their hits are counted.
mkfifo "$C/counters/pending" 2>/dev/null || { mkdir -p "$C/counters" && mkfifo "$C/counters/pending"; }
expect_rc 0 $T "$KJIT" --cache-dir "$C" compile "$TMP/saxpy.cu" --arch sm_90 -D A -o /dev/null
rm -f "$C/counters/pending"
printf 'root:x:0:0:root:/root:/bin/bash\n' >"$TMP/passwd-copy"
ln -s "$TMP/passwd-copy" "$C/counters/pending"
expect_rc 0 $T "$KJIT" --cache-dir "$C" compile "$TMP/saxpy.cu" --arch sm_90 -D B -o /dev/null
[ "$(cat "$TMP/passwd-copy")" = "root:x:0:0:root:/root:/bin/bash" ] ||
  fail "counters were appended through counters/pending's link"
expect_rc 0 $T "$KJIT" --cache-dir "$C" cache stats --json
json_check "$TMP/out" 'j["totals"]["disk_hits"] >= 2'

# A fact file that is a FIFO or a link to /dev/zero: compiles and hits still finish.
for f in "$C"/facts/*; do
  rm -f "$f"
  mkfifo "$f"
  break
done
for f in "$C"/facts/*; do
  [ -p "$f" ] && continue
  rm -f "$f"
  ln -s /dev/zero "$f"
done
expect_rc 0 $T "$KJIT" --cache-dir "$C" compile "$TMP/saxpy.cu" --arch sm_90 -D C -o /dev/null
expect_rc 0 $T "$KJIT" --cache-dir "$C" compile "$TMP/saxpy.cu" --arch sm_90 -D NEW -o /dev/null

# The index deleted beside its payload files: stats see them again, and prune removes them.
expect_rc 0 $T "$KJIT" --cache-dir "$C" cache stats --json
E=$(json_get "$TMP/out" 'j["entries"]')
rm -f "$C/kjit.db" "$C/kjit.db-wal" "$C/kjit.db-shm"
# (A hit reads the payload file alone and never opens the index: a miss creates it anew.)
expect_rc 0 $T "$KJIT" --cache-dir "$C" compile "$TMP/saxpy.cu" --arch sm_90 -D AFTER -o /dev/null
expect_rc 0 $T "$KJIT" --cache-dir "$C" cache stats --json
json_check "$TMP/out" 'j["entries"] > '"$E"
expect_rc 0 $T "$KJIT" --cache-dir "$C" cache prune --max-size 0
left=$(find "$C/entries" -type f ! -name '.*' | wc -l)
[ "$left" = 0 ] || fail "prune --max-size 0 left $left payload files"
# Deleted again with files in place: prune alone (it creates the index) removes them.
for d in A B; do
  expect_rc 0 "$KJIT" --cache-dir "$C" compile "$TMP/saxpy.cu" --arch sm_90 -D "$d" -o /dev/null
done
rm -f "$C/kjit.db" "$C/kjit.db-wal" "$C/kjit.db-shm"
expect_rc 0 $T "$KJIT" --cache-dir "$C" cache prune --max-size 0
left=$(find "$C/entries" -type f ! -name '.*' | wc -l)
[ "$left" = 0 ] || fail "prune --max-size 0 on a new index left $left payload files"

exit $((FAILURES > 0))
