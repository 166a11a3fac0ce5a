// Two GPUs in one process: kernels for both devices from one compile, launches that stay in
// each device's primary context whatever context the calling thread has, threads driving
// both devices at once, GEMM handles per device (workspaces, plans shared through the cache
// only where the validators allow), device ordinals that do not exist and
// CUDA_VISIBLE_DEVICES reordering (in child processes), peer access enabled by the caller,
// and a primary-context reset on device 1 while device 0 keeps launching.
// Every test skips with the reason when no driver or fewer than two devices are present.
#include <gtest/gtest.h>

#include <dlfcn.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <climits>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <type_traits>
#include <vector>

#include "api/handles.h"
#include "blas/gemm.h"
#include "blas/plan.h"
#include "cuda/context.h"
#include "cuda/driver.h"
#include "kernel/module_registry.h"
#include "kjit/kjit.h"
#include "support/cuda_checks.h"
#include "support/test_support.h"

namespace {

namespace cu = kjit::cuda;

const cu::Driver& D() { return cu::driver(); }

std::string last_error() { return kjit_last_error(); }

// KJIT_MULTI_GPU_NO_GEMM=1 leaves GEMM out (for a host whose cuBLASLt cannot be used).
bool gemm_left_out() {
  const char* env = std::getenv("KJIT_MULTI_GPU_NO_GEMM");
  return env && *env && std::string(env) != "0";
}

#define SKIP_IF_NO_GEMM() \
  if (gemm_left_out()) GTEST_SKIP() << "KJIT_MULTI_GPU_NO_GEMM is set (GEMM needs cuBLASLt on a GPU)"

bool contains(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

// Non-empty reason when this process cannot see two CUDA devices.
std::string two_gpus_unavailable_reason() {
  const std::string why = kjit::test::gpu_unavailable_reason();
  if (!why.empty()) return why;
  int count = 0;
  if (kjit_device_count(&count) != KJIT_OK) return std::string("kjit_device_count: ") + last_error();
  if (count < 2) return "needs two CUDA devices; this machine has " + std::to_string(count);
  return "";
}

// Driver entry points only these tests need, from the library kjit itself opened: through
// cuGetProcAddress_v2 for the ABI version of the signatures below (as kjit resolves its
// own), else by symbol. A test that needs one asserts that it was found.
struct Extra {
  CUresult (*ctx_create)(CUcontext*, unsigned, CUdevice) = nullptr;  // the 3.2-12.4 form
  CUresult (*ctx_destroy)(CUcontext) = nullptr;
  CUresult (*enable_peer)(CUcontext, unsigned) = nullptr;
  CUresult (*disable_peer)(CUcontext) = nullptr;
  CUresult (*can_access_peer)(int*, CUdevice, CUdevice) = nullptr;
  CUresult (*pointer_attribute)(void*, CUpointer_attribute, CUdeviceptr) = nullptr;
};

const Extra& extra() {
  static const Extra e = [] {
    Extra x;
    void* lib = dlopen(D().library.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!lib) return x;
    using GetProc = CUresult (*)(const char*, void**, int, cuuint64_t,
                                 CUdriverProcAddressQueryResult*);
    const auto get_proc = reinterpret_cast<GetProc>(dlsym(lib, "cuGetProcAddress_v2"));
    const auto get = [&](auto& fn, const char* name, int version, const char* symbol) {
      void* p = nullptr;
      CUdriverProcAddressQueryResult found = CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
      for (int v : {version, 12000}) {
        if (!p && get_proc &&
            (get_proc(name, &p, v, CU_GET_PROC_ADDRESS_LEGACY_STREAM, &found) != CUDA_SUCCESS ||
             found != CU_GET_PROC_ADDRESS_SUCCESS)) {
          p = nullptr;
        }
      }
      if (!p) p = dlsym(lib, symbol);
      fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(p);
    };
    get(x.ctx_create, "cuCtxCreate", 3020, "cuCtxCreate_v2");
    get(x.ctx_destroy, "cuCtxDestroy", 4000, "cuCtxDestroy_v2");
    get(x.enable_peer, "cuCtxEnablePeerAccess", 4000, "cuCtxEnablePeerAccess");
    get(x.disable_peer, "cuCtxDisablePeerAccess", 4000, "cuCtxDisablePeerAccess");
    get(x.can_access_peer, "cuDeviceCanAccessPeer", 4000, "cuDeviceCanAccessPeer");
    get(x.pointer_attribute, "cuPointerGetAttribute", 4000, "cuPointerGetAttribute");
    return x;
  }();
  return e;
}

CUcontext current_context() {
  CUcontext c = reinterpret_cast<CUcontext>(0x1);
  if (D().cuCtxGetCurrent(&c) != CUDA_SUCCESS) return reinterpret_cast<CUcontext>(0x1);
  return c;
}

unsigned long long id_of(CUcontext ctx) {
  unsigned long long id = 0;
  return cu::context_id(ctx, &id) ? id : 0;
}

// Device memory in a given context (not the caller's current one).
struct DevBuf {
  CUcontext ctx = nullptr;
  CUdeviceptr ptr = 0;
  size_t bytes = 0;
  DevBuf(CUcontext c, size_t b) : ctx(c), bytes(b) {
    cu::ScopedContext scope(ctx);
    const CUresult r = D().cuMemAlloc(&ptr, b);
    EXPECT_EQ(r, CUDA_SUCCESS) << "cuMemAlloc: " << cu::error_text(r);
  }
  ~DevBuf() {
    if (!ptr) return;
    cu::ScopedContext scope(ctx);
    D().cuMemFree(ptr);
  }
  DevBuf(const DevBuf&) = delete;
  DevBuf& operator=(const DevBuf&) = delete;
  // The context was reset: the memory went with it and must not be freed.
  void forget() { ptr = 0; }
  void upload(const void* host) const {
    cu::ScopedContext scope(ctx);
    const CUresult r = D().cuMemcpyHtoD(ptr, host, bytes);
    EXPECT_EQ(r, CUDA_SUCCESS) << "cuMemcpyHtoD: " << cu::error_text(r);
  }
  void download(void* host) const {
    cu::ScopedContext scope(ctx);
    const CUresult r = D().cuMemcpyDtoH(host, ptr, bytes);
    EXPECT_EQ(r, CUDA_SUCCESS) << "cuMemcpyDtoH: " << cu::error_text(r);
  }
};

// A non-blocking stream of a given context.
struct Stream {
  CUcontext ctx = nullptr;
  CUstream s = nullptr;
  explicit Stream(CUcontext c) : ctx(c) {
    cu::ScopedContext scope(ctx);
    const CUresult r = D().cuStreamCreate(&s, CU_STREAM_NON_BLOCKING);
    EXPECT_EQ(r, CUDA_SUCCESS) << "cuStreamCreate: " << cu::error_text(r);
  }
  ~Stream() {
    if (!s) return;
    cu::ScopedContext scope(ctx);
    D().cuStreamDestroy(s);
  }
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;
  CUresult sync() const { return D().cuStreamSynchronize(s); }
};

CUresult sync_context(CUcontext ctx) {
  cu::ScopedContext scope(ctx);
  return D().cuCtxSynchronize();
}

std::vector<float> random_floats(size_t n, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-4.0f, 4.0f);
  std::vector<float> v(n);
  for (float& f : v) f = dist(rng);
  return v;
}

// Number of elements of `got` that differ from a * x + y0 (computed as the device does).
size_t saxpy_mismatches(float a, const std::vector<float>& x, const std::vector<float>& y0,
                        const std::vector<float>& got, std::string* first) {
  size_t bad = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    const float want = a * x[i] + y0[i];
    const float tol = 1e-5f * std::fabs(want) + 1e-5f;
    if (!(std::fabs(got[i] - want) <= tol) && bad++ == 0 && first) {
      *first = "[" + std::to_string(i) + "] got " + std::to_string(got[i]) + " want " +
               std::to_string(want);
    }
  }
  return bad;
}

// saxpy (a, x, y, n) launched with `k` on `stream` (NULL: the legacy stream of the
// kernel's context) with buffers in `ctx`; checked against the CPU. Returns "" or what
// went wrong.
std::string run_saxpy(kjit_kernel* k, CUcontext ctx, size_t n, CUstream stream, unsigned seed) {
  const float a = 1.75f;
  const std::vector<float> x = random_floats(n, seed), y0 = random_floats(n, seed + 1);
  DevBuf dx(ctx, n * sizeof(float)), dy(ctx, n * sizeof(float));
  dx.upload(x.data());
  dy.upload(y0.data());
  kjit_launch_config cfg = KJIT_LAUNCH_CONFIG_INIT;
  cfg.block[0] = 256;
  cfg.grid[0] = static_cast<uint32_t>((n + 255) / 256);
  cfg.stream = stream;
  int count = static_cast<int>(n);
  void* args[] = {const_cast<float*>(&a), &dx.ptr, &dy.ptr, &count};
  if (kjit_kernel_launch(k, &cfg, args, 4) != KJIT_OK) return "launch: " + last_error();
  const CUresult r = stream ? D().cuStreamSynchronize(stream) : sync_context(ctx);
  if (r != CUDA_SUCCESS) return "synchronize: " + cu::error_text(r);
  std::vector<float> got(n);
  dy.download(got.data());
  std::string first;
  const size_t bad = saxpy_mismatches(a, x, y0, got, &first);
  if (bad) return std::to_string(bad) + " of " + std::to_string(n) + " wrong, e.g. " + first;
  return "";
}

kjit_cache_stats cache_stats(kjit_cache* cache) {
  kjit_cache_stats s{};
  s.struct_size = sizeof s;
  EXPECT_EQ(kjit_cache_stats_get(cache, &s), KJIT_OK) << last_error();
  return s;
}

kjit_gemm_stats gemm_stats(const kjit_gemm* g) {
  kjit_gemm_stats s{};
  s.struct_size = sizeof s;
  EXPECT_EQ(kjit_gemm_stats_get(g, &s), KJIT_OK) << last_error();
  return s;
}

// ---- GEMM with an exact answer ---------------------------------------------------------

uint16_t f32_to_bf16(float f) {  // exact for the small integers used here
  uint32_t x = 0;
  std::memcpy(&x, &f, 4);
  return uint16_t(x >> 16);
}

struct GemmCase {
  int64_t m = 64, n = 64, k = 64;
  int32_t type = KJIT_GEMM_F32;  // A and B; D is always f32
};

// Row-major D = A * B with A, B holding integers in [-2, 2] (exact in f32 and bf16, and
// every sum of products is an exact f32): D must equal the CPU's answer bit for bit.
// Buffers live in `ctx`; returns "" or what went wrong.
std::string run_gemm_exact(kjit_gemm* g, CUcontext ctx, const GemmCase& c, CUstream stream,
                           unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> small(-2, 2);
  std::vector<int> a(size_t(c.m * c.k)), b(size_t(c.k * c.n));
  for (int& v : a) v = small(rng);
  for (int& v : b) v = small(rng);
  const size_t es = c.type == KJIT_GEMM_F32 ? 4 : 2;
  std::vector<uint8_t> ha(a.size() * es), hb(b.size() * es);
  const auto pack = [&](const std::vector<int>& v, std::vector<uint8_t>& out) {
    for (size_t i = 0; i < v.size(); ++i) {
      const float f = float(v[i]);
      if (es == 4) {
        std::memcpy(&out[i * 4], &f, 4);
      } else {
        const uint16_t h = f32_to_bf16(f);
        std::memcpy(&out[i * 2], &h, 2);
      }
    }
  };
  pack(a, ha);
  pack(b, hb);
  DevBuf da(ctx, ha.size()), db(ctx, hb.size()), dd(ctx, size_t(c.m * c.n) * 4);
  da.upload(ha.data());
  db.upload(hb.data());
  {
    cu::ScopedContext scope(ctx);
    D().cuMemsetD8(dd.ptr, 0xff, dd.bytes);
  }
  kjit_gemm_desc d = KJIT_GEMM_DESC_INIT;
  d.order = KJIT_GEMM_ROW_MAJOR;
  d.m = c.m;
  d.n = c.n;
  d.k = c.k;
  d.a_type = c.type;
  d.d_type = KJIT_GEMM_F32;
  const kjit_status st = kjit_gemm_run(g, &d, reinterpret_cast<void*>(da.ptr),
                                       reinterpret_cast<void*>(db.ptr), nullptr,
                                       reinterpret_cast<void*>(dd.ptr), nullptr, stream);
  if (st != KJIT_OK) return std::string("kjit_gemm_run: ") + kjit_status_string(st) + ": " + last_error();
  const CUresult r = stream ? D().cuStreamSynchronize(stream) : sync_context(ctx);
  if (r != CUDA_SUCCESS) return "synchronize: " + cu::error_text(r);
  std::vector<float> got(size_t(c.m * c.n));
  dd.download(got.data());
  for (int64_t i = 0; i < c.m; ++i) {
    for (int64_t j = 0; j < c.n; ++j) {
      int64_t want = 0;
      for (int64_t p = 0; p < c.k; ++p) want += int64_t(a[size_t(i * c.k + p)]) * b[size_t(p * c.n + j)];
      const float v = got[size_t(i * c.n + j)];
      if (v != float(want)) {
        return "D(" + std::to_string(i) + "," + std::to_string(j) + ") = " + std::to_string(v) +
               ", expected " + std::to_string(want) + " (" + std::to_string(c.m) + "x" +
               std::to_string(c.n) + "x" + std::to_string(c.k) + ")";
      }
    }
  }
  return "";
}

std::string self_exe() {
  char self[4096];
  const ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
  if (n <= 0) return "";
  self[n] = '\0';
  return self;
}

// Runs this test program with one test selected and `env` added; returns its exit status
// (-1 when it did not exit normally).
int run_child(const std::string& filter, const std::vector<std::pair<std::string, std::string>>& env) {
  const std::string exe = self_exe();
  if (exe.empty()) return -1;
  const pid_t pid = fork();
  if (pid == 0) {
    for (const auto& [k, v] : env) setenv(k.c_str(), v.c_str(), 1);
    const std::string arg = "--gtest_filter=" + filter;
    execl(exe.c_str(), exe.c_str(), arg.c_str(), static_cast<char*>(nullptr));
    _exit(127);
  }
  int status = 0;
  if (waitpid(pid, &status, 0) != pid) return -1;
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

std::string read_text(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// "domain:bus:device" of an ordinal, as the driver sees it in this process.
std::string pci_id(int device) {
  return std::to_string(cu::device_attribute(device, CU_DEVICE_ATTRIBUTE_PCI_DOMAIN_ID)) + ":" +
         std::to_string(cu::device_attribute(device, CU_DEVICE_ATTRIBUTE_PCI_BUS_ID)) + ":" +
         std::to_string(cu::device_attribute(device, CU_DEVICE_ATTRIBUTE_PCI_DEVICE_ID));
}

// ---- fixture -----------------------------------------------------------------------------

class MultiGpu : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { cache_dir_ = new kjit::test::TempDir; }
  static void TearDownTestSuite() {
    delete cache_dir_;
    cache_dir_ = nullptr;
  }

  void SetUp() override {
    const std::string why = two_gpus_unavailable_reason();
    if (!why.empty()) GTEST_SKIP() << why;
    gpus_ = true;
    kjit_cache_options co = KJIT_CACHE_OPTIONS_INIT;
    co.directory = cache_dir_->path().c_str();
    ASSERT_EQ(kjit_cache_open(&co, &cache_), KJIT_OK) << last_error();
    ASSERT_EQ(kjit_compiler_create(cache_, 2, &compiler_), KJIT_OK) << last_error();
    for (int d = 0; d < 2; ++d) {
      ctx_[d] = cu::primary_context(d);
      dev_[d] = cu::device_handle(d);
    }
    // Tests start with no context current; each says which one it wants.
    CU_ASSERT(D().cuCtxSetCurrent(nullptr));
  }

  void TearDown() override {
    for (kjit_kernel* k : kernels_) kjit_kernel_destroy(k);
    kernels_.clear();
    kjit_compiler_destroy(compiler_);
    kjit_cache_close(cache_);
    if (gpus_ && D().cuCtxSetCurrent(nullptr) != CUDA_SUCCESS) ADD_FAILURE() << "cuCtxSetCurrent(NULL)";
  }

  kjit_kernel* make(const char* source, const char* name, int device, unsigned flags = 0) {
    kjit_kernel* k = nullptr;
    kjit_binary* log = nullptr;
    const kjit_status st =
        kjit_kernel_create(compiler_, source, name, nullptr, device, flags, &k, &log);
    EXPECT_EQ(st, KJIT_OK) << name << " on device " << device << ": " << last_error() << "\n"
                           << (log ? kjit_binary_log(log) : "");
    kjit_binary_destroy(log);
    if (k) kernels_.push_back(k);
    return k;
  }

  static kjit::Kernel& inner(kjit_kernel* k) { return *k->kernel; }

  static kjit::test::TempDir* cache_dir_;
  bool gpus_ = false;
  kjit_cache* cache_ = nullptr;
  kjit_compiler* compiler_ = nullptr;
  std::vector<kjit_kernel*> kernels_;
  CUcontext ctx_[2] = {};
  CUdevice dev_[2] = {};
};

kjit::test::TempDir* MultiGpu::cache_dir_ = nullptr;

// ---- kernels -------------------------------------------------------------------------------

TEST_F(MultiGpu, OneCompileThenAHitAndALoadOnTheSecondDevice) {
  char arch0[16] = {}, arch1[16] = {};
  ASSERT_EQ(kjit_device_arch(0, arch0, sizeof arch0), KJIT_OK);
  ASSERT_EQ(kjit_device_arch(1, arch1, sizeof arch1), KJIT_OK);
  const bool same_arch = std::string(arch0) == arch1;
  // A source no other test compiles, so the counts below are this test's own.
  const std::string source = std::string(kjit::test::kSaxpySource) + "\n// multi-gpu: first\n";
  const size_t modules = kjit::loaded_module_count();
  const kjit_cache_stats s0 = cache_stats(cache_);

  kjit_kernel* k0 = make(source.c_str(), "saxpy", 0);
  ASSERT_NE(k0, nullptr);
  const kjit_cache_stats s1 = cache_stats(cache_);
  EXPECT_EQ(s1.compiles - s0.compiles, 1u);

  kjit_kernel* k1 = make(source.c_str(), "saxpy", 1);
  ASSERT_NE(k1, nullptr);
  const kjit_cache_stats s2 = cache_stats(cache_);
  if (same_arch) {
    EXPECT_EQ(s2.compiles - s1.compiles, 0u) << "device 1 (" << arch1 << ") must reuse the compile";
    EXPECT_EQ(s2.memory_hits - s1.memory_hits, 1u) << "a memory-tier hit for device 1";
  } else {
    std::printf("note: devices differ (%s, %s): device 1 needs its own compile\n", arch0, arch1);
    EXPECT_EQ(s2.compiles - s1.compiles, 1u);
  }
  EXPECT_EQ(kjit::loaded_module_count(), modules + 2) << "one module in each device's context";
  EXPECT_EQ(kjit_kernel_load_path(k0), KJIT_LOAD_CUBIN);
  EXPECT_EQ(kjit_kernel_load_path(k1), KJIT_LOAD_CUBIN);

  // Each handle lives in its own device's primary context.
  EXPECT_EQ(inner(k0).device(), 0);
  EXPECT_EQ(inner(k1).device(), 1);
  EXPECT_EQ(inner(k0).context(), ctx_[0]);
  EXPECT_EQ(inner(k1).context(), ctx_[1]);
  EXPECT_EQ(inner(k0).context_id(), id_of(ctx_[0]));
  EXPECT_EQ(inner(k1).context_id(), id_of(ctx_[1]));

  // The same compiled binary loads on both devices too.
  kjit_options* opts = nullptr;
  ASSERT_EQ(kjit_options_create(&opts), KJIT_OK);
  ASSERT_EQ(kjit_options_set_target(opts, arch0), KJIT_OK);
  kjit_binary* bin = nullptr;
  ASSERT_EQ(kjit_compile(compiler_, source.c_str(), opts, &bin), KJIT_OK) << last_error();
  kjit_kernel* b1 = nullptr;
  if (same_arch) {
    ASSERT_EQ(kjit_kernel_from_binary(bin, "saxpy", 1, 0, &b1), KJIT_OK) << last_error();
    kernels_.push_back(b1);
    EXPECT_EQ(inner(b1).context(), ctx_[1]);
  }
  kjit_binary_destroy(bin);
  kjit_options_destroy(opts);

  // Launches from threads with every kind of current context: none, either device's
  // primary context, and a context of either device that kjit did not create. Each
  // handle launches in its own device's primary context (the buffers live there), and
  // the caller's context is left as it was.
  ASSERT_TRUE(extra().ctx_create && extra().ctx_destroy) << "cuCtxCreate/cuCtxDestroy not found";
  CUcontext user[2] = {};
  for (int d = 0; d < 2; ++d) {
    CU_ASSERT(extra().ctx_create(&user[d], 0, dev_[d]));
    CUcontext popped = nullptr;
    CU_ASSERT(D().cuCtxPopCurrent(&popped));
    ASSERT_EQ(popped, user[d]);
  }
  const struct {
    const char* name;
    CUcontext ctx;
  } currents[] = {{"no context", nullptr},
                  {"device 0's primary context", ctx_[0]},
                  {"device 1's primary context", ctx_[1]},
                  {"a user context of device 0", user[0]},
                  {"a user context of device 1", user[1]}};
  unsigned seed = 100;
  for (const auto& cur : currents) {
    std::thread t([&] {
      if (D().cuCtxSetCurrent(cur.ctx) != CUDA_SUCCESS) {
        ADD_FAILURE() << "cuCtxSetCurrent(" << cur.name << ")";
        return;
      }
      for (int d = 0; d < 2; ++d) {
        kjit_kernel* k = d == 0 ? k0 : k1;
        Stream stream(ctx_[d]);
        for (CUstream s : {static_cast<CUstream>(nullptr), stream.s}) {
          const std::string err = run_saxpy(k, ctx_[d], 10000 + seed, s, seed);
          ++seed;
          EXPECT_EQ(err, "") << "device " << d << " kernel launched with " << cur.name
                             << " current, " << (s ? "own stream" : "NULL stream");
          EXPECT_EQ(current_context(), cur.ctx) << "the caller's context (" << cur.name
                                                << ") must be left current";
        }
      }
      if (b1) {
        EXPECT_EQ(run_saxpy(b1, ctx_[1], 777, nullptr, 7), "") << cur.name;
      }
    });
    t.join();
  }
  for (CUcontext u : user) CU_EXPECT(extra().ctx_destroy(u));
  EXPECT_EQ(inner(k0).reload_count(), 0u);
  EXPECT_EQ(inner(k1).reload_count(), 0u);
  EXPECT_EQ(inner(k0).context(), ctx_[0]);
  EXPECT_EQ(inner(k1).context(), ctx_[1]);
}

TEST_F(MultiGpu, CreatedWithAnotherDevicesContextCurrentStillLoadsIntoItsOwn) {
  // The calling thread's context belongs to device 0; the kernel for device 1 goes into
  // device 1's primary context, and the thread keeps device 0's.
  CU_ASSERT(D().cuCtxSetCurrent(ctx_[0]));
  kjit_kernel* k1 = make(kjit::test::kSaxpySource, "saxpy", 1);
  ASSERT_NE(k1, nullptr);
  EXPECT_EQ(current_context(), ctx_[0]);
  EXPECT_EQ(inner(k1).context(), ctx_[1]);
  CU_ASSERT(D().cuCtxSetCurrent(ctx_[1]));
  kjit_kernel* k0 = make(kjit::test::kSaxpySource, "saxpy", 0);
  ASSERT_NE(k0, nullptr);
  EXPECT_EQ(current_context(), ctx_[1]);
  EXPECT_EQ(inner(k0).context(), ctx_[0]);
  EXPECT_EQ(run_saxpy(k0, ctx_[0], 4099, nullptr, 1), "");
  EXPECT_EQ(run_saxpy(k1, ctx_[1], 4099, nullptr, 2), "");
  // Attribute queries run in the kernel's context too.
  kjit_kernel_attributes a0{}, a1{};
  a0.struct_size = a1.struct_size = sizeof a0;
  ASSERT_EQ(kjit_kernel_get_attributes(k0, &a0), KJIT_OK) << last_error();
  ASSERT_EQ(kjit_kernel_get_attributes(k1, &a1), KJIT_OK) << last_error();
  EXPECT_EQ(a0.binary_version, cu::compute_capability(0));
  EXPECT_EQ(a1.binary_version, cu::compute_capability(1));
  int blocks = 0;
  ASSERT_EQ(kjit_kernel_occupancy(k0, 256, 0, &blocks), KJIT_OK) << last_error();
  EXPECT_GE(blocks, 1);
  EXPECT_EQ(current_context(), ctx_[1]);
}

TEST_F(MultiGpu, AStreamOfTheOtherDeviceIsRefusedWithBothNamed) {
  kjit_kernel* k1 = make(kjit::test::kSaxpySource, "saxpy", 1);
  ASSERT_NE(k1, nullptr);
  Stream s0(ctx_[0]);
  DevBuf dx(ctx_[1], 4096), dy(ctx_[1], 4096);
  float a = 1;
  int n = 1024;
  void* args[] = {&a, &dx.ptr, &dy.ptr, &n};
  kjit_launch_config cfg = KJIT_LAUNCH_CONFIG_INIT;
  cfg.block[0] = 256;
  cfg.grid[0] = 4;
  cfg.stream = s0.s;
  EXPECT_EQ(kjit_kernel_launch(k1, &cfg, args, 4), KJIT_ERROR_CUDA);
  const std::string msg = last_error();
  EXPECT_TRUE(contains(msg, "the stream belongs to the primary context of device 0")) << msg;
  EXPECT_TRUE(contains(msg, "loaded into the primary context of device 1")) << msg;
  // Nothing ran; both devices are fine afterwards.
  CU_EXPECT(s0.sync());
  Stream s1(ctx_[1]);
  EXPECT_EQ(run_saxpy(k1, ctx_[1], 5000, s1.s, 3), "");
}

TEST_F(MultiGpu, ThreadsOnBothDevicesAtOnce) {
  kjit_kernel* k[2] = {make(kjit::test::kSaxpySource, "saxpy", 0),
                       make(kjit::test::kSaxpySource, "saxpy", 1)};
  ASSERT_NE(k[0], nullptr);
  ASSERT_NE(k[1], nullptr);
  constexpr int kThreadsPerDevice = 3, kLaunches = 1500, kN = 8192;
  constexpr int kThreads = 2 * kThreadsPerDevice;
  struct PerThread {
    int device = 0;
    std::unique_ptr<Stream> stream;
    std::unique_ptr<DevBuf> x, y;
    int failures = 0;
    std::string error;
  };
  std::vector<PerThread> per(kThreads);
  for (int t = 0; t < kThreads; ++t) {
    PerThread& p = per[size_t(t)];
    p.device = t % 2;
    p.stream = std::make_unique<Stream>(ctx_[p.device]);
    p.x = std::make_unique<DevBuf>(ctx_[p.device], kN * sizeof(float));
    p.y = std::make_unique<DevBuf>(ctx_[p.device], kN * sizeof(float));
    const std::vector<float> x(kN, float(t + 1)), y(kN, 0.0f);
    p.x->upload(x.data());
    p.y->upload(y.data());
  }
  std::atomic<int> ready{0};
  auto worker = [&](int t) {
    PerThread& p = per[size_t(t)];
    // Current context: none, the thread's own device's primary, or the other device's.
    const int variant = (t / 2) % 3;
    const CUcontext mine = variant == 0 ? nullptr : ctx_[variant == 1 ? p.device : 1 - p.device];
    if (D().cuCtxSetCurrent(mine) != CUDA_SUCCESS) {
      p.failures++;
      p.error = "cuCtxSetCurrent";
      return;
    }
    kjit_launch_config cfg = KJIT_LAUNCH_CONFIG_INIT;
    cfg.block[0] = 256;
    cfg.grid[0] = kN / 256;
    cfg.stream = p.stream->s;
    float a = 1.0f;
    int count = kN;
    CUdeviceptr x = p.x->ptr, y = p.y->ptr;
    void* args[] = {&a, &x, &y, &count};
    size_t packed_size = 0;
    kjit_kernel_param_buffer_size(k[p.device], &packed_size);
    std::vector<unsigned char> packed(packed_size);
    for (size_t i = 0; i < 4; ++i) {
      size_t off = 0, size = 0;
      kjit_kernel_param_info(k[p.device], i, &off, &size);
      std::memcpy(packed.data() + off, args[i], size);
    }
    ready++;
    while (ready.load() < kThreads) std::this_thread::yield();  // all start together
    for (int i = 0; i < kLaunches; ++i) {
      const kjit_status st = (i + t) % 4 == 0
                                 ? kjit_kernel_launch_packed(k[p.device], &cfg, packed.data(),
                                                             packed.size())
                                 : kjit_kernel_launch(k[p.device], &cfg, args, 4);
      if (st != KJIT_OK && p.failures++ == 0) p.error = last_error();
      if (i % 256 == 255) D().cuStreamSynchronize(p.stream->s);  // keep the queue short
      if (current_context() != mine && p.failures++ == 0) p.error = "current context changed";
    }
  };
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) threads.emplace_back(worker, t);
  for (auto& th : threads) th.join();
  for (int t = 0; t < kThreads; ++t) {
    PerThread& p = per[size_t(t)];
    EXPECT_EQ(p.failures, 0) << "thread " << t << " (device " << p.device << "): " << p.error;
    CU_EXPECT(p.stream->sync());
    std::vector<float> got(kN);
    p.y->download(got.data());
    const float want = float(kLaunches * (t + 1));
    size_t bad = 0;
    for (float v : got) bad += v != want;
    EXPECT_EQ(bad, 0u) << "thread " << t << " on device " << p.device << ": y[0] = " << got[0]
                       << ", want " << want;
  }
  for (int d = 0; d < 2; ++d) {
    EXPECT_EQ(inner(k[d]).reload_count(), 0u) << d;
    EXPECT_EQ(inner(k[d]).context(), ctx_[d]) << d;
  }
}

// ---- GEMM ------------------------------------------------------------------------------------

TEST_F(MultiGpu, GemmHandlesPerDeviceFromSeveralThreads) {
  SKIP_IF_NO_GEMM();
  kjit::test::TempDir dir;
  kjit_cache_options co = KJIT_CACHE_OPTIONS_INIT;
  co.directory = dir.path().c_str();
  kjit_cache* cache = nullptr;
  ASSERT_EQ(kjit_cache_open(&co, &cache), KJIT_OK) << last_error();
  kjit_gemm* g[2] = {};
  // Created from a thread whose current context is the other device's.
  CU_ASSERT(D().cuCtxSetCurrent(ctx_[1]));
  ASSERT_EQ(kjit_gemm_create(cache, 0, nullptr, &g[0]), KJIT_OK) << last_error();
  CU_ASSERT(D().cuCtxSetCurrent(ctx_[0]));
  ASSERT_EQ(kjit_gemm_create(cache, 1, nullptr, &g[1]), KJIT_OK) << last_error();
  EXPECT_EQ(current_context(), ctx_[0]);
  EXPECT_EQ(g[0]->gemm->context(), ctx_[0]);
  EXPECT_EQ(g[1]->gemm->context(), ctx_[1]);
  EXPECT_EQ(g[0]->gemm->device().ordinal, 0);
  EXPECT_EQ(g[1]->gemm->device().ordinal, 1);

  const GemmCase cases[] = {{64, 96, 128, KJIT_GEMM_F32},
                            {128, 64, 256, KJIT_GEMM_BF16},
                            {64, 64, 16384, KJIT_GEMM_BF16},  // split-K shape: a workspace
                            {256, 256, 512, KJIT_GEMM_BF16}};
  constexpr int kThreadsPerDevice = 2, kRounds = 3;
  std::vector<std::string> errors(2 * kThreadsPerDevice);
  std::vector<std::thread> threads;
  for (int t = 0; t < 2 * kThreadsPerDevice; ++t) {
    threads.emplace_back([&, t] {
      const int d = t % 2;
      // Half the threads have the other device's context current, half none.
      D().cuCtxSetCurrent(t < 2 ? ctx_[1 - d] : nullptr);
      const CUcontext mine = current_context();
      Stream s(ctx_[d]);
      for (int r = 0; r < kRounds && errors[size_t(t)].empty(); ++r) {
        for (const GemmCase& c : cases) {
          const std::string e =
              run_gemm_exact(g[d], ctx_[d], c, r == 1 ? nullptr : s.s, unsigned(t * 100 + r));
          if (!e.empty()) {
            errors[size_t(t)] = "device " + std::to_string(d) + ": " + e;
            break;
          }
          if (current_context() != mine) {
            errors[size_t(t)] = "the thread's current context was changed";
            break;
          }
        }
      }
    });
  }
  for (auto& th : threads) th.join();
  for (size_t t = 0; t < errors.size(); ++t) EXPECT_EQ(errors[t], "") << "thread " << t;

  // Every run happened, and each handle's workspaces are its own device's memory.
  ASSERT_NE(extra().pointer_attribute, nullptr) << "cuPointerGetAttribute not found";
  for (int d = 0; d < 2; ++d) {
    const kjit_gemm_stats s = gemm_stats(g[d]);
    EXPECT_EQ(s.runs, uint64_t(kThreadsPerDevice * kRounds * 4)) << "device " << d;
    const std::vector<CUdeviceptr> ws = g[d]->gemm->workspace_pointers();
    if (ws.empty()) std::printf("note: no plan on device %d needed a workspace\n", d);
    for (CUdeviceptr p : ws) {
      int ordinal = -1;
      CUcontext owner = nullptr;
      CU_EXPECT(extra().pointer_attribute(&ordinal, CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, p));
      CU_EXPECT(extra().pointer_attribute(&owner, CU_POINTER_ATTRIBUTE_CONTEXT, p));
      EXPECT_EQ(ordinal, d) << "a workspace of device " << d << "'s handle";
      EXPECT_EQ(owner, ctx_[d]) << "a workspace of device " << d << "'s handle";
    }
  }

  // A stream of device 0 given to device 1's handle is refused before cuBLASLt sees it.
  {
    Stream s0(ctx_[0]);
    const std::string e = run_gemm_exact(g[1], ctx_[1], cases[0], s0.s, 1);
    EXPECT_TRUE(contains(e, "KJIT_ERROR_INVALID_ARGUMENT")) << e;
    EXPECT_TRUE(contains(e, "the stream belongs to the primary context of device 0")) << e;
    EXPECT_TRUE(contains(e, "device 1")) << e;
  }
  kjit_gemm_destroy(g[0]);
  kjit_gemm_destroy(g[1]);
  kjit_cache_close(cache);
}

TEST_F(MultiGpu, PlanPersistedOnDevice0IsUsedOnDevice1OnlyWhereTheValidatorsAllow) {
  SKIP_IF_NO_GEMM();
  kjit::test::TempDir dir;
  kjit_cache_options co = KJIT_CACHE_OPTIONS_INIT;
  co.directory = dir.path().c_str();
  kjit_cache* cache = nullptr;
  ASSERT_EQ(kjit_cache_open(&co, &cache), KJIT_OK) << last_error();
  const kjit::blas::DeviceInfo i0 = kjit::blas::query_device(0), i1 = kjit::blas::query_device(1);
  const bool shareable = kjit::blas::validators(i0) == kjit::blas::validators(i1) &&
                         i0.sm_count == i1.sm_count;
  std::printf("device 0: %s (%d SMs), device 1: %s (%d SMs): plans %s\n",
              kjit::blas::validators(i0).c_str(), i0.sm_count,
              kjit::blas::validators(i1).c_str(), i1.sm_count,
              shareable ? "shared" : "not shared");
  const GemmCase c{192, 160, 320, KJIT_GEMM_BF16};

  kjit_gemm* g0 = nullptr;
  ASSERT_EQ(kjit_gemm_create(cache, 0, nullptr, &g0), KJIT_OK) << last_error();
  EXPECT_EQ(run_gemm_exact(g0, ctx_[0], c, nullptr, 1), "");
  kjit_gemm_stats s = gemm_stats(g0);
  EXPECT_EQ(s.misses, 1u);
  EXPECT_EQ(s.disk_writes, 1u);

  kjit_gemm* g1 = nullptr;
  ASSERT_EQ(kjit_gemm_create(cache, 1, nullptr, &g1), KJIT_OK) << last_error();
  EXPECT_EQ(run_gemm_exact(g1, ctx_[1], c, nullptr, 2), "");
  s = gemm_stats(g1);
  if (shareable) {
    EXPECT_EQ(s.disk_hits, 1u) << "device 1 takes the plan device 0 persisted";
    EXPECT_EQ(s.heuristic_queries, 0u);
    EXPECT_EQ(s.misses, 0u);
    EXPECT_EQ(s.disk_rejected, 0u);
  } else {
    EXPECT_EQ(s.disk_hits, 0u) << "another architecture or SM count: a plan of its own";
    EXPECT_EQ(s.misses, 1u);
    EXPECT_EQ(s.disk_writes, 1u);
  }
  // The persisted keys agree exactly when the plan may be shared.
  const kjit::blas::PlanKey k0 = g0->gemm->key_for([&] {
    kjit_gemm_desc d = KJIT_GEMM_DESC_INIT;
    d.order = KJIT_GEMM_ROW_MAJOR;
    d.m = c.m;
    d.n = c.n;
    d.k = c.k;
    d.a_type = c.type;
    d.d_type = KJIT_GEMM_F32;
    const void* p = reinterpret_cast<const void*>(uintptr_t(1) << 20);
    return kjit::blas::prepare(&d, p, p, nullptr, p, nullptr);
  }());
  kjit::blas::PlanKey k1 = k0;
  k1.f[kjit::blas::PlanKey::kCapability] = i1.cc_major * 10 + i1.cc_minor;
  k1.f[kjit::blas::PlanKey::kSmCount] = i1.sm_count;
  EXPECT_EQ(kjit::blas::persist_key(k0, g0->gemm->plan_validators()) ==
                kjit::blas::persist_key(k1, g1->gemm->plan_validators()),
            shareable);
  kjit_gemm_destroy(g0);
  kjit_gemm_destroy(g1);
  kjit_cache_close(cache);
}

// ---- ordinals and visibility ------------------------------------------------------------------

TEST_F(MultiGpu, OrdinalsThatDoNotExistAreClearStatuses) {
  int count = 0;
  ASSERT_EQ(kjit_device_count(&count), KJIT_OK);
  kjit_binary* bin = nullptr;
  {
    kjit_options* o = nullptr;
    ASSERT_EQ(kjit_options_create(&o), KJIT_OK);
    char arch[16] = {};
    ASSERT_EQ(kjit_device_arch(0, arch, sizeof arch), KJIT_OK);
    ASSERT_EQ(kjit_options_set_target(o, arch), KJIT_OK);
    ASSERT_EQ(kjit_compile(compiler_, kjit::test::kSaxpySource, o, &bin), KJIT_OK) << last_error();
    kjit_options_destroy(o);
  }
  for (int bad : {count, count + 1, 64, 4096, INT_MAX}) {
    SCOPED_TRACE("device " + std::to_string(bad));
    const std::string says = "CUDA device " + std::to_string(bad) + " does not exist";
    kjit_kernel* k = reinterpret_cast<kjit_kernel*>(0x1);
    EXPECT_EQ(kjit_kernel_create(compiler_, kjit::test::kSaxpySource, "saxpy", nullptr, bad, 0,
                                 &k, nullptr),
              KJIT_ERROR_CUDA_UNAVAILABLE);
    EXPECT_TRUE(contains(last_error(), says)) << last_error();
    EXPECT_TRUE(contains(last_error(), "has " + std::to_string(count) + " devices")) << last_error();
    EXPECT_EQ(k, nullptr);
    EXPECT_EQ(kjit_kernel_from_binary(bin, "saxpy", bad, 0, &k), KJIT_ERROR_CUDA_UNAVAILABLE);
    EXPECT_TRUE(contains(last_error(), says)) << last_error();
    kjit_gemm* g = nullptr;
    EXPECT_EQ(kjit_gemm_create(nullptr, bad, nullptr, &g), KJIT_ERROR_CUDA_UNAVAILABLE);
    EXPECT_TRUE(contains(last_error(), says)) << last_error();
    EXPECT_EQ(g, nullptr);
    char buf[256] = "untouched";
    EXPECT_EQ(kjit_device_arch(bad, buf, sizeof buf), KJIT_ERROR_CUDA_UNAVAILABLE);
    EXPECT_EQ(kjit_device_name(bad, buf, sizeof buf), KJIT_ERROR_CUDA_UNAVAILABLE);
    EXPECT_STREQ(buf, "untouched");
    // Target "auto" for a device that does not exist.
    kjit_options* o = nullptr;
    ASSERT_EQ(kjit_options_create(&o), KJIT_OK);
    ASSERT_EQ(kjit_options_set_target(o, "auto"), KJIT_OK);
    ASSERT_EQ(kjit_options_set_device(o, bad), KJIT_OK);
    kjit_binary* none = nullptr;
    EXPECT_EQ(kjit_compile(compiler_, kjit::test::kSaxpySource, o, &none),
              KJIT_ERROR_CUDA_UNAVAILABLE);
    EXPECT_TRUE(contains(last_error(), says)) << last_error();
    kjit_binary_destroy(none);
    kjit_options_destroy(o);
  }
  for (int neg : {-1, INT_MIN}) {
    kjit_kernel* k = nullptr;
    EXPECT_EQ(kjit_kernel_create(compiler_, kjit::test::kSaxpySource, "saxpy", nullptr, neg, 0,
                                 &k, nullptr),
              KJIT_ERROR_INVALID_ARGUMENT);
    EXPECT_EQ(kjit_kernel_from_binary(bin, "saxpy", neg, 0, &k), KJIT_ERROR_INVALID_ARGUMENT);
    kjit_gemm* g = nullptr;
    EXPECT_EQ(kjit_gemm_create(nullptr, neg, nullptr, &g), KJIT_ERROR_INVALID_ARGUMENT);
    char buf[32];
    EXPECT_EQ(kjit_device_arch(neg, buf, sizeof buf), KJIT_ERROR_INVALID_ARGUMENT);
  }
  kjit_binary_destroy(bin);
  // Nothing was disturbed: both real devices still work.
  for (int d = 0; d < 2; ++d) {
    kjit_kernel* k = make(kjit::test::kSaxpySource, "saxpy", d);
    ASSERT_NE(k, nullptr);
    EXPECT_EQ(run_saxpy(k, ctx_[d], 3000, nullptr, unsigned(d)), "") << "device " << d;
  }
}

// CUDA_VISIBLE_DEVICES value that shows the first two devices this process sees in the
// given order (`order` is "1,0" or "1"), whatever this process's own setting is.
std::string visible_devices(const std::string& order) {
  const char* env = std::getenv("CUDA_VISIBLE_DEVICES");
  if (!env || !*env) return order;
  std::vector<std::string> ids;
  std::stringstream s(env);
  std::string item;
  while (std::getline(s, item, ',')) ids.push_back(item);
  std::string out;
  std::stringstream o(order);
  while (std::getline(o, item, ',')) {
    const size_t i = size_t(std::stoi(item));
    out += (out.empty() ? "" : ",") + (i < ids.size() ? ids[i] : item);
  }
  return out;
}

TEST_F(MultiGpu, VisibleDevicesReorderedOrNarrowedInAChild) {
  // The parent compiles saxpy into the shared cache, so the children hit it on disk.
  for (int d = 0; d < 2; ++d) ASSERT_NE(make(kjit::test::kSaxpySource, "saxpy", d), nullptr);
  kjit_compiler_destroy(compiler_);  // the children open the database themselves
  kjit_cache_close(cache_);
  compiler_ = nullptr;
  cache_ = nullptr;
  kjit::test::TempDir out;
  const std::string pci0 = pci_id(0), pci1 = pci_id(1);

  const std::string swapped = out.file("swapped");
  const int rc = run_child("MultiGpuChild.Reordered",
                           {{"CUDA_VISIBLE_DEVICES", visible_devices("1,0")},
                            {"KJIT_MULTI_GPU_CHILD", swapped},
                            {"KJIT_MULTI_GPU_CACHE", cache_dir_->path()},
                            {"KJIT_MULTI_GPU_PCI", pci1 + "," + pci0}});
  EXPECT_EQ(rc, 0) << "child with devices swapped";
  EXPECT_EQ(read_text(swapped), "ok swapped count=2 compiles=0");

  const std::string narrowed = out.file("narrowed");
  const int rc1 = run_child("MultiGpuChild.Narrowed",
                            {{"CUDA_VISIBLE_DEVICES", visible_devices("1")},
                             {"KJIT_MULTI_GPU_CHILD", narrowed},
                             {"KJIT_MULTI_GPU_CACHE", cache_dir_->path()},
                             {"KJIT_MULTI_GPU_PCI", pci1}});
  EXPECT_EQ(rc1, 0) << "child that sees device 1 only";
  EXPECT_EQ(read_text(narrowed), "ok narrowed count=1 compiles=0");
  // TearDown closes what is open: reopen so it has something to close.
  kjit_cache_options co = KJIT_CACHE_OPTIONS_INIT;
  co.directory = cache_dir_->path().c_str();
  ASSERT_EQ(kjit_cache_open(&co, &cache_), KJIT_OK);
  ASSERT_EQ(kjit_compiler_create(cache_, 1, &compiler_), KJIT_OK);
}

// Child bodies: each writes its report only when everything it checks held.
class MultiGpuChild : public ::testing::Test {
 protected:
  void SetUp() override {
    report_ = std::getenv("KJIT_MULTI_GPU_CHILD") ? std::getenv("KJIT_MULTI_GPU_CHILD") : "";
    const char* dir = std::getenv("KJIT_MULTI_GPU_CACHE");
    const char* pci = std::getenv("KJIT_MULTI_GPU_PCI");
    if (report_.empty() || !dir || !pci) {
      GTEST_SKIP() << "runs in a child of MultiGpu.VisibleDevicesReorderedOrNarrowedInAChild";
    }
    std::stringstream s(pci);
    std::string item;
    while (std::getline(s, item, ',')) want_pci_.push_back(item);
    kjit_cache_options co = KJIT_CACHE_OPTIONS_INIT;
    co.directory = dir;
    ASSERT_EQ(kjit_cache_open(&co, &cache_), KJIT_OK) << last_error();
    ASSERT_EQ(kjit_compiler_create(cache_, 1, &compiler_), KJIT_OK) << last_error();
  }
  void TearDown() override {
    for (kjit_kernel* k : kernels_) kjit_kernel_destroy(k);
    kjit_compiler_destroy(compiler_);
    kjit_cache_close(cache_);
  }
  void run_on(int d) {
    kjit_kernel* k = nullptr;
    ASSERT_EQ(kjit_kernel_create(compiler_, kjit::test::kSaxpySource, "saxpy", nullptr, d, 0, &k,
                                 nullptr),
              KJIT_OK)
        << last_error();
    kernels_.push_back(k);
    EXPECT_EQ(k->kernel->context(), cu::primary_context(d));
    EXPECT_EQ(run_saxpy(k, cu::primary_context(d), 12345, nullptr, unsigned(d) + 40), "")
        << "device " << d;
  }
  void report(const std::string& what) {
    if (::testing::Test::HasFailure()) return;
    std::ofstream(report_, std::ios::trunc)
        << "ok " << what << " compiles=" << cache_stats(cache_).compiles;
  }
  std::string report_;
  std::vector<std::string> want_pci_;
  kjit_cache* cache_ = nullptr;
  kjit_compiler* compiler_ = nullptr;
  std::vector<kjit_kernel*> kernels_;
};

TEST_F(MultiGpuChild, Reordered) {
  int count = 0;
  ASSERT_EQ(kjit_device_count(&count), KJIT_OK) << last_error();
  ASSERT_EQ(count, 2);
  ASSERT_EQ(want_pci_.size(), 2u);
  EXPECT_EQ(pci_id(0), want_pci_[0]) << "ordinal 0 is the parent's device 1";
  EXPECT_EQ(pci_id(1), want_pci_[1]) << "ordinal 1 is the parent's device 0";
  run_on(1);
  run_on(0);
  report("swapped count=" + std::to_string(count));
}

TEST_F(MultiGpuChild, Narrowed) {
  int count = 0;
  ASSERT_EQ(kjit_device_count(&count), KJIT_OK) << last_error();
  ASSERT_EQ(count, 1);
  ASSERT_EQ(want_pci_.size(), 1u);
  EXPECT_EQ(pci_id(0), want_pci_[0]) << "ordinal 0 is the parent's device 1";
  kjit_kernel* k = nullptr;
  EXPECT_EQ(kjit_kernel_create(compiler_, kjit::test::kSaxpySource, "saxpy", nullptr, 1, 0, &k,
                               nullptr),
            KJIT_ERROR_CUDA_UNAVAILABLE);
  EXPECT_TRUE(contains(last_error(), "CUDA device 1 does not exist (this machine has 1 device)"))
      << last_error();
  kjit_gemm* g = nullptr;
  EXPECT_EQ(kjit_gemm_create(nullptr, 1, nullptr, &g), KJIT_ERROR_CUDA_UNAVAILABLE);
  run_on(0);
  report("narrowed count=" + std::to_string(count));
}

// ---- peer memory ------------------------------------------------------------------------------

TEST_F(MultiGpu, PeerAccessIsTheCallersToEnable) {
  ASSERT_TRUE(extra().can_access_peer && extra().enable_peer && extra().disable_peer)
      << "peer-access entry points not found";
  int can = 0;
  CU_ASSERT(extra().can_access_peer(&can, dev_[1], dev_[0]));
  if (!can) GTEST_SKIP() << "device 1 cannot access device 0's memory (no peer path)";
  kjit_kernel* k1 = make(kjit::test::kSaxpySource, "saxpy", 1);
  ASSERT_NE(k1, nullptr);
  const size_t n = 100000;
  const float a = -2.5f;
  const std::vector<float> x = random_floats(n, 21), y0 = random_floats(n, 22);
  DevBuf dx(ctx_[0], n * 4);  // read by the kernel on device 1
  DevBuf dy(ctx_[1], n * 4);
  dx.upload(x.data());
  dy.upload(y0.data());

  // kjit has not enabled anything behind the caller's back: the first enable succeeds
  // (an earlier one would make this CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED).
  CU_ASSERT(D().cuCtxSetCurrent(ctx_[1]));
  CU_ASSERT(extra().enable_peer(ctx_[0], 0));

  CU_ASSERT(D().cuCtxSetCurrent(nullptr));  // kjit makes device 1's context current itself
  kjit_launch_config cfg = KJIT_LAUNCH_CONFIG_INIT;
  cfg.block[0] = 256;
  cfg.grid[0] = static_cast<uint32_t>((n + 255) / 256);
  int count = static_cast<int>(n);
  void* args[] = {const_cast<float*>(&a), &dx.ptr, &dy.ptr, &count};
  const kjit_status st = kjit_kernel_launch(k1, &cfg, args, 4);
  EXPECT_EQ(st, KJIT_OK) << last_error();
  CU_EXPECT(sync_context(ctx_[1]));
  std::vector<float> got(n);
  dy.download(got.data());
  std::string first;
  EXPECT_EQ(saxpy_mismatches(a, x, y0, got, &first), 0u) << first;
  EXPECT_EQ(current_context(), nullptr);

  // Leave the contexts as they were for the tests that follow.
  CU_ASSERT(D().cuCtxSetCurrent(ctx_[1]));
  CU_EXPECT(extra().disable_peer(ctx_[0]));
}

// ---- a reset of device 1 while device 0 keeps launching -------------------------------------

TEST_F(MultiGpu, ResetOfDevice1WhileDevice0KeepsLaunching) {
  kjit_kernel* k0 = make(kjit::test::kSaxpySource, "saxpy", 0);
  kjit_kernel* k1 = make(kjit::test::kSaxpySource, "saxpy", 1);
  kjit_kernel* k1_strict = make(kjit::test::kSaxpySource, "saxpy", 1, KJIT_KERNEL_NO_RELOAD);
  ASSERT_TRUE(k0 && k1 && k1_strict);
  const bool gemm = !gemm_left_out();
  kjit_gemm* g0 = nullptr;
  kjit_gemm* g1 = nullptr;
  const GemmCase gc{64, 64, 16384, KJIT_GEMM_BF16};
  if (gemm) {
    ASSERT_EQ(kjit_gemm_create(nullptr, 0, nullptr, &g0), KJIT_OK) << last_error();
    ASSERT_EQ(kjit_gemm_create(nullptr, 1, nullptr, &g1), KJIT_OK) << last_error();
    EXPECT_EQ(run_gemm_exact(g1, ctx_[1], gc, nullptr, 5), "");  // holds a workspace, maybe
  }
  EXPECT_EQ(run_saxpy(k1, ctx_[1], 3333, nullptr, 11), "");
  EXPECT_EQ(run_saxpy(k1_strict, ctx_[1], 3333, nullptr, 12), "");
  const unsigned long long id0 = id_of(ctx_[0]), id1 = id_of(ctx_[1]);
  ASSERT_NE(id0, 0u);
  ASSERT_NE(id1, 0u);

  // Device 0: one thread launching y += 1 until told to stop.
  constexpr int kN = 4096;
  DevBuf x0(ctx_[0], kN * 4), y0(ctx_[0], kN * 4);
  {
    const std::vector<float> ones(kN, 1.0f), zeros(kN, 0.0f);
    x0.upload(ones.data());
    y0.upload(zeros.data());
  }
  Stream s0(ctx_[0]);
  std::atomic<bool> stop{false};
  std::atomic<int> launched{0};
  std::string device0_error;
  std::thread device0([&] {
    D().cuCtxSetCurrent(ctx_[0]);
    kjit_launch_config cfg = KJIT_LAUNCH_CONFIG_INIT;
    cfg.block[0] = 256;
    cfg.grid[0] = kN / 256;
    cfg.stream = s0.s;
    float a = 1.0f;
    int n = kN;
    CUdeviceptr x = x0.ptr, y = y0.ptr;
    void* args[] = {&a, &x, &y, &n};
    // At most 2^22 launches, so that the count stays exact in float.
    while (!stop.load() && launched.load() < (1 << 22)) {
      if (kjit_kernel_launch(k0, &cfg, args, 4) != KJIT_OK) {
        device0_error = last_error();
        return;
      }
      if (++launched % 128 == 0) {
        const CUresult r = s0.sync();
        if (r != CUDA_SUCCESS) {
          device0_error = "cuStreamSynchronize: " + cu::error_text(r);
          return;
        }
      }
    }
  });
  while (launched.load() < 500 && device0_error.empty()) std::this_thread::sleep_for(std::chrono::milliseconds(1));

  // Device 1's buffers go with its context: forget them rather than free them.
  CU_ASSERT(D().cuDevicePrimaryCtxReset(dev_[1]));
  const int launched_at_reset = launched.load();

  // The strict handle reports stale; the other reloads by itself (a query first: the
  // reload re-creates the primary context).
  int blocks = 0;
  EXPECT_EQ(kjit_kernel_occupancy(k1_strict, 256, 0, &blocks), KJIT_ERROR_STALE_HANDLE);
  EXPECT_TRUE(contains(last_error(), "KJIT_KERNEL_NO_RELOAD")) << last_error();
  ASSERT_EQ(kjit_kernel_occupancy(k1, 256, 0, &blocks), KJIT_OK) << last_error();
  EXPECT_GE(blocks, 1);
  ctx_[1] = cu::primary_context(1);
  const unsigned long long id1_after = id_of(ctx_[1]);
  EXPECT_NE(id1_after, id1);
  EXPECT_EQ(inner(k1).reload_count(), 1u);
  EXPECT_EQ(inner(k1).context_id(), id1_after);
  EXPECT_EQ(run_saxpy(k1, ctx_[1], 4097, nullptr, 13), "");
  {
    Stream s1(ctx_[1]);
    EXPECT_EQ(run_saxpy(k1, ctx_[1], 4098, s1.s, 14), "");
  }
  DevBuf sx(ctx_[1], 64), sy(ctx_[1], 64);
  float a = 1;
  int n = 16;
  void* args[] = {&a, &sx.ptr, &sy.ptr, &n};
  kjit_launch_config cfg = KJIT_LAUNCH_CONFIG_INIT;
  EXPECT_EQ(kjit_kernel_launch(k1_strict, &cfg, args, 4), KJIT_ERROR_STALE_HANDLE);

  // GEMM: the handle made before the reset says so (its workspaces went with the
  // context) instead of writing through them; a new handle works; destroying the old
  // one frees nothing of the new context.
  DevBuf canary(ctx_[1], 1 << 20);
  if (gemm) {
    const std::string stale = run_gemm_exact(g1, ctx_[1], gc, nullptr, 6);
    EXPECT_TRUE(contains(stale, "KJIT_ERROR_STALE_HANDLE")) << stale;
    EXPECT_TRUE(contains(stale, "device 1")) << stale;
    std::vector<uint8_t> pattern(1 << 20, 0x5a);
    canary.upload(pattern.data());
    kjit_gemm_destroy(g1);
    std::vector<uint8_t> back(1 << 20, 0);
    canary.download(back.data());
    EXPECT_EQ(std::count(back.begin(), back.end(), uint8_t(0x5a)), 1 << 20)
        << "memory of the new context survives destroying the stale handle";
    ASSERT_EQ(kjit_gemm_create(nullptr, 1, nullptr, &g1), KJIT_OK) << last_error();
    EXPECT_EQ(run_gemm_exact(g1, ctx_[1], gc, nullptr, 7), "");
  }

  // A second reset, now with a context of device 1 that is not its primary current on
  // this thread: the kernel loaded into the primary context goes back there, where the
  // caller's memory is, and the thread keeps its own context.
  CU_ASSERT(D().cuCtxSetCurrent(nullptr));
  sx.forget();
  sy.forget();
  canary.forget();
  kjit_gemm_destroy(g1);
  g1 = nullptr;
  CU_ASSERT(D().cuDevicePrimaryCtxReset(dev_[1]));
  ctx_[1] = cu::primary_context(1);
  ASSERT_TRUE(extra().ctx_create && extra().ctx_destroy) << "cuCtxCreate/cuCtxDestroy not found";
  CUcontext user = nullptr;
  CU_ASSERT(extra().ctx_create(&user, 0, dev_[1]));  // current on this thread now
  EXPECT_EQ(run_saxpy(k1, ctx_[1], 5001, nullptr, 15), "");
  EXPECT_EQ(inner(k1).context(), ctx_[1]) << "reloaded into device 1's primary context";
  EXPECT_EQ(inner(k1).context_id(), id_of(ctx_[1]));
  EXPECT_EQ(inner(k1).reload_count(), 2u);
  EXPECT_EQ(current_context(), user);
  CU_EXPECT(extra().ctx_destroy(user));

  // Device 0 never noticed.
  stop = true;
  device0.join();
  EXPECT_EQ(device0_error, "");
  EXPECT_GT(launched.load(), launched_at_reset) << "device 0 kept launching after the reset";
  CU_ASSERT(s0.sync());
  std::vector<float> got(kN);
  y0.download(got.data());
  EXPECT_EQ(got[0], float(launched.load()));
  EXPECT_EQ(got[kN - 1], float(launched.load()));
  EXPECT_EQ(id_of(ctx_[0]), id0) << "device 0's primary context is the same context";
  EXPECT_EQ(inner(k0).reload_count(), 0u);
  if (gemm) {
    EXPECT_EQ(run_gemm_exact(g0, ctx_[0], gc, nullptr, 8), "");
  }
  kjit_gemm_destroy(g0);
}

}  // namespace
