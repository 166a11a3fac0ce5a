#!/usr/bin/env python3
"""CuPy RawKernel on the kernels of bench_launch: launch enqueue overhead, and time to the
first completed launch in a fresh process with a warm and with a cold disk cache.

    python3 cupy_bench.py [--out results.json] [--reps N]

Writes {"cupy_version": ..., "kernels": {"saxpy": {"enqueue_us": ..., "warm_ms": ...,
"cold_ms": ...}, ...}} for `bench_launch --cupy results.json`, and prints a short table.
As in bench_launch, each fresh process initialises CUDA and allocates its buffers before
the clock starts; the clock covers RawKernel creation, compile-or-load, launch and sync.
"""
import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

EMPTY = r'''extern "C" __global__ void empty_kernel() {}
'''

SAXPY = r'''
extern "C" __global__ void saxpy(float a, const float* x, float* y, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = a * x[i] + y[i];
}
'''

CUB = r'''
#include <cub/block/block_reduce.cuh>
extern "C" __global__ void block_sum(const float* in, float* out, int n) {
  using BlockReduce = cub::BlockReduce<float, 256>;
  __shared__ typename BlockReduce::TempStorage temp;
  int i = blockIdx.x * 256 + threadIdx.x;
  float v = i < n ? in[i] : 0.0f;
  float sum = BlockReduce(temp).Sum(v);
  if (threadIdx.x == 0) out[blockIdx.x] = sum;
}
'''

KERNELS = {
    "empty": (EMPTY, "empty_kernel", False),
    "saxpy": (SAXPY, "saxpy", False),
    "block_sum": (CUB, "block_sum", True),
}

N = 1 << 20


def options(cub):
    opts = ("--std=c++17",)
    if cub:
        cccl = os.environ.get("KJIT_CCCL_INCLUDE", "/usr/local/cuda/include/cccl")
        opts += ("-I" + cccl,)
    return opts


def make_args(cp, kid, n):
    if kid == "empty":
        return (), 1, 1
    a = cp.zeros(n, dtype=cp.float32)
    b = cp.zeros(n, dtype=cp.float32)
    grid = (n + 255) // 256
    if kid == "saxpy":
        return (cp.float32(2.0), a, b, cp.int32(n)), grid, 256
    return (a, b, cp.int32(n)), grid, 256


def child(kid):
    import cupy as cp
    src, name, cub = KERNELS[kid]
    args, grid, block = make_args(cp, kid, N)
    cp.cuda.Device(0).synchronize()
    t0 = time.perf_counter()
    k = cp.RawKernel(src, name, options=options(cub))
    k((grid,), (block,), args)
    cp.cuda.Device(0).synchronize()
    t1 = time.perf_counter()
    print("RESULT %.4f" % ((t1 - t0) * 1000.0))


def spawn(kid, cache_dir):
    env = dict(os.environ)
    env["CUPY_CACHE_DIR"] = cache_dir
    env.pop("CUPY_CACHE_IN_MEMORY", None)
    r = subprocess.run([sys.executable, os.path.abspath(__file__), "--child", kid],
                       env=env, capture_output=True, text=True)
    for line in r.stdout.splitlines():
        if line.startswith("RESULT "):
            return float(line.split()[1])
    raise RuntimeError("child %s failed:\n%s%s" % (kid, r.stdout, r.stderr))


def enqueue_us(cp, kid):
    src, name, cub = KERNELS[kid]
    k = cp.RawKernel(src, name, options=options(cub))
    args, grid, block = make_args(cp, kid, 4096)
    stream = cp.cuda.Stream(non_blocking=True)
    batch, batches = 200, 150
    samples = []
    with stream:
        for rep in range(batches + 5):
            stream.synchronize()
            t0 = time.perf_counter()
            for _ in range(batch):
                k((grid,), (block,), args)
            t1 = time.perf_counter()
            if rep >= 5:
                samples.append((t1 - t0) * 1e6 / batch)
        stream.synchronize()
    return statistics.median(samples)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--child")
    p.add_argument("--out")
    p.add_argument("--reps", type=int, default=7)
    a = p.parse_args()
    if a.child:
        child(a.child)
        return 0
    try:
        import cupy as cp
    except Exception as e:  # noqa: BLE001 - report and carry on without CuPy numbers
        print("cupy_bench: CuPy not available: %s" % e)
        return 0
    result = {"cupy_version": cp.__version__, "kernels": {}}
    root = tempfile.mkdtemp(prefix="kjit-cupy-")
    try:
        for kid in KERNELS:
            row = {}
            try:
                if kid != "block_sum":
                    row["enqueue_us"] = enqueue_us(cp, kid)
                if kid != "empty":
                    warm_dir = os.path.join(root, "warm-" + kid)
                    os.makedirs(warm_dir)
                    spawn(kid, warm_dir)  # fills the disk cache
                    row["warm_ms"] = statistics.median(
                        [spawn(kid, warm_dir) for _ in range(a.reps)])
                    colds = []
                    for i in range(min(a.reps, 3)):
                        d = os.path.join(root, "cold-%s-%d" % (kid, i))
                        os.makedirs(d)
                        colds.append(spawn(kid, d))
                    row["cold_ms"] = statistics.median(colds)
            except Exception as e:  # noqa: BLE001
                print("cupy_bench: %s: %s" % (kid, e), file=sys.stderr)
            result["kernels"][kid] = row
    finally:
        shutil.rmtree(root, ignore_errors=True)
    print("CuPy %s RawKernel" % cp.__version__)
    print("| kernel | enqueue (us) | first launch, warm cache (ms) | first launch, cold (ms) |")
    print("| --- | ---: | ---: | ---: |")
    for kid, row in result["kernels"].items():
        cells = [("%.2f" % row[m]) if m in row else "-"
                 for m in ("enqueue_us", "warm_ms", "cold_ms")]
        print("| %s | %s |" % (kid, " | ".join(cells)))
    if a.out:
        with open(a.out, "w") as f:
            json.dump(result, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
