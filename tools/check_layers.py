#!/usr/bin/env python3
"""Fails when a file of src/ includes a room above its own.

The rooms of src/ and what each may include (besides the public headers, kjit/...), from
the top down; a dependency points down, never up or sideways:

  api      the extern "C" shims
  cli      the kjit tool: the public API only (and the built-in header texts it lists)
  grouped  grouped GEMM: kernels rendered, compiled and launched through kernel handles
  kernel   kernel handles: compile-or-hit, load, launch
  compile  the compiler: a request's key, its hit or its compile, here or in the worker
  worker   the compile worker: its client, protocol and server (the kjit-worker program)
  nvrtc    one NVRTC compile of a request: options normalised, precompiled headers, the
           program, the audited run (what this process and the worker both run)
  blas     cuBLASLt GEMM and its plan cache
  link     nvJitLink and the link step
  key      what a cache key covers
  store    the cache's tiers, entries, flights and facts
  cuda     the CUDA libraries through dlopen: the driver and NVRTC
  util     hashing, logging, files, loaders

Usage: check_layers.py [--root DIR]   (DIR holds src/; default: the repository)
"""
import argparse
import os
import re
import sys

BELOW_WORKER = {"nvrtc", "key", "store", "cuda", "util"}
BELOW_COMPILE = {"worker"} | BELOW_WORKER
ALLOWED = {
    "api": {"grouped", "kernel", "blas", "link", "compile"} | BELOW_COMPILE,
    "cli": set(),
    "grouped": {"kernel", "compile"} | BELOW_COMPILE,
    "kernel": {"compile"} | BELOW_COMPILE,
    "compile": set(BELOW_COMPILE),
    "worker": set(BELOW_WORKER),
    "nvrtc": {"key", "store", "cuda", "util"},
    "blas": {"store", "cuda", "util"},
    "link": {"store", "cuda", "util"},
    "key": {"store", "cuda", "util"},
    "store": {"util"},
    "cuda": {"util"},
    "util": set(),
}
ALLOWED_FILES = {"cli": {"key/builtin_std.h"}}
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)
# Files that are a layer of their own inside a folder: path without extension -> layer.


def room_of(path):
    """The layer of a path relative to src/: its folder ("worker/client.h" -> "worker")."""
    return path.split("/", 1)[0]


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
                layer = room_of(os.path.relpath(path, src))
                with open(path, encoding="utf-8", errors="replace") as f:
                    text = f.read()
                for inc in INCLUDE.findall(text):
                    if "/" not in inc or inc.startswith("kjit/"):
                        continue
                    target = room_of(inc)
                    if target == layer:
                        continue
                    if target in ALLOWED[layer] or inc in ALLOWED_FILES.get(layer, ()):
                        continue
                    rel = os.path.relpath(path, root)
                    out.append('%s includes "%s": %s may not depend on %s' % (rel, inc, layer, target))
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
