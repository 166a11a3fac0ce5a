// Grouped GEMM's plan and check machinery on a GPU: the offset check mode reports bad
// offsets (and the GEMM stays inside its buffers), autotuning keeps the fastest candidate and
// persists it so that a later handle over a reopened cache uses it without tuning (in place,
// C == D, included), and a configuration compiled for the device's target without a handle
// (kjit warm --grouped) is a cache hit for the handle. Skips cleanly without a GPU.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <mutex>
#include <string>
#include <vector>

#include "cuda/context.h"
#include "cuda/driver.h"
#include "kjit/kjit.h"
#include "support/bf16.h"
#include "support/device_buffer.h"
#include "support/test_support.h"

namespace {

using kjit::cuda::check;
using kjit::cuda::driver;
using kjit::test::DeviceBuffer;
using kjit::test::TempDir;

uint16_t f2bf(float f) {
  return kjit::test::f32_to_bf16(f);
}
float bf2f(uint16_t b) {
  return kjit::test::bf16_to_f32(b);
}

// The library's messages, from any thread (autotuning compiles on several).
class Messages {
 public:
  Messages() {
    kjit_set_log_callback(
        [](int, const char* m, void* user) {
          auto* self = static_cast<Messages*>(user);
          std::lock_guard<std::mutex> lock(self->mu_);
          self->all_.emplace_back(m);
        },
        this);
  }
  ~Messages() { kjit_set_log_callback(nullptr, nullptr); }
  // Messages holding both strings.
  size_t count(const std::string& a, const std::string& b) {
    std::lock_guard<std::mutex> lock(mu_);
    size_t n = 0;
    for (const std::string& m : all_)
      n += m.find(a) != std::string::npos && m.find(b) != std::string::npos;
    return n;
  }

 private:
  std::mutex mu_;
  std::vector<std::string> all_;
};

// The one summary line of an autotuning of shapes with G groups.
size_t tunings(Messages& log, int groups) {
  return log.count("grouped GEMM autotune G=" + std::to_string(groups) + " ", "the heuristic's");
}

bool hopper() {
  return kjit::cuda::compute_capability(0) == 90;
}

// Ones in A and B: every element of D in a group is K (+ C when beta is 1). Offsets even.
struct Problem {
  int groups, rows, n, k;
  std::vector<int32_t> offs;
  DeviceBuffer a, b, d, doffs;
  Problem(int g, int r, int n_, int k_)
      : groups(g),
        rows(r),
        n(n_),
        k(k_),
        a(size_t(r) * k_ * 2),
        b(size_t(g) * n_ * k_ * 2),
        d(size_t(r) * n_ * 2),
        doffs(size_t(g) * 4) {
    for (int i = 1; i <= g; ++i) offs.push_back(int32_t((long long)r * i / g));
    a.put(std::vector<uint16_t>(size_t(r) * k, f2bf(1.0f)));
    b.put(std::vector<uint16_t>(size_t(g) * n * k, f2bf(1.0f)));
    doffs.put(offs);
  }
  kjit_grouped_gemm_desc desc() const {
    kjit_grouped_gemm_desc x;
    kjit_grouped_gemm_desc_init(&x);
    x.groups = groups;
    x.rows = rows;
    x.n = n;
    x.k = k;
    x.b_order = KJIT_GROUPED_B_NK;
    return x;
  }
  const int32_t* offsets() const { return reinterpret_cast<const int32_t*>(doffs.ptr()); }
  kjit_status run(kjit_grouped_gemm* gg, const void* c = nullptr, double beta = 0) const {
    kjit_grouped_gemm_desc x = desc();
    x.beta = beta;
    return kjit_grouped_gemm_run(gg, &x, a.ptr(), b.ptr(), offsets(), c, d.ptr(), nullptr, nullptr);
  }
  std::string key(kjit_grouped_gemm* gg, const void* c = nullptr, double beta = 0) const {
    kjit_grouped_gemm_desc x = desc();
    x.beta = beta;
    char buf[256] = {0};
    EXPECT_EQ(kjit_grouped_gemm_plan_key(gg, &x, a.ptr(), b.ptr(), c, d.ptr(), nullptr, buf,
                                         sizeof buf, nullptr),
              KJIT_OK)
        << kjit_last_error();
    return buf;
  }
  // Elements of D that are not `want`.
  size_t wrong(float want) const {
    const std::vector<uint16_t> got = d.get<uint16_t>(size_t(rows) * n);
    size_t bad = 0;
    for (uint16_t v : got) bad += bf2f(v) != want;
    return bad;
  }
};

class GroupedApiGpu : public ::testing::Test {
 protected:
  void SetUp() override {
    const std::string why = kjit::test::gpu_unavailable_reason();
    if (!why.empty()) GTEST_SKIP() << why;
    check(driver().cuCtxSetCurrent(kjit::cuda::primary_context(0)), "cuCtxSetCurrent");
    open();
  }
  void TearDown() override { close(); }
  void open() {
    kjit_cache_options o = KJIT_CACHE_OPTIONS_INIT;
    o.directory = dir_.path().c_str();
    ASSERT_EQ(kjit_cache_open(&o, &cache_), KJIT_OK) << kjit_last_error();
    ASSERT_EQ(kjit_compiler_create(cache_, 2, &compiler_), KJIT_OK) << kjit_last_error();
  }
  void close() {
    kjit_compiler_destroy(compiler_);
    kjit_cache_close(cache_);
    compiler_ = nullptr;
    cache_ = nullptr;
  }
  kjit_grouped_gemm* create(int check_offsets, int autotune) {
    kjit_grouped_gemm_options o = KJIT_GROUPED_GEMM_OPTIONS_INIT;
    o.check_offsets = check_offsets;
    o.autotune = autotune;
    kjit_grouped_gemm* gg = nullptr;
    EXPECT_EQ(kjit_grouped_gemm_create(compiler_, 0, &o, &gg), KJIT_OK) << kjit_last_error();
    return gg;
  }
  kjit_cache_stats stats() {
    kjit_cache_stats s;
    kjit_cache_stats_init(&s);
    EXPECT_EQ(kjit_cache_stats_get(cache_, &s), KJIT_OK);
    return s;
  }

  TempDir dir_;
  kjit_cache* cache_ = nullptr;
  kjit_compiler* compiler_ = nullptr;
};

TEST_F(GroupedApiGpu, OffsetCheckReportsBadOffsetsAfterTheCall) {
  Problem p(3, 64, 64, 64);
  kjit_grouped_gemm* gg = create(1, 0);
  ASSERT_TRUE(gg);
  ASSERT_EQ(p.run(gg), KJIT_OK) << kjit_last_error();  // call 1: good
  check(driver().cuCtxSynchronize(), "sync");
  EXPECT_EQ(kjit_grouped_gemm_offsets_status(gg), KJIT_OK) << kjit_last_error();
  EXPECT_EQ(p.wrong(64.0f), 0u);

  p.doffs.put(std::vector<int32_t>{40, 10, 64});  // call 2: group 1 ends before it starts
  ASSERT_EQ(p.run(gg), KJIT_OK);
  p.doffs.put(std::vector<int32_t>{10, 20, 1 << 20});  // call 3: past rows
  ASSERT_EQ(p.run(gg), KJIT_OK);
  check(driver().cuCtxSynchronize(), "sync");
  EXPECT_EQ(kjit_grouped_gemm_offsets_status(gg), KJIT_ERROR_INVALID_ARGUMENT);
  const std::string msg = kjit_last_error();
  EXPECT_NE(msg.find("call 2 of this handle: offs[1] = 10 is less than offs[0] = 40"),
            std::string::npos)
      << msg;
  EXPECT_NE(msg.find("2 calls had bad offsets"), std::string::npos) << msg;
  // Read and cleared: the next read is clean; then a new bad call is recorded afresh.
  EXPECT_EQ(kjit_grouped_gemm_offsets_status(gg), KJIT_OK) << kjit_last_error();
  ASSERT_EQ(p.run(gg), KJIT_OK);  // call 4, still past rows
  check(driver().cuCtxSynchronize(), "sync");
  EXPECT_EQ(kjit_grouped_gemm_offsets_status(gg), KJIT_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(kjit_last_error())
                .find("call 4 of this handle: offs[2] = 1048576 is past rows = 64"),
            std::string::npos)
      << kjit_last_error();
  // The GEMM stayed inside its buffers (clamped) and the context is healthy.
  EXPECT_EQ(driver().cuCtxSynchronize(), CUDA_SUCCESS);
  kjit_grouped_gemm_destroy(gg);

  kjit_grouped_gemm* plain = create(0, 0);
  EXPECT_EQ(kjit_grouped_gemm_offsets_status(plain), KJIT_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(kjit_last_error()).find("without check_offsets"), std::string::npos);
  kjit_grouped_gemm_destroy(plain);
}

TEST_F(GroupedApiGpu, AutotunePersistsForLaterHandlesAndProcesses) {
  if (!hopper()) GTEST_SKIP() << "only the sm_90a kernel has candidates to tune";
  Problem p(8, 4096, 512, 512);
  Messages log;
  kjit_grouped_gemm* tuner = create(0, 1);
  ASSERT_TRUE(tuner);
  const std::string heuristic = p.key(tuner);
  ASSERT_EQ(p.run(tuner), KJIT_OK) << kjit_last_error();
  check(driver().cuCtxSynchronize(), "sync");
  EXPECT_EQ(p.wrong(512.0f), 0u);
  EXPECT_EQ(tunings(log, 8), 1u);
  EXPECT_GE(log.count("grouped GEMM autotune G=8 ", " us"), 5u);  // candidates, then the choice
  const std::string tuned = p.key(tuner);
  ASSERT_EQ(p.run(tuner), KJIT_OK);  // no second tuning
  EXPECT_EQ(tunings(log, 8), 1u);
  kjit_grouped_gemm_destroy(tuner);
  std::printf("heuristic %s, tuned %s\n", heuristic.c_str(), tuned.c_str());

  // A later process: a new cache handle and compiler on the same directory. Its handle uses
  // the persisted plan (even without autotune) and does not tune again.
  close();
  open();
  kjit_grouped_gemm* later = create(0, 0);
  EXPECT_EQ(p.key(later), tuned);
  kjit_grouped_gemm* later_tuner = create(0, 1);
  ASSERT_EQ(p.run(later_tuner), KJIT_OK);
  check(driver().cuCtxSynchronize(), "sync");
  EXPECT_EQ(tunings(log, 8), 1u);
  EXPECT_EQ(p.wrong(512.0f), 0u);
  kjit_grouped_gemm_destroy(later);
  kjit_grouped_gemm_destroy(later_tuner);

  // In place (C is D, beta 1): tuning writes a scratch output, so D = A B + D exactly once.
  Problem q(4, 1024, 256, 64);
  q.d.put(std::vector<uint16_t>(size_t(q.rows) * q.n, f2bf(1.0f)));
  kjit_grouped_gemm* in_place = create(0, 1);
  ASSERT_EQ(q.run(in_place, q.d.ptr(), 1.0), KJIT_OK) << kjit_last_error();
  check(driver().cuCtxSynchronize(), "sync");
  EXPECT_EQ(tunings(log, 4), 1u);
  EXPECT_EQ(q.wrong(65.0f), 0u);
  kjit_grouped_gemm_destroy(in_place);
}

TEST_F(GroupedApiGpu, CompiledForTheTargetWithoutAHandleIsAHit) {
  const int cc = kjit::cuda::compute_capability(0);
  const std::string target = cc == 90 ? "sm_90a" : "sm_" + std::to_string(cc);
  Problem p(16, 2048, 384, 256);
  kjit_grouped_gemm_desc d = p.desc();
  kjit_binary* b = nullptr;
  ASSERT_EQ(kjit_grouped_gemm_compile(compiler_, target.c_str(), &d, nullptr, 0, &b), KJIT_OK)
      << kjit_last_error();
  EXPECT_EQ(kjit_binary_tier(b), KJIT_TIER_COMPILED);
  kjit_binary_destroy(b);
  // A later process (the cache reopened): the handle's first run compiles nothing.
  close();
  open();
  kjit_grouped_gemm* gg = create(0, 0);
  ASSERT_EQ(p.run(gg), KJIT_OK) << kjit_last_error();
  check(driver().cuCtxSynchronize(), "sync");
  EXPECT_EQ(p.wrong(256.0f), 0u);
  const kjit_cache_stats s = stats();
  EXPECT_EQ(s.compiles, 0u);
  EXPECT_EQ(s.disk_hits, 1u);
  kjit_grouped_gemm_destroy(gg);
}

}  // namespace
