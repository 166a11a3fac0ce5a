#!/usr/bin/env python3
"""The Python leg of the cross-language cache test (driven by bindings/test_bindings.sh):

    crosslang.py <cache-dir> <source.cu> <ptx-out> <expected-tier: compiled|memory|disk>

Compiles the source with the options every leg uses (target sm_80, -std=c++17,
-DBLOCK=256, PTX + CUBIN), writes the PTX and exits non-zero unless the binary came from
the expected tier. libkjit.so.0 is found as usual (KJIT_LIBRARY, LD_LIBRARY_PATH, ...).
"""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import kjit  # noqa: E402


def main(argv):
    if len(argv) != 5:
        print("usage: %s <cache-dir> <source.cu> <ptx-out> <compiled|memory|disk>" % argv[0],
              file=sys.stderr)
        return 2
    cache_dir, source, ptx_out, want = argv[1:]
    tiers = {"compiled": kjit.Tier.COMPILED, "memory": kjit.Tier.MEMORY,
             "disk": kjit.Tier.DISK}
    if want not in tiers:
        print("unknown tier %s" % want, file=sys.stderr)
        return 2
    with open(source) as f:
        src = f.read()
    try:
        with kjit.Cache(cache_dir) as cache, kjit.Compiler(cache) as compiler, \
                kjit.Options(arch="sm_80", std=17, defines={"BLOCK": "256"},
                             outputs=kjit.Output.PTX | kjit.Output.CUBIN) as opts, \
                compiler.compile(src, opts) as binary:
            with open(ptx_out, "w") as f:
                f.write(binary.ptx)
            tier = binary.tier
            print("python: key %s tier %d" % (binary.key, tier))
    except kjit.KjitError as e:
        print("python: %s" % e, file=sys.stderr)
        return 1
    if tier != tiers[want]:
        print("python: expected tier %d, got %d" % (tiers[want], tier), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
