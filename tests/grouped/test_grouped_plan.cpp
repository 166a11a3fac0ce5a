// Grouped-GEMM plans and the offset check without a GPU: the plan key of a shape class, the
// candidate configurations, the persisted form (round trip, rejection of damaged or foreign
// values) and its round trip through a cache directory reopened as a later process would;
// the offset check kernel compiled through the compiler and its messages; and
// kjit_grouped_gemm_compile() (what `kjit warm --grouped` calls) storing the exact entry a
// handle compiles.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <set>
#include <string>

#include "api/handles.h"
#include "compile/compiler.h"
#include "grouped/check.h"
#include "grouped/grouped.h"
#include "grouped/plan.h"
#include "kjit/kjit.h"
#include "nvrtc/options.h"
#include "store/cache.h"
#include "support/test_support.h"
#include "util/sha256.h"

using namespace kjit;
using namespace kjit::grouped;
using kjit::test::TempDir;

namespace {

alignas(256) const unsigned char kBuf[1024] = {0};

Problem problem(int groups, int rows, int n, int k) {
  kjit_grouped_gemm_desc d;
  EXPECT_EQ(kjit_grouped_gemm_desc_init(&d), KJIT_OK);
  d.groups = groups;
  d.rows = rows;
  d.n = n;
  d.k = k;
  d.b_order = KJIT_GROUPED_B_NK;
  return check(d, kBuf, kBuf, reinterpret_cast<const int32_t*>(kBuf), nullptr, kBuf, nullptr);
}

DeviceInfo h200() {
  DeviceInfo d;
  d.cc = 90;
  d.sm_count = 132;
  d.name = "NVIDIA H200";
  d.driver_version = 13000;
  d.max_shared = 232448;
  return d;
}

Config heuristic(const Problem& p) {
  return choose(p, 90, true, Options());
}

}  // namespace

TEST(GroupedPlanKey, RowsEnterAsTheirBucket) {
  EXPECT_EQ(bucket_of(0, 8), 0);
  EXPECT_EQ(bucket_of(7, 8), 0);  // under one row per group
  EXPECT_EQ(bucket_of(8, 8), 1);
  EXPECT_EQ(bucket_of(16, 8), 2);
  EXPECT_EQ(bucket_of(31, 8), 2);
  EXPECT_EQ(bucket_of(63 * 8, 8), 6);
  EXPECT_EQ(bucket_of(64 * 8, 8), 7);  // the heuristic's decode/prefill threshold
  EXPECT_EQ(bucket_of(8192, 8), 11);
  EXPECT_EQ(bucket_of(100, 0), 0);
  const DeviceInfo dev = h200();
  // Rows within a bucket: one class; across the threshold: two.
  EXPECT_TRUE(make_key(problem(8, 8192, 4096, 1024), dev) ==
              make_key(problem(8, 9000, 4096, 1024), dev));
  EXPECT_FALSE(make_key(problem(8, 63 * 8, 4096, 1024), dev) ==
               make_key(problem(8, 64 * 8, 4096, 1024), dev));
}

TEST(GroupedPlanKey, EveryFieldSeparatesClasses) {
  const DeviceInfo dev = h200();
  const Problem base = problem(8, 8192, 4096, 1024);
  const PlanKey k0 = make_key(base, dev);
  std::set<size_t> hashes{k0.hash()};
  std::set<std::string> texts{k0.text()};
  std::vector<PlanKey> others;
  others.push_back(make_key(problem(16, 8192 * 2, 4096, 1024), dev));  // G (same bucket)
  others.push_back(make_key(problem(8, 8192, 4104, 1024), dev));       // N
  others.push_back(make_key(problem(8, 8192, 4096, 1032), dev));       // K
  Problem p = base;
  p.b_order = BOrder::KN;
  others.push_back(make_key(p, dev));
  p = base;
  p.bias = kBuf;
  others.push_back(make_key(p, dev));
  p = base;
  p.c = kBuf;
  others.push_back(make_key(p, dev));
  p = base;
  p.act = Act::Silu;
  others.push_back(make_key(p, dev));
  p = base;
  p.a = kBuf + 2;  // not 16-byte aligned: no TMA
  others.push_back(make_key(p, dev));
  DeviceInfo other = dev;
  other.sm_count = 114;
  others.push_back(make_key(base, other));
  other = dev;
  other.cc = 89;
  others.push_back(make_key(base, other));
  for (const PlanKey& k : others) {
    EXPECT_FALSE(k == k0) << k.text();
    hashes.insert(k.hash());
    texts.insert(k.text());
  }
  EXPECT_EQ(hashes.size(), others.size() + 1);
  EXPECT_EQ(texts.size(), others.size() + 1);
  EXPECT_EQ(k0.text(),
            "G=8 K=1024 N=4096 rows/G~2^10 bf16/bf16/bf16 b=nk epi=alpha tma cc=90 sms=132");
}

TEST(GroupedPlanKey, PersistedKeyDependsOnValidators) {
  const PlanKey k = make_key(problem(8, 8192, 4096, 1024), h200());
  DeviceInfo other = h200();
  other.driver_version = 13010;
  const std::string a = persist_key(k, validators(h200()));
  EXPECT_EQ(a.size(), 64u);
  EXPECT_EQ(a, persist_key(k, validators(h200())));
  EXPECT_NE(a, persist_key(k, validators(other)));
  EXPECT_NE(a, persist_key(make_key(problem(8, 8192, 4096, 2048), h200()), validators(h200())));
  EXPECT_NE(validators(h200()).find("device=NVIDIA H200"), std::string::npos);
}

TEST(GroupedPlanCandidates, ValidDistinctAndFitting) {
  const Problem p = problem(8, 8192, 4096, 1024);
  const Config h = heuristic(p);
  const std::vector<Config> c = candidates(h, h200());
  ASSERT_GE(c.size(), 4u);
  EXPECT_EQ(c[0].key(), h.key());
  std::set<std::string> keys;
  for (const Config& x : c) {
    EXPECT_NO_THROW(validate(x)) << x.key();
    EXPECT_LE(shared_bytes(x), size_t(232448)) << x.key();
    EXPECT_EQ(x.b_order, h.b_order);
    keys.insert(x.key());
  }
  EXPECT_EQ(keys.size(), c.size());
  // bf16 prefill: one-CTA configurations of both schedules and cooperative ones in 2x1
  // clusters (the heuristic's choice among them).
  const auto has = [&](bool pingpong, int cluster_m) {
    return std::any_of(c.begin(), c.end(), [&](const Config& x) {
      return x.pingpong == pingpong && x.cluster_m == cluster_m;
    });
  };
  EXPECT_TRUE(has(true, 1));
  EXPECT_TRUE(has(false, 1));
  EXPECT_TRUE(has(false, 2));
  EXPECT_FALSE(has(true, 2));
  // A device with less shared memory gets fewer; the portable path has nothing to tune.
  DeviceInfo small = h200();
  small.max_shared = 100 * 1024;
  for (const Config& x : candidates(h, small))
    if (x.key() != h.key()) {
      EXPECT_LE(shared_bytes(x), small.max_shared) << x.key();
    }
  EXPECT_LT(candidates(h, small).size(), c.size());
  EXPECT_TRUE(candidates(choose(p, 80, true, Options()), h200()).empty());
}

TEST(GroupedPlanPersist, RoundTripAndRejections) {
  const Problem p = problem(8, 8192, 4096, 1024);
  const PlanKey key = make_key(p, h200());
  const std::string vals = validators(h200());
  const std::vector<Config> c = candidates(heuristic(p), h200());
  PersistedPlan plan;
  plan.config = c.back();
  plan.tuned_us = 123.5;
  plan.heuristic_us = 140.25;
  plan.candidates = int(c.size());
  const std::string value = encode_plan(key, vals, plan);
  std::string why;
  const std::optional<PersistedPlan> back = decode_plan(value, key, vals, &why);
  ASSERT_TRUE(back) << why;
  EXPECT_EQ(apply(heuristic(p), back->config).key(), apply(heuristic(p), c.back()).key());
  EXPECT_EQ(back->tuned_us, 123.5);
  EXPECT_EQ(back->heuristic_us, 140.25);
  EXPECT_EQ(back->candidates, int(c.size()));
  // Another key, other validators, every truncation and a flipped bit are rejected.
  EXPECT_FALSE(decode_plan(value, make_key(problem(8, 8192, 4096, 2048), h200()), vals, &why));
  EXPECT_EQ(why, "other key");
  DeviceInfo other = h200();
  other.name = "NVIDIA H100";
  EXPECT_FALSE(decode_plan(value, key, validators(other), &why));
  EXPECT_EQ(why, "other validators");
  for (size_t n = 0; n < value.size(); ++n)
    EXPECT_FALSE(decode_plan(value.substr(0, n), key, vals, &why)) << n;
  for (size_t i = 0; i < value.size(); ++i) {
    std::string bad = value;
    bad[i] = char(bad[i] ^ 0x10);
    EXPECT_FALSE(decode_plan(bad, key, vals, &why)) << i;
  }
  // A configuration the kernels do not offer is refused even with a good checksum.
  PersistedPlan wrong = plan;
  wrong.config.tile_n = 192;
  EXPECT_FALSE(decode_plan(encode_plan(key, vals, wrong), key, vals, &why));
  EXPECT_NE(why.find("tiles"), std::string::npos) << why;
}

// The record's bytes are pinned (docs/formats.md, "Grouped GEMM plan record").
TEST(GroupedPlanPersist, BytesArePinned) {
  const Problem p = problem(8, 8192, 4096, 1024);
  const PlanKey key = make_key(p, h200());
  PersistedPlan plan;
  plan.config = candidates(heuristic(p), h200()).back();
  plan.tuned_us = 123.5;
  plan.heuristic_us = 140.25;
  plan.candidates = 7;
  const std::string value = encode_plan(key, "vals", plan);
  EXPECT_EQ(kjit::to_hex(kjit::sha256(value)),
            "d349e585b64c8f831e9e11293d214a6238b1708b900745224e81b329c37d2333");
}

TEST(GroupedPlanPersist, SurvivesReopeningTheCache) {
  TempDir dir;
  const Problem p = problem(32, 16384, 7168, 2048);
  const PlanKey key = make_key(p, h200());
  const std::string vals = validators(h200());
  const std::string pkey = persist_key(key, vals);
  PersistedPlan plan;
  plan.config = candidates(heuristic(p), h200())[2];
  plan.tuned_us = 77;
  {
    kjit_cache_options o = KJIT_CACHE_OPTIONS_INIT;
    o.directory = dir.path().c_str();
    kjit_cache* cache = nullptr;
    ASSERT_EQ(kjit_cache_open(&o, &cache), KJIT_OK) << kjit_last_error();
    EXPECT_FALSE(cache->cache->facts().get_value(kPlanNamespace, pkey));
    cache->cache->put_shared_value(kPlanNamespace, pkey, encode_plan(key, vals, plan));
    kjit_cache_close(cache);
  }
  kjit_cache_options o = KJIT_CACHE_OPTIONS_INIT;
  o.directory = dir.path().c_str();
  kjit_cache* cache = nullptr;
  ASSERT_EQ(kjit_cache_open(&o, &cache), KJIT_OK) << kjit_last_error();
  bool remote = true;
  const std::optional<std::string> value =
      cache->cache->get_shared_value(kPlanNamespace, pkey, &remote);
  ASSERT_TRUE(value);
  EXPECT_FALSE(remote);
  std::string why;
  const std::optional<PersistedPlan> back = decode_plan(*value, key, vals, &why);
  ASSERT_TRUE(back) << why;
  // The tunable fields come back; the rest is the problem's (apply()), the store form the
  // schedule's (choose_store(), as for every tuned plan).
  Config applied = apply(heuristic(p), back->config), expected = plan.config;
  choose_store(applied, p);
  choose_store(expected, p);
  EXPECT_EQ(applied.key(), expected.key());
  EXPECT_EQ(back->tuned_us, 77);
  kjit_cache_close(cache);
}

// ---- offset check ---------------------------------------------------------------------------

TEST(GroupedOffsetCheck, Messages) {
  CheckRecord r;
  EXPECT_EQ(describe(r), "");
  r.recorded = 1;
  r.bad_calls = 1;
  r.call = 3;
  r.group = 2;
  r.value = 40;
  r.prev = 50;
  r.rows = 100;
  EXPECT_EQ(describe(r),
            "bad offsets in call 3 of this handle: offs[2] = 40 is less than offs[1] = 50 "
            "(group 2 would end before it starts); 1 call had bad offsets since the last read");
  r.value = 140;
  r.bad_calls = 4;
  EXPECT_EQ(describe(r),
            "bad offsets in call 3 of this handle: offs[2] = 140 is past rows = 100; 4 calls "
            "had bad offsets since the last read");
  r.group = 0;
  r.value = -5;
  r.prev = 0;
  EXPECT_NE(describe(r).find("offs[0] = -5 is negative"), std::string::npos) << describe(r);
  CheckRecord partial;
  partial.bad_calls = 2;
  EXPECT_NE(describe(partial).find("bad offsets in 2 call(s)"), std::string::npos);
}

TEST(GroupedOffsetCheck, KernelCompilesForEveryTarget) {
  TempDir dir;
  kjit_cache_options o = KJIT_CACHE_OPTIONS_INIT;
  o.directory = dir.path().c_str();
  kjit_cache* cache = nullptr;
  ASSERT_EQ(kjit_cache_open(&o, &cache), KJIT_OK) << kjit_last_error();
  Compiler compiler(cache->cache.get(), 1);
  for (const char* target : {"sm_80", "sm_90"}) {
    CompileOptions co;
    co.target = target;
    co.outputs = KJIT_OUTPUT_PTX | KJIT_OUTPUT_CUBIN;
    const Outcome out = compiler.compile(check_source(), co);
    ASSERT_EQ(out.status, KJIT_OK)
        << target << ": " << out.message << (out.entry ? out.entry->log : "");
    EXPECT_NE(out.entry->ptx.str().find(kCheckKernelName), std::string::npos);
  }
  kjit_cache_close(cache);
}

TEST(GroupedOffsetCheck, StatusNeedsAHandle) {
  EXPECT_EQ(kjit_grouped_gemm_offsets_status(nullptr), KJIT_ERROR_INVALID_HANDLE);
}

TEST(GroupedOptions, AutotuneNeedsAnOpenChoice) {
  kjit_grouped_gemm_options o = KJIT_GROUPED_GEMM_OPTIONS_INIT;
  EXPECT_EQ(o.check_offsets, 0);
  EXPECT_EQ(o.autotune, 0);
  o.autotune = 1;
  EXPECT_NO_THROW(options_from(&o));
  for (int field = 0; field < 5; ++field) {
    kjit_grouped_gemm_options f = o;
    if (field == 0) f.tile_n = 128;
    if (field == 1) f.stages = 4;
    if (field == 2) f.schedule = KJIT_GROUPED_SCHEDULE_PINGPONG;
    if (field == 3) f.portable_only = 1;
    if (field == 4) f.cluster_m = 1;
    try {
      options_from(&f);
      ADD_FAILURE() << "autotune with field " << field << " forced was accepted";
    } catch (const Error& e) {
      EXPECT_EQ(e.status(), KJIT_ERROR_INVALID_ARGUMENT);
      EXPECT_NE(e.message().find("autotune"), std::string::npos);
    }
  }
  // An 0.2 caller's struct (without the new fields) reads them as 0.
  kjit_grouped_gemm_options old = KJIT_GROUPED_GEMM_OPTIONS_INIT;
  old.struct_size = offsetof(kjit_grouped_gemm_options, check_offsets);
  kjit_compiler* comp = nullptr;
  ASSERT_EQ(kjit_compiler_create(nullptr, 1, &comp), KJIT_OK);
  kjit_grouped_gemm* gg = nullptr;
  EXPECT_EQ(kjit_grouped_gemm_create(comp, -1, &old, &gg), KJIT_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(kjit_last_error()).find("device"), std::string::npos);
  kjit_compiler_destroy(comp);
}

// cluster_m: 0, 1 or 2; 2 is the cooperative schedule's (pingpong refused, AUTO becomes
// cooperative 128-row tiles; fp8 keeps 1); it enters the configuration's key.
TEST(GroupedOptions, ClusterIsCheckedAndTakesTheCooperativeSchedule) {
  kjit_grouped_gemm_options o = KJIT_GROUPED_GEMM_OPTIONS_INIT;
  EXPECT_EQ(o.cluster_m, 0u);
  o.cluster_m = 3;
  EXPECT_THROW(options_from(&o), Error);
  o.cluster_m = 2;
  o.schedule = KJIT_GROUPED_SCHEDULE_PINGPONG;
  try {
    options_from(&o);
    ADD_FAILURE() << "a 2x1 cluster with pingpong was accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.status(), KJIT_ERROR_INVALID_ARGUMENT);
    EXPECT_NE(e.message().find("cluster"), std::string::npos) << e.message();
  }
  o.schedule = KJIT_GROUPED_SCHEDULE_AUTO;
  const Options opts = options_from(&o);
  EXPECT_FALSE(opts.automatic());
  // Prefill (pingpong without the option) and decode (the 64-row tile without it).
  const Config c = choose(problem(8, 8192, 4096, 4096), 90, true, opts);
  EXPECT_EQ(c.key(), "grouped-v1 sm_90a tma 128x256x64 s4 st=tma c2x1 b=nk epi=alpha");
  validate(c);
  const Problem q = problem(8, 64, 4096, 4096);
  EXPECT_EQ(choose(q, 90, true, opts).tile_m, 128);
  EXPECT_EQ(choose(q, 90, true, opts).cluster_m, 2);
  EXPECT_FALSE(choose(q, 90, true, opts).b_evict_first);
}

// ---- compile without a GPU (kjit warm --grouped) --------------------------------------------

TEST(GroupedCompileForTarget, StoresTheEntryAHandleLoads) {
  TempDir dir;
  kjit_cache_options o = KJIT_CACHE_OPTIONS_INIT;
  o.directory = dir.path().c_str();
  kjit_cache* cache = nullptr;
  ASSERT_EQ(kjit_cache_open(&o, &cache), KJIT_OK) << kjit_last_error();
  kjit_compiler* comp = nullptr;
  ASSERT_EQ(kjit_compiler_create(cache, 1, &comp), KJIT_OK);
  kjit_grouped_gemm_desc d = KJIT_GROUPED_GEMM_DESC_INIT;
  d.groups = 128;
  d.rows = 512;
  d.n = 1536;
  d.k = 2048;
  d.b_order = KJIT_GROUPED_B_NK;
  kjit_binary* b = nullptr;
  ASSERT_EQ(kjit_grouped_gemm_compile(comp, "sm_90a", &d, nullptr, 0, &b), KJIT_OK)
      << kjit_last_error();
  EXPECT_EQ(kjit_binary_tier(b), KJIT_TIER_COMPILED);
  EXPECT_STREQ(kjit_binary_target(b), "sm_90a");
  // The key is the one the handle's compile of its configuration computes.
  const Problem p = check(d, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, false);
  const Config c = config_for_target(p, "sm_90a", Options());
  EXPECT_EQ(c.path, Path::Tma);
  EXPECT_EQ(kjit_binary_key(b), comp->compiler->key(render(c), compile_options(c)));
  kjit_binary_destroy(b);
  b = nullptr;
  ASSERT_EQ(kjit_grouped_gemm_compile(comp, "sm_90a", &d, nullptr, 0, &b), KJIT_OK);
  EXPECT_NE(kjit_binary_tier(b), KJIT_TIER_COMPILED);
  kjit_binary_destroy(b);
  // Bad arguments.
  b = nullptr;
  EXPECT_EQ(kjit_grouped_gemm_compile(comp, "sm_90", &d, nullptr, 0, &b),
            KJIT_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(kjit_last_error()).find("sm_90a"), std::string::npos);
  EXPECT_EQ(kjit_grouped_gemm_compile(comp, "compute_90", &d, nullptr, 0, &b),
            KJIT_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(kjit_grouped_gemm_compile(comp, nullptr, &d, nullptr, 0, &b),
            KJIT_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(kjit_grouped_gemm_compile(nullptr, "sm_90a", &d, nullptr, 0, &b),
            KJIT_ERROR_INVALID_HANDLE);
  EXPECT_EQ(kjit_grouped_gemm_compile(comp, "sm_90a", &d, nullptr, 0, nullptr),
            KJIT_ERROR_INVALID_ARGUMENT);
  d.groups = 0;
  EXPECT_EQ(kjit_grouped_gemm_compile(comp, "sm_90a", &d, nullptr, 0, &b),
            KJIT_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(b, nullptr);
  kjit_compiler_destroy(comp);
  kjit_cache_close(cache);
}
