// Two-GPU benchmark, one table:
//  (1) time to the first completed launch on device 1 once the kernel is loaded on device
//      0: kjit_kernel_create (a compile-cache hit and a module load) + launch + sync, with
//      device 0's context current, against the single-device floor for the same CUBIN
//      (cuModuleLoadData + cuModuleGetFunction + launch + sync with device 1's context
//      current); rounds of the two alternate (saxpy, CUB BlockReduce);
//  (2) launch enqueue overhead with two threads each driving its own device at once,
//      kjit_kernel_launch against raw cuLaunchKernel of the same CUBIN under the same load
//      (both threads run the same kind of batch at the same time; kinds alternate);
//  (3) bf16 4096^3 GEMM on both devices at once (one thread per device), kjit_gemm_run
//      against torch.matmul run the same way by bench/torch_multi_gpu.py in a child
//      process; kjit and torch rounds alternate, each keeps its best round.
//
//   bench_multi_gpu [--torch bench/torch_multi_gpu.py] [--quick] [--no-gemm]
//
// --quick: fewer rounds and a 2048^3 GEMM (a smoke test); --no-gemm: parts (1) and (2).
// Prints "skipped" with the reason on fewer than two devices. The torch child gets
// $KJIT_PYTHON (default python3) and, when set, $KJIT_PYTHON_LD_LIBRARY_PATH as its
// LD_LIBRARY_PATH. Under a minute on two H200s.
#include <cuda.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <memory>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "cuda/context.h"
#include "cuda/driver.h"
#include "kjit/gemm.h"
#include "kjit/kjit.h"

namespace {

namespace cu = kjit::cuda;

const char* const kEmptySource = R"(extern "C" __global__ void empty_kernel() {}
)";

const char* const kSaxpySource = R"(
extern "C" __global__ void saxpy(float a, const float* x, float* y, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = a * x[i] + y[i];
}
)";

const char* const kCubReduceSource = R"(
#include <cub/block/block_reduce.cuh>
extern "C" __global__ void block_sum(const float* in, float* out, int n) {
  using BlockReduce = cub::BlockReduce<float, 256>;
  __shared__ typename BlockReduce::TempStorage temp;
  int i = blockIdx.x * 256 + threadIdx.x;
  float v = i < n ? in[i] : 0.0f;
  float sum = BlockReduce(temp).Sum(v);
  if (threadIdx.x == 0) out[blockIdx.x] = sum;
}
)";

struct Spec {
  const char* label;
  const char* source;
  const char* name;
  bool cub;
};

const Spec kEmpty{"empty", kEmptySource, "empty_kernel", false};
const Spec kSaxpy{"saxpy", kSaxpySource, "saxpy", false};
const Spec kCub{"CUB BlockReduce", kCubReduceSource, "block_sum", true};

[[noreturn]] void die(const std::string& what) {
  std::fprintf(stderr, "bench_multi_gpu: %s\n", what.c_str());
  std::exit(1);
}

void cu_check(CUresult r, const char* what) {
  if (r != CUDA_SUCCESS) die(std::string(what) + ": " + cu::error_text(r));
}

void kj_check(kjit_status st, const char* what) {
  if (st != KJIT_OK) die(std::string(what) + ": " + kjit_status_string(st) + ": " + kjit_last_error());
}

double now_us() {
  using namespace std::chrono;
  return duration<double, std::micro>(steady_clock::now().time_since_epoch()).count();
}

double median(std::vector<double> v) {
  if (v.empty()) return NAN;
  std::sort(v.begin(), v.end());
  const size_t m = v.size() / 2;
  return v.size() % 2 ? v[m] : 0.5 * (v[m - 1] + v[m]);
}

std::string fmt(double v, int digits) {
  if (std::isnan(v)) return "-";
  char b[64];
  std::snprintf(b, sizeof b, "%.*f", digits, v);
  return b;
}

class Barrier {
 public:
  explicit Barrier(int n) : n_(n) {}
  void wait() {
    std::unique_lock<std::mutex> lock(mu_);
    const int gen = gen_;
    if (++waiting_ == n_) {
      waiting_ = 0;
      ++gen_;
      cv_.notify_all();
    } else {
      cv_.wait(lock, [&] { return gen != gen_; });
    }
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  int n_, waiting_ = 0, gen_ = 0;
};

kjit_options* options_for(const Spec& s) {
  kjit_options* o = nullptr;
  kj_check(kjit_options_create(&o), "kjit_options_create");
  if (s.cub) {
    const char* env = std::getenv("KJIT_CCCL_INCLUDE");
    const std::string dir = env && *env ? env : std::string(KJIT_CUDA_INCLUDE_DIR) + "/cccl";
    kj_check(kjit_options_add_include_path(o, dir.c_str()), "include path");
  }
  return o;
}

// Arguments of a kernel in one context: saxpy (a, x, y, n), block_sum (in, out, n), empty.
struct Args {
  CUcontext ctx;
  CUdeviceptr a = 0, b = 0;
  float alpha = 2.0f;
  int n;
  void* ptrs[4] = {};
  size_t count = 0;
  uint32_t grid = 1, block = 1;
  Args(CUcontext c, const Spec& s, int elems) : ctx(c), n(elems) {
    if (s.source == kEmptySource) return;
    cu::ScopedContext scope(ctx);
    const cu::Driver& d = cu::driver();
    cu_check(d.cuMemAlloc(&a, size_t(n) * 4), "cuMemAlloc");
    cu_check(d.cuMemAlloc(&b, size_t(n) * 4), "cuMemAlloc");
    cu_check(d.cuMemsetD8(a, 0, size_t(n) * 4), "cuMemsetD8");
    cu_check(d.cuMemsetD8(b, 0, size_t(n) * 4), "cuMemsetD8");
    block = 256;
    grid = uint32_t((n + 255) / 256);
    if (s.source == kSaxpySource) {
      ptrs[0] = &alpha;
      ptrs[1] = &a;
      ptrs[2] = &b;
      ptrs[3] = &n;
      count = 4;
    } else {
      ptrs[0] = &a;
      ptrs[1] = &b;
      ptrs[2] = &n;
      count = 3;
    }
  }
  ~Args() {
    cu::ScopedContext scope(ctx);
    if (a) cu::driver().cuMemFree(a);
    if (b) cu::driver().cuMemFree(b);
  }
  Args(const Args&) = delete;
  Args& operator=(const Args&) = delete;
  void** argv() { return count ? ptrs : nullptr; }
};

struct Row {
  std::string measure, device, kjit, base, ratio, target;
};

// ---- (1) second device ---------------------------------------------------------------

void second_device(kjit_compiler* compiler, kjit_cache* cache, const Spec& s, int rounds,
                   CUcontext ctx[2], std::vector<Row>& rows, std::vector<std::string>& notes) {
  const cu::Driver& d = cu::driver();
  kjit_options* opts = options_for(s);
  // Loaded on device 0 first (this compiles).
  cu_check(d.cuCtxSetCurrent(ctx[0]), "cuCtxSetCurrent");
  kjit_kernel* k0 = nullptr;
  kjit_binary* log = nullptr;
  if (kjit_kernel_create(compiler, s.source, s.name, opts, 0, 0, &k0, &log) != KJIT_OK)
    die(std::string("kjit_kernel_create: ") + kjit_last_error() + (log ? kjit_binary_log(log) : ""));
  kjit_binary_destroy(log);
  // The very same CUBIN for the floor.
  char arch[16] = {};
  kj_check(kjit_device_arch(1, arch, sizeof arch), "kjit_device_arch");
  kjit_options* topts = nullptr;
  kj_check(kjit_options_clone(opts, &topts), "kjit_options_clone");
  kj_check(kjit_options_set_target(topts, arch), "set target");
  kjit_binary* bin = nullptr;
  kj_check(kjit_compile(compiler, s.source, topts, &bin), "kjit_compile");
  size_t cubin_size = 0;
  const void* cubin = kjit_binary_data(bin, KJIT_OUTPUT_CUBIN, &cubin_size);
  if (!cubin || !cubin_size) die("no CUBIN");

  Args args(ctx[1], s, 1 << 16);
  kjit_cache_stats before{};
  before.struct_size = sizeof before;
  kj_check(kjit_cache_stats_get(cache, &before), "kjit_cache_stats_get");
  std::vector<double> floor_ms, kjit_ms, floor_ready, kjit_ready, floor_switch_ms;
  const int warmup = 3;
  for (int r = 0; r < rounds + warmup; ++r) {
    for (int which = 0; which < 2; ++which) {
      const bool kjit_turn = (which == 0) == (r % 2 == 0);
      if (kjit_turn) {
        // Device 0's context is current, as in a program that just used device 0.
        cu_check(d.cuCtxSetCurrent(ctx[0]), "cuCtxSetCurrent");
        const double t0 = now_us();
        kjit_kernel* k1 = nullptr;
        if (kjit_kernel_create(compiler, s.source, s.name, opts, 1, 0, &k1, nullptr) != KJIT_OK)
          die(std::string("kjit_kernel_create (device 1): ") + kjit_last_error());
        const double t1 = now_us();
        kjit_launch_config cfg = KJIT_LAUNCH_CONFIG_INIT;
        cfg.grid[0] = args.grid;
        cfg.block[0] = args.block;
        kj_check(kjit_kernel_launch(k1, &cfg, args.argv(), args.count), "kjit_kernel_launch");
        {
          cu::ScopedContext scope(ctx[1]);
          cu_check(d.cuCtxSynchronize(), "sync");
        }
        const double t2 = now_us();
        kjit_kernel_destroy(k1);  // the module goes with its last handle: the next round loads
        if (r >= warmup) {
          kjit_ready.push_back((t1 - t0) / 1000.0);
          kjit_ms.push_back((t2 - t0) / 1000.0);
        }
      } else {
        // The floor starts where kjit's round starts, with device 0's context current; its
        // switch to device 1's context is timed apart (ts): the row's floor leaves it out,
        // the note gives it.
        cu_check(d.cuCtxSetCurrent(ctx[0]), "cuCtxSetCurrent");
        const double ts = now_us();
        cu_check(d.cuCtxSetCurrent(ctx[1]), "cuCtxSetCurrent");
        const double t0 = now_us();
        CUmodule mod = nullptr;
        CUfunction fn = nullptr;
        cu_check(d.cuModuleLoadData(&mod, cubin), "cuModuleLoadData");
        cu_check(d.cuModuleGetFunction(&fn, mod, s.name), "cuModuleGetFunction");
        const double t1 = now_us();
        cu_check(d.cuLaunchKernel(fn, args.grid, 1, 1, args.block, 1, 1, 0, nullptr, args.argv(),
                                  nullptr),
                 "cuLaunchKernel");
        cu_check(d.cuCtxSynchronize(), "sync");
        const double t2 = now_us();
        cu_check(d.cuModuleUnload(mod), "cuModuleUnload");
        if (r >= warmup) {
          floor_ready.push_back((t1 - t0) / 1000.0);
          floor_ms.push_back((t2 - t0) / 1000.0);
          floor_switch_ms.push_back((t2 - ts) / 1000.0);
        }
      }
    }
  }
  kjit_cache_stats after{};
  after.struct_size = sizeof after;
  kj_check(kjit_cache_stats_get(cache, &after), "kjit_cache_stats_get");
  const double kj = median(kjit_ms), fl = median(floor_ms);
  rows.push_back({std::string(s.label) + ": first completed launch on device 1, kernel already "
                      "loaded on device 0 (ms)",
                  "1", fmt(kj, 3), fmt(fl, 3) + " (load+get+launch+sync)", fmt(kj / fl, 2) + "x",
                  "<= 1.10x"});
  notes.push_back(std::string(s.label) + " (CUBIN " + std::to_string(cubin_size) + " bytes, " +
                  std::to_string(rounds) + " alternating rounds): to a launchable kernel " +
                  fmt(median(kjit_ready), 3) + " ms (kjit_kernel_create) vs " +
                  fmt(median(floor_ready), 3) + " ms (cuModuleLoadData + cuModuleGetFunction); " +
                  "the floor with its switch to device 1's context (cuCtxSetCurrent) timed too " +
                  fmt(median(floor_switch_ms), 3) + " ms (kjit / that: " +
                  fmt(kj / median(floor_switch_ms), 2) + "x); " +
                  "compiles during the rounds: " + std::to_string(after.compiles - before.compiles) +
                  ", memory-tier hits: " + std::to_string(after.memory_hits - before.memory_hits) +
                  ".");
  kjit_binary_destroy(bin);
  kjit_options_destroy(topts);
  kjit_options_destroy(opts);
  kjit_kernel_destroy(k0);
}

// ---- (2) launch enqueue, two threads on two devices ------------------------------------

void enqueue_two_threads(kjit_compiler* compiler, const Spec& s, int rounds, CUcontext ctx[2],
                         std::vector<Row>& rows) {
  const cu::Driver& d = cu::driver();
  kjit_options* opts = options_for(s);
  kjit_kernel* k[2] = {};
  CUmodule mod[2] = {};
  CUfunction fn[2] = {};
  kjit_binary* bin = nullptr;
  for (int dev = 0; dev < 2; ++dev) {
    if (kjit_kernel_create(compiler, s.source, s.name, opts, dev, 0, &k[dev], nullptr) != KJIT_OK)
      die(std::string("kjit_kernel_create: ") + kjit_last_error());
  }
  char arch[16] = {};
  kj_check(kjit_device_arch(0, arch, sizeof arch), "kjit_device_arch");
  kj_check(kjit_options_set_target(opts, arch), "set target");
  kj_check(kjit_compile(compiler, s.source, opts, &bin), "kjit_compile");
  size_t size = 0;
  const void* cubin = kjit_binary_data(bin, KJIT_OUTPUT_CUBIN, &size);
  if (!cubin) die("no CUBIN");
  for (int dev = 0; dev < 2; ++dev) {
    cu::ScopedContext scope(ctx[dev]);
    cu_check(d.cuModuleLoadData(&mod[dev], cubin), "cuModuleLoadData");
    cu_check(d.cuModuleGetFunction(&fn[dev], mod[dev], s.name), "cuModuleGetFunction");
  }
  constexpr int kBatch = 200, kWarmup = 5;
  Barrier barrier(2);
  std::vector<double> raw_us[2], kjit_us[2];
  std::string error[2];
  auto worker = [&](int dev) {
    cu_check(d.cuCtxSetCurrent(ctx[dev]), "cuCtxSetCurrent");
    CUstream stream = nullptr;
    cu_check(d.cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING), "cuStreamCreate");
    Args args(ctx[dev], s, 4096);
    kjit_launch_config cfg = KJIT_LAUNCH_CONFIG_INIT;
    cfg.grid[0] = args.grid;
    cfg.block[0] = args.block;
    cfg.stream = stream;
    for (int r = 0; r < rounds + kWarmup; ++r) {
      for (int which = 0; which < 2; ++which) {
        const bool kjit_turn = (which == 0) == (r % 2 == 0);
        barrier.wait();  // both threads run the same kind of batch at the same time
        const double t0 = now_us();
        for (int i = 0; i < kBatch; ++i) {
          if (kjit_turn) {
            if (kjit_kernel_launch(k[dev], &cfg, args.argv(), args.count) != KJIT_OK &&
                error[dev].empty())
              error[dev] = kjit_last_error();
          } else {
            const CUresult res = d.cuLaunchKernel(fn[dev], cfg.grid[0], 1, 1, cfg.block[0], 1, 1, 0,
                                                  stream, args.argv(), nullptr);
            if (res != CUDA_SUCCESS && error[dev].empty()) error[dev] = cu::error_text(res);
          }
        }
        const double t1 = now_us();
        d.cuStreamSynchronize(stream);
        if (r >= kWarmup) (kjit_turn ? kjit_us : raw_us)[dev].push_back((t1 - t0) / kBatch);
      }
    }
    d.cuStreamDestroy(stream);
  };
  std::thread t0(worker, 0), t1(worker, 1);
  t0.join();
  t1.join();
  for (int dev = 0; dev < 2; ++dev) {
    if (!error[dev].empty()) die("launch on device " + std::to_string(dev) + ": " + error[dev]);
    const double kj = median(kjit_us[dev]), raw = median(raw_us[dev]);
    rows.push_back({std::string(s.label) + ": launch enqueue, two threads each driving its own "
                        "device (us)",
                    std::to_string(dev), fmt(kj, 2), fmt(raw, 2) + " (cuLaunchKernel)",
                    fmt(kj / raw, 2) + "x", "<= 1.10x"});
    cu::ScopedContext scope(ctx[dev]);
    d.cuModuleUnload(mod[dev]);
    kjit_kernel_destroy(k[dev]);
  }
  kjit_binary_destroy(bin);
  kjit_options_destroy(opts);
}

// ---- (3) GEMM on both devices at once ----------------------------------------------------

uint16_t to_bf16(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  return uint16_t((x + 0x7fffu + ((x >> 16) & 1u)) >> 16);
}

void fill_normal_bf16(CUdeviceptr dst, size_t elems) {
  constexpr size_t kBlock = size_t(1) << 20;
  std::mt19937 rng(12345);
  std::normal_distribution<float> dist(0.f, 1.f);
  std::vector<uint16_t> block(kBlock);
  for (auto& v : block) v = to_bf16(dist(rng));
  for (size_t off = 0; off < elems; off += kBlock) {
    const size_t n = std::min(kBlock, elems - off);
    cu_check(cu::driver().cuMemcpyHtoD(dst + off * 2, block.data(), n * 2), "cuMemcpyHtoD");
  }
}

struct GemmDevice {
  CUcontext ctx = nullptr;
  kjit_gemm* g = nullptr;
  CUstream stream = nullptr;
  CUdeviceptr a = 0, b = 0, d = 0;
  std::vector<CUevent> ev;
};

// A round: both threads start their timed runs together; returns each device's median ms.
void gemm_round(GemmDevice dev[2], const kjit_gemm_desc& desc, int reps, double out_ms[2]) {
  Barrier barrier(2);
  std::string error[2];
  auto worker = [&](int i) {
    const cu::Driver& d = cu::driver();
    GemmDevice& g = dev[i];
    d.cuCtxSetCurrent(g.ctx);
    auto run = [&] {
      const kjit_status st = kjit_gemm_run(g.g, &desc, reinterpret_cast<void*>(g.a),
                                           reinterpret_cast<void*>(g.b), nullptr,
                                           reinterpret_cast<void*>(g.d), nullptr, g.stream);
      if (st != KJIT_OK && error[i].empty()) error[i] = kjit_last_error();
    };
    for (int w = 0; w < 3; ++w) run();
    barrier.wait();
    for (int r = 0; r < reps; ++r) {
      d.cuEventRecord(g.ev[size_t(2 * r)], g.stream);
      run();
      d.cuEventRecord(g.ev[size_t(2 * r + 1)], g.stream);
    }
    d.cuStreamSynchronize(g.stream);
    std::vector<double> ms;
    for (int r = 0; r < reps; ++r) {
      float t = 0;
      d.cuEventElapsedTime(&t, g.ev[size_t(2 * r)], g.ev[size_t(2 * r + 1)]);
      ms.push_back(t);
    }
    out_ms[i] = median(ms);
  };
  std::thread t0(worker, 0), t1(worker, 1);
  t0.join();
  t1.join();
  for (int i = 0; i < 2; ++i)
    if (!error[i].empty()) die("kjit_gemm_run on device " + std::to_string(i) + ": " + error[i]);
}

// bench/torch_multi_gpu.py in a child process, driven line by line.
class TorchChild {
 public:
  TorchChild(const std::string& script, int n, int reps) {
    int to[2], from[2];
    if (pipe(to) != 0 || pipe(from) != 0) return;
    pid_ = fork();
    if (pid_ == 0) {
      dup2(to[0], 0);
      dup2(from[1], 1);
      close(to[1]);
      close(from[0]);
      if (const char* ld = std::getenv("KJIT_PYTHON_LD_LIBRARY_PATH")) {
        if (*ld) setenv("LD_LIBRARY_PATH", ld, 1);
        else unsetenv("LD_LIBRARY_PATH");
      }
      setenv("PYTHONUNBUFFERED", "1", 1);
      const char* py = std::getenv("KJIT_PYTHON");
      const std::string python = py && *py ? py : "python3";
      const std::string ns = std::to_string(n), rs = std::to_string(reps);
      execlp(python.c_str(), python.c_str(), script.c_str(), ns.c_str(), rs.c_str(),
             static_cast<char*>(nullptr));
      _exit(127);
    }
    close(to[0]);
    close(from[1]);
    to_ = fdopen(to[1], "w");
    from_ = fdopen(from[0], "r");
    const std::string first = line();
    if (first.rfind("ready", 0) == 0) {
      version_ = first.substr(6);
      ok_ = true;
    } else {
      why_ = first.empty() ? "the torch script exited (see its stderr)" : first;
    }
  }
  ~TorchChild() {
    if (to_) {
      std::fputs("quit\n", to_);
      std::fclose(to_);
    }
    if (from_) std::fclose(from_);
    if (pid_ > 0) {
      int status = 0;
      waitpid(pid_, &status, 0);
    }
  }
  TorchChild(const TorchChild&) = delete;
  TorchChild& operator=(const TorchChild&) = delete;

  bool ok() const { return ok_; }
  const std::string& why() const { return why_; }
  const std::string& version() const { return version_; }

  // One round on both devices at once: TFLOP/s of each, or false.
  bool round(double tflops[2]) {
    if (!ok_) return false;
    std::fputs("round\n", to_);
    std::fflush(to_);
    const std::string l = line();
    if (std::sscanf(l.c_str(), "%lf %lf", &tflops[0], &tflops[1]) != 2) {
      ok_ = false;
      why_ = l.empty() ? "the torch script exited during a round" : l;
      return false;
    }
    return true;
  }

 private:
  std::string line() {
    if (!from_) return "";
    char buf[1024];
    if (!std::fgets(buf, sizeof buf, from_)) return "";
    std::string s = buf;
    while (!s.empty() && (s.back() == '\n' || s.back() == '\r')) s.pop_back();
    return s;
  }
  pid_t pid_ = -1;
  FILE* to_ = nullptr;
  FILE* from_ = nullptr;
  bool ok_ = false;
  std::string why_ = "not started", version_;
};

void gemm_both(const char* torch_script, int n, int rounds, int reps, CUcontext ctx[2],
               std::vector<Row>& rows, std::vector<std::string>& notes) {
  const cu::Driver& d = cu::driver();
  GemmDevice dev[2];
  const size_t elems = size_t(n) * size_t(n);
  for (int i = 0; i < 2; ++i) {
    GemmDevice& g = dev[i];
    g.ctx = ctx[i];
    kj_check(kjit_gemm_create(nullptr, i, nullptr, &g.g), "kjit_gemm_create");
    cu::ScopedContext scope(g.ctx);
    cu_check(d.cuStreamCreate(&g.stream, CU_STREAM_NON_BLOCKING), "cuStreamCreate");
    cu_check(d.cuMemAlloc(&g.a, elems * 2), "cuMemAlloc");
    cu_check(d.cuMemAlloc(&g.b, elems * 2), "cuMemAlloc");
    cu_check(d.cuMemAlloc(&g.d, elems * 2), "cuMemAlloc");
    fill_normal_bf16(g.a, elems);
    fill_normal_bf16(g.b, elems);
    g.ev.resize(size_t(reps) * 2);
    for (auto& e : g.ev) cu_check(d.cuEventCreate(&e, CU_EVENT_DEFAULT), "cuEventCreate");
  }
  kjit_gemm_desc desc = KJIT_GEMM_DESC_INIT;
  desc.order = KJIT_GEMM_ROW_MAJOR;
  desc.m = desc.n = desc.k = n;
  desc.a_type = KJIT_GEMM_BF16;

  std::unique_ptr<TorchChild> torch;
  if (torch_script) torch = std::make_unique<TorchChild>(torch_script, n, reps);
  const double flop = 2.0 * double(n) * double(n) * double(n);
  double best_kjit[2] = {INFINITY, INFINITY}, best_torch[2] = {0, 0};
  for (int r = 0; r < rounds; ++r) {
    double ms[2];
    gemm_round(dev, desc, reps, ms);
    for (int i = 0; i < 2; ++i) best_kjit[i] = std::min(best_kjit[i], ms[i]);
    double tf[2];
    if (torch && torch->round(tf)) {
      for (int i = 0; i < 2; ++i) best_torch[i] = std::max(best_torch[i], tf[i]);
    }
  }
  for (int i = 0; i < 2; ++i) {
    const double kj = flop / (best_kjit[i] * 1e-3) / 1e12;
    const double th = best_torch[i] > 0 ? best_torch[i] : NAN;
    rows.push_back({"bf16 " + std::to_string(n) + "^3 GEMM, both devices at once (TFLOP/s)",
                    std::to_string(i), fmt(kj, 1), fmt(th, 1) + " (torch.matmul)",
                    std::isnan(th) ? "-" : fmt(kj / th, 3) + "x", ">= 0.97x"});
  }
  if (!torch_script) {
    notes.push_back("torch.matmul not run (no --torch script given).");
  } else if (torch->ok()) {
    notes.push_back("GEMM: row-major bf16, f32 accumulation, " + std::to_string(reps) +
                    " runs per round and device (median), best of " + std::to_string(rounds) +
                    " rounds, kjit and torch rounds alternating; " + torch->version() + ".");
  } else {
    notes.push_back("torch.matmul column empty: " + torch->why());
  }
  torch.reset();
  for (int i = 0; i < 2; ++i) {
    GemmDevice& g = dev[i];
    kjit_gemm_destroy(g.g);
    cu::ScopedContext scope(g.ctx);
    for (auto e : g.ev) d.cuEventDestroy(e);
    d.cuMemFree(g.a);
    d.cuMemFree(g.b);
    d.cuMemFree(g.d);
    d.cuStreamDestroy(g.stream);
  }
}

}  // namespace

int main(int argc, char** argv) {
  const char* torch_script = nullptr;
  bool quick = false, gemm = true;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--torch") && i + 1 < argc) {
      torch_script = argv[++i];
    } else if (!std::strcmp(argv[i], "--quick")) {
      quick = true;
    } else if (!std::strcmp(argv[i], "--no-gemm")) {
      gemm = false;
    } else {
      std::fprintf(stderr, "usage: %s [--torch torch_multi_gpu.py] [--quick] [--no-gemm]\n",
                   argv[0]);
      return 2;
    }
  }
  signal(SIGPIPE, SIG_IGN);  // a torch child that dies must not take this process along
  int count = 0;
  const kjit_status st = kjit_device_count(&count);
  if (st != KJIT_OK || count < 2) {
    std::printf("\n## Two GPUs\n\nbench_multi_gpu: skipped (%s)\n",
                st != KJIT_OK ? kjit_last_error()
                              : ("needs two CUDA devices; this machine has " +
                                 std::to_string(count))
                                    .c_str());
    return 0;
  }
  const double start = now_us();
  CUcontext ctx[2] = {cu::primary_context(0), cu::primary_context(1)};
  char name[2][256] = {}, arch[2][16] = {};
  for (int i = 0; i < 2; ++i) {
    kjit_device_name(i, name[i], sizeof name[i]);
    kjit_device_arch(i, arch[i], sizeof arch[i]);
  }
  int driver = 0;
  kjit_driver_version(&driver);
  const char* nvrtc = "?";
  kjit_nvrtc_version(&nvrtc);
  size_t lt = 0;
  if (gemm) kjit_cublaslt_version(&lt);

  const char* tmp_env = std::getenv("TMPDIR");
  std::string dir_tmpl =
      std::string(tmp_env && *tmp_env ? tmp_env : "/tmp") + "/kjit-bench-multi-XXXXXX";
  const char* dir = mkdtemp(dir_tmpl.data());
  if (!dir) die("mkdtemp " + dir_tmpl);
  kjit_cache_options co = KJIT_CACHE_OPTIONS_INIT;
  co.directory = dir;
  kjit_cache* cache = nullptr;
  kjit_compiler* compiler = nullptr;
  kj_check(kjit_cache_open(&co, &cache), "kjit_cache_open");
  kj_check(kjit_compiler_create(cache, 0, &compiler), "kjit_compiler_create");

  std::vector<Row> rows;
  std::vector<std::string> notes;
  second_device(compiler, cache, kSaxpy, quick ? 10 : 60, ctx, rows, notes);
  second_device(compiler, cache, kCub, quick ? 5 : 25, ctx, rows, notes);
  enqueue_two_threads(compiler, kEmpty, quick ? 20 : 150, ctx, rows);
  enqueue_two_threads(compiler, kSaxpy, quick ? 20 : 150, ctx, rows);
  if (gemm) gemm_both(torch_script, quick ? 2048 : 4096, 3, quick ? 10 : 50, ctx, rows, notes);

  kjit_compiler_destroy(compiler);
  kjit_cache_close(cache);
  const std::string rm = std::string("rm -rf '") + dir + "'";
  if (std::system(rm.c_str()) != 0) std::fprintf(stderr, "could not remove %s\n", dir);

  std::printf("\n## Two GPUs\n\n");
  std::printf("Devices: 0 %s (%s), 1 %s (%s); CUDA driver %d, NVRTC %s, cuBLASLt %zu, kjit %s; "
              "%.0f s.\n\n",
              name[0], arch[0], name[1], arch[1], driver, nvrtc, lt, kjit_version_string(),
              (now_us() - start) / 1e6);
  std::printf("| measurement | device | kjit | baseline | kjit / baseline | target |\n");
  std::printf("| --- | ---: | ---: | --- | ---: | --- |\n");
  for (const Row& r : rows) {
    std::printf("| %s | %s | %s | %s | %s | %s |\n", r.measure.c_str(), r.device.c_str(),
                r.kjit.c_str(), r.base.c_str(), r.ratio.c_str(), r.target.c_str());
  }
  std::printf("\n");
  for (const std::string& n : notes) std::printf("- %s\n", n.c_str());
  return 0;
}
