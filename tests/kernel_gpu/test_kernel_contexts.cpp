// Kernels on a real GPU: stale-handle recovery after a context reset, threads and streams,
// PTX fallback, runtime interop, cluster and cooperative launches, large dynamic shared
// memory, and modules shared between handles.
#include "kernel_gpu/kernel_gpu.h"

namespace {

using namespace kjit::test::kernel_gpu;  // NOLINT(google-build-using-namespace)

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

}  // namespace
