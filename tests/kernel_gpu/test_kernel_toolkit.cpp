// Kernels on a real GPU: a sticky error reported as such (in a death test), and kernels that
// use the toolkit's headers matching the CPU.
#include "kernel_gpu/kernel_gpu.h"

namespace {

using namespace kjit::test::kernel_gpu;  // NOLINT(google-build-using-namespace)

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
