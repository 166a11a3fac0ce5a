// Cache benchmark: cold compile through kjit vs raw NVRTC, warm hits in-process and in a
// fresh process, and hit throughput across threads and processes. Prints one table.
//
//   bench_cache [--quick]
#include <nvrtc.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "bench_common.h"
#include "kjit/kjit.h"

namespace {

using kjit_bench::kCub;
using kjit_bench::kSaxpy;
using kjit_bench::median;
using kjit_bench::now_us;

std::string g_self;
const std::string kCubInclude = std::string("-I") + KJIT_CUDA_INCLUDE_DIR + "/cccl";

struct Kernel {
  const char* name;
  const char* source;
  std::vector<std::string> options;
};

kjit_options* make_options(const Kernel& k) {
  kjit_options* o;
  kjit_options_create(&o);
  kjit_options_set_target(o, "sm_90");
  for (const auto& s : k.options) kjit_options_add(o, s.c_str());
  return o;
}

kjit_cache* open_cache(const std::string& dir, uint64_t memory_bytes = 0) {
  kjit_cache_options co = KJIT_CACHE_OPTIONS_INIT;
  co.directory = dir.c_str();
  co.memory_max_bytes = memory_bytes;
  kjit_cache* c = nullptr;
  if (kjit_cache_open(&co, &c) != KJIT_OK) {
    std::fprintf(stderr, "cache open failed: %s\n", kjit_last_error());
    std::exit(1);
  }
  return c;
}

double raw_nvrtc_us(const Kernel& k) {
  std::vector<std::string> opts = {"-arch=sm_90", "--frandom-seed=kjit"};
  opts.insert(opts.end(), k.options.begin(), k.options.end());
  std::vector<const char*> argv;
  for (auto& s : opts) argv.push_back(s.c_str());
  const double t0 = now_us();
  nvrtcProgram p;
  nvrtcCreateProgram(&p, k.source, "kernel.cu", 0, nullptr, nullptr);
  nvrtcCompileProgram(p, int(argv.size()), argv.data());
  size_t n;
  nvrtcGetCUBINSize(p, &n);
  std::string cubin(n, '\0');
  nvrtcGetCUBIN(p, cubin.data());
  nvrtcGetPTXSize(p, &n);
  std::string ptx(n, '\0');
  nvrtcGetPTX(p, ptx.data());
  nvrtcDestroyProgram(&p);
  return now_us() - t0;
}

double kjit_compile_us(kjit_compiler* c, const Kernel& k, kjit_options* o, int* tier) {
  kjit_binary* b = nullptr;
  const double t0 = now_us();
  const kjit_status st = kjit_compile(c, k.source, o, &b);
  const double dt = now_us() - t0;
  if (st != KJIT_OK) {
    std::fprintf(stderr, "compile failed: %s\n", kjit_last_error());
    std::exit(1);
  }
  if (tier) *tier = kjit_binary_tier(b);
  kjit_binary_destroy(b);
  return dt;
}

// Child mode: open the cache, compile once (a disk hit), print microseconds.
int fresh_hit(const std::string& dir, int which) {
  const Kernel ks[] = {{"saxpy", kSaxpy, {}}, {"cub", kCub, {kCubInclude}}};
  const double t0 = now_us();
  kjit_cache* cache = open_cache(dir);
  kjit_compiler* c;
  kjit_compiler_create(cache, 1, &c);
  kjit_options* o = make_options(ks[which]);
  int tier = -1;
  kjit_compile_us(c, ks[which], o, &tier);
  const double dt = now_us() - t0;
  std::printf("%.1f %d\n", dt, tier);
  kjit_options_destroy(o);
  kjit_compiler_destroy(c);
  kjit_cache_close(cache);
  return tier == KJIT_TIER_DISK ? 0 : 1;
}

// Child mode: `threads` threads doing `n` hits each; prints total hits per second.
double hit_rate(const std::string& dir, const Kernel& k, int threads, int n, uint64_t mem) {
  kjit_cache* cache = open_cache(dir, mem);
  kjit_compiler* c;
  kjit_compiler_create(cache, 1, &c);
  kjit_options* o = make_options(k);
  kjit_compile_us(c, k, o, nullptr);  // warm
  std::atomic<int> go{0};
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t) {
    pool.emplace_back([&] {
      while (!go.load()) {
      }
      for (int i = 0; i < n; ++i) kjit_compile_us(c, k, o, nullptr);
    });
  }
  const double t0 = now_us();
  go = 1;
  for (auto& th : pool) th.join();
  const double dt = now_us() - t0;
  kjit_options_destroy(o);
  kjit_compiler_destroy(c);
  kjit_cache_close(cache);
  return double(threads) * n / (dt / 1e6);
}

double run_children(const std::string& args, int procs) {
  std::vector<FILE*> pipes;
  for (int p = 0; p < procs; ++p) pipes.push_back(popen((g_self + " " + args).c_str(), "r"));
  double total = 0;
  for (FILE* f : pipes) {
    double v = 0;
    if (std::fscanf(f, "%lf", &v) == 1) total += v;
    pclose(f);
  }
  return total;
}

std::string temp_dir() {
  char tmpl[] = "/tmp/kjit-bench-XXXXXX";
  if (!mkdtemp(tmpl)) std::exit(1);
  return tmpl;
}

}  // namespace

int main(int argc, char** argv) {
  char exe[4096];
  const ssize_t len = readlink("/proc/self/exe", exe, sizeof exe - 1);
  g_self = len > 0 ? std::string(exe, size_t(len)) : argv[0];
  const Kernel kernels[] = {{"saxpy", kSaxpy, {}}, {"CUB BlockReduce", kCub, {kCubInclude}}};
  if (argc >= 4 && std::strcmp(argv[1], "--fresh-hit") == 0) {
    return fresh_hit(argv[2], std::atoi(argv[3]));
  }
  if (argc >= 6 && std::strcmp(argv[1], "--hits") == 0) {
    std::printf("%.1f\n",
                hit_rate(argv[2], kernels[std::atoi(argv[3])], std::atoi(argv[4]),
                         std::atoi(argv[5]), argc > 6 ? std::strtoull(argv[6], nullptr, 10) : 0));
    return 0;
  }
  const bool quick = argc > 1 && std::strcmp(argv[1], "--quick") == 0;
  const int cold_reps[] = {quick ? 3 : 7, quick ? 1 : 3};

  std::printf("| kernel | measure | kjit | baseline | ratio / target |\n");
  std::printf("| --- | --- | --- | --- | --- |\n");
  for (int which = 0; which < 2; ++which) {
    const Kernel& k = kernels[which];
    // Cold compile: alternate raw NVRTC and kjit (fresh cache each time) to share noise.
    std::vector<double> raw, cold;
    raw_nvrtc_us(k);  // warm NVRTC's own start-up
    for (int r = 0; r < cold_reps[which]; ++r) {
      raw.push_back(raw_nvrtc_us(k));
      const std::string dir = temp_dir();
      kjit_cache* cache = open_cache(dir);
      kjit_compiler* c;
      kjit_compiler_create(cache, 1, &c);
      kjit_options* o = make_options(k);
      cold.push_back(kjit_compile_us(c, k, o, nullptr));
      kjit_options_destroy(o);
      kjit_compiler_destroy(c);
      kjit_cache_close(cache);
      std::system(("rm -rf " + dir).c_str());
    }
    std::printf("| %s | cold compile (ms) | %.1f | %.1f raw NVRTC | %.3fx (target <= 1.02x) |\n",
                k.name, median(cold) / 1e3, median(raw) / 1e3, median(cold) / median(raw));

    const std::string dir = temp_dir();
    kjit_cache* cache = open_cache(dir);
    kjit_compiler* c;
    kjit_compiler_create(cache, 1, &c);
    kjit_options* o = make_options(k);
    kjit_compile_us(c, k, o, nullptr);
    std::vector<double> warm;
    for (int i = 0; i < 20000; ++i) warm.push_back(kjit_compile_us(c, k, o, nullptr));
    std::printf("| %s | warm hit, in process (us) | %.2f | %zu B source | target <= 2 us |\n",
                k.name, median(warm), std::strlen(k.source));
    kjit_options_destroy(o);
    kjit_compiler_destroy(c);
    kjit_cache_close(cache);

    std::vector<double> fresh;
    for (int r = 0; r < (quick ? 5 : 21); ++r) {
      fresh.push_back(run_children("--fresh-hit " + dir + " " + std::to_string(which), 1));
    }
    std::printf(
        "| %s | warm hit, fresh process incl. cache open (us) | %.0f | | target <= 1000 us |\n",
        k.name, median(fresh));
    const int n = quick ? 2000 : 20000;
    for (int threads : {1, 2, 8}) {
      std::printf("| %s | memory-tier hits/s, %d thread%s | %.0f | | |\n", k.name, threads,
                  threads > 1 ? "s" : "", hit_rate(dir, k, threads, n / threads, 0));
    }
    for (int threads : {1, 8}) {
      std::printf("| %s | disk-tier hits/s, %d thread%s (memory tier off) | %.0f | | |\n", k.name,
                  threads, threads > 1 ? "s" : "", hit_rate(dir, k, threads, n / 10 / threads, 1));
    }
    for (int procs : {2, 8}) {
      const double rate = run_children("--hits " + dir + " " + std::to_string(which) + " 1 " +
                                           std::to_string(n / 10 / procs) + " 1",
                                       procs);
      std::printf("| %s | disk-tier hits/s, %d processes | %.0f | | |\n", k.name, procs, rate);
    }
    std::system(("rm -rf " + dir).c_str());
  }
  return 0;
}
