#!/usr/bin/env python3
"""torch.matmul TFLOP/s on the GPU, the baseline for bench_gemm.

Prints one line per case: "<dtype> <n> <tflops>", for n x n x n row-major products, timed
like bench_gemm (warm-up, then one CUDA event pair per run, median of the runs).
Run by bench_gemm --torch bench/torch_gemm.py, or on its own.
"""
import statistics
import sys

import torch


def bench(dtype, n, reps):
    a = torch.randn(n, n, device="cuda", dtype=dtype)
    b = torch.randn(n, n, device="cuda", dtype=dtype)
    out = torch.empty(n, n, device="cuda", dtype=dtype)
    for _ in range(5):
        torch.matmul(a, b, out=out)
    torch.cuda.synchronize()
    times = []
    for _ in range(reps):
        start = torch.cuda.Event(enable_timing=True)
        end = torch.cuda.Event(enable_timing=True)
        start.record()
        torch.matmul(a, b, out=out)
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end))
    ms = statistics.median(times)
    return 2.0 * n * n * n / (ms * 1e-3) / 1e12


def main():
    if not torch.cuda.is_available():
        print("torch: CUDA not available", file=sys.stderr)
        return 1
    torch.backends.cuda.matmul.allow_tf32 = True
    for name, dtype in (("bf16", torch.bfloat16), ("f16", torch.float16), ("tf32", torch.float32)):
        for n in (4096, 8192):
            reps = 30 if n == 4096 else 15
            print(f"{name} {n} {bench(dtype, n, reps):.1f}", flush=True)
    print(f"torch {torch.__version__} cuda {torch.version.cuda}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
