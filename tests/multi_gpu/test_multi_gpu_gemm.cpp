// Two GPUs: GEMM handles per device (workspaces, plans shared through the cache only where
// the validators allow).
#include "multi_gpu/multi_gpu.h"

namespace {

using namespace kjit::test::multi_gpu;  // NOLINT(google-build-using-namespace)

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
  const bool shareable =
      kjit::blas::validators(i0) == kjit::blas::validators(i1) && i0.sm_count == i1.sm_count;
  std::printf("device 0: %s (%d SMs), device 1: %s (%d SMs): plans %s\n",
              kjit::blas::validators(i0).c_str(), i0.sm_count, kjit::blas::validators(i1).c_str(),
              i1.sm_count, shareable ? "shared" : "not shared");
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

}  // namespace
