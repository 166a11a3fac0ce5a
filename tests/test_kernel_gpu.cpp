// Kernels on a real GPU: correctness against the CPU, name expressions, argument checks,
// stale-handle recovery, threads and streams, PTX fallback, runtime interop, clusters.
// Every test skips with the reason when no CUDA driver or device is present.
#include <dlfcn.h>
#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "cuda/context.h"
#include "cuda/driver.h"
#include "kernel/module_registry.h"
#include "kjit/kjit.h"
#include "support/cuda_checks.h"
#include "support/test_support.h"

namespace {

namespace cu = kjit::cuda;

const cu::Driver& D() {
  return cu::driver();
}

std::string last_error() {
  return kjit_last_error();
}

const char* const kEmptySource = R"(extern "C" __global__ void empty_kernel() {})";

const char* const kClusterSource = R"(
extern "C" __global__ void cluster_info(unsigned* out) {
  unsigned rank, size;
  asm volatile("mov.u32 %0, %%cluster_ctarank;" : "=r"(rank));
  asm volatile("mov.u32 %0, %%cluster_nctarank;" : "=r"(size));
  if (threadIdx.x == 0) {
    out[2 * blockIdx.x] = rank;
    out[2 * blockIdx.x + 1] = size;
  }
}
)";

const char* const kSharedSource = R"(
extern "C" __global__ void reverse_block(const int* in, int* out, int n) {
  extern __shared__ int tile[];
  int t = threadIdx.x;
  for (int i = t; i < n; i += blockDim.x) tile[i] = in[i];
  __syncthreads();
  for (int i = t; i < n; i += blockDim.x) out[i] = tile[n - 1 - i];
}
)";

const char* const kCrashSource = R"(
extern "C" __global__ void crash(int* p) { *p = 1; }
)";

// Device memory in the current context.
struct DevBuf {
  CUdeviceptr ptr = 0;
  size_t bytes = 0;
  explicit DevBuf(size_t b) : bytes(b) {
    const CUresult r = D().cuMemAlloc(&ptr, b);
    EXPECT_EQ(r, CUDA_SUCCESS) << "cuMemAlloc: " << cu::error_text(r);
  }
  ~DevBuf() {
    if (ptr) D().cuMemFree(ptr);
  }
  DevBuf(const DevBuf&) = delete;
  DevBuf& operator=(const DevBuf&) = delete;
  void upload(const void* host) const {
    const CUresult r = D().cuMemcpyHtoD(ptr, host, bytes);
    EXPECT_EQ(r, CUDA_SUCCESS) << "cuMemcpyHtoD: " << cu::error_text(r);
  }
  void download(void* host) const {
    const CUresult r = D().cuMemcpyDtoH(host, ptr, bytes);
    EXPECT_EQ(r, CUDA_SUCCESS) << "cuMemcpyDtoH: " << cu::error_text(r);
  }
};

std::vector<float> random_floats(size_t n, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-4.0f, 4.0f);
  std::vector<float> v(n);
  for (float& f : v) f = dist(rng);
  return v;
}

void expect_close(const std::vector<float>& got, const std::vector<float>& want,
                  const std::string& what) {
  ASSERT_EQ(got.size(), want.size());
  size_t bad = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    const float tol = 1e-5f * std::fabs(want[i]) + 1e-5f;
    if (!(std::fabs(got[i] - want[i]) <= tol)) {
      if (++bad <= 5)
        ADD_FAILURE() << what << ": [" << i << "] got " << got[i] << " want " << want[i];
    }
  }
  EXPECT_EQ(bad, 0u) << what;
}

enum class Mode { Args, Sized, Packed };

class KernelGpu : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { cache_dir_ = new kjit::test::TempDir; }
  static void TearDownTestSuite() {
    delete cache_dir_;
    cache_dir_ = nullptr;
  }

  void SetUp() override {
    const std::string why = kjit::test::gpu_unavailable_reason();
    if (!why.empty()) GTEST_SKIP() << why;
    kjit_cache_options co = KJIT_CACHE_OPTIONS_INIT;
    co.directory = cache_dir_->path().c_str();
    ASSERT_EQ(kjit_cache_open(&co, &cache_), KJIT_OK) << last_error();
    ASSERT_EQ(kjit_compiler_create(cache_, 2, &compiler_), KJIT_OK) << last_error();
    ctx_ = cu::primary_context(0);
    CU_ASSERT(D().cuCtxSetCurrent(ctx_));
    cc_ = cu::compute_capability(0);
  }

  void TearDown() override {
    for (kjit_kernel* k : kernels_) kjit_kernel_destroy(k);
    kernels_.clear();
    kjit_compiler_destroy(compiler_);
    kjit_cache_close(cache_);
  }

  kjit_kernel* make(const char* source, const char* name, unsigned flags = 0,
                    const kjit_options* opts = nullptr) {
    kjit_kernel* k = nullptr;
    kjit_binary* log = nullptr;
    const kjit_status st = kjit_kernel_create(compiler_, source, name, opts, 0, flags, &k, &log);
    EXPECT_EQ(st, KJIT_OK) << name << ": " << last_error() << "\n"
                           << (log ? kjit_binary_log(log) : "");
    kjit_binary_destroy(log);
    if (k) kernels_.push_back(k);
    return k;
  }

  void forget(kjit_kernel* k) {
    for (auto it = kernels_.begin(); it != kernels_.end(); ++it) {
      if (*it == k) {
        kernels_.erase(it);
        break;
      }
    }
    kjit_kernel_destroy(k);
  }

  // saxpy on n random values through one of the launch forms; checks against the CPU.
  void run_saxpy(kjit_kernel* k, size_t n, Mode mode, CUstream stream = nullptr,
                 int cooperative = 0) {
    const float a = 2.5f;
    std::vector<float> x = random_floats(n, static_cast<unsigned>(n));
    std::vector<float> y = random_floats(n, static_cast<unsigned>(n) + 1);
    std::vector<float> want(n);
    for (size_t i = 0; i < n; ++i) want[i] = a * x[i] + y[i];
    DevBuf dx(n * sizeof(float)), dy(n * sizeof(float));
    dx.upload(x.data());
    dy.upload(y.data());

    kjit_launch_config cfg = KJIT_LAUNCH_CONFIG_INIT;
    const uint32_t block = cooperative ? 1024 : 256;
    cfg.block[0] = block;
    cfg.grid[0] = static_cast<uint32_t>((n + block - 1) / block);
    cfg.stream = stream;
    cfg.cooperative = cooperative;
    int count = static_cast<int>(n);
    void* args[] = {const_cast<float*>(&a), &dx.ptr, &dy.ptr, &count};
    kjit_status st = KJIT_OK;
    if (mode == Mode::Args) {
      st = kjit_kernel_launch(k, &cfg, args, 4);
    } else if (mode == Mode::Sized) {
      const size_t sizes[] = {sizeof a, sizeof dx.ptr, sizeof dy.ptr, sizeof count};
      st = kjit_kernel_launch_sized(k, &cfg, args, sizes, 4);
    } else {
      size_t total = 0;
      ASSERT_EQ(kjit_kernel_param_buffer_size(k, &total), KJIT_OK);
      std::vector<unsigned char> packed(total, 0);
      for (size_t i = 0; i < 4; ++i) {
        size_t off = 0, size = 0;
        ASSERT_EQ(kjit_kernel_param_info(k, i, &off, &size), KJIT_OK);
        ASSERT_LE(off + size, total);
        std::memcpy(packed.data() + off, args[i], size);
      }
      st = kjit_kernel_launch_packed(k, &cfg, packed.data(), packed.size());
    }
    ASSERT_EQ(st, KJIT_OK) << last_error();
    if (stream) {
      CU_ASSERT(D().cuStreamSynchronize(stream));
    } else {
      CU_ASSERT(D().cuCtxSynchronize());
    }
    std::vector<float> got(n);
    dy.download(got.data());
    expect_close(got, want, "saxpy n=" + std::to_string(n));
  }

  static kjit::test::TempDir* cache_dir_;
  kjit_cache* cache_ = nullptr;
  kjit_compiler* compiler_ = nullptr;
  std::vector<kjit_kernel*> kernels_;
  CUcontext ctx_ = nullptr;
  int cc_ = 0;
};

kjit::test::TempDir* KernelGpu::cache_dir_ = nullptr;

TEST_F(KernelGpu, DeviceQueries) {
  int count = 0;
  ASSERT_EQ(kjit_device_count(&count), KJIT_OK);
  EXPECT_GE(count, 1);
  char arch[16];
  ASSERT_EQ(kjit_device_arch(0, arch, sizeof arch), KJIT_OK);
  EXPECT_EQ(std::string(arch), "sm_" + std::to_string(cc_));
  char name[256];
  ASSERT_EQ(kjit_device_name(0, name, sizeof name), KJIT_OK);
  EXPECT_GT(std::strlen(name), 0u);
  char tiny[2];
  EXPECT_EQ(kjit_device_name(0, tiny, sizeof tiny), KJIT_ERROR_BUFFER_TOO_SMALL);
  int version = 0;
  ASSERT_EQ(kjit_driver_version(&version), KJIT_OK);
  EXPECT_GE(version, 12000);
  EXPECT_EQ(kjit_device_arch(count, arch, sizeof arch), KJIT_ERROR_CUDA_UNAVAILABLE);
  EXPECT_NE(last_error().find("does not exist"), std::string::npos) << last_error();
}

TEST_F(KernelGpu, SaxpyMatchesCpuAtManySizes) {
  kjit_kernel* k = make(kjit::test::kSaxpySource, "saxpy");
  ASSERT_NE(k, nullptr);
  EXPECT_EQ(kjit_kernel_load_path(k), KJIT_LOAD_CUBIN);
  EXPECT_STREQ(kjit_kernel_symbol(k), "saxpy");
  for (size_t n :
       {size_t(1), size_t(31), size_t(256), size_t(1000), size_t(65537), size_t((1 << 20) + 5)}) {
    run_saxpy(k, n, Mode::Args);
  }
}

TEST_F(KernelGpu, ParamInfoAttributesOccupancy) {
  kjit_kernel* k = make(kjit::test::kSaxpySource, "saxpy");
  ASSERT_NE(k, nullptr);
  size_t count = 0;
  ASSERT_EQ(kjit_kernel_param_count(k, &count), KJIT_OK);
  ASSERT_EQ(count, 4u);
  const size_t want_off[] = {0, 8, 16, 24}, want_size[] = {4, 8, 8, 4};
  for (size_t i = 0; i < 4; ++i) {
    size_t off = 0, size = 0;
    ASSERT_EQ(kjit_kernel_param_info(k, i, &off, &size), KJIT_OK);
    EXPECT_EQ(off, want_off[i]) << i;
    EXPECT_EQ(size, want_size[i]) << i;
  }
  size_t off = 0, size = 0;
  EXPECT_EQ(kjit_kernel_param_info(k, 4, &off, &size), KJIT_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(last_error().find("4 parameters"), std::string::npos) << last_error();
  size_t total = 0;
  ASSERT_EQ(kjit_kernel_param_buffer_size(k, &total), KJIT_OK);
  EXPECT_EQ(total, 28u);

  kjit_kernel_attributes attrs{};
  attrs.struct_size = sizeof attrs;
  ASSERT_EQ(kjit_kernel_get_attributes(k, &attrs), KJIT_OK) << last_error();
  EXPECT_EQ(attrs.struct_size, sizeof attrs);
  EXPECT_GT(attrs.num_regs, 0);
  EXPECT_GE(attrs.max_threads_per_block, 256);
  EXPECT_EQ(attrs.binary_version, cc_);
  EXPECT_GT(attrs.ptx_version, 0);
  EXPECT_EQ(attrs.static_shared_bytes, 0);

  // A size below the 0.1.0 struct is refused, and nothing is written.
  struct {
    kjit_kernel_attributes a;
    int newer;  // a field of a newer kjit
    int guard;
  } small{};
  small.a.struct_size = static_cast<uint32_t>(offsetof(kjit_kernel_attributes, const_bytes));
  small.a.num_regs = -7;
  EXPECT_EQ(kjit_kernel_get_attributes(k, &small.a), KJIT_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(small.a.num_regs, -7);
  // A newer caller's larger struct gets every field this kjit knows, zero for the one it
  // does not, and nothing past its struct_size.
  small.a.struct_size = static_cast<uint32_t>(offsetof(decltype(small), guard));
  small.newer = -7;
  small.guard = -9;
  ASSERT_EQ(kjit_kernel_get_attributes(k, &small.a), KJIT_OK) << last_error();
  EXPECT_EQ(small.a.num_regs, attrs.num_regs);
  EXPECT_EQ(small.a.binary_version, attrs.binary_version);
  EXPECT_EQ(small.a.struct_size, offsetof(decltype(small), guard));
  EXPECT_EQ(small.newer, 0);
  EXPECT_EQ(small.guard, -9);

  int blocks = 0;
  ASSERT_EQ(kjit_kernel_occupancy(k, 256, 0, &blocks), KJIT_OK) << last_error();
  EXPECT_GE(blocks, 1);
  EXPECT_EQ(kjit_kernel_occupancy(k, 0, 0, &blocks), KJIT_ERROR_INVALID_ARGUMENT);
  int min_grid = 0, block = 0;
  ASSERT_EQ(kjit_kernel_suggest_block_size(k, 0, &min_grid, &block), KJIT_OK) << last_error();
  EXPECT_GE(block, 32);
  EXPECT_GE(min_grid, 1);
}

TEST_F(KernelGpu, SizedAndPackedLaunches) {
  kjit_kernel* k = make(kjit::test::kSaxpySource, "saxpy");
  ASSERT_NE(k, nullptr);
  run_saxpy(k, 5000, Mode::Sized);
  run_saxpy(k, 5001, Mode::Packed);

  // A kernel without parameters takes an empty packed buffer.
  kjit_kernel* e = make(kEmptySource, "empty_kernel");
  ASSERT_NE(e, nullptr);
  kjit_launch_config cfg = KJIT_LAUNCH_CONFIG_INIT;
  EXPECT_EQ(kjit_kernel_launch_packed(e, &cfg, nullptr, 0), KJIT_OK) << last_error();
  EXPECT_EQ(kjit_kernel_launch(e, &cfg, nullptr, 0), KJIT_OK) << last_error();
  CU_ASSERT(D().cuCtxSynchronize());
}

TEST_F(KernelGpu, TemplatedKernelsThroughNameExpressions) {
  kjit_kernel* kf = make(kjit::test::kTemplateSource, "scale<float, 3>");
  kjit_kernel* ki = make(kjit::test::kTemplateSource, "scale<int, 7>");
  ASSERT_NE(kf, nullptr);
  ASSERT_NE(ki, nullptr);
  EXPECT_EQ(std::string(kjit_kernel_symbol(kf)).rfind("_Z", 0), 0u) << kjit_kernel_symbol(kf);
  EXPECT_STRNE(kjit_kernel_symbol(kf), kjit_kernel_symbol(ki));

  const int n = 1000;
  std::vector<float> f = random_floats(n, 7);
  std::vector<int> iv(n);
  for (int i = 0; i < n; ++i) iv[static_cast<size_t>(i)] = i - 500;
  DevBuf df(n * sizeof(float)), di(n * sizeof(int));
  df.upload(f.data());
  di.upload(iv.data());
  kjit_launch_config cfg = KJIT_LAUNCH_CONFIG_INIT;
  cfg.block[0] = 128;
  cfg.grid[0] = (n + 127) / 128;
  float ff = 1.5f;
  int fi = -2, count = n;
  void* fargs[] = {&df.ptr, &ff, &count};
  void* iargs[] = {&di.ptr, &fi, &count};
  ASSERT_EQ(kjit_kernel_launch(kf, &cfg, fargs, 3), KJIT_OK) << last_error();
  ASSERT_EQ(kjit_kernel_launch(ki, &cfg, iargs, 3), KJIT_OK) << last_error();
  CU_ASSERT(D().cuCtxSynchronize());
  std::vector<float> gf(n), wf(n);
  std::vector<int> gi(n);
  df.download(gf.data());
  di.download(gi.data());
  for (size_t i = 0; i < size_t(n); ++i) wf[i] = f[i] * 1.5f + 3.0f;
  expect_close(gf, wf, "scale<float, 3>");
  for (int i = 0; i < n; ++i) ASSERT_EQ(gi[size_t(i)], (i - 500) * -2 + 7) << i;

  // From a compiled binary: the expression must have been given at compile time.
  kjit_options* opts = nullptr;
  ASSERT_EQ(kjit_options_create(&opts), KJIT_OK);
  ASSERT_EQ(kjit_options_add_name_expression(opts, "scale<double, 1>"), KJIT_OK);
  kjit_binary* bin = nullptr;
  ASSERT_EQ(kjit_compile(compiler_, kjit::test::kTemplateSource, opts, &bin), KJIT_OK)
      << last_error();
  kjit_kernel* kd = nullptr;
  ASSERT_EQ(kjit_kernel_from_binary(bin, "scale<double, 1>", 0, 0, &kd), KJIT_OK) << last_error();
  kernels_.push_back(kd);
  EXPECT_STREQ(kjit_kernel_symbol(kd), kjit_binary_lowered_name(bin, "scale<double, 1>"));
  kjit_kernel* missing = nullptr;
  EXPECT_EQ(kjit_kernel_from_binary(bin, "scale<float, 9>", 0, 0, &missing),
            KJIT_ERROR_NAME_NOT_FOUND);
  EXPECT_NE(last_error().find("name expression"), std::string::npos) << last_error();
  EXPECT_EQ(missing, nullptr);
  kjit_binary_destroy(bin);
  kjit_options_destroy(opts);
}

TEST_F(KernelGpu, UnknownKernelNameIsNameNotFound) {
  kjit_kernel* k = nullptr;
  const kjit_status st =
      kjit_kernel_create(compiler_, kjit::test::kSaxpySource, "saxpyy", nullptr, 0, 0, &k, nullptr);
  EXPECT_EQ(st, KJIT_ERROR_NAME_NOT_FOUND) << last_error();
  EXPECT_NE(last_error().find("saxpyy"), std::string::npos) << last_error();
  EXPECT_NE(last_error().find("saxpy)"), std::string::npos)
      << "lists the kernels: " << last_error();
  EXPECT_EQ(k, nullptr);

  // A compile error hands back the log.
  kjit_binary* log = nullptr;
  EXPECT_EQ(kjit_kernel_create(compiler_, "extern \"C\" __global__ void f() { nope(); }", "f",
                               nullptr, 0, 0, &k, &log),
            KJIT_ERROR_COMPILE);
  ASSERT_NE(log, nullptr);
  EXPECT_NE(std::string(kjit_binary_log(log)).find("nope"), std::string::npos);
  kjit_binary_destroy(log);
}

TEST_F(KernelGpu, ArgumentMismatchIsCaughtBeforeTheDriver) {
  kjit_kernel* k = make(kjit::test::kSaxpySource, "saxpy");
  ASSERT_NE(k, nullptr);
  DevBuf dx(64 * sizeof(float)), dy(64 * sizeof(float));
  float a = 1;
  int n = 64;
  double wide = 1;
  void* args[] = {&a, &dx.ptr, &dy.ptr, &n};
  kjit_launch_config cfg = KJIT_LAUNCH_CONFIG_INIT;
  cfg.block[0] = 64;

  EXPECT_EQ(kjit_kernel_launch(k, &cfg, args, 3), KJIT_ERROR_ARGUMENT_MISMATCH);
  EXPECT_NE(last_error().find("takes 4 arguments, 3 given"), std::string::npos) << last_error();
  void* five[] = {&a, &dx.ptr, &dy.ptr, &n, &n};
  EXPECT_EQ(kjit_kernel_launch(k, &cfg, five, 5), KJIT_ERROR_ARGUMENT_MISMATCH);
  EXPECT_NE(last_error().find("5 given"), std::string::npos) << last_error();

  const size_t bad_sizes[] = {sizeof a, sizeof dx.ptr, sizeof dy.ptr, sizeof wide};
  EXPECT_EQ(kjit_kernel_launch_sized(k, &cfg, args, bad_sizes, 4), KJIT_ERROR_ARGUMENT_MISMATCH);
  EXPECT_NE(last_error().find("argument 3"), std::string::npos) << last_error();
  EXPECT_NE(last_error().find("expected 4 bytes, given 8"), std::string::npos) << last_error();
  const size_t bad0[] = {sizeof wide, sizeof dx.ptr, sizeof dy.ptr, sizeof n};
  EXPECT_EQ(kjit_kernel_launch_sized(k, &cfg, args, bad0, 4), KJIT_ERROR_ARGUMENT_MISMATCH);
  EXPECT_NE(last_error().find("argument 0"), std::string::npos) << last_error();

  unsigned char packed[32] = {};
  EXPECT_EQ(kjit_kernel_launch_packed(k, &cfg, packed, 32), KJIT_ERROR_ARGUMENT_MISMATCH);
  EXPECT_NE(last_error().find("expected 28 bytes"), std::string::npos) << last_error();
  EXPECT_NE(last_error().find("given 32"), std::string::npos) << last_error();

  void* with_null[] = {&a, nullptr, &dy.ptr, &n};
  EXPECT_EQ(kjit_kernel_launch(k, &cfg, with_null, 4), KJIT_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(last_error().find("argument 1"), std::string::npos) << last_error();
  EXPECT_EQ(kjit_kernel_launch(k, &cfg, nullptr, 4), KJIT_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(kjit_kernel_launch(k, nullptr, args, 4), KJIT_ERROR_INVALID_ARGUMENT);

  kjit_launch_config zero = cfg;
  zero.grid[1] = 0;
  EXPECT_EQ(kjit_kernel_launch(k, &zero, args, 4), KJIT_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(last_error().find("grid 1x0x1"), std::string::npos) << last_error();
  kjit_launch_config tiny = cfg;
  tiny.struct_size = 4;
  EXPECT_EQ(kjit_kernel_launch(k, &tiny, args, 4), KJIT_ERROR_INVALID_ARGUMENT);

  // The driver's own rejection carries its error name.
  kjit_launch_config huge = cfg;
  huge.block[0] = 4096;
  EXPECT_EQ(kjit_kernel_launch(k, &huge, args, 4), KJIT_ERROR_CUDA);
  EXPECT_NE(last_error().find("CUDA_ERROR_INVALID_VALUE"), std::string::npos) << last_error();

  // Still launches correctly afterwards.
  run_saxpy(k, 64, Mode::Args);
}

TEST_F(KernelGpu, StaleHandleReloadsAfterPrimaryContextReset) {
  kjit_kernel* k = make(kjit::test::kSaxpySource, "saxpy");
  kjit_kernel* strict = make(kjit::test::kSaxpySource, "saxpy", KJIT_KERNEL_NO_RELOAD);
  ASSERT_NE(k, nullptr);
  ASSERT_NE(strict, nullptr);
  run_saxpy(k, 1000, Mode::Args);
  run_saxpy(strict, 1000, Mode::Args);
  unsigned long long before = 0;
  ASSERT_TRUE(cu::context_id(ctx_, &before));

  const CUdevice dev = cu::device_handle(0);
  CU_ASSERT(D().cuDevicePrimaryCtxReset(dev));
  // Memory from before the reset is gone; use the (re-created) primary context again.
  ctx_ = cu::primary_context(0);
  CU_ASSERT(D().cuCtxSetCurrent(ctx_));
  unsigned long long after = 0;
  ASSERT_TRUE(cu::context_id(ctx_, &after));
  EXPECT_NE(before, after);

  run_saxpy(k, 4097, Mode::Args);
  run_saxpy(k, 300, Mode::Packed);

  DevBuf dx(16), dy(16);
  float a = 1;
  int n = 4;
  void* args[] = {&a, &dx.ptr, &dy.ptr, &n};
  kjit_launch_config cfg = KJIT_LAUNCH_CONFIG_INIT;
  EXPECT_EQ(kjit_kernel_launch(strict, &cfg, args, 4), KJIT_ERROR_STALE_HANDLE);
  EXPECT_NE(last_error().find("KJIT_KERNEL_NO_RELOAD"), std::string::npos) << last_error();
  EXPECT_EQ(kjit_kernel_launch(strict, &cfg, args, 4), KJIT_ERROR_STALE_HANDLE);
  int blocks = 0;
  EXPECT_EQ(kjit_kernel_occupancy(strict, 128, 0, &blocks), KJIT_ERROR_STALE_HANDLE);

  // Reset again and query first: the reload re-creates the context itself.
  CU_ASSERT(D().cuDevicePrimaryCtxReset(dev));
  ASSERT_EQ(kjit_kernel_occupancy(k, 256, 0, &blocks), KJIT_OK) << last_error();
  EXPECT_GE(blocks, 1);
  ctx_ = cu::primary_context(0);
  CU_ASSERT(D().cuCtxSetCurrent(ctx_));
  run_saxpy(k, 777, Mode::Sized);

  // A fresh handle after the resets works too, and destroying stale ones is safe.
  forget(strict);
  kjit_kernel* again = make(kjit::test::kSaxpySource, "saxpy", KJIT_KERNEL_NO_RELOAD);
  ASSERT_NE(again, nullptr);
  run_saxpy(again, 2048, Mode::Args);
}

TEST_F(KernelGpu, TwoThreadsLaunchOnTwoStreams) {
  kjit_kernel* k = make(kjit::test::kSaxpySource, "saxpy");
  ASSERT_NE(k, nullptr);
  const int n = 100000, launches = 500;
  CUstream streams[2] = {};
  for (CUstream& s : streams) CU_ASSERT(D().cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
  DevBuf x0(n * sizeof(float)), y0(n * sizeof(float)), x1(n * sizeof(float)), y1(n * sizeof(float));
  const DevBuf* xs[2] = {&x0, &x1};
  const DevBuf* ys[2] = {&y0, &y1};
  for (int t = 0; t < 2; ++t) {
    std::vector<float> x(n, float(t + 1)), y(n, 0.0f);
    xs[t]->upload(x.data());
    ys[t]->upload(y.data());
  }
  int failures[2] = {0, 0};
  std::string errors[2];
  auto worker = [&](int t) {
    // Thread 1 has the kernel's context current; thread 0 has none (kjit makes it current
    // for each launch and restores the thread's state).
    if (t == 1) D().cuCtxSetCurrent(ctx_);
    kjit_launch_config cfg = KJIT_LAUNCH_CONFIG_INIT;
    cfg.block[0] = 256;
    cfg.grid[0] = (n + 255) / 256;
    cfg.stream = streams[t];
    float a = 1.0f;
    int count = n;
    CUdeviceptr x = xs[t]->ptr, y = ys[t]->ptr;
    void* args[] = {&a, &x, &y, &count};
    for (int i = 0; i < launches; ++i) {
      if (kjit_kernel_launch(k, &cfg, args, 4) != KJIT_OK) {
        if (failures[t]++ == 0) errors[t] = kjit_last_error();
      }
    }
    CUcontext current = reinterpret_cast<CUcontext>(0x1);
    D().cuCtxGetCurrent(&current);
    if (t == 0 && current != nullptr) {
      failures[t]++;
      errors[t] = "thread without a context was left with one";
    }
  };
  std::thread t0(worker, 0), t1(worker, 1);
  t0.join();
  t1.join();
  for (int t = 0; t < 2; ++t) {
    EXPECT_EQ(failures[t], 0) << errors[t];
    CU_ASSERT(D().cuStreamSynchronize(streams[t]));
    std::vector<float> got(n);
    ys[t]->download(got.data());
    for (int i = 0; i < n; ++i) {
      ASSERT_EQ(got[size_t(i)], float(launches * (t + 1))) << "thread " << t << " [" << i << "]";
    }
  }
  for (CUstream s : streams) D().cuStreamDestroy(s);
}

TEST_F(KernelGpu, PtxFallbackPath) {
  kjit_kernel* k = make(kjit::test::kSaxpySource, "saxpy", KJIT_KERNEL_FORCE_PTX);
  ASSERT_NE(k, nullptr);
  EXPECT_EQ(kjit_kernel_load_path(k), KJIT_LOAD_PTX);
  run_saxpy(k, 3333, Mode::Args);
  kjit_kernel_attributes attrs{};
  attrs.struct_size = sizeof attrs;
  ASSERT_EQ(kjit_kernel_get_attributes(k, &attrs), KJIT_OK);
  EXPECT_EQ(attrs.binary_version, cc_);

  // A PTX-only compile (virtual architecture) loads through the driver JIT.
  kjit_options* opts = nullptr;
  ASSERT_EQ(kjit_options_create(&opts), KJIT_OK);
  const std::string virt = "compute_" + std::to_string(cc_ >= 80 ? 80 : cc_);
  ASSERT_EQ(kjit_options_set_target(opts, virt.c_str()), KJIT_OK);
  kjit_binary* bin = nullptr;
  ASSERT_EQ(kjit_compile(compiler_, kjit::test::kSaxpySource, opts, &bin), KJIT_OK) << last_error();
  kjit_kernel* kp = nullptr;
  ASSERT_EQ(kjit_kernel_from_binary(bin, "saxpy", 0, 0, &kp), KJIT_OK) << last_error();
  kernels_.push_back(kp);
  EXPECT_EQ(kjit_kernel_load_path(kp), KJIT_LOAD_PTX);
  run_saxpy(kp, 4000, Mode::Args);

  // A CUBIN for an older major architecture cannot run here: the PTX beside it is used.
  kjit_binary* bin2 = nullptr;
  kjit_options* opts2 = nullptr;
  if (cc_ >= 80) {
    const int other = cc_ >= 90 ? 80 : 75;
    ASSERT_EQ(kjit_options_create(&opts2), KJIT_OK);
    ASSERT_EQ(kjit_options_set_target(opts2, ("sm_" + std::to_string(other)).c_str()), KJIT_OK);
    ASSERT_EQ(kjit_compile(compiler_, kjit::test::kSaxpySource, opts2, &bin2), KJIT_OK)
        << last_error();
    kjit_kernel* ko = nullptr;
    ASSERT_EQ(kjit_kernel_from_binary(bin2, "saxpy", 0, 0, &ko), KJIT_OK) << last_error();
    kernels_.push_back(ko);
    EXPECT_EQ(kjit_kernel_load_path(ko), KJIT_LOAD_PTX);
    run_saxpy(ko, 1234, Mode::Args);
  }

  kjit_binary_destroy(bin);
  kjit_binary_destroy(bin2);
  kjit_options_destroy(opts);
  kjit_options_destroy(opts2);
}

TEST_F(KernelGpu, DriverAndRuntimePointersBothWork) {
  void* rt = dlopen("libcudart.so.13", RTLD_NOW | RTLD_LOCAL);
  if (!rt) rt = dlopen("/usr/local/cuda/lib64/libcudart.so.13", RTLD_NOW | RTLD_LOCAL);
  if (!rt) rt = dlopen("libcudart.so", RTLD_NOW | RTLD_LOCAL);
  if (!rt) GTEST_SKIP() << "CUDA runtime library not found: " << dlerror();
  using SetDevice = int (*)(int);
  using Malloc = int (*)(void**, size_t);
  using Free = int (*)(void*);
  using Memcpy = int (*)(void*, const void*, size_t, int);
  using StreamCreate = int (*)(void**);
  using StreamSync = int (*)(void*);
  using StreamDestroy = int (*)(void*);
  auto set_device = reinterpret_cast<SetDevice>(dlsym(rt, "cudaSetDevice"));
  auto rt_malloc = reinterpret_cast<Malloc>(dlsym(rt, "cudaMalloc"));
  auto rt_free = reinterpret_cast<Free>(dlsym(rt, "cudaFree"));
  auto rt_memcpy = reinterpret_cast<Memcpy>(dlsym(rt, "cudaMemcpy"));
  auto stream_create = reinterpret_cast<StreamCreate>(dlsym(rt, "cudaStreamCreate"));
  auto stream_sync = reinterpret_cast<StreamSync>(dlsym(rt, "cudaStreamSynchronize"));
  auto stream_destroy = reinterpret_cast<StreamDestroy>(dlsym(rt, "cudaStreamDestroy"));
  ASSERT_TRUE(set_device && rt_malloc && rt_free && rt_memcpy && stream_create && stream_sync &&
              stream_destroy);
  ASSERT_EQ(set_device(0), 0);

  kjit_kernel* k = make(kjit::test::kSaxpySource, "saxpy");
  ASSERT_NE(k, nullptr);
  const size_t n = 10007;
  std::vector<float> x = random_floats(n, 3), y = random_floats(n, 4), want(n);
  const float a = -0.75f;
  for (size_t i = 0; i < n; ++i) want[i] = a * x[i] + y[i];
  void* rx = nullptr;
  ASSERT_EQ(rt_malloc(&rx, n * sizeof(float)), 0);
  ASSERT_EQ(rt_memcpy(rx, x.data(), n * sizeof(float), 1 /* host to device */), 0);
  DevBuf dy(n * sizeof(float));
  dy.upload(y.data());
  void* stream = nullptr;
  ASSERT_EQ(stream_create(&stream), 0);

  kjit_launch_config cfg = KJIT_LAUNCH_CONFIG_INIT;
  cfg.block[0] = 128;
  cfg.grid[0] = static_cast<uint32_t>((n + 127) / 128);
  cfg.stream = stream;  // a cudaStream_t
  uint64_t xp = reinterpret_cast<uintptr_t>(rx);
  int count = static_cast<int>(n);
  void* args[] = {const_cast<float*>(&a), &xp, &dy.ptr, &count};
  ASSERT_EQ(kjit_kernel_launch(k, &cfg, args, 4), KJIT_OK) << last_error();
  ASSERT_EQ(stream_sync(stream), 0);
  std::vector<float> got(n);
  dy.download(got.data());
  expect_close(got, want, "cudaMalloc x + cuMemAlloc y");

  // And the other way round: result in runtime memory.
  void* ry = nullptr;
  ASSERT_EQ(rt_malloc(&ry, n * sizeof(float)), 0);
  ASSERT_EQ(rt_memcpy(ry, y.data(), n * sizeof(float), 1), 0);
  DevBuf dx(n * sizeof(float));
  dx.upload(x.data());
  uint64_t yp = reinterpret_cast<uintptr_t>(ry);
  void* args2[] = {const_cast<float*>(&a), &dx.ptr, &yp, &count};
  ASSERT_EQ(kjit_kernel_launch(k, &cfg, args2, 4), KJIT_OK) << last_error();
  ASSERT_EQ(stream_sync(stream), 0);
  ASSERT_EQ(rt_memcpy(got.data(), ry, n * sizeof(float), 2 /* device to host */), 0);
  expect_close(got, want, "cuMemAlloc x + cudaMalloc y");

  stream_destroy(stream);
  rt_free(rx);
  rt_free(ry);
}

TEST_F(KernelGpu, ClusterLaunch) {
  if (cc_ < 90) GTEST_SKIP() << "thread-block clusters need sm_90 or newer, device is sm_" << cc_;
  kjit_kernel* k = make(kClusterSource, "cluster_info");
  ASSERT_NE(k, nullptr);
  const unsigned blocks = 8;
  DevBuf out(blocks * 2 * sizeof(unsigned));
  kjit_launch_config cfg = KJIT_LAUNCH_CONFIG_INIT;
  cfg.grid[0] = blocks;
  cfg.block[0] = 32;
  void* args[] = {&out.ptr};
  for (unsigned cluster : {1u, 2u, 4u}) {
    cfg.cluster[0] = cluster == 1 ? 0 : cluster;  // {0,0,0} = no cluster
    ASSERT_EQ(kjit_kernel_launch(k, &cfg, args, 1), KJIT_OK) << last_error();
    CU_ASSERT(D().cuCtxSynchronize());
    std::vector<unsigned> got(blocks * 2);
    out.download(got.data());
    for (unsigned b = 0; b < blocks; ++b) {
      EXPECT_EQ(got[2 * b + 1], cluster) << "cluster size seen by block " << b;
      EXPECT_EQ(got[2 * b], b % cluster) << "rank of block " << b;
    }
  }
  // A grid that is not a multiple of the cluster is rejected by the driver, with its name.
  cfg.grid[0] = 7;
  cfg.cluster[0] = 2;
  EXPECT_EQ(kjit_kernel_launch(k, &cfg, args, 1), KJIT_ERROR_CUDA);
  EXPECT_NE(last_error().find("CUDA_ERROR_"), std::string::npos) << last_error();
  EXPECT_NE(last_error().find("cluster 2x1x1"), std::string::npos) << last_error();
}

TEST_F(KernelGpu, CooperativeLaunch) {
  kjit_kernel* k = make(kjit::test::kSaxpySource, "saxpy");
  ASSERT_NE(k, nullptr);
  run_saxpy(k, 4000, Mode::Args, nullptr, 1);
  run_saxpy(k, 4000, Mode::Packed, nullptr, 1);
  // More blocks than can be co-resident: the driver's error comes back by name.
  DevBuf dx(16), dy(16);
  float a = 1;
  int n = 0;
  void* args[] = {&a, &dx.ptr, &dy.ptr, &n};
  kjit_launch_config cfg = KJIT_LAUNCH_CONFIG_INIT;
  cfg.grid[0] = 1u << 20;
  cfg.block[0] = 1024;
  cfg.cooperative = 1;
  EXPECT_EQ(kjit_kernel_launch(k, &cfg, args, 4), KJIT_ERROR_CUDA);
  EXPECT_NE(last_error().find("CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE"), std::string::npos)
      << last_error();
}

TEST_F(KernelGpu, DynamicSharedMemoryAboveDefaultLimit) {
  kjit_kernel* k = make(kSharedSource, "reverse_block");
  ASSERT_NE(k, nullptr);
  int optin = 0;
  CU_ASSERT(D().cuDeviceGetAttribute(&optin, CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN,
                                     cu::device_handle(0)));
  const int n = 20000;  // 80 KB of ints: above the 48 KB default
  if (optin < n * 4) GTEST_SKIP() << "device allows only " << optin << " bytes of shared memory";
  std::vector<int> in(n);
  for (int i = 0; i < n; ++i) in[size_t(i)] = i * 3 + 1;
  DevBuf din(n * 4), dout(n * 4);
  din.upload(in.data());
  kjit_launch_config cfg = KJIT_LAUNCH_CONFIG_INIT;
  cfg.block[0] = 256;
  cfg.shared_bytes = n * 4;
  int count = n;
  void* args[] = {&din.ptr, &dout.ptr, &count};
  // The launch raises the function's limit itself (no kjit_kernel_set_max_dynamic_shared).
  ASSERT_EQ(kjit_kernel_launch(k, &cfg, args, 3), KJIT_OK) << last_error();
  CU_ASSERT(D().cuCtxSynchronize());
  std::vector<int> out(n);
  dout.download(out.data());
  for (int i = 0; i < n; ++i) ASSERT_EQ(out[size_t(i)], in[size_t(n - 1 - i)]) << i;
  kjit_kernel_attributes attrs{};
  attrs.struct_size = sizeof attrs;
  ASSERT_EQ(kjit_kernel_get_attributes(k, &attrs), KJIT_OK);
  EXPECT_GE(attrs.max_dynamic_shared_bytes, n * 4);
  // Raising it by hand still works, and a launch after it too.
  ASSERT_EQ(kjit_kernel_set_max_dynamic_shared(k, n * 4), KJIT_OK) << last_error();
  ASSERT_EQ(kjit_kernel_launch(k, &cfg, args, 3), KJIT_OK) << last_error();
  CU_ASSERT(D().cuCtxSynchronize());
  EXPECT_EQ(kjit_kernel_set_max_dynamic_shared(k, 1 << 30), KJIT_ERROR_CUDA);
}

TEST_F(KernelGpu, ModulesAreSharedAndUnloadedWithTheLastHandle) {
  const size_t base = kjit::loaded_module_count();
  kjit_kernel* a = make(kjit::test::kSaxpySource, "saxpy");
  ASSERT_NE(a, nullptr);
  EXPECT_EQ(kjit::loaded_module_count(), base + 1);
  kjit_kernel* b = make(kjit::test::kSaxpySource, "saxpy");
  ASSERT_NE(b, nullptr);
  EXPECT_EQ(kjit::loaded_module_count(), base + 1) << "same code, same context: one module";
  kjit_kernel* p = make(kjit::test::kSaxpySource, "saxpy", KJIT_KERNEL_FORCE_PTX);
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(kjit::loaded_module_count(), base + 2) << "the PTX load is a module of its own";
  forget(a);
  EXPECT_EQ(kjit::loaded_module_count(), base + 2);
  run_saxpy(b, 1000, Mode::Args);
  forget(b);
  EXPECT_EQ(kjit::loaded_module_count(), base + 1);
  forget(p);
  EXPECT_EQ(kjit::loaded_module_count(), base);
}

// Each kernel's parameters come from its own function: two kernels of one program with
// different parameters, each loaded again (the second time the layout is remembered), and a
// PTX load of the same function, keep their own layouts and refuse the other's arguments.
TEST_F(KernelGpu, ParameterLayoutsAreEachKernelsOwnWhenLoadedAgain) {
  const char* const src = R"(
extern "C" __global__ void one(int* p) { *p = 1; }
extern "C" __global__ void three(char c, double d, int* p) { *p = c + int(d); }
)";
  struct Want {
    const char* name;
    unsigned flags;
    std::vector<std::pair<size_t, size_t>> params;  // offset, size
  };
  const std::vector<Want> wants = {
      {"one", 0, {{0, 8}}},
      {"three", 0, {{0, 1}, {8, 8}, {16, 8}}},
      {"three", KJIT_KERNEL_FORCE_PTX, {{0, 1}, {8, 8}, {16, 8}}},
  };
  for (int round = 0; round < 2; ++round) {
    for (const Want& w : wants) {
      kjit_kernel* k = make(src, w.name, w.flags);
      ASSERT_NE(k, nullptr);
      size_t count = 0;
      ASSERT_EQ(kjit_kernel_param_count(k, &count), KJIT_OK);
      ASSERT_EQ(count, w.params.size()) << w.name << " round " << round;
      for (size_t i = 0; i < count; ++i) {
        size_t off = 0, size = 0;
        ASSERT_EQ(kjit_kernel_param_info(k, i, &off, &size), KJIT_OK);
        EXPECT_EQ(off, w.params[i].first) << w.name << " " << i;
        EXPECT_EQ(size, w.params[i].second) << w.name << " " << i;
      }
      DevBuf out(sizeof(int));
      int32_t c = 2;
      double d = 3.0;
      void* three_args[] = {&c, &d, &out.ptr};
      void* one_args[] = {&out.ptr};
      const bool is_one = std::string(w.name) == "one";
      kjit_launch_config cfg = KJIT_LAUNCH_CONFIG_INIT;
      EXPECT_EQ(kjit_kernel_launch(k, &cfg, is_one ? three_args : one_args, is_one ? 3 : 1),
                KJIT_ERROR_ARGUMENT_MISMATCH)
          << w.name << ": the other kernel's arguments";
      ASSERT_EQ(kjit_kernel_launch(k, &cfg, is_one ? one_args : three_args, is_one ? 1 : 3),
                KJIT_OK)
          << last_error();
      ASSERT_EQ(D().cuCtxSynchronize(), CUDA_SUCCESS);
      int v = 0;
      out.download(&v);
      EXPECT_EQ(v, is_one ? 1 : 5) << w.name;
      forget(k);  // the module goes: the next round loads it again
    }
  }
}

class KernelGpuDeath : public KernelGpu {
 protected:
  // Child process body: an illegal address, then a launch that must report it as sticky.
  void sticky_child() {
    kjit_kernel* k = make(kCrashSource, "crash");
    if (!k) _exit(2);
    uint64_t bad = 8;
    void* args[] = {&bad};
    kjit_launch_config cfg = KJIT_LAUNCH_CONFIG_INIT;
    if (kjit_kernel_launch(k, &cfg, args, 1) != KJIT_OK) _exit(3);
    const CUresult r = D().cuCtxSynchronize();
    fprintf(stderr, "sync: %s\n", cu::error_text(r).c_str());
    const kjit_status st = kjit_kernel_launch(k, &cfg, args, 1);
    fprintf(stderr, "status=%d message=%s\n", st, kjit_last_error());
    _exit(st == KJIT_ERROR_CUDA_STICKY ? 0 : 4);
  }
};

TEST_F(KernelGpuDeath, StickyErrorIsReportedAsSuch) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  // Runs in a child process: the illegal address ruins the context for good.
  EXPECT_EXIT(sticky_child(), ::testing::ExitedWithCode(0),
              "status=18 .*CUDA_ERROR_ILLEGAL_ADDRESS.*sticky");
}

// Kernels that need the toolkit's headers, with no include option (the toolkit is found by
// kjit): __half arithmetic, a CUB BlockReduce and a wmma tensor-core product, each checked
// against the CPU.
TEST_F(KernelGpu, ToolkitHeaderKernelsMatchCpu) {
  // __half: y = a * x + y in half precision.
  {
    const char* src = R"(
#include <cuda_fp16.h>
extern "C" __global__ void haxpy(float a, const float* x, float* y, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = __half2float(__hfma(__float2half(a), __float2half(x[i]), __float2half(y[i])));
}
)";
    kjit_kernel* k = make(src, "haxpy");
    ASSERT_NE(k, nullptr);
    const int n = 1000;
    std::vector<float> x = random_floats(n, 7), y = random_floats(n, 8), got(n);
    DevBuf dx(n * 4), dy(n * 4);
    dx.upload(x.data());
    dy.upload(y.data());
    float a = 1.5f;
    int count = n;
    void* args[] = {&a, &dx.ptr, &dy.ptr, &count};
    kjit_launch_config cfg = KJIT_LAUNCH_CONFIG_INIT;
    cfg.grid[0] = (n + 255) / 256;
    cfg.block[0] = 256;
    ASSERT_EQ(kjit_kernel_launch(k, &cfg, args, 4), KJIT_OK) << last_error();
    CU_ASSERT(D().cuCtxSynchronize());
    dy.download(got.data());
    size_t bad = 0;
    for (int i = 0; i < n; ++i) {
      const float want = a * x[i] + y[i];
      if (std::fabs(got[i] - want) > 0.02f * std::fabs(want) + 0.02f && ++bad <= 5) {
        ADD_FAILURE() << "haxpy[" << i << "] got " << got[i] << " want " << want;
      }
    }
    EXPECT_EQ(bad, 0u);
  }
  // CUB BlockReduce: one sum per block of 256.
  {
    kjit_kernel* k = make(kjit::test::kCubReduceSource, "block_sum");
    ASSERT_NE(k, nullptr);
    const int n = 256 * 40 + 17, blocks = (n + 255) / 256;
    std::vector<float> in = random_floats(n, 9), got(blocks);
    DevBuf din(n * 4), dout(blocks * 4);
    din.upload(in.data());
    int count = n;
    void* args[] = {&din.ptr, &dout.ptr, &count};
    kjit_launch_config cfg = KJIT_LAUNCH_CONFIG_INIT;
    cfg.grid[0] = blocks;
    cfg.block[0] = 256;
    ASSERT_EQ(kjit_kernel_launch(k, &cfg, args, 3), KJIT_OK) << last_error();
    CU_ASSERT(D().cuCtxSynchronize());
    dout.download(got.data());
    for (int b = 0; b < blocks; ++b) {
      double want = 0;
      for (int i = b * 256; i < std::min(n, (b + 1) * 256); ++i) want += in[i];
      EXPECT_NEAR(got[b], want, 1e-3 * std::fabs(want) + 1e-3) << "block " << b;
    }
  }
  // wmma: one 16x16x16 half-precision product with float accumulation.
  {
    const char* src = R"(
#include <mma.h>
#include <cuda_fp16.h>
extern "C" __global__ void wmma16(const float* a, const float* b, float* c) {
  __shared__ __half ha[256], hb[256];
  for (int i = threadIdx.x; i < 256; i += 32) { ha[i] = __float2half(a[i]); hb[i] = __float2half(b[i]); }
  __syncwarp();
  using namespace nvcuda;
  wmma::fragment<wmma::matrix_a, 16, 16, 16, __half, wmma::row_major> fa;
  wmma::fragment<wmma::matrix_b, 16, 16, 16, __half, wmma::row_major> fb;
  wmma::fragment<wmma::accumulator, 16, 16, 16, float> fc;
  wmma::fill_fragment(fc, 0.0f);
  wmma::load_matrix_sync(fa, ha, 16);
  wmma::load_matrix_sync(fb, hb, 16);
  wmma::mma_sync(fc, fa, fb, fc);
  wmma::store_matrix_sync(c, fc, 16, wmma::mem_row_major);
}
)";
    kjit_kernel* k = make(src, "wmma16");
    ASSERT_NE(k, nullptr);
    std::vector<float> a(256), b(256), got(256);
    std::mt19937 rng(11);
    std::uniform_int_distribution<int> small(-3, 3);  // exact in half precision
    for (int i = 0; i < 256; ++i) {
      a[i] = float(small(rng));
      b[i] = float(small(rng));
    }
    DevBuf da(1024), db(1024), dc(1024);
    da.upload(a.data());
    db.upload(b.data());
    void* args[] = {&da.ptr, &db.ptr, &dc.ptr};
    kjit_launch_config cfg = KJIT_LAUNCH_CONFIG_INIT;
    cfg.block[0] = 32;
    ASSERT_EQ(kjit_kernel_launch(k, &cfg, args, 3), KJIT_OK) << last_error();
    CU_ASSERT(D().cuCtxSynchronize());
    dc.download(got.data());
    for (int r = 0; r < 16; ++r) {
      for (int c = 0; c < 16; ++c) {
        float want = 0;
        for (int x = 0; x < 16; ++x) want += a[r * 16 + x] * b[x * 16 + c];
        EXPECT_EQ(got[r * 16 + c], want) << r << "," << c;
      }
    }
  }
}

}  // namespace
