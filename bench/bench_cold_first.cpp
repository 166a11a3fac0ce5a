// A program's first compile into a new, empty cache directory, against raw NVRTC of the same
// source and options (issue 43's "cold" row, apart from the grouped kernels' own compile
// time). Every measured compile runs in a child process (a bench_cold_first program run
// with --child), interleaved in every round, the order rotated:
//
//   bench_cold_first [--rounds N] [--source FILE] [--column 'LABEL|PROGRAM|ENV']...
//
//   raw      raw NVRTC in a fresh process: the library opened (dlopen), create, compile
//            (-arch=sm_90a -std=c++17 -I<toolkit include>), CUBIN;
//   raw2     the same in a process that has compiled another program first (NVRTC warm, as
//            bench_grouped_first's raw column);
//   kjit     a fresh process: kjit_cache_open of a new directory, kjit_compiler_create,
//            kjit_compile (target sm_90a, -std=c++17), with NVRTC's time inside kjit
//            (kjit_binary_compile_ms);
//   kjit2    the same into a new directory, in a process that has compiled another program
//            into another new directory first (NVRTC's identity known to the process, as in
//            bench_grouped_first's rounds).
// Each --column runs the kjit and kjit2 children with PROGRAM (another build's
// bench_cold_first, "" for this one) and ENV (VAR=VALUE ..., e.g. KJIT_PCH=0); none given:
// one column, this build. No GPU needed. Children's workers exit when idle after a second.
#include <dlfcn.h>
#include <nvrtc.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "bench_common.h"
#include "kjit/kjit.h"

using kjit_bench::median;
using kjit_bench::now_us;

namespace {

const char* kDefaultSource =
    "extern \"C\" __global__ void add_one(float* x) { x[threadIdx.x] += 1.0f; }\n";
// What a warm process compiled before (kjit2, raw2).
const char* kOtherSource =
    "extern \"C\" __global__ void add_two(float* x) { x[threadIdx.x] += 2.0f; }\n";

std::string read_source(const char* path) {
  std::ifstream f(path);
  if (!f) {
    std::fprintf(stderr, "cannot read %s\n", path);
    std::exit(2);
  }
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

using Create = nvrtcResult (*)(nvrtcProgram*, const char*, const char*, int, const char* const*,
                               const char* const*);
using Compile = nvrtcResult (*)(nvrtcProgram, int, const char* const*);
using Size = nvrtcResult (*)(nvrtcProgram, size_t*);
using Get = nvrtcResult (*)(nvrtcProgram, char*);
using Destroy = nvrtcResult (*)(nvrtcProgram*);

// Raw NVRTC: `warm` compiles another program first, outside the clock.
int raw_child(const std::string& src, bool warm) {
  const double t0 = now_us();
  void* lib = dlopen(KJIT_BENCH_NVRTC_SONAME, RTLD_NOW | RTLD_LOCAL);
  if (!lib) return 1;
  auto create = reinterpret_cast<Create>(dlsym(lib, "nvrtcCreateProgram"));
  auto compile = reinterpret_cast<Compile>(dlsym(lib, "nvrtcCompileProgram"));
  auto size = reinterpret_cast<Size>(dlsym(lib, "nvrtcGetCUBINSize"));
  auto get = reinterpret_cast<Get>(dlsym(lib, "nvrtcGetCUBIN"));
  auto destroy = reinterpret_cast<Destroy>(dlsym(lib, "nvrtcDestroyProgram"));
  // The toolkit's headers where kjit finds them (it adds the same directory).
  const std::string inc = std::string("-I") + KJIT_CUDA_INCLUDE_DIR;
  const char* opts[] = {"-arch=sm_90a", "-std=c++17", inc.c_str()};
  auto one = [&](const std::string& text) {
    nvrtcProgram p;
    create(&p, text.c_str(), "cold.cu", 0, nullptr, nullptr);
    const nvrtcResult r = compile(p, 3, opts);
    size_t n = 0;
    size(p, &n);
    std::vector<char> cubin(n);
    get(p, cubin.data());
    destroy(&p);
    return r == NVRTC_SUCCESS;
  };
  double t1 = t0;
  if (warm) {
    if (!one(kOtherSource)) return 1;
    t1 = now_us();
  }
  if (!one(src)) return 1;
  std::printf("%.3f 0 0\n", (now_us() - t1) / 1000.0);
  return 0;
}

// kjit's compile of `src` into a new cache directory; with `warm`, after a compile of another
// program into another new directory (outside the clock).
bool compile_into_new_cache(const std::string& src, double* wall, double* nvrtc_ms, int* stored) {
  char tmpl[] = "/tmp/kjit-bench-cold-XXXXXX";
  if (!mkdtemp(tmpl)) return false;
  const double t0 = now_us();
  kjit_cache_options co = KJIT_CACHE_OPTIONS_INIT;
  co.directory = tmpl;
  kjit_cache* cache = nullptr;
  kjit_compiler* comp = nullptr;
  kjit_options* o = nullptr;
  kjit_binary* b = nullptr;
  if (kjit_cache_open(&co, &cache) || kjit_compiler_create(cache, 1, &comp) ||
      kjit_options_create(&o) || kjit_options_set_target(o, "sm_90a") ||
      kjit_options_add(o, "-std=c++17") || kjit_compile(comp, src.c_str(), o, &b)) {
    std::fprintf(stderr, "kjit: %s\n", kjit_last_error());
    return false;
  }
  *wall = (now_us() - t0) / 1000.0;
  *nvrtc_ms = kjit_binary_compile_ms(b);
  *stored = kjit_binary_stored(b, nullptr);
  kjit_binary_destroy(b);
  kjit_options_destroy(o);
  kjit_compiler_destroy(comp);
  kjit_cache_close(cache);
  std::system((std::string("rm -rf ") + tmpl).c_str());
  return true;
}

int kjit_child(const std::string& src, bool warm) {
  double wall = 0, inner = 0;
  int stored = 0;
  if (warm && !compile_into_new_cache(kOtherSource, &wall, &inner, &stored)) return 1;
  if (!compile_into_new_cache(src, &wall, &inner, &stored)) return 1;
  std::printf("%.3f %.3f %d\n", wall, inner, stored);
  return 0;
}

struct Column {
  std::string label, program, env, kind;  // kind: raw, raw2, kjit, kjit2
};

// Runs a child for `c`; its line's numbers (wall ms, NVRTC ms inside kjit).
bool spawn(const Column& c, const std::string& source_arg, double* wall, double* inner) {
  const std::string cmd =
      "KJIT_WORKER_IDLE_S=1 " + c.env + " '" + c.program + "' --child " + c.kind + source_arg;
  FILE* p = popen(cmd.c_str(), "r");
  if (!p) return false;
  int stored = 0;
  const int got = std::fscanf(p, "%lf %lf %d", wall, inner, &stored);
  const int rc = pclose(p);
  return got == 3 && rc == 0 && (c.kind.rfind("raw", 0) == 0 || stored == 1);
}

}  // namespace

int main(int argc, char** argv) {
  std::string source = kDefaultSource, source_arg;
  int rounds = 15;
  std::vector<std::string> specs;
  std::string child;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--child") == 0 && i + 1 < argc) {
      child = argv[++i];
    } else if (std::strcmp(argv[i], "--rounds") == 0 && i + 1 < argc) {
      rounds = std::atoi(argv[++i]);
    } else if (std::strcmp(argv[i], "--source") == 0 && i + 1 < argc) {
      source = read_source(argv[++i]);
      source_arg = std::string(" --source '") + argv[i] + "'";
    } else if (std::strcmp(argv[i], "--column") == 0 && i + 1 < argc) {
      specs.push_back(argv[++i]);
    }
  }
  if (child == "raw" || child == "raw2") return raw_child(source, child == "raw2");
  if (child == "kjit" || child == "kjit2") return kjit_child(source, child == "kjit2");
  if (!child.empty()) return 2;
  char self_buf[4096];
  const ssize_t n = readlink("/proc/self/exe", self_buf, sizeof self_buf - 1);
  if (n <= 0) return 1;
  const std::string self(self_buf, size_t(n));
  if (specs.empty()) specs.push_back("kjit||");
  std::vector<Column> cols = {{"raw NVRTC", self, "", "raw"},
                              {"raw NVRTC, warm process", self, "", "raw2"}};
  for (const std::string& spec : specs) {
    const size_t a = spec.find('|'), b = a == std::string::npos ? a : spec.find('|', a + 1);
    if (b == std::string::npos) {
      std::fprintf(stderr, "--column wants 'LABEL|PROGRAM|ENV'\n");
      return 2;
    }
    const std::string label = spec.substr(0, a), env = spec.substr(b + 1);
    const std::string program =
        spec.substr(a + 1, b - a - 1).empty() ? self : spec.substr(a + 1, b - a - 1);
    cols.push_back({label + ", fresh process", program, env, "kjit"});
    cols.push_back({label + ", warm process", program, env, "kjit2"});
  }
  std::vector<std::vector<double>> wall(cols.size()), inner(cols.size());
  for (int r = 0; r < rounds; ++r) {
    for (size_t j = 0; j < cols.size(); ++j) {
      const size_t c = (j + size_t(r)) % cols.size();
      double w = 0, in = 0;
      if (!spawn(cols[c], source_arg, &w, &in)) {
        std::fprintf(stderr, "a child failed (%s)\n", cols[c].label.c_str());
        return 1;
      }
      wall[c].push_back(w);
      inner[c].push_back(in);
    }
  }
  auto quartiles = [](std::vector<double> v) {
    std::sort(v.begin(), v.end());
    char buf[64];
    std::snprintf(buf, sizeof buf, "%.1f-%.1f", v[v.size() / 4], v[(3 * v.size()) / 4]);
    return std::string(buf);
  };
  std::printf(
      "\n## first compile into a new cache, %d rounds (ms; raw = the same process kind's raw "
      "NVRTC)\n",
      rounds);
  std::printf("| column | median | quartiles | NVRTC inside kjit | / raw |\n");
  std::printf("| --- | ---: | --- | ---: | ---: |\n");
  for (size_t c = 0; c < cols.size(); ++c) {
    const bool warm = cols[c].kind == "raw2" || cols[c].kind == "kjit2";
    char in[32] = "-";
    if (cols[c].kind.rfind("kjit", 0) == 0) std::snprintf(in, sizeof in, "%.1f", median(inner[c]));
    std::printf("| %s | %.1f | %s | %s | %.2f |\n", cols[c].label.c_str(), median(wall[c]),
                quartiles(wall[c]).c_str(), in, median(wall[c]) / median(wall[warm ? 1 : 0]));
  }
  return 0;
}
