#!/usr/bin/env python3
"""kjit's Python binding against CuPy RawKernel and cuda.core, side by side in one run:

  1. first completed launch in a fresh Python process with a warm cache, for saxpy and
     a CUB block reduction: kjit vs CuPy RawKernel vs cuda.core with its program cache.
     As in bench/cupy_bench.py, each fresh process imports its libraries, initialises
     CUDA and allocates its buffers before the clock starts; the clock covers opening the
     cache, compile-or-load, the launch and the synchronisation. Rounds interleave the
     contenders (the order rotates every round); the median of the rounds is reported.
     Every kjit round checks that it was a cache hit (no NVRTC run).
  2. launch overhead per call from Python (enqueue cost, batches of 200 launches on a
     non-blocking stream, median per call), kjit vs CuPy (vs cuda.core when present) vs
     the C floor (cuLaunchKernel called from a C loop inside this process, on the same
     function, stream and arguments), interleaved batch by batch; every contender runs
     the same shape of loop, its launch call written out as a user writes it. kjit is measured on both of its launch paths: the
     compiled one (kjit._fastlaunch, "kjit") when it is built, and ctypes
     ("kjit (ctypes)", the path KJIT_PYTHON_FAST=0 forces).
  3. the time `import kjit` adds to a fresh interpreter, and the first call that loads
     libkjit.so.0 (runs without a GPU too).
  4. the binding's own cost per launch, without a GPU: kernel(grid, block, args) on a
     kernel whose launch function does nothing (kjit._fastlaunch.NOOP_LAUNCH), saxpy's
     four arguments and an empty kernel, on both launch paths.

    KJIT_LIBRARY=/path/to/libkjit.so.0 python3 bench/python_bench.py [--reps N] [--out r.json]

Arrays come from CuPy (else PyTorch). cuda.core is skipped, with the reason, when it is
not installed or has no program cache (cuda.core.utils.FileStreamProgramCache); CuPy
likewise. Prints a Markdown table; --strict exits 1 when kjit is not at least 5x faster
than every baseline on the first launch.
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

HERE = os.path.dirname(os.path.abspath(__file__))

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

EMPTY = 'extern "C" __global__ void empty_kernel() {}\n'

KERNELS = {"saxpy": (SAXPY, "saxpy", False), "block_sum": (CUB, "block_sum", True),
           "empty": (EMPTY, "empty_kernel", False)}
FIRST_LAUNCH_KERNELS = ("saxpy", "block_sum")
OVERHEAD_KERNELS = ("empty", "saxpy")
CONTENDERS = ("kjit", "cupy", "cuda.core")
N = 1 << 20


def cccl_include():
    return os.environ.get("KJIT_CCCL_INCLUDE", "/usr/local/cuda/include/cccl")


def setup_paths():
    """Make `import kjit` work from the repository or a bundle, and point KJIT_LIBRARY at
    a libkjit.so.0 found there when it is not set."""
    for pkg in (os.path.join(HERE, "..", "bindings", "python"), os.path.join(HERE, "..", "python")):
        if os.path.isfile(os.path.join(pkg, "kjit", "__init__.py")):
            pkg = os.path.abspath(pkg)
            if pkg not in sys.path:
                sys.path.insert(0, pkg)
            os.environ["PYTHONPATH"] = pkg + os.pathsep + os.environ.get("PYTHONPATH", "")
            break
    if not os.environ.get("KJIT_LIBRARY"):
        for lib in (os.path.join(HERE, "..", "python", "lib", "libkjit.so.0"),  # bundle
                    os.path.join(HERE, "..", "build", "libkjit.so.0")):  # repository
            if os.path.exists(lib):
                os.environ["KJIT_LIBRARY"] = os.path.abspath(lib)
                break


# ---- array backends (CuPy, else PyTorch) -------------------------------------------------

class Arrays:
    """Device buffers, scalars and synchronisation from CuPy or PyTorch."""

    def __init__(self, name):
        self.name = name
        import numpy
        self.np = numpy
        if name == "cupy":
            import cupy
            self.cp = cupy
        else:
            import torch
            self.torch = torch

    def zeros(self, n):
        if self.name == "cupy":
            return self.cp.zeros(n, dtype=self.cp.float32)
        return self.torch.zeros(n, device="cuda", dtype=self.torch.float32)

    def ptr(self, a):
        return a.data.ptr if self.name == "cupy" else a.data_ptr()

    def sync(self):
        if self.name == "cupy":
            self.cp.cuda.Device(0).synchronize()
        else:
            self.torch.cuda.synchronize()

    def stream(self):
        if self.name == "cupy":
            return self.cp.cuda.Stream(non_blocking=True)
        return self.torch.cuda.Stream()

    def args(self, kid, n):
        """(args with arrays, the same with raw pointers, grid, block)."""
        if kid == "empty":
            return (), (), 1, 1
        a, b = self.zeros(n), self.zeros(n)
        grid = (n + 255) // 256
        f32, i32 = self.np.float32, self.np.int32
        if kid == "saxpy":
            return ((f32(2.0), a, b, i32(n)), (f32(2.0), self.ptr(a), self.ptr(b), i32(n)),
                    grid, 256)
        return (a, b, i32(n)), (self.ptr(a), self.ptr(b), i32(n)), grid, 256


def pick_arrays():
    for name in ("cupy", "torch"):
        try:
            arr = Arrays(name)
            if name == "torch" and not arr.torch.cuda.is_available():
                continue
            if name == "cupy":
                arr.cp.cuda.runtime.getDeviceCount()
            return name
        except Exception:  # noqa: BLE001 - try the next one
            continue
    return None


# ---- cuda.core ----------------------------------------------------------------------------

def cuda_core():
    """(module namespace, FileStreamProgramCache class) or raises with the reason."""
    try:
        import cuda.core as cc
        if not hasattr(cc, "Program"):
            raise ImportError("no Program")
    except ImportError:
        import cuda.core.experimental as cc  # older releases
    try:
        from cuda.core.utils import FileStreamProgramCache
    except ImportError as e:
        raise RuntimeError("cuda.core %s has no program cache (cuda.core.utils."
                           "FileStreamProgramCache): %s"
                           % (getattr(cc, "__version__", "?"), e)) from None
    return cc, FileStreamProgramCache


def cuda_core_kernel(cc, cache_cls, cache_dir, kid, dev):
    src, name, cub = KERNELS[kid]
    cap = dev.compute_capability
    arch = "sm_%d%d" % (cap[0], cap[1])
    opts = cc.ProgramOptions(std="c++17", arch=arch,
                             include_path=[cccl_include()] if cub else None)
    prog = cc.Program(src, code_type="c++", options=opts)
    cache = cache_cls(cache_dir)
    try:
        mod = prog.compile("cubin", cache=cache)
    except TypeError:
        # Program.compile without cache=: use the cache as a mapping, as documented.
        from cuda.core.utils import make_program_cache_key
        key = make_program_cache_key(code=src, code_type="c++", options=opts,
                                     target_type="cubin")
        data = cache.get(key)
        if data is None:
            mod = prog.compile("cubin")
            cache[key] = mod
        else:
            mod = cc.ObjectCode.from_cubin(data)
    return mod.get_kernel(name)


def cuda_core_launch(cc, stream, kernel, grid, block, args):
    config = cc.LaunchConfig(grid=grid, block=block)
    try:
        cc.launch(stream, config, kernel, *args)
    except TypeError:
        config = cc.LaunchConfig(grid=grid, block=block, stream=stream)
        cc.launch(kernel, config, *args)


# ---- child processes ------------------------------------------------------------------------

def child_first_launch(contender, kid, backend):
    arrays = Arrays(backend)
    src, name, cub = KERNELS[kid]
    args, raw_args, grid, block = arrays.args(kid, N)
    extra = ""
    if contender == "kjit":
        import kjit
        kjit.device_count()  # CUDA initialisation through kjit (driver loaded, cuInit)
        arrays.sync()
        t0 = time.perf_counter()
        cache = kjit.Cache()
        compiler = kjit.Compiler(cache)
        k = compiler.kernel(src, name, std=17, include_paths=[cccl_include()] if cub else ())
        k((grid,), (block,), args)
        arrays.sync()
        t1 = time.perf_counter()
        s = cache.stats()
        extra = " HIT %d COMPILES %d" % (s.hits, s.compiles)
    elif contender == "cupy":
        import cupy as cp
        opts = ("--std=c++17",) + (("-I" + cccl_include(),) if cub else ())
        arrays.sync()
        t0 = time.perf_counter()
        k = cp.RawKernel(src, name, options=opts)
        k((grid,), (block,), args)
        arrays.sync()
        t1 = time.perf_counter()
    else:
        cc, cache_cls = cuda_core()
        dev = cc.Device(0)
        dev.set_current()
        stream = dev.default_stream
        arrays.sync()
        t0 = time.perf_counter()
        k = cuda_core_kernel(cc, cache_cls, os.environ["KJIT_BENCH_CUDA_CORE_CACHE"], kid, dev)
        cuda_core_launch(cc, stream, k, grid, block, raw_args)
        dev.sync()
        t1 = time.perf_counter()
    print("RESULT %.4f%s" % ((t1 - t0) * 1000.0, extra))


def child_import():
    t0 = time.perf_counter()
    import kjit
    t1 = time.perf_counter()
    kjit.version()  # loads libkjit.so.0 and its dependencies
    t2 = time.perf_counter()
    print("RESULT %.4f %.4f" % ((t1 - t0) * 1000.0, (t2 - t1) * 1000.0))


def spawn(argv, env_extra):
    env = dict(os.environ)
    for k, v in env_extra.items():  # None: unset
        if v is None:
            env.pop(k, None)
        else:
            env[k] = v
    env.pop("CUPY_CACHE_IN_MEMORY", None)
    r = subprocess.run([sys.executable, os.path.abspath(__file__)] + argv, env=env,
                       capture_output=True, text=True, timeout=600)
    for line in r.stdout.splitlines():
        if line.startswith("RESULT "):
            return line.split()[1:]
    raise RuntimeError("child %s failed (exit %d):\n%s%s"
                       % (" ".join(argv), r.returncode, r.stdout[-2000:], r.stderr[-4000:]))


# ---- measurements -----------------------------------------------------------------------

def first_launch(contenders, backend, reps, root):
    """{kernel: {contender: median ms}}, {contender: skip reason}."""
    env = {"kjit": lambda d: {"KJIT_CACHE_DIR": d},
           "cupy": lambda d: {"CUPY_CACHE_DIR": d},
           "cuda.core": lambda d: {"KJIT_BENCH_CUDA_CORE_CACHE": d}}
    results, skipped, misses = {}, {}, []
    for kid in FIRST_LAUNCH_KERNELS:
        samples = {c: [] for c in contenders}
        dirs = {}
        alive = list(contenders)
        for c in contenders:  # fill each cache (cold run, not reported)
            d = dirs[c] = os.path.join(root, "%s-%s" % (c.replace(".", "_"), kid))
            os.makedirs(d)
            try:
                spawn(["--child", "first", c, kid, backend], env[c](d))
            except Exception as e:  # noqa: BLE001 - report and go on without it
                skipped["%s (%s)" % (c, kid)] = str(e).strip().splitlines()[-1][:300]
                alive.remove(c)
        for rnd in range(reps):
            order = alive[rnd % len(alive):] + alive[:rnd % len(alive)] if alive else []
            for c in order:
                out = spawn(["--child", "first", c, kid, backend], env[c](dirs[c]))
                samples[c].append(float(out[0]))
                if c == "kjit" and (int(out[2]) < 1 or int(out[4]) != 0):
                    misses.append("%s round %d: hits %s compiles %s" % (kid, rnd, out[2], out[4]))
        results[kid] = {c: statistics.median(v) for c, v in samples.items() if v}
    return results, skipped, misses


# ---- launch overhead ------------------------------------------------------------------------

# The C floor measured inside this very process: cuLaunchKernel called from a C loop on the
# same function, stream and arguments as the Python contenders, its batches interleaved with
# theirs. Built with the system C compiler when the benchmark runs (no CUDA headers needed).
FLOOR_C = r"""
#include <stddef.h>
#include <time.h>
typedef int (*launch_fn)(void *f, unsigned gx, unsigned gy, unsigned gz, unsigned bx,
                         unsigned by, unsigned bz, unsigned shared, void *stream,
                         void **params, void **extra);
/* n launches of f; the mean ns per launch, or -(CUresult) of a failed launch. */
double floor_launches(void *launch, void *f, unsigned grid, unsigned block, void *stream,
                      void **params, int n) {
  launch_fn L = (launch_fn)launch;
  struct timespec t0, t1;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  for (int i = 0; i < n; i++) {
    int r = L(f, grid, 1, 1, block, 1, 1, 0, stream, params, NULL);
    if (r != 0) return -(double)r;
  }
  clock_gettime(CLOCK_MONOTONIC, &t1);
  return ((t1.tv_sec - t0.tv_sec) * 1e9 + (t1.tv_nsec - t0.tv_nsec)) / n;
}

/* For the split of kjit's cost: a launch function of kjit_kernel_launch_packed's shape
 * that calls cuLaunchKernel at once (the kernel handle is the CUfunction itself), with no
 * check and no context test, so that kjit's binding can be timed on the driver alone. */
typedef struct {
  unsigned struct_size, grid[3], block[3], shared_bytes;
  void *stream;
  unsigned cluster[3];
  int cooperative;
} launch_config;
static void *direct_driver;
static size_t direct_offsets[16];
static int direct_count;
void direct_setup(void *launch, const size_t *offsets, int count) {
  direct_driver = launch;
  direct_count = count < 16 ? count : 16;
  for (int i = 0; i < direct_count; i++) direct_offsets[i] = offsets[i];
}
int direct_launch(void *f, const launch_config *c, const void *buffer, size_t size) {
  (void)size;
  void *params[16];
  for (int i = 0; i < direct_count; i++) params[i] = (char *)buffer + direct_offsets[i];
  return ((launch_fn)direct_driver)(f, c->grid[0], c->grid[1], c->grid[2], c->block[0],
                                    c->block[1], c->block[2], c->shared_bytes, c->stream,
                                    direct_count ? params : NULL, NULL);
}
/* The same after asking the driver for the current context's id, as kjit does before
 * every launch (its one check that the kernel's context is current). */
typedef int (*ctx_id_fn)(void *ctx, unsigned long long *id);
static void *direct_ctx_id;
static unsigned long long direct_want;
int direct_setup_ctx(void *ctx_id) {
  direct_ctx_id = ctx_id;
  return ((ctx_id_fn)ctx_id)(NULL, &direct_want);
}
int direct_launch_ctx(void *f, const launch_config *c, const void *buffer, size_t size) {
  unsigned long long id = 0;
  if (((ctx_id_fn)direct_ctx_id)(NULL, &id) != 0 || id != direct_want) return 201;
  return direct_launch(f, c, buffer, size);
}
"""


def c_floor(prog, name, raw_args, kid, grid, block, stream_handle, root):
    """A batch runner (n -> us per launch) for the in-process C floor, or raises: the
    launches the contenders make (same grid, block, arguments and stream)."""
    import ctypes
    cc_bin = shutil.which(os.environ.get("CC", "cc")) or shutil.which("gcc")
    if cc_bin is None:
        raise RuntimeError("no C compiler to build the floor's launch loop")
    src, lib = os.path.join(root, "floor.c"), os.path.join(root, "floor.so")
    with open(src, "w") as f:
        f.write(FLOOR_C)
    subprocess.run([cc_bin, "-O2", "-shared", "-fPIC", "-o", lib, src], check=True)
    loop = ctypes.CDLL(lib).floor_launches
    loop.restype = ctypes.c_double
    loop.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_uint, ctypes.c_uint,
                     ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int]
    cuda = ctypes.CDLL("libcuda.so.1")
    module, fn = ctypes.c_void_p(), ctypes.c_void_p()
    cubin = prog.cubin
    if cuda.cuModuleLoadData(ctypes.byref(module), ctypes.c_char_p(cubin)) != 0 or \
            cuda.cuModuleGetFunction(ctypes.byref(fn), module, name.encode()) != 0:
        raise RuntimeError("cuModuleLoadData / cuModuleGetFunction failed")
    if kid == "saxpy":
        values = [ctypes.c_float(float(raw_args[0])), ctypes.c_uint64(raw_args[1]),
                  ctypes.c_uint64(raw_args[2]), ctypes.c_int32(int(raw_args[3]))]
    else:
        values = []
    params = (ctypes.c_void_p * max(len(values), 1))(
        *[ctypes.cast(ctypes.byref(v), ctypes.c_void_p) for v in values])
    launch = ctypes.cast(cuda.cuLaunchKernel, ctypes.c_void_p).value

    def run(n, keep=(values, params, module)):
        ns = loop(launch, fn, grid, block, stream_handle, params if values else None, n)
        if ns < 0:
            raise RuntimeError("cuLaunchKernel failed: CUresult %d" % -ns)
        return ns / 1000.0
    run.direct = (ctypes.CDLL(lib), launch, fn.value, module)
    return run


def binding_on_driver(floor, kernel, context_check=False):
    """kjit's compiled binding with the library left out: a kjit.Kernel of `kernel`'s
    layout whose launch function calls cuLaunchKernel on the floor's CUfunction at once
    (diagnostic: splits kjit's cost into the binding's and the library's); with
    `context_check`, after cuCtxGetId as kjit's launch asks it."""
    import ctypes
    import kjit
    so, launch, fn, _module = floor.direct
    offsets = (ctypes.c_size_t * 16)(*[off for off, _ in kernel._params])
    so.direct_setup(ctypes.c_void_p(launch), offsets, len(kernel._params))
    entry = so.direct_launch
    if context_check:
        ctx_id = ctypes.cast(ctypes.CDLL("libcuda.so.1").cuCtxGetId, ctypes.c_void_p)
        if so.direct_setup_ctx(ctx_id) != 0:
            raise RuntimeError("cuCtxGetId failed")
        entry = so.direct_launch_ctx
    shim = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p,
                            ctypes.c_size_t)(ctypes.cast(entry, ctypes.c_void_p).value)
    k = kjit.Kernel.__new__(kjit.Kernel)
    k._h = fn
    k._init(kernel._device, kernel._symbol, kernel._params, kernel._bufsize, shim, fast=True)
    k._keep = (so, shim, floor)
    k._destroy = lambda h: None  # the handle is the floor's CUfunction, not a kjit kernel
    return k


def kjit_runner(call, grid, block, args, stream):
    """kernel(grid, block, args, stream=s), n times in a row, as a user's loop calls it."""
    def run(n):
        for _ in range(n):
            call(grid, block, args, stream=stream)
    return run


def packed_runner(kernel, grid, block, buf, stream):
    def run(n):
        for _ in range(n):
            kernel.launch_packed(grid, block, buf, stream=stream)
    return run


def cupy_runner(stream, kernel, grid, block, args):
    """CuPy's launches inside `with stream`, the way CuPy code sets its stream."""
    def run(n):
        with stream:
            for _ in range(n):
                kernel((grid,), (block,), args)
    return run


def cuda_core_runner(cc, stream, config, kernel, args):
    launch = cc.launch

    def run(n):
        for _ in range(n):
            launch(stream, config, kernel, *args)
    return run


# Diagnostic rows: kjit's binding on the driver alone (no library), and with the one driver
# call kjit's launch adds (the current context's id).
DIRECT = (("kjit binding on cuLaunchKernel (no library)", False),
          ("kjit binding on cuCtxGetId + cuLaunchKernel (no library)", True))


def launch_overhead(contenders, backend, batches=150, batch=200):
    """({kernel: {contender: median us per launch}}, {what: why skipped}). Every contender
    runs the same shape of loop (its launch call, n times, no wrapper per launch); the C
    floor is cuLaunchKernel from a C loop in this process on the same function, stream and
    arguments; batches interleave the contenders."""
    arrays = Arrays(backend)
    import kjit
    root = tempfile.mkdtemp(prefix="kjit-bench-ovh-")
    out, skipped = {}, {}
    try:
        with kjit.Cache(root) as cache, kjit.Compiler(cache) as compiler:
            for kid in OVERHEAD_KERNELS:
                src, name, _ = KERNELS[kid]
                args, raw_args, grid, block = arrays.args(kid, 4096)
                stream = arrays.stream()
                runs = {}
                k = compiler.kernel(src, name, std=17)
                kc = compiler.kernel(src, name, std=17)
                # The ctypes path as KJIT_PYTHON_FAST=0 gives it: the Python __call__ of a
                # kernel without the compiled launcher.
                kc._launcher = kc._fast_launch = kc._fast_packed = None
                paths = [("kjit", k, k), ("kjit (ctypes)", kc, kc._call_python)] \
                    if kjit.launch_path() == "fast" else [("kjit", k, k)]
                buf = k.pack(args)
                for label, kk, call in paths:
                    sfx = label[4:]
                    runs[label] = kjit_runner(call, grid, block, args, stream)
                    if kid == "saxpy":
                        py_args = (2.0,) + tuple(args[1:3]) + (4096,)
                        runs["kjit (Python scalars)" + sfx] = \
                            kjit_runner(call, grid, block, py_args, stream)
                    runs["kjit (pre-packed)" + sfx] = packed_runner(kk, grid, block, buf, stream)
                try:
                    prog = compiler.compile(src, std=17)
                    runs["C floor"] = c_floor(prog, name, raw_args, kid, grid, block,
                                              kjit.stream_handle(stream), root)
                    runs["C floor"](8)  # fails here, not when timed
                except Exception as e:  # noqa: BLE001 - reported as the reason
                    skipped["C floor (%s)" % kid] = str(e) or type(e).__name__
                    runs.pop("C floor", None)
                for label, checked in DIRECT:
                    if "C floor" not in runs or kjit.launch_path() != "fast":
                        break
                    try:
                        kd = binding_on_driver(runs["C floor"], k, checked)
                        direct = kjit_runner(kd, grid, block, args, stream)
                        direct(8)
                        runs[label] = direct
                    except Exception as e:  # noqa: BLE001 - reported as the reason
                        skipped["%s (%s)" % (label, kid)] = str(e) or type(e).__name__
                if "cupy" in contenders and backend == "cupy":
                    import cupy as cp
                    ck = cp.RawKernel(src, name, options=("--std=c++17",))
                    runs["cupy"] = cupy_runner(stream, ck, grid, block, args)
                if "cuda.core" in contenders:
                    try:
                        cc, cache_cls = cuda_core()
                        dev = cc.Device(0)
                        dev.set_current()
                        ccs = dev.create_stream()
                        cck = cuda_core_kernel(cc, cache_cls, tempfile.mkdtemp(dir=root), kid,
                                               dev)
                        config = cc.LaunchConfig(grid=grid, block=block)
                        cc.launch(ccs, config, cck, *raw_args)  # fails here, not when timed
                        ccs.sync()
                        runs["cuda.core"] = cuda_core_runner(cc, ccs, config, cck, raw_args)
                    except Exception as e:  # noqa: BLE001
                        print("python_bench: cuda.core launch overhead skipped: %s" % e,
                              file=sys.stderr)
                samples = {name_: [] for name_ in runs}
                for rep in range(batches + 5):
                    for cname, run in runs.items():  # interleaved batch by batch
                        arrays.sync()
                        t0 = time.perf_counter()
                        inner = run(batch)
                        t1 = time.perf_counter()
                        if rep >= 5:
                            samples[cname].append(
                                inner if inner is not None else (t1 - t0) * 1e6 / batch)
                arrays.sync()
                out[kid] = {c: statistics.median(v) for c, v in samples.items()}
                k.close()
                kc.close()
    finally:
        shutil.rmtree(root, ignore_errors=True)
    return out, skipped


def binding_cost(batches=60, batch=2000):
    """{kernel: {path: median ns per launch}} of kernel(grid, block, args, stream=s) on a
    kernel whose launch function does nothing: what the binding itself costs, no GPU."""
    import ctypes
    import kjit
    from kjit import _kernel
    if _kernel._fastlaunch is None:
        return {}, _kernel.launch_path_reason()
    noop = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p,
                            ctypes.c_size_t)(_kernel._fastlaunch.NOOP_LAUNCH)

    class Array:  # a device array as CuPy's: .data.ptr, and __cuda_array_interface__
        __module__ = "cupy._core.core"
        __cuda_array_interface__ = property(lambda self: {})

        def __init__(self, ptr):
            self.data = type("MemoryPointer", (), {"ptr": ptr})()
    Array.__name__ = Array.__qualname__ = "ndarray"

    class Stream:  # a stream as CuPy's: .ptr
        ptr = 0x5000

    x, y, stream = Array(0x1000), Array(0x2000), Stream()
    try:
        import numpy
        scalars = (numpy.float32(2.0), numpy.int32(4096))
    except ImportError:
        scalars = (kjit.float32(2.0), kjit.int32(4096))
    cases = {"empty": ([], ()),
             "saxpy": ([(0, 4), (8, 8), (16, 8), (24, 4)], (scalars[0], x, y, scalars[1]))}
    out = {}
    for kid, (params, args) in cases.items():
        calls = {}
        for label, fast in (("fast", True), ("ctypes", False)):
            k = kjit.Kernel.__new__(kjit.Kernel)
            k._h = 1
            k._init(0, kid, params, params[-1][0] + params[-1][1] if params else 0, noop,
                    fast=fast)
            call = k if fast else k._call_python  # the Python __call__, as without the extension
            calls[label] = kjit_runner(call, (16,), (256,), args, stream)
            calls[label + ", pre-packed"] = packed_runner(k, (16,), (256,), k.pack(args), stream)
        samples = {c: [] for c in calls}
        for _ in range(batches):
            for c, run in calls.items():
                t0 = time.perf_counter()
                run(batch)
                samples[c].append((time.perf_counter() - t0) * 1e9 / batch)
        out[kid] = {c: statistics.median(v) for c, v in samples.items()}
    return out, None


def import_time(reps):
    """Median ms of `import kjit` and of the first call (loading libkjit.so.0) in fresh
    interpreters, the package's bytecode cached as an installed package has it: compiled
    once into a scratch PYTHONPYCACHEPREFIX (not the source tree), whatever
    PYTHONDONTWRITEBYTECODE says."""
    pyc = tempfile.mkdtemp(prefix="kjit-bench-pyc-")
    try:
        spawn(["--child", "import"], {"PYTHONPYCACHEPREFIX": pyc,
                                      "PYTHONDONTWRITEBYTECODE": None})  # writes the bytecode
        imp, load = [], []
        for _ in range(reps):
            a, b = spawn(["--child", "import"], {"PYTHONPYCACHEPREFIX": pyc})
            imp.append(float(a))
            load.append(float(b))
    finally:
        shutil.rmtree(pyc, ignore_errors=True)
    return statistics.median(imp), statistics.median(load)


# ---- report ---------------------------------------------------------------------------------

def fmt(v, unit):
    return "-" if v is None else ("%.2f %s" % (v, unit))


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--child", nargs="*")
    p.add_argument("--reps", type=int, default=7, help="rounds per measurement (default 7)")
    p.add_argument("--out", help="write the results as JSON")
    p.add_argument("--strict", action="store_true",
                   help="exit 1 unless kjit's first launch is >= 5x faster than each baseline")
    a = p.parse_args()
    setup_paths()
    if a.child is not None:
        if a.child[0] == "import":
            child_import()
        else:
            child_first_launch(a.child[1], a.child[2], a.child[3])
        return 0

    import kjit
    result = {"python": sys.version.split()[0], "kjit_library": None, "skipped": {},
              "launch_path": kjit.launch_path()}
    if kjit.launch_path() != "fast":
        result["skipped"]["kjit compiled launch path"] = kjit.launch_path_reason()
    result["binding_ns"], why = binding_cost()
    if why:
        result["skipped"]["binding cost"] = why
    imp, load = import_time(max(a.reps, 5))
    result["import_ms"], result["load_library_ms"] = imp, load
    result["kjit_library"] = kjit.load_library()

    reason = None
    try:
        result["device"] = "%s (%s)" % (kjit.device_name(0), kjit.device_arch(0))
        result["driver"] = kjit.driver_version()
    except kjit.KjitError as e:
        reason = "no GPU: %s" % e
    backend = pick_arrays() if reason is None else None
    if reason is None and backend is None:
        reason = "neither CuPy nor PyTorch with CUDA is importable (needed for device buffers)"

    contenders = ["kjit"]
    if backend is not None:
        if backend == "cupy":
            contenders.append("cupy")
        else:
            result["skipped"]["cupy"] = "CuPy is not installed"
        try:
            cc, _ = cuda_core()
            contenders.append("cuda.core")
            result["cuda_core_version"] = getattr(cc, "__version__", "?")
        except Exception as e:  # noqa: BLE001 - reported as the reason cuda.core is skipped
            result["skipped"]["cuda.core"] = str(e) or type(e).__name__
        if backend == "cupy":
            import cupy
            result["cupy_version"] = cupy.__version__
        result["arrays"] = backend

    if reason is None:
        root = tempfile.mkdtemp(prefix="kjit-bench-py-")
        try:
            first, skipped, misses = first_launch(contenders, backend, a.reps, root)
        finally:
            shutil.rmtree(root, ignore_errors=True)
        result["first_launch_ms"] = first
        result["skipped"].update(skipped)
        result["kjit_cache_misses"] = misses
        result["launch_us"], skipped = launch_overhead(contenders, backend)
        result["skipped"].update(skipped)
    else:
        result["skipped"]["GPU measurements"] = reason

    # ---- table ----
    print()
    print("kjit Python binding vs CuPy RawKernel vs cuda.core (python %s%s, kjit launch "
          "path: %s)" % (result["python"], ", " + result["device"] if "device" in result
                         else "", result["launch_path"]))
    print()
    print("| measurement | kjit | CuPy RawKernel | cuda.core | kjit speed-up |")
    print("| --- | ---: | ---: | ---: | ---: |")
    verdicts = []
    for kid, row in result.get("first_launch_ms", {}).items():
        kj = row.get("kjit")
        ups = []
        for base in ("cupy", "cuda.core"):
            if kj and row.get(base):
                ups.append("%.1fx vs %s" % (row[base] / kj, base))
                verdicts.append((kid, base, row[base] / kj))
        print("| first launch, warm cache, %s | %s | %s | %s | %s |" % (
            kid, fmt(kj, "ms"), fmt(row.get("cupy"), "ms"), fmt(row.get("cuda.core"), "ms"),
            ", ".join(ups) or "-"))
    for kid, row in result.get("launch_us", {}).items():
        kj = row.get("kjit")
        ups = ["%.2fx vs cupy" % (row["cupy"] / kj)] if kj and row.get("cupy") else []
        if kj and row.get("C floor"):
            ups.append("%.2fx the C floor" % (kj / row["C floor"]))
        up = ", ".join(ups) or "-"
        print("| launch overhead, %s (per call) | %s | %s | %s | %s |" % (
            kid, fmt(kj, "us"), fmt(row.get("cupy"), "us"), fmt(row.get("cuda.core"), "us"),
            up))
        for variant in ("kjit (ctypes)", "kjit (Python scalars)", "kjit (pre-packed)",
                        "kjit (Python scalars) (ctypes)", "kjit (pre-packed) (ctypes)"):
            if variant in row:
                floor = row.get("C floor")
                print("| launch overhead, %s, %s | %s | | | %s |" % (
                    kid, variant[5:].replace(") (", ", ").strip("()"),
                    fmt(row[variant], "us"),
                    "%.2fx the C floor" % (row[variant] / floor) if floor else ""))
        for label, _ in DIRECT:
            if row.get(label):
                floor = row.get("C floor")
                print("| launch overhead, %s, %s (diagnostic) | %s | | | %s |" % (
                    kid, label[5:], fmt(row[label], "us"),
                    "%.2fx the C floor" % (row[label] / floor) if floor else ""))
        if row.get("C floor"):
            print("| launch overhead, %s, C floor: cuLaunchKernel from C in this process | "
                  "%s | | | |" % (kid, fmt(row["C floor"], "us")))
    for kid, row in result.get("binding_ns", {}).items():
        for path, ns in row.items():
            print("| binding cost per launch, no-op launch function, %s (%s) | %s | | | |" % (
                kid, path, fmt(ns, "ns")))
    print("| `import kjit` | %s | | | |" % fmt(imp, "ms"))
    print("| first call, loading libkjit.so.0 | %s | | | |" % fmt(load, "ms"))
    print()
    for what, why in result["skipped"].items():
        print("skipped: %s: %s" % (what, why))
    for m in result.get("kjit_cache_misses", []):
        print("WARNING: a warm kjit round was not a cache hit: %s" % m)
    failed = [v for v in verdicts if v[2] < 5.0]
    for kid, base, up in verdicts:
        print("%s: kjit first launch %.1fx faster than %s (target >= 5x): %s"
              % (kid, up, base, "ok" if up >= 5.0 else "BELOW TARGET"))
    if a.out:
        with open(a.out, "w") as f:
            json.dump(result, f, indent=1)
    return 1 if a.strict and (failed or not verdicts) else 0


if __name__ == "__main__":
    sys.exit(main())
