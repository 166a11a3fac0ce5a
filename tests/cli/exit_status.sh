#!/usr/bin/env bash
# kjit: every exit status kjit(1) documents, command by command, and the commands that only
# read the cache create nothing (no directory, no database) where there is no cache.
set -eu
. "$(dirname "$0")/lib.sh"
C=$TMP/cache
write_saxpy "$TMP/saxpy.cu"
printf '__global__ void broken( { undeclared_thing; }\n' >"$TMP/broken.cu"
expect_rc 0 "$KJIT" --cache-dir "$C" compile "$TMP/saxpy.cu" --arch sm_90 -o /dev/null --json
KEY=$(json_get "$TMP/out" 'j["key"]')

# absent_after WHAT DIR : DIR must not exist after WHAT ran.
absent_after() {
  [ ! -e "$2" ] || fail "$1 created $2"
}

# ---- the commands that only read: no cache at DIR is reported, and nothing is created -----
N=$TMP/new/cache
expect_rc 0 "$KJIT" --cache-dir "$N" cache path
[ "$(cat "$TMP/out")" = "$N" ] || fail "cache path printed '$(cat "$TMP/out")'"
absent_after "cache path" "$TMP/new"
expect_rc 0 "$KJIT" --cache-dir "$N" cache path --json
json_check "$TMP/out" 'j["exists"] is False and j["state"] == "absent" and j["directory"] == "'"$N"'"'
absent_after "cache path --json" "$TMP/new"
# stats and ls show an empty cache (status 0); the others need one.
expect_rc 0 "$KJIT" --cache-dir "$N" cache stats
expect_grep '^disk tier  *absent: no cache here yet' "$TMP/out" "cache stats without a cache"
expect_grep '^kernels  *0$' "$TMP/out" "cache stats without a cache"
absent_after "cache stats" "$TMP/new"
expect_rc 0 "$KJIT" --cache-dir "$N" cache stats --json
json_check "$TMP/out" 'j["state"] == "absent" and j["entries"] == 0 and j["bytes"] == 0'
absent_after "cache stats --json" "$TMP/new"
expect_rc 0 "$KJIT" --cache-dir "$N" cache ls
expect_grep '^KEY ' "$TMP/out" "cache ls without a cache"
[ "$(wc -l <"$TMP/out")" = 1 ] || fail "cache ls without a cache listed rows"
absent_after "cache ls" "$TMP/new"
for sub in "show $KEY" verify "export $TMP/e.kjit"; do
  # shellcheck disable=SC2086
  expect_rc 3 "$KJIT" --cache-dir "$N" cache $sub
  expect_grep "no cache at '$N'" "$TMP/err" "cache $sub without a cache"
  absent_after "cache $sub" "$TMP/new"
done
[ ! -e "$TMP/e.kjit" ] || fail "cache export without a cache wrote a file"
expect_rc 0 "$KJIT" --cache-dir "$N" info
expect_grep '^ *absent: nothing has been stored there yet' "$TMP/out" "info without a cache"
expect_grep '^worker *not running' "$TMP/out" "info without a cache"
expect_rc 0 "$KJIT" --cache-dir "$N" info --json
json_check "$TMP/out" 'j["cache"]["state"] == "absent" and j["cache"]["entries"] == 0 and not j["worker"]["running"]'
absent_after "info" "$TMP/new"
echo '[ { "name": "saxpy", "file": "saxpy.cu", "targets": ["sm_90"] } ]' >"$TMP/m.json"
expect_rc 0 "$KJIT" --cache-dir "$N" warm "$TMP/m.json" --dry-run --json
json_check "$TMP/out" '[(r["ok"], r["cached"]) for r in j["results"]] == [(True, False)]'
absent_after "warm --dry-run" "$TMP/new"
# The default location is not created either.
expect_rc 0 "$KJIT" cache stats
expect_grep "^cache directory  *$XDG_CACHE_HOME/kjit$" "$TMP/out" "cache stats in the default location"
expect_rc 0 "$KJIT" info
absent_after "cache stats and info in the default location" "$XDG_CACHE_HOME"
# A directory without a database: no database is created in it.
mkdir "$TMP/empty-dir"
for sub in stats ls; do
  expect_rc 0 "$KJIT" --cache-dir "$TMP/empty-dir" cache "$sub"
done
expect_rc 3 "$KJIT" --cache-dir "$TMP/empty-dir" cache verify
expect_rc 0 "$KJIT" --cache-dir "$TMP/empty-dir" info
[ -z "$(ls -A "$TMP/empty-dir")" ] || fail "read-only commands wrote into an empty directory: $(ls -A "$TMP/empty-dir")"
# A location that cannot be created at all (the report in the issue this fixes): status 3.
expect_rc 3 "$KJIT" --cache-dir /proc/kjit-nope cache stats
expect_grep "no cache at '/proc/kjit-nope'" "$TMP/err" "cache stats in /proc"
expect_rc 3 "$KJIT" --cache-dir /proc/kjit-nope cache stats --json
[ ! -s "$TMP/out" ] || fail "cache stats without a cache printed a document"

# ---- a disabled or unusable disk tier: status 3 (stats and path report first) ------------
expect_rc 3 env KJIT_CACHE_DISABLE=1 "$KJIT" --cache-dir "$C" cache stats --json
json_check "$TMP/out" 'j["state"] == "disabled"'
expect_grep 'disabled' "$TMP/err" "cache stats with the disk tier disabled"
expect_rc 3 env KJIT_CACHE_DISABLE=1 "$KJIT" --cache-dir "$C" cache path --json
json_check "$TMP/out" 'j["state"] == "disabled"'
for sub in ls "show $KEY" "rm $KEY" "prune --max-size 1G" clear verify "export $TMP/e.kjit"; do
  # shellcheck disable=SC2086
  expect_rc 3 env KJIT_CACHE_DISABLE=1 "$KJIT" --cache-dir "$C" cache $sub
done
expect_rc 3 env KJIT_CACHE_DISABLE=1 "$KJIT" --cache-dir "$C" warm "$TMP/m.json"
expect_rc 0 env KJIT_CACHE_DISABLE=1 "$KJIT" --cache-dir "$C" info
# A cache directory others may write is not used (unavailable): stats says why, exits 3.
G=$TMP/group
expect_rc 0 "$KJIT" --cache-dir "$G" compile "$TMP/saxpy.cu" --arch sm_90 -o /dev/null
chmod 0770 "$G"
expect_rc 3 "$KJIT" --cache-dir "$G" cache stats
expect_grep '^disk tier  *unavailable: .*writable by group or others' "$TMP/out" "cache stats of an unusable cache"
expect_grep 'writable by group or others' "$TMP/err" "cache stats of an unusable cache"
expect_rc 3 "$KJIT" --cache-dir "$G" cache stats --json
json_check "$TMP/out" 'j["state"] == "unavailable" and "writable by group" in j["message"]'
expect_rc 3 "$KJIT" --cache-dir "$G" cache path
expect_rc 3 "$KJIT" --cache-dir "$G" cache ls
expect_rc 3 "$KJIT" --cache-dir "$G" warm "$TMP/m.json"
expect_rc 0 "$KJIT" --cache-dir "$G" info --json
json_check "$TMP/out" 'j["cache"]["state"] == "unavailable"'
# A compile still works without the disk tier (the library's promise): status 0.
expect_rc 0 "$KJIT" --cache-dir "$G" compile "$TMP/saxpy.cu" --arch sm_90 -o /dev/null
chmod 0700 "$G"
# A read-only cache: reading works, writing is status 3.
expect_rc 0 env KJIT_CACHE_READONLY=1 "$KJIT" --cache-dir "$C" cache stats
expect_rc 0 env KJIT_CACHE_READONLY=1 "$KJIT" --cache-dir "$C" cache ls
for sub in "rm $KEY" "prune --max-size 1G" clear; do
  # shellcheck disable=SC2086
  expect_rc 3 env KJIT_CACHE_READONLY=1 "$KJIT" --cache-dir "$C" cache $sub
  expect_grep 'read-only' "$TMP/err" "cache $sub on a read-only cache"
done

# ---- compile: 0, 1, 2, 3 -------------------------------------------------------------
expect_rc 0 "$KJIT" --cache-dir "$C" compile "$TMP/saxpy.cu" --arch sm_90 -o /dev/null
expect_rc 1 "$KJIT" --cache-dir "$C" compile "$TMP/broken.cu" --arch sm_90 -o /dev/null
printf '__global__ void k() {}\n\377\n' >"$TMP/latin1.cu"
expect_rc 1 "$KJIT" --cache-dir "$C" compile "$TMP/latin1.cu" --arch sm_90 -o /dev/null
expect_rc 2 "$KJIT" --cache-dir "$C" compile "$TMP/saxpy.cu" --arch sm_1 -o /dev/null
expect_rc 2 "$KJIT" --cache-dir "$C" compile "$TMP/saxpy.cu" --arch sm_90 -o /dev/null -- --no-such-option
expect_rc 2 "$KJIT" --cache-dir "$C" compile
expect_rc 3 "$KJIT" --cache-dir "$C" compile "$TMP/none.cu" --arch sm_90
expect_rc 3 "$KJIT" --cache-dir "$C" compile "$TMP/saxpy.cu" --arch sm_90 -o "$TMP/no/dir/x.cubin"

# ---- cache show and rm: 0, 2, 4, 5 ----------------------------------------------------
expect_rc 0 "$KJIT" --cache-dir "$C" cache show "$KEY"
expect_rc 2 "$KJIT" --cache-dir "$C" cache show not-hex
expect_rc 4 "$KJIT" --cache-dir "$C" cache show "$(printf '0%.0s' $(seq 64))"
expect_rc 4 "$KJIT" --cache-dir "$C" cache rm "$(printf '0%.0s' $(seq 64))"
expect_rc 2 "$KJIT" --cache-dir "$C" cache rm
D=$TMP/damaged
expect_rc 0 "$KJIT" --cache-dir "$D" compile "$TMP/saxpy.cu" --arch sm_90 -o /dev/null --json
DKEY=$(json_get "$TMP/out" 'j["key"]')
damage_largest_entry "$D"
expect_rc 5 "$KJIT" --cache-dir "$D" cache show "$DKEY"
expect_grep 'failed verification' "$TMP/err" "cache show of a corrupt entry"
expect_rc 4 "$KJIT" --cache-dir "$D" cache show "$DKEY"
expect_rc 0 "$KJIT" --cache-dir "$C" cache rm "$KEY"

# ---- cache verify: 0, 5 --------------------------------------------------------------
expect_rc 0 "$KJIT" --cache-dir "$C" compile "$TMP/saxpy.cu" --arch sm_90 -o /dev/null
expect_rc 0 "$KJIT" --cache-dir "$C" cache verify
expect_rc 0 "$KJIT" --cache-dir "$D" compile "$TMP/saxpy.cu" --arch sm_90 -o /dev/null
damage_largest_entry "$D"
expect_rc 5 "$KJIT" --cache-dir "$D" cache verify

# ---- cache prune and clear: 0, 2 -----------------------------------------------------
expect_rc 0 "$KJIT" --cache-dir "$TMP/p" cache prune --max-size 1G
expect_rc 2 "$KJIT" --cache-dir "$TMP/p" cache prune --max-size 1.5G
expect_rc 0 "$KJIT" --cache-dir "$TMP/p" cache clear
expect_rc 2 "$KJIT" --cache-dir "$TMP/p" cache clear extra

# ---- cache export and import: 0, 2, 3, 5 ---------------------------------------------
expect_rc 0 "$KJIT" --cache-dir "$C" cache export "$TMP/all.kjit"
expect_rc 2 "$KJIT" --cache-dir "$C" cache export
expect_rc 3 "$KJIT" --cache-dir "$C" cache export "$TMP/no/dir/all.kjit"
expect_rc 0 "$KJIT" --cache-dir "$TMP/i1" cache import "$TMP/all.kjit"
expect_rc 2 "$KJIT" --cache-dir "$TMP/i1" cache import
expect_rc 3 "$KJIT" --cache-dir "$TMP/i1" cache import "$TMP/none.kjit"
# A file that is not an export (text, an empty file, an export of another format version)
# is bad input (3), not corrupt entries (5); nothing is imported.
for bad in text empty version; do
  case $bad in
    text) echo 'this is not an export' >"$TMP/bad.kjit" ;;
    empty) : >"$TMP/bad.kjit" ;;
    version) python3 - "$TMP/all.kjit" "$TMP/bad.kjit" <<'PY' ;;
import struct, sys
data = bytearray(open(sys.argv[1], "rb").read())
struct.pack_into("<Q", data, 8, 999)
open(sys.argv[2], "wb").write(data)
PY
  esac
  expect_rc 3 "$KJIT" --cache-dir "$TMP/i2" cache import "$TMP/bad.kjit" --json
  expect_grep "cannot import '$TMP/bad.kjit'" "$TMP/err" "import of a file that is not an export ($bad)"
done
expect_grep 'format version 999' "$TMP/err" "import of another format version"
expect_rc 0 "$KJIT" --cache-dir "$TMP/i2" cache stats --json
json_check "$TMP/out" 'j["entries"] == 0'
# Damage after the first record is corrupt entries (5): the records before it are kept.
expect_rc 0 "$KJIT" --cache-dir "$C" compile "$TMP/saxpy.cu" --arch sm_80 -o /dev/null
expect_rc 0 "$KJIT" --cache-dir "$C" cache export "$TMP/two.kjit"
head -c "$(( $(stat -c %s "$TMP/two.kjit") - 100 ))" "$TMP/two.kjit" >"$TMP/cut.kjit"
expect_rc 5 "$KJIT" --cache-dir "$TMP/i3" cache import "$TMP/cut.kjit" --json
json_check "$TMP/out" 'j["damaged"] and j["imported"] == 1'

# ---- warm: 0, 1, 2, 3 ----------------------------------------------------------------
expect_rc 0 "$KJIT" --cache-dir "$C" warm "$TMP/m.json"
echo '[ { "name": "broken", "file": "broken.cu", "targets": ["sm_90"] } ]' >"$TMP/broken.json"
expect_rc 1 "$KJIT" --cache-dir "$C" warm "$TMP/broken.json"
expect_rc 2 "$KJIT" --cache-dir "$C" warm
expect_rc 2 "$KJIT" --cache-dir "$C" warm "$TMP/m.json" -j 0
expect_rc 3 "$KJIT" --cache-dir "$C" warm "$TMP/none.json"
echo '{ "kernels": [' >"$TMP/bad.json"
expect_rc 3 "$KJIT" --cache-dir "$C" warm "$TMP/bad.json"

# ---- info, help, usage: 0 and 2 --------------------------------------------------------
expect_rc 0 "$KJIT" --cache-dir "$C" info
expect_rc 2 "$KJIT" --cache-dir "$C" info extra
expect_rc 0 "$KJIT" help
expect_rc 2 "$KJIT" help frobnicate
expect_rc 2 "$KJIT"
expect_rc 2 "$KJIT" frobnicate

finish
