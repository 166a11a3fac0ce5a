// GEMM plans through the fleet tier (Redis): one node autotunes, another process takes its
// plans. Skips cleanly without a GPU or a redis-server.
#include "gemm_gpu/gemm_gpu.h"

namespace {

using namespace kjit::test::gemm_gpu;  // NOLINT(google-build-using-namespace)

// ---- plans through the fleet tier (Redis) ------------------------------------------------

// The shapes node A autotunes and node B then runs.
std::vector<Case> fleet_cases() {
  std::vector<Case> cases;
  for (int i = 0; i < 3; ++i) {
    Case c;
    c.name = "fleet bf16 " + std::to_string(i);
    c.a = KJIT_GEMM_BF16;
    c.tol = 1e-2;
    c.m = 128 + 64 * i;
    c.n = 192;
    c.k = 96 + 32 * i;
    cases.push_back(c);
  }
  return cases;
}

kjit_gemm_options autotuned() {
  kjit_gemm_options o = KJIT_GEMM_OPTIONS_INIT;
  o.autotune = 1;
  o.autotune_candidates = 4;
  o.autotune_reps = 3;
  return o;
}

// Node A (this process, its own cache directory) autotunes the shapes and publishes the
// plans; node B (a child process with another directory, same server) runs them with no
// heuristic query and no autotune, and its results match the reference.
TEST_F(GemmGpu, FleetNodeTakesTunedPlansFromRedis) {
  if (std::system("command -v redis-server >/dev/null 2>&1") != 0)
    GTEST_SKIP() << "redis-server not installed";
  kjit::test::TempDir redis_dir, a_dir, b_dir;
  const std::string sock = redis_dir.file("redis.sock");
  const pid_t redis = fork();
  if (redis == 0) {
    execlp("redis-server", "redis-server", "--port", "0", "--unixsocket", sock.c_str(), "--save",
           "", "--appendonly", "no", "--dir", redis_dir.path().c_str(),
           static_cast<char*>(nullptr));
    _exit(127);
  }
  for (int i = 0; i < 300 && access(sock.c_str(), F_OK) != 0; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  setenv("KJIT_REMOTE", ("unix://" + sock).c_str(), 1);
  {
    kjit_cache* cache = open_cache(a_dir.path());
    ASSERT_NE(cache, nullptr);
    const kjit_gemm_options o = autotuned();
    kjit_gemm* g = create(cache, &o);
    ASSERT_NE(g, nullptr);
    for (const Case& c : fleet_cases()) run_case(g, c);
    const kjit_gemm_stats s = stats(g);
    EXPECT_EQ(s.autotunes, fleet_cases().size());
    EXPECT_EQ(s.disk_writes, fleet_cases().size());
    kjit_gemm_destroy(g);
    kjit_cache_close(cache);
  }
  const std::string report = b_dir.file("report");
  const std::string exe = self_exe();
  const pid_t pid = fork();
  if (pid == 0) {
    setenv("KJIT_GEMM_TEST_FLEET_CHILD", report.c_str(), 1);
    setenv("KJIT_GEMM_TEST_CACHE", b_dir.path().c_str(), 1);
    execl(exe.c_str(), exe.c_str(), "--gtest_filter=GemmGpuChild.FleetNodeB",
          static_cast<char*>(nullptr));
    _exit(127);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  unsetenv("KJIT_REMOTE");
  kill(redis, SIGKILL);
  waitpid(redis, nullptr, 0);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "child status " << status;
  std::ifstream in(report);
  std::stringstream got;
  got << in.rdbuf();
  EXPECT_EQ(got.str(),
            "ok heuristic_queries=0 autotunes=0 disk_hits=" + std::to_string(fleet_cases().size()));
}

TEST(GemmGpuChild, FleetNodeB) {
  const char* report = std::getenv("KJIT_GEMM_TEST_FLEET_CHILD");
  const char* dir = std::getenv("KJIT_GEMM_TEST_CACHE");
  if (!report || !dir)
    GTEST_SKIP() << "runs in a child of GemmGpu.FleetNodeTakesTunedPlansFromRedis";
  std::ofstream out(report, std::ios::trunc);
  check(driver().cuCtxSetCurrent(kjit::cuda::primary_context(0)), "cuCtxSetCurrent");
  kjit_cache* cache = open_cache(dir);
  ASSERT_NE(cache, nullptr);
  const kjit_gemm_options o = autotuned();
  kjit_gemm* g = nullptr;
  ASSERT_EQ(kjit_gemm_create(cache, 0, &o, &g), KJIT_OK) << kjit_last_error();
  for (const Case& c : fleet_cases()) run_case(g, c);
  kjit_gemm_stats s{};
  s.struct_size = sizeof s;
  ASSERT_EQ(kjit_gemm_stats_get(g, &s), KJIT_OK);
  kjit_gemm_destroy(g);
  kjit_cache_close(cache);
  if (!::testing::Test::HasFailure())
    out << "ok heuristic_queries=" << s.heuristic_queries << " autotunes=" << s.autotunes
        << " disk_hits=" << s.disk_hits;
}

}  // namespace
