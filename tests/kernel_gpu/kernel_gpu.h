// The kernel GPU tests' shared parts (tests/kernel_gpu/): sources, device buffers, the saxpy
// check and the fixture, in one namespace (GoogleTest wants one fixture class for a suite in
// all files). Every test skips with the reason when no CUDA driver or device is present.
#pragma once

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

namespace kjit::test::kernel_gpu {

namespace cu = kjit::cuda;

inline const cu::Driver& D() {
  return cu::driver();
}

inline std::string last_error() {
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

inline std::vector<float> random_floats(size_t n, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-4.0f, 4.0f);
  std::vector<float> v(n);
  for (float& f : v) f = dist(rng);
  return v;
}

inline void expect_close(const std::vector<float>& got, const std::vector<float>& want,
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

  static inline kjit::test::TempDir* cache_dir_ = nullptr;
  kjit_cache* cache_ = nullptr;
  kjit_compiler* compiler_ = nullptr;
  std::vector<kjit_kernel*> kernels_;
  CUcontext ctx_ = nullptr;
  int cc_ = 0;
};

}  // namespace kjit::test::kernel_gpu
