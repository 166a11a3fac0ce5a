// GEMM plans on a GPU: the plan cache's tiers, pointer alignment, persistence across
// processes, self-healing of damaged plans, autotuning and concurrent use. Skips cleanly
// without a GPU.
#include "gemm_gpu/gemm_gpu.h"

namespace {

using namespace kjit::test::gemm_gpu;  // NOLINT(google-build-using-namespace)

TEST_F(GemmGpu, MemoryTierCounts) {
  kjit_gemm_options o = KJIT_GEMM_OPTIONS_INIT;
  o.plan_capacity = 2;
  kjit_gemm* g = create(nullptr, &o);
  ASSERT_NE(g, nullptr);
  Case c = plan_case();
  run_case(g, c);
  kjit_gemm_stats s = stats(g);
  EXPECT_EQ(s.runs, 1u);
  EXPECT_EQ(s.misses, 1u);
  EXPECT_EQ(s.memory_hits, 0u);
  EXPECT_EQ(s.heuristic_queries, 1u);
  EXPECT_EQ(s.plans, 1u);
  EXPECT_EQ(s.disk_hits + s.disk_writes + s.disk_rejected + s.autotunes, 0u);
  run_case(g, c);
  s = stats(g);
  EXPECT_EQ(s.memory_hits, 1u);
  EXPECT_EQ(s.heuristic_queries, 1u);
  // Another shape, then a third: the least recently used plan goes.
  c.k = 64;
  run_case(g, c);
  c.k = 65;
  run_case(g, c);
  s = stats(g);
  EXPECT_EQ(s.misses, 3u);
  EXPECT_EQ(s.plans, 2u);
  EXPECT_EQ(s.evictions, 1u);
  c.k = 63;  // evicted
  run_case(g, c);
  c.k = 65;  // still there
  run_case(g, c);
  s = stats(g);
  EXPECT_EQ(s.misses, 4u);
  EXPECT_EQ(s.memory_hits, 2u);
  EXPECT_EQ(s.heuristic_queries, 4u);
  EXPECT_EQ(s.runs, 6u);
  EXPECT_EQ(kjit_gemm_clear_plans(g), KJIT_OK);
  EXPECT_EQ(stats(g).plans, 0u);
  run_case(g, c);
  EXPECT_EQ(stats(g).misses, 5u);
  kjit_gemm_destroy(g);
}

TEST_F(GemmGpu, PointerAlignmentSelectsPlans) {
  kjit_gemm* g = create();
  ASSERT_NE(g, nullptr);
  DevMem A(64 * 64 * 2 + 512), B(64 * 64 * 2 + 512), D(64 * 64 * 2 + 512);
  std::vector<uint8_t> zeros(64 * 64 * 2 + 512, 0);
  A.upload(zeros);
  B.upload(zeros);
  kjit_gemm_desc d = KJIT_GEMM_DESC_INIT;
  d.m = d.n = d.k = 64;
  d.a_type = KJIT_GEMM_BF16;
  char* a = static_cast<char*>(A.get());
  ASSERT_EQ(kjit_gemm_run(g, &d, a, B.get(), nullptr, D.get(), nullptr, nullptr), KJIT_OK)
      << kjit_last_error();
  ASSERT_EQ(kjit_gemm_run(g, &d, a + 2, B.get(), nullptr, D.get(), nullptr, nullptr), KJIT_OK)
      << kjit_last_error();
  ASSERT_EQ(kjit_gemm_run(g, &d, a + 256, B.get(), nullptr, D.get(), nullptr, nullptr), KJIT_OK)
      << kjit_last_error();
  const kjit_gemm_stats s = stats(g);
  EXPECT_EQ(s.misses, 2u);       // 256-aligned and 2-aligned A
  EXPECT_EQ(s.memory_hits, 1u);  // a + 256 is as aligned as a
  // A misaligned pointer is refused before the device sees it.
  EXPECT_EQ(kjit_gemm_run(g, &d, a + 1, B.get(), nullptr, D.get(), nullptr, nullptr),
            KJIT_ERROR_INVALID_ARGUMENT);
  kjit_gemm_destroy(g);
}

TEST_F(GemmGpu, DiskTierInProcess) {
  kjit::test::TempDir dir;
  kjit_cache* cache = open_cache(dir.path());
  ASSERT_NE(cache, nullptr);
  const Case c = plan_case();
  kjit_gemm* g1 = create(cache);
  ASSERT_NE(g1, nullptr);
  run_case(g1, c);
  kjit_gemm_stats s = stats(g1);
  EXPECT_EQ(s.misses, 1u);
  EXPECT_EQ(s.disk_writes, 1u);
  EXPECT_EQ(s.heuristic_queries, 1u);
  // Memory tier dropped: the same handle reads the plan back from disk.
  ASSERT_EQ(kjit_gemm_clear_plans(g1), KJIT_OK);
  run_case(g1, c);
  s = stats(g1);
  EXPECT_EQ(s.disk_hits, 1u);
  EXPECT_EQ(s.heuristic_queries, 1u);
  kjit_gemm_destroy(g1);
  // A new handle on the same cache: no heuristic query at all.
  kjit_gemm* g2 = create(cache);
  ASSERT_NE(g2, nullptr);
  run_case(g2, c);
  run_case(g2, c);
  s = stats(g2);
  EXPECT_EQ(s.disk_hits, 1u);
  EXPECT_EQ(s.memory_hits, 1u);
  EXPECT_EQ(s.misses, 0u);
  EXPECT_EQ(s.heuristic_queries, 0u);
  EXPECT_EQ(s.disk_writes, 0u);
  kjit_gemm_destroy(g2);
  kjit_cache_close(cache);
}

TEST_F(GemmGpu, SecondProcessReusesPersistedPlan) {
  kjit::test::TempDir dir;
  {
    kjit_cache* cache = open_cache(dir.path());
    ASSERT_NE(cache, nullptr);
    kjit_gemm* g = create(cache);
    ASSERT_NE(g, nullptr);
    run_case(g, plan_case());
    EXPECT_EQ(stats(g).disk_writes, 1u);
    kjit_gemm_destroy(g);
    kjit_cache_close(cache);
  }
  const std::string report = dir.file("report");
  const std::string exe = self_exe();
  ASSERT_FALSE(exe.empty());
  const pid_t pid = fork();
  if (pid == 0) {
    setenv("KJIT_GEMM_TEST_CHILD", report.c_str(), 1);
    setenv("KJIT_GEMM_TEST_CACHE", dir.path().c_str(), 1);
    execl(exe.c_str(), exe.c_str(), "--gtest_filter=GemmGpuChild.ReusePersistedPlan",
          static_cast<char*>(nullptr));
    _exit(127);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "child status " << status;
  std::ifstream in(report);
  std::stringstream got;
  got << in.rdbuf();
  EXPECT_EQ(got.str(), "ok heuristic_queries=0 disk_hits=1 misses=0");
}

TEST(GemmGpuChild, ReusePersistedPlan) {
  const char* report = std::getenv("KJIT_GEMM_TEST_CHILD");
  const char* dir = std::getenv("KJIT_GEMM_TEST_CACHE");
  if (!report || !dir)
    GTEST_SKIP() << "runs in a child of GemmGpu.SecondProcessReusesPersistedPlan";
  std::ofstream out(report, std::ios::trunc);
  check(driver().cuCtxSetCurrent(kjit::cuda::primary_context(0)), "cuCtxSetCurrent");
  kjit_cache* cache = open_cache(dir);
  ASSERT_NE(cache, nullptr);
  kjit_gemm* g = nullptr;
  ASSERT_EQ(kjit_gemm_create(cache, 0, nullptr, &g), KJIT_OK) << kjit_last_error();
  run_case(g, plan_case());
  kjit_gemm_stats s{};
  s.struct_size = sizeof s;
  ASSERT_EQ(kjit_gemm_stats_get(g, &s), KJIT_OK);
  kjit_gemm_destroy(g);
  kjit_cache_close(cache);
  if (!::testing::Test::HasFailure())
    out << "ok heuristic_queries=" << s.heuristic_queries << " disk_hits=" << s.disk_hits
        << " misses=" << s.misses;
}

TEST_F(GemmGpu, DamagedRecordIsHealed) {
  kjit::test::TempDir dir;
  kjit_cache* cache = open_cache(dir.path());
  ASSERT_NE(cache, nullptr);
  const Case c = plan_case();
  kjit_gemm* g = create(cache);
  ASSERT_NE(g, nullptr);
  run_case(g, c);
  kjit_gemm_destroy(g);

  // Find the record the handle wrote (device buffers from cuMemAlloc are 256-aligned,
  // as the ones run_case allocates).
  DevMem probe(256), probe_d(256);  // distinct C and D, as in run_case
  const std::string key = persisted_key_of(c, probe.get(), probe.get(), probe.get(), probe_d.get());
  kjit::Cache& kv = *cache->cache;
  std::optional<std::string> rec = kv.facts().get_value(kjit::blas::kPlanNamespace, key);
  ASSERT_TRUE(rec.has_value()) << "record not found under the computed key";
  std::string bad = *rec;
  bad[bad.size() / 2] = char(bad[bad.size() / 2] ^ 0x10);
  kv.facts().put_value(kjit::blas::kPlanNamespace, key, bad);

  g = create(cache);
  ASSERT_NE(g, nullptr);
  run_case(g, c);
  kjit_gemm_stats s = stats(g);
  EXPECT_EQ(s.disk_rejected, 1u);
  EXPECT_EQ(s.disk_hits, 0u);
  EXPECT_EQ(s.misses, 1u);
  EXPECT_EQ(s.heuristic_queries, 1u);
  EXPECT_EQ(s.disk_writes, 1u);  // overwritten
  kjit_gemm_destroy(g);
  const auto healed = kv.facts().get_value(kjit::blas::kPlanNamespace, key);
  ASSERT_TRUE(healed.has_value());
  EXPECT_NE(*healed, bad);
  std::string why;
  const kjit::blas::PlanKey pk = [&] {
    kjit_gemm_desc d = KJIT_GEMM_DESC_INIT;
    d.order = c.order;
    d.m = c.m;
    d.n = c.n;
    d.k = c.k;
    d.a_type = c.a;
    const auto dev = kjit::blas::query_device(0);
    return kjit::blas::make_key(
        kjit::blas::prepare(&d, probe.get(), probe.get(), probe.get(), probe_d.get(), nullptr), dev,
        kjit::blas::GemmOptions().max_workspace);
  }();
  EXPECT_TRUE(kjit::blas::decode_plan(*healed, pk,
                                      kjit::blas::validators(kjit::blas::query_device(0)), &why))
      << why;

  g = create(cache);
  ASSERT_NE(g, nullptr);
  run_case(g, c);
  s = stats(g);
  EXPECT_EQ(s.disk_hits, 1u);
  EXPECT_EQ(s.disk_rejected, 0u);
  EXPECT_EQ(s.heuristic_queries, 0u);
  kjit_gemm_destroy(g);
  kjit_cache_close(cache);
}

TEST_F(GemmGpu, AlgorithmFailingAlgoCheckIsHealed) {
  kjit::test::TempDir dir;
  kjit_cache* cache = open_cache(dir.path());
  ASSERT_NE(cache, nullptr);
  const Case c = plan_case();
  Case f64 = c;
  f64.name = "f64 127x255x63 row-major";
  f64.a = KJIT_GEMM_F64;
  f64.tol = 1e-12;
  kjit_gemm* g = create(cache);
  ASSERT_NE(g, nullptr);
  run_case(g, c);
  run_case(g, f64);
  kjit_gemm_destroy(g);

  // A well-formed record (right key, validators and checksum) whose algorithm is one
  // cuBLASLt picked for another problem (an f64 GEMM): only cublasLtMatmulAlgoCheck can
  // tell, and the handle must re-plan instead of running it.
  DevMem probe(256), probe_d(256);  // distinct C and D, as in run_case
  const void* p = probe.get();
  const void* pd_ptr = probe_d.get();
  const kjit::blas::DeviceInfo dev = kjit::blas::query_device(0);
  const std::string vals = kjit::blas::validators(dev);
  const auto key_of = [&](int32_t type) {
    kjit_gemm_desc d = KJIT_GEMM_DESC_INIT;
    d.order = c.order;
    d.m = c.m;
    d.n = c.n;
    d.k = c.k;
    d.a_type = type;
    return kjit::blas::make_key(kjit::blas::prepare(&d, p, p, p, pd_ptr, nullptr), dev,
                                kjit::blas::GemmOptions().max_workspace);
  };
  const kjit::blas::PlanKey kb = key_of(KJIT_GEMM_BF16), kd = key_of(KJIT_GEMM_F64);
  kjit::Cache& kv = *cache->cache;
  const auto rb =
      kv.facts().get_value(kjit::blas::kPlanNamespace, kjit::blas::persist_key(kb, vals));
  const auto rd =
      kv.facts().get_value(kjit::blas::kPlanNamespace, kjit::blas::persist_key(kd, vals));
  ASSERT_TRUE(rb && rd);
  std::string why;
  auto pb = kjit::blas::decode_plan(*rb, kb, vals, &why);
  const auto pd = kjit::blas::decode_plan(*rd, kd, vals, &why);
  ASSERT_TRUE(pb && pd) << why;
  ASSERT_NE(pb->algo, pd->algo);
  pb->algo = pd->algo;
  kv.facts().put_value(kjit::blas::kPlanNamespace, kjit::blas::persist_key(kb, vals),
                       kjit::blas::encode_plan(kb, vals, *pb));

  g = create(cache);
  ASSERT_NE(g, nullptr);
  run_case(g, c);
  kjit_gemm_stats s = stats(g);
  EXPECT_EQ(s.disk_rejected, 1u);
  EXPECT_EQ(s.heuristic_queries, 1u);
  EXPECT_EQ(s.disk_writes, 1u);
  kjit_gemm_destroy(g);
  g = create(cache);
  ASSERT_NE(g, nullptr);
  run_case(g, c);
  s = stats(g);
  EXPECT_EQ(s.disk_hits, 1u);
  EXPECT_EQ(s.heuristic_queries, 0u);
  kjit_gemm_destroy(g);
  kjit_cache_close(cache);
}

TEST_F(GemmGpu, AutotuneKeepsTheCallersDataIntact) {
  kjit::test::TempDir dir;
  kjit_cache* cache = open_cache(dir.path());
  ASSERT_NE(cache, nullptr);
  kjit_gemm_options o = KJIT_GEMM_OPTIONS_INIT;
  o.autotune = 1;
  o.autotune_candidates = 4;
  o.autotune_reps = 3;
  kjit_gemm* g = create(cache, &o);
  ASSERT_NE(g, nullptr);
  // D = alpha*A*B + 1*D: trial runs that wrote D would accumulate into the result.
  Case c;
  c.name = "bf16 256^3 autotuned, C == D, beta 1";
  c.a = KJIT_GEMM_BF16;
  c.tol = 1e-2;
  c.m = c.n = c.k = 256;
  c.beta = 1.0;
  c.in_place = true;
  run_case(g, c);
  kjit_gemm_stats s = stats(g);
  EXPECT_EQ(s.autotunes, 1u);
  EXPECT_EQ(s.misses, 1u);
  EXPECT_EQ(s.heuristic_queries, 1u);
  EXPECT_EQ(s.disk_writes, 1u);
  run_case(g, c);
  EXPECT_EQ(stats(g).autotunes, 1u);
  kjit_gemm_destroy(g);
  // A heuristic handle takes the tuned plan from disk.
  g = create(cache);
  ASSERT_NE(g, nullptr);
  run_case(g, c);
  s = stats(g);
  EXPECT_EQ(s.disk_hits, 1u);
  EXPECT_EQ(s.heuristic_queries, 0u);
  // ... and its own heuristic plans are re-tuned by an autotuning handle.
  Case h = plan_case();
  run_case(g, h);
  kjit_gemm_destroy(g);
  g = create(cache, &o);
  ASSERT_NE(g, nullptr);
  run_case(g, h);
  s = stats(g);
  EXPECT_EQ(s.autotunes, 1u);
  EXPECT_EQ(s.disk_hits, 0u);
  EXPECT_EQ(s.disk_writes, 1u);
  kjit_gemm_destroy(g);
  kjit_cache_close(cache);
}

TEST_F(GemmGpu, ThreadsAndStreamsShareOneHandle) {
  kjit_gemm* g = create();
  ASSERT_NE(g, nullptr);
  const CUcontext ctx = kjit::cuda::primary_context(0);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      check(driver().cuCtxSetCurrent(ctx), "cuCtxSetCurrent");
      CUstream s = nullptr;
      check(driver().cuStreamCreate(&s, CU_STREAM_NON_BLOCKING), "cuStreamCreate");
      for (int i = 0; i < 6; ++i) {
        Case c;
        c.a = i % 2 ? KJIT_GEMM_BF16 : KJIT_GEMM_F32;
        c.tol = i % 2 ? 1e-2 : 1e-5;
        c.m = 64 + 32 * (i % 3);
        c.n = 96;
        c.k = 128;
        c.epilogue = i % 2 ? KJIT_GEMM_EPILOGUE_BIAS : KJIT_GEMM_EPILOGUE_NONE;
        c.name = "thread " + std::to_string(t) + " run " + std::to_string(i);
        run_case(g, c, s);
      }
      driver().cuStreamDestroy(s);
    });
  }
  for (auto& th : threads) th.join();
  const kjit_gemm_stats s = stats(g);
  EXPECT_EQ(s.runs, 24u);
  EXPECT_EQ(s.memory_hits + s.misses, 24u);
  EXPECT_LE(s.plans, 6u);
  kjit_gemm_destroy(g);
}

}  // namespace
