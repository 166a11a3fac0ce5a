#!/usr/bin/env python3
"""torch.matmul TFLOP/s on the GPU, the baseline for bench_gemm.

Prints one line per case: "<dtype> <n> <tflops>", for n x n x n row-major products, timed
like bench_gemm (warm-up, then one CUDA event pair per run with no synchronisation between
runs, median of the runs, best of three rounds).
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

    def round_median():
        # Events around each run, no synchronisation in between (as bench_gemm does): the
        # GPU stays busy, so host launch latency is not counted.
        starts = [torch.cuda.Event(enable_timing=True) for _ in range(reps)]
        ends = [torch.cuda.Event(enable_timing=True) for _ in range(reps)]
        for _ in range(3):
            torch.matmul(a, b, out=out)
        for i in range(reps):
            starts[i].record()
            torch.matmul(a, b, out=out)
            ends[i].record()
        torch.cuda.synchronize()
        return statistics.median(s.elapsed_time(e) for s, e in zip(starts, ends))

    ms = min(round_median() for _ in range(3))  # best of three rounds, as bench_gemm
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
