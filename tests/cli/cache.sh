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
json_check "$TMP/ls.json" 'len(j) == 3 and all(len(e["key"]) == 64 and e["kernels"] == ["saxpy"] and e["bytes"] > 0 for e in j)'
json_check "$TMP/ls.json" 'sorted(e["target"] for e in j) == ["sm_80", "sm_90", "sm_90"]'
expect_rc 0 "$KJIT" --cache-dir "$A" cache ls
[ "$(wc -l <"$TMP/out")" = 4 ] || fail "cache ls printed $(wc -l <"$TMP/out") lines, expected a header and 3 rows"
expect_grep '^KEY ' "$TMP/out" "cache ls header"
KEY=$(json_get "$TMP/ls.json" '[e["key"] for e in j if e["target"] == "sm_80"][0]')

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
a = sorted(e["key"] for e in json.load(open(sys.argv[1])))
b = sorted(e["key"] for e in json.load(open(sys.argv[2])))
sys.exit(0 if a == b else 1)
PY
expect_rc 0 "$KJIT" --cache-dir "$B" compile "$TMP/saxpy.cu" --arch sm_80 -o /dev/null --json
json_check "$TMP/out" 'j["tier"] == "disk" and j["key"] == "'"$KEY"'"'
expect_rc 3 "$KJIT" --cache-dir "$B" cache import "$TMP/no-such-file.kjit"
expect_grep 'no-such-file.kjit' "$TMP/err" "import of a missing file"

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
python3 - "$A/kjit.db" <<'PY' || fail "could not damage the database for the verify test"
# Flip one byte in the middle of the largest blob value of any table, whatever the schema.
import sqlite3, sys
db = sqlite3.connect(sys.argv[1])
best = None
for (table,) in db.execute("SELECT name FROM sqlite_master WHERE type='table'"):
    cols = [r[1] for r in db.execute(f'PRAGMA table_info("{table}")')]
    for col in cols:
        row = db.execute(f'SELECT rowid, length("{col}") FROM "{table}" WHERE typeof("{col}")=\'blob\' '
                         f'ORDER BY length("{col}") DESC LIMIT 1').fetchone()
        if row and (best is None or row[1] > best[3]):
            best = (table, col, row[0], row[1])
if best is None:
    sys.exit(1)
table, col, rowid, _ = best
data = bytearray(db.execute(f'SELECT "{col}" FROM "{table}" WHERE rowid=?', (rowid,)).fetchone()[0])
data[len(data) // 2] ^= 0xFF
db.execute(f'UPDATE "{table}" SET "{col}"=? WHERE rowid=?', (bytes(data), rowid))
db.commit()
PY
expect_rc 5 "$KJIT" --cache-dir "$A" cache verify --json
json_check "$TMP/out" 'j["checked"] == 3 and j["corrupt"] == 1 and len(j["removed"]) == 1'
expect_rc 0 "$KJIT" --cache-dir "$A" cache verify
expect_grep 'checked 2 entries: 0 corrupt' "$TMP/out" "cache verify after removal"

# prune to a size: least recently used entries go first.
expect_rc 0 "$KJIT" --cache-dir "$TMP/p" compile "$TMP/saxpy.cu" --arch sm_80 -o /dev/null
sleep 1.1
expect_rc 0 "$KJIT" --cache-dir "$TMP/p" compile "$TMP/saxpy.cu" --arch sm_90 -o /dev/null --json
NEWEST=$(json_get "$TMP/out" 'j["key"]')
expect_rc 0 "$KJIT" --cache-dir "$TMP/p" cache ls --json
ONE=$(json_get "$TMP/out" '[e["bytes"] for e in j if e["key"] == "'"$NEWEST"'"][0]')
expect_rc 0 "$KJIT" --cache-dir "$TMP/p" cache prune --max-size "$ONE" --json
json_check "$TMP/out" 'j["removed"] == 1 and j["entries"] == 1 and j["bytes"] <= '"$ONE"
expect_rc 0 "$KJIT" --cache-dir "$TMP/p" cache ls --json
json_check "$TMP/out" '[e["key"] for e in j] == ["'"$NEWEST"'"]'
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
json_check "$TMP/out" 'j == []'

# A cache nobody has used yet reads as empty.
expect_rc 0 "$KJIT" --cache-dir "$TMP/fresh1" cache ls --json
json_check "$TMP/out" 'j == []'
expect_rc 4 "$KJIT" --cache-dir "$TMP/fresh2" cache show abcdef
expect_rc 0 "$KJIT" --cache-dir "$TMP/fresh3" cache export "$TMP/empty.kjit" --json
json_check "$TMP/out" 'j["exported"] == 0'

# A disabled disk tier is an error for commands that need it, with the reason.
expect_rc 3 env KJIT_CACHE_DISABLE=1 "$KJIT" --cache-dir "$A" cache ls
expect_grep 'KJIT_CACHE_DISABLE' "$TMP/err" "cache ls with the disk tier disabled"
expect_rc 2 "$KJIT" --cache-dir "$A" cache frobnicate
expect_rc 2 "$KJIT" --cache-dir "$A" cache

finish
