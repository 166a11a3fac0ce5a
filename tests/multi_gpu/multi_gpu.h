// The two-GPU tests' shared parts (tests/multi_gpu/): device buffers, streams, a GEMM with
// an exact answer and the fixture, in one namespace (GoogleTest wants one fixture class for
// a suite in all files). Every test skips with the reason when no driver or fewer than two
// devices are present.
#pragma once

#include <dlfcn.h>
#include <gtest/gtest.h>
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

namespace kjit::test::multi_gpu {

namespace cu = kjit::cuda;

inline const cu::Driver& D() {
  return cu::driver();
}

inline std::string last_error() {
  return kjit_last_error();
}

// KJIT_MULTI_GPU_NO_GEMM=1 leaves GEMM out (for a host whose cuBLASLt cannot be used).
inline bool gemm_left_out() {
  const char* env = std::getenv("KJIT_MULTI_GPU_NO_GEMM");
  return env && *env && std::string(env) != "0";
}

#define SKIP_IF_NO_GEMM() \
  if (gemm_left_out())    \
  GTEST_SKIP() << "KJIT_MULTI_GPU_NO_GEMM is set (GEMM needs cuBLASLt on a GPU)"

inline bool contains(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

// Non-empty reason when this process cannot see two CUDA devices.
inline std::string two_gpus_unavailable_reason() {
  const std::string why = kjit::test::gpu_unavailable_reason();
  if (!why.empty()) return why;
  int count = 0;
  if (kjit_device_count(&count) != KJIT_OK)
    return std::string("kjit_device_count: ") + last_error();
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

inline const Extra& extra() {
  static const Extra e = [] {
    Extra x;
    void* lib = dlopen(D().library.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!lib) return x;
    using GetProc =
        CUresult (*)(const char*, void**, int, cuuint64_t, CUdriverProcAddressQueryResult*);
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

inline CUcontext current_context() {
  CUcontext c = reinterpret_cast<CUcontext>(0x1);
  if (D().cuCtxGetCurrent(&c) != CUDA_SUCCESS) return reinterpret_cast<CUcontext>(0x1);
  return c;
}

inline unsigned long long id_of(CUcontext ctx) {
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

inline CUresult sync_context(CUcontext ctx) {
  cu::ScopedContext scope(ctx);
  return D().cuCtxSynchronize();
}

inline std::vector<float> random_floats(size_t n, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-4.0f, 4.0f);
  std::vector<float> v(n);
  for (float& f : v) f = dist(rng);
  return v;
}

// Number of elements of `got` that differ from a * x + y0 (computed as the device does).
inline size_t saxpy_mismatches(float a, const std::vector<float>& x, const std::vector<float>& y0,
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
inline std::string run_saxpy(kjit_kernel* k, CUcontext ctx, size_t n, CUstream stream,
                             unsigned seed) {
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

inline kjit_cache_stats cache_stats(kjit_cache* cache) {
  kjit_cache_stats s{};
  s.struct_size = sizeof s;
  EXPECT_EQ(kjit_cache_stats_get(cache, &s), KJIT_OK) << last_error();
  return s;
}

inline kjit_gemm_stats gemm_stats(const kjit_gemm* g) {
  kjit_gemm_stats s{};
  s.struct_size = sizeof s;
  EXPECT_EQ(kjit_gemm_stats_get(g, &s), KJIT_OK) << last_error();
  return s;
}

// ---- GEMM with an exact answer ---------------------------------------------------------

inline uint16_t f32_to_bf16(float f) {  // exact for the small integers used here
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
inline std::string run_gemm_exact(kjit_gemm* g, CUcontext ctx, const GemmCase& c, CUstream stream,
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
  const kjit_status st =
      kjit_gemm_run(g, &d, reinterpret_cast<void*>(da.ptr), reinterpret_cast<void*>(db.ptr),
                    nullptr, reinterpret_cast<void*>(dd.ptr), nullptr, stream);
  if (st != KJIT_OK)
    return std::string("kjit_gemm_run: ") + kjit_status_string(st) + ": " + last_error();
  const CUresult r = stream ? D().cuStreamSynchronize(stream) : sync_context(ctx);
  if (r != CUDA_SUCCESS) return "synchronize: " + cu::error_text(r);
  std::vector<float> got(size_t(c.m * c.n));
  dd.download(got.data());
  for (int64_t i = 0; i < c.m; ++i) {
    for (int64_t j = 0; j < c.n; ++j) {
      int64_t want = 0;
      for (int64_t p = 0; p < c.k; ++p)
        want += int64_t(a[size_t(i * c.k + p)]) * b[size_t(p * c.n + j)];
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

inline std::string self_exe() {
  char self[4096];
  const ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
  if (n <= 0) return "";
  self[n] = '\0';
  return self;
}

// Runs this test program with one test selected and `env` added; returns its exit status
// (-1 when it did not exit normally).
inline int run_child(const std::string& filter,
                     const std::vector<std::pair<std::string, std::string>>& env) {
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

inline std::string read_text(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// "domain:bus:device" of an ordinal, as the driver sees it in this process.
inline std::string pci_id(int device) {
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
    if (gpus_ && D().cuCtxSetCurrent(nullptr) != CUDA_SUCCESS)
      ADD_FAILURE() << "cuCtxSetCurrent(NULL)";
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

  static inline kjit::test::TempDir* cache_dir_ = nullptr;
  bool gpus_ = false;
  kjit_cache* cache_ = nullptr;
  kjit_compiler* compiler_ = nullptr;
  std::vector<kjit_kernel*> kernels_;
  CUcontext ctx_[2] = {};
  CUdevice dev_[2] = {};
};

}  // namespace kjit::test::multi_gpu
