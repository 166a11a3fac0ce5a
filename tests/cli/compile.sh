#!/usr/bin/env bash
# kjit compile: cache miss then hit, outputs, include tracking, errors and exit statuses.
set -eu
. "$(dirname "$0")/lib.sh"
C=$TMP/cache
write_saxpy "$TMP/saxpy.cu"

# First compile: a miss that writes a CUBIN.
expect_rc 0 "$KJIT" --cache-dir "$C" compile "$TMP/saxpy.cu" --arch sm_90 -o "$TMP/a.cubin" --json
cp "$TMP/out" "$TMP/first.json"
json_check "$TMP/first.json" 'j["ok"] and j["tier"] == "compiled" and not j["hit"] and j["kind"] == "cubin"'
json_check "$TMP/first.json" 'len(j["key"]) == 64 and j["target"] == "sm_90" and j["bytes"] > 0 and j["kernels"] == ["saxpy"]'
[ "$(head -c 4 "$TMP/a.cubin" | od -An -c | tr -d ' ')" = '177ELF' ] || fail "a.cubin is not an ELF file"
[ "$(stat -c %s "$TMP/a.cubin")" = "$(json_get "$TMP/first.json" 'j["bytes"]')" ] || fail "a.cubin size differs from the reported size"

# Second compile of the same input: a disk hit with the same key and the same bytes.
expect_rc 0 "$KJIT" --cache-dir "$C" compile "$TMP/saxpy.cu" --arch sm_90 -o "$TMP/b.cubin" --json
json_check "$TMP/out" 'j["tier"] == "disk" and j["hit"] and j["compile_ms"] > 0'
[ "$(json_get "$TMP/out" 'j["key"]')" = "$(json_get "$TMP/first.json" 'j["key"]')" ] || fail "second compile has another key"
cmp -s "$TMP/a.cubin" "$TMP/b.cubin" || fail "the cached CUBIN differs from the compiled one"

# The cache holds exactly one entry for it.
expect_rc 0 "$KJIT" cache stats --json --cache-dir "$C"
json_check "$TMP/out" 'j["entries"] == 1 and j["state"] == "ok" and j["bytes"] > 0 and j["targets"]["sm_90"]["entries"] == 1'
json_check "$TMP/out" 'j["stored_compile_ms"] > 0 and j["max_size_bytes"] > 0'
expect_rc 0 "$KJIT" cache stats --cache-dir "$C"
expect_grep '^kernels  *1$' "$TMP/out" "cache stats"

# The default output name, and the human-readable status lines on stderr. The program
# name (FILE as given, or --program-name) is part of the key, as __FILE__ would see it.
(cd "$TMP" && "$KJIT" --cache-dir "$C" compile saxpy.cu -a sm_90 2>"$TMP/err") || fail "compile with the default output failed"
[ -s "$TMP/saxpy.cubin" ] || fail "no saxpy.cubin written by default"
expect_grep 'cache miss, compiled in' "$TMP/err" "compile status line"
(cd "$TMP" && "$KJIT" --cache-dir "$C" compile saxpy.cu -a sm_90 2>"$TMP/err") || fail "compile with the default output failed"
expect_grep 'cache hit (disk)' "$TMP/err" "compile status line"
expect_rc 0 "$KJIT" --cache-dir "$C" compile "$TMP/saxpy.cu" -a sm_90 --program-name saxpy.cu -o "$TMP/d.cubin"
expect_grep 'cache hit (disk)' "$TMP/err" "compile with --program-name"

# PTX to stdout from standard input (same entry: PTX is stored beside the CUBIN).
expect_rc 0 sh -c "\"$KJIT\" --cache-dir \"$C\" compile - --arch sm_90 --ptx -o - < \"$TMP/saxpy.cu\""
expect_grep '\.entry saxpy' "$TMP/out" "PTX output"
expect_grep '\.target sm_90' "$TMP/out" "PTX output"

# Options change the key: a define is a new entry.
expect_rc 0 "$KJIT" --cache-dir "$C" compile "$TMP/saxpy.cu" --arch sm_90 -D SCALE=2 -o "$TMP/c.cubin" --json
json_check "$TMP/out" 'j["tier"] == "compiled"'
[ "$(json_get "$TMP/out" 'j["key"]')" != "$(json_get "$TMP/first.json" 'j["key"]')" ] || fail "-D did not change the key"

# Editing a header reachable through -I invalidates the entry.
mkdir -p "$TMP/inc"
echo '#define FACTOR 2.0f' >"$TMP/inc/factor.h"
cat >"$TMP/scale.cu" <<'CU'
#include "factor.h"
extern "C" __global__ void scale(float* x) { x[threadIdx.x] *= FACTOR; }
CU
expect_rc 0 "$KJIT" --cache-dir "$C" compile "$TMP/scale.cu" --arch sm_80 -I "$TMP/inc" --ptx -o "$TMP/s1.ptx" --json
cp "$TMP/out" "$TMP/s1.json"
expect_rc 0 "$KJIT" --cache-dir "$C" compile "$TMP/scale.cu" --arch sm_80 -I "$TMP/inc" --ptx -o "$TMP/s2.ptx" --json
json_check "$TMP/out" 'j["tier"] == "disk"'
echo '#define FACTOR 3.0f' >"$TMP/inc/factor.h"
expect_rc 0 "$KJIT" --cache-dir "$C" compile "$TMP/scale.cu" --arch sm_80 -I "$TMP/inc" --ptx -o "$TMP/s3.ptx" --json
json_check "$TMP/out" 'j["tier"] == "compiled"'
[ "$(json_get "$TMP/out" 'j["key"]')" != "$(json_get "$TMP/s1.json" 'j["key"]')" ] || fail "editing an included header kept the key"
expect_grep '0f40400000' "$TMP/s3.ptx" "PTX after the header edit (3.0f)"

# Name expressions are reported with their lowered names; NVRTC options after --.
cat >"$TMP/tmpl.cu" <<'CU'
template <typename T> __global__ void twice(T* x) { x[threadIdx.x] *= T(2); }
CU
expect_rc 0 "$KJIT" --cache-dir "$C" compile "$TMP/tmpl.cu" --arch sm_90 -n 'twice<float>' -o "$TMP/t.cubin" --json -- -std=c++17 --use_fast_math
json_check "$TMP/out" 'j["names"]["twice<float>"].startswith("_Z")'

# LTO-IR.
expect_rc 0 "$KJIT" --cache-dir "$C" compile "$TMP/saxpy.cu" --arch sm_90 --ltoir -o "$TMP/a.ltoir" --json
json_check "$TMP/out" 'j["kind"] == "ltoir" and j["bytes"] > 0'
[ -s "$TMP/a.ltoir" ] || fail "no LTO-IR written"

# A compile error: exit 1, the NVRTC log on stderr naming the file, and in the JSON.
printf '__global__ void broken( { undeclared_thing; }\n' >"$TMP/broken.cu"
expect_rc 1 "$KJIT" --cache-dir "$C" compile "$TMP/broken.cu" --arch sm_90 -o "$TMP/x.cubin"
expect_grep 'broken.cu' "$TMP/err" "compile error message"
expect_grep 'error' "$TMP/err" "compile error log"
[ ! -e "$TMP/x.cubin" ] || fail "a failed compile wrote its output"
expect_rc 1 "$KJIT" --cache-dir "$C" compile "$TMP/broken.cu" --arch sm_90 -o "$TMP/x.cubin" --json
json_check "$TMP/out" 'not j["ok"] and j["status_name"] == "KJIT_ERROR_COMPILE" and "error" in j["log"]'

# Other failures: a missing file (3), a target or option NVRTC rejects (2), bad usage (2).
expect_rc 3 "$KJIT" --cache-dir "$C" compile "$TMP/nope.cu" --arch sm_90
expect_grep 'nope.cu' "$TMP/err" "missing file message"
expect_rc 2 "$KJIT" --cache-dir "$C" compile "$TMP/saxpy.cu" --arch sm_1 -o "$TMP/y.cubin"
expect_grep 'sm_1' "$TMP/err" "unsupported target message"
expect_rc 2 "$KJIT" --cache-dir "$C" compile "$TMP/saxpy.cu" --arch sm_90 -o "$TMP/y.cubin" -- --no-such-nvrtc-option
expect_rc 2 "$KJIT" --cache-dir "$C" compile "$TMP/saxpy.cu" --arch compute_90 --cubin
expect_rc 2 "$KJIT" --cache-dir "$C" compile "$TMP/saxpy.cu" --ptx --cubin
expect_rc 2 "$KJIT" --cache-dir "$C" compile
expect_rc 3 "$KJIT" --cache-dir "$C" compile "$TMP/saxpy.cu" --arch sm_90 -o "$TMP/no/such/dir/out.cubin"
expect_grep 'out.cubin' "$TMP/err" "unwritable output message"

# A NUL byte is refused like invalid UTF-8 (exit 1, the file and the byte offset named),
# from a file and from standard input: the source is not cut at the NUL and compiled.
printf 'extern "C" __global__ void k(int* p) { *p = 1; }\n\0 garbage(\n' >"$TMP/nul.cu"
expect_rc 1 "$KJIT" --cache-dir "$C" compile "$TMP/nul.cu" --arch sm_90 -o "$TMP/nul.cubin"
expect_grep "nul.cu.*NUL byte at byte offset 49" "$TMP/err" "NUL byte message"
[ ! -e "$TMP/nul.cubin" ] || fail "a source with a NUL byte was compiled"
expect_rc 1 "$KJIT" --cache-dir "$C" compile "$TMP/nul.cu" --arch sm_90 -o "$TMP/nul.cubin" --json
json_check "$TMP/out" 'not j["ok"] and j["status_name"] == "KJIT_ERROR_INVALID_SOURCE" and "offset 49" in j["message"]'
expect_rc 1 sh -c "\"$KJIT\" --cache-dir \"$C\" compile - --arch sm_90 -o \"$TMP/nul.cubin\" < \"$TMP/nul.cu\""
expect_grep "NUL byte at byte offset 49" "$TMP/err" "NUL byte message (stdin)"
printf 'extern "C" __global__ void k(int* p) { *p = 1; }\n\377\n' >"$TMP/latin1.cu"
expect_rc 1 "$KJIT" --cache-dir "$C" compile "$TMP/latin1.cu" --arch sm_90 -o "$TMP/nul.cubin"
expect_grep "latin1.cu.*not valid UTF-8 (byte 49)" "$TMP/err" "invalid UTF-8 message"

# Only regular files are read, at most 64 MiB of them; standard input is read up to the
# same limit. Devices, FIFOs and directories are refused before anything is read.
expect_rc 3 bounded "$KJIT" --cache-dir "$C" compile /dev/zero --arch sm_90 -o "$TMP/z.cubin"
expect_grep "'/dev/zero': not a regular file (a character device)" "$TMP/err" "compile /dev/zero"
mkfifo "$TMP/fifo.cu"
expect_rc 3 bounded "$KJIT" --cache-dir "$C" compile "$TMP/fifo.cu" --arch sm_90 -o "$TMP/z.cubin"
expect_grep "fifo.cu': not a regular file (a FIFO)" "$TMP/err" "compile of a FIFO"
mkdir "$TMP/dir.cu"
expect_rc 3 bounded "$KJIT" --cache-dir "$C" compile "$TMP/dir.cu" --arch sm_90 -o "$TMP/z.cubin"
expect_grep "dir.cu': not a regular file (a directory)" "$TMP/err" "compile of a directory"
truncate -s 65M "$TMP/big.cu"
expect_rc 3 bounded "$KJIT" --cache-dir "$C" compile "$TMP/big.cu" --arch sm_90 -o "$TMP/z.cubin"
expect_grep "big.cu': larger than 64 MiB (the limit for a source)" "$TMP/err" "compile of a 65 MiB file"
expect_rc 3 bounded sh -c "\"$KJIT\" --cache-dir \"$C\" compile - --arch sm_90 -o \"$TMP/z.cubin\" </dev/zero"
expect_grep "standard input: larger than 64 MiB (the limit for a source)" "$TMP/err" "compile - </dev/zero"
[ ! -e "$TMP/z.cubin" ] || fail "a refused source wrote an output"

# -o FILE is replaced whole: the output goes to a temporary file in FILE's directory, which
# is renamed over FILE. A hard link to the old FILE keeps the old bytes; no temporary file
# is left; FILE's mode is kept; a symbolic link is written through.
mkdir "$TMP/o"
cat >"$TMP/other.cu" <<'CU'
extern "C" __global__ void other(int* p) { p[threadIdx.x] = threadIdx.x * 3; }
CU
expect_rc 0 "$KJIT" --cache-dir "$C" compile "$TMP/saxpy.cu" --arch sm_90 -o "$TMP/o/k.cubin"
cp "$TMP/o/k.cubin" "$TMP/k.before"
ln "$TMP/o/k.cubin" "$TMP/k.hardlink"
chmod 640 "$TMP/o/k.cubin"
expect_rc 0 "$KJIT" --cache-dir "$C" compile "$TMP/other.cu" --arch sm_90 -o "$TMP/o/k.cubin" --json
[ "$(stat -c %s "$TMP/o/k.cubin")" = "$(json_get "$TMP/out" 'j["bytes"]')" ] || fail "-o FILE does not hold the whole output"
cmp -s "$TMP/o/k.cubin" "$TMP/k.before" && fail "-o FILE was not replaced"
cmp -s "$TMP/k.hardlink" "$TMP/k.before" || fail "-o FILE was rewritten in place, not replaced"
[ "$(stat -c %a "$TMP/o/k.cubin")" = 640 ] || fail "-o FILE lost its mode: $(stat -c %a "$TMP/o/k.cubin")"
[ "$(ls -A "$TMP/o")" = k.cubin ] || fail "files left beside -o FILE: $(ls -A "$TMP/o" | tr '\n' ' ')"
ln -s k.cubin "$TMP/o/link.cubin"
expect_rc 0 "$KJIT" --cache-dir "$C" compile "$TMP/saxpy.cu" --arch sm_90 -o "$TMP/o/link.cubin"
[ -L "$TMP/o/link.cubin" ] || fail "-o through a symbolic link replaced the link"
cmp -s "$TMP/o/k.cubin" "$TMP/k.before" || fail "-o through a symbolic link did not write its target"
(umask 027 && "$KJIT" --cache-dir "$C" compile "$TMP/saxpy.cu" --arch sm_90 -o "$TMP/o/new.cubin") 2>/dev/null || fail "compile to a new file failed"
[ "$(stat -c %a "$TMP/o/new.cubin")" = 640 ] || fail "a new -o FILE does not follow the umask: $(stat -c %a "$TMP/o/new.cubin")"
rm -f "$TMP/o/new.cubin" "$TMP/o/link.cubin"
# A write cut short (by a 1 KiB file size limit, as a kill would cut it) leaves FILE whole as
# it was and no temporary file; the failure is an error (3) naming FILE.
expect_rc 3 env KJIT_CACHE_DISABLE=1 bash -c 'ulimit -f 1 && exec "$@"' sh \
  "$KJIT" compile "$TMP/other.cu" --arch sm_90 -o "$TMP/o/k.cubin"
expect_grep "cannot write '$TMP/o/k.cubin': File too large" "$TMP/err" "a write past the file size limit"
cmp -s "$TMP/o/k.cubin" "$TMP/k.before" || fail "a write cut short damaged -o FILE"
[ "$(ls -A "$TMP/o")" = k.cubin ] || fail "files left beside -o FILE: $(ls -A "$TMP/o" | tr '\n' ' ')"
# A directory where no file can be created (root may write anywhere but in /sys).
if [ "$(id -u)" = 0 ]; then RO=/sys; else RO=$TMP/ro && mkdir "$RO" && chmod 555 "$RO"; fi
expect_rc 3 "$KJIT" --cache-dir "$C" compile "$TMP/saxpy.cu" --arch sm_90 -o "$RO/kjit-test.cubin"
expect_grep "cannot write '$RO/kjit-test.cubin': .*Permission denied" "$TMP/err" "an unwritable directory"
[ ! -e "$RO/kjit-test.cubin" ] || fail "wrote into an unwritable directory"
# Devices are written as they are (not replaced): /dev/null stays a device.
expect_rc 0 "$KJIT" --cache-dir "$C" compile "$TMP/saxpy.cu" --arch sm_90 -o /dev/null
[ -c /dev/null ] || fail "/dev/null is no longer a device"

# Waiting for another process's compile is reported apart from compiling. Another process
# holds the claim of the key (stopped, as a hung one would be) and then dies: this one waits
# for it, then compiles. "compiled in" is NVRTC's time; the wait is the rest of the wall time.
write_slow "$TMP/slow.cu"
for form in text json; do
  W=$TMP/wait-$form
  hold_claim "$W" "$KJIT" --cache-dir "$W" compile "$TMP/slow.cu" --arch sm_90 -o /dev/null
  flag=; [ $form = json ] && flag=--json
  "$KJIT" --cache-dir "$W" compile "$TMP/slow.cu" --arch sm_90 -o "$TMP/slow.cubin" $flag \
    >"$TMP/wait.out" 2>"$TMP/wait.err" &
  WAITER=$!
  sleep 1.5
  { kill -KILL "$HOLDER" && wait "$HOLDER"; } 2>/dev/null || true
  wait "$WAITER" || fail "the compile that waited failed: $(cat "$TMP/wait.err")"
  if [ $form = text ]; then
    expect_grep 'cache miss, compiled in [0-9.]* m*s after waiting [0-9.]* m*s for another process \[key' "$TMP/wait.err" "compile after a wait"
  else
    json_check "$TMP/wait.out" 'j["tier"] == "compiled" and j["wait_ms"] >= 1000 and j["compile_ms"] > 0'
    json_check "$TMP/wait.out" 'abs(j["elapsed_ms"] - j["wait_ms"] - j["compile_ms"]) < 1'
  fi
done
# Without another process there is no wait.
expect_rc 0 "$KJIT" --cache-dir "$C" compile "$TMP/slow.cu" --arch sm_90 -o /dev/null --json
json_check "$TMP/out" 'j["tier"] == "compiled" and j["wait_ms"] == 0 and j["elapsed_ms"] >= j["compile_ms"]'
expect_rc 0 "$KJIT" --cache-dir "$C" compile "$TMP/slow.cu" --arch sm_90 -o /dev/null
expect_grep 'cache hit (disk) in .*, compile took ' "$TMP/err" "a hit without a wait"

# The CUDA toolkit's headers need no -I; --no-toolkit gives NVRTC's own error; a toolkit
# root without headers is a usage error; kjit info names the directories.
printf '#include <cuda_fp16.h>\n#include <cub/block/block_reduce.cuh>\n__global__ void k(__half* p) { *p = __float2half(1.0f); }\n' >"$TMP/fp16.cu"
expect_rc 0 "$KJIT" --cache-dir "$TMP/tk" compile "$TMP/fp16.cu" --arch sm_90 --ptx -o "$TMP/fp16.ptx"
expect_rc 1 "$KJIT" --cache-dir "$TMP/tk" compile "$TMP/fp16.cu" --arch sm_90 --ptx --no-toolkit -o "$TMP/x.ptx"
expect_grep 'open source file "cuda_fp16.h"' "$TMP/err" "--no-toolkit error"
mkdir -p "$TMP/not-a-toolkit"
expect_rc 2 "$KJIT" --cache-dir "$TMP/tk" compile "$TMP/fp16.cu" --arch sm_90 --toolkit "$TMP/not-a-toolkit" -o "$TMP/x.ptx"
expect_grep 'cuda_fp16.h' "$TMP/err" "toolkit without headers"
expect_rc 2 "$KJIT" compile "$TMP/fp16.cu" --toolkit /x --no-toolkit -o "$TMP/x.ptx"
expect_rc 0 "$KJIT" --cache-dir "$TMP/tk" compile "$TMP/fp16.cu" --arch sm_90 --ptx --no-pch -o "$TMP/fp16b.ptx"
cmp -s "$TMP/fp16.ptx" "$TMP/fp16b.ptx" || fail "PTX differs with and without precompiled headers"
expect_rc 0 "$KJIT" --cache-dir "$TMP/tk" cache stats
expect_grep 'precompiled headers 1 created' "$TMP/out" "PCH count in cache stats"
expect_rc 0 "$KJIT" info
expect_grep '^toolkit .*/include' "$TMP/out" "kjit info toolkit line"

# A result the cache does not keep is said where the user looks: "compiled, not cached:
# REASON" on stderr and "stored"/"not_stored" in --json, for every reason; exit status 0.
NS=$TMP/ns
printf 'extern "C" __global__ void ns(float* x) { x[0] = 7; }\n' >"$TMP/ns.cu"
expect_rc 0 "$KJIT" --cache-dir "$NS" compile "$TMP/ns.cu" --arch sm_90 -o "$TMP/ns.cubin"
! grep -q "not cached" "$TMP/err" || fail "a stored result said 'not cached'"
expect_rc 0 "$KJIT" --cache-dir "$NS" compile "$TMP/ns.cu" --arch sm_90 -o "$TMP/ns.cubin" --json
json_check "$TMP/out" 'j["stored"] is True and j["not_stored"] is None and j["hit"]'
printf 'extern "C" __global__ void ro(float* x) { x[0] = 8; }\n' >"$TMP/ro.cu"
KJIT_CACHE_READONLY=1 expect_rc 0 "$KJIT" --cache-dir "$NS" compile "$TMP/ro.cu" --arch sm_90 -o "$TMP/ro.cubin"
expect_grep "kjit compile: compiled, not cached: the cache is read-only" "$TMP/err" "read-only cache"
KJIT_CACHE_DISABLE=1 expect_rc 0 "$KJIT" compile "$TMP/ro.cu" --arch sm_90 -o "$TMP/ro.cubin" --json
json_check "$TMP/out" 'j["stored"] is False and "KJIT_CACHE_DISABLE" in j["not_stored"]'
# NVRTC made to write a file the key cannot cover (-fdevice-time-trace): counted, and said.
expect_rc 0 "$KJIT" --cache-dir "$NS" compile "$TMP/ro.cu" --arch sm_90 -o "$TMP/ro.cubin" -- "-fdevice-time-trace=$TMP/trace"
expect_grep "kjit compile: compiled, not cached: NVRTC read .*trace.*which the cache key does not cover" "$TMP/err" "uncovered file"
# A full disk (a small tmpfs in a private mount namespace, where this user may make one).
if command -v unshare >/dev/null && unshare -m true 2>/dev/null; then
  mkdir -p "$TMP/small"
  if unshare -m bash -c '
      mount -t tmpfs -o size=2m tmpfs "$1" || exit 77
      "$2" --cache-dir "$1/c" compile "$3" --arch sm_90 -o "$4/a.cubin" -q || exit 1
      dd if=/dev/zero of="$1/fill" bs=4k 2>/dev/null
      "$2" --cache-dir "$1/c" compile "$5" --arch sm_90 -o "$4/b.cubin" 2>"$4/full.err" || exit 1
      "$2" --cache-dir "$1/c" compile "$5" --arch sm_90 -o "$4/b.cubin" --json >"$4/full.json" 2>/dev/null
    ' _ "$TMP/small" "$KJIT" "$TMP/ns.cu" "$TMP" "$TMP/ro.cu"; then
    expect_grep "kjit compile: compiled, not cached: disk full" "$TMP/full.err" "full disk"
    json_check "$TMP/full.json" 'j["stored"] is False and j["not_stored"].startswith("disk full")'
  else
    echo "note: no tmpfs could be mounted here: the full-disk case is not checked" >&2
  fi
fi

finish
