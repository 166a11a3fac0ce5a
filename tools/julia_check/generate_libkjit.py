#!/usr/bin/env python3
"""Regenerates bindings/julia/src/LibKJit.jl (the raw ccall layer) from the C headers.

    python3 tools/julia_check/generate_libkjit.py [include/kjit] [bindings/julia/src/LibKJit.jl]

Run it after a public header changes; check.js then verifies the result against the
headers and libkjit.so. The Julia API in KJit.jl is written by hand and may need the new
function too.
"""
import json
import os
import re
import sys

here = os.path.dirname(os.path.abspath(__file__))
root = os.path.dirname(os.path.dirname(here))
hdr_dir = sys.argv[1] if len(sys.argv) > 1 else os.path.join(root, "include", "kjit")
out_path = sys.argv[2] if len(sys.argv) > 2 else os.path.join(root, "bindings", "julia", "src", "LibKJit.jl")
# Functions that can block: emitted as `@gcsafe ccall(...)` (see blocking.json).
with open(os.path.join(here, "blocking.json")) as fh:
    gcsafe = set(json.load(fh)["gcsafe"])
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
          "uint64_t": "UInt64", "uint32_t": "UInt32", "int32_t": "Int32", "double": "Cdouble", "float": "Cfloat",
          "kjit_status": "Cint", "char": "Cchar"}
handles = {"kjit_cache", "kjit_options", "kjit_compiler", "kjit_binary", "kjit_future", "kjit_kernel", "kjit_gemm",
           "kjit_grouped_gemm",
           "kjit_linker", "kjit_source"}
structnames = {s[1] for s in structs}
fnptrs = {"kjit_log_fn", "kjit_cache_list_fn"}
nullable_str = {("kjit_options_add_define", "value"), ("kjit_linker_add_binary", "name"),
                ("kjit_linker_add_data", "name")}

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
            # A buffer the library writes (char*, not const char*) is bytes, not a string.
            writable = "const" not in ctype
            if is_ret or arr or writable or (fn, name) in nullable_str or name in ("data", "out"):
                return "Ptr{UInt8}"
            return "Cstring"
        return "Ptr{Ptr{UInt8}}"
    if base in handles or base == "void":
        return "Ptr{Cvoid}" if depth == 1 else "Ptr{Ptr{Cvoid}}"
    if base in structnames:
        assert depth == 1
        return "Ptr{%s}" % base
    inner = scalar[base]
    return "Ptr{%s}" % inner if depth == 1 else "Ptr{Ptr{%s}}" % inner

GCSAFE_MACRO = '''
"""
    @gcsafe ccall((:name, libkjit), Ret, (T1, ...), args...)

A `ccall` during which the garbage collector may run on Julia's other threads. The
arguments are converted and rooted first; then the thread is marked GC-safe
(`jl_gc_safe_enter`) for exactly the C call, and marked back (`jl_gc_safe_leave`, which
waits for a collection in progress) before anything touches Julia objects again. Used for
every C function that can block (tools/julia_check/blocking.json lists them and why), the
way CUDA.jl calls the blocking driver functions, so that a thread parked in a compile or a
wait never stops garbage collection everywhere else. The C function must not run Julia
code that allocates on this thread (`kjit_cache_list` stays a plain `ccall`).
"""
macro gcsafe(ex)
    Meta.isexpr(ex, :call) && ex.args[1] === :ccall && length(ex.args) >= 4 ||
        throw(ArgumentError("@gcsafe expects ccall((:name, lib), Ret, (Types...,), args...)"))
    target, rettype, types = ex.args[2], ex.args[3], ex.args[4]
    Meta.isexpr(types, :tuple) ||
        throw(ArgumentError("@gcsafe: the argument types must be a literal tuple"))
    args = ex.args[5:end]
    length(args) == length(types.args) ||
        throw(ArgumentError("@gcsafe: $(length(types.args)) argument types, $(length(args)) values"))
    roots = [gensym("root") for _ in args]
    raws = [gensym("raw") for _ in args]
    converts = [:($r = Base.cconvert($(esc(T)), $(esc(a)))) for (r, T, a) in zip(roots, types.args, args)]
    unboxes = [:($p = Base.unsafe_convert($(esc(T)), $r)) for (p, T, r) in zip(raws, types.args, roots)]
    # The C call itself, on the already converted values (built as an Expr: the static
    # check reads every literal ccall as a call of libkjit).
    inner = Expr(:call, :ccall, esc(target), esc(rettype),
                 Expr(:tuple, map(esc, types.args)...), raws...)
    return quote
        $(converts...)
        GC.@preserve $(roots...) begin
            $(unboxes...)
            local gc_state = ccall(:jl_gc_safe_enter, Int8, ())
            local result = $inner
            ccall(:jl_gc_safe_leave, Cvoid, (Int8,), gc_state)
            result
        end
    end
end'''

out = []
out.append("# Raw ccall layer: one Julia function per public C function, named and typed as in")
out.append("# include/kjit/*.h, and the C structs with identical layouts. Generated from the headers")
out.append("# and checked against them and against libkjit.so by tools/julia_check.")
out.append("module LibKJit")
out.append("")
out.append('"Library name passed to every ccall. KJit.__init__ loads ENV[\\"KJIT_LIB\\"] first when set."')
out.append('const libkjit = "libkjit.so.0"')
out.append(GCSAFE_MACRO)
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
    safe = "@gcsafe " if name in gcsafe else ""
    call = "%sccall((:%s, libkjit), %s, %s%s)" % (safe, name, rt, tup, "".join(", " + n for n in names))
    line = "%s(%s) = %s" % (name, ", ".join(names), call)
    if len(line) <= 100:
        out.append(line)
    else:
        out.append("%s(%s) =" % (name, ", ".join(names)))
        out.append("    %sccall((:%s, libkjit), %s," % (safe, name, rt))
        out.append("          %s," % tup)
        out.append("          %s)" % ", ".join(names) if names else "")
out.append("")
out.append("end # module LibKJit")
with open(out_path, "w") as fh:
    fh.write("\n".join(out) + "\n")
print("wrote %s: %d functions, %d structs" % (out_path, len(funcs), len(structs)))
