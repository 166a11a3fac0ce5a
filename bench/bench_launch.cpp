// Launch benchmark: (1) launch enqueue overhead, kjit vs raw cuLaunchKernel on the same
// function and arguments; (2) time to the first completed launch in a fresh process with a
// warm cache vs the floor (read the CUBIN + cuModuleLoadData + cuModuleGetFunction +
// launch + sync); (3) the same with a cold cache. Kernels: empty, saxpy, CUB BlockReduce.
// The split children (kjit_compile hit and kjit_kernel_from_binary timed apart) then hit and
// load a second entry (the same kernel under another key) in the same process: again_hit and
// again_load, what the process's one-time work leaves of a hit.
//
// Beside them: the floor's own second load in its process (again_load); a paired child that
// loads the same CUBIN once more through cuModuleLoadData and once through
// kjit_kernel_from_binary in one process, order alternated (the load alone, free of the
// spread between processes); and bench_launch_client, an independent C client, when it
// lies next to this program. --load-study N: the module load, variant by variant, N
// interleaved rounds in this process (load_study).
//
//   bench_launch [--cupy results.json] [--reps N] [--load-study N] [--no-cold]
//
// The fresh-process measurements spawn this program again with --child. CUDA itself is
// initialised (cuInit, primary context, buffers) before the clock starts in every child,
// since that cost is the same whatever loads the kernel. --cupy merges the numbers written
// by bench/cupy_bench.py into the table.
#include <cjson/cJSON.h>
#include <cuda.h>
#include <dlfcn.h>
#include <stdlib.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "cuda/context.h"
#include "cuda/driver.h"
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

struct KernelSpec {
  const char* id;     // command-line name
  const char* label;  // table name
  const char* source;
  const char* name;
  bool cub;
};

const KernelSpec kSpecs[] = {
    {"empty", "empty", kEmptySource, "empty_kernel", false},
    {"saxpy", "saxpy", kSaxpySource, "saxpy", false},
    {"block_sum", "CUB BlockReduce", kCubReduceSource, "block_sum", true},
};

const KernelSpec* find_spec(const std::string& id) {
  for (const KernelSpec& s : kSpecs) {
    if (id == s.id) return &s;
  }
  return nullptr;
}

std::string cccl_dir() {
  const char* env = std::getenv("KJIT_CCCL_INCLUDE");
  if (env && *env) return env;
  return std::string(KJIT_CUDA_INCLUDE_DIR) + "/cccl";
}

double now_ms() {
  using namespace std::chrono;
  return duration<double, std::milli>(steady_clock::now().time_since_epoch()).count();
}

[[noreturn]] void die(const std::string& what) {
  std::fprintf(stderr, "bench_launch: %s\n", what.c_str());
  std::exit(1);
}

void cu_check(CUresult r, const char* what) {
  if (r != CUDA_SUCCESS) die(std::string(what) + ": " + cu::error_text(r));
}

void kj_check(kjit_status st, const char* what) {
  if (st != KJIT_OK) die(std::string(what) + ": " + kjit_last_error());
}

std::string read_bytes(const std::string& path) {
  std::string out;
  FILE* f = std::fopen(path.c_str(), "rb");
  if (!f) return out;
  char buf[1 << 16];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, f)) > 0) out.append(buf, n);
  std::fclose(f);
  return out;
}

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t m = v.size() / 2;
  return v.size() % 2 ? v[m] : 0.5 * (v[m - 1] + v[m]);
}

kjit_options* options_for(const KernelSpec& s) {
  kjit_options* o = nullptr;
  kj_check(kjit_options_create(&o), "kjit_options_create");
  if (s.cub) kj_check(kjit_options_add_include_path(o, cccl_dir().c_str()), "include path");
  return o;
}

// The same kernel under another key (one more macro), for `arch`: the second hit of a
// kjit-split child, whose process has done its one-time work already.
kjit_options* again_options(const KernelSpec& s, const char* arch) {
  kjit_options* o = options_for(s);
  kj_check(kjit_options_add(o, "-DKJIT_BENCH_AGAIN=1"), "-D");
  kj_check(kjit_options_set_target(o, arch), "set target");
  return o;
}

// Device buffers and argument values for one kernel.
struct Args {
  static constexpr int kN = 1 << 20;
  CUdeviceptr a = 0, b = 0;
  float alpha = 2.0f;
  int n = kN;
  void* ptrs[4] = {};
  size_t count = 0;
  uint32_t grid = 1, block = 1;

  explicit Args(const KernelSpec& s, int n_elems = kN) : n(n_elems) {
    if (std::strcmp(s.id, "empty") == 0) return;
    cu_check(cu::driver().cuMemAlloc(&a, size_t(n) * 4), "cuMemAlloc");
    cu_check(cu::driver().cuMemAlloc(&b, size_t(n) * 4), "cuMemAlloc");
    cu_check(cu::driver().cuMemsetD8(a, 0, size_t(n) * 4), "cuMemsetD8");
    cu_check(cu::driver().cuMemsetD8(b, 0, size_t(n) * 4), "cuMemsetD8");
    block = 256;
    grid = uint32_t((n + 255) / 256);
    if (std::strcmp(s.id, "saxpy") == 0) {
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
    if (a) cu::driver().cuMemFree(a);
    if (b) cu::driver().cuMemFree(b);
  }
};

CUcontext init_cuda() {
  CUcontext ctx = cu::primary_context(0);
  cu_check(cu::driver().cuCtxSetCurrent(ctx), "cuCtxSetCurrent");
  return ctx;
}

// ---- child: one first launch in a fresh process -------------------------------------

int child(int argc, char** argv) {
  // --child floor <kernel> <cubin file> | --child kjit <kernel> <cache dir>
  if (argc < 5) die("bad child arguments");
  const std::string mode = argv[2];
  const KernelSpec* spec = find_spec(argv[3]);
  if (!spec) die("unknown kernel");
  const std::string path = argv[4];
  init_cuda();
  Args args(*spec);
  const cu::Driver& d = cu::driver();
  cu_check(d.cuCtxSynchronize(), "sync");

  double t[4];
  t[0] = now_ms();
  if (mode == "floor" || mode == "floor-params") {
    const std::string bytes = read_bytes(path);
    if (bytes.empty()) die("cannot read " + path);
    t[1] = now_ms();
    CUmodule mod = nullptr;
    CUfunction fn = nullptr;
    cu_check(d.cuModuleLoadData(&mod, bytes.data()), "cuModuleLoadData");
    cu_check(d.cuModuleGetFunction(&fn, mod, spec->name), "cuModuleGetFunction");
    t[2] = now_ms();
    // floor-params: the parameter layout asked of the driver too, as a checked launch needs.
    // The count is learned as kjit learns it: by the query past the last parameter.
    double params = 0, params_end = 0;
    if (mode == "floor-params") {
      if (!d.cuFuncGetParamInfo) die("the driver lacks cuFuncGetParamInfo");
      size_t offset = 0, size = 0;
      for (size_t i = 0; i < args.count; ++i) {
        cu_check(d.cuFuncGetParamInfo(fn, i, &offset, &size), "cuFuncGetParamInfo");
      }
      params = now_ms() - t[2];
      if (d.cuFuncGetParamInfo(fn, args.count, &offset, &size) != CUDA_ERROR_INVALID_VALUE) {
        die("cuFuncGetParamInfo past the last parameter did not fail");
      }
      params_end = now_ms() - t[2] - params;
    }
    const double t_launch = now_ms();
    cu_check(d.cuLaunchKernel(fn, args.grid, 1, 1, args.block, 1, 1, 0, nullptr,
                              args.count ? args.ptrs : nullptr, nullptr),
             "cuLaunchKernel");
    cu_check(d.cuCtxSynchronize(), "sync");
    t[3] = now_ms();
    // A second module of the same bytes (another copy, as a second entry would be) loaded
    // in this process after its first launch: the floor of kjit-split's again_load.
    const std::string again_bytes = bytes + std::string();
    const double a0 = now_ms();
    CUmodule mod2 = nullptr;
    CUfunction fn2 = nullptr;
    cu_check(d.cuModuleLoadData(&mod2, again_bytes.data()), "cuModuleLoadData (again)");
    cu_check(d.cuModuleGetFunction(&fn2, mod2, spec->name), "cuModuleGetFunction (again)");
    const double again_load = now_ms() - a0;
    std::printf(
        "RESULT %.4f read=%.4f load=%.4f params=%.4f params_end=%.4f launch=%.4f "
        "again_load=%.4f\n",
        t[3] - t[0], t[1] - t[0], t[2] - t[1], params, params_end, t[3] - t_launch, again_load);
    d.cuModuleUnload(mod2);
    d.cuModuleUnload(mod);
    return 0;
  }
  // load-pair-raw-first / load-pair-kjit-first: after a first kjit_kernel_create and launch
  // (the process's one-time work done), the same CUBIN loaded twice more in this process,
  // once by cuModuleLoadData + get from a copy of its bytes and once by
  // kjit_kernel_from_binary of a second entry's hit (not timed), in the order named:
  // a paired comparison of the load alone, free of the spread between processes.
  if (mode == "load-pair-raw-first" || mode == "load-pair-kjit-first") {
    kjit_cache_options co = KJIT_CACHE_OPTIONS_INIT;
    co.directory = path.c_str();
    kjit_cache* cache = nullptr;
    kjit_compiler* compiler = nullptr;
    kj_check(kjit_cache_open(&co, &cache), "kjit_cache_open");
    kj_check(kjit_compiler_create(cache, 1, &compiler), "kjit_compiler_create");
    kjit_options* opts = options_for(*spec);
    kjit_kernel* k = nullptr;
    kjit_binary* log = nullptr;
    kj_check(kjit_kernel_create(compiler, spec->source, spec->name, opts, 0, 0, &k, &log),
             "kjit_kernel_create");
    kjit_launch_config cfg = KJIT_LAUNCH_CONFIG_INIT;
    cfg.grid[0] = args.grid;
    cfg.block[0] = args.block;
    kj_check(kjit_kernel_launch(k, &cfg, args.count ? args.ptrs : nullptr, args.count), "launch");
    cu_check(d.cuCtxSynchronize(), "sync");
    char arch[16] = {};
    kj_check(kjit_device_arch(0, arch, sizeof arch), "kjit_device_arch");
    kjit_options* again = again_options(*spec, arch);
    kjit_binary* bin2 = nullptr;
    kj_check(kjit_compile(compiler, spec->source, again, &bin2), "kjit_compile (again)");
    size_t size = 0;
    const void* cubin = kjit_binary_data(bin2, KJIT_OUTPUT_CUBIN, &size);
    const std::string copy(static_cast<const char*>(cubin), size);
    double raw = 0, kj = 0;
    CUmodule mod = nullptr;
    CUfunction fn = nullptr;
    kjit_kernel* k2 = nullptr;
    for (int step = 0; step < 2; ++step) {
      const bool raw_now = (step == 0) == (mode == "load-pair-raw-first");
      const double p0 = now_ms();
      if (raw_now) {
        cu_check(d.cuModuleLoadData(&mod, copy.data()), "cuModuleLoadData");
        cu_check(d.cuModuleGetFunction(&fn, mod, spec->name), "cuModuleGetFunction");
        raw = now_ms() - p0;
      } else {
        kj_check(kjit_kernel_from_binary(bin2, spec->name, 0, 0, &k2), "from_binary");
        kj = now_ms() - p0;
      }
    }
    std::printf("RESULT %.4f raw=%.4f kjit=%.4f\n", kj - raw, raw, kj);
    d.cuModuleUnload(mod);
    kjit_kernel_destroy(k2);
    kjit_binary_destroy(bin2);
    kjit_options_destroy(again);
    kjit_binary_destroy(log);
    kjit_kernel_destroy(k);
    kjit_options_destroy(opts);
    kjit_compiler_destroy(compiler);
    kjit_cache_close(cache);
    return 0;
  }
  // kjit: open the cache, kjit_kernel_create (compile-or-hit + load), launch.
  // kjit-split: the same work as kjit_compile (hit) + kjit_kernel_from_binary, timed apart.
  if (mode != "kjit" && mode != "kjit-split") die("unknown child mode");
  kjit_cache_options co = KJIT_CACHE_OPTIONS_INIT;
  co.directory = path.c_str();
  kjit_cache* cache = nullptr;
  kjit_compiler* compiler = nullptr;
  kj_check(kjit_cache_open(&co, &cache), "kjit_cache_open");
  kj_check(kjit_compiler_create(cache, 1, &compiler), "kjit_compiler_create");
  kjit_options* opts = options_for(*spec);
  t[1] = now_ms();
  kjit_kernel* k = nullptr;
  kjit_binary* log = nullptr;
  double t_hit = t[1];
  if (mode == "kjit") {
    const kjit_status st =
        kjit_kernel_create(compiler, spec->source, spec->name, opts, 0, 0, &k, &log);
    if (st != KJIT_OK) {
      die(std::string("kjit_kernel_create: ") + kjit_last_error() +
          (log ? kjit_binary_log(log) : ""));
    }
  } else {
    char arch[16] = {};
    kj_check(kjit_device_arch(0, arch, sizeof arch), "kjit_device_arch");
    kj_check(kjit_options_set_target(opts, arch), "set target");
    kj_check(kjit_compile(compiler, spec->source, opts, &log), "kjit_compile");
    t_hit = now_ms();
    kj_check(kjit_kernel_from_binary(log, spec->name, 0, 0, &k), "kjit_kernel_from_binary");
  }
  t[2] = now_ms();
  kjit_launch_config cfg = KJIT_LAUNCH_CONFIG_INIT;
  cfg.grid[0] = args.grid;
  cfg.block[0] = args.block;
  kj_check(kjit_kernel_launch(k, &cfg, args.count ? args.ptrs : nullptr, args.count), "launch");
  cu_check(d.cuCtxSynchronize(), "sync");
  t[3] = now_ms();
  // kjit-split: then a second entry's hit and load in this process, timed apart.
  double again_hit = 0, again_load = 0;
  if (mode == "kjit-split") {
    char arch[16] = {};
    kj_check(kjit_device_arch(0, arch, sizeof arch), "kjit_device_arch");
    kjit_options* again = again_options(*spec, arch);
    kjit_binary* bin2 = nullptr;
    kjit_kernel* k2 = nullptr;
    const double a0 = now_ms();
    kj_check(kjit_compile(compiler, spec->source, again, &bin2), "kjit_compile (again)");
    const double a1 = now_ms();
    kj_check(kjit_kernel_from_binary(bin2, spec->name, 0, 0, &k2), "from_binary (again)");
    again_hit = a1 - a0;
    again_load = now_ms() - a1;
    kjit_kernel_destroy(k2);
    kjit_binary_destroy(bin2);
    kjit_options_destroy(again);
  }
  kjit_cache_stats stats{};
  stats.struct_size = sizeof stats;
  kjit_cache_stats_get(cache, &stats);
  if (mode == "kjit") {
    std::printf("RESULT %.4f open=%.4f create=%.4f launch=%.4f disk_hits=%llu compiles=%llu\n",
                t[3] - t[0], t[1] - t[0], t[2] - t[1], t[3] - t[2],
                static_cast<unsigned long long>(stats.disk_hits),
                static_cast<unsigned long long>(stats.compiles));
  } else {
    std::printf(
        "RESULT %.4f open=%.4f hit=%.4f load=%.4f launch=%.4f again_hit=%.4f again_load=%.4f "
        "disk_hits=%llu\n",
        t[3] - t[0], t[1] - t[0], t_hit - t[1], t[2] - t_hit, t[3] - t[2], again_hit, again_load,
        static_cast<unsigned long long>(stats.disk_hits));
  }
  kjit_binary_destroy(log);
  kjit_kernel_destroy(k);
  kjit_options_destroy(opts);
  kjit_compiler_destroy(compiler);
  kjit_cache_close(cache);
  return 0;
}

std::string fmt(double v, int digits = 2) {
  char b[64];
  std::snprintf(b, sizeof b, "%.*f", digits, v);
  return b;
}

struct ChildResult {
  double total = 0;
  std::map<std::string, double> phases;  // name=value pairs after the total
};

// Medians of every phase over several children, "name=median" joined by spaces.
std::string phase_medians(const std::vector<ChildResult>& runs) {
  std::map<std::string, std::vector<double>> all;
  for (const ChildResult& r : runs) {
    for (const auto& [name, v] : r.phases) all[name].push_back(v);
  }
  std::string out;
  for (const auto& [name, values] : all) {
    const bool count = name == "disk_hits" || name == "compiles";
    out += (out.empty() ? "" : " ") + name + "=" + fmt(median(values), count ? 0 : 3);
  }
  return out;
}

std::string self_path() {
  char buf[4096];
  const ssize_t n = readlink("/proc/self/exe", buf, sizeof buf - 1);
  if (n <= 0) die("readlink /proc/self/exe");
  buf[n] = 0;
  return buf;
}

// bench_launch_client beside this program ("" when it is not there).
std::string client_path() {
  std::string self = self_path();
  const std::string path = self.substr(0, self.rfind('/') + 1) + "bench_launch_client";
  return access(path.c_str(), X_OK) == 0 ? path : std::string();
}

ChildResult spawn(const std::string& mode, const KernelSpec& s, const std::string& path) {
  std::string cmd = "'" + self_path() + "' --child " + mode + " " + s.id + " '" + path + "'";
  if (mode == "client" || mode == "client-prewarm") {
    cmd = "'" + client_path() + "' '" + path + "' " + s.id;
    if (s.cub) cmd += " '" + cccl_dir() + "'";
    if (mode == "client-prewarm") cmd += " --prewarm";
  }
  FILE* p = popen(cmd.c_str(), "r");
  if (!p) die("popen " + cmd);
  std::string out;
  char line[1024];
  while (std::fgets(line, sizeof line, p)) out += line;
  const int rc = pclose(p);
  const size_t at = out.find("RESULT ");
  if (rc != 0 || at == std::string::npos) die("child failed (" + cmd + "):\n" + out);
  ChildResult r;
  const size_t eol = out.find('\n', at);
  std::istringstream fields(out.substr(at + 7, eol == std::string::npos ? eol : eol - at - 7));
  fields >> r.total;
  std::string field;
  while (fields >> field) {
    const size_t eq = field.find('=');
    if (eq != std::string::npos) r.phases[field.substr(0, eq)] = std::atof(field.c_str() + eq + 1);
  }
  return r;
}

std::string make_temp_dir(const std::string& root, const std::string& name) {
  std::string tmpl = root + "/" + name + "-XXXXXX";
  if (!mkdtemp(tmpl.data())) die("mkdtemp");
  return tmpl;
}

// ---- the module load, variant by variant, in one process ---------------------------------

// cuLibraryLoadData and friends, asked of the driver kjit opened (kjit's table lacks them).
struct LibraryApi {
  decltype(&::cuLibraryLoadData) load = nullptr;
  decltype(&::cuLibraryUnload) unload = nullptr;
  decltype(&::cuLibraryGetKernel) get_kernel = nullptr;
  decltype(&::cuKernelGetFunction) get_function = nullptr;
};

LibraryApi library_api() {
  LibraryApi api;
  void* h = dlopen(cu::driver().library.c_str(), RTLD_NOW | RTLD_NOLOAD);
  if (!h) return api;
  api.load = reinterpret_cast<decltype(api.load)>(dlsym(h, "cuLibraryLoadData"));
  api.unload = reinterpret_cast<decltype(api.unload)>(dlsym(h, "cuLibraryUnload"));
  api.get_kernel = reinterpret_cast<decltype(api.get_kernel)>(dlsym(h, "cuLibraryGetKernel"));
  api.get_function = reinterpret_cast<decltype(api.get_function)>(dlsym(h, "cuKernelGetFunction"));
  return api;
}

// Loads the same CUBIN again and again in this process, each variant in turn (the order
// rotated every round), and unloads it after each (not timed): where a load's time goes
// when nothing else differs. `bin` is an entry of its own (no other kernel handle holds
// its module, which kjit's module registry would share). Prints one table per kernel.
void load_study(const KernelSpec& s, const kjit_binary* bin, int rounds) {
  const cu::Driver& d = cu::driver();
  size_t size = 0;
  const char* kjit_bytes =
      static_cast<const char*>(kjit_binary_data(bin, KJIT_OUTPUT_CUBIN, &size));
  const std::string copy(kjit_bytes, size);
  void* aligned = nullptr;
  if (posix_memalign(&aligned, 4096, size) != 0) die("posix_memalign");
  std::memcpy(aligned, kjit_bytes, size);
  const LibraryApi lib = library_api();
  Args args(s, 4096);
  kjit_launch_config cfg = KJIT_LAUNCH_CONFIG_INIT;
  cfg.grid[0] = args.grid;
  cfg.block[0] = args.block;
  void** argv_ptrs = args.count ? args.ptrs : nullptr;

  struct Variant {
    const char* name;
    std::vector<double> ms;
  };
  std::vector<Variant> v = {
      {"raw: cuModuleLoadData + get, bytes in a std::string (the floor)", {}},
      {"raw: the same from kjit_binary_data's buffer", {}},
      {"raw: the same from a page-aligned copy", {}},
      {"raw + cuFuncGetParamInfo of each parameter and one past the last", {}},
      {"raw + cuFuncGetAttribute(NUM_REGS)", {}},
      {"raw + launch + sync", {}},
      {"cuLibraryLoadData + cuLibraryGetKernel + cuKernelGetFunction", {}},
      {"kjit_kernel_from_binary (the same entry each round: its parameter layout remembered)", {}},
      {"kjit_kernel_from_binary + launch + sync", {}},
  };
  auto raw_load = [&](const void* bytes, CUmodule* m, CUfunction* f) {
    cu_check(d.cuModuleLoadData(m, bytes), "cuModuleLoadData");
    cu_check(d.cuModuleGetFunction(f, *m, s.name), "cuModuleGetFunction");
  };
  auto run = [&](size_t which) {
    CUmodule m = nullptr;
    CUfunction f = nullptr;
    kjit_kernel* k = nullptr;
    const double t0 = now_ms();
    switch (which) {
      case 0:
        raw_load(copy.data(), &m, &f);
        break;
      case 1:
        raw_load(kjit_bytes, &m, &f);
        break;
      case 2:
        raw_load(aligned, &m, &f);
        break;
      case 3: {
        raw_load(copy.data(), &m, &f);
        size_t off = 0, sz = 0;
        for (size_t i = 0; i < args.count; ++i) {
          cu_check(d.cuFuncGetParamInfo(f, i, &off, &sz), "cuFuncGetParamInfo");
        }
        if (d.cuFuncGetParamInfo(f, args.count, &off, &sz) != CUDA_ERROR_INVALID_VALUE) {
          die("cuFuncGetParamInfo past the last parameter did not fail");
        }
        break;
      }
      case 4: {
        raw_load(copy.data(), &m, &f);
        int regs = 0;
        cu_check(d.cuFuncGetAttribute(&regs, CU_FUNC_ATTRIBUTE_NUM_REGS, f), "NUM_REGS");
        break;
      }
      case 5:
        raw_load(copy.data(), &m, &f);
        cu_check(
            d.cuLaunchKernel(f, args.grid, 1, 1, args.block, 1, 1, 0, nullptr, argv_ptrs, nullptr),
            "cuLaunchKernel");
        cu_check(d.cuCtxSynchronize(), "sync");
        break;
      case 6: {
        if (!lib.load) return;
        CUlibrary l = nullptr;
        CUkernel kern = nullptr;
        cu_check(lib.load(&l, copy.data(), nullptr, nullptr, 0, nullptr, nullptr, 0),
                 "cuLibraryLoadData");
        cu_check(lib.get_kernel(&kern, l, s.name), "cuLibraryGetKernel");
        cu_check(lib.get_function(&f, kern), "cuKernelGetFunction");
        v[which].ms.push_back(now_ms() - t0);
        lib.unload(l);
        return;
      }
      case 7:
        kj_check(kjit_kernel_from_binary(bin, s.name, 0, 0, &k), "from_binary");
        break;
      case 8:
        kj_check(kjit_kernel_from_binary(bin, s.name, 0, 0, &k), "from_binary");
        kj_check(kjit_kernel_launch(k, &cfg, argv_ptrs, args.count), "launch");
        cu_check(d.cuCtxSynchronize(), "sync");
        break;
    }
    v[which].ms.push_back(now_ms() - t0);
    if (m) d.cuModuleUnload(m);
    if (k) kjit_kernel_destroy(k);
  };
  const size_t n = v.size();
  for (int r = 0; r < rounds + 2; ++r) {
    for (size_t i = 0; i < n; ++i) run((i + size_t(r)) % n);
    if (r < 2) {
      for (Variant& x : v) x.ms.clear();  // warm-up rounds
    }
  }
  std::printf("\n### Module load, %s (CUBIN %zu bytes), one process, %d interleaved rounds\n\n",
              s.label, size, rounds);
  std::printf(
      "| variant | median (ms) | min (ms) | - floor median (ms) |\n| --- | ---: | ---: | ---: |\n");
  const double floor_ms = median(v[0].ms);
  for (size_t i = 0; i < n; ++i) {
    if (v[i].ms.empty()) {
      std::printf("| %s | - | - | - |\n", v[i].name);
      continue;
    }
    std::printf("| %s | %.3f | %.3f | %+.3f |\n", v[i].name, median(v[i].ms),
                *std::min_element(v[i].ms.begin(), v[i].ms.end()), median(v[i].ms) - floor_ms);
  }
  free(aligned);
}

// ---- parent ------------------------------------------------------------------------------

struct Row {
  std::string kernel, measure, kjit, floor, ratio, target, cupy;
};

std::map<std::string, double> load_cupy(const std::string& path, std::string* version) {
  std::map<std::string, double> out;
  const std::string text = read_bytes(path);
  cJSON* root = cJSON_Parse(text.c_str());
  if (!root) {
    std::fprintf(stderr, "bench_launch: cannot parse %s; CuPy column left empty\n", path.c_str());
    return out;
  }
  cJSON* v = cJSON_GetObjectItem(root, "cupy_version");
  if (cJSON_IsString(v)) *version = v->valuestring;
  cJSON* kernels = cJSON_GetObjectItem(root, "kernels");
  cJSON* k = nullptr;
  cJSON_ArrayForEach(k, kernels) {
    cJSON* m = nullptr;
    cJSON_ArrayForEach(m, k) {
      if (cJSON_IsNumber(m)) out[std::string(k->string) + "." + m->string] = m->valuedouble;
    }
  }
  cJSON_Delete(root);
  return out;
}

int parent(int argc, char** argv) {
  std::string cupy_path;
  int reps = 7;
  int study_rounds = 0;  // > 0: the module load study (load_study) for saxpy and CUB
  bool cold = true;      // false: no cold-cache children
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--cupy" && i + 1 < argc) {
      cupy_path = argv[++i];
    } else if (a == "--reps" && i + 1 < argc) {
      reps = std::max(1, std::atoi(argv[++i]));
    } else if (a == "--load-study" && i + 1 < argc) {
      study_rounds = std::max(1, std::atoi(argv[++i]));
    } else if (a == "--no-cold") {
      cold = false;
    } else {
      die("usage: bench_launch [--cupy results.json] [--reps N] [--load-study ROUNDS] [--no-cold]");
    }
  }
  int count = 0;
  if (kjit_device_count(&count) != KJIT_OK || count == 0) {
    std::printf("bench_launch: skipped (%s)\n",
                count == 0 && !*kjit_last_error() ? "no CUDA device" : kjit_last_error());
    return 0;
  }
  init_cuda();
  const cu::Driver& d = cu::driver();
  char dev_name[256] = {}, arch[16] = {};
  kjit_device_name(0, dev_name, sizeof dev_name);
  kjit_device_arch(0, arch, sizeof arch);
  const char* nvrtc = "?";
  kjit_nvrtc_version(&nvrtc);

  const char* tmp_env = std::getenv("TMPDIR");
  const std::string root = make_temp_dir(tmp_env && *tmp_env ? tmp_env : "/tmp", "kjit-bench");
  const std::string warm_dir = root + "/warm-cache";

  std::string cupy_version;
  std::map<std::string, double> cupy;
  if (!cupy_path.empty()) cupy = load_cupy(cupy_path, &cupy_version);
  auto cupy_cell = [&](const std::string& key, int digits) {
    auto it = cupy.find(key);
    return it == cupy.end() ? std::string("-") : fmt(it->second, digits);
  };

  std::vector<Row> rows;
  std::vector<std::string> notes;

  // Warm the cache (this process compiles; children later hit the disk tier).
  kjit_cache_options co = KJIT_CACHE_OPTIONS_INIT;
  co.directory = warm_dir.c_str();
  kjit_cache* cache = nullptr;
  kjit_compiler* compiler = nullptr;
  kj_check(kjit_cache_open(&co, &cache), "kjit_cache_open");
  kj_check(kjit_compiler_create(cache, 0, &compiler), "kjit_compiler_create");
  // Compiled in this process: no compile worker keeps the database open for the children
  // (bench_hit measures that case too), so each child is the database's first connection.
  kj_check(kjit_compiler_set_compile_mode(compiler, KJIT_COMPILE_MODE_INPROCESS),
           "kjit_compiler_set_compile_mode");

  CUstream stream = nullptr;
  cu_check(d.cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING), "cuStreamCreate");

  for (const KernelSpec& s : kSpecs) {
    kjit_options* opts = options_for(s);
    kjit_kernel* k = nullptr;
    kjit_binary* log = nullptr;
    if (kjit_kernel_create(compiler, s.source, s.name, opts, 0, 0, &k, &log) != KJIT_OK) {
      die(std::string("kjit_kernel_create ") + s.id + ": " + kjit_last_error() +
          (log ? kjit_binary_log(log) : ""));
    }
    {  // the second entry of the kjit-split children
      kjit_options* again = again_options(s, arch);
      kjit_binary* b = nullptr;
      kj_check(kjit_compile(compiler, s.source, again, &b), "kjit_compile (again)");
      kjit_binary_destroy(b);
      kjit_options_destroy(again);
    }
    // The very same CUBIN, for the raw driver path and the floor.
    kjit_binary* bin = nullptr;
    kj_check(kjit_options_set_target(opts, arch), "set target");
    kj_check(kjit_compile(compiler, s.source, opts, &bin), "kjit_compile");
    size_t cubin_size = 0;
    const void* cubin = kjit_binary_data(bin, KJIT_OUTPUT_CUBIN, &cubin_size);
    if (!cubin || cubin_size == 0) die("no CUBIN");
    const std::string cubin_path = root + "/" + s.id + ".cubin";
    {
      FILE* f = std::fopen(cubin_path.c_str(), "wb");
      if (!f || std::fwrite(cubin, 1, cubin_size, f) != cubin_size) die("write " + cubin_path);
      std::fclose(f);
    }
    if (study_rounds > 0 && std::strcmp(s.id, "empty") != 0) {
      kjit_options* own = again_options(s, arch);
      kj_check(kjit_options_add(own, "-DKJIT_BENCH_STUDY=1"), "-D");
      kjit_binary* study_bin = nullptr;
      kj_check(kjit_compile(compiler, s.source, own, &study_bin), "kjit_compile (study)");
      load_study(s, study_bin, study_rounds);
      kjit_binary_destroy(study_bin);
      kjit_options_destroy(own);
    }
    CUmodule mod = nullptr;
    CUfunction fn = nullptr;
    cu_check(d.cuModuleLoadData(&mod, cubin), "cuModuleLoadData");
    cu_check(d.cuModuleGetFunction(&fn, mod, s.name), "cuModuleGetFunction");

    // (1) enqueue overhead. Small problem so the GPU keeps up; batches separated by syncs
    // so the queue never fills; raw and kjit batches interleaved.
    if (std::strcmp(s.id, "block_sum") != 0) {
      Args args(s, 4096);
      kjit_launch_config cfg = KJIT_LAUNCH_CONFIG_INIT;
      cfg.grid[0] = args.grid;
      cfg.block[0] = args.block;
      cfg.stream = stream;
      void** argv_ptrs = args.count ? args.ptrs : nullptr;
      size_t packed_size = 0;
      kj_check(kjit_kernel_param_buffer_size(k, &packed_size), "param buffer size");
      std::vector<unsigned char> packed(packed_size + 1);
      for (size_t i = 0; i < args.count; ++i) {
        size_t off = 0, size = 0;
        kj_check(kjit_kernel_param_info(k, i, &off, &size), "param info");
        std::memcpy(packed.data() + off, args.ptrs[i], size);
      }
      const int batch = 200, batches = 150;
      std::vector<double> raw_us, kjit_us, packed_us;
      for (int rep = 0; rep < batches + 5; ++rep) {
        cu_check(d.cuStreamSynchronize(stream), "sync");
        double t0 = now_ms();
        for (int i = 0; i < batch; ++i) {
          const CUresult r = d.cuLaunchKernel(fn, cfg.grid[0], 1, 1, cfg.block[0], 1, 1, 0, stream,
                                              argv_ptrs, nullptr);
          if (r != CUDA_SUCCESS) cu_check(r, "cuLaunchKernel");
        }
        double t1 = now_ms();
        cu_check(d.cuStreamSynchronize(stream), "sync");
        double t2 = now_ms();
        for (int i = 0; i < batch; ++i) {
          if (kjit_kernel_launch(k, &cfg, argv_ptrs, args.count) != KJIT_OK) {
            kj_check(KJIT_ERROR_INTERNAL, "kjit_kernel_launch");
          }
        }
        double t3 = now_ms();
        cu_check(d.cuStreamSynchronize(stream), "sync");
        double t4 = now_ms();
        for (int i = 0; i < batch; ++i) {
          if (kjit_kernel_launch_packed(k, &cfg, packed.data(), packed_size) != KJIT_OK) {
            kj_check(KJIT_ERROR_INTERNAL, "kjit_kernel_launch_packed");
          }
        }
        double t5 = now_ms();
        if (rep < 5) continue;  // warm-up
        raw_us.push_back((t1 - t0) * 1000.0 / batch);
        kjit_us.push_back((t3 - t2) * 1000.0 / batch);
        packed_us.push_back((t5 - t4) * 1000.0 / batch);
      }
      cu_check(d.cuStreamSynchronize(stream), "sync");
      const double raw = median(raw_us), kj = median(kjit_us), pk = median(packed_us);
      rows.push_back({s.label, "launch enqueue, void** args (us)", fmt(kj),
                      fmt(raw) + " (cuLaunchKernel)", fmt(kj / raw) + "x", "<= 1.10x",
                      cupy_cell(std::string(s.id) + ".enqueue_us", 2)});
      if (args.count) {
        rows.push_back({s.label, "launch enqueue, packed buffer (us)", fmt(pk),
                        fmt(raw) + " (cuLaunchKernel)", fmt(pk / raw) + "x", "<= 1.10x", "-"});
      }
    }

    if (std::strcmp(s.id, "empty") != 0) {
      // (2) and (3): first completed launch in a fresh process.
      std::vector<ChildResult> floors, floor_params, warms, splits, colds, clients, prewarmed,
          pairs;
      const bool with_client = !client_path().empty();
      for (int r = 0; r < reps; ++r) {
        floors.push_back(spawn("floor", s, cubin_path));
        floor_params.push_back(spawn("floor-params", s, cubin_path));
        warms.push_back(spawn("kjit", s, warm_dir));
        splits.push_back(spawn("kjit-split", s, warm_dir));
        if (with_client) {
          clients.push_back(spawn("client", s, warm_dir));
          prewarmed.push_back(spawn("client-prewarm", s, warm_dir));
        }
        pairs.push_back(spawn(r % 2 ? "load-pair-kjit-first" : "load-pair-raw-first", s, warm_dir));
      }
      const int cold_reps = cold ? std::max(1, std::min(reps, 3)) : 0;
      for (int r = 0; r < cold_reps; ++r) {
        colds.push_back(spawn("kjit", s, make_temp_dir(root, std::string("cold-") + s.id)));
      }
      auto totals = [](const std::vector<ChildResult>& v) {
        std::vector<double> t;
        for (const ChildResult& c : v) t.push_back(c.total);
        return median(t);
      };
      const double fl = totals(floors), wm = totals(warms), cd = totals(colds);
      rows.push_back({s.label, "first completed launch, fresh process, warm cache (ms)", fmt(wm, 3),
                      fmt(fl, 3) + " (read+load+get+launch+sync)", fmt(wm / fl) + "x", "<= 1.25x",
                      cupy_cell(std::string(s.id) + ".warm_ms", 2)});
      rows.push_back({s.label,
                      "first completed launch, fresh process, warm cache: kjit - floor (ms)",
                      fmt(wm - fl, 3), "0", "-", "<= 0.25 ms", "-"});
      rows.push_back({s.label,
                      "a later load in the same fresh process, paired (order alternated): "
                      "kjit_kernel_from_binary - (cuModuleLoadData + get) (ms)",
                      fmt(totals(pairs), 3), phase_medians(pairs), "-", "-", "-"});
      if (with_client) {
        const double cl = totals(clients), pw = totals(prewarmed);
        rows.push_back({s.label,
                        "the same, independent C client (bench_launch_client): client - floor "
                        "(ms)",
                        fmt(cl - fl, 3), fmt(cl, 3) + " client total", "-", "<= 0.25 ms", "-"});
        rows.push_back({s.label,
                        "the same, the client with kjit's driver opened before its clock "
                        "(--prewarm) - floor (ms)",
                        fmt(pw - fl, 3), fmt(pw, 3) + " client total", "-", "-", "-"});
        notes.push_back(std::string(s.label) +
                        ": independent client, median phases in ms: " + phase_medians(clients) +
                        "; with --prewarm: " + phase_medians(prewarmed) + ".");
      }
      const double fp = totals(floor_params);
      rows.push_back({s.label,
                      "the same, floor with the parameter layout asked of the driver "
                      "(read+load+get+cuFuncGetParamInfo to past the last+launch+sync) (ms)",
                      fmt(wm - fp, 3), fmt(fp, 3), "-", "-", "-"});
      rows.push_back({s.label, "first completed launch, fresh process, cold cache (ms)", fmt(cd, 1),
                      fmt(fl, 3), fmt(cd / fl, 0) + "x", "-",
                      cupy_cell(std::string(s.id) + ".cold_ms", 1)});
      notes.push_back(std::string(s.label) + " (CUBIN " + std::to_string(cubin_size) +
                      " bytes), median phases in ms. floor: " + phase_medians(floors) +
                      ". floor with the parameter layout: " + phase_medians(floor_params) +
                      ". kjit warm: " + phase_medians(warms) +
                      ". kjit warm, split (kjit_compile hit + kjit_kernel_from_binary): " +
                      phase_medians(splits) + " total=" + fmt(totals(splits), 3) +
                      ". kjit cold: " + phase_medians(colds) + ".");
    }

    d.cuModuleUnload(mod);
    kjit_binary_destroy(bin);
    kjit_binary_destroy(log);
    kjit_kernel_destroy(k);
    kjit_options_destroy(opts);
  }
  d.cuStreamDestroy(stream);
  kjit_compiler_destroy(compiler);
  kjit_cache_close(cache);

  int driver = 0;
  kjit_driver_version(&driver);
  std::printf("\n## Launch\n\n");
  std::printf(
      "Device: %s (%s), CUDA driver %d, NVRTC %s, kjit %s%s%s; medians of %d fresh "
      "processes (cold: %d).\n\n",
      dev_name, arch, driver, nvrtc, kjit_version_string(), cupy_version.empty() ? "" : ", CuPy ",
      cupy_version.c_str(), reps, std::max(1, std::min(reps, 3)));
  std::printf(
      "| kernel | measurement | kjit | floor / raw driver | kjit / floor | target | CuPy |\n");
  std::printf("| --- | --- | ---: | --- | ---: | --- | ---: |\n");
  for (const Row& r : rows) {
    std::printf("| %s | %s | %s | %s | %s | %s | %s |\n", r.kernel.c_str(), r.measure.c_str(),
                r.kjit.c_str(), r.floor.c_str(), r.ratio.c_str(), r.target.c_str(), r.cupy.c_str());
  }
  std::printf("\n");
  for (const std::string& n : notes) std::printf("- %s\n", n.c_str());
  const std::string rm = "rm -rf '" + root + "'";
  if (std::system(rm.c_str()) != 0) std::fprintf(stderr, "could not remove %s\n", root.c_str());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc > 1 && std::strcmp(argv[1], "--child") == 0) return child(argc, argv);
  return parent(argc, argv);
}
