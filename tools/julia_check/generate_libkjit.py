#!/usr/bin/env python3
"""Regenerates bindings/julia/src/LibKJit.jl (the raw ccall layer) from the C headers.

    python3 tools/julia_check/generate_libkjit.py [include/kjit] [bindings/julia/src/LibKJit.jl]

Run it after a public header changes; check.js then verifies the result against the
headers and libkjit.so. The Julia API in KJit.jl is written by hand and may need the new
function too.
"""
import os
import re
import sys

here = os.path.dirname(os.path.abspath(__file__))
root = os.path.dirname(os.path.dirname(here))
hdr_dir = sys.argv[1] if len(sys.argv) > 1 else os.path.join(root, "include", "kjit")
out_path = sys.argv[2] if len(sys.argv) > 2 else os.path.join(root, "bindings", "julia", "src", "LibKJit.jl")
order = ["common.h", "compile.h", "cache.h", "kernel.h"]
files = [f for f in order if os.path.exists(os.path.join(hdr_dir, f))]
files += sorted(f for f in os.listdir(hdr_dir) if f.endswith(".h") and f not in order and f != "kjit.h")
def strip(s):
    s = re.sub(r"/\*.*?\*/", " ", s, flags=re.S)
    s = re.sub(r"//[^\n]*", " ", s)
    s = re.sub(r"^\s*#.*?(?<!\\)$", " ", s, flags=re.M | re.S)
    return s
funcs = []
structs = []
for f in files:
    txt = strip(open(os.path.join(hdr_dir, f)).read())
    for m in re.finditer(r"KJIT_EXPORT\s+([^;(]+?)\s*\b(kjit_\w+)\s*\(([^)]*)\)\s*;", txt):
        ret, name, params = m.group(1), m.group(2), m.group(3)
        ps = [p.strip() for p in params.split(",")] if params.strip() not in ("", "void") else []
        funcs.append((f, " ".join(ret.split()), name, [" ".join(p.split()) for p in ps]))
    for m in re.finditer(r"typedef\s+struct\s+(kjit_\w+)\s*\{(.*?)\}\s*(\w+)\s*;", txt, flags=re.S):
        body = m.group(2)
        fields = []
        for decl in body.split(";"):
            decl = " ".join(decl.split())
            if not decl: continue
            # split "int64_t m, n, k" style
            tm = re.match(r"((?:const\s+)?[\w]+(?:\s*\*)*)\s+(.*)$", decl)
            typ, names = tm.group(1), tm.group(2)
            for n in names.split(","):
                n = n.strip()
                ptr = ""
                while n.startswith("*"):
                    ptr += "*"; n = n[1:].strip()
                arr = None
                am = re.match(r"(\w+)\[(\d+)\]", n)
                if am: n, arr = am.group(1), int(am.group(2))
                fields.append((typ + ptr, n, arr))
        structs.append((f, m.group(3), fields))

scalar = {"void": "Cvoid", "int": "Cint", "unsigned": "Cuint", "size_t": "Csize_t", "int64_t": "Int64",
          "uint64_t": "UInt64", "uint32_t": "UInt32", "int32_t": "Int32", "double": "Cdouble",
          "kjit_status": "Cint", "char": "Cchar"}
handles = {"kjit_cache", "kjit_options", "kjit_compiler", "kjit_binary", "kjit_future", "kjit_kernel", "kjit_gemm"}
structnames = {s[1] for s in structs}
fnptrs = {"kjit_log_fn", "kjit_cache_list_fn"}
nullable_str = {("kjit_options_add_define", "value")}

def split_param(p):
    m = re.match(r"(.*?)(\w+)(\[\d+\])?$", p)
    return m.group(1).strip(), m.group(2), m.group(3)

def jtype(ctype, name=None, fn=None, is_ret=False, arr=None):
    t = ctype.replace("const", " ")
    depth = t.count("*")
    base = t.replace("*", " ").split()[0]
    if arr: depth += 1
    if base in fnptrs: return "Ptr{Cvoid}"
    if depth == 0:
        return scalar[base]
    if base == "char":
        if depth == 1:
            if is_ret or arr or (fn, name) in nullable_str or name in ("data", "out"): return "Ptr{UInt8}"
            return "Cstring"
        return "Ptr{Ptr{UInt8}}"
    if base in handles or base == "void":
        return "Ptr{Cvoid}" if depth == 1 else "Ptr{Ptr{Cvoid}}"
    if base in structnames:
        assert depth == 1
        return "Ptr{%s}" % base
    inner = scalar[base]
    return "Ptr{%s}" % inner if depth == 1 else "Ptr{Ptr{%s}}" % inner

out = []
out.append("# Raw ccall layer: one Julia function per public C function, named and typed as in")
out.append("# include/kjit/*.h, and the C structs with identical layouts. Generated from the headers")
out.append("# and checked against them and against libkjit.so by tools/julia_check.")
out.append("module LibKJit")
out.append("")
out.append('"Library name passed to every ccall. KJit.__init__ loads ENV[\\"KJIT_LIB\\"] first when set."')
out.append('const libkjit = "libkjit.so.0"')
for f, sname, fields in structs:
    out.append("")
    out.append("\"C struct `%s` (%s).\"" % (sname, f))
    out.append("struct %s" % sname)
    for typ, n, arr in fields:
        t = typ.replace("const", " ")
        depth = t.count("*"); base = t.replace("*", " ").split()[0]
        if depth:
            jt = "Ptr{UInt8}" if base == "char" else "Ptr{Cvoid}"
        else:
            jt = scalar[base]
        if arr: jt = "NTuple{%d,%s}" % (arr, jt)
        out.append("    %s::%s" % (n, jt))
    out.append("end")
cur = None
for f, ret, name, ps in funcs:
    if f != cur:
        out.append(""); out.append("# ---- %s " % f + "-" * (80 - 10 - len(f))); cur = f
    names, types = [], []
    for p in ps:
        ct, n, arr = split_param(p)
        names.append(n); types.append(jtype(ct, n, name, arr=arr))
    rt = jtype(ret, is_ret=True)
    proto = "%s %s(%s)" % (ret, name, ", ".join(ps) if ps else "void")
    out.append("")
    out.append("\"`%s`\"" % proto.replace("\"", "\\\""))
    tup = "(" + ", ".join(types) + ("," if len(types) == 1 else "") + ")"
    call = "ccall((:%s, libkjit), %s, %s%s)" % (name, rt, tup, "".join(", " + n for n in names))
    line = "%s(%s) = %s" % (name, ", ".join(names), call)
    if len(line) <= 100:
        out.append(line)
    else:
        out.append("%s(%s) =" % (name, ", ".join(names)))
        out.append("    ccall((:%s, libkjit), %s," % (name, rt))
        out.append("          %s," % tup)
        out.append("          %s)" % ", ".join(names) if names else "")
out.append("")
out.append("end # module LibKJit")
with open(out_path, "w") as fh:
    fh.write("\n".join(out) + "\n")
print("wrote %s: %d functions, %d structs" % (out_path, len(funcs), len(structs)))
