#!/usr/bin/env bash
# kjit: --help of every command, bad usage exits 2, info/--version, and the man page
# covers every command.
set -eu
. "$(dirname "$0")/lib.sh"
MAN=$(cd "$(dirname "$0")/../../docs" && pwd)/kjit.1
C=$TMP/cache

expect_rc 0 "$KJIT" --help
expect_grep '^Usage: kjit ' "$TMP/out" "kjit --help"
expect_grep '^Exit status:' "$TMP/out" "kjit --help"
expect_rc 0 "$KJIT" help
expect_grep '^Usage: kjit ' "$TMP/out" "kjit help"
for cmd in compile cache warm info; do
  expect_rc 0 "$KJIT" "$cmd" --help && expect_grep "^Usage: kjit $cmd" "$TMP/out" "kjit $cmd --help"
  expect_rc 0 "$KJIT" "$cmd" -h && expect_grep "^Usage: kjit $cmd" "$TMP/out" "kjit $cmd -h"
  expect_rc 0 "$KJIT" help "$cmd" && expect_grep "^Usage: kjit $cmd" "$TMP/out" "kjit help $cmd"
  expect_grep "^\.SS $cmd\$" "$MAN" "the man page (section for $cmd)"
done
for sub in path stats ls show rm prune clear verify export import; do
  expect_rc 0 "$KJIT" cache "$sub" --help && expect_grep "^Usage: kjit cache" "$TMP/out" "kjit cache $sub --help"
  expect_grep "cache $sub" "$MAN" "the man page (cache $sub)"
  expect_grep "^  $sub" "$TMP/out" "kjit cache --help (entry for $sub)"
done
# --help wins over everything else on the line.
expect_rc 0 "$KJIT" compile --bogus --help

# Bad usage: exit 2 with a message that points at --help.
expect_rc 2 "$KJIT"
expect_rc 2 "$KJIT" frobnicate
expect_grep "unknown command 'frobnicate'" "$TMP/err" "unknown command"
expect_rc 2 "$KJIT" --bogus info
expect_rc 2 "$KJIT" --cache-dir
expect_rc 2 "$KJIT" compile --bogus x.cu
expect_grep "unknown option '--bogus'" "$TMP/err" "unknown option"
expect_grep "kjit compile --help" "$TMP/err" "pointer to --help"
expect_rc 2 "$KJIT" compile x.cu -o
expect_rc 2 "$KJIT" compile a.cu b.cu
expect_rc 2 "$KJIT" compile x.cu --json=yes
expect_rc 2 "$KJIT" --cache-dir "$C" cache show a b
expect_rc 2 "$KJIT" --cache-dir "$C" cache rm
expect_rc 2 "$KJIT" --cache-dir "$C" cache export
expect_rc 2 "$KJIT" --cache-dir "$C" cache import a b
expect_rc 2 "$KJIT" --cache-dir "$C" cache stats extra
expect_rc 2 "$KJIT" --cache-dir "$C" cache prune --max-size=-5
expect_rc 2 "$KJIT" --cache-dir "$C" cache prune --max-size 1.5Q
# A size is a whole number of bytes with an optional K, M, G or T (binary multiples), below
# 2^63: anything else is a usage error that says what is accepted, not a guess (1e3 once
# read as 1000 bytes pruned the whole cache).
for bad in 1e3 0x10 5MB 1.5G 1.5M 5KiB 5b K '' ' 5' '5 ' +5 -0 5KK 8388608T 9223372036854775808 \
           18446744073709551616 99999999999999999999999; do
  expect_rc 2 "$KJIT" --cache-dir "$C" cache prune --max-size "$bad" --json &&
    expect_grep "bad size '$bad' for --max-size: .*whole number of bytes.*K, M, G or T" "$TMP/err" "prune --max-size '$bad'"
  [ ! -s "$TMP/out" ] || fail "prune --max-size '$bad' printed a result"
done
# Empty file names are usage errors, whichever option takes them.
expect_rc 2 sh -c "cd \"$TMP\" && \"$KJIT\" --cache-dir \"$C\" compile x.cu -o ''"
expect_grep "option '--output' needs a non-empty path" "$TMP/err" "compile -o ''"
expect_rc 2 "$KJIT" --cache-dir "$C" compile x.cu --output=
expect_rc 2 "$KJIT" --cache-dir "$C" compile x.cu -I ''
expect_grep "option '--include-path' needs a non-empty path" "$TMP/err" "compile -I ''"
expect_rc 2 "$KJIT" --cache-dir "$C" cache show 0000 -o ''
expect_grep "option '--output' needs a non-empty path" "$TMP/err" "cache show -o ''"
expect_rc 2 "$KJIT" --cache-dir '' info
expect_grep "option '--cache-dir' needs a non-empty path" "$TMP/err" "--cache-dir ''"
expect_rc 2 "$KJIT" info --cache-dir=
expect_grep "option '--cache-dir' needs a non-empty path" "$TMP/err" "info --cache-dir="
expect_rc 2 "$KJIT" --cache-dir "$C" warm a.json b.json
expect_rc 2 "$KJIT" --cache-dir "$C" warm a.json -j many
expect_rc 2 "$KJIT" info extra

# Sizes: K, M, G suffixes are binary multiples (checked through prune's JSON).
for pair in 0:0 10:10 007:7 4K:4096 3M:3145728 2G:2147483648 1k:1024 3T:3298534883328 \
            8388607T:9223370937343148032; do
  expect_rc 0 "$KJIT" --cache-dir "$C" cache prune --max-size "${pair%%:*}" --json
  json_check "$TMP/out" 'j["max_size_bytes"] == '"${pair##*:}"
done
expect_rc 0 "$KJIT" --cache-dir "$C" cache prune --max-size 9223372036854775807

# Global options work after the command too; --version; info in both forms.
expect_rc 0 "$KJIT" --version
grep -Eq '^kjit [0-9]+\.[0-9]+\.[0-9]+$' "$TMP/out" || fail "kjit --version printed '$(cat "$TMP/out")'"
VERSION=$(cut -d' ' -f2 "$TMP/out")
expect_rc 0 "$KJIT" info --cache-dir "$C" --json
json_check "$TMP/out" 'j["library"]["version"] == "'"$VERSION"'" and j["cache"]["directory"] == "'"$C"'" and j["cache"]["state"] == "ok"'
json_check "$TMP/out" 'isinstance(j["devices"], list) and "nvrtc" in j and "driver" in j and "cublaslt" in j'
json_check "$TMP/out" '(len(j["devices"]) > 0) or ("devices_error" in j and j["devices_error"] != "")'
expect_rc 0 "$KJIT" --cache-dir "$C" info
expect_grep "^kjit  *$VERSION" "$TMP/out" "kjit info"
expect_grep '^NVRTC  *[^ ]' "$TMP/out" "kjit info"
expect_grep "^cache  *$C\$" "$TMP/out" "kjit info"

# The man page renders without warnings.
if command -v groff >/dev/null 2>&1; then
  groff -man -ww -z "$MAN" 2>"$TMP/groff.txt" || fail "groff failed on kjit.1"
  [ ! -s "$TMP/groff.txt" ] || { fail "groff warnings on kjit.1"; cat "$TMP/groff.txt" >&2; }
fi

finish
