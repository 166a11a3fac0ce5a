#!/usr/bin/env python3
"""torch.matmul on two GPUs at once, the baseline for bench_multi_gpu.

    torch_multi_gpu.py [n] [reps]

Driven line by line by bench_multi_gpu (so that its rounds and torch's alternate): after
setting up both devices it prints "ready <versions>"; each "round" on stdin runs one round
and prints "<tflops device 0> <tflops device 1>"; "quit" (or end of input) ends it.

A round is timed like bench_multi_gpu's: one thread per device, each on its own stream,
three untimed products, then both threads start together and record a CUDA event pair
around each of `reps` products of row-major bf16 n x n matrices; the median of the pairs
gives the device's TFLOP/s.
"""
import statistics
import sys
import threading

import torch


def main():
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 4096
    reps = int(sys.argv[2]) if len(sys.argv) > 2 else 50
    if not torch.cuda.is_available() or torch.cuda.device_count() < 2:
        print(f"error: torch sees {torch.cuda.device_count()} CUDA device(s), needs two",
              flush=True)
        return 1
    devices = (0, 1)
    state = []
    for d in devices:
        with torch.cuda.device(d):
            a = torch.randn(n, n, device=f"cuda:{d}", dtype=torch.bfloat16)
            b = torch.randn(n, n, device=f"cuda:{d}", dtype=torch.bfloat16)
            out = torch.empty(n, n, device=f"cuda:{d}", dtype=torch.bfloat16)
            stream = torch.cuda.Stream(device=d)
            with torch.cuda.stream(stream):
                for _ in range(5):
                    torch.matmul(a, b, out=out)
            stream.synchronize()
            state.append((a, b, out, stream))
    print(f"ready torch {torch.__version__} (CUDA {torch.version.cuda})", flush=True)

    flop = 2.0 * n * n * n
    for line in sys.stdin:
        command = line.strip()
        if command == "quit":
            break
        if command != "round":
            continue
        barrier = threading.Barrier(len(devices))
        medians = [None] * len(devices)
        errors = []

        def run(i):
            try:
                a, b, out, stream = state[i]
                with torch.cuda.device(i), torch.cuda.stream(stream):
                    starts = [torch.cuda.Event(enable_timing=True) for _ in range(reps)]
                    ends = [torch.cuda.Event(enable_timing=True) for _ in range(reps)]
                    for _ in range(3):
                        torch.matmul(a, b, out=out)
                    barrier.wait()
                    for k in range(reps):
                        starts[k].record(stream)
                        torch.matmul(a, b, out=out)
                        ends[k].record(stream)
                    stream.synchronize()
                    medians[i] = statistics.median(s.elapsed_time(e) for s, e in zip(starts, ends))
            except Exception as e:  # reported to the benchmark instead of a hang
                errors.append(f"device {i}: {e}")
                barrier.abort()

        threads = [threading.Thread(target=run, args=(i,)) for i in range(len(devices))]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        if errors or None in medians:
            print("error: " + "; ".join(errors or ["a round did not finish"]), flush=True)
            return 1
        print(" ".join(f"{flop / (ms * 1e-3) / 1e12:.1f}" for ms in medians), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
