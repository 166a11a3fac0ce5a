#!/usr/bin/env bash
# kjit cache: path, stats, ls, show, rm, verify, export/import between two caches, prune,
# clear; exit statuses and JSON output.
set -eu
. "$(dirname "$0")/lib.sh"
A=$TMP/a
B=$TMP/b
write_saxpy "$TMP/saxpy.cu"
for arch in sm_80 sm_90; do
  expect_rc 0 "$KJIT" --cache-dir "$A" compile "$TMP/saxpy.cu" --arch "$arch" -o /dev/null
done
expect_rc 0 "$KJIT" --cache-dir "$A" compile "$TMP/saxpy.cu" --arch sm_90 -D TWICE -o /dev/null

# path
expect_rc 0 "$KJIT" --cache-dir "$A" cache path
[ "$(cat "$TMP/out")" = "$A" ] || fail "cache path printed '$(cat "$TMP/out")', expected $A"
expect_rc 0 "$KJIT" cache path --json --cache-dir "$A"
json_check "$TMP/out" 'j["directory"] == "'"$A"'" and j["database"].endswith("kjit.db") and j["exists"]'
# The default location follows the environment.
expect_rc 0 env KJIT_CACHE_DIR="$TMP/env-cache" "$KJIT" cache path
[ "$(cat "$TMP/out")" = "$TMP/env-cache" ] || fail "KJIT_CACHE_DIR not honoured: $(cat "$TMP/out")"
expect_rc 0 "$KJIT" cache path
[ "$(cat "$TMP/out")" = "$XDG_CACHE_HOME/kjit" ] || fail "XDG_CACHE_HOME not honoured: $(cat "$TMP/out")"

# ls: three entries, most recently used first.
expect_rc 0 "$KJIT" --cache-dir "$A" cache ls --json
cp "$TMP/out" "$TMP/ls.json"
json_check "$TMP/ls.json" 'len(j["entries"]) == 3 and all(len(e["key"]) == 64 and e["kernels"] == ["saxpy"] and e["bytes"] > 0 for e in j["entries"])'
json_check "$TMP/ls.json" 'sorted(e["target"] for e in j["entries"]) == ["sm_80", "sm_90", "sm_90"]'
expect_rc 0 "$KJIT" --cache-dir "$A" cache ls
[ "$(wc -l <"$TMP/out")" = 4 ] || fail "cache ls printed $(wc -l <"$TMP/out") lines, expected a header and 3 rows"
expect_grep '^KEY ' "$TMP/out" "cache ls header"
KEY=$(json_get "$TMP/ls.json" '[e["key"] for e in j["entries"] if e["target"] == "sm_80"][0]')

# show: by full key and by prefix; outputs; missing and malformed keys.
expect_rc 0 "$KJIT" --cache-dir "$A" cache show "$KEY" --json
json_check "$TMP/out" 'j["key"] == "'"$KEY"'" and j["target"] == "sm_80" and j["sizes"]["cubin"] > 0 and j["sizes"]["ptx"] > 0'
json_check "$TMP/out" 'j["kernels"] == ["saxpy"] and isinstance(j["metadata"], dict)'
expect_rc 0 "$KJIT" --cache-dir "$A" cache show "${KEY:0:12}"
expect_grep "^key  *$KEY" "$TMP/out" "cache show by prefix"
expect_rc 0 "$KJIT" --cache-dir "$A" cache show "$KEY" --ptx
expect_grep '\.target sm_80' "$TMP/out" "cache show --ptx"
expect_rc 0 "$KJIT" --cache-dir "$A" cache show "$KEY" --cubin -o "$TMP/e.cubin"
[ "$(head -c 4 "$TMP/e.cubin" | od -An -c | tr -d ' ')" = '177ELF' ] || fail "cache show -o did not write a CUBIN"
expect_rc 4 "$KJIT" --cache-dir "$A" cache show "$(printf '0%.0s' $(seq 64))"
expect_grep 'no entry' "$TMP/err" "cache show of a missing key"
expect_rc 2 "$KJIT" --cache-dir "$A" cache show not-a-key
expect_rc 2 "$KJIT" --cache-dir "$A" cache show

# export from A, import into B: the same keys, and B's entries are hits.
expect_rc 0 "$KJIT" --cache-dir "$A" cache export "$TMP/all.kjit" --json
json_check "$TMP/out" 'j["exported"] == 3 and j["bytes"] > 0'
expect_rc 0 "$KJIT" --cache-dir "$B" cache import "$TMP/all.kjit" --json
json_check "$TMP/out" 'j["imported"] == 3 and j["rejected"] == 0 and not j["damaged"]'
expect_rc 0 "$KJIT" --cache-dir "$B" cache ls --json
python3 - "$TMP/ls.json" "$TMP/out" <<'PY' || fail "keys differ after export/import"
import json, sys
a = sorted(e["key"] for e in json.load(open(sys.argv[1]))["entries"])
b = sorted(e["key"] for e in json.load(open(sys.argv[2]))["entries"])
sys.exit(0 if a == b else 1)
PY
expect_rc 0 "$KJIT" --cache-dir "$B" compile "$TMP/saxpy.cu" --arch sm_80 -o /dev/null --json
json_check "$TMP/out" 'j["tier"] == "disk" and j["key"] == "'"$KEY"'"'
expect_rc 3 "$KJIT" --cache-dir "$B" cache import "$TMP/no-such-file.kjit"
expect_grep 'no-such-file.kjit' "$TMP/err" "import of a missing file"
# That file was unsigned, and the import says what that means.
expect_rc 0 "$KJIT" --cache-dir "$TMP/b2" cache import "$TMP/all.kjit"
expect_grep 'all.kjit is unsigned: its records were checked for damage and consistency, not for who wrote them' \
  "$TMP/err" "import of an unsigned file"
expect_rc 0 "$KJIT" --cache-dir "$TMP/b3" cache import "$TMP/all.kjit" --json
json_check "$TMP/out" 'not j["signatures_checked"] and any("is unsigned" in w for w in j["warnings"])'

# Signed exports: KJIT_EXPORT_KEY signs every record; with it set, import takes only records
# signed with it.
FLEET=0123456789abcdef-fleet-secret
expect_rc 0 env KJIT_EXPORT_KEY=$FLEET "$KJIT" --cache-dir "$A" cache export "$TMP/signed.kjit" --json
json_check "$TMP/out" 'j["exported"] == 3 and j["signed"]'
expect_rc 0 env KJIT_EXPORT_KEY=$FLEET "$KJIT" --cache-dir "$A" cache export "$TMP/signed2.kjit"
expect_grep 'signed with KJIT_EXPORT_KEY' "$TMP/out" "signed export"
expect_rc 0 env KJIT_EXPORT_KEY=$FLEET "$KJIT" --cache-dir "$TMP/s1" cache import "$TMP/signed.kjit" --json
json_check "$TMP/out" 'j["imported"] == 3 and j["rejected"] == 0 and j["signatures_checked"] and j["warnings"] == []'
expect_rc 5 env KJIT_EXPORT_KEY=another-secret-of-some-length "$KJIT" --cache-dir "$TMP/s2" cache import "$TMP/signed.kjit"
expect_grep 'imported 0 entries from .*, rejected 3' "$TMP/out" "import with the wrong key"
expect_grep 'does not verify with KJIT_EXPORT_KEY' "$TMP/err" "import with the wrong key"
expect_rc 5 env KJIT_EXPORT_KEY=$FLEET "$KJIT" --cache-dir "$TMP/s3" cache import "$TMP/all.kjit" --json
json_check "$TMP/out" 'j["imported"] == 0 and j["rejected"] == 3'
expect_grep 'rejected: unsigned' "$TMP/err" "unsigned file with a key"
expect_rc 0 "$KJIT" --cache-dir "$TMP/s4" cache import "$TMP/signed.kjit"
expect_grep 'signatures were not checked' "$TMP/err" "signed file without a key"
# One byte of a signed record changed (its SHA-256 recomputed, as a forger would): rejected.
python3 - "$TMP/signed.kjit" "$TMP/tampered.kjit" <<'PY' || fail "could not tamper with the export file"
import hashlib, struct, sys
data = bytearray(open(sys.argv[1], "rb").read())
at = 16
n = struct.unpack_from("<Q", data, at)[0]
rec = bytearray(data[at + 8:at + 8 + n])
rec[n // 2] ^= 1
data[at + 8:at + 8 + n] = rec
data[at + 8 + n:at + 8 + n + 32] = hashlib.sha256(rec).digest()
open(sys.argv[2], "wb").write(data)
PY
expect_rc 5 env KJIT_EXPORT_KEY=$FLEET "$KJIT" --cache-dir "$TMP/s5" cache import "$TMP/tampered.kjit" --json
json_check "$TMP/out" 'j["imported"] == 2 and j["rejected"] == 1'
# A key shorter than 16 bytes is refused, saying so.
expect_rc 3 env KJIT_EXPORT_KEY=short "$KJIT" --cache-dir "$A" cache export "$TMP/short.kjit"
expect_grep 'at least 16 bytes' "$TMP/err" "export with a short key"
[ ! -e "$TMP/short.kjit" ] || fail "an export with a short key wrote a file"
expect_rc 3 env KJIT_EXPORT_KEY=short "$KJIT" --cache-dir "$TMP/s6" cache import "$TMP/signed.kjit"
expect_grep 'at least 16 bytes' "$TMP/err" "import with a short key"
# The help says what an export file is.
expect_rc 0 "$KJIT" cache import --help
expect_grep 'An export file is trusted input' "$TMP/out" "cache import --help"
expect_grep "kjit warm" "$TMP/out" "cache import --help"
expect_grep 'KJIT_EXPORT_KEY' "$TMP/out" "cache import --help"

# An export file must be a regular file: a device or a directory is refused before reading.
expect_rc 3 bounded "$KJIT" --cache-dir "$B" cache import /dev/zero
expect_grep "'/dev/zero': not a regular file (a character device)" "$TMP/err" "import of /dev/zero"
expect_rc 3 bounded "$KJIT" --cache-dir "$B" cache import "$TMP"
expect_grep "not a regular file (a directory)" "$TMP/err" "import of a directory"

# A damaged export file: entries before the damage are imported, the command says so.
head -c "$(( $(stat -c %s "$TMP/all.kjit") - 100 ))" "$TMP/all.kjit" >"$TMP/cut.kjit"
expect_rc 5 "$KJIT" --cache-dir "$TMP/c" cache import "$TMP/cut.kjit" --json
json_check "$TMP/out" 'j["damaged"] or j["rejected"] > 0'
expect_grep 'cut.kjit' "$TMP/err" "import of a damaged file"

# rm
expect_rc 0 "$KJIT" --cache-dir "$B" cache rm "${KEY:0:10}"
expect_grep "removed $KEY" "$TMP/out" "cache rm"
expect_rc 4 "$KJIT" --cache-dir "$B" cache rm "$KEY"
expect_rc 0 "$KJIT" --cache-dir "$B" cache stats --json
json_check "$TMP/out" 'j["entries"] == 2'

# verify: a clean cache, then one with a damaged blob.
expect_rc 0 "$KJIT" --cache-dir "$A" cache verify --json
json_check "$TMP/out" 'j["checked"] == 3 and j["corrupt"] == 0 and j["removed"] == []'
damage_largest_entry "$A"
expect_rc 5 "$KJIT" --cache-dir "$A" cache verify --json
json_check "$TMP/out" 'j["checked"] == 3 and j["corrupt"] == 1 and len(j["removed"]) == 1'
expect_rc 0 "$KJIT" --cache-dir "$A" cache verify
expect_grep 'checked 2 entries: 0 corrupt' "$TMP/out" "cache verify after removal"

# Entries whose payload files were swapped (contents as written): each file names the key it
# was written for and its checksums are bound to it, so verify counts both corrupt.
swap_keys() {  # DIR: swaps the payload files of the first two entries
  python3 - "$1" <<'PY' || fail "could not swap entries in $1"
import os, sys
files = sorted(os.path.join(d, f) for d, _, fs in os.walk(os.path.join(sys.argv[1], "entries"))
               for f in fs if not f.startswith("."))
a, b = files[:2]
os.rename(a, a + ".swap")
os.rename(b, a)
os.rename(a + ".swap", b)
PY
}
R=$TMP/r
expect_rc 0 "$KJIT" --cache-dir "$R" compile "$TMP/saxpy.cu" --arch sm_80 -o /dev/null
expect_rc 0 "$KJIT" --cache-dir "$R" compile "$TMP/saxpy.cu" --arch sm_90 -o /dev/null
expect_rc 0 "$KJIT" --cache-dir "$R" compile "$TMP/saxpy.cu" --arch sm_90 -D TWICE -o /dev/null
swap_keys "$R"

# verify on a read-only cache (KJIT_CACHE_READONLY, or a directory that cannot be written):
# it checks everything and reports, and removes nothing.
expect_rc 5 env KJIT_CACHE_READONLY=1 "$KJIT" --cache-dir "$R" cache verify --json
json_check "$TMP/out" 'j["read_only"] and j["checked"] == 3 and j["corrupt"] == 2 and j["removed"] == []'
json_check "$TMP/out" 'len(j["corrupt_not_removed"]) == 2 and all(len(e["key"]) == 64 for e in j["corrupt_not_removed"])'
expect_rc 5 env KJIT_CACHE_READONLY=1 "$KJIT" --cache-dir "$R" cache verify
expect_grep 'checked 3 entries: 2 corrupt (not removed: the cache is read-only)' "$TMP/out" "read-only verify"
expect_grep '^corrupt, not removed (read-only): ' "$TMP/out" "read-only verify names the entries"
expect_rc 0 "$KJIT" --cache-dir "$R" cache ls --json
json_check "$TMP/out" 'len(j["entries"]) == 3'
# A directory this user cannot write (root writes anywhere: run as nobody then).
U=$TMP/u
cp -r "$R" "$U"
chmod 0500 "$U"
as_user=()
if [ "$(id -u)" = 0 ]; then
  if command -v setpriv >/dev/null; then
    chmod 0711 "$TMP"
    chown -R 65534:65534 "$U"
    as_user=(setpriv --reuid=65534 --regid=65534 --clear-groups)
  else
    echo "note: running as root without setpriv; skipping the unwritable-directory check" >&2
    U=
  fi
fi
if [ -n "$U" ]; then
  expect_rc 5 "${as_user[@]}" "$KJIT" --cache-dir "$U" cache verify --json
  json_check "$TMP/out" 'j["read_only"] and j["checked"] == 3 and j["corrupt"] == 2 and j["removed"] == []'
  expect_rc 0 "${as_user[@]}" "$KJIT" --cache-dir "$U" cache ls --json
  json_check "$TMP/out" 'len(j["entries"]) == 3'
  chmod 0700 "$U"
fi
# Read-write, the same two are found and removed; the third stays.
expect_rc 5 "$KJIT" --cache-dir "$R" cache verify --json
json_check "$TMP/out" 'not j["read_only"] and j["checked"] == 3 and j["corrupt"] == 2 and len(j["removed"]) == 2'
expect_rc 0 env KJIT_CACHE_READONLY=1 "$KJIT" --cache-dir "$R" cache verify
expect_grep 'checked 1 entries: 0 corrupt (read-only cache)' "$TMP/out" "clean read-only verify"

# prune to a size: least recently used entries go first.
expect_rc 0 "$KJIT" --cache-dir "$TMP/p" compile "$TMP/saxpy.cu" --arch sm_80 -o /dev/null
sleep 1.1
expect_rc 0 "$KJIT" --cache-dir "$TMP/p" compile "$TMP/saxpy.cu" --arch sm_90 -o /dev/null --json
NEWEST=$(json_get "$TMP/out" 'j["key"]')
expect_rc 0 "$KJIT" --cache-dir "$TMP/p" cache ls --json
ONE=$(json_get "$TMP/out" '[e["bytes"] for e in j["entries"] if e["key"] == "'"$NEWEST"'"][0]')
expect_rc 0 "$KJIT" --cache-dir "$TMP/p" cache prune --max-size "$ONE" --json
json_check "$TMP/out" 'j["removed"] == 1 and j["entries"] == 1 and j["bytes"] <= '"$ONE"
expect_rc 0 "$KJIT" --cache-dir "$TMP/p" cache ls --json
json_check "$TMP/out" '[e["key"] for e in j["entries"]] == ["'"$NEWEST"'"]'
expect_rc 0 "$KJIT" --cache-dir "$TMP/p" cache prune --max-size 1G
expect_grep 'removed 0 entries' "$TMP/out" "prune below the limit"
expect_rc 2 "$KJIT" --cache-dir "$TMP/p" cache prune --max-size 12X
expect_rc 2 "$KJIT" --cache-dir "$TMP/p" cache prune
expect_rc 0 "$KJIT" --cache-dir "$TMP/p" cache prune --max-size 0
expect_rc 0 "$KJIT" --cache-dir "$TMP/p" cache stats --json
json_check "$TMP/out" 'j["entries"] == 0'

# clear
expect_rc 0 "$KJIT" --cache-dir "$B" cache clear --json
json_check "$TMP/out" 'j["removed"] == 2'
expect_rc 0 "$KJIT" --cache-dir "$B" cache ls --json
json_check "$TMP/out" 'j["entries"] == []'

# A cache nobody has used yet is not there to read: the commands that only read say so
# (exit 3) and create nothing (tests/cli/exit_status.sh checks every one of them).
expect_rc 0 "$KJIT" --cache-dir "$TMP/fresh1" cache ls --json
json_check "$TMP/out" 'j["entries"] == [] and j["dependency_records"] == []' 
[ ! -e "$TMP/fresh1" ] || fail "cache ls created $TMP/fresh1"
# An empty cache (one whose only entries were removed) exports an empty file.
expect_rc 0 "$KJIT" --cache-dir "$B" cache export "$TMP/empty.kjit" --json
json_check "$TMP/out" 'j["exported"] == 0'

# A disabled disk tier is an error for commands that need it, with the reason.
expect_rc 3 env KJIT_CACHE_DISABLE=1 "$KJIT" --cache-dir "$A" cache ls
expect_grep 'KJIT_CACHE_DISABLE' "$TMP/err" "cache ls with the disk tier disabled"
expect_rc 2 "$KJIT" --cache-dir "$A" cache frobnicate
expect_rc 2 "$KJIT" --cache-dir "$A" cache

# Kernels and dependency records apart: a program with #include leaves a record (target
# "manifest") beside its kernel; ls lists the kernels and counts the records.
D=$TMP/deps
mkdir -p "$TMP/dsrc"
printf '#define V 3\n' >"$TMP/dsrc/v.h"
printf '#include "v.h"\nextern "C" __global__ void dk(float* x) { x[0] = V; }\n' >"$TMP/dsrc/dk.cu"
expect_rc 0 "$KJIT" --cache-dir "$D" compile "$TMP/dsrc/dk.cu" --arch sm_90 -o "$TMP/dk.cubin"
expect_rc 0 "$KJIT" --cache-dir "$D" compile "$TMP/saxpy.cu" --arch sm_90 -o "$TMP/sx.cubin"
expect_rc 0 "$KJIT" --cache-dir "$D" cache ls
[ "$(grep -c ' sm_90 ' "$TMP/out")" = 2 ] || fail "cache ls does not list the two kernels"
! grep -q ' manifest ' "$TMP/out" || fail "cache ls lists a dependency record among the kernels"
expect_grep '^(+ 1 dependency record, .*--all lists them)$' "$TMP/out" "cache ls footer"
expect_rc 0 "$KJIT" --cache-dir "$D" cache ls --all
expect_grep '^dependency records (what NVRTC read' "$TMP/out" "cache ls --all"
expect_grep ' manifest ' "$TMP/out" "cache ls --all lists the record"
expect_rc 0 "$KJIT" --cache-dir "$D" cache ls --json
json_check "$TMP/out" 'len(j["entries"]) == 2 and len(j["dependency_records"]) == 1 and all(e["target"] == "sm_90" for e in j["entries"])'
expect_rc 0 "$KJIT" --cache-dir "$D" cache stats
expect_grep '^kernels  *2$' "$TMP/out" "cache stats kernels"
expect_grep '^dependency records  *1, ' "$TMP/out" "cache stats records"
! grep -q 'manifest' "$TMP/out" || fail "cache stats shows 'manifest' as a target"
expect_rc 0 "$KJIT" --cache-dir "$D" cache stats --json
json_check "$TMP/out" 'j["entries"] == 2 and j["dependency_records"]["entries"] == 1 and list(j["targets"]) == ["sm_90"] and j["targets"]["sm_90"]["entries"] == 2'

# cache path prints the directory, as its help says (the database with --json).
expect_rc 0 "$KJIT" cache --help
expect_grep 'path  *print the cache directory (--json: also its database file' "$TMP/out" "cache path help"
expect_rc 0 "$KJIT" --cache-dir "$D" cache path
[ "$(cat "$TMP/out")" = "$D" ] || fail "cache path printed '$(cat "$TMP/out")'"

# verify says which payload files it indexed again (a file whose row is gone).
expect_rc 0 "$KJIT" --cache-dir "$D" compile "$TMP/saxpy.cu" --arch sm_90 -o "$TMP/sx.cubin" --json
orphan=$(json_get "$TMP/out" 'j["key"]')
python3 - "$D/kjit.db" "$orphan" <<'PY'
import sqlite3, sys
db = sqlite3.connect(sys.argv[1])
db.execute("DELETE FROM entries WHERE key = ?", (sys.argv[2],))
db.commit()
PY
expect_rc 0 "$KJIT" --cache-dir "$D" cache verify
expect_grep "^indexed again (a payload file without its index row): $orphan sm_90 saxpy" "$TMP/out" "verify re-index"
expect_rc 0 "$KJIT" --cache-dir "$D" cache verify --json
json_check "$TMP/out" 'j["reindexed"] == []'

finish
