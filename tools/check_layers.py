#!/usr/bin/env python3
"""Fails when a file of src/ includes a room above its own.

The rooms of src/ and what each may include (besides the public headers, kjit/...), from
the top down; a dependency points down, never up or sideways:

  api      the extern "C" shims
  cli      the kjit tool: the public API only (and the built-in header texts it lists)
  worker   the compile worker executable
  kernel   kernel handles: compile-or-hit, load, launch
  blas     cuBLASLt GEMM and its plan cache
  link     nvJitLink and the link step
  compile  runs NVRTC, in this process or in the worker
  key      what a cache key covers
  store    the cache's tiers, entries, flights and facts
  nvrtc    NVRTC through dlopen
  cuda     the CUDA driver through dlopen
  util     hashing, logging, files, loaders

Usage: check_layers.py [--root DIR]   (DIR holds src/; default: the repository)
"""
import argparse
import os
import re
import sys

BELOW_COMPILE = {"key", "store", "nvrtc", "cuda", "util"}
ALLOWED = {
    "api": {"kernel", "blas", "link", "compile", "grouped"} | BELOW_COMPILE,
    "cli": set(),
    "worker": {"compile"} | BELOW_COMPILE,
    "kernel": {"compile"} | BELOW_COMPILE,
    "grouped": {"kernel", "compile"} | BELOW_COMPILE,
    "blas": {"store", "cuda", "util"},
    "link": {"store", "cuda", "util"},
    "compile": set(BELOW_COMPILE),
    "key": {"store", "nvrtc", "util"},
    "store": {"util"},
    "nvrtc": {"util"},
    "cuda": {"util"},
    "util": set(),
}
# Single files a room may include beyond its rooms.
ALLOWED_FILES = {"cli": {"key/builtin_std.h"}}
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)


def problems(root):
    src = os.path.join(root, "src")
    out = []
    for room in sorted(os.listdir(src)):
        base = os.path.join(src, room)
        if not os.path.isdir(base):
            continue
        if room not in ALLOWED:
            out.append("src/%s: a room check_layers.py does not know: place it in ALLOWED" % room)
            continue
        for dirpath, _, files in os.walk(base):
            for name in sorted(files):
                if not name.endswith((".c", ".cpp", ".h")):
                    continue
                path = os.path.join(dirpath, name)
                with open(path, encoding="utf-8", errors="replace") as f:
                    text = f.read()
                for inc in INCLUDE.findall(text):
                    target = inc.split("/", 1)[0] if "/" in inc else None
                    if target is None or target in ("kjit", room):
                        continue
                    if target in ALLOWED[room] or inc in ALLOWED_FILES.get(room, ()):
                        continue
                    rel = os.path.relpath(path, root)
                    out.append('%s includes "%s": %s may not depend on %s' % (rel, inc, room, target))
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--root", default=os.path.join(os.path.dirname(__file__), ".."))
    args = ap.parse_args()
    found = problems(args.root)
    for p in found:
        print(p)
    if found:
        print("%d include(s) against the layers (tools/check_layers.py)" % len(found))
        return 1
    print("layers: every include points down")
    return 0


if __name__ == "__main__":
    sys.exit(main())
