# Shared helpers for the kjit command-line tests. Source it after setting -eu.
# Usage in a test: . "$(dirname "$0")/lib.sh"; KJIT=$1 is the tool under test.

if [ $# -lt 1 ] || [ ! -x "$1" ]; then
  echo "usage: $0 PATH-TO-kjit" >&2
  exit 2
fi
KJIT=$(cd "$(dirname "$1")" && pwd)/$(basename "$1")
TMP=$(mktemp -d "${TMPDIR:-/tmp}/kjit-cli-test.XXXXXX")
trap 'rm -rf "$TMP"' EXIT
# Keep the tests away from the user's cache and settings (XDG_CACHE_HOME comes before
# HOME in the default location).
unset KJIT_CACHE_DIR KJIT_CACHE_DISABLE KJIT_CACHE_MAX_SIZE KJIT_CACHE_READONLY KJIT_EXPORT_KEY \
  KJIT_LOG KJIT_REMOTE
export XDG_CACHE_HOME=$TMP/xdg
FAILURES=0

fail() {
  echo "FAIL: $*" >&2
  FAILURES=$((FAILURES + 1))
}

# expect_rc WANT CMD... : runs CMD with stdout in $TMP/out and stderr in $TMP/err.
expect_rc() {
  local want=$1 rc=0
  shift
  "$@" >"$TMP/out" 2>"$TMP/err" || rc=$?
  if [ "$rc" != "$want" ]; then
    fail "'$*' exited $rc, expected $want"
    sed 's/^/  stdout: /' "$TMP/out" | head -20 >&2
    sed 's/^/  stderr: /' "$TMP/err" | head -20 >&2
    return 1
  fi
  return 0
}

# expect_grep PATTERN FILE [WHAT]
expect_grep() {
  if ! grep -q -e "$1" "$2"; then
    fail "${3:-$2} does not contain '$1'"
    sed 's/^/  | /' "$2" | head -20 >&2
  fi
}

# json_check FILE PYTHON-EXPRESSION : evaluates the expression with `j` bound to the
# parsed JSON; fails unless it is true. Also proves FILE is valid JSON.
json_check() {
  if ! python3 - "$1" "$2" <<'PY'
import json, sys
with open(sys.argv[1]) as f:
    j = json.load(f)
ok = eval(sys.argv[2], {"j": j})
if not ok:
    print("  json: " + json.dumps(j)[:600], file=sys.stderr)
    sys.exit(1)
PY
  then
    fail "JSON check failed on $1: $2"
  fi
}

# json_get FILE PYTHON-EXPRESSION : prints the value of the expression.
json_get() {
  python3 - "$1" "$2" <<'PY'
import json, sys
with open(sys.argv[1]) as f:
    j = json.load(f)
print(eval(sys.argv[2], {"j": j}))
PY
}

# bounded CMD... : runs CMD with at most 2 GiB of address space and 60 s, so that a command
# reading without bound fails fast instead of eating the machine's memory.
bounded() {
  (ulimit -v 2097152 && exec timeout 60 "$@")
}

# damage_largest_entry DIR : flips one byte in the middle of the largest payload file of
# the cache directory DIR (the entry it holds then fails verification).
damage_largest_entry() {
  python3 - "$1" <<'PY' || fail "could not damage an entry in $1"
import os, sys
files = [os.path.join(d, f) for d, _, fs in os.walk(os.path.join(sys.argv[1], "entries"))
         for f in fs if not f.startswith(".")]
if not files:
    sys.exit(1)
path = max(files, key=os.path.getsize)
data = bytearray(open(path, "rb").read())
data[len(data) // 2] ^= 0xFF
open(path, "wb").write(data)
PY
}

finish() {
  if [ "$FAILURES" -ne 0 ]; then
    echo "$FAILURES check(s) failed" >&2
    exit 1
  fi
  echo "all checks passed"
}

write_saxpy() {
  cat >"$1" <<'CU'
extern "C" __global__ void saxpy(float a, const float* x, float* y, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = a * x[i] + y[i];
}
CU
}

# A kernel that takes NVRTC most of a second to compile (an unrolled loop).
write_slow() {
  cat >"$1" <<'CU'
extern "C" __global__ void slow(float* x, int n) {
  float a = x[threadIdx.x];
#pragma unroll
  for (int i = 0; i < 300; ++i) a = a * x[(i * 7 + threadIdx.x) % n] + __sinf(a + i);
  x[threadIdx.x] = a;
}
CU
}

# hold_claim CACHE-DIR CMD... : starts CMD, a kjit compile of a slow source into the cache in
# CACHE-DIR, in the background; waits until it holds the compile claim of its key (a row of
# the database's claims table), then stops it there with SIGSTOP, as a hung process would
# be. Sets HOLDER to its pid: `kill -CONT` lets it finish and store the entry, `kill -KILL`
# (and `wait`) makes it die holding the claim.
hold_claim() {
  local db=$1/kjit.db
  shift
  "$@" >/dev/null 2>&1 &
  HOLDER=$!
  if ! python3 - "$db" <<'PY'
import sqlite3, sys, time
deadline = time.time() + 60
while time.time() < deadline:
    try:
        db = sqlite3.connect("file:" + sys.argv[1] + "?mode=ro", uri=True, timeout=1)
        n = db.execute("SELECT count(*) FROM claims WHERE failure IS NULL").fetchone()[0]
        db.close()
        if n > 0:
            sys.exit(0)
    except sqlite3.Error:
        pass
    time.sleep(0.005)
sys.exit(1)
PY
  then
    fail "no compile claim appeared in $db"
  fi
  kill -STOP "$HOLDER"
}
