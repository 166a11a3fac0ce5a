#!/usr/bin/env bash
# kjit --json: every document is an object whose first field is "schema" {name, version};
# every field it holds is documented under that name in kjit(1) (JSON OUTPUT); numbers that
# are not whole have at most 3 decimal places.
set -eu
. "$(dirname "$0")/lib.sh"
MAN=$(cd "$(dirname "$0")/../../docs" && pwd)/kjit.1
C=$TMP/cache
write_saxpy "$TMP/saxpy.cu"
printf 'template <typename T> __global__ void twice(T* x) { x[threadIdx.x] *= T(2); }\n' >"$TMP/tmpl.cu"
printf '__global__ void broken( { undeclared_thing; }\n' >"$TMP/broken.cu"
cat >"$TMP/m.json" <<'JSON'
{ "version": 1, "defaults": { "targets": ["sm_90"] },
  "kernels": [ { "name": "saxpy", "file": "saxpy.cu" }, { "name": "broken", "file": "broken.cu" } ] }
JSON

# check_doc SCHEMA CMD... : runs CMD (any exit status), checks its stdout as a document of
# SCHEMA against the man page.
check_doc() {
  local schema=$1
  shift
  "$@" >"$TMP/doc.json" 2>"$TMP/doc.err" || true
  if ! python3 - "$TMP/doc.json" "$schema" "$MAN" <<'PY'
import json, re, sys

path, schema, man = sys.argv[1:]
text = open(path).read()
try:
    doc = json.loads(text)
except ValueError as e:
    sys.exit(f"not JSON ({e}): {text[:300]!r}")
problems = []
if not isinstance(doc, dict):
    sys.exit(f"the document is a {type(doc).__name__}, not an object")
if list(doc)[:1] != ["schema"]:
    problems.append(f"the first field is {list(doc)[:1]}, not 'schema'")
if doc.get("schema") != {"name": schema, "version": 1}:
    problems.append(f"schema is {doc.get('schema')!r}")

# The JSON OUTPUT section of the man page, one paragraph per schema, as plain words.
page = open(man).read()
section = page.split(".SH JSON OUTPUT", 1)[1].split("\n.SH ", 1)[0]
paragraphs = {}
for chunk in section.split("\n.TP\n")[1:]:
    lines = chunk.split("\n")
    name = lines[0].replace(".B ", "").strip()
    body = re.sub(r"\\f[BIRP]|\\\(..|\\-", " ", "\n".join(lines[1:]))
    paragraphs[name] = set(re.findall(r"[A-Za-z_][A-Za-z0-9_]*", body))
if schema not in paragraphs:
    sys.exit(f"kjit(1) has no paragraph for {schema} under JSON OUTPUT")
words = paragraphs[schema] | paragraphs.get("kjit.info", set()) if "worker" in doc else paragraphs[schema]
words = words | {"schema", "name", "version"}

# Keys chosen by the data (targets, name expressions, the library's metadata) are not fields.
FREE = {"targets", "names", "metadata"}

def walk(value, where):
    if isinstance(value, dict):
        for k, v in value.items():
            if k not in words:
                problems.append(f"field {where}{k} is not documented for {schema}")
            if k not in FREE:
                walk(v, f"{where}{k}.")
    elif isinstance(value, list):
        for v in value:
            walk(v, where)
    elif isinstance(value, float) and round(value, 3) != value:
        problems.append(f"{where.rstrip('.')} = {value!r} has more than 3 decimal places")

walk(doc, "")
if problems:
    sys.exit("\n".join(problems))
PY
  then
    fail "kjit --json document of $schema from: $*"
    sed 's/^/  stderr: /' "$TMP/doc.err" | head -5 >&2
  fi
}

check_doc kjit.compile "$KJIT" --cache-dir "$C" compile "$TMP/saxpy.cu" --arch sm_90 -o /dev/null --json
KEY=$(json_get "$TMP/doc.json" 'j["key"]')
json_check "$TMP/doc.json" 'j["ok"] and j["sizes"]["cubin"] == j["bytes"] and j["kernels"] == ["saxpy"]'
check_doc kjit.compile "$KJIT" --cache-dir "$C" compile "$TMP/tmpl.cu" --arch sm_90 -n 'twice<float>' -o /dev/null --json
json_check "$TMP/doc.json" 'j["names"]["twice<float>"].startswith("_Z") and j["kernels"] == [j["names"]["twice<float>"]]'
check_doc kjit.compile "$KJIT" --cache-dir "$C" compile "$TMP/broken.cu" --arch sm_90 -o /dev/null --json
json_check "$TMP/doc.json" 'not j["ok"] and j["status_name"] == "KJIT_ERROR_COMPILE"'
check_doc kjit.warm "$KJIT" --cache-dir "$C" warm "$TMP/m.json" --json
json_check "$TMP/doc.json" 'j["compiled"] + j["cached"] == 1 and j["failed"] == 1'
check_doc kjit.warm.dry-run "$KJIT" --cache-dir "$C" warm "$TMP/m.json" --dry-run --json
check_doc kjit.info "$KJIT" --cache-dir "$C" info --json
check_doc kjit.info "$KJIT" --cache-dir "$TMP/none" info --json
check_doc kjit.cache.path "$KJIT" --cache-dir "$C" cache path --json
check_doc kjit.cache.stats "$KJIT" --cache-dir "$C" cache stats --json
json_check "$TMP/doc.json" 'j["entries"] == 3 and j["targets"]["sm_90"]["entries"] == 3'
check_doc kjit.cache.ls "$KJIT" --cache-dir "$C" cache ls --json
json_check "$TMP/doc.json" 'len(j["entries"]) == 3'
check_doc kjit.cache.show "$KJIT" --cache-dir "$C" cache show "$KEY" --json
json_check "$TMP/doc.json" 'j["key"] == "'"$KEY"'" and j["metadata"]["target"] == j["target"] == "sm_90"'
check_doc kjit.cache.verify "$KJIT" --cache-dir "$C" cache verify --json
check_doc kjit.cache.export "$KJIT" --cache-dir "$C" cache export "$TMP/all.kjit" --json
check_doc kjit.cache.import "$KJIT" --cache-dir "$TMP/other" cache import "$TMP/all.kjit" --json
json_check "$TMP/doc.json" 'j["imported"] == 3'
check_doc kjit.cache.rm "$KJIT" --cache-dir "$TMP/other" cache rm "$KEY" --json
json_check "$TMP/doc.json" 'j["results"] == [{"key": "'"$KEY"'", "removed": True}]'
check_doc kjit.cache.prune "$KJIT" --cache-dir "$TMP/other" cache prune --max-size 1G --json
check_doc kjit.cache.clear "$KJIT" --cache-dir "$TMP/other" cache clear --json

# Times are rounded to 3 decimal places (they were printed as 219.29457000084221).
"$KJIT" --cache-dir "$TMP/fresh" compile "$TMP/saxpy.cu" --arch sm_90 -o /dev/null --json >"$TMP/out"
if grep -Eq '[0-9]\.[0-9]{4,}' "$TMP/out"; then
  fail "compile --json printed a number with more than 3 decimal places: $(grep -E '[0-9]\.[0-9]{4,}' "$TMP/out")"
fi

# The man page documents each schema once, and every schema the tool prints (a schema
# name in the sources with no paragraph, or the other way round, fails here).
SRC=$(cd "$(dirname "$0")/../../src/cli" && pwd)
grep -ho 'new_document("[^"]*")' "$SRC"/*.cpp | sed 's/new_document("\(.*\)")/\1/' | sort -u >"$TMP/src-schemas"
grep -A1 '^\.TP$' "$MAN" | grep -o '^\.B kjit\.[a-z.-]*$' | sed 's/^\.B //' | sort -u >"$TMP/man-schemas"
diff "$TMP/src-schemas" "$TMP/man-schemas" >"$TMP/schemas.diff" || {
  fail "schemas in src/cli (<) and in kjit(1) (>) differ"
  cat "$TMP/schemas.diff" >&2
}

# kjit link (its own cache: the counts above stay as they are).
printf 'extern __device__ int f(); extern "C" __global__ void k(int* p) { *p = f(); }\n' >"$TMP/k.cu"
printf '__device__ int f() { return 7; }\n' >"$TMP/f.cu"
check_doc kjit.link "$KJIT" --cache-dir "$TMP/link" link "$TMP/k.cu" "$TMP/f.cu" --lto -a sm_90 -o /dev/null --json
json_check "$TMP/doc.json" 'j["ok"] and j["kernels"] == ["k"] and j["sizes"]["cubin"] == j["bytes"]'
check_doc kjit.link "$KJIT" --cache-dir "$TMP/link" link "$TMP/k.cu" --lto -a sm_90 -o /dev/null --json
json_check "$TMP/doc.json" 'not j["ok"] and j["status_name"] == "KJIT_ERROR_LINK"'

finish
