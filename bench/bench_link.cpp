// Link-step benchmark: (1) link time, nvJitLink running (cold) against a cached link, in
// this process and in a fresh one; (2) a fresh process's cost to reach a kernel built by a
// cached link (two compile hits and a link hit) against one from a cached single-program
// compile of the same code (target: at most 1.1x), up to the binary on any machine, and up
// to the first completed launch on a GPU (skipped without a driver). Two kernels: a small
// one and a CUB BlockReduce, each calling an `extern __device__` function of another
// source, linked with -lto -optimize-unused-variables from LTO-IR.
//
//   bench_link [--quick]
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "bench_common.h"
#include "cuda/context.h"
#include "cuda/driver.h"
#include "kjit/kjit.h"

namespace {

using kjit_bench::median;
using kjit_bench::now_us;
namespace cu = kjit::cuda;

const char* const kCallee = R"(
__device__ float combine(float a, float b) { return a * 3.0f + b * 0.5f; }
)";

const char* const kSmallCaller = R"(
extern __device__ float combine(float a, float b);
extern "C" __global__ void apply(const float* x, float* y, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = combine(x[i], y[i]);
}
)";

const char* const kCubCaller = R"(
#include <cub/block/block_reduce.cuh>
extern __device__ float combine(float a, float b);
extern "C" __global__ void apply(const float* x, float* y, int n) {
  using BlockReduce = cub::BlockReduce<float, 256>;
  __shared__ typename BlockReduce::TempStorage temp;
  int i = blockIdx.x * 256 + threadIdx.x;
  float v = i < n ? combine(x[i], 1.0f) : 0.0f;
  float sum = BlockReduce(temp).Sum(v);
  if (threadIdx.x == 0) y[blockIdx.x] = sum;
}
)";

const char* caller_of(const std::string& kernel) {
  return kernel == "cub" ? kCubCaller : kSmallCaller;
}

// The same code as one program: the callee's definition, then the caller without its
// declaration.
std::string whole_program(const std::string& kernel) {
  std::string caller = caller_of(kernel);
  const std::string decl = "extern __device__ float combine(float a, float b);";
  caller.replace(caller.find(decl), decl.size(), kCallee);
  return caller;
}

std::string g_self;
std::string g_target = "sm_90";

[[noreturn]] void die(const std::string& what) {
  std::fprintf(stderr, "bench_link: %s: %s\n", what.c_str(), kjit_last_error());
  std::exit(1);
}

void check(kjit_status s, const char* what) {
  if (s != KJIT_OK) die(what);
}

kjit_cache* open_cache(const std::string& dir) {
  kjit_cache_options co = KJIT_CACHE_OPTIONS_INIT;
  co.directory = dir.c_str();
  kjit_cache* c = nullptr;
  check(kjit_cache_open(&co, &c), "kjit_cache_open");
  return c;
}

kjit_binary* compile(kjit_compiler* c, const std::string& src, bool lto) {
  kjit_options* o = nullptr;
  check(kjit_options_create(&o), "options");
  check(kjit_options_set_target(o, g_target.c_str()), "target");
  if (lto) {
    check(kjit_options_set_outputs(o, KJIT_OUTPUT_LTOIR), "outputs");
    check(kjit_options_add(o, "-rdc=true"), "-rdc");
  } else {
    check(kjit_options_set_outputs(o, KJIT_OUTPUT_CUBIN), "outputs");
  }
  kjit_binary* b = nullptr;
  check(kjit_compile(c, src.c_str(), o, &b), "compile");
  kjit_options_destroy(o);
  return b;
}

kjit_linker* linker_for(kjit_cache* cache, const kjit_binary* a, const kjit_binary* b) {
  kjit_linker* l = nullptr;
  check(kjit_linker_create(cache, &l), "linker");
  check(kjit_linker_add_binary(l, a, nullptr), "add caller");
  check(kjit_linker_add_binary(l, b, nullptr), "add callee");
  check(kjit_linker_add_option(l, "-lto"), "-lto");
  // Without it the -rdc CUB program keeps every CUB device variable: a 124 KB CUBIN
  // instead of 5 KB, which costs a fresh process's hit about 0.25 ms more to read.
  check(kjit_linker_add_option(l, "-optimize-unused-variables"), "-optimize-unused-variables");
  check(kjit_linker_set_target(l, g_target.c_str()), "link target");
  return l;
}

// The binary a fresh process needs for the kernel: linked (two compile hits, a link hit)
// or single (one compile hit). Exits with 2 when a step was not a disk hit.
kjit_binary* reach_binary(kjit_cache* cache, kjit_compiler* c, const std::string& kernel,
                          bool linked, double* phases) {
  if (!linked) {
    kjit_binary* b = compile(c, whole_program(kernel), false);
    if (kjit_binary_tier(b) != KJIT_TIER_DISK) std::exit(2);
    return b;
  }
  const double t0 = now_us();
  kjit_binary* a = compile(c, caller_of(kernel), true);
  const double t1 = now_us();
  kjit_binary* b = compile(c, kCallee, true);
  const double t2 = now_us();
  kjit_linker* l = linker_for(cache, a, b);
  kjit_binary* out = nullptr;
  check(kjit_link(l, &out), "link");
  phases[0] = t1 - t0;
  phases[1] = t2 - t1;
  phases[2] = now_us() - t2;
  const bool hits = kjit_binary_tier(a) == KJIT_TIER_DISK &&
                    kjit_binary_tier(b) == KJIT_TIER_DISK &&
                    kjit_binary_tier(out) == KJIT_TIER_DISK;
  kjit_linker_destroy(l);
  kjit_binary_destroy(a);
  kjit_binary_destroy(b);
  if (!hits) std::exit(2);
  return out;
}

// Child: a fresh process reaching the kernel's binary (and, with `gpu`, its first completed
// launch; CUDA is initialised and buffers allocated before the clock starts). Prints
// "total open=.. binary=.. launch=.." in microseconds.
int child(const std::string& dir, const std::string& kernel, bool linked, bool gpu) {
  CUdeviceptr x = 0, y = 0;
  int n = 1 << 20;
  if (gpu) {
    const cu::Driver& d = cu::driver();
    if (d.cuCtxSetCurrent(cu::primary_context(0)) != CUDA_SUCCESS ||
        d.cuMemAlloc(&x, size_t(n) * 4) != CUDA_SUCCESS ||
        d.cuMemAlloc(&y, size_t(n) * 4) != CUDA_SUCCESS ||
        d.cuMemsetD8(x, 0, size_t(n) * 4) != CUDA_SUCCESS ||
        d.cuMemsetD8(y, 0, size_t(n) * 4) != CUDA_SUCCESS || d.cuCtxSynchronize() != CUDA_SUCCESS) {
      std::fprintf(stderr, "bench_link: CUDA setup failed\n");
      return 1;
    }
  }
  const double t0 = now_us();
  kjit_cache* cache = open_cache(dir);
  kjit_compiler* c = nullptr;
  check(kjit_compiler_create(cache, 1, &c), "compiler");
  const double t1 = now_us();
  double phases[3] = {0, 0, 0};
  kjit_binary* b = reach_binary(cache, c, kernel, linked, phases);
  const double t2 = now_us();
  double t3 = t2;
  if (gpu) {
    kjit_kernel* k = nullptr;
    check(kjit_kernel_from_binary(b, "apply", 0, 0, &k), "kernel");
    kjit_launch_config cfg = KJIT_LAUNCH_CONFIG_INIT;
    cfg.block[0] = 256;
    cfg.grid[0] = static_cast<uint32_t>(n / 256);
    void* args[] = {&x, &y, &n};
    check(kjit_kernel_launch(k, &cfg, args, 3), "launch");
    if (cu::driver().cuCtxSynchronize() != CUDA_SUCCESS) die("sync");
    t3 = now_us();
    kjit_kernel_destroy(k);
  }
  std::printf("%.1f open=%.1f binary=%.1f launch=%.1f caller=%.1f callee=%.1f link=%.1f\n", t3 - t0,
              t1 - t0, t2 - t1, t3 - t2, phases[0], phases[1], phases[2]);
  kjit_binary_destroy(b);
  kjit_compiler_destroy(c);
  kjit_cache_close(cache);
  return 0;
}

struct Run {
  double total = -1;
  std::map<std::string, double> phases;
};

Run spawn(const std::string& args) {
  FILE* p = popen((g_self + " " + args).c_str(), "r");
  char buf[512] = {};
  Run r;
  if (p && std::fgets(buf, sizeof buf, p)) {
    char* rest = nullptr;
    r.total = std::strtod(buf, &rest);
    char name[64];
    double v;
    int used = 0;
    while (rest && std::sscanf(rest, " %63[a-z]=%lf%n", name, &v, &used) == 2) {
      r.phases[name] = v;
      rest += used;
    }
  }
  const int st = p ? pclose(p) : -1;
  if (st != 0 || r.total < 0) {
    std::fprintf(stderr, "bench_link: child '%s' failed (not a disk hit?)\n", args.c_str());
    std::exit(1);
  }
  return r;
}

// "open 0.41, caller 0.30, ..." in milliseconds: the median of each phase.
std::string phase_medians(const std::vector<Run>& runs, std::vector<const char*> names) {
  std::string out;
  for (const char* n : names) {
    std::vector<double> v;
    for (const Run& r : runs) v.push_back(r.phases.count(n) ? r.phases.at(n) : 0);
    char buf[64];
    std::snprintf(buf, sizeof buf, "%s%s %.2f", out.empty() ? "" : ", ", n, median(v) / 1000);
    out += buf;
  }
  return out;
}

double total_median(const std::vector<Run>& runs) {
  std::vector<double> t;
  for (const Run& r : runs) t.push_back(r.total);
  return median(t) / 1000;
}

// Compiles and links everything once (misses) so that the children hit.
void warm(const std::string& dir, const std::string& kernel) {
  kjit_cache* cache = open_cache(dir);
  kjit_compiler* c = nullptr;
  check(kjit_compiler_create(cache, 1, &c), "compiler");
  kjit_binary* a = compile(c, caller_of(kernel), true);
  kjit_binary* b = compile(c, kCallee, true);
  kjit_binary_destroy(compile(c, whole_program(kernel), false));
  kjit_linker* l = linker_for(cache, a, b);
  kjit_binary* out = nullptr;
  check(kjit_link(l, &out), "link");
  kjit_binary_destroy(out);
  kjit_linker_destroy(l);
  kjit_binary_destroy(a);
  kjit_binary_destroy(b);
  kjit_compiler_destroy(c);
  kjit_cache_close(cache);
}

// Median link time with nvJitLink running every time (no cache), and with the cache's
// memory tier answering, in this process; in milliseconds.
void link_in_process(const std::string& dir, const std::string& kernel, int reps, double* cold,
                     double* cached) {
  kjit_cache* cache = open_cache(dir);
  kjit_compiler* c = nullptr;
  check(kjit_compiler_create(cache, 1, &c), "compiler");
  kjit_binary* a = compile(c, caller_of(kernel), true);
  kjit_binary* b = compile(c, kCallee, true);
  kjit_linker* uncached = linker_for(nullptr, a, b);
  kjit_linker* through = linker_for(cache, a, b);
  std::vector<double> tc, th;
  for (int i = 0; i < reps; ++i) {
    kjit_binary* out = nullptr;
    double t0 = now_us();
    check(kjit_link(uncached, &out), "cold link");
    tc.push_back(now_us() - t0);
    kjit_binary_destroy(out);
    t0 = now_us();
    check(kjit_link(through, &out), "cached link");
    th.push_back(now_us() - t0);
    if (kjit_binary_tier(out) == KJIT_TIER_COMPILED) die("the cached link ran nvJitLink");
    kjit_binary_destroy(out);
  }
  *cold = median(tc) / 1000;
  *cached = median(th) / 1000;
  kjit_linker_destroy(uncached);
  kjit_linker_destroy(through);
  kjit_binary_destroy(a);
  kjit_binary_destroy(b);
  kjit_compiler_destroy(c);
  kjit_cache_close(cache);
}

}  // namespace

int main(int argc, char** argv) {
  char exe[4096];
  const ssize_t len = readlink("/proc/self/exe", exe, sizeof exe - 1);
  g_self = len > 0 ? std::string(exe, size_t(len)) : argv[0];
  if (argc >= 7 && std::strcmp(argv[1], "--child") == 0) {
    g_target = argv[6];
    return child(argv[2], argv[3], std::strcmp(argv[4], "linked") == 0,
                 std::strcmp(argv[5], "gpu") == 0);
  }
  bool quick = false;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--quick") == 0) quick = true;
  }
  const bool gpu = cu::driver_available();
  if (gpu) {
    char arch[16];
    if (kjit_device_arch(0, arch, sizeof arch) == KJIT_OK) g_target = arch;
  }
  const char* tmp_env = std::getenv("TMPDIR");
  std::string tmpl =
      std::string(tmp_env && *tmp_env ? tmp_env : "/tmp") + "/kjit-bench-link-XXXXXX";
  if (!mkdtemp(tmpl.data())) return 1;
  const std::string dir = tmpl + "/cache";
  const int reps = quick ? 7 : 21;
  const char* version = "?";
  kjit_nvjitlink_version(&version);
  std::printf("target %s, %s, %s; medians of %d\n\n", g_target.c_str(), version,
              gpu ? "GPU present" : "no GPU driver: launch rows skipped", reps);
  std::printf(
      "| measure | kernel | linked (LTO) | single program | ratio |\n| --- | --- | ---: | ---: | "
      "---: |\n");
  for (const std::string kernel : {"small", "cub"}) {
    warm(dir, kernel);
    double cold = 0, cached = 0;
    link_in_process(dir, kernel, reps, &cold, &cached);
    std::printf("| link, nvJitLink running (no cache), in process | %s | %.2f ms | | |\n",
                kernel.c_str(), cold);
    std::printf("| link, cached (memory tier), in process | %s | %.3f ms | | %.0fx faster |\n",
                kernel.c_str(), cached, cold / cached);
    for (const bool launch : {false, true}) {
      if (launch && !gpu) continue;
      std::vector<Run> linked, single;
      for (int i = 0; i < reps; ++i) {  // interleaved
        const std::string common = dir + " " + kernel + " ";
        const std::string tail = std::string(launch ? " gpu " : " cpu ") + g_target;
        linked.push_back(spawn("--child " + common + "linked" + tail));
        single.push_back(spawn("--child " + common + "single" + tail));
      }
      const double l = total_median(linked), s = total_median(single);
      std::printf("| fresh process, disk hits, to the %s | %s | %.2f ms | %.2f ms | %.2fx |\n",
                  launch ? "first completed launch" : "binary", kernel.c_str(), l, s, l / s);
      if (!launch) {
        std::printf("| (phases, ms) | %s | %s | %s | |\n", kernel.c_str(),
                    phase_medians(linked, {"open", "caller", "callee", "link"}).c_str(),
                    phase_medians(single, {"open", "binary"}).c_str());
      }
    }
  }
  std::string rm = "rm -rf '" + tmpl + "'";
  if (std::system(rm.c_str()) != 0)
    std::fprintf(stderr, "bench_link: could not remove %s\n", tmpl.c_str());
  return 0;
}
