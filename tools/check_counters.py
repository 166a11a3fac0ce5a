#!/usr/bin/env python3
"""Fails when a list of the cache counters differs from KJIT_CACHE_COUNTERS.

KJIT_CACHE_COUNTERS (src/store/cache.h) names the usage counters of a cache handle. The C
API copies each one and its total into the kjit_cache_stats fields `name` and
`total_name` by that X-macro (src/api/cache_api.cpp), except compile_us_saved, which the
public struct gives in milliseconds as compile_ms_saved. The public header and every
binding list those fields again: a raw layer that mirrors the C struct and an idiomatic
one. For each list this checks that

 - every counter and its total is there;
 - nothing else is there but the other fields of kjit_cache_stats: struct_size and the
   fields of CacheStats (src/store/cache.h) outside the X-macro. Anything else is a
   counter that KJIT_CACHE_COUNTERS does not have;
 - a raw mirror has every field of kjit_cache_stats (include/kjit/cache.h), in the same
   order: the order is its layout.

Python and Julia build their idiomatic stats from the raw struct's fields by name, and
Rust's struct literal must name every field, so their conversions are not checked here;
Go's is (a keyed literal may leave a field out).

Usage: check_counters.py [--root DIR]
Exit status 0 when every list agrees, 1 with one line per problem.
"""
import argparse
import os
import re
import sys

INTERNAL = "src/store/cache.h"
HEADER = "include/kjit/cache.h"
# A counter that kjit_cache_stats names otherwise (src/api/cache_api.cpp converts it).
PUBLIC_NAMES = {"compile_us_saved": "compile_ms_saved"}


class Missing(Exception):
    """A list that could not be found where it was expected."""


def read(root, path):
    with open(os.path.join(root, path)) as f:
        return f.read()


def strip_c_comments(text):
    text = re.sub(r"/\*.*?\*/", " ", text, flags=re.S)
    return re.sub(r"//[^\n]*", " ", text)


def between(text, path, start, end, what):
    """The text after the regex `start` up to the regex `end` (both multiline)."""
    m = re.search(start, text, re.M)
    e = m and re.compile(end, re.M).search(text, m.end())
    if not e:
        raise Missing("%s: cannot find %s (looked for /%s/ up to /%s/)" % (path, what, start, end))
    return text[m.end():e.start()]


def counters(root):
    """KJIT_CACHE_COUNTERS in order."""
    text = read(root, INTERNAL)
    m = re.search(r"^#define KJIT_CACHE_COUNTERS\(X\)((?:[^\n]*\\\n)*[^\n]*)", text, re.M)
    names = re.findall(r"\bX\((\w+)\)", m.group(1)) if m else []
    if not names:
        raise Missing("%s: cannot find the counters of #define KJIT_CACHE_COUNTERS(X)" % INTERNAL)
    return names


def other_fields(root):
    """struct_size and the fields of CacheStats that are not counters."""
    body = between(read(root, INTERNAL), INTERNAL, r"^struct CacheStats \{", r"^\};",
                   "struct CacheStats")
    body = re.sub(r"^\s*#[^\n]*", " ", strip_c_comments(body), flags=re.M)
    body = re.sub(r"KJIT_CACHE_COUNTERS\(\w+\)", " ", body)
    names = ["struct_size"]
    for decl in body.split(";"):
        decl = re.sub(r"=[^,]*", " ", decl).strip()
        if decl:
            names += [part.split()[-1] for part in decl.split(",")]
    return names


# ---- the lists -----------------------------------------------------------------------------
# Each reader returns the field names as the C struct spells them.


def c_header(root, path):
    body = between(strip_c_comments(read(root, path)), path,
                   r"typedef struct kjit_cache_stats \{", r"\}\s*kjit_cache_stats;",
                   "typedef struct kjit_cache_stats")
    return [re.search(r"(\w+)\s*(?:\[[^\]]*\])?\s*$", d).group(1)
            for d in body.split(";") if d.strip()]


def rust_struct(name):
    def reader(root, path):
        body = between(read(root, path), path, r"^pub struct %s \{" % name, r"^\}",
                       "pub struct " + name)
        return re.findall(r"^\s*pub (\w+)\s*:", body, re.M)
    return reader


def rust_layout_test(root, path):
    body = between(read(root, path), path, r"rust_layout!\(kjit_cache_stats \{", r"\}\)",
                   "rust_layout!(kjit_cache_stats { ... })")
    return re.findall(r"\w+", body)


def go_struct(root, path):
    """The Go struct's fields (Go names)."""
    body = between(read(root, path), path, r"^type CacheStats struct \{", r"^\}",
                   "type CacheStats struct")
    names = []
    for line in re.sub(r"//[^\n]*", "", body).splitlines():
        m = re.match(r"\s*(\w+(?:\s*,\s*\w+)*)\s+\S+\s*$", line)
        if m:
            names += [n.strip() for n in m.group(1).split(",")]
    return names


def go_literal(root, path):
    """(Go field, C field) of each entry of the CacheStats literal that Stats() returns."""
    body = between(read(root, path), path, r"^\treturn CacheStats\{$", r"^\t\}, nil$",
                   "Stats()'s `return CacheStats{...}, nil`")
    pairs = []
    for line in body.splitlines():
        m = re.match(r"\s*(\w+):\s*(.*?),?\s*$", line)
        if m:
            c = re.search(r"\bs\.(\w+)", m.group(2))
            pairs.append((m.group(1), c.group(1) if c else None))
    return pairs


def go_copy(root, path):
    return [c for _, c in go_literal(root, path) if c]


def python_ctypes(root, path):
    body = between(read(root, path), path,
                   r"^class CacheStatsStruct\(ctypes\.Structure\):", r"^    \]",
                   "class CacheStatsStruct's _fields_")
    return re.findall(r"^\s*\(\"(\w+)\",", body, re.M)


def python_record(root, path):
    body = between(read(root, path), path, r"^class CacheStats:", r"^    (?:@|def )|^\S",
                   "class CacheStats")
    body = re.sub(r'""".*?"""', " ", body, flags=re.S)
    return re.findall(r"^    (\w+)\s*:", body, re.M)


def julia_struct(name):
    def reader(root, path):
        body = between(read(root, path), path, r"^struct %s\s*$" % name, r"^end\b",
                       "struct " + name)
        return re.findall(r"^\s*(\w+)::", body, re.M)
    return reader


# (path, what, reader, raw): a raw list mirrors the C struct, field for field.
LISTS = [
    ("bindings/rust/kjit-sys/src/lib.rs", "struct kjit_cache_stats",
     rust_struct("kjit_cache_stats"), True),
    ("bindings/rust/kjit-sys/tests/layout.rs", "rust_layout!(kjit_cache_stats)",
     rust_layout_test, True),
    ("bindings/rust/src/cache.rs", "struct CacheStats", rust_struct("CacheStats"), False),
    ("bindings/go/cache.go", "Stats()'s copy of C.kjit_cache_stats", go_copy, False),
    ("bindings/python/kjit/_lib.py", "CacheStatsStruct._fields_", python_ctypes, True),
    ("bindings/python/kjit/_cache.py", "class CacheStats", python_record, False),
    ("bindings/julia/src/LibKJit.jl", "struct kjit_cache_stats",
     julia_struct("kjit_cache_stats"), True),
    ("bindings/julia/src/KJit.jl", "struct CacheStats", julia_struct("CacheStats"), False),
]
FILES = [INTERNAL, HEADER] + [path for path, _, _, _ in LISTS]


# ---- the checks ----------------------------------------------------------------------------


def check_names(where, names, counter_list, others):
    """Every counter and its total, nothing that is neither one nor another field."""
    problems = []
    expected = {}
    for c in counter_list:
        public = PUBLIC_NAMES.get(c, c)
        expected[public] = "counter '%s'" % c
        expected["total_" + public] = "'%s', the total of counter '%s'," % ("total_" + public, c)
        if public != c:
            expected[public] = "'%s', counter '%s'," % (public, c)
    for field, what in expected.items():
        if field not in names:
            problems.append("%s: %s is missing" % (where, what))
    seen = set()
    for field in names:
        if field in seen:
            problems.append("%s: '%s' is listed twice" % (where, field))
        seen.add(field)
        if field not in expected and field not in others:
            problems.append("%s: extra counter '%s': KJIT_CACHE_COUNTERS (%s) does not have it"
                            % (where, field, INTERNAL))
    return problems


def check_layout(where, names, header):
    """A raw mirror has every field of the header, in its order."""
    problems = ["%s: '%s' of kjit_cache_stats (%s) is missing" % (where, f, HEADER)
                for f in header if f not in names]
    problems += ["%s: '%s' is not a field of kjit_cache_stats (%s)" % (where, f, HEADER)
                 for f in names if f not in header]
    mine = [f for f in names if f in header]
    theirs = [f for f in header if f in names]
    for i, (a, b) in enumerate(zip(mine, theirs)):
        if a != b:
            before = "after '%s'" % theirs[i - 1] if i else "first"
            problems.append("%s: '%s' is out of order: %s has '%s' %s (a raw struct follows the "
                            "C layout)" % (where, a, HEADER, b, before))
            break
    return problems


def check_go_fields(root, path):
    """Every field of Go's CacheStats is set by Stats()."""
    declared = go_struct(root, path)
    set_ = [g for g, _ in go_literal(root, path)]
    problems = ["%s: CacheStats.%s is never set by Stats()" % (path, g)
                for g in declared if g not in set_]
    problems += ["%s: Stats() sets %s, which CacheStats does not declare" % (path, g)
                 for g in set_ if g not in declared]
    return problems


def check(root):
    problems = []
    try:
        counter_list, others = counters(root), other_fields(root)
        header = c_header(root, HEADER)
    except Missing as e:
        return [str(e)]
    problems += check_names("%s: kjit_cache_stats" % HEADER, header, counter_list, others)
    for path, what, reader, raw in LISTS:
        try:
            names = reader(root, path)
        except Missing as e:
            problems.append(str(e))
            continue
        where = "%s: %s" % (path, what)
        problems += check_names(where, names, counter_list, others)
        if raw:
            problems += check_layout(where, names, header)
    try:
        problems += check_go_fields(root, "bindings/go/cache.go")
    except Missing as e:
        problems.append(str(e))
    return problems


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--root", default=os.path.join(os.path.dirname(__file__), ".."),
                    help="repository root (default: this script's parent directory)")
    args = ap.parse_args()
    problems = check(args.root)
    for p in problems:
        print(p)
    if problems:
        print("check_counters: %d problem(s); KJIT_CACHE_COUNTERS in %s is the reference"
              % (len(problems), INTERNAL), file=sys.stderr)
        return 1
    print("check_counters: %d counters agree in %d lists" % (len(counters(args.root)),
                                                              len(LISTS) + 1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
