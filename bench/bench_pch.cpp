// First compiles of header-heavy kernels: kjit (toolkit headers found by itself, automatic
// precompiled headers) against raw NVRTC given the same include directories, side by side
// in one process, rounds interleaved. Prints one table.
//
//   bench_pch [--many N]     (N variants for the kjit_compile_many row; default 32)
//
// Rows:
//   - 8 distinct CUB kernels (BlockReduce, BlockScan, WarpReduce at several sizes and
//     types), one after another, each with its own #include line: kjit's cache is cold.
//   - the same 8 kernels written with one shared block of CUB includes.
//   - kjit_compile_many of N variants vs the sum of N raw sequential compiles.
//   - saxpy (no headers): cold kjit compile vs raw.
#include <nvrtc.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "bench_common.h"
#include "kjit/kjit.h"

namespace {

using kjit_bench::median;

double now_ms() {
  using namespace std::chrono;
  return duration<double, std::milli>(steady_clock::now().time_since_epoch()).count();
}

std::vector<std::string> toolkit_includes() {
  std::vector<std::string> out;
  const std::string path = kjit_toolkit_include_path();
  size_t pos = 0;
  while (pos < path.size()) {
    size_t end = path.find(':', pos);
    if (end == std::string::npos) end = path.size();
    out.push_back("-I" + path.substr(pos, end - pos));
    pos = end + 1;
  }
  return out;
}

// Raw NVRTC with the include directories kjit found, and kjit's deterministic seed.
double raw_compile(const std::string& src) {
  static const std::vector<std::string> includes = toolkit_includes();
  std::vector<const char*> opts{"-arch=sm_90", "--frandom-seed=kjit"};
  for (const auto& i : includes) opts.push_back(i.c_str());
  nvrtcProgram p;
  nvrtcCreateProgram(&p, src.c_str(), "kernel.cu", 0, nullptr, nullptr);
  const double t0 = now_ms();
  const nvrtcResult r = nvrtcCompileProgram(p, int(opts.size()), opts.data());
  size_t n = 0;
  nvrtcGetCUBINSize(p, &n);
  std::string cubin(n, '\0');
  nvrtcGetCUBIN(p, cubin.data());
  const double ms = now_ms() - t0;
  nvrtcDestroyProgram(&p);
  if (r != NVRTC_SUCCESS) {
    std::fprintf(stderr, "raw NVRTC failed: %s\n", nvrtcGetErrorString(r));
    std::exit(1);
  }
  return ms;
}

struct Kjit {
  kjit_cache* cache = nullptr;
  kjit_compiler* compiler = nullptr;
  std::string dir;
  explicit Kjit(const char* tag) {
    char tmpl[] = "/tmp/kjit-bench-pch-XXXXXX";
    dir = mkdtemp(tmpl);
    dir += std::string("/") + tag;
    kjit_cache_options co = KJIT_CACHE_OPTIONS_INIT;
    co.directory = dir.c_str();
    if (kjit_cache_open(&co, &cache) != KJIT_OK ||
        kjit_compiler_create(cache, 0, &compiler) != KJIT_OK) {
      std::fprintf(stderr, "kjit: %s\n", kjit_last_error());
      std::exit(1);
    }
  }
  ~Kjit() {
    kjit_compiler_destroy(compiler);
    kjit_cache_close(cache);
  }
  double compile(const std::string& src) {
    kjit_options* o;
    kjit_options_create(&o);
    kjit_options_set_target(o, "sm_90");
    kjit_binary* b = nullptr;
    const double t0 = now_ms();
    const kjit_status st = kjit_compile(compiler, src.c_str(), o, &b);
    const double ms = now_ms() - t0;
    if (st != KJIT_OK || kjit_binary_tier(b) != KJIT_TIER_COMPILED) {
      std::fprintf(stderr, "kjit: %s %s\n", kjit_last_error(), b ? kjit_binary_log(b) : "");
      std::exit(1);
    }
    kjit_binary_destroy(b);
    kjit_options_destroy(o);
    return ms;
  }
  kjit_cache_stats stats() {
    kjit_cache_stats s;
    std::memset(&s, 0, sizeof s);
    s.struct_size = sizeof s;
    kjit_cache_stats_get(cache, &s);
    return s;
  }
};

struct Variant {
  const char* include;
  std::string body;
};

std::vector<Variant> cub_kernels() {
  auto reduce = [](const char* t, int n) {
    return std::string("extern \"C\" __global__ void k(const ") + t + "* in, " + t +
           "* out) {\n  using R = cub::BlockReduce<" + t + ", " + std::to_string(n) +
           ">;\n  __shared__ typename R::TempStorage s;\n  " + t +
           " v = R(s).Sum(in[threadIdx.x]);\n  if (threadIdx.x == 0) *out = v;\n}\n";
  };
  auto scan = [](const char* t, int n) {
    return std::string("extern \"C\" __global__ void k(const ") + t + "* in, " + t +
           "* out) {\n  using S = cub::BlockScan<" + t + ", " + std::to_string(n) +
           ">;\n  __shared__ typename S::TempStorage s;\n  " + t +
           " v;\n  S(s).InclusiveSum(in[threadIdx.x], v);\n  out[threadIdx.x] = v;\n}\n";
  };
  auto warp = [](const char* t, int n) {
    return std::string("extern \"C\" __global__ void k(const ") + t + "* in, " + t +
           "* out) {\n  using W = cub::WarpReduce<" + t + ", " + std::to_string(n) +
           ">;\n  __shared__ typename W::TempStorage s;\n  " + t +
           " v = W(s).Sum(in[threadIdx.x]);\n  if (threadIdx.x == 0) *out = v;\n}\n";
  };
  const char* r = "#include <cub/block/block_reduce.cuh>\n";
  const char* s = "#include <cub/block/block_scan.cuh>\n";
  const char* w = "#include <cub/warp/warp_reduce.cuh>\n";
  return {{r, reduce("float", 128)},  {r, reduce("int", 256)}, {s, scan("int", 128)},
          {r, reduce("double", 512)}, {s, scan("float", 256)}, {w, warp("float", 32)},
          {w, warp("int", 16)},       {s, scan("double", 64)}};
}

const char* kSharedIncludes =
    "#include <cub/block/block_reduce.cuh>\n#include <cub/block/block_scan.cuh>\n"
    "#include <cub/warp/warp_reduce.cuh>\n";

void sequential_row(const char* title, bool shared, int salt) {
  Kjit kjit(shared ? "shared" : "own");
  std::printf("\n%s\n  %-30s %10s %10s %7s\n", title, "kernel", "raw ms", "kjit ms", "ratio");
  std::vector<double> later;
  int i = 0;
  for (const Variant& v : cub_kernels()) {
    // A comment makes each round's source new to both sides (no NVRTC-internal reuse).
    const std::string src = std::string(shared ? kSharedIncludes : v.include) + "// " +
                            std::to_string(salt) + "\n" + v.body;
    const double raw = raw_compile(src);
    const double kj = kjit.compile(src);
    std::string name = v.body.substr(v.body.find("cub::") + 5);
    name = name.substr(0, name.find('>') + 1);
    std::printf("  %-30s %10.0f %10.0f %6.2fx\n", name.c_str(), raw, kj, kj / raw);
    if (i++ > 0) later.push_back(kj / raw);
  }
  const kjit_cache_stats st = kjit.stats();
  std::printf(
      "  later kernels: median %.2fx, worst %.2fx raw; PCH created %llu, used %llu, failed %llu\n",
      median(later), *std::max_element(later.begin(), later.end()),
      (unsigned long long)st.pch_created, (unsigned long long)st.pch_used,
      (unsigned long long)st.pch_failed);
}

void many_row(int n) {
  std::vector<std::string> sources;
  for (int i = 0; i < n; ++i) {
    const char* t = i % 2 ? "float" : "int";
    sources.push_back(
        "#include <cub/block/block_reduce.cuh>\n// many\n"
        "extern \"C\" __global__ void k(const " +
        std::string(t) + "* in, " + t + "* out) {\n  using R = cub::BlockReduce<" + t + ", " +
        std::to_string(32 * (1 + i % 32)) + ", cub::BLOCK_REDUCE_WARP_REDUCTIONS, " +
        std::to_string(1 + i / 32) + ">;\n  __shared__ typename R::TempStorage s;\n  " + t +
        " v = R(s).Sum(in[threadIdx.x]);\n  if (threadIdx.x == 0) *out = v;\n}\n");
  }
  double raw_sum = 0;
  for (const auto& s : sources) raw_sum += raw_compile(s);
  Kjit kjit("many");
  std::vector<const char*> srcs;
  for (const auto& s : sources) srcs.push_back(s.c_str());
  kjit_options* o;
  kjit_options_create(&o);
  kjit_options_set_target(o, "sm_90");
  std::vector<const kjit_options*> opts(n, o);
  std::vector<kjit_binary*> outs(n, nullptr);
  std::vector<kjit_status> statuses(n);
  const double t0 = now_ms();
  kjit_compile_many(kjit.compiler, n, srcs.data(), opts.data(), outs.data(), statuses.data());
  const double wall = now_ms() - t0;
  for (int i = 0; i < n; ++i) {
    if (statuses[i] != KJIT_OK) {
      std::fprintf(stderr, "compile_many item %d: status %d\n", i, statuses[i]);
      std::exit(1);
    }
    kjit_binary_destroy(outs[i]);
  }
  kjit_options_destroy(o);
  const kjit_cache_stats st = kjit.stats();
  std::printf(
      "\nkjit_compile_many of %d BlockReduce variants on %u cores\n"
      "  raw sequential sum %.0f ms, kjit wall %.0f ms = %.3fx (PCH created %llu, used %llu)\n",
      n, std::thread::hardware_concurrency(), raw_sum, wall, wall / raw_sum,
      (unsigned long long)st.pch_created, (unsigned long long)st.pch_used);
}

void saxpy_row() {
  Kjit kjit("saxpy");
  std::vector<double> ratios;
  for (int i = 0; i < 15; ++i) {
    const std::string src = "// round " + std::to_string(i) +
                            "\nextern \"C\" __global__ void saxpy(float a, const float* x, float* "
                            "y, int n) {\n  int i = blockIdx.x * blockDim.x + threadIdx.x;\n  if "
                            "(i < n) y[i] = a * x[i] + y[i];\n}\n";
    const double raw = raw_compile(src);
    const double kj = kjit.compile(src);
    ratios.push_back(kj / raw);
  }
  std::printf("\nsaxpy (no headers), cold: kjit / raw median %.3fx over %zu interleaved rounds\n",
              median(ratios), ratios.size());
}

}  // namespace

int main(int argc, char** argv) {
  int many = 32;
  for (int i = 1; i + 1 < argc; ++i) {
    if (std::strcmp(argv[i], "--many") == 0) many = std::atoi(argv[i + 1]);
  }
  int major = 0, minor = 0;
  nvrtcVersion(&major, &minor);
  std::printf("bench_pch: NVRTC %d.%d, %u cores, toolkit include path %s\n", major, minor,
              std::thread::hardware_concurrency(), kjit_toolkit_include_path());
  // Each row in a fresh process: precompiled headers live as long as the process.
  auto row = [](const std::function<void()>& body) {
    std::fflush(stdout);
    const pid_t pid = fork();
    if (pid == 0) {
      body();
      std::fflush(stdout);
      _exit(0);
    }
    int status = 0;
    waitpid(pid, &status, 0);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) std::exit(1);
  };
  row(saxpy_row);
  row([] {
    sequential_row("8 CUB kernels one after another, each with its own #include line (cold cache)",
                   false, 1);
  });
  row([] {
    sequential_row("the same 8 kernels with one shared block of CUB includes (cold cache)", true,
                   2);
  });
  if (many > 0) row([many] { many_row(many); });
  return 0;
}
