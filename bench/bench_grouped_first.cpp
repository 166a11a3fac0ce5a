// Grouped GEMM: the first call of a configuration in a new process, and what checking the
// offsets on the device costs. Prints tables.
//
//  1. cold: the configuration's compile through kjit (an empty cache each round) against
//     raw NVRTC of the same source and options, interleaved rounds;
//  2. warm: a new process (this program again, --child) with the cache warm: from the
//     library loaded and the tensors allocated (CUDA context current) to the first
//     kjit_grouped_gemm_run() returning, split into its steps, and to that launch complete;
//  3. check mode: per-call time with and without check_offsets, interleaved rounds.
//
//     bench_grouped_first [--rounds N] [--children N] [--only warm|check|cold]
//                         [--target sm_90a]   (with --only cold: no GPU needed)
#include <nvrtc.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "bench_common.h"
#include "cuda/context.h"
#include "cuda/driver.h"
#include "grouped/grouped.h"
#include "kjit/kjit.h"

using kjit_bench::median;
using kjit_bench::now_us;
namespace cu = kjit::cuda;

namespace {

struct Shape {
  const char* name;
  int groups, k, n, rows;
};
const Shape kShapes[] = {{"decode-128x4", 128, 2048, 1536, 512},
                         {"qwen3-w13", 128, 2048, 1536, 32768},
                         {"mixtral-w13", 8, 4096, 28672, 8192}};

kjit_grouped_gemm_desc desc_of(const Shape& s) {
  kjit_grouped_gemm_desc d;
  kjit_grouped_gemm_desc_init(&d);
  d.groups = s.groups;
  d.rows = s.rows;
  d.n = s.n;
  d.k = s.k;
  d.b_order = KJIT_GROUPED_B_NK;
  return d;
}

void die(const char* what, kjit_status st) {
  std::fprintf(stderr, "%s: %s (%s)\n", what, kjit_status_string(st), kjit_last_error());
  std::exit(1);
}

std::string make_temp() {
  char tmpl[] = "/tmp/kjit-bench-grouped-XXXXXX";
  if (!mkdtemp(tmpl)) {
    std::perror("mkdtemp");
    std::exit(1);
  }
  return tmpl;
}

// Device buffers of a shape: A, B, D zeroed, offsets uniform.
struct Buffers {
  CUdeviceptr a = 0, b = 0, d = 0, offs = 0;
  explicit Buffers(const Shape& s) {
    const auto& drv = cu::driver();
    cu::check(drv.cuMemAlloc(&a, size_t(s.rows) * s.k * 2), "alloc A");
    cu::check(drv.cuMemAlloc(&b, size_t(s.groups) * s.n * s.k * 2), "alloc B");
    cu::check(drv.cuMemAlloc(&d, size_t(s.rows) * s.n * 2), "alloc D");
    cu::check(drv.cuMemAlloc(&offs, size_t(s.groups) * 4), "alloc offs");
    cu::check(drv.cuMemsetD8(a, 0, size_t(s.rows) * s.k * 2), "memset");
    cu::check(drv.cuMemsetD8(b, 0, size_t(s.groups) * s.n * s.k * 2), "memset");
    std::vector<int32_t> o;
    for (int g = 1; g <= s.groups; ++g) o.push_back(int32_t((long long)s.rows * g / s.groups));
    cu::check(drv.cuMemcpyHtoD(offs, o.data(), o.size() * 4), "offs");
  }
  ~Buffers() {
    const auto& drv = cu::driver();
    drv.cuMemFree(a);
    drv.cuMemFree(b);
    drv.cuMemFree(d);
    drv.cuMemFree(offs);
  }
  kjit_status run(kjit_grouped_gemm* gg, const kjit_grouped_gemm_desc& desc) const {
    return kjit_grouped_gemm_run(gg, &desc, reinterpret_cast<void*>(a), reinterpret_cast<void*>(b),
                                 reinterpret_cast<int32_t*>(offs), nullptr,
                                 reinterpret_cast<void*>(d), nullptr, nullptr);
  }
};

// ---- 1. cold compile ---------------------------------------------------------------------

double raw_nvrtc_ms(const std::string& src, const std::string& target) {
  const double t0 = now_us();
  nvrtcProgram p;
  nvrtcCreateProgram(&p, src.c_str(), "kjit_grouped_gemm.cu", 0, nullptr, nullptr);
  const std::string arch = "-arch=" + target;
  const char* opts[] = {arch.c_str(), "-std=c++17"};
  const nvrtcResult r = nvrtcCompileProgram(p, 2, opts);
  size_t n = 0;
  nvrtcGetCUBINSize(p, &n);
  std::vector<char> cubin(n);
  nvrtcGetCUBIN(p, cubin.data());
  nvrtcDestroyProgram(&p);
  if (r != NVRTC_SUCCESS) {
    std::fprintf(stderr, "raw NVRTC failed: %s\n", nvrtcGetErrorString(r));
    std::exit(1);
  }
  return (now_us() - t0) / 1000.0;
}

// kjit's compile of `s`'s configuration into an empty cache; with `settled`, one that has
// compiled another configuration first (the cache's database, the toolchain's facts and the
// compile worker exist), so that only this configuration's cost is timed.
double kjit_cold_ms(const Shape& s, const std::string& target, double* nvrtc_ms, bool settled) {
  const std::string dir = make_temp();
  kjit_cache_options co = KJIT_CACHE_OPTIONS_INIT;
  co.directory = dir.c_str();
  kjit_cache* cache = nullptr;
  kjit_compiler* comp = nullptr;
  if (kjit_status st = kjit_cache_open(&co, &cache)) die("cache", st);
  if (kjit_status st = kjit_compiler_create(cache, 1, &comp)) die("compiler", st);
  const kjit_grouped_gemm_desc d = desc_of(s);
  kjit_binary* b = nullptr;
  if (settled) {
    kjit_grouped_gemm_desc other = d;
    other.activation = KJIT_GROUPED_ACT_RELU;
    if (kjit_status st = kjit_grouped_gemm_compile(comp, target.c_str(), &other, nullptr, 0, &b))
      die("kjit_grouped_gemm_compile", st);
    kjit_binary_destroy(b);
    b = nullptr;
  }
  const double t0 = now_us();
  if (kjit_status st = kjit_grouped_gemm_compile(comp, target.c_str(), &d, nullptr, 0, &b))
    die("kjit_grouped_gemm_compile", st);
  const double ms = (now_us() - t0) / 1000.0;
  *nvrtc_ms = kjit_binary_compile_ms(b);
  kjit_binary_destroy(b);
  kjit_compiler_destroy(comp);
  kjit_cache_close(cache);
  std::system(("rm -rf " + dir).c_str());
  return ms;
}

void cold(int rounds, const std::string& target) {
  std::printf(
      "\n## cold: the configuration's compile, kjit (empty cache) vs raw NVRTC, %d rounds\n",
      rounds);
  std::printf(
      "| shape | configuration | raw NVRTC ms | kjit, new cache ms | kjit, settled cache ms | "
      "kjit's NVRTC ms | settled / raw |\n");
  std::printf("| --- | --- | ---: | ---: | ---: | ---: | ---: |\n");
  for (const Shape& s : kShapes) {
    kjit_grouped_gemm_desc d = desc_of(s);
    const kjit::grouped::Problem p =
        kjit::grouped::check(d, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, false);
    const kjit::grouped::Config c =
        kjit::grouped::config_for_target(p, target, kjit::grouped::Options());
    const std::string src = kjit::grouped::render(c);
    std::vector<double> raw, kj, ks, kn;
    for (int r = 0; r < rounds; ++r) {
      raw.push_back(raw_nvrtc_ms(src, target));
      double inner = 0;
      kj.push_back(kjit_cold_ms(s, target, &inner, false));
      ks.push_back(kjit_cold_ms(s, target, &inner, true));
      kn.push_back(inner);
    }
    std::printf("| %s | %s | %.0f | %.0f | %.0f | %.0f | %.3f |\n", s.name, c.key().c_str(),
                median(raw), median(kj), median(ks), median(kn), median(ks) / median(raw));
  }
}

// ---- 2. warm first use in a new process -------------------------------------------------

// The child: prints "ctx_ms open_us compiler_us create_us run_us done_us".
int child(const std::string& dir, int shape) {
  const Shape& s = kShapes[shape];
  static double t_start = now_us();
  if (std::getenv("KJIT_BENCH_LOG")) {  // every library message, stamped, on stderr
    kjit_set_log_callback(
        [](int, const char* m, void*) {
          std::fprintf(stderr, "%10.3f ms %s\n", (now_us() - t_start) / 1000.0, m);
        },
        nullptr);
  }
  cu::check(cu::driver().cuCtxSetCurrent(cu::primary_context(0)), "ctx");
  Buffers buf(s);
  cu::check(cu::driver().cuCtxSynchronize(), "sync");
  const double t0 = now_us();  // library loaded, context current, tensors allocated
  kjit_cache_options co = KJIT_CACHE_OPTIONS_INIT;
  co.directory = dir.c_str();
  kjit_cache* cache = nullptr;
  kjit_compiler* comp = nullptr;
  kjit_grouped_gemm* gg = nullptr;
  if (kjit_status st = kjit_cache_open(&co, &cache)) die("cache", st);
  const double t1 = now_us();
  if (kjit_status st = kjit_compiler_create(cache, 1, &comp)) die("compiler", st);
  const double t2 = now_us();
  if (kjit_status st = kjit_grouped_gemm_create(comp, 0, nullptr, &gg)) die("create", st);
  const double t3 = now_us();
  // The first run, in the steps it takes (each later step finds the earlier one's work
  // done): the plan (a tuned plan looked up in the cache's named values), the kernel's
  // cache hit (key and entry), its load, then the run itself (tensor maps and launch).
  const kjit_grouped_gemm_desc d = desc_of(s);
  char key[256];
  if (kjit_status st = kjit_grouped_gemm_plan_key(
          gg, &d, reinterpret_cast<void*>(buf.a), reinterpret_cast<void*>(buf.b), nullptr,
          reinterpret_cast<void*>(buf.d), nullptr, key, sizeof key, nullptr))
    die("plan_key", st);
  const double t4 = now_us();
  kjit_binary* b = nullptr;
  if (kjit_status st = kjit_grouped_gemm_compile(comp, "sm_90a", &d, nullptr, 0, &b))
    die("compile (hit)", st);
  kjit_binary_destroy(b);
  const double t5 = now_us();
  if (kjit_status st = kjit_grouped_gemm_prepare(gg, &d, 0)) die("prepare", st);
  const double t6 = now_us();
  if (kjit_status st = buf.run(gg, d)) die("run", st);
  const double t7 = now_us();
  cu::check(cu::driver().cuCtxSynchronize(), "sync");
  const double t8 = now_us();
  kjit_cache_stats stats;
  kjit_cache_stats_init(&stats);
  kjit_cache_stats_get(cache, &stats);
  std::printf("%.3f %.1f %.1f %.1f %.1f %.1f %.1f %.1f %.1f %llu\n", (t0 - t_start) / 1000.0,
              t1 - t0, t2 - t1, t3 - t2, t4 - t3, t5 - t4, t6 - t5, t7 - t6, t8 - t7,
              (unsigned long long)stats.compiles);
  kjit_grouped_gemm_destroy(gg);
  kjit_compiler_destroy(comp);
  kjit_cache_close(cache);
  return 0;
}

void warm(int children, const std::string& target) {
  std::printf(
      "\n## warm: first run in a new process, cache warm (%d processes per shape; "
      "medians, microseconds)\n",
      children);
  std::printf(
      "| shape | context+tensors ms (not counted) | cache open | compiler | handle | "
      "plan | kernel: cache hit | kernel: load | run returns | **total to first run** | "
      "launch complete | compiles |\n");
  std::printf(
      "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: "
      "|\n");
  const std::string dir = make_temp();
  for (int i = 0; i < int(sizeof kShapes / sizeof kShapes[0]); ++i) {
    {  // warm the cache for the shape, as kjit warm --grouped does
      kjit_cache_options co = KJIT_CACHE_OPTIONS_INIT;
      co.directory = dir.c_str();
      kjit_cache* cache = nullptr;
      kjit_compiler* comp = nullptr;
      if (kjit_status st = kjit_cache_open(&co, &cache)) die("cache", st);
      if (kjit_status st = kjit_compiler_create(cache, 1, &comp)) die("compiler", st);
      const kjit_grouped_gemm_desc d = desc_of(kShapes[i]);
      kjit_binary* b = nullptr;
      if (kjit_status st = kjit_grouped_gemm_compile(comp, target.c_str(), &d, nullptr, 0, &b))
        die("warm", st);
      kjit_binary_destroy(b);
      kjit_compiler_destroy(comp);
      kjit_cache_close(cache);
    }
    constexpr int kF = 10;
    std::vector<double> f[kF];
    for (int c = 0; c < children; ++c) {
      char self[4096];
      const ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
      if (n <= 0) return;
      self[n] = '\0';
      const std::string cmd = std::string(self) + " --child " + dir + " " + std::to_string(i);
      FILE* p = popen(cmd.c_str(), "r");
      double v[kF] = {0};
      int got = 0;
      if (p) {
        for (int k = 0; k < kF && std::fscanf(p, "%lf", &v[k]) == 1; ++k) ++got;
        pclose(p);
      }
      if (got != kF) {
        std::fprintf(stderr, "child failed\n");
        continue;
      }
      for (int k = 0; k < kF; ++k) f[k].push_back(v[k]);
    }
    std::vector<double> total;
    for (size_t c = 0; c < f[1].size(); ++c) {
      double t = 0;
      for (int k = 1; k <= 7; ++k) t += f[k][c];
      total.push_back(t);
    }
    std::printf(
        "| %s | %.0f | %.0f | %.0f | %.0f | %.0f | %.0f | %.0f | %.0f | **%.0f** | %.0f | "
        "%.0f |\n",
        kShapes[i].name, median(f[0]), median(f[1]), median(f[2]), median(f[3]), median(f[4]),
        median(f[5]), median(f[6]), median(f[7]), median(total), median(f[8]), median(f[9]));
  }
  std::system(("rm -rf " + dir).c_str());
}

// ---- 3. check mode cost ------------------------------------------------------------------

void check_cost(int rounds) {
  std::printf(
      "\n## check_offsets: time per call, off vs on (%d interleaved rounds of 50 calls; "
      "medians)\n",
      rounds);
  std::printf("| shape | off us | on us | on / off |\n| --- | ---: | ---: | ---: |\n");
  const std::string dir = make_temp();
  kjit_cache_options co = KJIT_CACHE_OPTIONS_INIT;
  co.directory = dir.c_str();
  kjit_cache* cache = nullptr;
  kjit_compiler* comp = nullptr;
  if (kjit_status st = kjit_cache_open(&co, &cache)) die("cache", st);
  if (kjit_status st = kjit_compiler_create(cache, 2, &comp)) die("compiler", st);
  kjit_grouped_gemm *off = nullptr, *on = nullptr;
  kjit_grouped_gemm_options o = KJIT_GROUPED_GEMM_OPTIONS_INIT;
  if (kjit_status st = kjit_grouped_gemm_create(comp, 0, &o, &off)) die("create", st);
  o.check_offsets = 1;
  if (kjit_status st = kjit_grouped_gemm_create(comp, 0, &o, &on)) die("create", st);
  const auto& drv = cu::driver();
  CUevent e0, e1;
  cu::check(drv.cuEventCreate(&e0, CU_EVENT_DEFAULT), "event");
  cu::check(drv.cuEventCreate(&e1, CU_EVENT_DEFAULT), "event");
  for (const Shape& s : kShapes) {
    Buffers buf(s);
    const kjit_grouped_gemm_desc d = desc_of(s);
    kjit_grouped_gemm* hs[2] = {off, on};
    std::vector<double> t[2];
    for (int w = 0; w < 2; ++w)
      for (int j = 0; j < 3; ++j) buf.run(hs[w], d);
    for (int r = 0; r < rounds; ++r) {
      for (int w = 0; w < 2; ++w) {
        cu::check(drv.cuEventRecord(e0, nullptr), "record");
        for (int j = 0; j < 50; ++j)
          if (kjit_status st = buf.run(hs[w], d)) die("run", st);
        cu::check(drv.cuEventRecord(e1, nullptr), "record");
        cu::check(drv.cuEventSynchronize(e1), "sync");
        float ms = 0;
        drv.cuEventElapsedTime(&ms, e0, e1);
        t[w].push_back(double(ms) * 1000.0 / 50);
      }
    }
    if (kjit_grouped_gemm_offsets_status(on) != KJIT_OK)
      die("offsets", KJIT_ERROR_INVALID_ARGUMENT);
    std::printf("| %s | %.1f | %.1f | %.3f |\n", s.name, median(t[0]), median(t[1]),
                median(t[1]) / median(t[0]));
  }
  drv.cuEventDestroy(e0);
  drv.cuEventDestroy(e1);
  kjit_grouped_gemm_destroy(off);
  kjit_grouped_gemm_destroy(on);
  kjit_compiler_destroy(comp);
  kjit_cache_close(cache);
  std::system(("rm -rf " + dir).c_str());
}

}  // namespace

int main(int argc, char** argv) {
  if (argc == 4 && std::strcmp(argv[1], "--child") == 0) return child(argv[2], std::atoi(argv[3]));
  int rounds = 3, children = 7;
  std::string only;        // warm, check or cold; "" = all
  std::string target_arg;  // --target with --only cold: no GPU
  for (int i = 1; i + 1 < argc; i += 2) {
    if (std::strcmp(argv[i], "--rounds") == 0) rounds = std::atoi(argv[i + 1]);
    if (std::strcmp(argv[i], "--children") == 0) children = std::atoi(argv[i + 1]);
    if (std::strcmp(argv[i], "--only") == 0) only = argv[i + 1];
    if (std::strcmp(argv[i], "--target") == 0) target_arg = argv[i + 1];
  }
  try {
    if (only == "cold" && target_arg.size()) {  // no GPU needed: NVRTC runs on the CPU
      std::printf("# bench_grouped_first: target %s (no GPU), kjit %s\n", target_arg.c_str(),
                  kjit_version_string());
      cold(rounds, target_arg);
      return 0;
    }
    cu::check(cu::driver().cuCtxSetCurrent(cu::primary_context(0)), "ctx");
    const int cc = cu::compute_capability(0);
    const std::string target = cc == 90 ? "sm_90a" : "sm_" + std::to_string(cc);
    std::printf("# bench_grouped_first: %s, target %s, kjit %s\n", cu::device_name(0).c_str(),
                target.c_str(), kjit_version_string());
    if (only.empty() || only == "warm") warm(children, target);
    if (only.empty() || only == "check") check_cost(rounds + 2);
    if (only.empty() || only == "cold") cold(rounds, target);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_grouped_first: %s\n", e.what());
    return 1;
  }
  return 0;
}
