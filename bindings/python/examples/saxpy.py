#!/usr/bin/env python3
"""saxpy through kjit: compile through the cache (no GPU needed), then run on a GPU with
PyTorch or CuPy when there is one.

    KJIT_LIBRARY=build/libkjit.so.0 python3 bindings/python/examples/saxpy.py
"""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import kjit  # noqa: E402

SAXPY = r'''
extern "C" __global__ void saxpy(float a, const float* x, float* y, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = a * x[i] + y[i];
}
'''


def main():
    with kjit.Cache() as cache, kjit.Compiler(cache) as compiler:
        with compiler.compile(SAXPY, arch="sm_90") as b:
            print("compiled for %s: tier %s, %d bytes of PTX, key %s"
                  % (b.target, b.tier.name, len(b.ptx), b.key[:16]))
        try:
            kjit.device_count()
        except kjit.CudaUnavailable as e:
            print("no GPU: %s" % e.message)
            return 0
        try:
            import torch
        except ImportError:
            torch = None
        n = 1 << 20
        with compiler.kernel(SAXPY, "saxpy") as k:
            if torch is not None:
                x = torch.ones(n, device="cuda")
                y = torch.full((n,), 2.0, device="cuda")
            else:
                import cupy
                x = cupy.ones(n, dtype=cupy.float32)
                y = cupy.full(n, 2.0, dtype=cupy.float32)
            k(((n + 255) // 256,), (256,), (3.0, x, y, n))
            print("y[:4] =", y[:4].tolist(), "(expected 5.0)")
        print(cache.stats())
    return 0


if __name__ == "__main__":
    sys.exit(main())
