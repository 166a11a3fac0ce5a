#!/usr/bin/env python3
"""Grouped GEMM: kjit.GroupedGemm against torch._grouped_mm in one process.

For each shape of issue 43 (bf16, rows sorted by expert, device offsets), both run on the
same tensors in interleaved rounds (torch, kjit, torch, kjit, ...); each round times `reps`
back-to-back calls with one CUDA event pair per call and keeps the median; the table gives
the median over rounds. Prefill shapes report TFLOP/s (2 * rows * N * K), decode shapes the
weight bandwidth (G * K * N * 2 bytes per call) too. The outputs of both are compared first
(relative Frobenius error).

    python3 bench/bench_grouped_gemm.py [--rounds 5] [--reps 20] [--only NAME]
        [--variants 0:0:0,128:6:2,256:4:1:2] [--order nk|kn|both] [--epilogue none|swiglu] [--ceiling]
        [--min-ms 300] [--dense] [--clocks]

--ceiling: for the decode shapes, what this device's HBM delivers to plain streaming
kernels on the same weight bytes, timed in the same interleaved rounds: torch's sum of the
weight tensor (a read of the bytes, fp32 accumulation), a read-only CuPy kernel of 16-byte
streaming loads at two grid shapes (when CuPy is installed), and a copy of it into another
tensor (read and write: its TB/s counts both). The read ceiling is the fastest of the reads.

--epilogue swiglu: the weights hold gate and up halves (N = 2 x the output width); kjit's
fused gated epilogue (out = silu(gate) * up, N/2 columns) against torch._grouped_mm
followed by torch's silu(h[:, :N/2]) * h[:, N/2:] (what an eager MoE layer runs).
--dtype fp8: fp8 e4m3 inputs with row-wise scales (scale_a (rows,), scale_b (G, N), fp32;
bf16 out), B order NK, kjit's scaled call against torch._scaled_grouped_mm on the same
tensors, with use_fast_accum=False (torch's default) and True (no promotion of the fp8
accumulator, which is what kjit's kernel does) where the installed torch takes it.
--dtype fp8 --scales block: also kjit with DeepSeek-style block scales (A per row and
128-wide K block, B per 128 x 128 block; promoted per K block) on the same fp8 tensors, in
the same rounds (torch has no block-scaled grouped GEMM to compare with).
--dense: for the prefill shapes, a dense torch.mm (cuBLAS) of the same FLOPs, A (rows x K)
times the first expert's weights (K x N), in the same interleaved rounds: what this device's
own dense GEMM reaches on that work, beside the grouped kernels.
--min-ms MS: each round of each call lasts at least MS milliseconds (more back-to-back
calls than --reps where one call is shorter), so the board's power and clocks settle within
the round instead of each call being timed on the headroom left by the round before it.
--clocks: after the timed rounds, each timed call runs back to back for about a second while
nvidia-smi samples the SM clock and board power every 20 ms; the medians over the second's
samples are printed, with each call's TFLOP/s as a fraction of the peak at that clock (SMs x
4096 bf16 FLOP per SM per cycle; 989 TFLOPS on 132 SMs at 1830 MHz).
Needs PyTorch with CUDA and the kjit Python binding (KJIT_LIBRARY or an installed libkjit).
"""
import argparse
import statistics
import subprocess
import sys
import threading
import time

import torch

import kjit

# name, G, K, N, rows, routing
SHAPES = [
    ("mixtral-w13", 8, 4096, 28672, 8192, "uniform"),
    ("mixtral-w2", 8, 14336, 4096, 8192, "uniform"),
    ("mixtral-w13-skew", 8, 4096, 28672, 8192, "zipf"),
    ("dsv3-w13", 32, 7168, 4096, 16384, "uniform"),
    ("dsv3-w2", 32, 2048, 7168, 16384, "uniform"),
    ("qwen3-w13", 128, 2048, 1536, 32768, "uniform"),
    ("qwen3-w13-skew", 128, 2048, 1536, 32768, "zipf"),
    ("decode-128x4", 128, 2048, 1536, 512, "uniform"),
    ("decode-8x16", 8, 4096, 28672, 128, "uniform"),
]


def group_sizes(g, rows, routing, gen):
    if routing == "uniform":
        base = [rows // g] * g
        for i in range(rows - sum(base)):
            base[i] += 1
        return base
    # Zipf(1.2) over experts in a random order: a few hot experts, a long tail.
    w = torch.tensor([1.0 / (i + 1) ** 1.2 for i in range(g)])
    w = w[torch.randperm(g, generator=gen)]
    counts = torch.bincount(torch.multinomial(w, rows, replacement=True, generator=gen),
                            minlength=g)
    return counts.tolist()


# A read-only streaming kernel: each thread loads UNROLL 16-byte words per step (grid-stride)
# and folds them into one word, stored only in a case that never happens (the loads stay).
_READ_SRC = r"""
extern "C" __global__ void stream_read(const uint4* __restrict__ p, unsigned long long n,
                                       unsigned int* out) {
  const unsigned long long stride = (unsigned long long)gridDim.x * blockDim.x;
  unsigned long long i = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x;
  unsigned int acc = 0;
  for (; i + (UNROLL - 1) * stride < n; i += UNROLL * stride) {
    uint4 v[UNROLL];
#pragma unroll
    for (int u = 0; u < UNROLL; ++u) v[u] = __ldcs(p + i + u * stride);
#pragma unroll
    for (int u = 0; u < UNROLL; ++u) acc ^= v[u].x ^ v[u].y ^ v[u].z ^ v[u].w;
  }
  for (; i < n; i += stride) {
    const uint4 v = __ldcs(p + i);
    acc ^= v.x ^ v.y ^ v.z ^ v.w;
  }
  if (acc == 0x9e3779b9u) out[0] = acc;
}
"""


def read_kernels(w):
    """CuPy streaming reads of w's bytes at two grid shapes; [] without CuPy."""
    try:
        import cupy
    except ImportError:
        return []
    sms = torch.cuda.get_device_properties(w.device).multi_processor_count
    n16 = w.numel() * w.element_size() // 16
    flat = cupy.asarray(w.reshape(-1).view(torch.int64)).view(cupy.uint32)[: n16 * 4]
    sink = cupy.zeros(1, dtype=cupy.uint32)
    fns = []
    for unroll, per_sm, block in ((8, 4, 512), (4, 8, 256)):
        kern = cupy.RawKernel(_READ_SRC.replace("UNROLL", str(unroll)), "stream_read")
        fns.append(lambda k=kern, g=per_sm * sms, b=block: k((g,), (b,),
                                                              (flat, cupy.uint64(n16), sink)))
    return fns


def time_rounds(fns, rounds, reps, min_ms=0.0):
    """fns: list of callables; interleaved rounds; returns per-fn median ms.

    Each round of each fn times at least `reps` back-to-back calls, and enough more that
    they run for `min_ms` milliseconds: long enough for the board's power and clock to
    settle, so that a call is not timed on the clock headroom the previous fn's sync left.
    """
    per = [[] for _ in fns]
    for _ in range(rounds):
        for i, fn in enumerate(fns):
            for _ in range(3):
                fn()
            n = reps
            if min_ms > 0:
                torch.cuda.synchronize()
                t0 = time.perf_counter()
                for _ in range(3):
                    fn()
                torch.cuda.synchronize()
                est = (time.perf_counter() - t0) * 1e3 / 3
                n = max(reps, int(min_ms / max(est, 1e-3)) + 1)
            starts = [torch.cuda.Event(enable_timing=True) for _ in range(n)]
            ends = [torch.cuda.Event(enable_timing=True) for _ in range(n)]
            for r in range(n):
                starts[r].record()
                fn()
                ends[r].record()
            torch.cuda.synchronize()
            per[i].append(statistics.median(s.elapsed_time(e) for s, e in zip(starts, ends)))
    return [statistics.median(p) for p in per], per


class ClockSampler:
    """nvidia-smi sampling the SM clock (MHz) and board power (W) every 20 ms in a thread."""

    def __init__(self, index):
        self.samples = []  # (monotonic seconds, MHz, W)
        self.proc = subprocess.Popen(
            ["nvidia-smi", "-i", str(index), "--query-gpu=clocks.sm,power.draw",
             "--format=csv,noheader,nounits", "-lms", "20"],
            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        self.thread = threading.Thread(target=self._read, daemon=True)
        self.thread.start()

    def _read(self):
        for line in self.proc.stdout:
            try:
                mhz, watts = (float(x) for x in line.split(","))
            except ValueError:
                continue
            self.samples.append((time.monotonic(), mhz, watts))

    def run(self, fn, seconds=1.0):
        """Runs fn back to back for `seconds`; medians of the samples after the first 0.2 s."""
        torch.cuda.synchronize()
        t0 = time.monotonic()
        while time.monotonic() - t0 < seconds:
            for _ in range(5):
                fn()
            torch.cuda.synchronize()
        t1 = time.monotonic()
        got = [(m, w) for t, m, w in self.samples if t0 + 0.2 <= t <= t1]
        if not got:
            return float("nan"), float("nan")
        return statistics.median(m for m, _ in got), statistics.median(w for _, w in got)

    def close(self):
        self.proc.terminate()


def peak_tflops(mhz, sms):
    """bf16 dense peak at this SM clock: 4096 FLOP per SM per cycle (989 TFLOPS: 132 at 1830)."""
    return sms * 4096 * mhz * 1e6 / 1e12


def bench_fp8(args, ggs, dev):
    """fp8 rows: torch._scaled_grouped_mm (default and fast accumulation) against kjit."""
    gg = ggs[0]
    if not hasattr(torch, "_scaled_grouped_mm"):
        print("torch %s has no _scaled_grouped_mm: no fp8 baseline" % torch.__version__)
        return 1
    gen = torch.Generator().manual_seed(43)
    f8 = torch.float8_e4m3fn
    rows_out = []
    for name, g, k, n, rows, routing in SHAPES:
        if args.only and args.only not in name:
            continue
        sizes = group_sizes(g, rows, routing, gen)
        offs = torch.tensor(sizes, dtype=torch.int64).cumsum(0).to(torch.int32).to(dev)
        a = torch.randn(rows, k, device=dev).to(f8)
        w = (torch.randn(g, n, k, device=dev) * 0.5).to(f8)
        b = w.transpose(-2, -1)  # (G, K, N) view of (G, N, K) weights
        sa = torch.rand(rows, device=dev, dtype=torch.float32) + 0.5
        sb = (torch.rand(g, n, device=dev, dtype=torch.float32) + 0.5) / 64

        def torch_fn(fast=False):
            return torch._scaled_grouped_mm(a, b, sa, sb, offs=offs, out_dtype=torch.bfloat16,
                                            use_fast_accum=fast)

        out_t = torch_fn()
        try:
            torch_fn(True)
            has_fast = True
        except Exception as e:  # noqa: BLE001 (a torch without the argument or the mode)
            print("  use_fast_accum=True not taken: %s" % str(e).splitlines()[0])
            has_fast = False
        # A float64 reference of a few rows per group, to judge both against.
        ref_rows = []
        start = 0
        for gi, sz in enumerate(sizes):
            for r in (start, start + sz - 1) if sz else ():
                ref_rows.append((r, gi))
            start += sz
        ridx = torch.tensor([r for r, _ in ref_rows], device=dev)
        rg = torch.tensor([gi for _, gi in ref_rows], device=dev)
        ref = torch.einsum("rk,rnk->rn", a[ridx].double(), w[rg].double())
        ref = ref * sa[ridx].double()[:, None] * sb[rg].double()

        def rel(out):
            return ((out[ridx].double() - ref).norm() / ref.norm()).item()

        out_k = torch.empty(rows, n, device=dev, dtype=torch.bfloat16)
        t0 = time.perf_counter()
        gg(a, b, offs, out_k, scale_a=sa, scale_b=sb)
        torch.cuda.synchronize()
        first_ms = (time.perf_counter() - t0) * 1e3
        key = gg.plan_key(a, b, out_k, scaled=True)
        fns = [torch_fn] + ([lambda: torch_fn(True)] if has_fast else [])
        for h in ggs:
            h(a, b, offs, out_k, scale_a=sa, scale_b=sb)
            fns.append(lambda h=h: h(a, b, offs, out_k, scale_a=sa, scale_b=sb))
        torch.cuda.synchronize()
        err_k, err_t = rel(out_k), rel(out_t)
        mb = float("nan")
        if args.scales == "block":
            # Block scales equal to the row-wise ones (sa[r] in every K block, sb[g, n] the
            # same over each 128 x 128 block when n's scale is constant per block): the same
            # product, so the row-wise reference judges it too.
            kb, nb = (k + 127) // 128, (n + 127) // 128
            sb_blk = (torch.rand(g, nb, device=dev) + 0.5) / 64
            sb_row = sb_blk.repeat_interleave(128, dim=1)[:, :n].contiguous()
            sa_blk = sa[:, None].expand(rows, kb).contiguous()
            out_b = torch.empty_like(out_k)
            sb_blk3 = sb_blk[:, :, None].expand(g, nb, kb).contiguous()
            gg(a, b, offs, out_b, scale_a=sa_blk, scale_b=sb_blk3)
            out_r = gg(a, b, offs, scale_a=sa, scale_b=sb_row)
            torch.cuda.synchronize()
            berr = ((out_b.double() - out_r.double()).norm() / out_r.double().norm()).item()
            print("  block scales: rel. diff against the same scales row-wise %.1e" % berr,
                  flush=True)
            fns.append(lambda: gg(a, b, offs, out_b, scale_a=sa_blk, scale_b=sb_blk3))
        meds, _ = time_rounds(fns, args.rounds, args.reps, args.min_ms)
        if args.scales == "block":
            mb = meds[-1]
            meds = meds[:-1]
        mt = meds[0]
        mf = meds[1] if has_fast else float("nan")
        mk = meds[2 if has_fast else 1]
        flops = 2.0 * rows * n * k
        wbytes = 1.0 * g * k * n
        if len(ggs) > 1:
            print("  variants %s: %s" % (args.variants, " ".join(
                "%s=%.4f(%.3fx)" % (ggs[i].plan_key(a, b, out_k, scaled=True).split()[3:6],
                                    meds[i + (2 if has_fast else 1)],
                                    mt / meds[i + (2 if has_fast else 1)])
                for i in range(len(ggs)))), flush=True)
        rows_out.append((name, g, k, n, rows, mt, mf, mk, flops, wbytes, err_t, err_k, mb))
        print("%-17s fp8 t=%.4f ms t_fast=%.4f ms k=%.4f ms k_block=%.4f ms ratio %.3f err torch "
              "%.1e kjit %.1e first %.0f ms  %s" % (name, mt, mf, mk, mb, mt / mk, err_t, err_k,
                                                   first_ms, key), flush=True)
        del a, w, b, out_t, out_k
        torch.cuda.empty_cache()
    print()
    blk = args.scales == "block"
    print("| shape | G | K | N | rows | torch._scaled_grouped_mm | torch, fast accum | kjit fp8 |"
          " kjit / torch | kjit / torch fast | rel. err torch / kjit |" +
          (" kjit fp8 block scales | / torch |" if blk else ""))
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |" +
          (" ---: | ---: |" if blk else ""))
    for (name, g, k, n, rows, mt, mf, mk, flops, wbytes, err_t, err_k, mb) in rows_out:
        def fmt(ms):
            if ms != ms:
                return "-"
            if name.startswith("decode"):
                return "%.0f TFLOPS, %.2f TB/s" % (flops / ms / 1e9, wbytes / ms / 1e9)
            return "%.0f TFLOPS" % (flops / ms / 1e9)
        print("| %s | %d | %d | %d | %d | %s | %s | %s | %.2fx | %s | %.0e / %.0e |" %
              (name, g, k, n, rows, fmt(mt), fmt(mf), fmt(mk), mt / mk,
               "-" if mf != mf else "%.2fx" % (mf / mk), err_t, err_k) +
              (" %s | %.2fx |" % (fmt(mb), mt / mb) if blk else ""))
    return 0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--reps", type=int, default=20)
    ap.add_argument("--only", default="")
    ap.add_argument("--order", default="nk", choices=["nk", "kn", "both"])
    ap.add_argument("--epilogue", default="none", choices=["none", "swiglu"])
    ap.add_argument("--dtype", default="bf16", choices=["bf16", "fp8"])
    ap.add_argument("--scales", default="row", choices=["row", "block"])
    ap.add_argument("--ceiling", action="store_true",
                    help="decode shapes: time reads (sum, a streaming kernel) and a copy of the weights too")
    ap.add_argument("--min-ms", type=float, default=0.0,
                    help="each round of each call runs at least this long (more calls than "
                         "--reps where needed): timings at a settled clock and power")
    ap.add_argument("--dense", action="store_true",
                    help="prefill shapes: time a dense torch.mm of the same FLOPs too")
    ap.add_argument("--clocks", action="store_true",
                    help="sample SM clock and power (nvidia-smi) while each call runs for a second")
    ap.add_argument("--variants", default="0:0:0",
                    help="kjit configurations to time, tile_n:stages:schedule[:cluster_m][,...] "
                         "(0:0:0 = chosen; schedule 1 cooperative, 2 pingpong; cluster_m 2: "
                         "two CTAs share B's copies)")
    args = ap.parse_args()

    dev = torch.device("cuda")
    print("device: %s, torch %s, kjit %s" % (torch.cuda.get_device_name(), torch.__version__,
                                            kjit.version() if hasattr(kjit, "version") else "?"))
    variants = [tuple(int(x) for x in v.split(":")) for v in args.variants.split(",")]
    variants = [v + (0,) * (4 - len(v)) for v in variants]
    ggs = [kjit.GroupedGemm(tile_n=t, stages=st, schedule=sc, cluster_m=cm)
           for t, st, sc, cm in variants]
    if args.dtype == "fp8":
        return bench_fp8(args, ggs, dev)
    gg = ggs[0]
    sms = torch.cuda.get_device_properties(dev).multi_processor_count
    sampler = ClockSampler(torch.cuda.current_device()) if args.clocks else None
    gen = torch.Generator().manual_seed(43)
    orders = ["nk", "kn"] if args.order == "both" else [args.order]
    rows_out = []
    for name, g, k, n, rows, routing in SHAPES:
        if args.only and args.only not in name:
            continue
        sizes = group_sizes(g, rows, routing, gen)
        offs = torch.tensor(sizes, dtype=torch.int64).cumsum(0).to(torch.int32).to(dev)
        a = torch.randn(rows, k, device=dev, dtype=torch.bfloat16)
        for order in orders:
            if order == "nk":
                w = (torch.randn(g, n, k, device=dev, dtype=torch.bfloat16) * 0.02)
                b = w.transpose(-2, -1)  # (G, K, N) view of (G, N, K) weights
            else:
                b = torch.randn(g, k, n, device=dev, dtype=torch.bfloat16) * 0.02
            glu = args.epilogue == "swiglu"
            act = args.epilogue

            def torch_fn(a=a, b=b, offs=offs, glu=glu, half=n // 2):
                h = torch._grouped_mm(a, b, offs=offs)
                if glu:
                    h = torch.nn.functional.silu(h[:, :half]) * h[:, half:]
                return h

            out_t = torch_fn()
            out_k = torch.empty_like(out_t)
            t0 = time.perf_counter()
            gg(a, b, offs, out_k, activation=act)  # compiles (or loads) the configuration
            torch.cuda.synchronize()
            first_ms = (time.perf_counter() - t0) * 1e3
            err = ((out_k.float() - out_t.float()).norm() / out_t.float().norm()).item()
            key = gg.plan_key(a, b, out_k, activation=act)
            fns = [torch_fn]
            for h in ggs:
                h(a, b, offs, out_k, activation=act)  # compile outside the timing
                torch.cuda.synchronize()
                verr = ((out_k.float() - out_t.float()).norm() / out_t.float().norm()).item()
                if verr > 1e-2:
                    print("  %s: rel. err %.1e" % (h.plan_key(a, b, out_k, activation=act), verr),
                          flush=True)
                fns.append(lambda h=h: h(a, b, offs, out_k, activation=act))
            ceiling = args.ceiling and name.startswith("decode")
            if ceiling:
                wsrc = w if order == "nk" else b  # the weights' storage, contiguous
                wdst = torch.empty_like(wsrc)
                reads = [lambda wsrc=wsrc: wsrc.sum(dtype=torch.float32)] + read_kernels(wsrc)
                fns += reads + [lambda wsrc=wsrc, wdst=wdst: wdst.copy_(wsrc)]
            dense = args.dense and not name.startswith("decode") and not glu
            if dense:
                b0 = b[0]  # (K, N), in the memory order torch._grouped_mm got
                dense_out = torch.empty(rows, n, device=dev, dtype=torch.bfloat16)
                fns.append(lambda a=a, b0=b0, o=dense_out: torch.mm(a, b0, out=o))
            meds, raw = time_rounds(fns, args.rounds, args.reps, args.min_ms)
            flops = 2.0 * rows * n * k
            if sampler is not None and not name.startswith("decode"):
                names = ["torch"] + ["kjit%d" % i for i in range(len(ggs))] + (["dense"] if dense else [])
                parts = []
                for nm, fn, m in zip(names, fns, meds):
                    mhz, watts = sampler.run(fn)
                    tf = flops / m / 1e9
                    parts.append("%s %.0f MHz %.0f W %.0f TFLOPS = %.0f%% of its clock's peak" %
                                 (nm, mhz, watts, tf, 100 * tf / peak_tflops(mhz, sms)))
                print("  clocks: " + "; ".join(parts), flush=True)
            dense_ms = float("nan")
            if dense:
                dense_ms = meds[-1]
                meds = meds[:-1]
                print("  dense torch.mm (%d x %d x %d): %.4f ms, %.0f TFLOPS; kjit / dense %.3f" %
                      (rows, k, n, dense_ms, flops / dense_ms / 1e9, dense_ms / meds[1]), flush=True)
            ceil_ms = [float("nan")] * 2
            if ceiling:
                extra_fns = len(reads) + 1
                ceil_ms = [min(meds[-extra_fns:-1]), meds[-1]]  # the fastest read; the copy
                meds = meds[:-extra_fns]
            mt, mk = meds[0], meds[1]
            if len(ggs) > 1:
                print("  variants %s: %s" % (
                    args.variants, " ".join("%s=%.4f(%.3fx)" % (ggs[i].plan_key(a, b, out_k, activation=act)
                                            .split()[3:6], meds[i + 1], mt / meds[i + 1])
                                            for i in range(len(ggs)))), flush=True)
            wbytes = 2.0 * g * k * n
            rows_out.append((name, order, g, k, n, rows, mt, mk, flops, wbytes, err, key,
                             first_ms, meds, ceil_ms, dense_ms))
            print("%-17s %s t=%.4f ms k=%.4f ms ratio %.3f err %.1e first %.0f ms  %s" %
                  (name, order, mt, mk, mt / mk, err, first_ms, key), flush=True)
            if ceiling:
                print("  ceiling: fastest read %.4f ms (%.2f TB/s), copy %.4f ms (%.2f TB/s read + "
                      "write); kjit at %.0f%% of the read's" %
                      (ceil_ms[0], wbytes / ceil_ms[0] / 1e9, ceil_ms[1],
                       2 * wbytes / ceil_ms[1] / 1e9, 100 * ceil_ms[0] / mk), flush=True)
            del b, out_t, out_k
            torch.cuda.empty_cache()

    if sampler is not None:
        sampler.close()
    print()
    extra = "".join(" %s | / torch |" % v for v in args.variants.split(",")[1:])
    if args.dense:
        extra += " dense torch.mm, same FLOPs | kjit / dense |"
    if args.ceiling:
        extra += " read ceiling (fastest read) | copy (read + write) |"
    print("| shape | B | G | K | N | rows | torch._grouped_mm | kjit | kjit / torch | "
          "rel. err |" + extra)
    print("| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |" +
          " ---: | ---: |" * (len(ggs) - 1 + (1 if args.ceiling else 0) + (1 if args.dense else 0)))
    for (name, order, g, k, n, rows, mt, mk, flops, wbytes, err, key, first_ms, meds,
         ceil_ms, dense_ms) in rows_out:
        more = "".join(" %.0f TFLOPS | %.2fx |" % (flops / m / 1e9, mt / m) for m in meds[2:])
        if name.startswith("decode"):
            more = "".join(" %.2f TB/s | %.2fx |" % (wbytes / m / 1e9, mt / m) for m in meds[2:])
        if args.ceiling:
            more += (" - | - |" if ceil_ms[0] != ceil_ms[0] else
                     " %.2f TB/s | %.2f TB/s |" % (wbytes / ceil_ms[0] / 1e9,
                                                   2 * wbytes / ceil_ms[1] / 1e9))
        if args.dense:
            more += (" - | - |" if dense_ms != dense_ms else
                     " %.0f TFLOPS | %.2fx |" % (flops / dense_ms / 1e9, dense_ms / mk))
        if name.startswith("decode"):
            t = "%.0f TFLOPS, %.2f TB/s" % (flops / mt / 1e9, wbytes / mt / 1e9)
            kk = "%.0f TFLOPS, %.2f TB/s" % (flops / mk / 1e9, wbytes / mk / 1e9)
        else:
            t = "%.0f TFLOPS" % (flops / mt / 1e9)
            kk = "%.0f TFLOPS" % (flops / mk / 1e9)
        print("| %s | %s | %d | %d | %d | %d | %s | %s | %.2fx | %.0e |%s" %
              (name, order, g, k, n, rows, t, kk, mt / mk, err, more))
    return 0


if __name__ == "__main__":
    sys.exit(main())
