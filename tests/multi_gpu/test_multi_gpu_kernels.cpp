// Two GPUs in one process: kernels for both devices from one compile, launches that stay in
// each device's primary context whatever context the calling thread has, threads driving
// both devices at once, and peer access enabled by the caller.
#include "multi_gpu/multi_gpu.h"

namespace {

using namespace kjit::test::multi_gpu;  // NOLINT(google-build-using-namespace)

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
          EXPECT_EQ(current_context(), cur.ctx)
              << "the caller's context (" << cur.name << ") must be left current";
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
      const kjit_status st = (i + t) % 4 == 0 ? kjit_kernel_launch_packed(
                                                    k[p.device], &cfg, packed.data(), packed.size())
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

}  // namespace
