#!/usr/bin/env bash
# Checks that the release version is one and the same everywhere, and that the API's
# "since" marks are true of it:
#  - CMakeLists.txt's project(VERSION), include/kjit/common.h's KJIT_VERSION_* macros and
#    the Python, Rust (both crates) and Julia manifests name the same version, and the
#    Julia binding's KJIT_VERSION and the Python binding's MIN_VERSION match it;
#  - every function whose header comment says "@since X.Y" (or "Since X.Y.") is exported in
#    version node KJIT_X.Y of src/kjit.map, and no mark names a release after this one
#    (a program gating on kjit_version() would turn the feature off);
#  - a version node exists for the release (KJIT_<major>.<minor>) if any since mark names it.
#   tools/check_version.sh
set -eu
root=$(cd "$(dirname "$0")/.." && pwd)
python3 - "$root" <<'PY'
import re, sys, os
root = sys.argv[1]
def read(p):
    return open(os.path.join(root, p), encoding="utf-8").read()
problems = []
project = re.search(r"project\(kjit VERSION ([0-9.]+)", read("CMakeLists.txt")).group(1)
h = read("include/kjit/common.h")
header = ".".join(re.search(r"#define KJIT_VERSION_%s (\d+)" % k, h).group(1)
                  for k in ("MAJOR", "MINOR", "PATCH"))
versions = {"CMakeLists.txt project()": project, "include/kjit/common.h": header}
for path, pattern in [("bindings/python/pyproject.toml", r'^version = "([^"]+)"'),
                      ("bindings/python/kjit/__init__.py", r'^__version__ = "([^"]+)"'),
                      ("bindings/rust/Cargo.toml", r'^version = "([^"]+)"'),
                      ("bindings/rust/kjit-sys/Cargo.toml", r'^version = "([^"]+)"'),
                      ("bindings/julia/Project.toml", r'^version = "([^"]+)"')]:
    m = re.search(pattern, read(path), flags=re.M)
    versions[path] = m.group(1) if m else "(none)"
for where, v in versions.items():
    if v != project:
        problems.append("%s says %s, project() says %s" % (where, v, project))
major, minor, patch = (int(x) for x in project.split("."))
number = major * 10000 + minor * 100 + patch
m = re.search(r"^const KJIT_VERSION = (\d+)", read("bindings/julia/src/KJit.jl"), flags=re.M)
if not m or int(m.group(1)) != number:
    problems.append("bindings/julia/src/KJit.jl KJIT_VERSION is not %d" % number)
sys_rs = read("bindings/rust/kjit-sys/src/lib.rs")
rust = ".".join((re.search(r"^pub const KJIT_VERSION_%s: c_int = (\d+);" % k, sys_rs, flags=re.M)
                 or re.search(r"()", "")).group(1) or "?" for k in ("MAJOR", "MINOR", "PATCH"))
if rust != project:
    problems.append("bindings/rust/kjit-sys/src/lib.rs KJIT_VERSION_* say %s" % rust)
m = re.search(r"^MIN_VERSION = (\d+)", read("bindings/python/kjit/_lib.py"), flags=re.M)
if not m or int(m.group(1)) > number:
    problems.append("bindings/python/kjit/_lib.py MIN_VERSION is past %d" % number)

# Version nodes of the version script.
nodes = {}
node = None
for line in read("src/kjit.map").splitlines():
    m = re.match(r"^(KJIT_[0-9.]+)\s*\{", line)
    if m:
        node = m.group(1)
        continue
    m = re.match(r"^\s+(kjit_\w+);", line)
    if m and node:
        nodes[m.group(1)] = node
# Since marks on the functions of the public headers.
marks = 0
for name in sorted(os.listdir(os.path.join(root, "include/kjit"))):
    if not name.endswith(".h") or name == "kjit_typedefs.h":
        continue
    text = read("include/kjit/" + name)
    for m in re.finditer(r"/\*\*((?:(?!\*/).)*)\*/\s*KJIT_EXPORT[^;(]*?\b(kjit_\w+)\s*\(",
                         text, flags=re.S):
        since = re.search(r"(?:@since|Since) (\d+)\.(\d+)\b", m.group(1))
        if not since:
            continue
        marks += 1
        fn = m.group(2)
        want = "KJIT_%s.%s" % (since.group(1), since.group(2))
        if (int(since.group(1)), int(since.group(2))) > (major, minor):
            problems.append("%s: %s is marked since %s.%s, after this release %s"
                            % (name, fn, since.group(1), since.group(2), project))
        if nodes.get(fn) != want:
            problems.append("%s: %s is marked since %s.%s but exported in %s"
                            % (name, fn, since.group(1), since.group(2),
                               nodes.get(fn, "no version node")))
if marks == 0:
    problems.append("found no since mark in include/kjit/*.h (the pattern is stale)")
for p in problems:
    print("check_version: " + p, file=sys.stderr)
if not problems:
    print("check_version: version %s everywhere; %d since marks match src/kjit.map"
          % (project, marks))
sys.exit(1 if problems else 0)
PY
