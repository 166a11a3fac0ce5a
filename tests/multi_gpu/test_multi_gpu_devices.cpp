// Two GPUs: device ordinals that do not exist, CUDA_VISIBLE_DEVICES reordering (in child
// processes), and a primary-context reset on device 1 while device 0 keeps launching.
#include "multi_gpu/multi_gpu.h"

namespace {

using namespace kjit::test::multi_gpu;  // NOLINT(google-build-using-namespace)

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
    EXPECT_EQ(kjit_kernel_create(compiler_, kjit::test::kSaxpySource, "saxpy", nullptr, bad, 0, &k,
                                 nullptr),
              KJIT_ERROR_CUDA_UNAVAILABLE);
    EXPECT_TRUE(contains(last_error(), says)) << last_error();
    EXPECT_TRUE(contains(last_error(), "has " + std::to_string(count) + " devices"))
        << last_error();
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
    EXPECT_EQ(kjit_kernel_create(compiler_, kjit::test::kSaxpySource, "saxpy", nullptr, neg, 0, &k,
                                 nullptr),
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
  const int rc =
      run_child("MultiGpuChild.Reordered", {{"CUDA_VISIBLE_DEVICES", visible_devices("1,0")},
                                            {"KJIT_MULTI_GPU_CHILD", swapped},
                                            {"KJIT_MULTI_GPU_CACHE", cache_dir_->path()},
                                            {"KJIT_MULTI_GPU_PCI", pci1 + "," + pci0}});
  EXPECT_EQ(rc, 0) << "child with devices swapped";
  EXPECT_EQ(read_text(swapped), "ok swapped count=2 compiles=0");

  const std::string narrowed = out.file("narrowed");
  const int rc1 =
      run_child("MultiGpuChild.Narrowed", {{"CUDA_VISIBLE_DEVICES", visible_devices("1")},
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
  EXPECT_EQ(
      kjit_kernel_create(compiler_, kjit::test::kSaxpySource, "saxpy", nullptr, 1, 0, &k, nullptr),
      KJIT_ERROR_CUDA_UNAVAILABLE);
  EXPECT_TRUE(contains(last_error(), "CUDA device 1 does not exist (this machine has 1 device)"))
      << last_error();
  kjit_gemm* g = nullptr;
  EXPECT_EQ(kjit_gemm_create(nullptr, 1, nullptr, &g), KJIT_ERROR_CUDA_UNAVAILABLE);
  run_on(0);
  report("narrowed count=" + std::to_string(count));
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
  while (launched.load() < 500 && device0_error.empty())
    std::this_thread::sleep_for(std::chrono::milliseconds(1));

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
